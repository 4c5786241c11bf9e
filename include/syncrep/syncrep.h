/*
 * syncrep client library (libsyncrep): what a training program links to take
 * part in synchronous data-parallel training served by `syncrep coordinator`.
 *
 * The loop is  pull -> compute -> push -> step:
 *
 *     sr_client_open(&c, &opts);
 *     sr_client_declare(c, "w", SR_FLOAT32, 2, shape, init);   (every worker)
 *     sr_client_ready(c);          chief: mark ready; others: wait for it
 *     for (;;) {
 *         sr_client_pull(c, "w", w, sizeof w);
 *         ... compute grad from w ...
 *         sr_client_push(c, "w", grad, sizeof grad);
 *         sr_client_step(c);       wait for a token: the barrier
 *     }
 *
 * (or, for the last push of a round, sr_client_push_step: the push and the
 * token request in one message.)
 *
 * Every call returns 0 or a negative SR_E... code (syncrep/error.h);
 * sr_client_error() gives the last failure's text.  One client belongs to
 * one thread at a time; many clients per process are fine.  Coordinator
 * restarts are handled inside the calls (see docs/protocol.md).
 */
#ifndef SYNCREP_SYNCREP_H
#define SYNCREP_SYNCREP_H

#include <stddef.h>
#include <stdint.h>

#include "syncrep/dtype.h"
#include "syncrep/error.h"
#include "syncrep/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sr_client sr_client;

typedef struct {
    const char *endpoint;          /* e.g. "tcp://127.0.0.1:7070" */
    int         task_index;        /* 0 is the chief */
    int         timeout_ms;        /* 0 = default (60000): how long the coordinator may
                                      be unreachable before a call fails SR_ETIMEDOUT */
    const char *server_public_key; /* Z85 CURVE keys; NULL = plaintext */
    const char *public_key;
    const char *secret_key;
    /* Issue 27: finding a dead or half-open coordinator in seconds
     * (docs/network.md).  0 = the default; -1 = off. */
    int heartbeat_ivl_ms;      /* ZeroMQ PING every this often (default 1000) */
    int heartbeat_timeout_ms;  /* no traffic this long after a PING: the connection is
                                  dropped and made again, what was in flight resent
                                  (default 5000; also the TTL the coordinator is given) */
    int connect_timeout_ms;    /* a TCP connect attempt not answered this long is tried
                                  again (default 2000), so a returning link is found at
                                  once rather than after the kernel's SYN back-off */
    int tcp_keepalive_idle_s;  /* TCP keepalive: idle seconds before the first probe
                                  (default 10; -1 = the kernel's settings, keepalive off) */
    int tcp_keepalive_intvl_s; /* seconds between probes (default 2) */
    int tcp_keepalive_cnt;     /* unanswered probes before the kernel drops it (default 3) */
} sr_client_options;

/* Per-client counts of what the coordinator answered to this client's pushes
 * (every push is acknowledged as exactly one of these). */
typedef struct {
    uint64_t pushes;       /* push calls that completed */
    uint64_t accepted;     /* counted into an accumulator */
    uint64_t stale;        /* dropped: computed at an old step or incarnation */
    uint64_t duplicate;    /* a resend the coordinator had already counted */
    uint64_t resyncs;      /* coordinator restarts this client noticed */
    uint64_t resends;      /* requests sent again after no answer */
    uint64_t pulls_cached; /* pulls served from the variables that came with the last
                              token (no round trip; the model was small enough) */
} sr_client_stats;

/* Open a client and say hello to the coordinator (waits up to timeout_ms for
 * it).  *out is written only on success; close with sr_client_close().
 * Errors: SR_EINVAL (options), SR_EMSG, SR_ETIMEDOUT, SR_ENOMEM.
 * The first call in a process makes glibc keep freed buffers of up to
 * 32 MiB for reuse (mallopt M_MMAP_THRESHOLD 32 MiB, M_TRIM_THRESHOLD
 * 1 GiB), so that the values and gradients ZeroMQ allocates every step do
 * not page-fault afresh; the environment variable SYNCREP_MALLOPT=0 leaves
 * the allocator alone (docs/operations.md, The allocator). */
SR_API int sr_client_open(sr_client **out, const sr_client_options *opts);

/* Close the connection and free everything.  NULL is fine. */
SR_API void sr_client_close(sr_client *c);

