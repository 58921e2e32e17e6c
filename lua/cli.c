/* cli.c — the runnel command: run a pipeline script, the REPL, inspect.
 *
 *     runnel [run] FILE.lua [ARGS…]          run a script (arg as lua5.4 gives it)
 *     runnel [repl] [STATE_DIR] [FILE.lua]   the REPL (on a state, after FILE)
 *     runnel inspect STATE_DIR               a state's relations, schemas and counts
 *     runnel verify STATE_DIR                check a state against itself (verify.h)
 *     runnel query STATE REL [KEY…] [--limit N] [--format grid|ndjson|csv]
 *     runnel drop STATE NAME                 (both: lua/runnel/state.lua)
 *     runnel snapshot STATE DEST             a consistent compacted copy (rn_state_copy)
 *     runnel help | version
 * HELP below is the whole usage; the man page is made from it.
 *
 * The Lua parts (runnel.lua, repl.lua) are compiled in (scripts/embed.lua),
 * so the binary runs from anywhere. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "lbind.h"
#include "outbox.h"
#include "pipeline.h"
#include "verify.h"

/* The state the SIGINT handler interrupts: the CLI's one global. */
static lua_State *running_state;

static void interrupt_hook(lua_State *L, lua_Debug *ar)
{
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

/* runnel run's SIGINT and SIGTERM, once each (SA_RESETHAND: the second
 * ends the process). A run going (p:run, --input) stops between two
 * changes with what it applied committed (rn_interrupt_runs), and the
 * pipeline is closed as at the end, its carried groups written; otherwise,
 * as lua.c, the handler sets a hook and the hook raises in the script. No
 * SA_RESTART: a run blocked reading stdin stops at once. */
static volatile sig_atomic_t run_signal; /* the signal that interrupted runnel run, or 0 */

static void on_run_signal(int sig)
{
  run_signal = sig;
  if (!rn_interrupt_runs() && running_state)
    lua_sethook(running_state, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

static void catch_run_signals(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_run_signal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

/* runnel run's exit status after a failure: 128 + the signal that
 * interrupted it (130 for Ctrl-C, 143 for SIGTERM), else 1. */
static int failed_status(void)
{
  return run_signal ? 128 + run_signal : 1;
}

/* ---- runnel.readline: line editing for the REPL ---- */

/* ---- tab completion: candidates come from repl.lua's complete() ---- */

static lua_State *completion_state;   /* the REPL's state (the CLI has one) */
static char **candidates;
static int ncandidates, next_candidate;

static char *candidate(const char *text, int state)
{
  (void)text;
  if (state == 0) next_candidate = 0;
  return next_candidate < ncandidates ? strdup(candidates[next_candidate++]) : NULL;
}

static char **complete(const char *text, int start, int end)
{
  (void)end;
  lua_State *L = completion_state;
  for (int i = 0; i < ncandidates; i++) free(candidates[i]);
  free(candidates);
  candidates = NULL;
  ncandidates = 0;
  rl_attempted_completion_over = 1; /* no file names */
  rl_completion_append_character = 0; /* "players" then ":count", not "players :count" */
  int top = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "runnel.repl");
  if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
    lua_getfield(L, -1, "complete");
    lua_pushstring(L, rl_line_buffer);
    lua_pushinteger(L, start);
    if (lua_pcall(L, 2, 1, 0) == LUA_OK && lua_istable(L, -1)) {
      int n = (int)lua_rawlen(L, -1);
      candidates = calloc((size_t)(n ? n : 1), sizeof *candidates);
      for (int i = 0; candidates && i < n; i++) {
        lua_rawgeti(L, -1, i + 1);
        candidates[ncandidates++] = strdup(lua_tostring(L, -1) ? lua_tostring(L, -1) : "");
        lua_pop(L, 1);
      }
    }
  }
  lua_settop(L, top);
  return rl_completion_matches(text, candidate);
}

/* ---- signals in the REPL: Ctrl-C never ends it ----
 * While a chunk runs (rl.call), SIGINT raises "interrupted!" inside Lua.
 * At the prompt, SIGINT abandons the line (readline returns false) and the
 * REPL asks again. SIGTERM and SIGHUP end the REPL the same way as Ctrl-D,
 * so its temporary state is removed on those paths too. */
static volatile sig_atomic_t got_sigint, got_terminate;

static void on_repl_signal(int sig)
{
  if (sig == SIGINT) got_sigint = 1;
  else got_terminate = 1;
  if (running_state && !rn_interrupt_runs()) /* a p:run going stops, its lines committed */
    lua_sethook(running_state, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

/* rl.catch_signals(): from now on SIGINT, SIGTERM and SIGHUP go through
 * on_repl_signal (no SA_RESTART: a blocked read or select returns EINTR). */
static int l_catch_signals(lua_State *L)
{
  (void)L;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_repl_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  return 0;
}

/* rl.terminated() -> true once SIGTERM or SIGHUP arrived */
static int l_terminated(lua_State *L)
{
  lua_pushboolean(L, got_terminate);
  return 1;
}

/* A line from a pipe or file: nil at the end, false when interrupted.
 * getline, not fgets: a line may hold NUL bytes (fgets's strlen would cut
 * it there and glue the next line on). Its buffer is kept for the next
 * line, so that lua_pushlstring raising (out of memory) leaks nothing. */
static int read_plain_line(lua_State *L)
{
  static char *line;
  static size_t cap;
  errno = 0;
  ssize_t n = getline(&line, &cap, stdin);
  if (n < 0) {
    bool interrupted = ferror(stdin) && errno == EINTR && got_sigint && !got_terminate;
    clearerr(stdin);
    if (!interrupted) return 0;
    got_sigint = 0;
    lua_pushboolean(L, 0);
    return 1;
  }
  if (n && line[n - 1] == '\n') n--;
  lua_pushlstring(L, line, (size_t)n);
  return 1;
}

static char *line_read;
static bool line_done;

static void on_line(char *line)
{
  line_read = line;
  line_done = true;
  rl_callback_handler_remove(); /* before the next prompt is drawn */
}

/* readline's callback interface, so a signal at the prompt returns from
 * select instead of being lost inside readline(). */
static int l_readline(lua_State *L)
{
  const char *prompt = luaL_optstring(L, 1, "> ");
  if (!isatty(STDIN_FILENO)) return read_plain_line(L);
  completion_state = L;
  rl_attempted_completion_function = complete;
  rl_completer_word_break_characters = (char *)" \t\n\"'`@$><=;|&{(,.:[+-*/%^~";
  rl_catch_signals = 0;
  got_sigint = 0;
  line_read = NULL;
  line_done = false;
  rl_callback_handler_install(prompt, on_line);
  while (!line_done && !got_sigint && !got_terminate) {
    fd_set in;
    FD_ZERO(&in);
    FD_SET(fileno(rl_instream ? rl_instream : stdin), &in);
    int ready = select(fileno(rl_instream ? rl_instream : stdin) + 1, &in, NULL, NULL, NULL);
    if (ready < 0 && errno != EINTR) break;
    if (ready > 0) rl_callback_read_char();
  }
  if (!line_done) { /* a signal, or select failed: drop the line */
    rl_point = rl_end; /* "^C" after what was typed, as a shell shows it */
    rl_redisplay();
    fputs(got_sigint && !got_terminate ? "^C\n" : "\n", rl_outstream ? rl_outstream : stdout);
    fflush(rl_outstream ? rl_outstream : stdout);
    rl_replace_line("", 0);
    rl_callback_sigcleanup();
    rl_callback_handler_remove();
    bool interrupted = got_sigint && !got_terminate;
    got_sigint = 0;
    if (!interrupted) return 0;
    lua_pushboolean(L, 0);
    return 1;
  }
  if (!line_read) return 0;
  lua_pushstring(L, line_read);
  free(line_read);
  return 1;
}

enum { HISTORY_KEPT = 1000 };

/* add_history(line [, path]): with a path the line is appended to the file
 * at once, so a REPL that is killed or crashes keeps what was typed. */
static int l_add_history(lua_State *L)
{
  add_history(luaL_checkstring(L, 1));
  const char *path = luaL_optstring(L, 2, NULL);
  if (path) {
    FILE *f = fopen(path, "a"); /* append_history does not create the file */
    if (f) fclose(f);
    append_history(1, path);
  }
  return 0;
}

/* history_file(path, false) loads it; history_file(path, true) trims it to
 * the newest HISTORY_KEPT lines (the lines themselves are already there). */
static int l_history_file(lua_State *L)
{
  const char *path = luaL_checkstring(L, 1);
  if (lua_toboolean(L, 2)) history_truncate_file(path, HISTORY_KEPT);
  else read_history(path);
  return 0;
}

static int l_isatty(lua_State *L)
{
  lua_pushboolean(L, isatty(STDIN_FILENO));
  return 1;
}

/* rl.call(handler, f, …) -> as xpcall(f, handler, …), with SIGINT raising
 * "interrupted!" inside f (rl.catch_signals has set the handler). The hook
 * is cleared before returning, so a signal as f ends never fires later. */
static int l_protected_call(lua_State *L)
{
  luaL_checktype(L, 1, LUA_TFUNCTION);
  int nargs = lua_gettop(L) - 2;
  got_sigint = 0;
  running_state = L;
  int st = lua_pcall(L, nargs, LUA_MULTRET, 1);
  running_state = NULL;
  lua_sethook(L, NULL, 0, 0);
  rn_interrupt_withdraw(); /* a Ctrl-C no run took does not stop the next line's */
  lua_pushboolean(L, st == LUA_OK);
  lua_replace(L, 1); /* the handler's slot: status first */
  return lua_gettop(L);
}

static const luaL_Reg readline_funcs[] = {
  { "readline", l_readline }, { "add_history", l_add_history },
  { "history_file", l_history_file }, { "isatty", l_isatty },
  { "call", l_protected_call }, { "catch_signals", l_catch_signals },
  { "terminated", l_terminated }, { NULL, NULL }
};

static int open_readline(lua_State *L)
{
  luaL_newlib(L, readline_funcs);
  return 1;
}

static void preload(lua_State *L)
{
  rn_lua_preload(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, open_readline);
  lua_setfield(L, -2, "runnel.readline");
  lua_pop(L, 1);
}

/* The text of the error object at 1, left on the top: a string (or a
 * number), else what its __tostring gives, as lua5.4 prints it (error
 * objects of libraries say what went wrong that way), else its type. The
 * __tostring runs protected: an error in a message handler would replace
 * the script's error with "error in error handling". */
static const char *error_text(lua_State *L)
{
  const char *msg = lua_tostring(L, 1);
  if (msg) return msg;
  if (luaL_getmetafield(L, 1, "__tostring") != LUA_TNIL) {
    lua_pushvalue(L, 1);
    if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING) return lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  return lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
}

static int traceback_handler(lua_State *L)
{
  luaL_traceback(L, L, error_text(L), 1);
  return 1;
}

static int message_handler(lua_State *L)
{
  error_text(L);
  return 1;
}

/* ---- runnel run: the script, then --input through what it returns ---- */

typedef struct run_opts {
  bool traceback;
  const char *input, *on_error, *rejects;
  long long batch, max_rejects;     /* 0: not given */
  unsigned given;                   /* the valued options given, a bit each (take_option) */
} run_opts;

/* After the script: --input runs an NDJSON file through the pipeline the
 * script returned, as p:run(runnel.ndjson_source(input), opts). With
 * --on-error skip and no --rejects, each reason goes to stderr. */
static int run_input(lua_State *L, const run_opts *o)
{
  const lpipe *lp = luaL_testudata(L, -1, "runnel.Pipeline");
  if (!lp) {
    fprintf(stderr, "runnel: --input: the script must return its pipeline (return p)\n");
    return 1;
  }
  /* p:run would say "runnel: the pipeline is closed" (printed as "runnel: runnel: …") or "run: not inside a
   * group or a callback", which reads as if no group were open: name what the script did instead */
  if (!lp->p) {
    fprintf(stderr, "runnel: --input: the script returned its pipeline closed (return it open: runnel closes it "
            "after the input)\n");
    return 1;
  }
  if (lp->p->state != RN_IDLE) { /* the open group is rolled back as the pipeline closes */
    fprintf(stderr, "runnel: --input: the script returned its pipeline inside a group (p:begin() without "
            "p:commit() or p:rollback())\n");
    return 1;
  }
  lua_getfield(L, -1, "run");
  lua_insert(L, -2);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "runnel");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) goto fail;
  lua_getfield(L, -1, strncmp(o->input, "nats://", 7) == 0 ? "jetstream_source" : "ndjson_source");
  lua_remove(L, -2);
  lua_pushstring(L, o->input);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) goto fail; /* a bad nats:// address raises (unprotected: a panic) */
  lua_createtable(L, 0, 4);
  if (o->batch) { lua_pushinteger(L, o->batch); lua_setfield(L, -2, "batch"); }
  if (o->on_error) { lua_pushstring(L, o->on_error); lua_setfield(L, -2, "on_error"); }
  if (o->max_rejects) { lua_pushinteger(L, o->max_rejects); lua_setfield(L, -2, "max_rejects"); }
  bool to_stdout = o->rejects && strcmp(o->rejects, "-") == 0; /* as --input - is stdin: not a file named - */
  if (o->rejects && !to_stdout) lua_pushstring(L, o->rejects);
  else if (to_stdout || (o->on_error && strcmp(o->on_error, "skip") == 0)) {
    lua_getglobal(L, "io");
    lua_getfield(L, -1, to_stdout ? "stdout" : "stderr");
    lua_remove(L, -2);
  } else lua_pushnil(L);
  lua_setfield(L, -2, "rejects");
  if (lua_pcall(L, 3, 1, 0) != LUA_OK) goto fail;
  if (isatty(STDERR_FILENO)) return 0; /* the progress line became the summary (core/ndjson.c) */
  lua_getfield(L, -1, "lines");
  lua_getfield(L, -2, "applied");
  lua_getfield(L, -3, "rejected");
  lua_getfield(L, -4, "groups");
  long long groups = (long long)lua_tointeger(L, -1);
  fprintf(stderr, "runnel: %s: %lld lines, %lld applied, %lld rejected, %lld group%s\n",
          strcmp(o->input, "-") == 0 ? "stdin" : o->input,
          (long long)lua_tointeger(L, -4), (long long)lua_tointeger(L, -3), (long long)lua_tointeger(L, -2),
          groups, groups == 1 ? "" : "s");
  return 0;
fail:
  fprintf(stderr, "runnel: %s\n", lua_tostring(L, -1));
  return failed_status();
}

/* A positive count for an option, or -1. */
static long long count_arg(const char *text)
{
  char *end;
  errno = 0;
  long long n = strtoll(text, &end, 10);
  return errno || end == text || *end || n < 1 ? -1 : n;
}

/* One of runnel run's own options at argv[*i] (its value, if it takes
 * one, is consumed). Returns 1 if it was one, 0 if not, -1 after printing
 * a usage error. */
static int take_option(int argc, char **argv, int *i, run_opts *o)
{
  const char *name = argv[*i];
  if (strcmp(name, "--traceback") == 0) { o->traceback = true; return 1; }
  static const char *const valued[] = { "--input", "--batch", "--on-error", "--rejects", "--max-rejects", NULL };
  static const char *const wants[] = { "a path (or - for stdin)", "a number of lines", "stop or skip", "a path",
                                       "a number of lines" };
  int k = 0;
  while (valued[k] && strcmp(name, valued[k]) != 0) k++;
  if (!valued[k]) return 0;
  if (*i + 1 >= argc || (argv[*i + 1][0] == '-' && argv[*i + 1][1] == '-')) {
    fprintf(stderr, "runnel: %s needs %s\n", name, wants[k]);
    return -1;
  }
  if (o->given & 1u << k) { /* the last would win and the first be dropped: --input a --input b read b alone */
    fprintf(stderr, "runnel: %s given twice (runnel help)\n", name);
    return -1;
  }
  o->given |= 1u << k;
  const char *value = argv[++*i];
  switch (k) {
  case 0: o->input = value; break;
  case 2:
    if (strcmp(value, "stop") != 0 && strcmp(value, "skip") != 0) {
      fprintf(stderr, "runnel: --on-error takes stop or skip, got \"%s\"\n", value);
      return -1;
    }
    o->on_error = value;
    break;
  case 3: o->rejects = value; break;
  default: {
    long long n = count_arg(value);
    if (n < 0) {
      fprintf(stderr, "runnel: %s needs %s, got \"%s\"\n", name, wants[k], value);
      return -1;
    }
    if (k == 1) o->batch = n;
    else o->max_rejects = n;
  }
  }
  return 1;
}

/* The options that shape --input without it, or skip's options without
 * skip, would be ignored (an empty rejects file made): a usage error. */
static bool run_opts_fit(const run_opts *o)
{
  const char *alone = o->batch ? "--batch" : o->on_error ? "--on-error" : o->rejects ? "--rejects"
                    : o->max_rejects ? "--max-rejects" : NULL;
  if (alone && !o->input) {
    fprintf(stderr, "runnel: %s goes with --input (runnel help)\n", alone);
    return false;
  }
  bool skip = o->on_error && strcmp(o->on_error, "skip") == 0;
  if ((o->rejects || o->max_rejects) && !skip) {
    fprintf(stderr, "runnel: %s goes with --on-error skip (runnel help)\n", o->rejects ? "--rejects" : "--max-rejects");
    return false;
  }
  return true;
}

/* os.exit(code) in a script ends as os.exit(code, true) does, closing the
 * Lua state as the script's end does: its pipelines are closed, so the
 * groups sync = false carried are committed and durable sinks get them.
 * Lua's os.exit(code) closed nothing: those groups, which p:seq() had
 * counted, were lost (the REPL's os.exit closes its pipelines too).
 * os.exit(code, false) still ends at once, as a crash would. */
static int exit_closing(lua_State *L)
{
  /* Lua's os_exit, in C so that a bad code is said at the script's line
   * (a Lua wrapper's "bad argument" named the wrapper's chunk instead) */
  int status = lua_isboolean(L, 1) ? (lua_toboolean(L, 1) ? EXIT_SUCCESS : EXIT_FAILURE)
                                   : (int)luaL_optinteger(L, 1, EXIT_SUCCESS);
  if (lua_isnoneornil(L, 2) || lua_toboolean(L, 2)) lua_close(L);
  exit(status);
}

/* runnel run [OPTIONS] FILE [ARGS…]: runnel's own options may come before
 * or after FILE; "--" ends them (what follows goes to the script as it is). */
static int run_script(lua_State *L, int argc, char **argv, int first)
{
  run_opts o = { false, NULL, NULL, NULL, 0, 0, 0 };
  int file = -1;
  char *args[argc];
  int nargs = 0;
  bool options = true;
  for (int i = first; i < argc; i++) {
    if (options && strcmp(argv[i], "--") == 0) { options = false; continue; }
    int took = options ? take_option(argc, argv, &i, &o) : 0;
    if (took < 0) return 2;
    if (took) continue;
    if (options && file < 0 && argv[i][0] == '-' && argv[i][1] == '-') {
      fprintf(stderr, "runnel: unknown option %s (runnel help lists them)\n", argv[i]);
      return 2;
    }
    if (file < 0) file = i;
    else args[nargs++] = argv[i];
  }
  if (file < 0) {
    fprintf(stderr, "runnel: run needs a script: runnel run FILE.lua [ARGS…] (runnel help)\n");
    return 2;
  }
  if (!*argv[file]) { /* else Lua's loadfile says "cannot open : No such file or directory" */
    fprintf(stderr, "runnel: run: the script's path is empty: runnel run FILE.lua [ARGS…] (runnel help)\n");
    return 2;
  }
  if (!run_opts_fit(&o)) return 2;
  bool script_stdin = strcmp(argv[file], "-") == 0; /* as lua5.4 -: the script from stdin */
  if (script_stdin && o.input && strcmp(o.input, "-") == 0) {
    fprintf(stderr, "runnel: run - reads the script from stdin: --input - cannot read it too (runnel help)\n");
    return 2;
  }
  struct stat script, rejects; /* the rejects file is opened for writing after the script ran: it would be lost */
  if (o.rejects && !script_stdin && stat(argv[file], &script) == 0 && stat(o.rejects, &rejects) == 0 &&
      script.st_dev == rejects.st_dev && script.st_ino == rejects.st_ino) {
    fprintf(stderr, "runnel: --rejects %s is the script itself (runnel help)\n", o.rejects);
    return 2;
  }
  lua_createtable(L, nargs, file + 1);
  for (int i = 0; i <= file; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - file);
  }
  for (int i = 0; i < nargs; i++) {
    lua_pushstring(L, args[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setglobal(L, "arg");
  lua_getglobal(L, "os");
  if (lua_istable(L, -1)) {
    lua_pushcfunction(L, exit_closing);
    lua_setfield(L, -2, "exit");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, o.traceback ? traceback_handler : message_handler);
  int handler = lua_gettop(L);
  if (luaL_loadfile(L, script_stdin ? NULL : argv[file]) != LUA_OK) {
    fprintf(stderr, "runnel: %s\n", lua_tostring(L, -1));
    return 1;
  }
  for (int i = 0; i < nargs; i++) lua_pushstring(L, args[i]);
  running_state = L;
  catch_run_signals();
  int st = lua_pcall(L, nargs, 1, handler);
  running_state = NULL;
  if (st != LUA_OK) {
    fprintf(stderr, "runnel: %s\n", lua_tostring(L, -1));
    return failed_status();
  }
  return o.input ? run_input(L, &o) : 0;
}

/* runnel repl [STATE_DIR] [FILE.lua]: repl.lua's main(first, second). */
static int run_repl(lua_State *L, const char *first, const char *second)
{
  lua_pushcfunction(L, traceback_handler);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "runnel.repl");
  if (lua_pcall(L, 1, 1, 1) != LUA_OK) {
    fprintf(stderr, "runnel: %s\n", lua_tostring(L, -1));
    return 1;
  }
  lua_getfield(L, -1, "main");
  if (first) lua_pushstring(L, first); else lua_pushnil(L);
  if (second) lua_pushstring(L, second); else lua_pushnil(L);
  if (lua_pcall(L, 2, 1, 1) != LUA_OK) {
    fprintf(stderr, "runnel: %s\n", lua_tostring(L, -1));
    return 1;
  }
  return (int)lua_tointeger(L, -1);
}

/* ---- runnel inspect STATE_DIR ---- */

typedef struct inspected {
  int n, cap;
  char *(*cells)[6];      /* relation, kind, rows, next id, columns; then "name entries" */
} inspected;

static char *dupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dupf(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) s = NULL;
  va_end(ap);
  return s;
}

/* s with its control characters as Lua writes them (\n, \t, \r, \27, and
 * \u{9b} for a C1 control), as runnel.grid shows cells: a name or column
 * holding a newline would break inspect's row, an escape sequence would
 * reach the terminal; a byte that starts no UTF-8 character (a state's
 * path may hold any) as \ddd. NULL when out of memory. */
static bool is_digit_char(unsigned char c) { return c >= '0' && c <= '9'; }

/* The length of the valid UTF-8 character at c (1 to 4), or 0 for a byte
 * that starts none: a lone continuation, a cut or overlong sequence, a
 * surrogate, past U+10FFFF. */
static int utf8_char(const unsigned char *c)
{
  if (*c < 0x80) return 1;
  int n = *c >= 0xC2 && *c <= 0xDF ? 2 : *c >= 0xE0 && *c <= 0xEF ? 3 : *c >= 0xF0 && *c <= 0xF4 ? 4 : 0;
  for (int i = 1; i < n; i++)
    if ((c[i] & 0xC0) != 0x80) return 0;
  if ((*c == 0xE0 && c[1] < 0xA0) || (*c == 0xED && c[1] > 0x9F) || (*c == 0xF0 && c[1] < 0x90) ||
      (*c == 0xF4 && c[1] > 0x8F))
    return 0;
  return n;
}

static char *shown(const char *s)
{
  size_t n = strlen(s);
  char *out = malloc(n * 6 + 1), *o = out; /* \u{9b} is 6 bytes for 2; \127 4 for 1 */
  if (!out) return NULL;
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '\n') o += sprintf(o, "\\n");
    else if (*c == '\t') o += sprintf(o, "\\t");
    else if (*c == '\r') o += sprintf(o, "\\r");
    else if (*c < 0x20 || *c == 0x7F) /* three digits before a digit, as Lua's %q: \0271 is not \271 */
      o += sprintf(o, is_digit_char(c[1]) ? "\\%03u" : "\\%u", *c);
    else if (*c == 0xC2 && c[1] >= 0x80 && c[1] <= 0x9F) o += sprintf(o, "\\u{%x}", *++c);
    else if (!utf8_char(c)) o += sprintf(o, "\\%u", *c); /* a path's byte that is no UTF-8, as a grid shows it */
    else
      for (int k = utf8_char(c); k > 0; k--) *o++ = (char)*c, c += k > 1; /* the character whole */
  }
  *o = '\0';
  return out;
}

