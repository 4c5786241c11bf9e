/*
 * Coordinator internals: accumulators, optimizer kernels, the token queue.
 * Pure data structures with no I/O, so the unit tests drive them directly;
 * server.c wires them to ZeroMQ and the store.  Semantics: DESIGN.md
 * ("The synchronous-replicas semantics") and docs/architecture.md.
 */
#ifndef SR_COORD_INT_H
#define SR_COORD_INT_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/error.h"

/* ---- accumulators ------------------------------------------------------
 *
 * One per trainable variable.  States and transitions:
 *
 *      push(local_step == step), count < R-1        push(count == R-1)
 *   +-------------------------------+   +-------------------------------+
 *   v                               |   |                               v
 *  OPEN(step=g, count=k) -----------+---+                       TAKEN(step=g+1)
 *   ^                                                               |
 *   +------------------ sr__accum_reset() after the apply ----------+
 *
 *  transition                   function
 *  OPEN -> OPEN (k+1)           sr__accum_push_dense / _sparse
 *  OPEN -> TAKEN                same, on the R-th accepted gradient
 *  TAKEN -> OPEN (count 0)      sr__accum_reset
 *
 * Invariants: OPEN: count < R; a gradient is accepted iff its local step
 * equals `step` (older = stale; newer = from before a restart: dropped too).
 * TAKEN: `step` has already advanced, so any further push for the old step
 * is stale even before the variables change; the sum is kept for the apply.
 */

enum { SR_ACC_NONE = 0, SR_ACC_DENSE = 1, SR_ACC_SPARSE = 2 };
enum { SR_SPARSE_MEAN_PER_ROW = 0, SR_SPARSE_MEAN_PER_REPLICA = 1 };

/* One accepted gradient, in summation order (arrival order, or task order
 * with sr__accum_set_rules' deterministic sum). */
typedef struct {
    int32_t task_index;
    int32_t absent; /* a refused (non-finite) gradient: its task's place, no values */
    int64_t local_step;
} sr_contrib;

/* An accepted gradient kept until the take (deterministic sum): dense,
 * `data` holds the accumulator's elems values; sparse, n row indices and
 * n rows.  Buffers grow, never shrink. */
typedef struct {
    void    *data;
    size_t   data_cap;
    int64_t *idx;
    size_t   idx_cap;
    uint64_t n;
} sr_kept;

/* Scratch of the deterministic take: a gradient's place in the sum. */
typedef struct {
    int64_t local_step;
    int32_t task_index;
    int32_t pos; /* arrival */
    int32_t absent;
} sr_contrib_key;

typedef struct sr_accum {
    int         dtype;     /* SR_FLOAT32 or SR_FLOAT64 */
    uint64_t    elems;     /* elements of the variable */
    uint64_t    nrows;     /* first dimension (1 for scalars) */
    uint64_t    row_elems; /* elements per row */
    int         R;         /* gradients to take */
    int64_t     step;      /* accepting gradients computed at this step */
    int         count;     /* accepted this step */
    int         nabsent;   /* of them absent (sr__accum_push_absent): not in the sums */
    int         taken;     /* TAKEN: waiting for the apply */
    int         mode;      /* SR_ACC_NONE until the first accepted push of a step */
    void       *sum;       /* elems values */
    int         sum_ext;   /* sum is the caller's memory (sr__accum_set_sum) */
    int         sum_dirty; /* sum holds old values (a sparse step needs zeros) */
    uint32_t   *row_count; /* sparse: gradients that touched each row this step */
    uint64_t   *touched;   /* sparse: rows touched this step, unordered */
    uint64_t    ntouched;
    sr_contrib *contrib; /* R entries */
    /* The step's rules (sr__accum_set_rules): at most `share` gradients of
     * one task (0: any number); `deterministic`: the sum is formed at the
     * take, in task order, from the gradients kept in `kept` (R entries). */
    int             share;
    int             deterministic;
    sr_kept        *kept;
    sr_contrib_key *keys; /* R entries, with kept */
    /* Scratch for sorting sparse pushes; grows, never shrinks. */
    uint64_t *order;
    size_t    order_cap;
    /* issue 26: elastic.  Entries of contrib, kept and keys (>= R): R
     * changes with sr__accum_set_replicas. */
    int cap;
    /* issue 25: --clip-norm (sr__accum_set_sumsq).  sumsq_on: the take
     * sums the squares of the averaged gradient into `sumsq`, dividing
     * sparse rows as sparse_mean says; sumsq_done: the last push's add
     * already did (no pass of its own at the take). */
    int    sumsq_on;
    int    sparse_mean;
    int    sumsq_done;
    double sumsq;
} sr_accum;

