/*
 * The client's internals, shared by worker/'s files (never installed): the
 * client struct, and each file's cross-file functions.  In data-path order:
 *
 *   conn.c      the connection (its types in conn.h): request ids, the
 *               in-flight requests (an id map of sr__req contexts), framing,
 *               chains, the wait loop with its resends, PINGs and timeout,
 *               and the incarnation
 *   conn_zmq.c  the I/O seam over ZeroMQ (the DEALER socket and its monitor)
 *   push.c      pushes: pipelined, partitioned, chained (push_many, push_step)
 *   pull.c      pulls: pull, pull_many, the values a token reply carried
 *   session.c   HELLO, declarations, ready, and resync after a restart
 *   client.c    the public lifecycle: open, close, step, flush, stats
 *
 * Conventions: internal functions return sr_err (0 or negative); a
 * coordinator restart noticed inside a call is reported through an
 * `int *restarted` out-flag, never as a return code.  Modes are arguments.
 * The wire protocol, resends included, is docs/protocol.md.
 */
#ifndef SR_WORKER_CLIENT_INT_H
#define SR_WORKER_CLIENT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "core/error.h"
#include "syncrep/syncrep.h"
#include "wire/wire.h"
#include "worker/conn.h"

#define SR__DEFAULT_TIMEOUT_MS 60000
#define SR__MAX_REPLY_FRAMES   (2 + 2 * 65536) /* a TOKEN reply carrying every variable */
/* Pipelined pushes (push.c): each at most PIPE_PUSH_MAX bytes, at most
 * PIPE_MAX_BYTES / PIPE_MAX_COUNT of them unacknowledged (the copies kept for
 * resends; a model of many mid-size variables fits whole, so a worker does
 * not stop for answers in the middle of its pushes: 4 MiB cost 200 x 50 KiB
 * a quarter of its steps, docs/performance-history.md). */
#define SR__PIPE_PUSH_MAX  (1u << 20)
#define SR__PIPE_MAX_BYTES (16u << 20)
#define SR__PIPE_MAX_COUNT 256 /* well under the DEALER's send HWM (1000): never blocks */
/* Pipelined pushes held back to leave in one message (a chain) with the next
 * request: with it (at most four frames), at most the coordinator's 32 frames
 * a message (docs/protocol.md, Chains). */
#define SR__CHAIN_HELD_MAX 9
/* sr_client_pull_many: at most this many pulls (this many bytes of values)
 * unanswered; a bigger variable goes alone. */
#define SR__PULL_WINDOW       192
#define SR__PULL_WINDOW_BYTES (8u << 20)
/* While a call waits for an answer (not a token: those PING every second
 * anyway), a PING this often. */
#define SR__PING_EVERY_MS 2000

/* ---- the client ---------------------------------------------------------- */

typedef struct decl {
    char     name[SR_WIRE_MAX_NAME + 1];
    int      dtype;
    int      ndim;
    int64_t  shape[SR_MAX_NDIM];
    unsigned flags;
    void    *init; /* chief, until the model is ready */
    size_t   nbytes;
} decl;

/* A pipelined push, sent and not yet acknowledged: owns a copy of its
 * descriptor and gradient (for resends). */
typedef struct sr__pend {
    sr__req        req; /* first: the map's entry */
    uint64_t       seq;
    int64_t        local_step;
    char           name[SR_WIRE_MAX_NAME + 1];
    uint8_t       *buf; /* descriptor, then (unless ext) the gradient */
    size_t         desc_len, data_len, cap;
    const uint8_t *ext; /* the caller's gradient, valid during its call */
} sr__pend;

/* One pull of a sr_client_pull_many. */
typedef struct {
    uint64_t req;   /* its request id, while in flight */
    uint8_t  state; /* PULL_TO_SEND, PULL_IN_FLIGHT, PULL_DONE */
} sr__pull_item;
enum { SR__PULL_TO_SEND, SR__PULL_IN_FLIGHT, SR__PULL_DONE };

typedef struct sr__pull_batch sr__pull_batch;

/* Where a pulled value goes instead of dsts[i] (sr__pull_many_into): item
 * i's value message, its size checked; valid only during the call (the
 * sink may take a reference with zmq_msg_copy). */
typedef void (*sr__pull_sink)(void *arg, size_t i, zmq_msg_t *value);

/* One PULL in flight: its context in the id map, and the pulls it is of. */
typedef struct {
    sr__req         req; /* first: the map's entry */
    sr__pull_batch *b;
} sr__pull_req;

/* The pulls of one sr_client_pull_many, while the wait takes their answers. */
struct sr__pull_batch {
    size_t             n;
    const char *const *names;
    void *const       *dsts;
    const size_t      *sizes;
    sr__pull_sink      sink; /* NULL: each value is copied into dsts[i] */
    void              *sink_arg;
    sr__pull_item     *item;
    sr__pull_req      *reqs;                           /* SR__PULL_WINDOW contexts */
    size_t             next;                           /* items before it are sent or done */
    size_t             first;                          /* items before it are done */
    size_t             inflight, inflight_bytes, left; /* bytes: of the values in flight */
    sr_err             rc;                             /* the first refusal: sends no more */
};

/* A value that came with the last token (SR_WIRE_F_WANT_VARS). */
typedef struct sr__cached {
    char      name[SR_WIRE_MAX_NAME + 1];
    zmq_msg_t value;
} sr__cached;

