/*
 * The coordinator server's internals, shared by its files.  In data-path
 * order: server_model.c (the model's memory), server_push.c (gradients in),
 * server_step.c (apply, the commit policy, tokens out), server_commit.c
 * (commits, the async writer), server_peers.c (clients, held answers,
 * parked tokens), server_reply.c (replies), server_handshake.c and
 * server_pull.c (the other requests), server_status.c, server_start.c and
 * server.c (the loop).  Here: the lifecycle's diagram, the I/O seam, the
 * shared types and the cross-file functions, grouped by the file that
 * defines them.  The kernels they drive are coord_int.h's.
 * docs/architecture.md, "The coordinator's loop".
 */
#ifndef SR_SERVER_INT_H
#define SR_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "coordinator/auth.h"
#include "coordinator/ckpt_policy.h"
#include "coordinator/coord_int.h"
#include "coordinator/coordinator.h"
#include "coordinator/metrics.h"
#include "core/error.h"
#include "core/strbuf.h"
#include "store/store.h"
#include "syncrep/syncrep.h" /* SR_DECLARE_NOT_TRAINABLE: a DECLARE's flag on the wire */
#include "wire/wire.h"

#define MAX_PARTS        32   /* routing id + header + at most 3 body frames; chains */
#define PARKED_EXPIRE_MS 3500 /* clients re-send TOKEN every second while they wait */
/* A client still heard from this long after another with its task index
 * joined: two workers share the index (check_shared_tasks). */
#define SHARED_TASK_MS  2000
#define SR_COORD_RCVHWM 64 /* queued messages per peer: bounds a flooder's memory */
/* Replies queued per peer: above what a client may have unanswered (256
 * pipelined pushes, a token, pings), so no answer is dropped at the HWM. */
#define SR_COORD_SNDHWM 1024
/* Pull replies per client still being sent (each holds a value: a client
 * that asks and does not read must not pin one value per step): at most
 * PULLS_IN_FLIGHT, and beyond the first PULLS_IN_FLIGHT_BIG only while they
 * hold at most PULL_PIN_BYTES.  Twice what sr_client_pull_many keeps in
 * flight (192, 8 MiB): a reply the client has read may not be released yet
 * (ZeroMQ releases a message when it moves on to the next). */
#define PULLS_IN_FLIGHT        384
#define PULLS_IN_FLIGHT_BIG    4
#define PULL_PIN_BYTES         (16u << 20)
#define SR_COORD_MAX_VARIABLES 65536 /* declared variables (docs/security.md) */
#define PUSH_REPLY_HOLD_MS     200   /* longest a push's answer waits for the token's */
/* Push answers held per client: a burst stays far below the send HWM (a
 * reply that meets it is lost, then resent); to a client that sends chains
 * they go in one message (a model of many small variables). */
#define PUSH_REPLY_HOLD_MAX       8
#define PUSH_REPLY_HOLD_MAX_CHAIN 64
/* A client that left is forgotten this long after it was last heard from
 * (sooner when the client table is full). */
#define RECLAIM_AFTER_MS     60000
#define SPARE_WAIT_MS        50  /* the longest a push waits for a pull of the old value */
#define SPARE_WAIT_OFF_STEPS 100 /* steps without that wait after one ran out */

/* A variable's value, shared with the pull replies in flight and, with
 * --commit async, the writer: ZeroMQ sends pulls from this memory and drops
 * its reference from its I/O thread, so the count is atomic.  The loop
 * writes only to a buffer nobody else holds: when the value is still read,
 * the apply writes the new value into another buffer (sr__coord_apply_target), so
 * neither a pull nor a commit ever copies the value.  With --commit sync
 * that buffer is the accumulators' own (a dense step's sums become the new
 * value, and the previous value becomes the next step's sums once no pull
 * reads it): a variable then lives in two buffers, never three for long. */
typedef struct vbuf {
    atomic_int refs;
    _Alignas(64) uint8_t data[];
} vbuf;

typedef struct cvar {
    sr_store_var meta;
    void        *value; /* vb->data */
    vbuf        *vb;
    /* A free (or soon free) buffer: async, the previous value for the next
     * apply; sync, the previous value for the next step's sums. */
    vbuf   *spare;
    vbuf   *ab;              /* the accumulators' sums, laid out like the value; NULL: none */
    int64_t spare_wait_from; /* sr__coord_acc_memory waits for the spare from this global step */
    void   *s1, *s2, *ema;   /* optimizer slots and EMA shadow (NULL if unused) */
    /* Trainable only: one accumulator per partition (docs/protocol.md,
     * Partitions); partition p holds rows [p * part_rows, ...). */
    sr_accum *acc;
    uint32_t  nparts;
    uint64_t  rows, row_elems, part_rows;
    int       has_acc;
    uint8_t  *dirty; /* per chunk, changed since the last commit */
    size_t    nchunks;
    uint64_t  chunk_elems;
    int       dirty_any;
    /* Token deltas (issue 23): a client holding the values of global step
     * fresh_from or later holds this value (the step it changed in, + 1). */
    int64_t fresh_from;
} cvar;