typedef enum {
    SR_ACC_ACCEPTED = 0,
    SR_ACC_STALE = 1,
    /* For the open step, but its task already gave its share: not counted
     * (R replicas are R tasks; DESIGN.md). */
    SR_ACC_OVER_SHARE = 2,
} sr_accum_outcome;

/* Allocate the sums (elems x dtype) lazily on the first push. */
sr_err sr__accum_init(sr_accum *a, int dtype, uint64_t elems, uint64_t nrows, int R, int64_t step);
void   sr__accum_destroy(sr_accum *a);

/* The rules of every step from now on (only while nothing is accepted):
 * a task gives at most `share` of the R gradients (0: no limit; the
 * coordinator uses 1 when N >= R, else ceil(R / N)), and with
 * `deterministic` the R gradients are summed in task order (arrival order
 * within a task) whatever order they came in, so the sum's bits do not
 * depend on timing; each accepted gradient is then kept until the take
 * (R copies of the accumulator's memory at most).  After a deterministic
 * take `contrib` lists the gradients in that summation order. */
void sr__accum_set_rules(sr_accum *a, int share, int deterministic);

/* Add a dense gradient (elems values of the accumulator's dtype, already
 * validated) computed at local_step by task.  *outcome says whether it
 * counted (SR_ACC_OVER_SHARE: the task's share of the step is full).
 * SR_EINVAL if this step already receives sparse gradients. */
sr_err sr__accum_push_dense(sr_accum *a, const void *grad, int64_t local_step, int32_t task,
                            sr_accum_outcome *outcome);

/* Add a sparse gradient: n rows at idx (each < nrows, any order, repeats are
 * summed and count once for the row).  SR_EINVAL for a row out of range or
 * a step that already receives dense gradients; nothing changes then. */
sr_err sr__accum_push_sparse(sr_accum *a, const int64_t *idx, const void *rows, uint64_t n,
                             int64_t local_step, int32_t task, sr_accum_outcome *outcome);

/* A gradient of task's for local_step that was refused (NaN or Inf): it
 * takes the task's place in the step like an accepted one (same staleness
 * and share rules, *outcome as for a push) but adds nothing, so a step
 * never waits for a replacement that cannot come.  At the take the sum is
 * of the present gradients and the divisor is R - nabsent
 * (sr__accum_divisor); with every gradient absent the mode stays
 * SR_ACC_NONE and the apply leaves the variable as it was. */
sr_err sr__accum_push_absent(sr_accum *a, int64_t local_step, int32_t task,
                             sr_accum_outcome *outcome);

/* The dense divisor of a taken accumulator: its present gradients. */
int sr__accum_divisor(const sr_accum *a);

/* The divisor of sparse row r of a taken accumulator: the gradients that
 * touched the row (SR_SPARSE_MEAN_PER_ROW) or sr__accum_divisor
 * (SR_SPARSE_MEAN_PER_REPLICA).  The apply and sr__accum_sumsq share it. */
double sr__accum_row_divisor(const sr_accum *a, uint64_t r, int sparse_mean);

/* issue 25: --clip-norm.  With `on`, every take from now on also sums the
 * squares of the averaged gradient: each element's sum squared in double,
 * eight partial sums by element index mod 8 added in lane order, then the
 * tail, the total divided by the divisor's square (sparse: the touched
 * rows only, each row's by sparse_mean's divisor).  A dense sum's squares
 * are added up inside the add loop of the push that takes the accumulator
 * (or of the deterministic take), so no pass over the sums is added; a
 * take that adds nothing (its last gradient absent, R lowered by
 * sr__accum_set_replicas) and a sparse take read the sums (the touched
 * rows) once more.  Either way the bits are the same.
 * Only while nothing is accepted. */
void sr__accum_set_sumsq(sr_accum *a, int on, int sparse_mean);
/* That sum of a TAKEN accumulator; 0 without sr__accum_set_sumsq or with
 * every gradient absent. */
double sr__accum_sumsq(const sr_accum *a);

