/* buf.c — the thread's out-of-memory flag (buf.h). */
#include "buf.h"

/* An allocation failed since rn_oom_clear. In the static TLS block
 * (initial-exec): one byte of the room glibc keeps there for modules
 * loaded later (the Lua module is dlopened), instead of a block made per
 * thread on first use. Debian 12's LeakSanitizer (GCC 12) walks a
 * dlopened module's dynamic TLS through a stale pointer and crashed at the
 * exit of a child process (make asan, spec/sinks_ndjson_id_spec.lua) once
 * the module's layout moved. */
static _Thread_local bool oom_seen __attribute__((tls_model("initial-exec")));

void rn_oom_note(void) { oom_seen = true; }
bool rn_oom(void) { return oom_seen; }
void rn_oom_clear(void) { oom_seen = false; }
