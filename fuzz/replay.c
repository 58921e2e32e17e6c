/* replay.c — runs a fuzz target over saved inputs without libFuzzer, so
 * make test replays the corpus and every crash ever found with gcc.
 *
 *     replay_<target> DIR|FILE …
 *
 * Each file runs in a child process: a crash or sanitizer report fails
 * that file alone and names it. The last line is "N passed, N failed". */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int passed, failed;

/* The whole file in a malloc'd buffer of exactly its size (so ASan sees
 * reads past the end), or NULL. */
static uint8_t *slurp(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  uint8_t *buf = NULL;
  size_t n = 0;
  char chunk[4096];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
    uint8_t *grown = realloc(buf, n + got);
    if (!grown) { free(buf); fclose(f); return NULL; }
    buf = grown;
    memcpy(buf + n, chunk, got);
    n += got;
  }
  fclose(f);
  *len = n;
  return buf ? buf : malloc(1);
}

static void replay_file(const char *path)
{
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    size_t len = 0;
    uint8_t *data = slurp(path, &len);
    if (!data) { perror(path); _exit(3); }
    LLVMFuzzerTestOneInput(data, len);
    free(data);
    exit(0); /* exit, not _exit: LeakSanitizer checks at exit */
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) status = -1;
  if (status == 0) { passed++; return; }
  failed++;
  if (pid > 0 && WIFSIGNALED(status)) fprintf(stderr, "FAIL %s: signal %d\n", path, WTERMSIG(status));
  else fprintf(stderr, "FAIL %s: exit %d\n", path, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static int by_name(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of dir, in name order; a missing dir has none. */
static void replay_dir(const char *dir)
{
  DIR *d = opendir(dir);
  if (!d) return;
  char **paths = NULL;
  size_t n = 0;
  struct dirent *ent;
  while ((ent = readdir(d))) {
    if (ent->d_name[0] == '.') continue;
    char **grown = realloc(paths, (n + 1) * sizeof *paths);
    if (!grown) break;
    paths = grown;
    size_t len = strlen(dir) + strlen(ent->d_name) + 2;
    if (!(paths[n] = malloc(len))) break;
    snprintf(paths[n++], len, "%s/%s", dir, ent->d_name);
  }
  closedir(d);
  qsort(paths, n, sizeof *paths, by_name);
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    if (stat(paths[i], &st) == 0 && S_ISREG(st.st_mode)) replay_file(paths[i]);
    free(paths[i]);
  }
  free(paths);
}

int main(int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) replay_dir(argv[i]);
    else if (stat(argv[i], &st) == 0) replay_file(argv[i]);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
