/*
 * The coordinator's server loop: one thread, one ROUTER socket.
 *
 * Lifecycle (one coordinator process = one incarnation):
 *
 *   START --load store--> WAIT_MODEL --chief READY--> SERVING --stop flag--> DRAINING --> exit
 *                 \______________ store already ready _____^
 *
 *  transition            function
 *  START -> *            coord_open_store (lock, open, checks), open_socket (bind),
 *                        coord_start (new incarnation, rewind, load): a start
 *                        refused before coord_start leaves the store as it was
 *  WAIT_MODEL -> SERVING model_ready_now (init tokens, accumulators at the global step)
 *  SERVING: a step       maybe_apply_step -> commit_step (policy) -> release_tokens
 *  * -> DRAINING         the stop flag; ends when no step is in progress or after grace_ms
 *
 * Invariants: SERVING: every trainable variable has an accumulator; those
 * not TAKEN accept exactly local_step == global_step; the tokens of step g
 * are released only after step g is committed (when the policy commits it).
 * A message never crashes the loop: every decode and check happens before
 * any state changes, and failures are answered with an error reply.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "coordinator/auth.h"
#include "coordinator/coordinator.h"
#include "coordinator/exclusive.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/name.h"
#include "core/strbuf.h"
#include "core/text.h"
#include "store/store.h"
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
 * the apply writes the new value into another buffer (apply_target), so
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
    int64_t spare_wait_from; /* acc_memory waits for the spare from this global step */
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
    int64_t  last_seen_ms; /* monotonic */
    /* Push answers held back (flush_held): a worker pushes, then asks for
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
} worker;

typedef struct coord {
    const sr_coord_opts *o;
    sr_store            *st;
    int                  lock_fd; /* the store's writer lock (exclusive.c), or -1 */
    void                *ctx, *sock;
    sr_auth             *auth; /* CURVE, or NULL */
    uint64_t             incarnation;
    int64_t              global_step;
    int64_t              committed_step;
    int64_t              restored_step; /* the global step this incarnation started at */
    uint64_t             largest_var;   /* bytes of the largest stored variable, at start */
    int                  model_ready;
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
    uint64_t             refused; /* requests from clients outside the job (admit) */
    int64_t              last_refused_log_ms;
    uint64_t             max_var_bytes; /* the largest variable's size */
    int64_t              max_msg;       /* ZMQ_MAXMSGSIZE, announced in HELLO replies */
    /* The chief's declaration whose initial value is arriving in parts
     * (DECLARE flagged SR_WIRE_DECLARE_PART): its descriptor, the value's
     * buffer (NULL: none) and how many of its first bytes have arrived. */
    sr_wire_vardesc pdecl;
    vbuf           *pdecl_vb;
    uint64_t        pdecl_got;
    uint64_t        total_var_bytes; /* all variables' sizes */
    uint32_t       *index;           /* find_var's name index */
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
    void            *scratch[2];       /* aligned copies of small, misaligned frames */
    size_t           scratch_cap[2];
    /* A sparse push split by partition: indices, rows, per-partition counts. */
    int64_t  *sp_idx;
    uint8_t  *sp_rows;
    uint64_t *sp_start;
    size_t    sp_idx_cap, sp_rows_cap, sp_start_cap;
} coord;

/* ---- small helpers ------------------------------------------------------ */

static vbuf *
vbuf_new(size_t bytes)
{
    size_t total = (sizeof(vbuf) + bytes + 63) & ~(size_t)63;
    vbuf  *b = aligned_alloc(64, total);
    if (b != NULL) {
        atomic_init(&b->refs, 1);
    }
    return b;
}

static void
vbuf_release(vbuf *b)
{
    if (b != NULL && atomic_fetch_sub(&b->refs, 1) == 1) {
        free(b);
    }
}

/* zmq_msg_init_data's free function: a pull reply has been sent. */
static void
vbuf_msg_free(void *data, void *hint)
{
    (void)data;
    vbuf_release(hint);
}

/* Whether every partition of v took dense gradients this step (its sums
 * can become the value: sparse steps change only the rows they touched). */
static int
all_dense(const cvar *v)
{
    for (uint32_t p = 0; p < v->nparts; p++) {
        if (v->acc[p].mode != SR_ACC_DENSE) {
            return 0;
        }
    }
    return 1;
}

/* The buffer the apply writes v's new value into: v's own when nobody else
 * reads it; else, with --commit sync, the accumulators' sums after a dense
 * step; else the spare when that is free (--commit async keeps one, its
 * pages already faulted in), else a new one; NULL when out of memory. */
static vbuf *
apply_target(const coord *c, cvar *v)
{
    if (atomic_load(&v->vb->refs) == 1) {
        return v->vb;
    }
    if (!c->o->commit_async && v->ab != NULL && all_dense(v)) {
        return v->ab; /* apply_step hands the sums' memory over */
    }
    if (v->spare != NULL && atomic_load(&v->spare->refs) == 1) {
        vbuf *b = v->spare;
        v->spare = NULL;
        return b;
    }
    vbuf *b = vbuf_new((size_t)v->meta.nbytes);
    if (b == NULL) {
        sr_fail(SR_ENOMEM, "variable %s: %" PRIu64 " bytes", SR_ESC(v->meta.name), v->meta.nbytes);
    }
    return b;
}

static uint64_t
name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s != '\0'; s++) {
        h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    }
    return h;
}

/* Every push, pull and declare looks a variable up by name: an open-
 * addressing index of the variables (slot = index + 1, 0 = empty), at most
 * half full, rebuilt when the model grows. */
static void
index_insert(coord *c, size_t i)
{
    size_t k = (size_t)name_hash(c->vars[i].meta.name) & (c->index_cap - 1);
    while (c->index[k] != 0) {
        k = (k + 1) & (c->index_cap - 1);
    }
    c->index[k] = (uint32_t)(i + 1);
}

/* Make room in the index for one more variable. */
static sr_err
index_reserve(coord *c)
{
    size_t cap = 16;

    if (2 * (c->nvars + 1) <= c->index_cap) {
        return SR_OK;
    }
    while (cap < 2 * (c->nvars + 1)) {
        cap *= 2;
    }
    uint32_t *slots = calloc(cap, sizeof(*slots));
    if (slots == NULL) {
        return sr_fail(SR_ENOMEM, "variable index of %zu slots", cap);
    }
    free(c->index);
    c->index = slots;
    c->index_cap = cap;
    for (size_t i = 0; i < c->nvars; i++) {
        index_insert(c, i);
    }
    return SR_OK;
}

static cvar *
find_var(coord *c, const char *name)
{
    if (c->index_cap == 0) {
        return NULL;
    }
    for (size_t k = (size_t)name_hash(name) & (c->index_cap - 1); c->index[k] != 0;
         k = (k + 1) & (c->index_cap - 1)) {
        cvar *v = &c->vars[c->index[k] - 1];
        if (strcmp(v->meta.name, name) == 0) {
            return v;
        }
    }
    return NULL;
}

static client *
find_client(coord *c, uint64_t id)
{
    for (size_t i = 0; i < c->nclients; i++) {
        if (c->clients[i].client_id == id) {
            return &c->clients[i];
        }
    }
    return NULL;
}

static worker *
get_worker(coord *c, int32_t task)
{
    for (size_t i = 0; i < c->nworkers; i++) {
        if (c->workers[i].task == task) {
            return &c->workers[i];
        }
    }
    worker *w = sr_grow_array(c->workers, &c->cap_workers, c->nworkers + 1, sizeof(*w));
    if (w == NULL) {
        return NULL;
    }
    c->workers = w;
    w = &c->workers[c->nworkers++];
    memset(w, 0, sizeof(*w));
    w->task = task;
    return w;
}

static void
touch_worker(coord *c, int32_t task, int64_t local_step)
{
    worker *w = get_worker(c, task);
    if (w != NULL) {
        if (local_step >= 0) {
            w->local_step = local_step;
        }
        w->last_seen_wall_ms = sr_clock_wall_ms();
    }
}

/* A frame's data, 8-byte aligned.  ZeroMQ keeps very small messages inside
 * zmq_msg_t itself, at addresses with no alignment promise; reading doubles
 * or int64s there is undefined behaviour, so those few bytes are copied.
 * Large frames are malloc'd and used in place. NULL when out of memory. */
static const void *
aligned_frame(coord *c, zmq_msg_t *m, int which)
{
    void  *p = zmq_msg_data(m);
    size_t n = zmq_msg_size(m);

    if (((uintptr_t)p & 7u) == 0) {
        return p;
    }
    if (c->scratch_cap[which] < n) {
        void *q = realloc(c->scratch[which], n);
        if (q == NULL) {
            return NULL;
        }
        c->scratch[which] = q;
        c->scratch_cap[which] = n;
    }
    memcpy(c->scratch[which], p, n);
    return c->scratch[which];
}

/* ---- replies ------------------------------------------------------------ */

typedef struct {
    const void *data;
    size_t      len;
} frame;

/* The header frame of a reply to `req` (more: frames follow), after the
 * routing id.  0, or -1 when the peer is gone or its queue is full (the
 * caller decides what that loses). */
