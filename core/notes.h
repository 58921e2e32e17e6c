/* notes.h — the pipeline's notes told to the host (runnel.h: rn_note_fn).
 *
 * p->notes holds every line since open (evolve.c, outbox.c add them; a
 * declaration that fails takes its own back, rn_evolve_forget). The first
 * p->notes_told of them were told: to the notes callback of rn_open_opts,
 * by rn_take_notes, or taken by the Lua binding (p:_take_notes). */
#ifndef RN_NOTES_H
#define RN_NOTES_H

#include "pipeline.h"

/* Tells the notes callback, if the host set one, the notes not yet told.
 * Called at the end of every call that may have made notes; does nothing
 * inside a group or a callback (they wait for the next). Returns whether
 * p has a callback. */
bool rn_notes_tell(rn_pipeline *p);

/* The notes not yet told (*lines: the first of them, owned by p, valid
 * until the next declaration); their count. rn_notes_taken(p, n) counts
 * n of them told. */
int rn_notes_pending(const rn_pipeline *p, const char *const **lines);
void rn_notes_taken(rn_pipeline *p, int n);

#endif
