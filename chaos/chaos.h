/*
 * The chaos harness: starts a real coordinator and real workers, kills,
 * stops and restarts them on a seeded schedule, resizes the job, and then
 * verifies from the store that nothing was lost (docs/chaos.md).
 */
#ifndef SR_CHAOS_H
#define SR_CHAOS_H

#include <stddef.h>
#include <stdint.h>

#include "chaos/chaos_model.h"
#include "coordinator/coord_int.h"
#include "core/error.h"
#include "store/store.h"

/* `syncrep chaos ...` and `syncrep chaos-worker ...` (argv[0] = the command). */
int sr__chaos_main(int argc, char **argv);
int sr__chaos_worker_cli(int argc, char **argv);
/* model_api: train the --model-api model (sr_chaos_tensors) with
 * sr_client_model_step rather than the variables one by one. */
int sr__chaos_worker_main(const char *endpoint, int task, uint64_t seed, int timeout_ms,
                          int model_api);

/* One coordinator incarnation as recorded in the store. */
typedef struct {
    uint64_t incarnation;
    int64_t  restored_step;   /* the global step it started from */
    int      R;               /* replicas to aggregate in force */
    int      N;               /* total replicas in force (0: not recorded) */
    uint64_t partition_bytes; /* the coordinator's --partition-bytes in force */
    int      rewound;         /* started with --resume-from-step */
} sr_chaos_inc;

/* Everything the verifier judges, loaded from the store (and the harness's
 * observations).  Tests build or alter one to check the verifier fails. */
typedef struct {
    uint64_t          seed;
    sr_optim          optim;
    int64_t           global_step;
    sr_store_contrib *log; /* ordered by (step, var_id, pos) */
    size_t            nlog;
    int64_t           var_id[8];  /* store id of each chaos variable */
    void             *value[8];   /* stored values */
    void             *slot[8][3]; /* stored slots, sr__optim_slots order */
    const char       *slot_name[3];
    int               nslots;
    sr_chaos_inc     *incs; /* ascending incarnation */
    size_t            nincs;
    int64_t          *min_restore; /* per incarnation i >= 1: the least step
                                      incarnation i may restore (the largest
                                      committed step observed before it), or -1 */
    /* issue 26: elastic.  The replicas each step averaged over (table
     * step_replicas), ascending by step; steps without a row took R. */
    sr_store_step_replicas *rep;
    size_t                  nrep;
    /* issue 23: the variables replayed, ascending by store id, which the
     * arrays above index: the chaos model's four variables or, when the
     * store has members (--model-api), the model's packs (1-D, of their
     * dtype; frozen: the not-trainable pack, never pushed) and its sparse
     * tensor.  tensor[v]: the chaos table index of a variable that is one
     * tensor, -1 for a pack. */
    int          nvars;
    sr_chaos_var var[8];
    int          tensor[8];
    /* --model-api: the layout (sr_store_list_members; names point into it)
     * and each member's index in sr_chaos_tensors(). */
    sr_store_member *members;
    size_t           nmembers;
    int             *member_tensor;
} sr_chaos_evidence;

typedef struct {
    const char *name;
    int         passed;
    char        detail[512];
} sr_chaos_check;

/* The invariants sr_chaos_verify judges, in the order of its checks[]
 * (docs/chaos.md, "What is verified"); the harness adds liveness after them. */
enum {
    SR_CHAOS_REPLAY = 0,
    SR_CHAOS_STRICTNESS,
    SR_CHAOS_EXACTLY_R,
    SR_CHAOS_DISTINCT_TASKS,
    SR_CHAOS_NO_LOST_COMMITS,
    SR_CHAOS_NCHECKS
};

/* The name of check i (0 <= i < SR_CHAOS_NCHECKS), as reports print it;
 * a static string ("?" out of range). */
const char *sr__chaos_check_name(int i);

/* Load the evidence from a store (read-only).  Free with sr_chaos_evidence_free. */
sr_err sr_chaos_load(const char *store_path, uint64_t seed, const sr_optim *optim,
                     sr_chaos_evidence *out);
void   sr_chaos_evidence_free(sr_chaos_evidence *e);

/* The integer after "key": in flat JSON text (status replies, stored
 * configs); 0 and *out set, or -1 when the key is absent. */
int sr__chaos_json_i64(const char *json, const char *key, int64_t *out);

/* Judge the evidence; fills checks[SR_CHAOS_NCHECKS]; returns 1 if all pass. */
int sr_chaos_verify(const sr_chaos_evidence *e, sr_chaos_check *checks);

#endif