static int
send_hdr(coord *c, const sr_wire_header *req, int status, int64_t local_step, uint16_t flags,
         int more)
{
    sr_wire_header h = *req;
    uint8_t        hb[SR_WIRE_HEADER_BYTES];

    h.type = (uint8_t)(req->type | SR_WIRE_REPLY);
    h.flags = flags;
    h.incarnation = c->incarnation;
    h.status = status;
    h.local_step = local_step;
    sr_wire_header_encode(&h, hb);
    return zmq_send(c->sock, hb, sizeof(hb), (more ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0 ? -1 : 0;
}

/* The routing id and the reply header. */
static int
send_head(coord *c, const uint8_t *rid, size_t rid_len, const sr_wire_header *req, int status,
          int64_t local_step, uint16_t flags, int more)
{
    if (zmq_send(c->sock, rid, rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        return -1;
    }
    return send_hdr(c, req, status, local_step, flags, more);
}

static int
send_reply(coord *c, const uint8_t *rid, size_t rid_len, const sr_wire_header *req, int status,
           int64_t local_step, const frame *frames, int nframes)
{
    if (send_head(c, rid, rid_len, req, status, local_step, 0, nframes > 0) != 0) {
        return -1;
    }
    for (int i = 0; i < nframes; i++) {
        if (zmq_send(c->sock, frames[i].data, frames[i].len,
                     (i + 1 < nframes ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0) {
            return -1;
        }
    }
    return 0;
}

static void
send_error(coord *c, const uint8_t *rid, size_t rid_len, const sr_wire_header *req, sr_err e,
           const char *detail)
{
    frame f = {detail, strlen(detail)};
    send_reply(c, rid, rid_len, req, e, c->global_step, &f, 1);
}

enum { HELD_ALONE, HELD_BEFORE_REPLY, HELD_ONE_MESSAGE };

/* Send the push answers held back for cl, in order: one message each
 * (HELD_ALONE), or chained, each flagged SR_WIRE_F_CHAIN, after the routing
 * id the caller has just sent: before the caller's reply
 * (HELD_BEFORE_REPLY), or on their own, the last one unflagged and ending
 * the message (HELD_ONE_MESSAGE). */
static void
send_held(coord *c, client *cl, int how)
{
    for (size_t i = 0; i < cl->nheld; i++) {
        sr_wire_push_rep rep = {cl->held[i].outcome};
        uint8_t          buf[8];
        size_t           n = sr_wire_push_rep_encode(&rep, buf, sizeof(buf));
        int              end = how == HELD_ONE_MESSAGE && i + 1 == cl->nheld;
        if (how == HELD_ALONE) {
            frame f = {buf, n};
            send_reply(c, cl->rid, cl->rid_len, &cl->held[i].h, SR_OK, cl->held[i].step, &f, 1);
        } else if (send_hdr(c, &cl->held[i].h, SR_OK, cl->held[i].step, end ? 0 : SR_WIRE_F_CHAIN,
                            1) == 0) {
            /* the rest of a message ZeroMQ took */
            zmq_send(c->sock, buf, n, end ? 0 : ZMQ_SNDMORE);
        }
    }
    if (cl->nheld > 0) {
        cl->nheld = 0;
        c->nholding--;
    }
}

/* The held answers, now: in one message to a client that reads chains. */
static void
flush_held(coord *c, client *cl)
{
    int chained = cl->chained > 0 && cl->nheld > 1;
    if (chained && zmq_send(c->sock, cl->rid, cl->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        chained = 0; /* the peer is gone or its queue full: each is tried (and lost) alone */
    }
    send_held(c, cl, chained ? HELD_ONE_MESSAGE : HELD_ALONE);
}

/* After a batch of messages: answers held for a client that is not waiting
 * for its token go out now (it may be waiting for them); a waiting one's
 * go out with the token, or after PUSH_REPLY_HOLD_MS (well before the
 * client's one-second resend). */
static void
flush_held_batch(coord *c, int all)
{
    int64_t now = sr_clock_now_ms();

    for (size_t i = 0; c->nholding > 0 && i < c->nclients; i++) {
        client *cl = &c->clients[i];
        if (cl->nheld > 0 &&
            (all || !cl->parked || now - cl->held_since_ms >= PUSH_REPLY_HOLD_MS)) {
            flush_held(c, cl);
        }
    }
}

/* ---- loading and declaring ---------------------------------------------- */

static sr_err
alloc_slots(coord *c, cvar *v)
{
    size_t bytes = (size_t)v->meta.nbytes ? (size_t)v->meta.nbytes : 1;

    if (!v->meta.trainable) {
        return SR_OK;
    }
    if (c->o->optim.kind != SR_OPT_SGD && (v->s1 = calloc(1, bytes)) == NULL) {
        return sr_fail(SR_ENOMEM, "variable %s: slot of %zu bytes", SR_ESC(v->meta.name), bytes);
    }
    if (c->o->optim.kind == SR_OPT_ADAM && (v->s2 = calloc(1, bytes)) == NULL) {
        return sr_fail(SR_ENOMEM, "variable %s: slot of %zu bytes", SR_ESC(v->meta.name), bytes);
    }
    if (c->o->optim.ema) {
        if ((v->ema = malloc(bytes)) == NULL) {
            return sr_fail(SR_ENOMEM, "variable %s: EMA of %zu bytes", SR_ESC(v->meta.name), bytes);
        }
        memcpy(v->ema, v->value, (size_t)v->meta.nbytes);
    }
    return SR_OK;
}

/* Read a slot as of the latest commit; a slot that was never stored (new
 * optimizer, new variable) keeps its initial value. */
static sr_err
load_slot(coord *c, cvar *v, const char *name, void *dst)
{
    sr_err rc;
    if (dst == NULL) {
        return SR_OK;
    }
    rc = sr_store_read_tensor(c->st, v->meta.id, name, -1, dst, (size_t)v->meta.nbytes);
    if (rc == SR_ENOENT) {
        SR_LOG(SR_LOG_INFO, "COORD-SLOT-NEW", "variable=\"%s\" slot=\"%s\" initialised",
               SR_ESC(v->meta.name), SR_ESC(name));
        return SR_OK;
    }
    return rc;
}

static sr_err
chunk_layout(coord *c, cvar *v)
{
    uint64_t cb;
    sr_err   rc;
    size_t   es = sr_dtype_size(v->meta.dtype);

    if ((rc = sr_store_nchunks(c->st, v->meta.id, &v->nchunks)) != SR_OK ||
        (rc = sr_store_chunk_bytes(c->st, v->meta.id, &cb)) != SR_OK) {
        return rc;
    }
    v->chunk_elems = es ? cb / es : 0;
    if ((v->dirty = calloc(v->nchunks ? v->nchunks : 1, 1)) == NULL) {
        return sr_fail(SR_ENOMEM, "variable %s: %zu chunk flags", SR_ESC(v->meta.name), v->nchunks);
    }
    return SR_OK;
}

static void
free_var(cvar *v)
{
    vbuf_release(v->vb);
    vbuf_release(v->spare);
    free(v->s1);
    free(v->s2);
    free(v->ema);
    free(v->dirty);
    for (uint32_t p = 0; v->acc != NULL && p < v->nparts; p++) {
        sr__accum_destroy(&v->acc[p]);
    }
    free(v->acc);
    vbuf_release(v->ab);
}

/* Partition p of v: its first row and number of rows. */
static void
part_range(const cvar *v, uint32_t p, uint64_t *row0, uint64_t *nrows)
{
    uint64_t r0 = (uint64_t)p * v->part_rows;
    *row0 = r0;
    *nrows = v->rows - r0 < v->part_rows ? v->rows - r0 : v->part_rows;
}

/* Wait for a pull of v's previous value to be sent (sync), rather than
 * hold a third copy of v: briefly, and not again for a while when the
 * wait ran out (a slow reader must not stall every step). */
static void
wait_spare(coord *c, cvar *v)
{
    if (c->o->commit_async || v->spare == NULL || c->global_step < v->spare_wait_from) {
        return;
    }
    for (int ms = 0; atomic_load(&v->spare->refs) != 1; ms++) {
        if (ms == SPARE_WAIT_MS) {
            v->spare_wait_from = c->global_step + SPARE_WAIT_OFF_STEPS;
            SR_LOG(SR_LOG_NOTICE, "COORD-SPARE-WAIT",
                   "%s: a pull of the previous value still in flight after %d ms; a third "
                   "buffer instead (no wait for %d steps)",
                   SR_ESC(v->meta.name), SPARE_WAIT_MS, SPARE_WAIT_OFF_STEPS);
            return;
        }
        sr_clock_sleep_ms(1);
    }
}

/* Give v's accumulators their sums before a push adds into them: one buffer
 * laid out like the value, the spare when nobody reads it any more (the
 * value before the last apply, its pages faulted in), else a new one. */
static sr_err
acc_memory(coord *c, cvar *v)
{
    vbuf *b = NULL;

    if (v->ab != NULL) {
        return SR_OK;
    }
    wait_spare(c, v);
    if (v->spare != NULL && atomic_load(&v->spare->refs) == 1) {
        b = v->spare;
        v->spare = NULL;
    } else if ((b = vbuf_new((size_t)v->meta.nbytes)) == NULL) {
        return sr_fail(SR_ENOMEM, "variable %s: %" PRIu64 " bytes of sums", SR_ESC(v->meta.name),
                       v->meta.nbytes);
    }
    if (!c->o->commit_async) {
        vbuf_release(v->spare); /* still read by a pull: it frees it */
        v->spare = NULL;
    }
    v->ab = b;
    for (uint32_t p = 0; p < v->nparts; p++) {
        uint64_t r0, nr;
        part_range(v, p, &r0, &nr);
        sr__accum_set_sum(&v->acc[p], b->data + r0 * v->row_elems * sr_dtype_size(v->meta.dtype));
    }
    return SR_OK;
}

/* One accumulator per partition (a variable of at most partition_bytes is
 * one partition). */
/* The most gradients one task gives a step: R replicas are R tasks when
 * N >= R; with fewer tasks each computes several batches. */
static int
task_share(const sr_coord_opts *o)
{
    return o->N >= o->R ? 1 : (o->R + o->N - 1) / o->N;
}

static sr_err
init_accums(coord *c, cvar *v)
{
    uint64_t       elems = v->meta.nbytes / sr_dtype_size(v->meta.dtype);
    sr_wire_layout l = sr_wire_partition_layout(v->meta.nbytes, v->meta.ndim, v->meta.shape[0],
                                                c->o->partition_bytes);
    uint64_t       nparts = l.nparts;

    /* An empty variable is one row of nothing: dense pushes of 0 bytes. */
    v->rows = l.rows;
    v->row_elems = elems / l.rows;
    v->part_rows = l.part_rows;
    if (nparts > (1u << 24)) {
        return sr_fail(SR_EINVAL,
                       "variable %s: %" PRIu64 " partitions (rows of %" PRIu64
                       " bytes, partitions of %" PRIu64 " bytes)",
                       SR_ESC(v->meta.name), nparts, v->row_elems * sr_dtype_size(v->meta.dtype),
                       c->o->partition_bytes);
    }
    if ((v->acc = calloc((size_t)nparts, sizeof(*v->acc))) == NULL) {
        return sr_fail(SR_ENOMEM, "variable %s: %" PRIu64 " accumulators", SR_ESC(v->meta.name),
                       nparts);
    }
    for (uint32_t p = 0; p < (uint32_t)nparts; p++) {
        uint64_t r0, nr;
        sr_err   rc;
        v->nparts = p + 1;
        part_range(v, p, &r0, &nr);
        if ((rc = sr__accum_init(&v->acc[p], v->meta.dtype, nr * v->row_elems, nr, c->o->R,
                                 c->global_step)) != SR_OK) {
            return rc;
        }
        sr__accum_set_rules(&v->acc[p], task_share(c->o), c->o->deterministic_sum);
    }
    v->has_acc = 1;
    return SR_OK;
}

/* Add a variable to the in-memory model with its value in `vb` (adopted
 * on success). */
static sr_err
add_var(coord *c, const sr_store_var *meta, vbuf *vb, int load_slots)
{
    cvar  *v;
    sr_err rc;

    if ((rc = index_reserve(c)) != SR_OK) {
        return rc;
    }
    v = sr_grow_array(c->vars, &c->cap_vars, c->nvars + 1, sizeof(*v));
    if (v == NULL) {
        return sr_fail(SR_ENOMEM, "variable table");
    }
    c->vars = v;
    v = &c->vars[c->nvars];
    memset(v, 0, sizeof(*v));
    v->meta = *meta;
    v->vb = vb;
    v->value = vb->data;
    if ((rc = chunk_layout(c, v)) != SR_OK || (rc = alloc_slots(c, v)) != SR_OK) {
        goto fail;
    }
    if (load_slots && v->meta.trainable) {
        const char *mom = c->o->optim.kind == SR_OPT_MOMENTUM ? "momentum" : "adam_m";
        if ((rc = load_slot(c, v, mom, v->s1)) != SR_OK ||
            (rc = load_slot(c, v, "adam_v", v->s2)) != SR_OK ||
            (rc = load_slot(c, v, "ema", v->ema)) != SR_OK) {
            goto fail;
        }
    }
    if (v->meta.trainable) {
        if ((rc = init_accums(c, v)) != SR_OK) {
            goto fail;
        }
        c->ntrainable += v->nparts;
    }
    c->nvars++;
    index_insert(c, c->nvars - 1);
    if (v->meta.nbytes > c->max_var_bytes) {
        c->max_var_bytes = v->meta.nbytes;
    }
    c->total_var_bytes += v->meta.nbytes;
    return SR_OK;
fail:
    v->vb = NULL; /* still the caller's */
    free_var(v);
    return rc;
}

static sr_err
load_model(coord *c)
{
    sr_store_var *metas = NULL;
    size_t        n = 0;
    sr_err        rc;

    if ((rc = sr_store_list_vars(c->st, &metas, &n)) != SR_OK) {
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        vbuf *vb = vbuf_new((size_t)metas[i].nbytes);
        if (vb == NULL) {
            rc = sr_fail(SR_ENOMEM, "variable %s: %" PRIu64 " bytes", SR_ESC(metas[i].name),
                         metas[i].nbytes);
            break;
        }
        rc = sr_store_read_tensor(c->st, metas[i].id, "", -1, vb->data, (size_t)metas[i].nbytes);
        if (rc == SR_OK) {
            rc = add_var(c, &metas[i], vb, 1);
        }
        if (rc != SR_OK) {
            vbuf_release(vb);
            break;
        }
    }
    free(metas);
    return rc;
}

static void
model_ready_now(coord *c)
{
    int k = c->o->init_tokens >= 0 ? c->o->init_tokens : c->o->R;

    c->model_ready = 1;
    if (sr__tokens_put(&c->tokens, c->global_step, (size_t)k) != SR_OK) {
        SR_LOG(SR_LOG_ERR, "COORD-TOKENS", "cannot queue %d init tokens: %s", k, sr_errdetail());
    }
    SR_LOG(SR_LOG_NOTICE, "COORD-READY",
           "model ready variables=%zu trainable=%zu global_step=%" PRId64 " init_tokens=%d",
           c->nvars, c->ntrainable, c->global_step, k);
}

/* ---- step apply, commit and tokens -------------------------------------- */

static sr_err
log_contribs(coord *c, const cvar *v, uint32_t p, int64_t step)
{
    const sr_accum   *a = &v->acc[p];
    sr_store_contrib *l;

    if (!c->o->step_log) {
        return SR_OK;
    }
    l = sr_grow_array(c->log, &c->cap_log, c->nlog + (size_t)a->count, sizeof(*l));
    if (l == NULL) {
        return sr_fail(SR_ENOMEM, "step log of %zu rows", c->nlog + (size_t)a->count);
    }
    c->log = l;
    for (int i = 0; i < a->count; i++) {
        l = &c->log[c->nlog++];
        l->step = step;
        l->var_id = v->meta.id;
        l->part = (int64_t)((uint64_t)p * v->part_rows * v->row_elems);
        l->pos = i;
        l->task_index = a->contrib[i].task_index;
        l->local_step = a->contrib[i].local_step;
    }
    return SR_OK;
}

/* Everything of one commit.  With `copies`, the job owns copies of the
 * tensors, dirty maps and log, so the loop may go on changing its own. */
typedef struct commit_job {
    sr_store_commit   cm;
    sr_store_tensor  *t;
    sr_store_worker  *w;
    sr_store_contrib *log;
    void            **own; /* owned buffers, freed with the job */
    size_t            nown;
    vbuf            **held; /* values referenced instead of copied */
    size_t            nheld;
} commit_job;

static void
job_free(commit_job *j)
{
    if (j == NULL) {
        return;
    }
    for (size_t i = 0; i < j->nown; i++) {
        free(j->own[i]);
    }
    for (size_t i = 0; i < j->nheld; i++) {
        vbuf_release(j->held[i]);
    }
    free(j->own);
    free(j->held);
    free(j->t);
    free(j->w);
    free(j->log);
    free(j);
}

static void *
job_copy(commit_job *j, const void *p, size_t n)
{
    void *q = malloc(n ? n : 1);
    if (q != NULL) {
        memcpy(q, p, n);
        j->own[j->nown++] = q;
    }
    return q;
}

/* Build the commit of the current state: every dirty variable's value and
 * slots, the workers and the step-log rows not yet committed. */
static sr_err
build_job(coord *c, int copies, commit_job **out)
{
    commit_job *j = calloc(1, sizeof(*j));
    size_t      nt = 0;

    if (j == NULL || (j->t = calloc(c->nvars * 4 + 1, sizeof(*j->t))) == NULL ||
        (j->w = calloc(c->nworkers + 1, sizeof(*j->w))) == NULL ||
        (copies && (j->own = calloc(c->nvars * 5 + 2, sizeof(void *))) == NULL) ||
        (copies && (j->held = calloc(c->nvars + 1, sizeof(vbuf *))) == NULL)) {
        job_free(j);
        return sr_fail(SR_ENOMEM, "commit arrays");
    }
    for (size_t i = 0; i < c->nvars; i++) {
        cvar *v = &c->vars[i];
        if (!v->dirty_any) {
            continue;
        }
        const struct {
            const char *slot;
            void       *data;
            int         all;
        } parts[4] = {
            {"", v->value, 0},
            {c->o->optim.kind == SR_OPT_MOMENTUM ? "momentum" : "adam_m", v->s1, 0},
            {"adam_v", v->s2, 0},
            {"ema", v->ema, 1},
        };
        const uint8_t *dirty = v->dirty;
        if (copies && (dirty = job_copy(j, v->dirty, v->nchunks)) == NULL) {
            job_free(j);
            return sr_fail(SR_ENOMEM, "commit snapshot");
        }
        for (int p = 0; p < 4; p++) {
            if (parts[p].data == NULL) {
                continue;
            }
            const void *data = parts[p].data;
            if (copies && p == 0) {
                /* The value is never written while referenced (apply_target). */
                atomic_fetch_add(&v->vb->refs, 1);
                j->held[j->nheld++] = v->vb;
            } else if (copies && (data = job_copy(j, data, (size_t)v->meta.nbytes)) == NULL) {
                job_free(j);
                return sr_fail(SR_ENOMEM, "commit snapshot of %s", SR_ESC(v->meta.name));
            }
            j->t[nt].var_id = v->meta.id;
            j->t[nt].slot = parts[p].slot;
            j->t[nt].data = data;
            j->t[nt].len_bytes = (size_t)v->meta.nbytes;
            j->t[nt].dirty = parts[p].all ? NULL : dirty;
            nt++;
        }
    }
    for (size_t i = 0; i < c->nworkers; i++) {
        j->w[i].task_index = c->workers[i].task;
        j->w[i].local_step = c->workers[i].local_step;
        j->w[i].last_seen_ms = c->workers[i].last_seen_wall_ms;
        j->w[i].incarnation = c->incarnation;
    }
    if (c->nlog > 0) {
        if ((j->log = malloc(c->nlog * sizeof(*j->log))) == NULL) {
            job_free(j);
            return sr_fail(SR_ENOMEM, "commit step log");
        }
        memcpy(j->log, c->log, c->nlog * sizeof(*j->log));
    }
    j->cm.global_step = c->global_step;
    j->cm.tensors = j->t;
    j->cm.ntensors = nt;
    j->cm.workers = j->w;
    j->cm.nworkers = c->nworkers;
    j->cm.log = j->log;
    j->cm.nlog = c->nlog;
    *out = j;
    return SR_OK;
}

/* The state went into a commit (or a snapshot of one): start afresh. */
static void
mark_clean(coord *c)
{
    c->nlog = 0;
    for (size_t i = 0; i < c->nvars; i++) {
        if (c->vars[i].dirty_any) {
            memset(c->vars[i].dirty, 0, c->vars[i].nchunks ? c->vars[i].nchunks : 1);
            c->vars[i].dirty_any = 0;
        }
    }
}

/* sr_store_commit_step, counted in c's commit counters (STATUS "commits",
 * the shutdown log's COORD-COMMITS).  The loop or the writer thread. */
static sr_err
timed_commit(coord *c, sr_store *st, const sr_store_commit *cm)
{
    int64_t  t0 = sr_clock_now_ns();
    sr_err   rc = sr_store_commit_step(st, cm);
    uint64_t us = (uint64_t)((sr_clock_now_ns() - t0) / 1000);

    if (rc != SR_OK) {
        atomic_fetch_add(&c->commit_failures, 1);
        return rc;
    }
    atomic_fetch_add(&c->commits, 1);
    atomic_fetch_add(&c->commit_us, us);
    atomic_store(&c->commit_last_us, us);
    uint64_t max = atomic_load(&c->commit_max_us);
    while (us > max && !atomic_compare_exchange_weak(&c->commit_max_us, &max, us)) {
    }
    return rc;
}

/* The mean of the timed commits, in ms (0 when none). */
static double
commit_mean_ms(const coord *c)
{
    uint64_t n = atomic_load(&c->commits);
    return n ? (double)atomic_load(&c->commit_us) / 1000.0 / (double)n : 0.0;
}

static sr_err
commit_now(coord *c)
{
    commit_job *j = NULL;
    sr_err      rc = build_job(c, 0, &j);

    if (rc != SR_OK) {
        return rc;
    }
    rc = timed_commit(c, c->st, &j->cm);
    if (rc == SR_OK) {
        c->committed_step = c->global_step;
        mark_clean(c);
    }
    job_free(j);
    return rc;
}

/* The writer thread (--commit async): commits the jobs the loop hands it, one
 * at a time, through its own store connection; a failed commit is retried
 * every second (the loop snapshots nothing new meanwhile). */
static void *
writer_main(void *arg)
{
    coord *c = arg;

    pthread_mutex_lock(&c->wmu);
    for (;;) {
        while (c->wjob == NULL && !c->wstop) {
            pthread_cond_wait(&c->wcv, &c->wmu);
        }
        if (c->wjob == NULL) {
            break;
        }
        commit_job *j = c->wjob;
        pthread_mutex_unlock(&c->wmu);
        sr_err rc = timed_commit(c, c->wst, &j->cm);
        if (rc != SR_OK) {
            SR_LOG(SR_LOG_ERR, "COORD-COMMIT-FAIL",
                   "async step=%" PRId64 " err=%s detail=\"%s\"; retrying", j->cm.global_step,
                   sr_errname(rc), sr_store_errmsg(c->wst));
        }
        pthread_mutex_lock(&c->wmu);
        if (rc == SR_OK) {
            c->wcommitted = j->cm.global_step;
            c->wjob = NULL;
            job_free(j);
            pthread_cond_broadcast(&c->wcv);
        } else if (c->wstop) {
            break; /* the loop takes the job back and tries itself */
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&c->wcv, &c->wmu, &ts);
        }
    }
    pthread_mutex_unlock(&c->wmu);
    return NULL;
}

/* --commit async: hand the writer a snapshot if it is idle and the last
 * one is at least --commit-interval-ms old; otherwise the snapshot waits
 * (commit_wanted) and the dirty state keeps accumulating.  The interval
 * keeps a small model from committing every step on cores its workers need
 * (docs/performance.md, row 2); the loop polls every millisecond while a
 * snapshot waits, so an idle job is committed soon after its last step. */
static void
async_snapshot(coord *c)
{
    commit_job *j = NULL;

    pthread_mutex_lock(&c->wmu);
    int idle = c->wjob == NULL;
    c->committed_step = c->wcommitted;
    pthread_mutex_unlock(&c->wmu);
    if (!idle || !c->commit_wanted) {
        return;
    }
    int64_t now = sr_clock_now_ns();
    if (now - c->last_snapshot_ns < (int64_t)c->o->commit_interval_ms * 1000000) {
        return;
    }
    c->last_snapshot_ns = now;
    if (build_job(c, 1, &j) != SR_OK) {
        SR_LOG(SR_LOG_ERR, "COORD-SNAPSHOT", "%s; retrying", sr_errdetail());
        return;
    }
    mark_clean(c);
    c->commit_wanted = 0;
    pthread_mutex_lock(&c->wmu);
    c->wjob = j;
    pthread_cond_signal(&c->wcv);
    pthread_mutex_unlock(&c->wmu);
}

/* The store options of the coordinator's connections. */
static void
store_opts(const sr_coord_opts *o, sr_store_opts *so)
{
    memset(so, 0, sizeof(*so));
    so->sync = o->sync_normal ? SR_STORE_SYNC_NORMAL : SR_STORE_SYNC_FULL;
    so->keep_checkpoints = o->keep_checkpoints;
    so->page_size = o->store_page_size;
    so->checkpoint_inline = o->wal_checkpoint == SR_WAL_CKPT_INLINE;
    so->wal_checkpoint_bytes = o->wal_limit_bytes;
}

static sr_err
writer_start(coord *c)
{
    sr_store_opts so;

    store_opts(c->o, &so);
    so.skip_quick_check = 1; /* the loop's connection checked the file */
    /* The writer runs off the step's path already: by default it copies the
     * WAL itself when it fills (no third thread taking CPU from the step). */
    so.checkpoint_inline = c->o->wal_checkpoint != SR_WAL_CKPT_THREAD;
    sr_err rc = sr_store_open(c->o->store_path, &so, &c->wst);
    if (rc != SR_OK) {
        return rc;
    }
    pthread_mutex_init(&c->wmu, NULL);
    pthread_cond_init(&c->wcv, NULL);
    c->wcommitted = c->committed_step;
    if (pthread_create(&c->writer, NULL, writer_main, c) != 0) {
        return sr_fail(SR_ENOMEM, "cannot start the commit writer thread");
    }
    c->writer_started = 1;
    return SR_OK;
}

/* Stop the writer after its current job; a job it could not commit comes
 * back to the loop's connection. */
static sr_err
writer_stop(coord *c)
{
    sr_err rc = SR_OK;

    if (!c->writer_started) {
        return SR_OK;
    }
    pthread_mutex_lock(&c->wmu);
    c->wstop = 1;
    pthread_cond_broadcast(&c->wcv);
    pthread_mutex_unlock(&c->wmu);
    pthread_join(c->writer, NULL);
    c->writer_started = 0;
    c->committed_step = c->wcommitted;
    if (c->wjob != NULL) {
        rc = timed_commit(c, c->st, &c->wjob->cm);
        if (rc == SR_OK) {
            c->committed_step = c->wjob->cm.global_step;
        }
        job_free(c->wjob);
        c->wjob = NULL;
    }
    sr_store_close(c->wst);
    c->wst = NULL;
    pthread_mutex_destroy(&c->wmu);
    pthread_cond_destroy(&c->wcv);
    return rc;
}

static void serve_parked(coord *c);

/* Queue step g's tokens.  Tokens older than g - 1 left in the queue are
 * dropped first: no worker takes one but a newly started one, for a round
 * that can only be stale, and with a backup replica gone for good one
 * token a step would pile up (the queue stays within a step or two). */
static void
release_tokens(coord *c, size_t n)
{
    sr__tokens_drop_below(&c->tokens, c->global_step - 1);
    if (sr__tokens_put(&c->tokens, c->global_step, n) != SR_OK) {
        SR_LOG(SR_LOG_ERR, "COORD-TOKENS", "cannot queue %zu tokens: %s", n, sr_errdetail());
        return;
    }
    serve_parked(c);
}

/* Commit (when the policy says so) and release the step's tokens; a failed
 * commit keeps the tokens back and is retried from the loop. */
static void
commit_and_release(coord *c)
{
    sr_err rc = commit_now(c);
    if (rc != SR_OK) {
        if (!c->commit_pending) {
            SR_LOG(SR_LOG_ERR, "COORD-COMMIT-FAIL",
                   "step=%" PRId64 " err=%s detail=\"%s\"; tokens held, retrying", c->global_step,
                   sr_errname(rc), sr_errdetail());
        }
        c->commit_pending = 1;
        c->commit_retry_ms = sr_clock_now_ms() + 1000;
        return;
    }
    if (c->commit_pending) {
        SR_LOG(SR_LOG_NOTICE, "COORD-COMMIT-OK", "step=%" PRId64 " committed after retry",
               c->global_step);
    }
    c->commit_pending = 0;
    if (c->pending_release > 0) {
        size_t n = (size_t)c->pending_release;
        c->pending_release = 0;
        release_tokens(c, n);
    }
}

static void
apply_step(coord *c)
{
    int64_t t = c->global_step + 1; /* 1-based count of applied steps */
    size_t  ntok = (size_t)(c->o->N > c->o->R ? c->o->N : c->o->R);

    for (size_t i = 0; i < c->nvars; i++) {
        cvar *v = &c->vars[i];
        if (!v->has_acc) {
            continue;
        }
        vbuf *to = apply_target(c, v);
        if (to == NULL) {
            /* Out of memory while pulls or the writer still read the value:
             * give them a moment to finish before writing in place. */
            SR_LOG(SR_LOG_ERR, "COORD-APPLY-WAIT", "%s", sr_errdetail());
            for (int k = 0; k < 1000 && atomic_load(&v->vb->refs) > 1; k++) {
                sr_clock_sleep_ms(1);
            }
            to = v->vb;
        }
        vbuf *from = v->vb; /* the previous value; == to when in place */
        v->vb = to;
        v->value = to->data;
        size_t es = sr_dtype_size(v->meta.dtype);
        for (uint32_t p = 0; p < v->nparts; p++) {
            uint64_t r0, nr;
            part_range(v, p, &r0, &nr);
            uint64_t e0 = r0 * v->row_elems;
            size_t   off = (size_t)e0 * es;
            sr__optim_apply_accum_from(&c->o->optim, t, &v->acc[p], (uint8_t *)v->value + off,
                                       from->data + off, v->s1 ? (uint8_t *)v->s1 + off : NULL,
                                       v->s2 ? (uint8_t *)v->s2 + off : NULL, v->dirty,
                                       v->chunk_elems, e0);
            if (log_contribs(c, v, p, c->global_step) != SR_OK) {
                SR_LOG(SR_LOG_ERR, "COORD-STEPLOG", "%s", sr_errdetail());
            }
            sr__accum_reset(&v->acc[p]);
        }
        if (to == v->ab) {
            /* The sums are the value now; the previous value becomes the
             * next step's sums once its pulls are sent (acc_memory). */
            v->ab = NULL;
            for (uint32_t p = 0; p < v->nparts; p++) {
                sr__accum_set_sum(&v->acc[p], NULL);
            }
        }
        if (from != to) {
            /* Pulls and the writer drop their references when done; the
             * buffer is kept for the apply after next (async) or the next
             * step's sums (sync, after the hand-over above). */
            if (v->spare == NULL && (c->o->commit_async || v->ab == NULL)) {
                v->spare = from;
            } else {
                vbuf_release(from);
            }
        }
        if (v->ema != NULL) {
            uint64_t n = v->meta.nbytes / sr_dtype_size(v->meta.dtype);
            if (v->meta.dtype == SR_FLOAT32) {
                sr__ema_f32(c->o->optim.ema_decay, v->ema, v->value, n);
            } else {
                sr__ema_f64(c->o->optim.ema_decay, v->ema, v->value, n);
            }
        }
        v->dirty_any = 1;
    }
    c->ntaken = 0;
    c->global_step++;
    SR_LOG(SR_LOG_DEBUG, "COORD-APPLY", "global_step=%" PRId64, c->global_step);
    if (c->o->checkpoint_every > 0 && c->global_step % c->o->checkpoint_every == 0 &&
        c->o->commit_async) {
        /* The tokens go out now; a crash may lose this step, never an older
         * committed one (docs/performance.md, --commit async). */
        c->commit_wanted = 1;
        async_snapshot(c);
        release_tokens(c, ntok);
    } else if (c->o->checkpoint_every > 0 && c->global_step % c->o->checkpoint_every == 0) {
        c->pending_release += (int64_t)ntok;
        commit_and_release(c);
    } else {
        release_tokens(c, ntok);
    }
}

/* ---- tokens ------------------------------------------------------------- */

/* zmq_msg_init_data's free function for a pull reply: sent. */
static void
pull_slot_free(void *data, void *hint)
{
    pull_slot *s = hint;
    (void)data;
    vbuf_release(s->vb);
    atomic_store(&s->busy, 0);
}

/* Append a zero-copy frame of v's value (ZMQ_SNDMORE unless last); with a
 * slot, the frame is a pull reply that frees the slot once sent. */
static int
send_value_frame(coord *c, cvar *v, int last, pull_slot *slot)
{
    zmq_msg_t m;

    if (v->meta.nbytes == 0) {
        zmq_msg_init(&m);
    } else {
        atomic_fetch_add(&v->vb->refs, 1);
        if (slot != NULL) {
            slot->vb = v->vb;
            slot->bytes = v->meta.nbytes;
            atomic_store(&slot->busy, 1);
        }
        if (zmq_msg_init_data(&m, v->value, (size_t)v->meta.nbytes,
                              slot != NULL ? pull_slot_free : vbuf_msg_free,
                              slot != NULL ? (void *)slot : (void *)v->vb) != 0) {
            if (slot != NULL) {
                atomic_store(&slot->busy, 0);
            }
            vbuf_release(v->vb);
            return -1;
        }
    }
    if (zmq_msg_send(&m, c->sock, (last ? 0 : ZMQ_SNDMORE) | ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m); /* not sent: drops the reference */
        return -1;
    }
    return 0;
}

/* Whether a TOKEN reply may carry the whole model (one round trip per
 * step for small models). */
static int
piggyback_ok(const coord *c)
{
    return c->nvars > 0 && c->total_var_bytes <= c->o->piggyback_max_bytes;
}

static void
encode_vardesc(const cvar *v, uint8_t *buf, size_t cap, frame *f)
{
    sr_wire_vardesc d;

    memset(&d, 0, sizeof(d));
    memcpy(d.name, v->meta.name, sizeof(d.name));
    d.dtype = (uint8_t)v->meta.dtype;
    d.flags = v->meta.trainable ? 0 : SR_DECLARE_NOT_TRAINABLE;
    d.ndim = (uint8_t)v->meta.ndim;
    memcpy(d.shape, v->meta.shape, sizeof(d.shape));
    f->data = buf;
    f->len = sr_wire_vardesc_encode(&d, buf, cap);
}

/* The TOKEN reply: the token's value in the header; with `want` and a
 * small model, the current variables after it. 0, or -1 if the peer is gone. */
static int
send_token_reply(coord *c, client *cl, uint64_t req_id, int64_t token, int want)
{
    sr_wire_header   h;
    sr_wire_vars_hdr vh = {c->global_step, (uint32_t)c->nvars};
    uint8_t          vb[16], db[SR_WIRE_BODY_MAX];
    frame            f;
    int              vars = want && piggyback_ok(c);

    memset(&h, 0, sizeof(h));
    h.type = SR_MSG_TOKEN;
    h.request_id = req_id;
    h.client_id = cl->client_id;
    h.task_index = cl->task;
    /* The pushes' answers first, as they came: in the token's message when
     * the client reads chains. */
    if (cl->chained > 0 && cl->nheld > 0) {
        if (zmq_send(c->sock, cl->rid, cl->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
            return -1;
        }
        send_held(c, cl, HELD_BEFORE_REPLY);
        if (send_hdr(c, &h, SR_OK, token, 0, vars) != 0) {
            return -1;
        }
    } else {
        flush_held(c, cl);
        if (send_head(c, cl->rid, cl->rid_len, &h, SR_OK, token, 0, vars) != 0) {
            return -1;
        }
    }
    if (!vars) {
        return 0;
    }
    /* The rest goes into the same pipe as the first frames: ZeroMQ delivers
     * a multipart message whole or not at all. */
    zmq_send(c->sock, vb, sr_wire_vars_hdr_encode(&vh, vb, sizeof(vb)), ZMQ_SNDMORE);
    for (size_t i = 0; i < c->nvars; i++) {
        encode_vardesc(&c->vars[i], db, sizeof(db), &f);
        zmq_send(c->sock, f.data, f.len, ZMQ_SNDMORE);
        send_value_frame(c, &c->vars[i], i + 1 == c->nvars, NULL);
    }
    return 0;
}

/* The smallest token value cl may take now.  Tokens carry no owner, but a
 * worker takes at most its task's share of one value's tokens (one when
 * N >= R): a worker that already holds a token of step g and pushed for it
 * waits for g + 1 instead of taking the token of a worker still on its
 * way.  (Its first token may be of the step it is on: the seed's first
 * rounds take the init tokens so.) */
static int64_t
token_floor(const coord *c, const client *cl)
{
    int64_t floor = 0;
    if (cl->have_token) {
        floor = cl->last_token_count < task_share(c->o) ? cl->last_token : cl->last_token + 1;
    }
    return floor > cl->min_token ? floor : cl->min_token;
}

static int
give_token(coord *c, client *cl, uint64_t req_id, int want)
{
    int64_t v;

    if (c->commit_pending || sr__tokens_take_min(&c->tokens, token_floor(c, cl), &v) != 0) {
        return -1;
    }
    if (send_token_reply(c, cl, req_id, v, want) != 0) {
        /* The peer is gone: the token must not vanish with it. */
        sr__tokens_unget(&c->tokens, v);
        cl->parked = 0;
        return -2;
    }
    cl->parked = 0;
    cl->token_req = req_id;
    cl->token_val = v;
    cl->last_token_count = cl->have_token && cl->last_token == v ? cl->last_token_count + 1 : 1;
    cl->last_token = v;
    cl->have_token = 1;
    touch_worker(c, cl->task, v);
    return 0;
}

/* Hand out tokens to the parked clients, oldest request first; a client
 * waiting for a later step's token (min_token) than any queued is passed
 * over, and the ones after it are served. */
static void
serve_parked(coord *c)
{
    uint64_t after = 0; /* parked_order of the last client considered */

    while (c->tokens.len > 0 && !c->commit_pending) {
        client *best = NULL;
        for (size_t i = 0; i < c->nclients; i++) {
            client *cl = &c->clients[i];
            if (cl->parked && cl->parked_order > after &&
                (best == NULL || cl->parked_order < best->parked_order)) {
                best = cl;
            }
        }
        if (best == NULL) {
            return;
        }
        after = best->parked_order;
        give_token(c, best, best->parked_req, best->parked_want);
    }
}

/* ---- message handlers --------------------------------------------------- */

typedef struct req_ctx {
    const uint8_t *rid;
    size_t         rid_len;
    sr_wire_header h;
    zmq_msg_t     *body; /* body frames (after the header) */
    int            nbody;
    client        *cl;
} req_ctx;

/* The PULL reply: a descriptor frame, then the value itself, sent from the
 * variable's buffer (no copy); the buffer stays alive until ZeroMQ is done. */
static void send_reply_value(coord *c, const req_ctx *r, const frame *desc, cvar *v);
static void handle_pull_many(coord *c, req_ctx *r);

#define REPLY_ERR(r, code, ...)                                       \
    do {                                                              \
        char msg_[1024];                                              \
        snprintf(msg_, sizeof(msg_), __VA_ARGS__);                    \
        send_error(c, (r)->rid, (r)->rid_len, &(r)->h, (code), msg_); \
    } while (0)

static void
handle_hello(coord *c, req_ctx *r)
{
    sr_wire_hello_rep rep = {c->global_step,
                             (uint8_t)c->model_ready,
                             c->o->R,
                             c->o->N,
                             c->max_msg > 0 ? (uint64_t)c->max_msg : 0,
                             c->o->partition_bytes};
    uint8_t           buf[SR_WIRE_BODY_MAX];
    size_t            n = sr_wire_hello_rep_encode(&rep, buf, sizeof(buf));
    frame             f = {buf, n};

    touch_worker(c, r->h.task_index, c->model_ready ? c->global_step : -1);
    /* Flagged: this coordinator accepts chains and pulls of many variables
     * (docs/protocol.md). */
    if (send_head(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step,
                  SR_WIRE_F_CHAIN | SR_WIRE_F_MANY, 1) == 0) {
        zmq_send(c->sock, f.data, f.len, 0);
    }
}

static int
shape_equal(const sr_store_var *m, const sr_wire_vardesc *d)
{
    if (m->dtype != d->dtype || m->ndim != d->ndim) {
        return 0;
    }
    for (int i = 0; i < m->ndim; i++) {
        if (m->shape[i] != d->shape[i]) {
            return 0;
        }
    }
    return 1;
}

static void
describe(int dtype, int ndim, const int64_t *shape, char *buf, size_t len)
{
    char s[160];
    sr_shape_format(ndim, shape, s, sizeof(s));
    snprintf(buf, len, "%s%s", sr_dtype_name(dtype), s);
}

/* A new variable of nbytes takes its value and, if trainable, its
 * accumulator's sums and the optimizer's state (the pulls' extra values
 * come and go).  One that needs more than the machine's physical memory is
 * refused: it could only end in the kernel's OOM killer (the allocation
 * succeeds, the pages fail later), and the chief's declaration, sent again
 * after the restart, would end there again. */
static sr_err
fits_memory(const coord *c, const char *name, uint64_t nbytes, int trainable)
{
    const char *slots[3];
    uint64_t    copies = trainable ? 2 + (uint64_t)sr__optim_slots(&c->o->optim, slots) : 1;
    long        pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

    if (pages <= 0 || psz <= 0) {
        return SR_OK; /* unknown: the allocation decides */
    }
    uint64_t phys = (uint64_t)pages * (uint64_t)psz;
    uint64_t need = nbytes > UINT64_MAX / copies ? UINT64_MAX : nbytes * copies;
    if (need <= phys) {
        return SR_OK;
    }
    return sr_fail(SR_ENOMEM,
                   "variable %s: %" PRIu64 " bytes, %" PRIu64
                   " with its accumulator and optimizer state: more than this machine's memory "
                   "(%" PRIu64 " bytes)",
                   SR_ESC(name), nbytes, need, phys);
}

/* Is b the same declaration as a (name, dtype, shape, trainability)? */
static int
same_decl(const sr_wire_vardesc *a, const sr_wire_vardesc *b)
{
    return strcmp(a->name, b->name) == 0 && a->dtype == b->dtype && a->ndim == b->ndim &&
           memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(a->shape[0])) == 0 &&
           ((a->flags ^ b->flags) & SR_DECLARE_NOT_TRAINABLE) == 0;
}

static void
pdecl_drop(coord *c)
{
    vbuf_release(c->pdecl_vb);
    c->pdecl_vb = NULL;
    c->pdecl_got = 0;
}

/* One part of the chief's initial value of d (nbytes in all): frame 1 its
 * pushdesc p, frame 2 its bytes.  The parts go in order from byte 0 (a
 * part at 0 of another declaration starts that one; one already taken may
 * come again).  Returns the value's buffer once its last byte is in;
 * otherwise NULL, having answered the part. */
static vbuf *
declare_part(coord *c, req_ctx *r, const sr_wire_vardesc *d, const sr_wire_pushdesc *p,
             uint64_t nbytes)
{
    size_t len = zmq_msg_size(&r->body[2]);
    int    same = c->pdecl_vb != NULL && same_decl(&c->pdecl, d);

    if (len == 0 || p->offset > nbytes || len > nbytes - p->offset) {
        REPLY_ERR(r, SR_EINVAL,
                  "declare %s: a part of %zu bytes at byte %" PRIu64 " is outside its %" PRIu64
                  " bytes",
                  SR_ESC(d->name), len, p->offset, nbytes);
        return NULL;
    }
    if (p->offset == 0 && !same) {
        pdecl_drop(c);
        if ((c->pdecl_vb = vbuf_new((size_t)nbytes)) == NULL) {
            REPLY_ERR(r, SR_ENOMEM, "variable %s: cannot allocate %" PRIu64 " bytes",
                      SR_ESC(d->name), nbytes);
            return NULL;
        }
        c->pdecl = *d;
    } else if (!same || p->offset > c->pdecl_got) {
        REPLY_ERR(r, SR_EINVAL,
                  "declare %s: a part at byte %" PRIu64 ", but %" PRIu64
                  " bytes of its initial value have arrived (the parts go in order from byte 0)",
                  SR_ESC(d->name), p->offset, same ? c->pdecl_got : 0);
        return NULL;
    }
    memcpy(c->pdecl_vb->data + p->offset, zmq_msg_data(&r->body[2]), len);
    if (p->offset + len > c->pdecl_got) {
        c->pdecl_got = p->offset + len;
    }
    if (c->pdecl_got < nbytes) {
        send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, NULL, 0);
        return NULL;
    }
    vbuf *vb = c->pdecl_vb;
    c->pdecl_vb = NULL;
    c->pdecl_got = 0;
    return vb;
}

/* DECLARE's frames: vardesc, then the whole initial value (optional), or
 * (flag SR_WIRE_DECLARE_PART) a pushdesc and one part of it. */
static sr_err
declare_frames(const req_ctx *r, sr_wire_vardesc *d, sr_wire_pushdesc *p)
{
    if (r->nbody < 1) {
        return sr_fail(SR_EPROTO, "no descriptor");
    }
    sr_err rc = sr_wire_vardesc_decode(zmq_msg_data(&r->body[0]), zmq_msg_size(&r->body[0]), d);
    if (rc != SR_OK) {
        return rc;
    }
    if (!(d->flags & SR_WIRE_DECLARE_PART)) {
        return r->nbody <= 2 ? SR_OK : sr_fail(SR_EPROTO, "%d frames, at most 2", r->nbody);
    }
    if (r->nbody != 3) {
        return sr_fail(SR_EPROTO, "a part: %d frames, not 3", r->nbody);
    }
    if ((rc = sr_wire_pushdesc_decode(zmq_msg_data(&r->body[1]), zmq_msg_size(&r->body[1]), p)) !=
        SR_OK) {
        return rc;
    }
    if (strcmp(p->name, d->name) != 0 || p->dtype != d->dtype ||
        p->count != zmq_msg_size(&r->body[2])) {
        return sr_fail(SR_EPROTO, "a part's descriptor does not match its variable or its bytes");
    }
    return SR_OK;
}

static void
handle_declare(coord *c, req_ctx *r)
{
    sr_wire_vardesc  d;
    sr_wire_pushdesc p;
    sr_store_var     meta;
    uint64_t         nbytes;
    cvar            *v;
    int              trainable;
    vbuf            *vb;
    char             have[200], want[200];

    if (declare_frames(r, &d, &p) != SR_OK) {
        REPLY_ERR(r, SR_EPROTO, "DECLARE: %s", sr_errdetail());
        return;
    }
    if (sr_name_check(d.name, strlen(d.name)) != SR_OK) {
        REPLY_ERR(r, SR_EINVAL, "declare \"%s\": %s", SR_ESC(d.name), sr_errdetail());
        return;
    }
    if (sr_shape_bytes(d.dtype, d.ndim, d.shape, &nbytes) != SR_OK) {
        REPLY_ERR(r, SR_EINVAL, "DECLARE %s: %s", SR_ESC(d.name), sr_errdetail());
        return;
    }
    trainable = sr_dtype_is_float(d.dtype) && !(d.flags & SR_DECLARE_NOT_TRAINABLE);
    describe(d.dtype, d.ndim, d.shape, want, sizeof(want));
    if ((v = find_var(c, d.name)) != NULL) {
        describe(v->meta.dtype, v->meta.ndim, v->meta.shape, have, sizeof(have));
        if (!shape_equal(&v->meta, &d)) {
            REPLY_ERR(r, SR_EEXIST, "variable %s exists as %s, declared as %s", SR_ESC(d.name),
                      have, want);
            return;
        }
        if (v->meta.trainable != trainable) {
            REPLY_ERR(r, SR_EEXIST, "variable %s exists %s, declared %s", SR_ESC(d.name),
                      v->meta.trainable ? "trainable" : "not trainable",
                      trainable ? "trainable" : "not trainable");
            return;
        }
        send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, NULL, 0);
        return;
    }
    if (c->nvars >= SR_COORD_MAX_VARIABLES) {
        REPLY_ERR(r, SR_EINVAL, "declare %s: the model already has %d variables, the limit",
                  SR_ESC(d.name), SR_COORD_MAX_VARIABLES);
        return;
    }
    if (r->h.task_index != 0 || (d.flags & SR_WIRE_DECLARE_CHECK_ONLY)) {
        REPLY_ERR(
            r, c->model_ready || (d.flags & SR_WIRE_DECLARE_CHECK_ONLY) ? SR_ENOENT : SR_ENOTREADY,
            "variable %s: not declared by the chief%s", SR_ESC(d.name),
            c->model_ready ? "" : " (model not ready yet)");
        return;
    }
    if (fits_memory(c, d.name, nbytes, trainable) != SR_OK) {
        REPLY_ERR(r, SR_ENOMEM, "%s", sr_errdetail());
        return;
    }
    if (d.flags & SR_WIRE_DECLARE_PART) {
        if ((vb = declare_part(c, r, &d, &p, nbytes)) == NULL) {
            return; /* answered: more parts to come, or refused */
        }
    } else {
        if (r->nbody == 2 && zmq_msg_size(&r->body[1]) != nbytes) {
            REPLY_ERR(r, SR_EINVAL, "variable %s %s: initial value is %zu bytes, expected %" PRIu64,
                      SR_ESC(d.name), want, zmq_msg_size(&r->body[1]), nbytes);
            return;
        }
        if ((vb = vbuf_new((size_t)nbytes)) == NULL) {
            REPLY_ERR(r, SR_ENOMEM, "variable %s: cannot allocate %" PRIu64 " bytes",
                      SR_ESC(d.name), nbytes);
            return;
        }
        if (r->nbody == 2) {
            memcpy(vb->data, zmq_msg_data(&r->body[1]), (size_t)nbytes);
        } else {
            memset(vb->data, 0, (size_t)nbytes);
        }
    }
    sr_err rc = sr_store_declare(c->st, d.name, d.dtype, d.ndim, d.shape, trainable, vb->data,
                                 (size_t)nbytes, &meta.id, NULL);
    if (rc == SR_OK) {
        rc = sr_store_find_var(c->st, d.name, &meta);
    }
    if (rc == SR_OK) {
        rc = add_var(c, &meta, vb, 0);
    }
    if (rc != SR_OK) {
        vbuf_release(vb);
        REPLY_ERR(r, rc, "declare %s: %s", SR_ESC(d.name), sr_errdetail());
        return;
    }
    if (c->pdecl_vb != NULL && strcmp(c->pdecl.name, d.name) == 0) {
        pdecl_drop(c); /* an unfinished attempt at the same variable */
    }
    SR_LOG(SR_LOG_NOTICE, "COORD-DECLARE",
           "variable=\"%s\" type=%s bytes=%" PRIu64 " trainable=%d global_step=%" PRId64 "%s%s",
           SR_ESC(d.name), want, nbytes, trainable, c->global_step,
           (d.flags & SR_WIRE_DECLARE_PART) ? " (in parts)" : "",
           c->model_ready ? " (added to a ready model)" : "");
    send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, NULL, 0);
}

static void
handle_ready(coord *c, req_ctx *r)
{
    sr_wire_ready_req q;
    uint8_t           buf[SR_WIRE_BODY_MAX];

    if (r->nbody != 1 || sr_wire_ready_req_decode(zmq_msg_data(&r->body[0]),
                                                  zmq_msg_size(&r->body[0]), &q) != SR_OK) {
        REPLY_ERR(r, SR_EPROTO, "READY: bad body");
        return;
    }
    if (q.mark && r->h.task_index != 0) {
        REPLY_ERR(r, SR_EINVAL, "READY: only the chief (task 0) marks the model ready");
        return;
    }
    if (q.mark && !c->model_ready) {
        sr_err rc = sr_store_set_ready(c->st);
        if (rc != SR_OK) {
            REPLY_ERR(r, rc, "mark ready: %s", sr_errdetail());
            return;
        }
        model_ready_now(c);
    }
    if (c->model_ready) {
        touch_worker(c, r->h.task_index, c->global_step);
    }
    sr_wire_ping_rep rep = {(uint8_t)c->model_ready, c->global_step};
    frame            f = {buf, sr_wire_ping_rep_encode(&rep, buf, sizeof(buf))};
    send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, &f, 1);
}

/* The variables a PULL's name frames name, into vars: 0, or -1 after an
 * error reply (a frame that is no name, the model not ready, an unknown
 * name). */
static int
pull_targets(coord *c, req_ctx *r, cvar **vars)
{
    sr_wire_name nm;

    for (int i = 0; i < r->nbody; i++) {
        if (sr_wire_name_decode(zmq_msg_data(&r->body[i]), zmq_msg_size(&r->body[i]), &nm) !=
            SR_OK) {
            if (r->h.flags & SR_WIRE_F_MANY) {
                REPLY_ERR(r, SR_EPROTO, "PULL: bad name frame %d", i + 1);
            } else {
                REPLY_ERR(r, SR_EPROTO, "PULL: bad name frame");
            }
            return -1;
        }
        if (sr_name_check(nm.name, strlen(nm.name)) != SR_OK) {
            REPLY_ERR(r, SR_EINVAL, "pull \"%s\": %s", SR_ESC(nm.name), sr_errdetail());
            return -1;
        }
        if (!c->model_ready) {
            REPLY_ERR(r, SR_ENOTREADY, "pull %s: model not ready", SR_ESC(nm.name));
            return -1;
        }
        if ((vars[i] = find_var(c, nm.name)) == NULL) {
            REPLY_ERR(r, SR_ENOENT, "pull: no variable '%s'", SR_ESC(nm.name));
            return -1;
        }
    }
    return 0;
}

static void
handle_pull(coord *c, req_ctx *r)
{
    cvar   *v;
    uint8_t buf[SR_WIRE_BODY_MAX];
    frame   f;

    if (r->h.flags & SR_WIRE_F_MANY) {
        handle_pull_many(c, r);
        return;
    }
    if (r->nbody != 1) {
        REPLY_ERR(r, SR_EPROTO, "PULL: bad name frame");
        return;
    }
    if (pull_targets(c, r, &v) != 0) {
        return;
    }
    encode_vardesc(v, buf, sizeof(buf), &f);
    send_reply_value(c, r, &f, v);
}

/* Free pull slots of r's client for the values of vars[0..n): 0, or -1
 * after an error reply: too many replies are still being sent to it
 * (PULLS_IN_FLIGHT...), or no memory. */
static int
take_pull_slots(coord *c, const req_ctx *r, cvar *const *vars, int n, pull_slot **out)
{
    client  *cl = r->cl;
    uint64_t pinned = 0;
    int      busy = 0, got = 0;

    if (cl->pulls == NULL && (cl->pulls = calloc(PULLS_IN_FLIGHT, sizeof(*cl->pulls))) == NULL) {
        REPLY_ERR(r, SR_ENOMEM, "pull %s: no memory", SR_ESC(vars[0]->meta.name));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        pinned += vars[i]->meta.nbytes;
    }
    for (int i = 0; i < PULLS_IN_FLIGHT; i++) {
        if (atomic_load(&cl->pulls[i].busy) != 0) {
            busy++;
            pinned += cl->pulls[i].bytes;
        } else if (got < n) {
            out[got++] = &cl->pulls[i];
        }
    }
    if (got < n || (busy + n > PULLS_IN_FLIGHT_BIG && pinned > PULL_PIN_BYTES)) {
        /* libsyncrep keeps fewer in flight; its resends of a slow pull
         * reuse the request id, and the first reply wins. */
        REPLY_ERR(r, SR_EPROTO,
                  "pull %s: too many earlier pull replies to this client are still being sent "
                  "(at most %d, or %d holding over %u MiB)",
                  SR_ESC(vars[0]->meta.name), PULLS_IN_FLIGHT, PULLS_IN_FLIGHT_BIG,
                  PULL_PIN_BYTES >> 20);
        return -1;
    }
    return 0;
}

/* A PULL of many variables (SR_WIRE_F_MANY): every name is checked before
 * anything is sent; the reply is laid out as a TOKEN reply's variables. */
static void
handle_pull_many(coord *c, req_ctx *r)
{
    cvar            *vars[SR_WIRE_PULL_MANY_MAX];
    pull_slot       *slots[SR_WIRE_PULL_MANY_MAX];
    sr_wire_vars_hdr vh = {c->global_step, (uint32_t)r->nbody};
    uint8_t          vb[16], db[SR_WIRE_BODY_MAX];
    frame            f;

    if (r->nbody < 1 || r->nbody > SR_WIRE_PULL_MANY_MAX) {
        REPLY_ERR(r, SR_EPROTO, "PULL: %d names (1..%d)", r->nbody, SR_WIRE_PULL_MANY_MAX);
        return;
    }
    if (pull_targets(c, r, vars) != 0 || take_pull_slots(c, r, vars, r->nbody, slots) != 0 ||
        send_head(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, SR_WIRE_F_MANY, 1) != 0) {
        return;
    }
    /* The rest of a message ZeroMQ took. */
    zmq_send(c->sock, vb, sr_wire_vars_hdr_encode(&vh, vb, sizeof(vb)), ZMQ_SNDMORE);
    for (int i = 0; i < r->nbody; i++) {
        encode_vardesc(vars[i], db, sizeof(db), &f);
        zmq_send(c->sock, f.data, f.len, ZMQ_SNDMORE);
        send_value_frame(c, vars[i], i + 1 == r->nbody, slots[i]);
    }
}

static void
send_reply_value(coord *c, const req_ctx *r, const frame *desc, cvar *v)
{
    pull_slot *slot = NULL;

    if (take_pull_slots(c, r, &v, 1, &slot) != 0) {
        return;
    }
    if (send_head(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, 0, 1) == 0 &&
        zmq_send(c->sock, desc->data, desc->len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0) {
        send_value_frame(c, v, 1, slot);
    }
}

static void
push_reply(coord *c, req_ctx *r, int outcome)
{
    sr_wire_push_rep rep = {(uint8_t)outcome};
    uint8_t          buf[8];
    frame            f = {buf, sr_wire_push_rep_encode(&rep, buf, sizeof(buf))};
    client          *cl = r->cl;

    if (outcome == SR_PUSH_ACCEPTED) {
        cl->accepted++;
    } else if (outcome == SR_PUSH_STALE) {
        cl->stale++;
    } else {
        cl->duplicate++;
    }
    /* Held back until the end of this batch at least (flush_held_batch). */
    if (cl->nheld >= (cl->chained > 0 ? PUSH_REPLY_HOLD_MAX_CHAIN : PUSH_REPLY_HOLD_MAX)) {
        flush_held(c, cl);
    }
    held_reply *q = sr_grow_array(cl->held, &cl->cap_held, cl->nheld + 1, sizeof(*q));
    if (q == NULL) { /* no memory: answer now, after what is held */
        flush_held(c, cl);
        send_reply(c, cl->rid, cl->rid_len, &r->h, SR_OK, c->global_step, &f, 1);
        return;
    }
    cl->held = q;
    if (cl->nheld == 0) {
        cl->held_since_ms = sr_clock_now_ms();
        c->nholding++;
    }
    q[cl->nheld].h = r->h;
    q[cl->nheld].step = c->global_step;
    q[cl->nheld].outcome = (uint8_t)outcome;
    cl->nheld++;
}

/* Checks shared by dense and sparse pushes; NULL after an error reply. */
static cvar *
push_target(coord *c, req_ctx *r, const sr_wire_pushdesc *p)
{
    cvar *v;

    if (sr_name_check(p->name, strlen(p->name)) != SR_OK) {
        REPLY_ERR(r, SR_EINVAL, "push \"%s\": %s", SR_ESC(p->name), sr_errdetail());
        return NULL;
    }
    if (!c->model_ready) {
        REPLY_ERR(r, SR_ENOTREADY, "push %s: model not ready", SR_ESC(p->name));
        return NULL;
    }
    if ((v = find_var(c, p->name)) == NULL) {
        REPLY_ERR(r, SR_ENOENT, "push: no variable '%s'", SR_ESC(p->name));
        return NULL;
    }
    if (!v->has_acc) {
        REPLY_ERR(r, SR_EINVAL, "push %s: variable is %s and not trainable", SR_ESC(p->name),
                  sr_dtype_name(v->meta.dtype));
        return NULL;
    }
    if (p->dtype != v->meta.dtype) {
        REPLY_ERR(r, SR_EINVAL, "push %s: gradient is %s, variable is %s", SR_ESC(p->name),
                  sr_dtype_name(p->dtype), sr_dtype_name(v->meta.dtype));
        return NULL;
    }
    return v;
}

/* Count the partitions a push's acceptance took; apply the step when every
 * accumulator is taken. */
static void
after_accept(coord *c, int ntook)
{
    c->ntaken += (size_t)ntook;
    if (ntook > 0 && c->ntaken == c->ntrainable) {
        apply_step(c);
    }
}

/* A push went through (accepted by `accepts` partitions, `took` of them
 * taken by it): answer it and apply the step if it completed one.  One
 * that counted nowhere because its task had given its share of the open
 * step (`over`) is answered stale, and its client waits for a later step's
 * token: it may not take another of this step and fill a missing task's
 * place (DESIGN.md, "R replicas are R tasks"). */
static void
finish_push(coord *c, req_ctx *r, int accepts, int took, int over)
{
    r->cl->last_seq = r->h.seq;
    if (accepts == 0 && over) {
        r->cl->over_share++;
        r->cl->min_token = c->global_step + 1;
    }
    push_reply(c, r, accepts > 0 ? SR_PUSH_ACCEPTED : SR_PUSH_STALE);
    after_accept(c, took);
}

/* Whether request r's push of `mode` may go to partitions [p0, p1) of v: 0
 * and *accepts = how many would take it (*over: some would not only
 * because r's task has given its share), or -1 (refused: some partition
 * receives the other kind of gradient this step). */
static int
check_parts(const cvar *v, uint32_t p0, uint32_t p1, const req_ctx *r, int mode, int *accepts,
            int *over)
{
    *accepts = 0;
    *over = 0;
    for (uint32_t p = p0; p < p1; p++) {
        int w = sr__accum_would_accept(&v->acc[p], r->h.local_step, r->cl->task, mode, over);
        if (w < 0) {
            return -1;
        }
        *accepts += w;
    }
    return 0;
}

static int
check_dup(coord *c, req_ctx *r)
{
    if (r->h.seq != 0 && r->h.seq <= r->cl->last_seq) {
        push_reply(c, r, SR_PUSH_DUPLICATE);
        return 1;
    }
    return 0;
}

static void
handle_push(coord *c, req_ctx *r)
{
    sr_wire_pushdesc p;
    sr_accum_outcome out;
    cvar            *v;
    sr_err           rc;

    if (r->nbody != 2 || sr_wire_pushdesc_decode(zmq_msg_data(&r->body[0]),
                                                 zmq_msg_size(&r->body[0]), &p) != SR_OK) {
        REPLY_ERR(r, SR_EPROTO, "PUSH: bad frames");
        return;
    }
    if (check_dup(c, r) || (v = push_target(c, r, &p)) == NULL) {
        return;
    }
    /* The whole variable, or exactly one of its partitions. */
    size_t   es = sr_dtype_size(v->meta.dtype);
    uint64_t part_bytes = v->part_rows * v->row_elems * es;
    uint32_t p0 = 0, p1 = v->nparts;
    if (p.count != zmq_msg_size(&r->body[1])) {
        REPLY_ERR(r, SR_EINVAL, "push %s: descriptor says %" PRIu64 " bytes, frame has %zu",
                  SR_ESC(p.name), p.count, zmq_msg_size(&r->body[1]));
        return;
    }
    if (!(p.offset == 0 && p.count == v->meta.nbytes)) {
        uint64_t r0, nr;
        uint64_t k =
            part_bytes > 0 && p.offset % part_bytes == 0 ? p.offset / part_bytes : v->nparts;
        p0 = k < v->nparts ? (uint32_t)k : v->nparts;
        if (v->nparts > 1 && p0 < v->nparts) {
            part_range(v, p0, &r0, &nr);
        }
        if (v->nparts <= 1 || p0 >= v->nparts || nr * v->row_elems * es != p.count) {
            REPLY_ERR(r, SR_EINVAL,
                      "push %s: gradient is %" PRIu64 " bytes at offset %" PRIu64
                      "; the variable is %" PRIu64 " bytes in %u partition(s) of %" PRIu64 " bytes",
                      SR_ESC(p.name), p.count, p.offset, v->meta.nbytes, v->nparts, part_bytes);
            return;
        }
        p1 = p0 + 1;
    }
    const uint8_t *grad = aligned_frame(c, &r->body[1], 0);
    if (grad == NULL) {
        REPLY_ERR(r, SR_ENOMEM, "push %s: no memory to align %zu bytes", SR_ESC(p.name),
                  zmq_msg_size(&r->body[1]));
        return;
    }
    if (!c->o->nonfinite_allow && sr__nonfinite(v->meta.dtype, grad, p.count / es)) {
        r->cl->errors++;
        REPLY_ERR(r, SR_ENONFINITE, "push %s: gradient contains NaN or Inf", SR_ESC(p.name));
        return;
    }
    int accepts = 0, took = 0, over = 0;
    if (check_parts(v, p0, p1, r, SR_ACC_DENSE, &accepts, &over) != 0) {
        REPLY_ERR(r, SR_EINVAL,
                  "push %s: variable receives sparse gradients this step; dense "
                  "refused",
                  SR_ESC(p.name));
        return;
    }
    if (accepts > 0 && (rc = acc_memory(c, v)) != SR_OK) {
        REPLY_ERR(r, rc, "push %s: %s", SR_ESC(p.name), sr_errdetail());
        return;
    }
    for (uint32_t k = p0; k < p1; k++) {
        uint64_t r0, nr;
        part_range(v, k, &r0, &nr);
        rc = sr__accum_push_dense(&v->acc[k],
                                  grad + (r0 - (uint64_t)p0 * v->part_rows) * v->row_elems * es,
                                  r->h.local_step, r->cl->task, &out);
        if (rc != SR_OK && k == p0) {
            REPLY_ERR(r, rc, "push %s: %s", SR_ESC(p.name), sr_errdetail());
            return;
        }
        if (rc != SR_OK) { /* out of memory for a sum: the partitions before it count */
            SR_LOG(SR_LOG_ERR, "COORD-PUSH", "push %s partition %u: %s", SR_ESC(p.name), k,
                   sr_errdetail());
            break;
        }
        took += v->acc[k].taken && out == SR_ACC_ACCEPTED;
    }
    finish_push(c, r, accepts, took, over);
}

/* Group a sparse push's rows by partition, keeping their order within each
 * (the accumulator's summation order, which replays reproduce): partition
 * k's rows are sp_idx / sp_rows [sp_start[k], sp_start[k + 1]), with
 * indices relative to the partition's first row.  Indices are checked. */
static sr_err
split_sparse(coord *c, cvar *v, const int64_t *idx, const void *rows, uint64_t n)
{
    size_t    row_bytes = (size_t)(v->row_elems * sr_dtype_size(v->meta.dtype));
    int64_t  *si = sr_grow_array(c->sp_idx, &c->sp_idx_cap, (size_t)n, sizeof(*si));
    uint64_t *st;
    uint8_t  *sr;

    if (si == NULL) {
        return sr_fail(SR_ENOMEM, "%" PRIu64 " sparse rows", n);
    }
    c->sp_idx = si;
    if ((sr = sr_grow_array(c->sp_rows, &c->sp_rows_cap, (size_t)n * row_bytes, 1)) == NULL) {
        return sr_fail(SR_ENOMEM, "%" PRIu64 " sparse rows", n);
    }
    c->sp_rows = sr;
    if ((st = sr_grow_array(c->sp_start, &c->sp_start_cap, (size_t)v->nparts + 1, sizeof(*st))) ==
        NULL) {
        return sr_fail(SR_ENOMEM, "%u partitions", v->nparts);
    }
    c->sp_start = st;
    memset(st, 0, ((size_t)v->nparts + 1) * sizeof(*st));
    for (uint64_t i = 0; i < n; i++) {
        st[(uint64_t)idx[i] / v->part_rows + 1]++;
    }
    for (uint32_t k = 0; k < v->nparts; k++) {
        st[k + 1] += st[k];
    }
    /* st[k] is now partition k's next free slot; afterwards, its end. */
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = (uint64_t)idx[i] / v->part_rows;
        uint64_t at = st[k]++;
        si[at] = idx[i] - (int64_t)(k * v->part_rows);
        memcpy(sr + at * row_bytes, (const uint8_t *)rows + i * row_bytes, row_bytes);
    }
    /* Back to starts: partition k began where k - 1 ends. */
    memmove(st + 1, st, (size_t)v->nparts * sizeof(*st));
    st[0] = 0;
    return SR_OK;
}

static void
handle_push_sparse(coord *c, req_ctx *r)
{
    sr_wire_pushdesc p;
    sr_accum_outcome out;
    cvar            *v;
    sr_err           rc;

    if (r->nbody != 3 || sr_wire_pushdesc_decode(zmq_msg_data(&r->body[0]),
                                                 zmq_msg_size(&r->body[0]), &p) != SR_OK) {
        REPLY_ERR(r, SR_EPROTO, "PUSH_SPARSE: bad frames");
        return;
    }
    if (check_dup(c, r) || (v = push_target(c, r, &p)) == NULL) {
        return;
    }
    if (v->meta.ndim < 1) {
        REPLY_ERR(r, SR_EINVAL, "push_sparse %s: a scalar has no rows", SR_ESC(p.name));
        return;
    }
    uint64_t row_bytes = v->row_elems * sr_dtype_size(v->meta.dtype);
    if (p.offset != 0) {
        REPLY_ERR(r, SR_EINVAL,
                  "push_sparse %s: offset %" PRIu64 " (sparse pushes carry row "
                  "indices; offset must be 0)",
                  SR_ESC(p.name), p.offset);
        return;
    }
    if (p.count > UINT64_MAX / 8 || zmq_msg_size(&r->body[1]) != p.count * 8 ||
        (row_bytes && p.count > UINT64_MAX / row_bytes) ||
        zmq_msg_size(&r->body[2]) != p.count * row_bytes) {
        REPLY_ERR(r, SR_EINVAL,
                  "push_sparse %s: %" PRIu64 " rows need %" PRIu64 " index bytes and %" PRIu64
                  " row bytes, got %zu and %zu",
                  SR_ESC(p.name), p.count, p.count * 8, p.count * row_bytes,
                  zmq_msg_size(&r->body[1]), zmq_msg_size(&r->body[2]));
        return;
    }
    /* Indices travel little-endian, as this host stores them (a big-endian
     * build stops at the static assertion in wire/wire.c). */
    const int64_t *idx = aligned_frame(c, &r->body[1], 0);
    const void    *rows = aligned_frame(c, &r->body[2], 1);
    if (idx == NULL || rows == NULL) {
        REPLY_ERR(r, SR_ENOMEM, "push_sparse %s: no memory to align the frames", SR_ESC(p.name));
        return;
    }
    if (!c->o->nonfinite_allow && sr__nonfinite(v->meta.dtype, rows, p.count * v->row_elems)) {
        r->cl->errors++;
        REPLY_ERR(r, SR_ENONFINITE, "push_sparse %s: gradient contains NaN or Inf", SR_ESC(p.name));
        return;
    }
    for (uint64_t i = 0; i < p.count; i++) {
        if (idx[i] < 0 || (uint64_t)idx[i] >= v->rows) {
            REPLY_ERR(r, SR_EINVAL,
                      "push_sparse %s: sparse row index %" PRId64 " out of range [0, %" PRIu64
                      ") at %" PRIu64,
                      SR_ESC(p.name), idx[i], v->rows, i);
            return;
        }
    }
    int accepts = 0, took = 0, over = 0;
    if (check_parts(v, 0, v->nparts, r, SR_ACC_SPARSE, &accepts, &over) != 0) {
        REPLY_ERR(r, SR_EINVAL,
                  "push_sparse %s: variable receives dense gradients this step; "
                  "sparse refused",
                  SR_ESC(p.name));
        return;
    }
    /* Every partition counts the push, with the rows that fall in it (maybe
     * none), as a partitioned variable's separate accumulators would. */
    if (accepts > 0 && (rc = acc_memory(c, v)) != SR_OK) {
        REPLY_ERR(r, rc, "push_sparse %s: %s", SR_ESC(p.name), sr_errdetail());
        return;
    }
    const int64_t  *pidx = idx;
    const uint8_t  *prows = rows;
    const uint64_t  whole[2] = {0, p.count};
    const uint64_t *start = whole;
    if (v->nparts > 1 && accepts > 0) {
        if ((rc = split_sparse(c, v, idx, rows, p.count)) != SR_OK) {
            REPLY_ERR(r, rc, "push_sparse %s: %s", SR_ESC(p.name), sr_errdetail());
            return;
        }
        pidx = c->sp_idx;
        prows = c->sp_rows;
        start = c->sp_start;
    }
    for (uint32_t k = 0; accepts > 0 && k < v->nparts; k++) {
        rc = sr__accum_push_sparse(&v->acc[k], pidx + start[k], prows + start[k] * row_bytes,
                                   start[k + 1] - start[k], r->h.local_step, r->cl->task, &out);
        if (rc != SR_OK && k == 0) {
            REPLY_ERR(r, rc, "push_sparse %s: %s", SR_ESC(p.name), sr_errdetail());
            return;
        }
        if (rc != SR_OK) { /* out of memory for a sum: the partitions before it count */
            SR_LOG(SR_LOG_ERR, "COORD-PUSH", "push_sparse %s partition %u: %s", SR_ESC(p.name), k,
                   sr_errdetail());
            break;
        }
        took += v->acc[k].taken && out == SR_ACC_ACCEPTED;
    }
    finish_push(c, r, accepts, took, over);
}

static void
handle_token(coord *c, req_ctx *r)
{
    client *cl = r->cl;

    if (!c->model_ready) {
        REPLY_ERR(r, SR_ENOTREADY, "token: model not ready");
        return;
    }
    if (cl->token_req == r->h.request_id) {
        /* A resend of a request already answered: answer the same token. */
        flush_held(c, cl);
        send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, cl->token_val, NULL, 0);
        return;
    }
    if (cl->parked && cl->parked_req == r->h.request_id) {
        return; /* still waiting; last_seen was refreshed */
    }
    cl->parked = 1;
    cl->parked_req = r->h.request_id;
    cl->parked_want = (r->h.flags & SR_WIRE_F_WANT_VARS) != 0;
    cl->parked_order = ++c->park_counter;
    serve_parked(c);
}