static int collect_relation(void *ctx, const rn_inspect_relation *r)
{
  inspected *in = ctx;
  if (in->n == in->cap) {
    int cap = in->cap ? in->cap * 2 : 16;
    void *cells = realloc(in->cells, sizeof *in->cells * (size_t)cap);
    if (!cells) return RN_ENOMEM;
    in->cells = cells;
    in->cap = cap;
  }
  char **row = in->cells[in->n++];
  row[0] = shown(r->name);
  row[1] = dupf("%s", r->kind);
  row[2] = r->rows >= 0 ? dupf("%lld", (long long)r->rows) : dupf("%s", "");
  row[3] = dupf("%llu", (unsigned long long)r->next_id);
  row[4] = shown(r->columns);
  row[5] = row[0] ? dupf("%s %llu", row[0], (unsigned long long)r->entries) : NULL;
  for (int c = 0; c < 6; c++)
    if (!row[c]) return RN_ENOMEM; /* inspect frees the row's cells */
  return 0;
}

static size_t text_width(const char *s)
{
  size_t w = 0;
  for (; *s; s++) w += ((unsigned char)*s & 0xC0) != 0x80; /* UTF-8: count characters */
  return w;
}

/* One durable sink's waiting groups (OUTBOX-10), as runnel inspect lists them. */
static int print_waiting(void *ctx, const rn_outbox_kept *k)
{
  bool *head = ctx;
  if (!k->groups) return 0;
  if (!*head) printf("groups waiting for durable sinks:\n");
  *head = true;
  char *name = shown(k->shown);
  if (!name) return RN_ENOMEM;
  printf("  %s: %llu group%s (%llu row%s) wait since group %llu, last declared at group %llu", name,
         (unsigned long long)k->groups, k->groups == 1 ? "" : "s", (unsigned long long)k->rows,
         k->rows == 1 ? "" : "s", (unsigned long long)k->since, (unsigned long long)k->seen);
  free(name);
  if (k->relation_gone) {
    name = shown(k->relation);
    printf("; its relation %s is not in the state", name ? name : "(out of memory)");
    free(name);
  }
  printf("\n");
  return 0;
}