/* A pull reply ZeroMQ is still sending: it holds a reference on a value,
 * released from ZeroMQ's I/O thread (then `busy` drops to 0). */
typedef struct pull_slot {
    atomic_int busy;
    vbuf      *vb;
    uint64_t   bytes;
} pull_slot;

/* A push's answer held back to go out with the client's next reply. */
typedef struct held_reply {
    sr_wire_header h; /* the push's header */
    int64_t        step;
    uint8_t        outcome;
} held_reply;

typedef struct client {
    uint64_t client_id;
    int32_t  task;
    uint8_t  rid[256]; /* current ZeroMQ routing id */
    size_t   rid_len;
    uint64_t last_seq;  /* highest push seq processed */
    uint64_t last_req;  /* highest non-PING request id seen */
    uint64_t token_req; /* last answered TOKEN request id, and its value */
    int64_t  token_val;
    int      parked;
    uint64_t parked_req;
    uint64_t parked_order; /* FIFO among parked clients */
    int      parked_want;  /* the parked TOKEN asked for the variables */
    int64_t  parked_have;  /* ... holding those of this global step (SR_WIRE_F_HAVE_VARS), or -1 */
    int64_t  last_seen_ms; /* monotonic */
    /* Push answers held back (sr__coord_flush_held): a worker pushes, then asks for
     * its token; both answers leave together, one wake-up for the worker. */
    held_reply *held;
    size_t      nheld, cap_held;
    int64_t     held_since_ms;
    pull_slot  *pulls; /* PULLS_IN_FLIGHT, allocated at the first pull */
    int         gone;
    int64_t     joined_ms;     /* monotonic */
    int         shared_warned; /* COORD-TASK-SHARED logged for it */
    uint64_t    chained;       /* requests that came in chains: answers go chained too */
    /* Tokens below this step are not for it: a push of it counted nowhere
     * because its task had given its share of the open step (finish_push). */
    int64_t min_token;
    /* The value of the last token it was given and how many of that value
     * (token_floor): a worker takes at most its task's share of the
     * tokens of one step, so it cannot take another worker's. */
    int      have_token;
    int64_t  last_token;
    int      last_token_count;
    uint64_t accepted, stale, duplicate, errors, over_share;
} client;

typedef struct worker {
    int32_t task;
    int64_t local_step;
    int64_t last_seen_wall_ms;
    /* The counts of its clients reclaimed so far (reclaim_client). */
    uint64_t accepted, stale, duplicate, errors, chained, over_share;
    /* issue 26: elastic.  The membership table (server_members.c): live
     * while a client of the task is not gone (heard from within
     * --worker-timeout-ms, no BYE); when it last became live and left. */
    int     live;
    int64_t joined_wall_ms; /* wall clock, ms; 0: never live in this incarnation */
    int64_t left_wall_ms;   /* wall clock, ms; 0: has not left */
    /* issue 24: cursor (server_cursor.c).  The task's data cursors: `cur`
     * of the last applied step its gradient went into (cur_known: set in
     * this incarnation, or read from the store; else the store's stands);
     * `conf` the one sent for step conf_step, confirmed by a push of it
     * accepted after it (applied once the global step passes conf_step);
     * `pend` the one sent for step pend_step, not confirmed yet. */
    int      cur_known, conf_have, pend_have;
    int64_t  conf_step, pend_step;
    uint32_t cur_len, conf_len, pend_len;
    uint8_t  cur[SR_WIRE_CURSOR_MAX], conf[SR_WIRE_CURSOR_MAX], pend[SR_WIRE_CURSOR_MAX];
} worker;

/* issue 26: elastic.  The changes `syncrep ctl` asked for, applied at the
 * next step boundary (server_ctl.c, server_members.c). */
typedef struct el_ctl {
    int    has_R, R;
    int    has_N, N;
    int    has_M, M;
    int    has_lr;
    double lr;
} el_ctl;