static void status_json(coord *c, sr_strbuf *b);

static void
handle_status(coord *c, req_ctx *r)
{
    sr_strbuf   b;
    const char *text;

    sr_strbuf_init(&b);
    status_json(c, &b);
    if (sr_strbuf_result(&b, &text) != SR_OK) {
        REPLY_ERR(r, SR_ENOMEM, "status: out of memory");
    } else {
        frame f = {text, strlen(text)};
        send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, &f, 1);
    }
    sr_strbuf_free(&b);
}

static void
handle_ping(coord *c, req_ctx *r)
{
    sr_wire_ping_rep rep = {(uint8_t)c->model_ready, c->global_step};
    uint8_t          buf[32];
    frame            f = {buf, sr_wire_ping_rep_encode(&rep, buf, sizeof(buf))};
    send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, &f, 1);
}

/* Forget a client that left (BYE, or silent past the worker timeout) once
 * nothing of it is in flight: no parked token, no held answer, no pull
 * reply ZeroMQ still sends from its slots.  Its counts go to its task's
 * record, so status totals stay whole.  1 if it was reclaimed. */
static int
reclaim_client(coord *c, size_t i)
{
    client *cl = &c->clients[i];
    worker *w;

    if (!cl->gone || cl->parked || cl->nheld > 0) {
        return 0;
    }
    for (size_t k = 0; cl->pulls != NULL && k < PULLS_IN_FLIGHT; k++) {
        if (atomic_load(&cl->pulls[k].busy) != 0) {
            return 0;
        }
    }
    if ((w = get_worker(c, cl->task)) != NULL) {
        w->accepted += cl->accepted;
        w->stale += cl->stale;
        w->duplicate += cl->duplicate;
        w->errors += cl->errors;
        w->chained += cl->chained;
        w->over_share += cl->over_share;
    }
    SR_LOG(SR_LOG_DEBUG, "COORD-CLIENT-RECLAIMED", "task=%d client=%016" PRIx64, cl->task,
           cl->client_id);
    free(cl->held);
    free(cl->pulls);
    c->clients[i] = c->clients[--c->nclients];
    return 1;
}