static int inspect(const char *path)
{
  inspected in = { 0, 0, NULL };
  rn_inspect_state st;
  char err[1024] = "";
  int rc = rn_inspect(path, collect_relation, &in, &st, err, sizeof err);
  if (rc) {
    fprintf(stderr, "runnel: %s\n", err[0] ? err : rn_strerror(rc));
    return 1;
  }
  char *where = shown(path); /* one line, as the relations' names: a newline in the path would start another */
  printf("state: %s\nlast group: %llu\nlmdb: %.1f MiB used of a %.1f MiB map, %.1f MiB on disk\n", where ? where : path,
         (unsigned long long)st.seq, st.used / 1048576.0, st.map_size / 1048576.0, st.file_size / 1048576.0);
  free(where);
  uint64_t psize = st.page_size ? st.page_size : 1;
  printf("space: %llu bytes live (%llu pages), %llu bytes free (%llu pages) of the %llu used\n",
         (unsigned long long)(st.used - st.free), (unsigned long long)((st.used - st.free) / psize),
         (unsigned long long)st.free, (unsigned long long)(st.free / psize), (unsigned long long)st.used);
  static const char *const head[5] = { "relation", "kind", "rows", "next id", "columns" };
  static const bool right[5] = { false, false, true, true, false };
  size_t w[5];
  for (int c = 0; c < 5; c++) {
    w[c] = text_width(head[c]);
    for (int r = 0; r < in.n; r++) if (text_width(in.cells[r][c]) > w[c]) w[c] = text_width(in.cells[r][c]);
  }
  for (int r = -1; r < in.n; r++) {
    for (int c = 0; c < 5; c++) {
      const char *s = r < 0 ? head[c] : in.cells[r][c];
      int pad = (int)(w[c] - text_width(s));
      if (c == 4) printf(" %s", s); /* the last column is not padded */
      else if (right[c]) printf(" %*s%s |", pad, "", s);
      else printf(" %s%*s |", s, pad, "");
    }
    printf("\n");
    if (r < 0) {
      for (int c = 0; c < 5; c++) {
        for (size_t i = 0; i < w[c] + 2; i++) putchar('-');
        if (c < 4) putchar('+');
      }
      printf("\n");
    }
  }
  printf("(%d relation%s)\n", in.n, in.n == 1 ? "" : "s");
  if (in.n) { /* what each keeps in LMDB: rows, indexes, operator state */
    printf("state entries:");
    for (int r = 0; r < in.n; r++) printf("%s %s", r ? "," : "", in.cells[r][5]);
    printf("\n");
  }
  for (int r = 0; r < in.n; r++) for (int c = 0; c < 6; c++) free(in.cells[r][c]);
  free(in.cells);
  bool waiting = false;
  if ((rc = rn_inspect_outbox(path, print_waiting, &waiting, err, sizeof err))) {
    fprintf(stderr, "runnel: %s\n", err[0] ? err : rn_strerror(rc));
    return 1;
  }
  if (waiting) printf("(runnel drop-outbox STATE SINK drops the groups of a sink no pipeline declares any more)\n");
  return 0;
}

