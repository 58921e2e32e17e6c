/* test_open_edges17.c — rn_pipeline_open and rn_state_copy of a directory
 * that holds the user's files and no state: refused, naming the path and a
 * file in it, and nothing written there (core/store.c make_dir,
 * rn_store_foreign_entry; spec/open_edges17_spec.lua from Lua). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "runnel.h"

static int entries(const char *dir)
{
  char cmd[256];
  snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", dir);
  FILE *f = popen(cmd, "r");
  int n = -1;
  if (f) {
    if (fscanf(f, "%d", &n) != 1) n = -1;
    pclose(f);
  }
  return n;
}

static void put(const char *dir, const char *name)
{
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (f) { fputs("mine\n", f); fclose(f); }
}

static void test_open_refuses_a_directory_of_files(void)
{
  char dir[] = "/tmp/rn_open17_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  put(dir, "notes.txt");
  rn_open_opts o = { .path = dir };
  rn_pipeline *p = NULL;
  char err[512] = "", want[512];
  CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == RN_EIO);
  CHECK(p == NULL);
  snprintf(want, sizeof want, "cannot open state %s: the directory holds notes.txt and no runnel state (a state is a "
           "directory, new or empty at first)", dir);
  CHECK(strcmp(err, want) == 0);
  CHECK(entries(dir) == 1);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

static void test_copy_refuses_a_directory_of_files(void)
{
  char dir[] = "/tmp/rn_open17_XXXXXX", dest[] = "/tmp/rn_open17_dest_XXXXXX";
  CHECK(mkdtemp(dir) != NULL && mkdtemp(dest) != NULL);
  rn_open_opts o = { .path = dir };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  put(dest, "b");
  put(dest, "a");
  char err[512] = "", want[512];
  CHECK(rn_state_copy(dir, dest, err, sizeof err) == RN_EMISUSE);
  snprintf(want, sizeof want, "%s: the directory holds a and 1 more entry and no runnel state (a snapshot goes to a "
           "new or empty directory)", dest);
  CHECK(strcmp(err, want) == 0);
  CHECK(entries(dest) == 2);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -f %s/a %s/b", dest, dest);
  CHECK(system(cmd) == 0);
  CHECK(rn_state_copy(dir, dest, err, sizeof err) == 0); /* empty now: it takes the copy */
  snprintf(cmd, sizeof cmd, "rm -rf %s %s", dir, dest);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_open_refuses_a_directory_of_files);
  RUN(test_copy_refuses_a_directory_of_files);
  return CHECK_REPORT();
}