/* Reclaim the clients gone for longer than `idle_ms` (0: any gone one);
 * how many were. */
static size_t
reclaim_gone(coord *c, int64_t idle_ms)
{
    int64_t now = sr_clock_now_ms();
    size_t  n = 0;

    for (size_t i = c->nclients; i-- > 0;) {
        if (now - c->clients[i].last_seen_ms >= idle_ms && reclaim_client(c, i)) {
            n++;
        }
    }
    return n;
}

static void
count_refused(coord *c, const char *why)
{
    int64_t now = sr_clock_now_ms();
    c->refused++;
    if (now - c->last_refused_log_ms >= 5000) {
        c->last_refused_log_ms = now;
        SR_LOG(SR_LOG_WARN, "COORD-REFUSED", "count=%" PRIu64 " last=\"%s\"", c->refused, why);
    }
}

/* The job's task indexes are 0 .. job_tasks - 1: N by default, or
 * --max-tasks (spare workers beyond N). */
static int
job_tasks(const sr_coord_opts *o)
{
    return o->max_tasks > 0 ? o->max_tasks : o->N;
}

/* Clients admitted at once: --max-clients, by default a few per task. */
static size_t
client_limit(const sr_coord_opts *o)
{
    int tasks = job_tasks(o) > o->R ? job_tasks(o) : o->R;
    return o->max_clients > 0 ? (size_t)o->max_clients : (size_t)(tasks > 16 ? 4 * tasks : 64);
}