/* stdout could not take all that was written to it (a full disk, a closed
 * descriptor, EPIPE with SIGPIPE ignored): says so, as a query's rows or a
 * script's output were lost. */
static bool stdout_failed(void)
{
  errno = 0;
  if (fflush(stdout) == 0 && !ferror(stdout)) return false;
  /* a write that failed earlier (print flushes each line) left no errno: an empty write asks again, writing nothing */
  if (!errno && write(STDOUT_FILENO, "", 0) == 0) errno = 0;
  fprintf(stderr, "runnel: writing standard output: %s\n", errno ? strerror(errno) : "write error");
  return true;
}

/* A signal that means the process read something it should not have:
 * LMDB following a damaged page of a mapped file (SIGBUS past its end,
 * SIGSEGV through a wild pointer). */
static bool crash_signal(int sig)
{
  return sig == SIGBUS || sig == SIGSEGV || sig == SIGILL || sig == SIGFPE || sig == SIGABRT;
}

/* The signals that stop a command (Ctrl-C, kill, a closed terminal):
 * while runnel waits for its reading child, it hands them on to the child
 * and ends by the same one once the child has ended and its leftovers are
 * removed. */
static const int STOP_SIGNALS[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
enum { N_STOP_SIGNALS = sizeof STOP_SIGNALS / sizeof STOP_SIGNALS[0] };
static volatile sig_atomic_t waited_child; /* a pid_t, 0 when none is waited for */

static void hand_on_signal(int sig)
{
  if (waited_child > 0) kill(waited_child, sig);
}

/* Runs fn(ctx) in a child process and returns its exit status: LMDB has no
 * page checksums, so a damaged state that sends it astray kills the
 * reader (SIGBUS, SIGSEGV), and the child's death is reported by the
 * parent instead of runnel dying without a word. *crash is the signal
 * that killed the child (crash_signal) or 0; a child ended by another
 * signal (SIGINT, SIGPIPE, or a STOP_SIGNALS one runnel was sent and
 * handed on) ends runnel by the same one, as before. Whenever the child
 * ended by a signal, killed(ctx, child) first removes what it left half
 * made (NULL: nothing to remove). Only runnel's own SIGKILL leaves it:
 * the child then ends by the same (PR_SET_PDEATHSIG). The child writes
 * what it reads to stdout itself. When no child can be made (EAGAIN under
 * a pids limit), fn runs in this process, as it did before these commands
 * read in a child, rather than the command failing: a crash is then said
 * by on_bus_error. fn's forked says which. */
static int in_child(int (*fn)(void *ctx, bool forked), void (*killed)(void *ctx, pid_t child), void *ctx,
                    int *crash)
{
  *crash = 0;
  fflush(NULL);
  /* held from the fork until each side has its handlers: one sent between is handed on, not lost or fatal */
  sigset_t stops, before;
  sigemptyset(&stops);
  for (int i = 0; i < N_STOP_SIGNALS; i++) sigaddset(&stops, STOP_SIGNALS[i]);
  sigprocmask(SIG_BLOCK, &stops, &before);
  pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) {
    sigprocmask(SIG_SETMASK, &before, NULL);
    return fn(ctx, false);
  }
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &before, NULL);
    /* runnel killed (SIGKILL to its pid) ends its work too, as before there was a child: a snapshot is not
     * finished and named by an orphan after the user stopped it */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1); /* it died before prctl */
    signal(SIGBUS, SIG_DFL); /* the parent says what crashed */
    int rc = fn(ctx, true);
    _exit(stdout_failed() && rc == 0 ? 1 : rc);
  }
  struct sigaction hand_on = { .sa_handler = hand_on_signal }, old[N_STOP_SIGNALS];
  sigemptyset(&hand_on.sa_mask);
  waited_child = child;
  for (int i = 0; i < N_STOP_SIGNALS; i++) {
    sigaction(STOP_SIGNALS[i], NULL, &old[i]);
    if (old[i].sa_handler != SIG_IGN) sigaction(STOP_SIGNALS[i], &hand_on, NULL); /* ignored stays ignored */
  }
  sigprocmask(SIG_SETMASK, &before, NULL);
  int status, rc = 0;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR) { perror("runnel: waitpid"); rc = 1; break; }
  /* held again until the child's leftovers are removed: a second Ctrl-C then ends runnel after, not amid, it */
  sigprocmask(SIG_BLOCK, &stops, NULL);
  waited_child = 0; /* reaped: its pid may be another process's now */
  for (int i = 0; i < N_STOP_SIGNALS; i++) sigaction(STOP_SIGNALS[i], &old[i], NULL);
  if (!rc && WIFSIGNALED(status) && killed) killed(ctx, child);
  /* Ctrl-C, SIGTERM, SIGPIPE: end as the child did */
  if (!rc && WIFSIGNALED(status) && !crash_signal(WTERMSIG(status))) {
    signal(WTERMSIG(status), SIG_DFL);
    sigprocmask(SIG_SETMASK, &before, NULL);
    raise(WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  sigprocmask(SIG_SETMASK, &before, NULL);
  if (rc) return rc;
  if (WIFSIGNALED(status)) {
    *crash = WTERMSIG(status);
    return 1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* What a command says of a state whose reading crashed. */
static int crashed(const char *cmd, const char *path, int sig)
{
  fprintf(stderr, "runnel: %s: reading %s crashed (%s): the state is damaged (runnel verify %s says where)\n", cmd,
          path, strsignal(sig), path);
  return 1;
}

/* runnel verify: the walk runs in a child (in_child), a crash reported as
 * damage. Exit 0: whole; 1: damaged or unreadable. */
static int verify_walk(void *path, bool forked)
{
  (void)forked;
  return rn_verify(path, stdout) != 0 ? 1 : 0;
}

static int verify(const char *path)
{
  int sig;
  int rc = in_child(verify_walk, NULL, (void *)path, &sig);
  if (sig) printf("damaged: reading %s crashed the walk (%s): a B-tree is damaged\n", path, strsignal(sig));
  return rc;
}

/* runnel snapshot STATE DEST: a consistent compacted copy (rn_state_copy),
 * taken in a child (in_child). A copy whose reading crashed, or that was
 * stopped by a signal, leaves no data.mdb (copy.c) but its
 * data.mdb.copy-PID-N, and DEST if it made it: both are removed, as a
 * copy that fails does. */
typedef struct snapshot_args {
  const char *path, *dest;
  bool made; /* dest did not exist before */
} snapshot_args;

static int snapshot_copy(void *ctx, bool forked)
{
  (void)forked;
  const snapshot_args *a = ctx;
  char err[1024] = "";
  int rc = rn_state_copy(a->path, a->dest, err, sizeof err);
  if (rc) {
    fprintf(stderr, "runnel: snapshot: %s\n", err[0] ? err : rn_strerror(rc));
    return 1;
  }
  return 0;
}

static void remove_killed_copy(void *ctx, pid_t pid)
{
  const snapshot_args *a = ctx;
  char prefix[64];
  int plen = snprintf(prefix, sizeof prefix, "data.mdb.copy-%ld-", (long)pid);
  DIR *d = opendir(a->dest);
  for (struct dirent *f; d && (f = readdir(d));) {
    if (strncmp(f->d_name, prefix, (size_t)plen) != 0) continue;
    char file[strlen(a->dest) + strlen(f->d_name) + 2];
    snprintf(file, sizeof file, "%s/%s", a->dest, f->d_name);
    unlink(file);
  }
  if (d) closedir(d);
  if (a->made) rmdir(a->dest); /* empty now, unless someone put a file there meanwhile */
}

static int snapshot(const char *path, const char *dest)
{
  struct stat st;
  snapshot_args a = { path, dest, lstat(dest, &st) != 0 };
  int sig;
  int rc = in_child(snapshot_copy, remove_killed_copy, &a, &sig);
  return sig ? crashed("snapshot", path, sig) : rc;
}

/* ---- runnel query / runnel drop: lua/runnel/state.lua's commands ---- */

static int state_command(lua_State *L, int argc, char **argv)
{
  lua_getglobal(L, "require");
  lua_pushliteral(L, "runnel.state");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    fprintf(stderr, "runnel: %s\n", lua_tostring(L, -1));
    return 1;
  }
  lua_getfield(L, -1, argv[1]);
  lua_createtable(L, argc - 2, 0);
  for (int i = 2; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - 1);
  }
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    fprintf(stderr, "runnel: %s\n", lua_tostring(L, -1));
    return 1;
  }
  return (int)lua_tointeger(L, -1);
}

