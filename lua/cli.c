/* cli.c — the runnel command: run a pipeline script, the REPL, inspect.
 *
 *     runnel run FILE.lua [ARGS…]   run a script (arg as lua5.4 gives it)
 *     runnel [repl [FILE.lua]]      the REPL, after running FILE if given
 *     runnel inspect STATE_DIR      a state's relations, schemas and counts
 *     runnel verify STATE_DIR       check a state against itself (verify.h)
 *     runnel --version | --help
 *
 * The Lua parts (runnel.lua, repl.lua) are compiled in (scripts/embed.lua),
 * so the binary runs from anywhere. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "lbind.h"
#include "verify.h"

/* The state the SIGINT handler interrupts: the CLI's one global. */
static lua_State *running_state;

static void interrupt_hook(lua_State *L, lua_Debug *ar)
{
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

/* As lua.c: a signal handler may only set a hook; the hook raises. */
static void on_sigint(int sig)
{
  signal(sig, SIG_DFL);
  if (running_state)
    lua_sethook(running_state, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
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

static int l_readline(lua_State *L)
{
  const char *prompt = luaL_optstring(L, 1, "> ");
  if (!isatty(STDIN_FILENO)) {
    luaL_Buffer b;
    char chunk[4096];
    luaL_buffinit(L, &b);
    for (;;) {
      if (!fgets(chunk, sizeof chunk, stdin)) {
        if (luaL_bufflen(&b) == 0) return 0;
        break;
      }
      size_t n = strlen(chunk);
      bool end = n && chunk[n - 1] == '\n';
      luaL_addlstring(&b, chunk, end ? n - 1 : n);
      if (end) break;
    }
    luaL_pushresult(&b);
    return 1;
  }
  completion_state = L;
  rl_attempted_completion_function = complete;
  rl_completer_word_break_characters = (char *)" \t\n\"'`@$><=;|&{(,.:[+-*/%^~";
  char *line = readline(prompt);
  if (!line) return 0;
  lua_pushstring(L, line);
  free(line);
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

/* Runs f (on the stack with its args) with SIGINT raising inside Lua. */
static int l_protected_call(lua_State *L)
{
  int nargs = lua_gettop(L) - 1;
  running_state = L;
  signal(SIGINT, on_sigint);
  lua_call(L, nargs, LUA_MULTRET);
  signal(SIGINT, SIG_DFL);
  running_state = NULL;
  return lua_gettop(L);
}

static const luaL_Reg readline_funcs[] = {
  { "readline", l_readline }, { "add_history", l_add_history },
  { "history_file", l_history_file }, { "isatty", l_isatty },
  { "call", l_protected_call }, { NULL, NULL }
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

static int traceback_handler(lua_State *L)
{
  const char *msg = lua_tostring(L, 1);
  if (!msg) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  luaL_traceback(L, L, msg, 1);
  return 1;
}

static int message_handler(lua_State *L)
{
  if (!lua_tostring(L, 1)) lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  return 1;
}

/* After the script: --input runs an NDJSON file through the pipeline the
 * script returned, as p:run(runnel.ndjson_source(input), opts). */
static int run_input(lua_State *L, const char *input, const char *batch, const char *on_error, const char *rejects)
{
  if (!luaL_testudata(L, -1, "runnel.Pipeline")) {
    fprintf(stderr, "runnel: --input: the script must return its pipeline (return p)\n");
    return 1;
  }
  lua_getfield(L, -1, "run");
  lua_insert(L, -2);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "runnel");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "ndjson_source");
  lua_remove(L, -2);
  lua_pushstring(L, input);
  lua_call(L, 1, 1);
  lua_createtable(L, 0, 3);
  if (batch) { lua_pushinteger(L, atoll(batch)); lua_setfield(L, -2, "batch"); }
  if (on_error) { lua_pushstring(L, on_error); lua_setfield(L, -2, "on_error"); }
  if (rejects) { lua_pushstring(L, rejects); lua_setfield(L, -2, "rejects"); }
  if (lua_pcall(L, 3, 1, 0) != LUA_OK) {
    fprintf(stderr, "runnel: %s\n", lua_tostring(L, -1));
    return 1;
  }
  lua_getfield(L, -1, "lines");
  lua_getfield(L, -2, "applied");
  lua_getfield(L, -3, "rejected");
  lua_getfield(L, -4, "groups");
  fprintf(stderr, "runnel: %s: %lld lines, %lld applied, %lld rejected, %lld groups\n",
          strcmp(input, "-") == 0 ? "stdin" : input,
          (long long)lua_tointeger(L, -4), (long long)lua_tointeger(L, -3), (long long)lua_tointeger(L, -2),
          (long long)lua_tointeger(L, -1));
  return 0;
}

/* runnel run [--traceback] FILE [--input PATH|-] [--batch N] [--on-error stop|skip]
 *            [--rejects PATH] [ARGS…] */
static int run_script(lua_State *L, int argc, char **argv, int first)
{
  bool traceback = false;
  if (first < argc && strcmp(argv[first], "--traceback") == 0) { traceback = true; first++; }
  if (first >= argc) {
    fprintf(stderr, "usage: runnel run [--traceback] FILE.lua [--input PATH|-] [--batch N] "
                    "[--on-error stop|skip] [--rejects PATH] [ARGS…]\n");
    return 2;
  }
  const char *input = NULL, *batch = NULL, *on_error = NULL, *rejects = NULL;
  char *args[argc];
  int nargs = 0;
  for (int i = first + 1; i < argc; i++) { /* runnel's own options; the rest go to the script */
    const char **opt = strcmp(argv[i], "--input") == 0 ? &input : strcmp(argv[i], "--batch") == 0 ? &batch
                     : strcmp(argv[i], "--on-error") == 0 ? &on_error : strcmp(argv[i], "--rejects") == 0 ? &rejects : NULL;
    if (opt && i + 1 < argc) *opt = argv[++i];
    else args[nargs++] = argv[i];
  }
  lua_createtable(L, nargs, first + 1);
  for (int i = 0; i <= first; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - first);
  }
  for (int i = 0; i < nargs; i++) {
    lua_pushstring(L, args[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setglobal(L, "arg");
  lua_pushcfunction(L, traceback ? traceback_handler : message_handler);
  int handler = lua_gettop(L);
  if (luaL_loadfile(L, argv[first]) != LUA_OK) {
    fprintf(stderr, "runnel: %s\n", lua_tostring(L, -1));
    return 1;
  }
  for (int i = 0; i < nargs; i++) lua_pushstring(L, args[i]);
  running_state = L;
  signal(SIGINT, on_sigint);
  int st = lua_pcall(L, nargs, 1, handler);
  running_state = NULL;
  if (st != LUA_OK) {
    fprintf(stderr, "runnel: %s\n", lua_tostring(L, -1));
    return 1;
  }
  return input ? run_input(L, input, batch, on_error, rejects) : 0;
}

static int run_repl(lua_State *L, const char *file)
{
  lua_pushcfunction(L, traceback_handler);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "runnel.repl");
  if (lua_pcall(L, 1, 1, 1) != LUA_OK) {
    fprintf(stderr, "runnel: %s\n", lua_tostring(L, -1));
    return 1;
  }
  lua_getfield(L, -1, "main");
  if (file) lua_pushstring(L, file); else lua_pushnil(L);
  if (lua_pcall(L, 1, 1, 1) != LUA_OK) {
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
  row[0] = dupf("%s", r->name);
  row[1] = dupf("%s", r->kind);
  row[2] = r->rows >= 0 ? dupf("%lld", (long long)r->rows) : dupf("%s", "");
  row[3] = dupf("%llu", (unsigned long long)r->next_id);
  row[4] = dupf("%s", r->columns);
  row[5] = dupf("%s %llu", r->name, (unsigned long long)r->entries);
  return 0;
}

static size_t text_width(const char *s)
{
  size_t w = 0;
  for (; *s; s++) w += ((unsigned char)*s & 0xC0) != 0x80; /* UTF-8: count characters */
  return w;
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
  printf("state: %s\nlast group: %llu\nlmdb: %.1f MiB used of a %.1f MiB map, %.1f MiB on disk\n", path,
         (unsigned long long)st.seq, st.used / 1048576.0, st.map_size / 1048576.0, st.file_size / 1048576.0);
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
  return 0;
}

/* runnel verify: the walk runs in a child, so that a damaged B-tree that
 * sends LMDB astray (SIGSEGV, SIGBUS) is reported instead of killing us.
 * Exit 0: whole; 1: damaged or unreadable. */
static int verify(const char *path)
{
  fflush(NULL);
  pid_t child = fork();
  if (child < 0) {
    perror("runnel: verify: fork");
    return 1;
  }
  if (child == 0) {
    int rc = rn_verify(path, stdout);
    fflush(stdout);
    _exit(rc == 0 ? 0 : 1);
  }
  int status;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR) { perror("runnel: verify: waitpid"); return 1; }
  if (WIFSIGNALED(status)) {
    printf("damaged: reading %s crashed the walk (%s): a B-tree is damaged\n", path, strsignal(WTERMSIG(status)));
    return 1;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static void usage(FILE *out)
{
  fputs("usage: runnel run [--traceback] FILE.lua [ARGS…]   run a pipeline script\n"
        "         [--input PATH|-] [--batch N] [--on-error stop|skip] [--rejects PATH]\n"
        "                                    then apply an NDJSON file through the pipeline it returns\n"
        "       runnel [repl [FILE.lua]]                   the interactive REPL\n"
        "       runnel inspect STATE_DIR                   relations, schemas, counts of a state\n"
        "       runnel verify STATE_DIR                    check a state's databases and counters\n"
        "       runnel --version | --help\n", out);
}

int main(int argc, char **argv)
{
  lua_State *L = luaL_newstate();
  if (!L) {
    fprintf(stderr, "runnel: cannot create a Lua state\n");
    return 1;
  }
  luaL_openlibs(L);
  preload(L);
  int rc;
  if (argc >= 2 && strcmp(argv[1], "run") == 0) rc = run_script(L, argc, argv, 2);
  else if (argc == 1) rc = run_repl(L, NULL);
  else if (strcmp(argv[1], "repl") == 0 && argc <= 3) rc = run_repl(L, argc == 3 ? argv[2] : NULL);
  else if (strcmp(argv[1], "inspect") == 0 && argc == 3) rc = inspect(argv[2]);
  else if (strcmp(argv[1], "verify") == 0 && argc == 3) rc = verify(argv[2]);
  else if (strcmp(argv[1], "--version") == 0) { puts("runnel " RN_VERSION " (" LUA_RELEASE ")"); rc = 0; }
  else if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) { usage(stdout); rc = 0; }
  else { usage(stderr); rc = 2; }
  lua_close(L);
  return rc;
}