/* What a push (mode SR_ACC_DENSE or SR_ACC_SPARSE) computed at local_step
 * by task would do now: 1 be accepted, 0 not be counted (*over_share set
 * when only the task's share stopped it; may be NULL), -1 be refused
 * (this step receives the other kind).  Lets a push that spans several
 * accumulators check them all before changing any. */
int sr__accum_would_accept(const sr_accum *a, int64_t local_step, int32_t task, int mode,
                           int *over_share);

/* issue 26: elastic.  Take from now on at r gradients (r >= 1; R' of
 * docs/architecture.md, "Elastic membership"): the room for them grows when
 * r is above what the accumulator has had.  Lowered while OPEN to r <= the
 * gradients it has (at least one), it is taken at once with all of them
 * (*took = 1; the divisor stays the present gradients, sr__accum_divisor);
 * else *took = 0.  SR_EINVAL for r < 1, SR_ENOMEM; nothing changes then. */
sr_err sr__accum_set_replicas(sr_accum *a, int r, int *took);

/* Back to OPEN after the apply: zero the used part of the sums. */
void sr__accum_reset(sr_accum *a);

/* Add into `sum` (elems values, any contents; the caller owns it and keeps
 * it alive) from now on, or with NULL into memory of the accumulator's own,
 * allocated on the next push.  Only while OPEN with nothing accepted: the
 * coordinator moves the sums' memory into the value at the apply
 * (sr__optim_apply_accum_from with var == sum) and gives the accumulators
 * the previous value's buffer once no pull reads it. */
void sr__accum_set_sum(sr_accum *a, void *sum);

/* ---- optimizers -------------------------------------------------------- */

typedef enum {
    SR_OPT_SGD = 0,
    SR_OPT_MOMENTUM = 1,
    SR_OPT_ADAM = 2,
    SR_OPT_ADAMW = 3, /* issue 25: decoupled weight decay, as torch.optim.AdamW */
} sr_opt_kind;

typedef struct {
    int    kind; /* sr_opt_kind */
    double lr;
    double momentum;              /* momentum: accum = momentum * accum + g */
    double beta1, beta2, epsilon; /* adam */
    double ema_decay;             /* shadow -= (1 - decay) * (shadow - var) */
    int    ema;                   /* keep EMA shadows */
    int    sparse_mean;           /* SR_SPARSE_MEAN_PER_ROW / _PER_REPLICA */
    /* issue 25: the rest of a torch.optim recipe (docs/optimizers.md). */
    int     nesterov;     /* momentum: torch.optim.SGD(nesterov=True) */
    double  weight_decay; /* sgd/momentum/adam: L2 added to g; adamw: decoupled */
    int     lr_schedule;  /* sr_lr_kind (lr_schedule.h) */
    int64_t warmup_steps; /* linear warm-up from 0 over the first W steps */
    int64_t decay_steps;  /* cosine/linear: steps from the end of warm-up to lr_min */
    double  lr_min;       /* cosine/linear: the floor */
    int64_t step_every;   /* step: multiply by step_gamma every step_every steps */
    double  step_gamma;
    double  clip_norm;  /* > 0: scale the step's averaged gradients to global norm <= it */
    double  grad_scale; /* the step's clipping factor (sr__optim_at_step); 0 reads as 1 */
} sr_optim;

/* issue 25: the version of the kernels' arithmetic, recorded in the
 * stored recipe ("optim_formula"): 1 before issue 25 (adam's epsilon
 * outside the bias correction, as TensorFlow), 2 torch.optim 1.13's order
 * (docs/optimizers.md).  A restart on an adam store of an older formula is
 * refused unless --reconfigure. */
#define SR_OPTIM_FORMULA 2

/* Names of the optimizer slots of a configuration (0, 1 or 2), then "ema"
 * if enabled.  Returns the count; names are static strings. */
int sr__optim_slots(const sr_optim *o, const char *names[3]);

/* sr_opt_kind from "sgd|momentum|adam|adamw". */
sr_err      sr__optim_parse(const char *s, int *kind);
const char *sr__optim_name(int kind);

/* issue 25.  The learning rate of global step `step` under o's schedule
 * (lr_schedule.h): the rate of the update that takes step to step + 1. */
double sr__optim_lr_at(const sr_optim *o, int64_t step);
/* The optimizer of that update: o with lr the rate of `step` and, with
 * clip_norm > 0, grad_scale = clip_norm / (sqrt(sumsq) + 1e-6) when that is
 * below 1 (torch.nn.utils.clip_grad_norm_), sumsq being the sum of the
 * squares of every averaged gradient of the step (sr__accum_sumsq of all
 * its accumulators, added in the variables' order, partitions in order).
 * The apply scales in its own pass, so clipping adds no pass over the
 * variables or slots. */