/* runnel query, in a child (in_child): it reads the state through LMDB. */
typedef struct command_args {
  lua_State *L;
  int argc;
  char **argv;
} command_args;

static int query_in_child(void *ctx, bool forked)
{
  command_args *a = ctx;
  int rc = state_command(a->L, a->argc, a->argv);
  if (forked) lua_close(a->L); /* its attaches end their reads, as main's lua_close would: the child ends with _exit */
  return rc;
}

/* The STATE_DIR of runnel query's arguments argv[2..argc), found as
 * query_args (lua/runnel/state.lua) finds it: options may come first
 * (--format csv ST REL), and -- ends them. "the state" when none. */
static const char *query_state(int argc, char **argv)
{
  bool options = true;
  for (int i = 2; i < argc; i++) {
    if (options && strcmp(argv[i], "--") == 0) options = false;
    else if (options && (strcmp(argv[i], "--limit") == 0 || strcmp(argv[i], "--format") == 0)) i++; /* and its value */
    else if (!options || strncmp(argv[i], "--", 2) != 0) return argv[i];
  }
  return "the state";
}

static int query(lua_State *L, int argc, char **argv)
{
  command_args a = { L, argc, argv };
  int sig;
  int rc = in_child(query_in_child, NULL, &a, &sig);
  return sig ? crashed("query", query_state(argc, argv), sig) : rc; /* not argv[2]: "reading --format crashed" */
}