/* Text of the last failure on this client ("" if none).  Valid until the next
 * call on `c`. */
SR_API const char *sr_client_error(const sr_client *c);

/* Declare a variable.  The chief's declaration (with initial_value, dtype x
 * shape bytes) creates it on an empty store; a restarted chief's declaration
 * is checked against the store (SR_EEXIST on another dtype or shape, store
 * untouched); a new variable declared later is created and logged.
 * Non-chief workers may declare too: it checks the variable exists with that
 * dtype and shape once the model is ready (initial_value may be NULL).
 * ndim 0 is a scalar; ndim <= 8.
 * Names are 1..255 bytes of well-formed UTF-8 without control characters
 * (C0, DEL, C1): "layer1.0.conv1.weight", spaces, quotes, slashes, any script
 * and emoji are fine; a newline, an escape code or invalid UTF-8 (overlong,
 * surrogate, above U+10FFFF, cut short) is SR_EINVAL before anything is sent,
 * sr_client_error() saying what is wrong at which byte (the name escaped).
 * The pulls and pushes refuse such a name the same way (docs/protocol.md,
 * DECLARE: Names).  Blocks for one round trip (one per 8 MiB part of a
 * bigger initial value, which goes in parts so that no message exceeds the
 * coordinator's limit: docs/protocol.md, DECLARE). */
SR_API int sr_client_declare(sr_client *c, const char *name, sr_dtype dtype, int ndim,
                             const int64_t *shape, const void *initial_value);

/* Flags for sr_client_declare_ex. */
#define SR_DECLARE_NOT_TRAINABLE 0x1 /* pulled only; pushes to it are refused */
/* sr_client_declare_model: a tensor whose gradients are pushed as rows
 * (sr_client_push_sparse) beside the model's step: it is kept as a variable
 * of its own rather than in a pack.  The wire carries it in a vardesc's
 * flags beside SR_WIRE_DECLARE_CHECK_ONLY (0x2) and _PART (0x4). */
#define SR_DECLARE_SPARSE 0x8

/* As sr_client_declare, with flags (SR_DECLARE_*).  int32/int64 variables
 * are never trainable. */
SR_API int sr_client_declare_ex(sr_client *c, const char *name, sr_dtype dtype, int ndim,
                                const int64_t *shape, const void *initial_value, unsigned flags);

/* Chief: create what is missing and mark the model ready.  Others: wait until
 * the model is ready (as long as the coordinator is reachable).  Both: set
 * the local step to the global step. */
SR_API int sr_client_ready(sr_client *c);

/* The chief (task 0) ends the job at the current global step (the steps
 * applied so far are committed; a step in progress is dropped): the other
 * workers' waiting and later sr_client_step, sr_client_push_step and
 * flushed pushes return SR_EDONE, as they do when the coordinator's
 * --max-steps is reached; pulls of the final values still work.  SR_EINVAL
 * from another task; 0 also when the job had ended already. */
SR_API int sr_client_finish(sr_client *c);

/* Copy the variable's current value into dst (dst_bytes must be exactly
 * dtype x shape bytes, else SR_EINVAL). */
SR_API int sr_client_pull(sr_client *c, const char *name, void *dst, size_t dst_bytes);

/* Pull n variables: names[i] into dsts[i] (dst_bytes[i] exactly its size,
 * as sr_client_pull).  The pulls travel together, up to 24 names a request
 * and 192 variables (8 MiB of values; a bigger variable alone) in flight at
 * a time, so a model of many variables costs about one round trip rather
 * than one per variable.  The values of one request are of one moment; a
 * step may be applied between two requests, as between two sr_client_pull
 * calls.  Pulls the last token carried are served from it (see
 * sr_client_step).  Returns 0, or the first failure (the other buffers may
 * or may not have been written); n = 0 does nothing. */
SR_API int sr_client_pull_many(sr_client *c, size_t n, const char *const *names, void *const *dsts,
                               const size_t *dst_bytes);