sr_optim sr__optim_at_step(const sr_optim *o, int64_t step, double sumsq);
/* SR_EINVAL naming the option when o's issue-25 settings do not fit
 * together (--nesterov without momentum, a schedule without its steps, a
 * negative --weight-decay or --clip-norm, ...). */
sr_err sr__optim_check(const sr_optim *o);

/* Apply the averaged gradient sum/div to n elements of var, updating the
 * slots s1 (momentum or adam m) and s2 (adam v), as one fused loop, with
 * o->lr the step's rate and o->grad_scale its clipping factor
 * (sr__optim_at_step).  t is the 1-based count of applied steps (adam bias
 * correction).  The order of operations is torch.optim's (1.13,
 * single-tensor): docs/optimizers.md. */
void sr__optim_apply_f32(const sr_optim *o, int64_t t, float *var, const float *sum, double div,
                         float *s1, float *s2, uint64_t n);
void sr__optim_apply_f64(const sr_optim *o, int64_t t, double *var, const double *sum, double div,
                         double *s1, double *s2, uint64_t n);
/* issue 25: the kernels come plain (a * b + c rounded twice) and fused
 * (once, as torch's AVX2 kernels); the fused ones run where the CPU has
 * AVX2 and FMA, decided once at start.  on = 0 or 1 forces one (tests),
 * -1 only asks; returns the one in use before. */
int sr__optim_set_fused(int on);
/* shadow -= (1 - decay) * (shadow - var) over n elements. */
void sr__ema_f32(double decay, float *shadow, const float *var, uint64_t n);
void sr__ema_f64(double decay, double *shadow, const double *var, uint64_t n);

/* Apply a TAKEN accumulator to a variable and its slots (dense: every
 * element; sparse: only touched rows, averaged per row or per replica) and
 * mark the changed chunks in dirty (chunk_elems elements each; may be
 * NULL).  var, s1 and s2 point at the accumulator's first element, which is
 * element elem_base of the variable (a partition; dirty is the variable's).
 * Does not reset the accumulator. */
void sr__optim_apply_accum(const sr_optim *o, int64_t t, const sr_accum *a, void *var, void *s1,
                           void *s2, uint8_t *dirty, uint64_t chunk_elems, uint64_t elem_base);
/* The same, reading the previous value from src and writing the new one to
 * var (the whole range: rows a sparse accumulator did not touch are
 * copied); src == var is the in-place apply.  A dense accumulator's new
 * value may also go into its own sums (var == a->sum, src != var): each
 * element's sum is read before it is overwritten.  Results are
 * bit-identical. */
void sr__optim_apply_accum_from(const sr_optim *o, int64_t t, const sr_accum *a, void *var,
                                const void *src, void *s1, void *s2, uint8_t *dirty,
                                uint64_t chunk_elems, uint64_t elem_base);

/* 1 if any of n values is NaN or Inf. */
int sr__nonfinite(int dtype, const void *p, uint64_t n);

/* ---- the token queue ---------------------------------------------------- */

typedef struct {
    int64_t *v; /* ring buffer of token values (global steps) */
    size_t   cap;
    size_t   head; /* index of the oldest */
    size_t   len;
} sr_tokens;

void sr__tokens_init(sr_tokens *q);
void sr__tokens_destroy(sr_tokens *q);
/* Append n tokens of value v (FIFO). */
sr_err sr__tokens_put(sr_tokens *q, int64_t v, size_t n);
/* Take the oldest; 0 and *out set, or -1 when empty. */
int sr__tokens_take(sr_tokens *q, int64_t *out);
/* Take the oldest token of value >= min (a worker that must wait for a
 * later step's token leaves the older ones to the others, in their order);
 * 0 and *out set, or -1 when there is none. */
int sr__tokens_take_min(sr_tokens *q, int64_t min, int64_t *out);
/* Drop the tokens at the front below v; how many.  Tokens are queued in
 * step order, so these are the oldest. */
size_t sr__tokens_drop_below(sr_tokens *q, int64_t v);
/* Put one back at the front (a token that could not be delivered). */
sr_err sr__tokens_unget(sr_tokens *q, int64_t v);

#endif