static int inspect_in_child(void *path, bool forked) { return (void)forked, inspect(path); }

static int inspect_guarded(const char *path)
{
  int sig;
  int rc = in_child(inspect_in_child, NULL, (void *)path, &sig);
  return sig ? crashed("inspect", path, sig) : rc;
}

/* The one text of `runnel help`; scripts/man.lua turns it into runnel.1
 * (a line "Word:" starts a section; "  term   text" an entry; deeper
 * indented lines continue the entry above). */
static const char HELP[] =
  "runnel " RN_VERSION " - a stream processor that lives inside your program\n"
  "\n"
  "Usage:\n"
  "  runnel [repl] [STATE_DIR] [FILE.lua]\n"
  "  runnel [run] [OPTIONS] FILE.lua [ARGS...]\n"
  "  runnel inspect|verify STATE_DIR\n"
  "  runnel query STATE_DIR REL [KEY...] [--limit N] [--format grid|ndjson|csv]\n"
  "  runnel drop STATE_DIR NAME\n"
  "  runnel drop-outbox STATE_DIR SINK\n"
  "  runnel snapshot STATE_DIR DEST\n"
  "  runnel help|version\n"
  "\n"
  "Commands:\n"
  "  run FILE.lua [ARGS...]     Run a pipeline script; arg and ... as lua5.4 gives them\n"
  "                             (FILE.lua - reads it from stdin).\n"
  "  FILE.lua [ARGS...]         The same as run FILE.lua.\n"
  "  repl [STATE_DIR] [FILE.lua]\n"
  "                             The interactive REPL (the default command). p is a temporary\n"
  "                             pipeline; with STATE_DIR it is the state there: FILE.lua declares\n"
  "                             its relations on p, and without FILE.lua an existing state is\n"
  "                             browsed read-only. FILE.lua alone runs first in the REPL, and a\n"
  "                             pipeline it returns becomes p. .help lists the REPL's commands.\n"
  "  inspect STATE_DIR          A state's relations, kinds, schemas, row counts, last group.\n"
  "  verify STATE_DIR           Check a state's databases and counters against each other.\n"
  "  query STATE_DIR REL [KEY...] [--limit N] [--format grid|ndjson|csv]\n"
  "                             Rows of a table, store, index, distinct, aggregate, join, top or\n"
  "                             select (by key, or all), read in one read transaction while another\n"
  "                             process may be writing: whole groups only.\n"
  "  drop STATE_DIR NAME        Remove a relation and its state (refused while others read it).\n"
  "  drop-outbox STATE_DIR SINK Drop the groups waiting for a durable sink no pipeline declares any\n"
  "                             more, named as inspect lists it (\"t: durable sink d\").\n"
  "  snapshot STATE_DIR DEST    A consistent, compacted copy of a state (positions, outbox and id\n"
  "                             included) from one read transaction; the writer keeps running.\n"
  "  help, --help, -h           This text, on stdout.\n"
  "  version, --version         The version, on stdout.\n"
  "\n"
  "Options:\n"
  "  --input PATH|-             After the script, apply the NDJSON changes in PATH (- for stdin)\n"
  "                             through the pipeline the script returns (return p), as\n"
  "                             p:run(runnel.ndjson_source(PATH), ...); nats://HOST:PORT/STREAM/SUBJECT\n"
  "                             reads a JetStream subject instead (runnel.jetstream_source).\n"
  "  --batch N                  Input lines per group (1000).\n"
  "  --on-error stop|skip       Stop at the first bad line (default; its group is rolled back),\n"
  "                             or skip bad lines.\n"
  "  --rejects PATH|-           With skip: write each rejected line and its reason to PATH\n"
  "                             (- for stdout; without it the reasons go to stderr).\n"
  "  --max-rejects N            With skip: stop the run at the N+1th rejected line.\n"
  "  --traceback                Print a traceback with a script's error.\n"
  "  --                         End runnel's options: what follows goes to the script.\n"
  "\n"
  "  run's options may come before or after FILE.lua. On a terminal a long --input shows its\n"
  "  progress (lines, changes/s) on stderr, replaced by the summary at the end.\n"
  "\n"
  "Files:\n"
  "  ~/.runnel_history          The REPL's history (the newest 1000 lines).\n"
  "\n"
  "Exit status:\n"
  "  0                          Success.\n"
  "  1                          The script, the input, or the state failed (the message says\n"
  "                             where); a state verify found damaged.\n"
  "  2                          A usage error: an unknown command or option, a missing value.\n"
  "  130, 143                   run stopped by Ctrl-C or SIGTERM: a run of its input stops between\n"
  "                             two lines with what it read committed, and carried groups are\n"
  "                             written (a second signal ends the process at once).\n"
  "\n"
  "See also:\n"
  "  docs/api.md                Every Lua function and option, and the C API of runnel.h.\n";