/* The client of request r (r->cl), made at its first request.  Only a
 * worker of this job is admitted: task index in [0, N), the same in every
 * request of a client, and a place in the client table (max_clients;
 * clients that left are reclaimed to make room).  Anything else is
 * answered with an error and changes nothing.  0, or -1 after the reply. */
static int
admit(coord *c, req_ctx *r)
{
    const sr_wire_header *h = &r->h;
    client               *cl = find_client(c, h->client_id);
    char                  why[160];

    if (cl != NULL && h->task_index != cl->task) {
        snprintf(why, sizeof(why), "client %016" PRIx64 " is task %d; a request said task %d",
                 h->client_id, cl->task, h->task_index);
        count_refused(c, why);
        REPLY_ERR(r, SR_EPROTO, "%s: a client keeps its task index", why);
        return -1;
    }
    if (cl == NULL && (h->task_index < 0 || h->task_index >= job_tasks(c->o))) {
        snprintf(why, sizeof(why), "task index %d is not a worker of this job", h->task_index);
        count_refused(c, why);
        REPLY_ERR(r, SR_EINVAL, "%s: its workers are tasks 0..%d (--total-replicas, --max-tasks)",
                  why, job_tasks(c->o) - 1);
        return -1;
    }
    if (cl == NULL && c->nclients >= client_limit(c->o) && reclaim_gone(c, 0) == 0) {
        snprintf(why, sizeof(why), "client table full (%zu clients)", c->nclients);
        count_refused(c, why);
        REPLY_ERR(r, SR_ELIMIT,
                  "%s: no more clients are admitted until one leaves (--max-clients %zu)", why,
                  client_limit(c->o));
        return -1;
    }
    if (cl == NULL) {
        cl = sr_grow_array(c->clients, &c->cap_clients, c->nclients + 1, sizeof(*cl));
        if (cl == NULL) {
            REPLY_ERR(r, SR_ENOMEM, "client table: out of memory");
            return -1;
        }
        c->clients = cl;
        cl = &c->clients[c->nclients++];
        memset(cl, 0, sizeof(*cl));
        cl->client_id = h->client_id;
        cl->task = h->task_index;
        cl->joined_ms = sr_clock_now_ms();
        SR_LOG(SR_LOG_NOTICE, "COORD-WORKER-JOIN", "task=%d client=%016" PRIx64, h->task_index,
               h->client_id);
    } else if (cl->gone) {
        cl->gone = 0;
        SR_LOG(SR_LOG_NOTICE, "COORD-WORKER-BACK", "task=%d client=%016" PRIx64, cl->task,
               cl->client_id);
    }
    if (r->rid_len <= sizeof(cl->rid)) {
        memcpy(cl->rid, r->rid, r->rid_len);
        cl->rid_len = r->rid_len;
    }
    cl->last_seen_ms = sr_clock_now_ms();
    r->cl = cl;
    return 0;
}

