/* interrupt.c — a request, from a signal handler, that the run going in
 * this process stop between two changes (rn_interrupt_runs, runnel.h).
 *
 * One flag for the process: a handler cannot know which pipeline runs. A
 * run takes the request when it sees it (it stops then), and drops one
 * left when it ends for another reason, so that a Ctrl-C that ended a
 * run some other way (a Lua callback raising "interrupted!") does not stop
 * the next. A request made while no run goes waits for the next one. */
#include <signal.h>

#include "pipeline.h"

static volatile sig_atomic_t requested;
static volatile sig_atomic_t running; /* runs going (a run's callback may start another pipeline's) */

RN_API int rn_interrupt_runs(void)
{
  requested = 1;
  return running > 0;
}

void rn_interrupt_run_begins(void)
{
  running++;
}

void rn_interrupt_run_ends(bool stopped)
{
  running--;
  if (!stopped) requested = 0; /* it ended another way: the request does not stop the next run */
}

RN_API void rn_interrupt_withdraw(void)
{
  requested = 0;
}

bool rn_interrupt_taken(void)
{
  if (!requested) return false;
  requested = 0;
  return true;
}