/* A script: a name ending in .lua, or a file that exists. */
static bool is_script(const char *arg)
{
  size_t n = strlen(arg);
  struct stat st;
  return (n > 4 && strcmp(arg + n - 4, ".lua") == 0) || (stat(arg, &st) == 0 && S_ISREG(st.st_mode));
}

static bool is_dir(const char *arg)
{
  struct stat st;
  return stat(arg, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Whether the paths argv[2..argc) of command argv[1] hold no option:
 * these commands take none, and a word like --help must not become a path
 * (a state made or copied there). Else says so, with takes (what the
 * command takes), and how to give a path that starts with -. */
static bool no_options(int argc, char **argv, const char *takes)
{
  for (int i = 2; i < argc; i++)
    if (argv[i][0] == '-') {
      fprintf(stderr, "runnel: %s: unknown option %s (%s takes %s; a path that starts with - as ./%s; runnel help)\n",
              argv[1], argv[i], argv[1], takes, argv[i]);
      return false;
    }
  return true;
}

/* Dispatches argv[1]; -1 when it is no command (main reports it). */
static int command(lua_State *L, int argc, char **argv)
{
  const char *cmd = argv[1];
  if (strcmp(cmd, "run") == 0) return run_script(L, argc, argv, 2);
  if (strcmp(cmd, "repl") == 0) {
    if (argc > 4) { fprintf(stderr, "runnel: repl takes [STATE_DIR] [FILE.lua] (runnel help)\n"); return 2; }
    if (!no_options(argc, argv, "[STATE_DIR] [FILE.lua]")) return 2; /* else `runnel repl --help` made a state --help */
    return run_repl(L, argc > 2 ? argv[2] : NULL, argc > 3 ? argv[3] : NULL);
  }
  if (strcmp(cmd, "inspect") == 0 || strcmp(cmd, "verify") == 0) {
    if (!no_options(argc, argv, "one STATE_DIR")) return 2;
    if (argc != 3) { fprintf(stderr, "runnel: %s takes one STATE_DIR (runnel help)\n", cmd); return 2; }
    return cmd[0] == 'i' ? inspect_guarded(argv[2]) : verify(argv[2]);
  }
  if (strcmp(cmd, "query") == 0) return query(L, argc, argv);
  if (strcmp(cmd, "drop") == 0) return state_command(L, argc, argv);
  if (strcmp(cmd, "drop-outbox") == 0) return state_command(L, argc, argv);
  if (strcmp(cmd, "snapshot") == 0) {
    if (!no_options(argc, argv, "STATE_DIR DEST")) return 2; /* else `runnel snapshot st --help` copied st to --help */
    if (argc != 4) { fprintf(stderr, "runnel: snapshot takes STATE_DIR DEST (runnel help)\n"); return 2; }
    return snapshot(argv[2], argv[3]);
  }
  if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
    fputs(HELP, stdout);
    return 0;
  }
  if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
    puts("runnel " RN_VERSION " (" LUA_RELEASE ")");
    return 0;
  }
  /* runnel game.lua, runnel --input x game.lua: as lua and tarantool run a script */
  if (is_script(cmd) || (cmd[0] == '-' && cmd[1] == '-')) return run_script(L, argc, argv, 1);
  if (is_dir(cmd) && argc <= 3) return run_repl(L, cmd, argc > 2 ? argv[2] : NULL); /* runnel STATE_DIR */
  if (is_dir(cmd)) { /* not an unknown command: a directory given more than runnel STATE_DIR takes */
    fprintf(stderr, "runnel: %s is a directory: runnel STATE_DIR takes at most a FILE.lua after it (runnel help)\n",
            cmd);
    return 2;
  }
  return -1;
}