/* ---- the lifecycle (one coordinator process = one incarnation) ---------
 *
 *  STARTING --sr__coord_start--> WAIT_MODEL --READY (mark) from the chief--> SERVING
 *                                 |   (or at once: the store's model is ready)  |
 *                                 | stop flag                                   | stop flag
 *                                 v                                             v
 *                              STOPPED <--no step in progress, or grace_ms-- DRAINING
 *                                 ^
 *                                 +-- every client left, DONE_LINGER_MS, stop -- DONE
 *                                       (SERVING -> DONE: --max-steps reached, or FINISH)
 *
 *  transition             function
 *  STARTING -> WAIT_MODEL sr__coord_wait_model (from sr__coord_start: a new
 *                         incarnation, the rewind asked for, the model loaded)
 *  WAIT_MODEL -> SERVING  sr__coord_serve (init tokens; from sr__coord_start
 *                         when the store's model is ready, else handle_ready)
 *  SERVING -> DRAINING    drain (server.c), once the stop flag is seen
 *  WAIT_MODEL -> STOPPED  drain: no step can be in progress without a model
 *  DRAINING -> STOPPED    stop_when_drained (server.c)
 *  SERVING -> DONE        sr__coord_end_job (server.c): the global step reached
 *                         --max-steps (release_tokens), or the chief's FINISH
 *  DONE -> STOPPED        stop_when_done (server.c)
 *  any -> STOPPED         sr_coord_run, when polling the socket fails
 *
 * Invariants.  STARTING: no message has been handled; the store was opened
 * (and a refused start has written nothing).  WAIT_MODEL: the chief may
 * declare variables; pushes, pulls and tokens are answered SR_ENOTREADY.
 * SERVING and DRAINING (the model is ready, sr__coord_model_ready): every
 * trainable variable has its accumulators; those not TAKEN accept exactly
 * local_step == global_step; the tokens of step g are released only after
 * step g is committed (when the policy commits it; server_step.c).
 * DRAINING: requests are still served until the step in progress applies,
 * or drain_deadline_ms passes.  DONE: the job has ended at global_step;
 * pulls are served, pushes and tokens answered SR_EDONE, no token is
 * queued.  STOPPED: the loop has ended; the final
 * commit follows.  A message never crashes the loop: every decode and check
 * happens before any state changes, and failures get an error reply. */
typedef enum {
    COORD_STARTING = 0,
    COORD_WAIT_MODEL = 1,
    COORD_SERVING = 2,
    COORD_DRAINING = 3,
    COORD_STOPPED = 4,
    COORD_DONE = 5,
} coord_state;

/* ---- the I/O seam -------------------------------------------------------
 *
 * Every frame a handler sends and every clock reading of the handlers and
 * peers goes through these (server_reply.c sr__coord_send / _send_msg,
 * sr__coord_now_ms), so a unit test drives sr__coord_dispatch in-process
 * with a fake: no socket, no real time.  The real one (server_start.c) is
 * the ROUTER socket and the monotonic clock. */
typedef struct coord_io {
    /* zmq_send's contract: one frame of len bytes, flags ZMQ_SNDMORE and
     * ZMQ_DONTWAIT; the bytes sent, or -1 (peer gone, queue full). */
    int (*send)(void *ctx, const void *data, size_t len, int flags);
    /* zmq_msg_send's: on success the message is the callee's (its free
     * function runs once it is sent), on failure still the caller's. */
    int (*send_msg)(void *ctx, zmq_msg_t *m, int flags);
    int64_t (*now_ms)(void *ctx); /* monotonic milliseconds */
    void *ctx;                    /* the socket, or the fake's state */
} coord_io;

/* A model's tensor kept in a pack (server_pack.c): its stored record,
 * compact (32 bytes, and its name and dimensions in the coordinator's
 * arenas), because a model may have tens of thousands of them: read its
 * name, shape and pack with sr__coord_member_name / _shape / _pack. */
typedef struct cmember {
    uint64_t offset;    /* its first byte in its pack */
    uint64_t nbytes;    /* dtype x shape */
    uint32_t name;      /* its name: c->member_names + name, NUL-terminated */
    uint32_t dims;      /* its shape: c->member_dims[dims, dims + ndim) */
    uint32_t pack;      /* its pack: c->packs[pack] */
    uint8_t  dtype;     /* sr_dtype */
    uint8_t  ndim;      /* <= SR_MAX_NDIM */
    uint8_t  trainable; /* 0 or 1 */
} cmember;

/* A pack: a variable holding the tensors of one dtype and trainability of
 * a model declared as a whole (server_pack.c). */
typedef struct cpack {
    char     name[SR_STORE_MAX_NAME + 1];
    int      dtype;
    int      trainable;
    uint64_t nbytes;   /* its members' extent, 64-byte aligned */
    size_t   nmembers; /* tensors in it */
} cpack;