/* Push a dense gradient for the local step.  bytes must equal the variable's
 * size; the variable must be float32/float64 and trainable.  Every push is
 * acknowledged as accepted, stale or duplicate (see sr_client_stats); the
 * training loop need not care which.
 *
 * A push of a variable this client declared, of at most 1 MiB, is pipelined:
 * the gradient is copied, sent, and the call returns without waiting, so
 * that the pushes and the token request of a round share one round trip.
 * Its answer is taken by the next blocking call (sr_client_step, or
 * sr_client_flush); a refusal of it is returned by that call.  A variable
 * above the coordinator's partition size (--partition-kib) travels as one
 * PUSH per partition, sent from `grad`: the call returns once all but the
 * last are answered, and the last (copied) is pipelined the same way
 * (docs/protocol.md, Partitions).  Any other push returns once the
 * coordinator has answered it.  A partition counts in sr_client_stats as a
 * push of its own.  A message above the coordinator's limit (its
 * --max-message-mib; partitions off, or one huge row) is refused here with
 * SR_EINVAL, nothing sent. */
SR_API int sr_client_push(sr_client *c, const char *name, const void *grad, size_t bytes);

/* Push dense gradients of n variables: names[i] gets grads[i] (bytes[i]), as
 * n sr_client_push calls would, except that the pipelined ones (variables
 * this client declared, of at most 1 MiB) leave ten to a message, so a
 * model of many small variables costs a message per ten pushes rather than
 * one each.  Everything is sent when the call returns; the answers are
 * taken as for sr_client_push.  Returns 0, or the first failure (the items
 * after it are not pushed). */
SR_API int sr_client_push_many(sr_client *c, size_t n, const char *const *names,
                               const void *const *grads, const size_t *bytes);

/* Wait until every push sent so far is answered.  Returns 0, or the refusal
 * of a pipelined push (SR_EINVAL ...), or a transport error. */
SR_API int sr_client_flush(sr_client *c);

/* Push a sparse gradient: nrows rows of the variable's row shape (first
 * dimension = row), at the given row indices (any order; repeated indices are
 * summed).  rows_bytes = nrows x row size. */
SR_API int sr_client_push_sparse(sr_client *c, const char *name, size_t nrows,
                                 const int64_t *row_indices, const void *rows, size_t rows_bytes);

/* Take a step token (blocks while other workers finish the step; this is not
 * a timeout while the coordinator is alive); local step = the token's value.
 * If this client pulled in the round before, the coordinator sends the
 * variables with the token when the model is small (coordinator option
 * --piggyback-max-kib), and this round's pulls are served from them. */
SR_API int sr_client_step(sr_client *c);

/* sr_client_push, then sr_client_step, for a training loop's last push of
 * a round: a dense push of a variable this client declared that is not
 * split into partitions (whatever its size) leaves in the same message as
 * the TOKEN request, sent from `grad` without a copy, and its answer comes
 * back in the TOKEN reply's message, so a small model's step is one message
 * each way (docs/protocol.md, Chains).  Any other push goes as
 * sr_client_push sends it.  A push refused here (argument, name, size, as
 * sr_client_push) returns its error and takes no step; a refusal by the
 * coordinator is returned by this call, after the step.  If the step fails
 * (SR_ETIMEDOUT ...), an unanswered push from `grad` is forgotten, never
 * re-sent. */
SR_API int sr_client_push_step(sr_client *c, const char *name, const void *grad, size_t bytes);

/* The local step (no I/O). */
SR_API int64_t sr_client_local_step(const sr_client *c);

/* Ask the coordinator for the global step. */
SR_API int sr_client_global_step(sr_client *c, int64_t *out);

/* Copy the push counters (no I/O). */
SR_API int sr_client_stats_get(const sr_client *c, sr_client_stats *out);

/* The coordinator incarnation this client last spoke to (no I/O). */
SR_API uint64_t sr_client_incarnation(const sr_client *c);

