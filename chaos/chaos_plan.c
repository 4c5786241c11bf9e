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

/* issue 26: an elastic fault of kind f->role (3 loss, 4 join, 5 resize).  A
 * loss lasts several worker timeouts (2 x timeout + 2..4 s), then the
 * worker is restarted; a join's task index is the next free one at run
 * time (chaos_run.c); a resize goes through ctl to the next --resize size. */
static void
plan_elastic(chaos *c, sr_chaos_rng *r, fault *f, int *size, int *rz)
{
    int kind = f->role;

    if (kind == 3 && *size >= 2) {
        f->role = ROLE_WORKER;
        f->action = ACT_LOSS;
        f->task = 1 + (int)(sr_chaos_rng_next(r) % (uint64_t)(*size - 1));
        f->down_s = 2.0 * c->worker_timeout_ms / 1000.0 + 2.0 + 2.0 * sr_chaos_rng_unit(r);
    } else if (kind == 5) {
        f->role = ROLE_COORD;
        f->action = ACT_RESIZE;
        f->resize_to = c->resize[(*rz)++ % c->nresize];
        *size = f->resize_to;
    } else {
        f->role = ROLE_WORKER;
        f->action = ACT_JOIN;
        f->task = -1; /* the next free task index, at run time */
    }
}

/* issue 27: a network fault (kind 6): a host among the coordinator's and
 * the workers' of the current size; its cable pulled, a one-way partition
 * (a worker's host; either direction), a loss burst of 5..30 % or a power
 * loss, for 2..8 s (around the 5 s heartbeat timeout), ending before the
 * quiet tail so that recovery shows. */
static void
plan_network(chaos *c, sr_chaos_rng *r, fault *f, int size)
{
    double u = sr_chaos_rng_unit(r);
    int    host = (int)(sr_chaos_rng_next(r) % (uint64_t)(size + 1));
    int    kind = u < 0.3 ? 0 : u < 0.55 ? 1 : u < 0.8 ? 2 : 3;

    if (kind == 1 && host == 0) {
        host = 1 + (int)(sr_chaos_rng_next(r) % (uint64_t)size);
    }
    f->action = ACT_NET_LINK + kind;
    f->net_host = host;
    f->role = host == 0 ? ROLE_COORD : host == 1 ? ROLE_CHIEF : ROLE_WORKER;
    f->task = host == 0 ? 0 : host - 1;
    f->dir = 1 + (int)(sr_chaos_rng_next(r) % 2);
    f->pct = 5 + (int)(sr_chaos_rng_next(r) % 26);
    f->down_s = 2.0 + 6.0 * sr_chaos_rng_unit(r);
    if (f->t + f->down_s > c->duration - QUIET_TAIL_S) {
        double d = c->duration - QUIET_TAIL_S - f->t;
        f->down_s = d > 0.5 ? d : 0.5;
    }
}

void
sr__chaos_plan_make(chaos *c)
{
    sr_chaos_rng r;
    double       t = 0;
    int          ntargets = 0, size = c->workers, rz = 0, resumed = 0;
    int          roles[7];

    sr_chaos_rng_seed(&r, c->seed);
    for (int i = 0; i < 3; i++) {
        if (c->targets[i]) {
            roles[ntargets++] = i;
        }
    }
    /* issue 26: the elastic faults are kinds 3 (worker-loss), 4 (join) and
     * 5 (a resize through ctl); without them the draws are as before. */
    for (int i = 0; i < 2; i++) {
        if (c->elastic_targets[i]) {
            roles[ntargets++] = 3 + i;
        }
    }
    if (c->resize_runtime && c->nresize > 0) {
        roles[ntargets++] = 5;
    }
    if (c->net_target) {
        roles[ntargets++] = 6; /* issue 27: a network fault */
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
        if (f->role == 6) {
            plan_network(c, &r, f, size);
            continue;
        }
        if (f->role >= 3) {
            plan_elastic(c, &r, f, &size, &rz);
            continue;
        }
        if (f->role == ROLE_WORKER && size < 2) {
            f->role = ROLE_CHIEF; /* no other worker to hit */
        }
        f->task =
            f->role == ROLE_WORKER ? 1 + (int)(sr_chaos_rng_next(&r) % (uint64_t)(size - 1)) : 0;
        f->action = (f->role != ROLE_COORD && sr_chaos_rng_unit(&r) < 0.2) ? ACT_STOP : ACT_KILL;
        f->down_s = f->action == ACT_STOP ? 0.5 + 1.5 * sr_chaos_rng_unit(&r)
                                          : 0.1 + 0.9 * sr_chaos_rng_unit(&r);
        if (f->role == ROLE_COORD) {
            if (c->nresize > 0 && !c->resize_runtime) {
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