typedef struct coord {
    const sr_coord_opts *o;
    sr_store            *st;
    int                  lock_fd; /* the store's writer lock (exclusive.c), or -1 */
    void                *ctx, *sock;
    sr_auth             *auth; /* CURVE, or NULL */
    uint64_t             incarnation;
    int64_t              global_step;
    int64_t              committed_step;
    int64_t              restored_step;     /* the global step this incarnation started at */
    uint64_t             largest_var;       /* bytes of the largest stored variable, at start */
    coord_state          state;             /* the lifecycle, above */
    int64_t              drain_deadline_ms; /* DRAINING: stop by then */
    int64_t              done_at_ms;        /* DONE: since then */
    coord_io             io;                /* every send and clock reading */
    cvar                *vars;
    size_t               nvars, cap_vars;
    size_t               ntrainable, ntaken; /* accumulators (partitions), taken ones */
    client              *clients;
    size_t               nclients, cap_clients;
    size_t               nholding; /* clients with push answers held back */
    uint64_t             park_counter;
    worker              *workers;
    size_t               nworkers, cap_workers;
    sr_tokens            tokens;
    sr_store_contrib    *log; /* step log rows not committed yet */
    size_t               nlog, cap_log;
    int                  commit_pending; /* tokens wait for a commit that failed */
    int64_t              commit_retry_ms;
    int64_t              pending_release; /* tokens to release once committed */
    int64_t              last_rate_ms, last_rate_step;
    int64_t              last_shared_check_ms;
    uint64_t             malformed;
    /* Token replies' piggybacked variables (issue 23): sent whole, as deltas,
     * the variables and bytes they carried. */
    uint64_t piggy_whole, piggy_delta, piggy_vars, piggy_bytes;
    uint64_t refused;               /* requests from clients outside the job (sr__coord_admit) */
    uint64_t nonfinite;             /* gradients refused for NaN or Inf */
    int64_t  nonfinite_logged_step; /* COORD-NONFINITE logged for this step + 1 */
    int64_t  last_refused_log_ms;
    uint64_t max_var_bytes; /* the largest variable's size */
    int64_t  max_msg;       /* ZMQ_MAXMSGSIZE, announced in HELLO replies */
    /* The chief's declaration whose initial value is arriving in parts
     * (DECLARE flagged SR_WIRE_DECLARE_PART): its descriptor, the value's
     * buffer (NULL: none) and how many of its first bytes have arrived. */
    sr_wire_vardesc pdecl;
    vbuf           *pdecl_vb;
    uint64_t        pdecl_got;
    uint64_t        total_var_bytes; /* all variables' sizes */
    uint32_t       *index;           /* sr__coord_find_var's name index */
    size_t          index_cap;
    int64_t         last_malformed_log_ms;
    double          steps_per_s;
    /* --commit async: a writer thread with its own store connection commits
     * a snapshot of step g while the loop goes on with g + 1. */
    sr_store          *wst; /* the writer's connection */
    pthread_t          writer;
    int                writer_started;
    pthread_mutex_t    wmu;
    pthread_cond_t     wcv;
    struct commit_job *wjob;          /* handed to the writer; NULL when it is idle */
    int                wstop;         /* under wmu: finish and exit */
    int64_t            wcommitted;    /* under wmu: the last step the writer committed */
    int                commit_wanted; /* a step to snapshot once the writer is idle */
    /* Store commits, by the loop or the writer (timed_commit): how many,
     * their time (summed, longest, last), and how many failed. */
    _Atomic uint64_t commits, commit_us, commit_max_us, commit_last_us, commit_failures;
    int64_t          last_snapshot_ns; /* when the last one was handed over */
    /* issue 28: the checkpoint policy (ckpt_policy.h), fed by commit_step
     * and the commit paths; the loop's thread only. */
    sr_ckpt  ckpt;
    int64_t  ckpt_wseen;     /* async: the writer's last commit the policy was told of */
    int      ckpt_overlap;   /* async: the writer was busy during the step in progress */
    int64_t  ckpt_logged_k;  /* the interval the last COORD-CKPT-INTERVAL line gave */
    uint64_t ckpt_thread_us; /* sync: the WAL checkpoint thread's time the policy has seen */
    void    *scratch[2];     /* aligned copies of small, misaligned frames */
    size_t   scratch_cap[2];
    /* A sparse push split by partition: indices, rows, per-partition counts. */
    int64_t  *sp_idx;
    uint8_t  *sp_rows;
    uint64_t *sp_start;
    size_t    sp_idx_cap, sp_rows_cap, sp_start_cap;
    /* Issue 23: models declared as a whole (server_pack.c): their tensors,
     * sorted by name, and the packs that hold them. */
    cmember *members;
    size_t   nmembers, cap_members;
    char    *member_names; /* the members' names, back to back, NUL-terminated */
    size_t   member_names_len, cap_member_names;
    int64_t *member_dims; /* the members' shapes, ndim entries each */
    size_t   member_dims_len, cap_member_dims;
    cpack   *packs;
    size_t   npacks, cap_packs;
    /* ---- issue 26: metrics (server_metrics.c, docs/metrics.md) ---- */
    sr_metrics_http *metrics;           /* --metrics-bind's endpoint, or NULL */
    sr_metrics_hist  m_step;            /* syncrep_step_duration_seconds */
    sr_metrics_hist  m_commit;          /* syncrep_commit_duration_seconds (loop or writer) */
    _Atomic int64_t  m_last_commit_ms;  /* wall clock of the last commit, 0: none yet */
    int64_t          m_last_apply_ns;   /* monotonic, the last step's apply; 0: none yet */
    int64_t          m_last_publish_ms; /* monotonic, the last text published */
    int64_t          m_start_wall_ms;
    uint64_t        *m_straggler; /* per task index: steps its push completed */
    size_t           m_nstraggler;
    uint64_t         m_bytes_in, m_bytes_out; /* ZeroMQ messages received and sent */
    sr_strbuf        m_text;                  /* the rendering, reused */
    int64_t          m_apply_ns[256];         /* monotonic times of the last applies (a ring) */
    size_t           m_napply;                /* applies so far; the newest at (m_napply-1)%256 */
    int64_t          m_start_ns;              /* monotonic, when the metrics were opened */
    /* issue 26: elastic (server_members.c, server_ctl.c).  c->o points at
     * el_opts, the options in force: ctl changes R, N, M and the learning
     * rate there at a step boundary; el_base keeps the options it started
     * with (a stored change is kept across a restart while they agree). */
    sr_coord_opts           el_opts;
    sr_coord_opts           el_base;
    int                     el_R;        /* R' the open step takes at; 0: not counted yet (R) */
    int                     el_R_open;   /* R' when the open step opened */
    int                     el_live;     /* live task indexes, last counted */
    int                     el_present;  /* live, or not yet given up on (grace at start) */
    int                     el_N_want;   /* a live task index >= N, + 1: N' at the boundary */
    int64_t                 el_since_ms; /* monotonic: serving since (0: not yet) */
    el_ctl                  el_pending;  /* ctl changes for the next step boundary */
    sr_store_step_replicas *el_rep;      /* step_replicas rows not committed yet */
    size_t                  el_nrep, el_cap_rep;
} coord;