static void
count_malformed(coord *c, const char *why)
{
    int64_t now = sr_clock_now_ms();
    c->malformed++;
    if (now - c->last_malformed_log_ms >= 5000) {
        c->last_malformed_log_ms = now;
        SR_LOG(SR_LOG_WARN, "COORD-MALFORMED", "count=%" PRIu64 " last=\"%s\"", c->malformed, why);
    }
}

/* A body frame larger than the largest variable plus 1 MiB: nothing but a
 * DECLARE (whose size the handler checks against the declared shape) may
 * be that big. */
static int
oversized(const coord *c, zmq_msg_t *body, int n)
{
    uint64_t limit = c->max_var_bytes + (1u << 20);
    for (int i = 0; i < n; i++) {
        if (zmq_msg_size(&body[i]) > limit) {
            return 1;
        }
    }
    return 0;
}

/* One request with header h (decoded) and nbody body frames, from the peer
 * `rid`; `chained`: it came in a chain (the client reads chained replies). */
static void
dispatch_one(coord *c, zmq_msg_t *rid, const sr_wire_header *h, zmq_msg_t *body, int nbody,
             int chained)
{
    req_ctx r;
    int     type;

    memset(&r, 0, sizeof(r));
    r.rid = zmq_msg_data(rid);
    r.rid_len = zmq_msg_size(rid);
    r.h = *h;
    r.body = body;
    r.nbody = nbody;
    type = r.h.type;
    if (type & SR_WIRE_REPLY) {
        count_malformed(c, "a reply sent to the coordinator");
        return;
    }
    if (type != SR_MSG_DECLARE && oversized(c, r.body, r.nbody)) {
        /* Larger than any variable: no valid message of this type is this
         * big.  (Beyond the transport's limit, ZeroMQ drops the connection
         * before the coordinator sees anything.) */
        count_malformed(c, "oversized frame");
        REPLY_ERR(&r, SR_EPROTO, "a frame is larger than any variable of the model plus headroom");
        return;
    }
    if (type == SR_MSG_STATUS) {
        handle_status(c, &r); /* operators' tools are not workers */
        return;
    }
    if (admit(c, &r) != 0) {
        return;
    }
    r.cl->chained += (uint64_t)chained;
    if (type != SR_MSG_PING && type != SR_MSG_TOKEN && r.h.request_id > r.cl->last_req) {
        r.cl->last_req = r.h.request_id;
        if (r.h.request_id > r.cl->parked_req) {
            /* The client moved on: it no longer waits for a token.  (An
             * older request re-sent while the token is parked, a pipelined
             * push, does not withdraw it.) */
            r.cl->parked = 0;
        }
    }
    if (type != SR_MSG_HELLO && type != SR_MSG_PING && type != SR_MSG_STATUS &&
        r.h.incarnation != c->incarnation) {
        if (type == SR_MSG_PUSH || type == SR_MSG_PUSH_SPARSE) {
            r.cl->stale++;
        }
        REPLY_ERR(&r, SR_ESTALE, "request for incarnation %" PRIu64 ", coordinator is %" PRIu64,
                  r.h.incarnation, c->incarnation);
        return;
    }
    switch (type) {
    case SR_MSG_HELLO:
        handle_hello(c, &r);
        break;
    case SR_MSG_DECLARE:
        handle_declare(c, &r);
        break;
    case SR_MSG_READY:
        handle_ready(c, &r);
        break;
    case SR_MSG_PULL:
        handle_pull(c, &r);
        break;
    case SR_MSG_PUSH:
        handle_push(c, &r);
        break;
    case SR_MSG_PUSH_SPARSE:
        handle_push_sparse(c, &r);
        break;
    case SR_MSG_TOKEN:
        handle_token(c, &r);
        break;
    case SR_MSG_PING:
        handle_ping(c, &r);
        break;
    case SR_MSG_BYE:
        r.cl->parked = 0;
        r.cl->gone = 1;
        SR_LOG(SR_LOG_NOTICE, "COORD-WORKER-LEFT", "task=%d client=%016" PRIx64 " (bye)",
               r.cl->task, r.cl->client_id);
        send_reply(c, r.rid, r.rid_len, &r.h, SR_OK, c->global_step, NULL, 0);
        break;
    default:
        count_malformed(c, "unknown type");
        REPLY_ERR(&r, SR_EPROTO, "unknown message type %d", type);
        break;
    }
}