/* SIGBUS in runnel is an access to a mapped data.mdb the file cannot
 * back: a read past its end, LMDB following a damaged page of a state
 * (inspect, query, snapshot and verify read in a child and say so; run and
 * the REPL read in this process), or a write into a page of a state opened
 * with writemap = true whose disk is full (its data.mdb is as large as its
 * map, mostly holes): the state is whole then, and verify would say so.
 * The process still ends by the signal, but not without a word. */
static void on_bus_error(int sig)
{
  static const char msg[] = "runnel: Bus error: a state's data.mdb, mapped by this process, could not back a page: "
                            "the state is damaged (runnel verify STATE_DIR says where), or, opened with writemap = "
                            "true, its disk is full\n";
  ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)n;
  signal(sig, SIG_DFL);
  raise(sig);
}

int main(int argc, char **argv)
{
  rn_store_keep_std_fds(); /* a closed stdout must not become the first state file opened */
  signal(SIGBUS, on_bus_error);
  lua_State *L = luaL_newstate();
  if (!L) {
    fprintf(stderr, "runnel: cannot create a Lua state\n");
    return 1;
  }
  luaL_openlibs(L);
  preload(L);
  int rc = argc < 2 ? run_repl(L, NULL, NULL) : command(L, argc, argv);
  if (rc < 0) {
    fprintf(stderr, "runnel: unknown command \"%s\" (runnel help lists the commands)\n", argv[1]);
    rc = 2;
  }
  lua_close(L);
  if (stdout_failed() && rc == 0) rc = 1;
  return rc;
}
