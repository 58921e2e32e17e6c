/* stream_ids_fixture.h — a stream "ev" of one int column whose event ids a
 * subscriber keeps: for the C tests of the ids a stream numbers its events
 * with (test_event_ids14.c, test_event_counters20.c). Include it once per
 * test. */
#ifndef STREAM_IDS_FIXTURE_H
#define STREAM_IDS_FIXTURE_H

#include "check.h"
#include "runnel.h"

static const rn_column_def v_col[] = { { "v", "int", 0, NULL, 0, NULL } };

typedef struct ids { uint64_t id[16]; int n; } ids;

static inline int keep_id(void *ctx, const rn_event *ev)
{
  ids *s = ctx;
  if (s->n < 16) s->id[s->n++] = ev->id;
  return 0;
}

/* Stream "ev" declared in p (*rc: the declaration's code), its ids kept in
 * *seen. */
static inline rn_rel *stream_at(rn_pipeline *p, ids *seen, int *rc)
{
  rn_rel *ev = NULL;
  *rc = rn_declare_stream(p, "ev", v_col, 1, &ev);
  if (!*rc) CHECK(rn_subscribe(p, ev, keep_id, seen) == 0);
  return ev;
}

#endif