/* A message: the routing id, then one request, or a chain of them
 * (docs/protocol.md, Chains): each PUSH header flagged SR_WIRE_F_CHAIN is
 * followed by its two body frames and the next request's header.  The
 * requests are handled in order, as if they had come one by one. */
static void
dispatch(coord *c, zmq_msg_t *parts, int nparts)
{
    int at = 1;

    if (nparts < 2 || zmq_msg_size(&parts[0]) == 0) {
        count_malformed(c, "fewer than two frames");
        return;
    }
    for (;;) {
        sr_wire_header h;
        int            n = nparts - at;

        if (sr_wire_header_decode(zmq_msg_data(&parts[at]), zmq_msg_size(&parts[at]), &h) !=
            SR_OK) {
            count_malformed(c, sr_errdetail());
            return; /* nothing trustworthy to reply to */
        }
        if ((h.flags & SR_WIRE_F_CHAIN) && !(h.type & SR_WIRE_REPLY)) {
            if (h.type != SR_MSG_PUSH || n < 4) {
                count_malformed(c, "bad chain");
                send_error(c, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &h, SR_EPROTO,
                           "a chained request must be a PUSH with two body frames, followed "
                           "by another request");
                return; /* the rest of the chain is not handled */
            }
            n = 3;
        }
        dispatch_one(c, &parts[0], &h, &parts[at + 1], n - 1, at > 1 || at + n < nparts);
        at += n;
        if (at >= nparts) {
            return;
        }
    }
}

/* ---- status ------------------------------------------------------------- */

/* The connection that commits the steps (the async writer's, else the
 * loop's): the one whose WAL checkpoints STATUS and the log report. */
static sr_store *
commit_store(const coord *c)
{
    return c->wst != NULL ? c->wst : c->st;
}

static void
status_json(coord *c, sr_strbuf *b)
{
    int64_t now = sr_clock_now_ms();

    sr_strbuf_printf(b,
                     "{\"incarnation\":%" PRIu64 ",\"global_step\":%" PRId64
                     ",\"committed_step\":%" PRId64 ",\"restored_step\":%" PRId64
                     ",\"model_ready\":%s,"
                     "\"replicas_to_aggregate\":%d,\"total_replicas\":%d,\"optimizer\":\"%s\","
                     "\"steps_per_s\":%.3f,\"tokens_available\":%zu,\"malformed\":%" PRIu64
                     ",\"refused\":%" PRIu64 ",\"clients\":%zu,\"deterministic_sum\":%s"
                     ",\"accumulators\":[",
                     c->incarnation, c->global_step, c->committed_step, c->restored_step,
                     c->model_ready ? "true" : "false", c->o->R, c->o->N,
                     sr__optim_name(c->o->optim.kind), c->steps_per_s, c->tokens.len, c->malformed,
                     c->refused, c->nclients, c->o->deterministic_sum ? "true" : "false");
    int first = 1;
    for (size_t i = 0; i < c->nvars; i++) {
        cvar *v = &c->vars[i];
        if (!v->has_acc) {
            continue;
        }
        sr_strbuf_printf(b, "%s{\"name\":", first ? "" : ",");
        sr_strbuf_json_str(b, v->meta.name);
        /* A partitioned variable shows its least advanced partition. */
        const sr_accum *a = &v->acc[0];
        for (uint32_t p = 1; p < v->nparts; p++) {
            if (v->acc[p].count + v->acc[p].taken * a->R < a->count + a->taken * a->R) {
                a = &v->acc[p];
            }
        }
        sr_strbuf_printf(b, ",\"partitions\":%u,\"step\":%" PRId64 ",\"count\":%d,\"taken\":%s}",
                         v->nparts, a->step, a->count, a->taken ? "true" : "false");
        first = 0;
    }
    sr_strbuf_printf(b, "],\"workers\":[");
    for (size_t i = 0; i < c->nworkers; i++) {
        worker  *w = &c->workers[i];
        uint64_t acc = w->accepted, stale = w->stale, dup = w->duplicate, errs = w->errors;
        uint64_t chained = w->chained, over = w->over_share;
        int64_t  seen = -1;
        int      parked = 0, live = 0;
        for (size_t k = 0; k < c->nclients; k++) {
            client *cl = &c->clients[k];
            if (cl->task != w->task) {
                continue;
            }
            acc += cl->accepted;
            stale += cl->stale;
            dup += cl->duplicate;
            errs += cl->errors;
            chained += cl->chained;
            over += cl->over_share;
            parked |= cl->parked;
            live |= !cl->gone;
            if (seen < 0 || now - cl->last_seen_ms < seen) {
                seen = now - cl->last_seen_ms;
            }
        }
        sr_strbuf_printf(b,
                         "%s{\"task_index\":%d,\"local_step\":%" PRId64 ",\"last_seen_ms\":%" PRId64
                         ",\"seconds_since_seen\":%.3f,\"connected\":%s,\"waiting_for_token\":%s,"
                         "\"accepted\":%" PRIu64 ",\"stale\":%" PRIu64 ",\"duplicate\":%" PRIu64
                         ",\"beyond_share\":%" PRIu64 ",\"rejected\":%" PRIu64
                         ",\"chained\":%" PRIu64 "}",
                         i ? "," : "", w->task, w->local_step, w->last_seen_wall_ms,
                         seen < 0 ? -1.0 : seen / 1000.0, live ? "true" : "false",
                         parked ? "true" : "false", acc, stale, dup, over, errs, chained);
    }
    sr_store_ckpt_stats ck;
    sr_store_get_ckpt_stats(commit_store(c), &ck);
    sr_strbuf_printf(b,
                     "],\"wal_checkpoints\":{\"thread\":%s,\"passes\":%" PRIu64
                     ",\"pass_max_ms\":%.3f,\"inline\":%" PRIu64 ",\"inline_max_ms\":%.3f"
                     ",\"waits\":%" PRIu64 ",\"failures\":%" PRIu64 ",\"max_wal_frames\":%" PRIu64
                     ",\"last_error\":",
                     ck.background ? "true" : "false", ck.passes, ck.pass_max_us / 1000.0,
                     ck.inline_passes, ck.inline_max_us / 1000.0, ck.waits, ck.failures,
                     ck.max_frames);
    sr_strbuf_json_str(b, ck.last_error);
    sr_strbuf_printf(b,
                     "},\"commits\":{\"count\":%" PRIu64 ",\"mean_ms\":%.3f,\"max_ms\":%.3f"
                     ",\"last_ms\":%.3f,\"failures\":%" PRIu64 "}}",
                     atomic_load(&c->commits), commit_mean_ms(c),
                     atomic_load(&c->commit_max_us) / 1000.0,
                     atomic_load(&c->commit_last_us) / 1000.0, atomic_load(&c->commit_failures));
}

/* ---- the loop ----------------------------------------------------------- */

/* At shutdown, after the last commit: how many store commits, their time. */
static void
log_commits(const coord *c)
{
    SR_LOG(SR_LOG_NOTICE, "COORD-COMMITS",
           "count=%" PRIu64 " mean_ms=%.3f max_ms=%.3f failures=%" PRIu64, atomic_load(&c->commits),
           commit_mean_ms(c), atomic_load(&c->commit_max_us) / 1000.0,
           atomic_load(&c->commit_failures));
}

/* At shutdown: what the WAL checkpoints of the committing connection did. */
static void
log_wal_checkpoints(const coord *c)
{
    sr_store_ckpt_stats k;

    sr_store_get_ckpt_stats(commit_store(c), &k);
    SR_LOG(SR_LOG_NOTICE, "COORD-WAL-CKPT",
           "%s passes=%" PRIu64 " pass_max_ms=%.1f inline=%" PRIu64 " inline_max_ms=%.1f"
           " waits=%" PRIu64 " failures=%" PRIu64 " max_wal_frames=%" PRIu64 "%s%s",
           k.background ? "thread" : "inline", k.passes, k.pass_max_us / 1000.0, k.inline_passes,
           k.inline_max_us / 1000.0, k.waits, k.failures, k.max_frames,
           k.last_error[0] ? " last_error=" : "", k.last_error);
}

/* --resume-from-step S: S must be a retained checkpoint.  Checked before
 * anything is written (a new incarnation included), so a refused start
 * changes nothing; the message lists the steps there are. */
static sr_err
check_resume_step(coord *c, int64_t step)
{
    int64_t *steps = NULL;
    size_t   n = 0, len = 0;
    char     have[256] = "none";
    sr_err   rc = sr_store_list_checkpoints(c->st, &steps, &n);

    for (size_t i = 0; rc == SR_OK && i < n; i++) {
        if (steps[i] == step) {
            free(steps);
            return SR_OK;
        }
        if (len < sizeof(have)) { /* snprintf truncates what does not fit */
            len += (size_t)snprintf(have + len, sizeof(have) - len, "%s%" PRId64, i ? " " : "",
                                    steps[i]);
        }
    }
    free(steps);
    return rc != SR_OK ? rc
                       : sr_fail(SR_ENOENT,
                                 "%s: step %" PRId64 " is not a retained checkpoint (retained: %s)",
                                 c->o->store_path, step, have);
}

/* Lock and open the store, check what the options ask of it, and note the
 * largest variable (the socket's message limit): nothing written yet but a
 * new store's empty schema. */
static sr_err
coord_open_store(coord *c)
{
    sr_store_opts        so;
    sr_store_var        *metas = NULL;
    size_t               n = 0;
    sr_err               rc;
    const sr_coord_opts *o = c->o;

    store_opts(o, &so);
    so.create = 1;
    /* A store behind its mark is refused here, before anything is written,
     * unless the operator accepted it (recorded by coord_start). */
    so.accept_rollback = o->accept_rollback;
    if ((rc = sr__coord_lock_store(o->store_path, &c->lock_fd)) != SR_OK ||
        (rc = sr_store_open(o->store_path, &so, &c->st)) != SR_OK) {
        return rc;
    }
    if (o->resume_from_step >= 0 && (rc = check_resume_step(c, o->resume_from_step)) != SR_OK) {
        return rc;
    }
    if ((rc = sr_store_list_vars(c->st, &metas, &n)) != SR_OK) {
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        c->largest_var = metas[i].nbytes > c->largest_var ? metas[i].nbytes : c->largest_var;
    }
    free(metas);
    return SR_OK;
}

/* The store opened and the socket bound: a new incarnation, the rewind
 * asked for, the model loaded. */
/* The model failed its checksums at load (the detail says where): say
 * which retained steps are intact, the ones --resume-from-step can
 * restore.  Nothing is served from a corrupt step. */
static void
log_intact_steps(coord *c)
{
    char        why[1024];
    int64_t    *steps = NULL;
    size_t      n = 0;
    sr_strbuf   b;
    const char *text = NULL;

    snprintf(why, sizeof(why), "%s", sr_errdetail());
    sr_strbuf_init(&b);
    if (sr_store_intact_steps(c->st, &steps, &n) == SR_OK) {
        for (size_t i = 0; i < n; i++) {
            sr_strbuf_printf(&b, "%s%" PRId64, i ? "," : "", steps[i]);
        }
    }
    if (sr_strbuf_result(&b, &text) != SR_OK || n == 0) {
        text = "none";
    }
    SR_LOG(SR_LOG_ERR, "COORD-CORRUPT",
           "the store's latest step fails its checksums; intact retained steps: %s (restart "
           "with --resume-from-step S on one of them, or restore the store from a copy)",
           text);
    sr_fail(SR_ECORRUPT, "%s; intact retained steps: %s", why, text);
    free(steps);
    sr_strbuf_free(&b);
}

