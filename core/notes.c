/* notes.c — the pipeline's notes told to the host (notes.h). */
#include "notes.h"

/* fn with each untold note; the pipeline reads as committing meanwhile,
 * so fn can read but not change, declare or close (durable.c's hooks). */
static int tell(rn_pipeline *p, rn_note_fn fn, void *ctx)
{
  if (p->notes_told > p->nnotes) p->notes_told = p->nnotes; /* not expected: forget takes back untold notes only */
  int n = 0;
  rn_gstate state = p->state;
  p->state = RN_COMMITTING;
  while (p->notes_told < p->nnotes) {
    const char *line = p->notes[p->notes_told++]; /* counted first: a note is told once, whatever fn does */
    fn(ctx, line);
    n++;
  }
  p->state = state;
  return n;
}

bool rn_notes_tell(rn_pipeline *p)
{
  if (!p || !p->note_fn) return false;
  if (p->state == RN_IDLE && p->notes_told < p->nnotes && !rn_store_forked(&p->store, &p->err)) /* a child: its fork message stands */
    tell(p, p->note_fn, p->note_ctx);
  return true;
}

int rn_notes_pending(const rn_pipeline *p, const char *const **lines)
{
  int told = p->notes_told < p->nnotes ? p->notes_told : p->nnotes;
  /* Before the first note, notes is NULL: NULL + 0 is undefined behaviour
   * (clang's UBSan stops make fuzz on it), so no offset then. */
  *lines = p->nnotes > told ? (const char *const *)p->notes + told : NULL;
  return p->nnotes - told;
}

void rn_notes_taken(rn_pipeline *p, int n)
{
  p->notes_told += n;
  if (p->notes_told > p->nnotes) p->notes_told = p->nnotes;
}

RN_API int rn_take_notes(rn_pipeline *p, rn_note_fn fn, void *ctx)
{
  if (!p) return RN_EINVAL;
  rn_err_clear(&p->err);
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* as every call on its parent's pipeline */
  if (!fn) return rn_err_set(&p->err, RN_EINVAL, "rn_take_notes needs a callback");
  if (p->state == RN_APPLYING || p->state == RN_COMMITTING)
    return rn_err_set(&p->err, RN_EMISUSE, "rn_take_notes: not from inside a callback");
  return tell(p, fn, ctx);
}