/* ---- The model as the unit of a step -----------------------------------
 *
 * A program that trains a whole model declares it once and then makes one
 * call per round:
 *
 *     sr_tensor_spec t[n] = {{"conv1.weight", SR_FLOAT32, 4, shape0, init0, 0}, ...};
 *     sr_client_declare_model(c, n, t);     (every worker; the chief's initial values)
 *     sr_client_ready(c);
 *     sr_client_model_pull(c, values);      the current values into values[i]
 *     for (;;) {
 *         ... compute grads[i] from values[i] ...
 *         sr_client_model_step(c, grads, values);   push, token, fresh values
 *     }
 *
 * The coordinator keeps the tensors of one dtype and trainability in one
 * large variable, a pack (docs/architecture.md, "Packs"), so that a step
 * costs what its bytes cost, whatever the number of tensors: the pack
 * travels, accumulates, applies and commits as one variable, split into
 * partitions of --partition-kib.  The tensors keep their names: a pull of
 * one (sr_client_pull), `syncrep store inspect` / `export` and the chaos
 * verifier see them.  A tensor flagged SR_DECLARE_SPARSE stays a variable
 * of its own: push its rows with sr_client_push_sparse before the step
 * call.  Not trainable tensors (and int32/int64 ones) are pulled once, not
 * every round.  The layout is the coordinator's and stored: a restarted
 * program may list the tensors in another order; one that lacks a stored
 * tensor or changes one's dtype, shape or trainability is refused, naming
 * it (SR_EINVAL / SR_EEXIST), and new tensors join a ready model only with
 * the coordinator's --allow-new-variables.  The per-variable calls above
 * stay for programs that need them; they cannot push to a pack's tensor. */
typedef struct {
    const char    *name; /* as sr_client_declare's */
    sr_dtype       dtype;
    int            ndim;
    const int64_t *shape;
    const void    *initial_value; /* the chief's (dtype x shape bytes; NULL: zeros);
                                     others' is ignored */
    unsigned flags;               /* SR_DECLARE_NOT_TRAINABLE, SR_DECLARE_SPARSE */
} sr_tensor_spec;

/* Declare the model: n tensors, in the order the other model calls index
 * them.  Blocks for the coordinator's layout (others wait for the chief's,
 * as sr_client_ready waits for its model), then declares the packs as
 * sr_client_declare_ex would (the chief's in parts when big).  Once per
 * client, before sr_client_ready.  Errors as sr_client_declare's, naming
 * the tensor. */
SR_API int sr_client_declare_model(sr_client *c, size_t n, const sr_tensor_spec *tensors);

/* Pull every tensor's current value; values[i] (dtype x shape bytes of
 * tensor i) receives it, NULL entries (or values NULL) only the client's
 * own copy (sr_client_model_value).  After sr_client_ready. */
SR_API int sr_client_model_pull(sr_client *c, void *const *values);

/* One round: push grads[i] for every trainable dense tensor (a NULL entry:
 * a zero gradient; grads NULL: push what sr_client_model_grad's buffers
 * hold), take the step token (the last pack's push travels with its
 * request), then pull the values that changed into values[i] (as
 * sr_client_model_pull).  Returns as sr_client_push_step (SR_EDONE when the
 * job has ended, SR_ENONFINITE ...). */
SR_API int sr_client_model_step(sr_client *c, const void *const *grads, void *const *values);

/* The client's own copy of tensor i's value (valid until sr_client_close;
 * rewritten by the pulls), or NULL for no such tensor. */
SR_API void *sr_client_model_value(sr_client *c, size_t i);

/* Tensor i's place in the gradient buffer sr_client_model_step pushes when
 * its grads is NULL (write the gradient there, no copy is made); NULL for a
 * tensor that is not trainable or is sparse. */
SR_API void *sr_client_model_grad(sr_client *c, size_t i);

/* ---- issue 24: cursor.  Exactly-once data across restarts
 * (docs/python.md, Exactly-once data; docs/protocol.md, CURSOR). ---- */

#define SR_CURSOR_MAX 4096 /* bytes of a data cursor */

/* Send this worker's data cursor (opaque bytes, at most SR_CURSOR_MAX:
 * epoch, position, RNG state ...) for the round it is computing: the
 * position after this round's samples.  Call it once a round, before the
 * round's pushes (one round trip).  The coordinator commits it with the
 * step this round's gradient goes into, and only then: a round whose
 * pushes are all dropped (stale, or before a coordinator restart) leaves
 * the cursor where it was.  SR_EINVAL for len > SR_CURSOR_MAX (nothing
 * sent). */
SR_API int sr_client_set_cursor(sr_client *c, const void *cursor, size_t len);

/* The cursor to resume from: the one of the last step this worker's
 * gradient went into (set by sr_client_set_cursor in this process, or, for
 * a restarted worker and after a coordinator restart, the coordinator's
 * committed one; one round trip then).  Empty (*len = 0) when none was
 * ever committed.  Copies it into buf (cap bytes; SR_EINVAL when cap is
 * smaller, *len untouched) and sets *len. */
SR_API int sr_client_cursor(sr_client *c, void *buf, size_t cap, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
