/* host_fixture.h — a host's state in a fresh directory under /tmp, a map
 * of 1 MiB (so a few MiB of rows make it grow) and one table "t" keyed by
 * "id", for the C tests of a host's own reads and writes. */
#ifndef HOST_FIXTURE_H
#define HOST_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runnel.h"

typedef struct host {
  char dir[64];
  rn_open_opts opts;
  rn_pipeline *p;
  rn_rel *t;
} host;

/* Opens h with write_back as rn_open_opts takes it and declares t with
 * cols (the first one "id", its key). */
static void host_open(host *h, const rn_column_def *cols, int ncols, int write_back)
{
  static const char *const key[] = { "id" };
  memset(h, 0, sizeof *h);
  snprintf(h->dir, sizeof h->dir, "/tmp/runnel-host-XXXXXX");
  CHECK(mkdtemp(h->dir) != NULL);
  h->opts = (rn_open_opts){ .path = h->dir, .write_back = write_back, .map_size = (size_t)1 << 20 };
  char err[512] = "";
  int rc = rn_pipeline_open(&h->opts, &h->p, err, sizeof err);
  if (rc) fprintf(stderr, "  open: %s\n", err);
  CHECK(rc == 0);
  CHECK(rn_declare_table(h->p, "t", cols, ncols, key, 1, &h->t) == 0);
}

/* Closes h and removes its directory. */
static void host_close(host *h)
{
  CHECK(rn_pipeline_close(h->p) == 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", h->dir);
  CHECK(system(cmd) == 0);
}

#endif