typedef struct sr__model sr__model; /* model.c */
struct sr_client {
    /* connection (conn.c) */
    sr__io         io;
    char          *endpoint;
    int            task;
    int            timeout_ms;
    uint64_t       client_id;
    uint64_t       next_req;
    uint64_t       incarnation; /* 0 until HELLO is answered */
    sr_wire_header rh;          /* the last reply */
    zmq_msg_t     *rep;         /* the last reply's body frames */
    int            nrep, cap_rep;
    int            chain_more; /* the rest of the message just read follows */
    sr__req      **flight;     /* in flight, in request id order */
    int            nflight, cap_flight;
    int            held; /* the last `held` requests in flight are pushes not sent yet */
    /* what HELLO announced (session.c) */
    uint64_t part_bytes; /* the coordinator's partition size */
    uint64_t max_msg;    /* the largest request it accepts (0: not announced) */
    int      chain_ok;   /* it takes chains */
    int      many_ok;    /* it takes pulls of many variables */
    /* session (session.c) */
    int64_t local_step;
    int64_t global_step;
    int     model_ready;
    int     ready_done; /* sr_client_ready succeeded */
    int     tainted;    /* resynced mid-round: this round's pulls may mix incarnations,
                           so its pushes are dropped (stale) until the next step */
    decl  *decls;
    size_t ndecls, cap_decls;
    size_t decl_next; /* where sr__decl_find looks first */
    /* pushes (push.c) */
    uint64_t   seq;
    sr__pend **pend; /* pointers: entries past npend keep their buffers for reuse */
    int        npend, cap_pend;
    size_t     pend_bytes;
    int        npend_ext;   /* unanswered pushes sent from a caller's buffer */
    sr_err     deferred_rc; /* a pipelined push's refusal, reported by the next step */
    char       deferred_err[1024];
    /* pulls (pull.c) */
    sr__cached     *cache;
    int             ncache;
    size_t          cap_cache;
    int64_t         cache_step;  /* the global step of the cached values */
    int             cache_whole; /* the cache holds every variable (token deltas: issue 23) */
    int             cache_live;  /* this round's pulls may be served from the cache */
    int             cache_next;  /* where the next pull's name is looked for first */
    int             pulled;      /* pulls since the last step: ask for the variables */
    sr__pull_item  *batch_items; /* kept for the next sr_client_pull_many */
    size_t          cap_batch;
    sr__pull_req   *batch_reqs;
    sr_client_stats stats;
    char            err[1024];
    /* the model declared as a whole (model.c), or NULL */
    sr__model *model;
    /* issue 24: cursor (client_cursor.c).  `cur` is the data cursor to
     * resume from (cur_fetch: ask the coordinator first, after HELLO);
     * `round` the one sent for the round in progress, which becomes `cur`
     * once a push of the round was counted (accepted or duplicate) with no
     * resync since (round_counted, round_resyncs: the counts then). */
    int      cur_fetch, round_set;
    uint32_t cur_len, round_len;
    uint64_t round_counted, round_resyncs;
    uint8_t  cur[SR_WIRE_CURSOR_MAX], round[SR_WIRE_CURSOR_MAX];
};

/* ---- conn_zmq.c ---- */
sr_err sr__io_zmq_open(sr__io *io, const sr_client_options *opts, uint64_t client_id);

/* ---- push.c ---- */
void sr__push_count(sr_client *c, int outcome);
/* Writes bytes [off, off + len) of a gradient at its place just before
 * they are sent (sr__push_filled): the model gathers a pack's tensors a
 * partition at a time, each while the one before travels. */
typedef struct {
    void (*fn)(void *arg, size_t off, size_t len);
    void *arg;
} sr__push_fill;

/* sr_client_push_step (step 0: sr_client_push) of the bytes at grad, which
 * fill writes there just before they leave. */
sr_err sr__push_filled(sr_client *c, const char *name, const void *grad, size_t bytes,
                       const sr__push_fill *fill, int step);
sr_err sr__push_take_deferred(sr_client *c);
sr_err sr__push_flush(sr_client *c, int *restarted);
void   sr__push_drop_ext(sr_client *c);
void   sr__push_free(sr_client *c);

/* ---- pull.c ---- */
/* After a TOKEN reply (asked: the request wanted the variables): keep the
 * ones it carried for this round's pulls, whole or merged into the cache
 * (a delta, SR_WIRE_F_HAVE_VARS). */
void sr__pull_take_cache(sr_client *c, int asked);
/* sr_client_pull_many, each value handed to sink (when not NULL) instead of
 * copied into dsts[i] (dsts may then be NULL; sizes are still checked):
 * the model's pulls scatter a pack straight into the caller's buffers. */
sr_err sr__pull_many_into(sr_client *c, size_t n, const char *const *names, void *const *dsts,
                          const size_t *dst_bytes, sr__pull_sink sink, void *sink_arg);
void   sr__pull_drop_cache(sr_client *c);
void   sr__pull_free(sr_client *c);

/* ---- model.c ---- */
void sr__model_free(sr_client *c);
/* ---- session.c ---- */
sr_err sr__session_hello(sr_client *c);
sr_err sr__session_resync(sr_client *c);
decl  *sr__decl_find(sr_client *c, const char *name);

/* ---- client.c ---- */
sr_err sr__client_open_io(sr_client **out, const sr_client_options *opts, const sr__io *io);

#endif
