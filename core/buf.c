/* buf.c — the thread's out-of-memory flag (buf.h). */
#include "buf.h"

static _Thread_local bool oom_seen; /* an allocation failed since rn_oom_clear */

void rn_oom_note(void) { oom_seen = true; }
bool rn_oom(void) { return oom_seen; }
void rn_oom_clear(void) { oom_seen = false; }
