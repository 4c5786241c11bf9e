/*
 * The fault schedule, drawn from --seed alone before anything runs, so a
 * seed replays the same faults (sr__chaos_plan_make).  docs/chaos.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chaos/chaos.h"
#include "chaos/chaos_model.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "tools/coord_argv.h"
#include "tools/proc.h"
#include "tools/status_client.h"
#include "wire/wire.h"

#include "chaos/chaos_int.h"

/* ---- the plan ----------------------------------------------------------- */

void
sr__chaos_plan_make(chaos *c)
{
    sr_chaos_rng r;
    double       t = 0;
    int          ntargets = 0, size = c->workers, rz = 0, resumed = 0;
    int          roles[3];

    sr_chaos_rng_seed(&r, c->seed);
    for (int i = 0; i < 3; i++) {
        if (c->targets[i]) {
            roles[ntargets++] = i;
        }
    }
    if (ntargets == 0 || c->kill_every <= 0) {
        return;
    }
    for (;;) {
        t += c->kill_every * (0.5 + sr_chaos_rng_unit(&r));
        if (t > c->duration - QUIET_TAIL_S || c->nplan >= MAX_EVENTS) {
            break;
        }
        fault *f = &c->plan[c->nplan++];
        memset(f, 0, sizeof(*f));
        f->t = t;
        f->role = roles[sr_chaos_rng_next(&r) % (uint64_t)ntargets];
        if (f->role == ROLE_WORKER && size < 2) {
            f->role = ROLE_CHIEF; /* no other worker to hit */
        }
        f->task =
            f->role == ROLE_WORKER ? 1 + (int)(sr_chaos_rng_next(&r) % (uint64_t)(size - 1)) : 0;
        f->action = (f->role != ROLE_COORD && sr_chaos_rng_unit(&r) < 0.2) ? ACT_STOP : ACT_KILL;
        f->down_s = f->action == ACT_STOP ? 0.5 + 1.5 * sr_chaos_rng_unit(&r)
                                          : 0.1 + 0.9 * sr_chaos_rng_unit(&r);
        if (f->role == ROLE_COORD) {
            if (c->nresize > 0) {
                f->resize_to = c->resize[rz++ % c->nresize];
                size = f->resize_to;
            }
            if (!resumed && t >= c->duration / 3) {
                f->resume = 1; /* exercise --resume-from-step once per run */
                resumed = 1;
            }
        }
    }
}