static sr_err
coord_start(coord *c)
{
    sr_store_info        info;
    sr_strbuf            cfg;
    const char          *cfg_text;
    sr_err               rc;
    const sr_coord_opts *o = c->o;

    /* The new incarnation first, so a rewind is recorded as its own (and an
     * accepted rollback, in the same transaction). */
    sr_store_rollback rb;
    if ((rc = sr_store_new_incarnation(c->st, &c->incarnation)) != SR_OK ||
        (rc = sr_store_get_rollback(c->st, &rb)) != SR_OK) {
        return rc;
    }
    if (rb.behind) {
        SR_LOG(SR_LOG_WARN, "COORD-ROLLBACK-ACCEPTED",
               "store=%s incarnation=%" PRIu64 " mark_step=%" PRId64 " store_step=%" PRId64
               " cause=\"%s\"",
               o->store_path, c->incarnation, rb.mark_step, rb.store_step, rb.cause);
    }
    if (o->resume_from_step >= 0) {
        sr_store_info before;
        if ((rc = sr_store_get_info(c->st, &before)) != SR_OK ||
            (rc = sr_store_rewind(c->st, o->resume_from_step)) != SR_OK) {
            return rc;
        }
        SR_LOG(SR_LOG_NOTICE, "COORD-REWIND",
               "store=%s incarnation=%" PRIu64 " from_step=%" PRId64 " to_step=%" PRId64,
               o->store_path, c->incarnation, before.global_step, o->resume_from_step);
    }
    if ((rc = sr_store_get_info(c->st, &info)) != SR_OK) {
        return rc;
    }
    c->global_step = info.global_step;
    c->committed_step = info.global_step;
    c->restored_step = info.global_step;
    sr_strbuf_init(&cfg);
    sr_strbuf_printf(&cfg,
                     "{\"replicas_to_aggregate\":%d,\"total_replicas\":%d,\"optimizer\":\"%s\","
                     "\"learning_rate\":%.17g,\"checkpoint_every_steps\":%d,\"step_log\":%s,"
                     "\"commit\":\"%s\",\"sync\":\"%s\",\"partition_bytes\":%" PRIu64 "}",
                     o->R, o->N, sr__optim_name(o->optim.kind), o->optim.lr, o->checkpoint_every,
                     o->step_log ? "true" : "false", o->commit_async ? "async" : "sync",
                     o->sync_normal ? "normal" : "full", o->partition_bytes);
    rc = sr_strbuf_result(&cfg, &cfg_text);
    if (rc == SR_OK) {
        rc = sr_store_set_config(c->st, cfg_text);
    }
    sr_strbuf_free(&cfg);
    if (rc == SR_OK && (rc = load_model(c)) == SR_ECORRUPT) {
        log_intact_steps(c);
    }
    if (rc != SR_OK) {
        return rc;
    }
    SR_LOG(SR_LOG_NOTICE, "COORD-START",
           "store=%s incarnation=%" PRIu64 " restored_step=%" PRId64 " variables=%zu ready=%d "
           "R=%d N=%d optimizer=%s",
           o->store_path, c->incarnation, c->global_step, c->nvars, info.model_ready, o->R, o->N,
           sr__optim_name(o->optim.kind));
    if (info.model_ready) {
        model_ready_now(c);
    }
    return SR_OK;
}

/* 1 for endpoints only this machine can reach. */
static int
is_local_endpoint(const char *ep)
{
    static const char *const local[] = {"ipc://",           "inproc://",    "tcp://127.",
                                        "tcp://localhost:", "tcp://[::1]:", "tcp://lo:"};
    for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++) {
        if (strncmp(ep, local[i], strlen(local[i])) == 0) {
            return 1;
        }
    }
    return 0;
}

static sr_err
open_socket(coord *c)
{
    int     one = 1, zero = 0, hwm = SR_COORD_RCVHWM;
    int64_t maxmsg = (int64_t)c->o->max_message_bytes;
    sr_err  rc;

    if ((c->ctx = zmq_ctx_new()) == NULL || (c->sock = zmq_socket(c->ctx, ZMQ_ROUTER)) == NULL) {
        return sr_fail(SR_EMSG, "zmq socket: %s", zmq_strerror(errno));
    }
    zmq_setsockopt(c->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof(one));
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(c->sock, ZMQ_RCVHWM, &hwm, sizeof(hwm));
    zmq_setsockopt(c->sock, ZMQ_SNDHWM, &(int){SR_COORD_SNDHWM}, sizeof(int));
    /* A frame may hold the largest variable plus its descriptor. */
    if (c->largest_var > 0 && (int64_t)c->largest_var + (1 << 20) > maxmsg) {
        maxmsg = (int64_t)c->largest_var + (1 << 20);
    }
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg));
    c->max_msg = maxmsg;
    if (c->o->curve_secret_key_file != NULL) {
        rc = sr__auth_open(c->ctx, c->sock, c->o->curve_secret_key_file, c->o->authorized_keys,
                           &c->auth);
        if (rc != SR_OK) {
            return rc;
        }
    } else if (!is_local_endpoint(c->o->bind)) {
        SR_LOG(SR_LOG_WARN, "COORD-PLAINTEXT",
               "binding %s without CURVE: anyone who can reach it can change the model "
               "(see --curve-secret-key-file, docs/security.md)",
               c->o->bind);
    }
    if (zmq_bind(c->sock, c->o->bind) != 0) {
        return sr_fail(SR_EMSG, "bind %s: %s", c->o->bind, zmq_strerror(errno));
    }
    char   ep[256];
    size_t len = sizeof(ep);
    if (zmq_getsockopt(c->sock, ZMQ_LAST_ENDPOINT, ep, &len) == 0) {
        SR_LOG(SR_LOG_NOTICE, "COORD-BIND", "endpoint=%s curve=%s max_message_bytes=%" PRId64, ep,
               c->auth ? "on" : "off", maxmsg);
    }
    return SR_OK;
}

/* Two clients with one task index, the older still heard from well after
 * the newer joined: two workers were started with the same task index
 * (they share one task's place in each step).  A restarted worker's old client
 * falls silent instead, or says BYE.  Logged once per client. */
static void
check_shared_tasks(coord *c, int64_t now)
{
    if (now - c->last_shared_check_ms < 1000) {
        return;
    }
    c->last_shared_check_ms = now;
    for (size_t i = 0; i < c->nclients; i++) {
        client *a = &c->clients[i];
        for (size_t j = 0; !a->gone && !a->shared_warned && j < c->nclients; j++) {
            client *b = &c->clients[j];
            if (j != i && !b->gone && b->task == a->task && b->joined_ms >= a->joined_ms &&
                a->last_seen_ms > b->joined_ms + SHARED_TASK_MS) {
                a->shared_warned = b->shared_warned = 1;
                SR_LOG(SR_LOG_WARN, "COORD-TASK-SHARED",
                       "task=%d clients=%016" PRIx64 ",%016" PRIx64
                       " both active: two workers started with the same task index? They "
                       "share one task's place in each step",
                       a->task, a->client_id, b->client_id);
            }
        }
    }
}

static void
periodic(coord *c)
{
    int64_t now = sr_clock_now_ms();

    if (c->commit_pending && now >= c->commit_retry_ms) {
        commit_and_release(c);
    }
    if (c->writer_started) {
        async_snapshot(c);
    }
    for (size_t i = 0; i < c->nclients; i++) {
        client *cl = &c->clients[i];
        if (cl->parked && now - cl->last_seen_ms > PARKED_EXPIRE_MS) {
            cl->parked = 0; /* stopped asking: do not hand it a token */
        }
        if (!cl->gone && now - cl->last_seen_ms > c->o->worker_timeout_ms) {
            cl->gone = 1;
            SR_LOG(SR_LOG_NOTICE, "COORD-WORKER-LEFT",
                   "task=%d client=%016" PRIx64 " (not heard from for %d ms)", cl->task,
                   cl->client_id, c->o->worker_timeout_ms);
        }
    }
    check_shared_tasks(c, now);
    reclaim_gone(c, RECLAIM_AFTER_MS);
    if (now - c->last_rate_ms >= c->o->log_interval_ms) {
        double secs = (now - c->last_rate_ms) / 1000.0;
        c->steps_per_s = c->last_rate_ms ? (c->global_step - c->last_rate_step) / secs : 0.0;
        if (c->last_rate_ms && c->global_step != c->last_rate_step) {
            SR_LOG(SR_LOG_INFO, "COORD-STEP",
                   "global_step=%" PRId64 " committed=%" PRId64 " steps_per_s=%.2f", c->global_step,
                   c->committed_step, c->steps_per_s);
        }
        c->last_rate_ms = now;
        c->last_rate_step = c->global_step;
    }
}

static int
step_in_progress(const coord *c)
{
    for (size_t i = 0; i < c->nvars; i++) {
        for (uint32_t p = 0; c->vars[i].has_acc && p < c->vars[i].nparts; p++) {
            if (c->vars[i].acc[p].count > 0 || c->vars[i].acc[p].taken) {
                return 1;
            }
        }
    }
    return 0;
}

/* Receive one multipart message (non-blocking) and dispatch it.  Returns 1
 * if a message was handled, 0 if none was waiting. */
static int
recv_one(coord *c)
{
    zmq_msg_t parts[MAX_PARTS];
    int       n = 0, more = 1, overflow = 0;

    while (more) {
        zmq_msg_t *m = &parts[n < MAX_PARTS ? n : MAX_PARTS - 1];
        if (n >= MAX_PARTS) {
            zmq_msg_close(m); /* keep the last slot for draining */
            overflow = 1;
        }
        zmq_msg_init(m);
        if (zmq_msg_recv(m, c->sock, n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(m);
            if (n == 0) {
                return 0;
            }
            break;
        }
        more = zmq_msg_more(m);
        if (n < MAX_PARTS) {
            n++;
        }
    }
    if (overflow) {
        count_malformed(c, "too many frames");
        /* Reply so the peer is not left waiting, if the header decodes. */
        sr_wire_header h;
        if (n >= 2 &&
            sr_wire_header_decode(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &h) == SR_OK &&
            !(h.type & SR_WIRE_REPLY)) {
            send_error(c, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &h, SR_EPROTO,
                       "too many frames");
        }
    } else {
        dispatch(c, parts, n);
    }
    for (int i = 0; i < n; i++) {
        zmq_msg_close(&parts[i]);
    }
    return 1;
}

void
sr_coord_opts_default(sr_coord_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->bind = "tcp://127.0.0.1:7070";
    o->N = -1;
    o->init_tokens = -1;
    o->optim.kind = SR_OPT_SGD;
    o->optim.momentum = 0.9;
    o->optim.beta1 = 0.9;
    o->optim.beta2 = 0.999;
    o->optim.epsilon = 1e-8;
    o->optim.ema_decay = 0.999;
    o->checkpoint_every = 1;
    o->keep_checkpoints = 3;
    o->resume_from_step = -1;
    o->grace_ms = 2000;
    o->log_interval_ms = 5000;
    o->worker_timeout_ms = 10000;
    o->max_message_bytes = 64u << 20;
    o->piggyback_max_bytes = 1u << 20;
    o->commit_interval_ms = 1;
    o->partition_bytes = 2u << 20;
}

static void
coord_free(coord *c)
{
    writer_stop(c);
    for (size_t i = 0; i < c->nvars; i++) {
        free_var(&c->vars[i]);
    }
    free(c->vars);
    free(c->index);
    free(c->workers);
    free(c->log);
    free(c->scratch[0]);
    free(c->scratch[1]);
    free(c->sp_idx);
    free(c->sp_rows);
    free(c->sp_start);
    pdecl_drop(c);
    sr__tokens_destroy(&c->tokens);
    sr__auth_close(c->auth);
    if (c->sock != NULL) {
        zmq_close(c->sock);
    }
    if (c->ctx != NULL) {
        /* After it, no pull slot is written any more.  A signal (a second
         * SIGTERM) interrupts it with EINTR before the I/O thread is done:
         * go on waiting, or the slots below would be freed under it. */
        while (zmq_ctx_term(c->ctx) != 0 && errno == EINTR) {
        }
    }
    for (size_t i = 0; i < c->nclients; i++) {
        free(c->clients[i].held);
        free(c->clients[i].pulls);
    }
    free(c->clients);
    sr_store_close(c->st);
    sr__coord_unlock_store(c->lock_fd);
}

sr_err
sr_coord_run(const sr_coord_opts *o, volatile sig_atomic_t *stop)
{
    coord   c;
    sr_err  rc;
    int64_t drain_deadline = 0;
    int     draining = 0;

    if (o->R < 1 || o->N < 1) {
        return sr_fail(SR_EINVAL, "replicas-to-aggregate (%d) and total-replicas (%d) must be >= 1",
                       o->R, o->N);
    }
    int k = o->init_tokens >= 0 ? o->init_tokens : o->R;
    if (k < o->R - o->N) {
        return sr_fail(SR_EINVAL,
                       "--init-tokens %d is too few to finish the first step: need at least "
                       "R - N = %d",
                       k, o->R - o->N);
    }
    memset(&c, 0, sizeof(c));
    c.o = o;
    c.lock_fd = -1;
    sr__tokens_init(&c.tokens);
    /* The endpoint checked and bound before the store counts an incarnation:
     * a refused start writes nothing into it (a new store stays empty). */
    if ((rc = sr__coord_check_endpoint(o->bind)) != SR_OK || (rc = coord_open_store(&c)) != SR_OK ||
        (rc = open_socket(&c)) != SR_OK || (rc = coord_start(&c)) != SR_OK ||
        (o->commit_async && (rc = writer_start(&c)) != SR_OK)) {
        SR_LOG(SR_LOG_ERR, "COORD-START-FAIL", "err=%s detail=\"%s\"", sr_errname(rc),
               sr_errdetail());
        coord_free(&c);
        return rc;
    }
    c.last_rate_ms = sr_clock_now_ms();
    c.last_rate_step = c.global_step;
    for (;;) {
        zmq_pollitem_t it[3] = {{c.sock, 0, ZMQ_POLLIN, 0}};
        int            nit = 1 + sr__auth_pollitems(c.auth, &it[1]);
        int            handled = 0;

        if (*stop && !draining) {
            draining = 1;
            drain_deadline = sr_clock_now_ms() + o->grace_ms;
            SR_LOG(SR_LOG_NOTICE, "COORD-STOPPING",
                   "signal received; finishing the step in progress (grace %d ms)", o->grace_ms);
        }
        if (draining && (!step_in_progress(&c) || sr_clock_now_ms() >= drain_deadline)) {
            break;
        }
        /* A snapshot waiting (for the writer or --commit-interval-ms)
         * goes out soon. */
        int wait_ms = c.writer_started && c.commit_wanted ? 1 : 100;
        if (zmq_poll(it, nit, wait_ms) < 0 && errno != EINTR) {
            rc = sr_fail(SR_EMSG, "zmq_poll: %s", zmq_strerror(errno));
            break;
        }
        sr__auth_handle(c.auth);
        /* Drain what is queued before the periodic work, in bounded batches. */
        while (handled < 256 && recv_one(&c)) {
            handled++;
        }
        flush_held_batch(&c, 0);
        periodic(&c);
    }
    flush_held_batch(&c, 1);
    log_wal_checkpoints(&c);
    if (c.writer_started) {
        sr_err wrc = writer_stop(&c);
        if (wrc != SR_OK) {
            SR_LOG(SR_LOG_ERR, "COORD-COMMIT-FAIL", "the writer's last snapshot: %s",
                   sr_errdetail());
        }
    }
    if (rc == SR_OK && (c.global_step != c.committed_step || c.nlog > 0)) {
        rc = commit_now(&c);
        if (rc != SR_OK) {
            SR_LOG(SR_LOG_ERR, "COORD-COMMIT-FAIL", "final commit of step %" PRId64 ": %s",
                   c.global_step, sr_errdetail());
        }
    }
    log_commits(&c);
    SR_LOG(SR_LOG_NOTICE, "COORD-SHUTDOWN",
           "incarnation=%" PRIu64 " global_step=%" PRId64 " committed_step=%" PRId64, c.incarnation,
           c.global_step, c.committed_step);
    coord_free(&c);
    return rc;
}