typedef struct {
    const void *data;
    size_t      len;
} frame;

enum { HELD_ALONE, HELD_BEFORE_REPLY, HELD_ONE_MESSAGE };

/* Everything of one commit.  With `copies`, the job owns copies of the
 * tensors, dirty maps and log, so the loop may go on changing its own. */
typedef struct commit_job {
    sr_store_commit         cm;
    sr_store_tensor        *t;
    sr_store_worker        *w;
    sr_store_contrib       *log;
    void                  **own; /* owned buffers, freed with the job */
    size_t                  nown;
    vbuf                  **held; /* values referenced instead of copied */
    size_t                  nheld;
    sr_store_step_replicas *rep; /* issue 26: the step_replicas rows, copied */
} commit_job;

typedef struct req_ctx {
    const uint8_t *rid;
    size_t         rid_len;
    sr_wire_header h;
    zmq_msg_t     *body; /* body frames (after the header) */
    int            nbody;
    client        *cl;
} req_ctx;

#define REPLY_ERR(r, code, ...)                                                 \
    do {                                                                        \
        char msg_[1024];                                                        \
        snprintf(msg_, sizeof(msg_), __VA_ARGS__);                              \
        sr__coord_send_error(c, (r)->rid, (r)->rid_len, &(r)->h, (code), msg_); \
    } while (0)

/* ---- server_model.c: the model's memory ------------------------------- */

/* A value buffer of `bytes` with one reference; NULL when out of memory. */
vbuf *sr__coord_vbuf_new(size_t bytes);
/* Drop a reference (NULL-safe); the last one frees the buffer. */
void sr__coord_vbuf_release(vbuf *b);
/* zmq_msg_init_data's free function for a frame of a value (hint: its vbuf). */
void sr__coord_vbuf_msg_free(void *data, void *hint);
/* The buffer the apply writes v's new value into (see vbuf); NULL: no memory. */
vbuf *sr__coord_apply_target(const coord *c, cvar *v);
/* The variable of that name, or NULL. */
cvar *sr__coord_find_var(coord *c, const char *name);
/* Free what v owns (not v itself). */
void sr__coord_free_var(cvar *v);
/* Partition p of v: its first row and number of rows. */
void sr__coord_part_range(const cvar *v, uint32_t p, uint64_t *row0, uint64_t *nrows);
/* Give v's accumulators their sums' memory before a push adds into them. */
sr_err sr__coord_acc_memory(coord *c, cvar *v);
/* The most gradients one task gives a step (1 when N >= R, else ceil(R / N)). */
int sr__coord_task_share(const sr_coord_opts *o);
/* Add a variable with its value in vb (adopted on success); load_slots: read
 * its optimizer slots from the store. */
sr_err sr__coord_add_var(coord *c, const sr_store_var *meta, vbuf *vb, int load_slots);
/* Load every stored variable as of the latest commit (SR_ECORRUPT: checksums). */
sr_err sr__coord_load_model(coord *c);

/* ---- server_step.c: apply, commit policy, tokens ----------------------- */

/* A push took `ntook` accumulators: apply the step when all are taken. */
void sr__coord_step_took(coord *c, int ntook);
/* Commit and release the tokens held for it; retried by the loop on failure. */
void sr__coord_commit_and_release(coord *c);

/* ---- server_commit.c: commits and the async writer --------------------- */

/* The commit of the current state; with `copies` it references the values
 * and copies the rest (async), else it points into the live state. */
sr_err sr__coord_build_job(coord *c, int copies, commit_job **out);
void   sr__coord_job_free(commit_job *j);
/* Commit the current state on the loop's connection (--commit sync, shutdown). */
sr_err sr__coord_commit_now(coord *c);
/* --commit async: hand a snapshot to the writer when it is idle and due. */
void sr__coord_async_snapshot(coord *c);
/* The mean of the commits so far, in ms. */
double sr__coord_commit_mean_ms(const coord *c);
/* The store options of the coordinator's connections. */
void   sr__coord_store_opts(const sr_coord_opts *o, sr_store_opts *so);
sr_err sr__coord_writer_start(coord *c);
/* Stop the writer; a job it could not commit is committed by the loop. */
sr_err sr__coord_writer_stop(coord *c);
/* issue 28: start c->ckpt from c's options at c->global_step. */
void sr__coord_ckpt_init(coord *c);
/* issue 28, async: feed the policy what the writer did; 1 while it is busy. */
int sr__coord_writer_poll(coord *c);

/* ---- server_peers.c: clients, held answers, parked tokens -------------- */

/* issue 26: the task's worker record, made if absent; NULL: no memory. */
worker *sr__coord_get_worker(coord *c, int32_t task);
/* The task's worker record: its local step (when >= 0) and last seen time. */
void sr__coord_touch_worker(coord *c, int32_t task, int64_t local_step);
/* Send cl's held push answers (how: HELD_*). */
void sr__coord_send_held(coord *c, client *cl, int how);
/* Send them now: in one message to a client that reads chains. */
void sr__coord_flush_held(coord *c, client *cl);
/* After a batch: the held answers of clients not waiting for a token (all: every one). */
void sr__coord_flush_held_batch(coord *c, int all);
/* Count a push's outcome (SR_PUSH_*) and hold its answer. */
void sr__coord_push_reply(coord *c, req_ctx *r, int outcome);
/* Give cl a token now: 0, -1 none it may take, -2 the peer is gone. */
int sr__coord_give_token(coord *c, client *cl, uint64_t req_id, int want);
/* Hand out queued tokens to the parked clients, oldest request first. */
void sr__coord_serve_parked(coord *c);
/* Free pull slots for n values: 0, or -1 after an error reply. */
int sr__coord_take_pull_slots(coord *c, const req_ctx *r, cvar *const *vars, int n,
                              pull_slot **out);
/* Forget clients gone for idle_ms (0: any); how many were. */
size_t sr__coord_reclaim_gone(coord *c, int64_t idle_ms);
/* Find or make r's client (r->cl): 0, or -1 after a refusal reply. */
int sr__coord_admit(coord *c, req_ctx *r);

/* ---- issue 26: elastic -------------------------------------------------
 * server_members.c: the membership table and the replicas in force
 * (docs/architecture.md, "Elastic membership").
 *
 *   R' = R                                  when M >= R (the default, M = R)
 *   R' = min(R, max(M, present x share))    else; present = task indexes live
 *        (a client heard from within --worker-timeout-ms), or not heard from
 *        at all yet within the timeout of the start; share = ceil(R / N)
 *        when N < R, else 1
 *
 *   event                       function                       effect on R'
 *   a worker left (timeout)     sr__coord_members_tick         lowered at once: an
 *                                                              accumulator with >= R'
 *                                                              gradients is taken
 *   step boundary (applied)     sr__coord_members_step_applied ctl changes, N' grown
 *                                                              for a joined task, R'
 *                                                              recomputed (rises here)
 *
 * Invariants: M <= R' <= R; every accumulator of the open step takes at R'
 * (a->R); a step is never taken with fewer than M gradients. */

/* R' of the open step: the gradients each accumulator takes (metrics, status). */
int sr__coord_replicas_effective(const coord *c);
/* M in force: --min-replicas, or R when not given or above R. */
int sr__coord_min_replicas(const coord *c);
/* Periodic: liveness of each task, joins and departures logged; a loss
 * that lowers R' lowers it for the open step at once. */
void sr__coord_members_tick(coord *c);
/* After the apply of a step (global_step is the new one), before its
 * commit: record the step's replicas, apply the pending ctl changes, grow
 * N for a joined task, recompute R' for the step that opens. */
void sr__coord_members_step_applied(coord *c);
/* The STATUS JSON's "elastic" member (",\"elastic\":{...}"). */
void sr__coord_members_json(coord *c, sr_strbuf *b);
/* The commit job's step_replicas rows (copied); SR_ENOMEM. */
sr_err sr__coord_members_job(coord *c, commit_job *j);
/* The rows went into a commit: start afresh. */
void sr__coord_members_committed(coord *c);
void sr__coord_members_free(coord *c);

/* server_ctl.c: CTL requests (docs/protocol.md, "CTL (12)"). */
void sr__coord_handle_ctl(coord *c, req_ctx *r);
/* At start, before the incarnation begins: load --admin-keys. */
sr_err sr__coord_ctl_open(coord *c);
/* At start, after the configuration is recorded: re-apply the stored ctl
 * changes whose base the options still give (logged either way). */
sr_err sr__coord_ctl_restore(coord *c);

/* ---- server_reply.c: replies ------------------------------------------- */

/* Frames of a reply to req: 0, or -1 when the peer is gone or its queue is full. */
int  sr__coord_send_hdr(coord *c, const sr_wire_header *req, int status, int64_t local_step,
                        uint16_t flags, int more);
int  sr__coord_send_head(coord *c, const uint8_t *rid, size_t rid_len, const sr_wire_header *req,
                         int status, int64_t local_step, uint16_t flags, int more);
int  sr__coord_send_reply(coord *c, const uint8_t *rid, size_t rid_len, const sr_wire_header *req,
                          int status, int64_t local_step, const frame *frames, int nframes);
void sr__coord_send_error(coord *c, const uint8_t *rid, size_t rid_len, const sr_wire_header *req,
                          sr_err e, const char *detail);
/* Count a bad request in *count and log it as `id` ("count=N last=...") at
 * most every 5 s (*last_log_ms): a flood of them cannot flood the log. */
void sr__coord_count_bad(coord *c, uint64_t *count, int64_t *last_log_ms, const char *id,
                         const char *why);
/* A zero-copy frame of v's value; with a slot, a pull reply freeing it once sent. */
int sr__coord_send_value_frame(coord *c, cvar *v, int last, pull_slot *slot);
/* The same of bytes [off, off + len) of v's value (a pack's member). */
int  sr__coord_send_slice_frame(coord *c, cvar *v, uint64_t off, uint64_t len, int last,
                                pull_slot *slot);
void sr__coord_encode_member_desc(const coord *c, const cmember *m, uint8_t *buf, size_t cap,
                                  frame *f);
void sr__coord_encode_vardesc(const cvar *v, uint8_t *buf, size_t cap, frame *f);
int  sr__coord_send_token_reply(coord *c, client *cl, uint64_t req_id, int64_t token, int want);
/* A PULL's reply: desc, then bytes [off, off + len) of v's value. */
void sr__coord_send_reply_value(coord *c, const req_ctx *r, const frame *desc, cvar *v,
                                uint64_t off, uint64_t len);

/* ---- the request handlers: each answers r (or holds the answer) -------- */

/* server_handshake.c */
void sr__coord_handle_hello(coord *c, req_ctx *r);
void sr__coord_handle_declare(coord *c, req_ctx *r);
void sr__coord_handle_ready(coord *c, req_ctx *r);
/* Drop a declaration's partly received initial value. */
void sr__coord_pdecl_drop(coord *c);
/* server_push.c */
void sr__coord_handle_push(coord *c, req_ctx *r);
void sr__coord_handle_push_sparse(coord *c, req_ctx *r);
/* server_pull.c */
void sr__coord_handle_pull(coord *c, req_ctx *r);
void sr__coord_handle_token(coord *c, req_ctx *r);
void sr__coord_handle_ping(coord *c, req_ctx *r);
void sr__coord_handle_status(coord *c, req_ctx *r);

/* server_pack.c: models declared as a whole */
void sr__coord_handle_model(coord *c, req_ctx *r);
/* Read the stored members (at start, with the model). */
sr_err sr__coord_load_members(coord *c);
void   sr__coord_free_members(coord *c);
/* The member tensor of that name, or NULL. */
const cmember *sr__coord_find_member(const coord *c, const char *name);
/* A member's name, shape (ndim dimensions) and pack's name: borrowed,
 * valid until the next MODEL request adds members. */
const char    *sr__coord_member_name(const coord *c, const cmember *m);
const int64_t *sr__coord_member_shape(const coord *c, const cmember *m);
const char    *sr__coord_member_pack(const coord *c, const cmember *m);
const cpack   *sr__coord_find_pack(coord *c, const char *name);
/* A DECLARE of a pack's name must be that pack: 0, or -1 with why. */
int sr__coord_check_pack_decl(coord *c, const char *name, int dtype, int ndim, const int64_t *shape,
                              int trainable, char *why, size_t cap);
/* A pack with no variable yet (the chief has not declared it): 1 with why. */
int sr__coord_packs_missing(coord *c, char *why, size_t cap);
/* STATUS: ,"packs":[...],"tensors":[...] (each pack, and each tensor with
 * its pack and offset, by name: the model's real names). */
void sr__coord_packs_json(const coord *c, sr_strbuf *b);
/* ---- server_cursor.c (issue 24: cursor) -------------------------------- */

/* CURSOR: a worker's data cursor for its gradient of h.local_step, or (no
 * body) the one it resumes from. */
void sr__coord_handle_cursor(coord *c, req_ctx *r);
/* A push of `task` computed at local_step was accepted: the cursor it sent
 * for that step (if any) goes with the step. */
void sr__coord_cursor_accepted(coord *c, int32_t task, int64_t local_step);
/* The cursor columns of w's row in a commit of the current state. */
void sr__coord_cursor_row(coord *c, worker *w, sr_store_worker *row);

/* ---- server_status.c --------------------------------------------------- */

/* The connection that commits the steps (the writer's, else the loop's). */
sr_store *sr__coord_commit_store(const coord *c);
/* The STATUS reply's JSON. */
void sr__coord_status_json(coord *c, sr_strbuf *b);
/* The shutdown log's COORD-COMMITS and COORD-WAL-CKPT lines. */
void sr__coord_log_commits(const coord *c);
void sr__coord_log_wal_checkpoints(const coord *c);
/* issue 28: ,"checkpoint":{policy, interval, overhead, steps at risk} for STATUS. */
void sr__coord_ckpt_json(const coord *c, sr_strbuf *b);

/* ---- server_metrics.c: issue 26, the metrics ---------------------------- */

/* Histograms ready; with o->metrics_bind, the HTTP endpoint bound (a bad
 * address refuses the start: SR_EINVAL naming it) and logged. */
sr_err sr__coord_metrics_open(coord *c);
/* Stop the endpoint, free what the metrics hold (NULL-safe fields). */
void sr__coord_metrics_close(coord *c);
/* Render and publish the snapshot when the last is >= 100 ms old (force:
 * now).  The loop's only contact with the HTTP thread. */
void sr__coord_metrics_publish(coord *c, int force);
/* Hooks: a step was applied (server_step.c); a push by `task` was handled
 * while the global step was g0 (server_push.c: when the step advanced, the
 * task was its straggler); a commit took `us` (any thread). */
void sr__coord_metrics_step_applied(coord *c);
void sr__coord_metrics_after_push(coord *c, int32_t task, int64_t g0);
void sr__coord_metrics_commit_done(coord *c, uint64_t us);
/* The R steps are taken with now (syncrep_replicas_effective, STATUS). */
int sr__coord_metrics_replicas_effective(const coord *c);
/* Steps the task's push completed so far. */
uint64_t sr__coord_metrics_stragglers(const coord *c, int32_t task);
/* Steps per second over the last STEP_RATE_WINDOW_MS (5 s): 0 within 5 s of a stall. */
double sr__coord_metrics_step_rate(const coord *c);
/* STATUS's last fields (workers_live, replicas_effective, bytes, the last
 * commit's age, the metrics endpoint) and the object's closing brace. */
void sr__coord_metrics_status_json(const coord *c, sr_strbuf *b);

/* ---- server_start.c: start-up and shutdown ----------------------------- */

/* An empty coordinator in STARTING with the real I/O; release with sr__coord_free. */
void sr__coord_init(coord *c, const sr_coord_opts *o);
/* Lock and open the store and check the options against it; nothing written. */
sr_err sr__coord_open_store(coord *c);
/* Bind the ROUTER socket (CURVE when configured); the I/O's context. */
sr_err sr__coord_open_socket(coord *c);
/* A new incarnation, the rewind asked for, the model loaded: STARTING ->
 * WAIT_MODEL, and on to SERVING when the store's model is ready. */
sr_err sr__coord_start(coord *c);
/* Stop the writer, close the socket and the store, free everything. */
void sr__coord_free(coord *c);

/* ---- server.c: the lifecycle's transitions and the loop ---------------- */

void sr__coord_wait_model(coord *c);               /* STARTING -> WAIT_MODEL */
void sr__coord_serve(coord *c);                    /* WAIT_MODEL -> SERVING */
void sr__coord_end_job(coord *c, const char *why); /* SERVING -> DONE */
/* The job ends at this global step (--max-steps reached). */
static inline int
sr__coord_at_max_steps(const coord *c)
{
    return c->o->max_steps > 0 && c->global_step >= c->o->max_steps;
}
/* One received message: parts[0] the routing id, then one request or a
 * chain of them (docs/protocol.md, Chains), handled in order. */
void sr__coord_dispatch(coord *c, zmq_msg_t *parts, int nparts);

/* The seam's three calls (coord_io). */
static inline int
sr__coord_send(coord *c, const void *data, size_t len, int flags)
{
    int n = c->io.send(c->io.ctx, data, len, flags);
    c->m_bytes_out += n > 0 ? (uint64_t)n : 0; /* issue 26: syncrep_sent_bytes_total */
    return n;
}

static inline int
sr__coord_send_msg(coord *c, zmq_msg_t *m, int flags)
{
    int n = c->io.send_msg(c->io.ctx, m, flags);
    c->m_bytes_out += n > 0 ? (uint64_t)n : 0; /* issue 26: syncrep_sent_bytes_total */
    return n;
}

static inline int64_t
sr__coord_now_ms(const coord *c)
{
    return c->io.now_ms(c->io.ctx);
}

/* The model is ready: requests for it are served (SERVING, DRAINING;
 * DONE serves pulls). */
static inline int
sr__coord_model_ready(const coord *c)
{
    return c->state == COORD_SERVING || c->state == COORD_DRAINING || c->state == COORD_DONE;
}

#endif
