/*
 * The client's internals, shared by worker/'s files (never installed).  In
 * data-path order:
 *
 *   conn.c      the connection: request ids, the in-flight requests (an id
 *               map of sr__req contexts), framing, chains, the wait loop with
 *               its resends, PINGs and timeout, and the incarnation
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

typedef struct {
    const void *data;
    size_t      len;
} sr__frame;

/* ---- the I/O seam (conn_zmq.c over ZeroMQ; a unit test's fake peer) ---- */

enum { SR__IO_MORE = 1, SR__IO_DONTWAIT = 2 };  /* send flags */
enum { SR__IO_IN = 1, SR__IO_RECONNECTED = 2 }; /* poll results */
typedef struct sr__io {
    void *arg;
    /* One frame; SR__IO_MORE: another frame of the message follows;
     * SR__IO_DONTWAIT: skip rather than wait when the queue is full.
     * 0, or -1 with errno. */
    int (*send)(void *arg, const void *data, size_t len, int flags);
    /* Wait up to timeout_ms (0: do not wait) for a frame to read or a new
     * connection: SR__IO_* bits, 0 when the time ran out, -1 with errno. */
    int (*poll)(void *arg, int64_t timeout_ms);
    /* The next frame into m (initialised by the caller); *more: another one
     * of the same message follows.  0, or -1 with errno. */
    int (*recv)(void *arg, zmq_msg_t *m, int *more);
    int64_t (*now_ms)(void *arg); /* monotonic milliseconds */
    void (*sleep_ms)(void *arg, int64_t ms);
    void (*close)(void *arg); /* frees arg; NULL-safe callers */
} sr__io;

/* ---- the in-flight requests (conn.c's id map) -------------------------- */

typedef struct sr__req sr__req;
typedef struct {
    /* The reply in c->rh / c->rep answers r; the map has already forgotten it. */
    void (*reply)(sr_client *c, sr__req *r);
    /* Send r with these extra header flags (SR_WIRE_F_RESEND, or
     * SR_WIRE_F_CHAIN when held back); more: a request follows in this
     * message; dontwait: skip rather than wait on a full queue.  0, or -1. */
    int (*send)(sr_client *c, sr__req *r, uint16_t flags, int more, int dontwait);
    /* A restart: r will never be answered; the map has already forgotten it. */
    void (*lost)(sr_client *c, sr__req *r);
} sr__req_ops;

/* A request that stays in flight beyond the call that sent it (a pipelined
 * push, one PULL of a pull_many): the shape of nng's req0 context. */
struct sr__req {
    uint64_t           id;   /* its request id */
    uint8_t            type; /* its message type: a reply must be of it */
    const sr__req_ops *ops;  /* how to send it, what to do with its reply or its loss */
};

/* What a wait (sr__conn_call) is for. */
typedef enum {
    SR__WAIT_REPLY, /* the call's request: its reply */
    SR__WAIT_TOKEN, /* a TOKEN: re-sent every second with PINGs, no timeout while they are answered
                     */
    SR__WAIT_ROOM,  /* no request: until need bytes fit in budget among the pipelined pushes */
    SR__WAIT_EXT,   /* no request: until no push sent from a caller's buffer is unanswered */
    SR__WAIT_PULLS, /* no request: until the pulls in flight (c->batch) are done */
} sr__wait_kind;

typedef struct {
    sr__wait_kind    kind;
    int              type; /* the request (REPLY, TOKEN) */
    uint16_t         flags;
    int64_t          local_step;
    uint64_t         seq;
    const sr__frame *f;
    int              nf;
    size_t           need, budget; /* SR__WAIT_ROOM */
} sr__call;

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

/* The pulls of one sr_client_pull_many, while the wait takes their answers. */
typedef struct sr__pull_batch {
    size_t             n;
    const char *const *names;
    void *const       *dsts;
    const size_t      *sizes;
    sr__pull_item     *item;
    sr__req           *reqs;                           /* SR__PULL_WINDOW contexts */
    size_t             next;                           /* items before it are sent or done */
    size_t             first;                          /* items before it are done */
    size_t             inflight, inflight_bytes, left; /* bytes: of the values in flight */
    sr_err             rc;                             /* the first refusal: sends no more */
} sr__pull_batch;

/* A value that came with the last token (SR_WIRE_F_WANT_VARS). */
typedef struct sr__cached {
    char      name[SR_WIRE_MAX_NAME + 1];
    zmq_msg_t value;
} sr__cached;

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
    int             ncache, cap_cache;
    int64_t         cache_step; /* the global step of the cached values */
    int             cache_next; /* where the next pull's name is looked for first */
    int             pulled;     /* pulls since the last step: ask for the variables */
    sr__pull_batch *batch;      /* inside sr_client_pull_many */
    sr__pull_item  *batch_items;
    size_t          cap_batch;
    sr__req        *batch_reqs;
    sr_client_stats stats;
    char            err[1024];
};

/* ---- conn.c ---- */
sr_err sr__fail(sr_client *c, sr_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
sr_err sr__reply_error(sr_client *c, const char *what);
sr_err sr__check_size(sr_client *c, const char *what, const char *name, uint64_t bytes);
sr_err sr__conn_call(sr_client *c, const sr__call *call, int *restarted);
sr_err sr__conn_reserve(sr_client *c, int n);
void   sr__conn_track(sr_client *c, sr__req *r);
void   sr__conn_forget(sr_client *c, sr__req *r);
void   sr__conn_lose_all(sr_client *c);
int    sr__conn_send_frames(sr_client *c, int type, uint64_t req_id, uint16_t flags,
                            int64_t local_step, uint64_t seq, const sr__frame *f, int nf, int more,
                            int dontwait);
int    sr__conn_send(sr_client *c, int type, uint64_t req_id, uint16_t flags, int64_t local_step,
                     uint64_t seq, const sr__frame *f, int nf);
int    sr__conn_send_request(sr_client *c, int type, uint64_t req_id, uint16_t flags,
                             int64_t local_step, uint64_t seq, const sr__frame *f, int nf);
int    sr__conn_send_held(sr_client *c, int alone, int dontwait);
void   sr__conn_drop_reply(sr_client *c);
void   sr__conn_close(sr_client *c);

/* ---- conn_zmq.c ---- */
sr_err sr__io_zmq_open(sr__io *io, const sr_client_options *opts, uint64_t client_id);

/* ---- push.c ---- */
void   sr__push_count(sr_client *c, int outcome);
sr_err sr__push_take_deferred(sr_client *c);
sr_err sr__push_flush(sr_client *c, int *restarted);
void   sr__push_drop_ext(sr_client *c);
void   sr__push_free(sr_client *c);

/* ---- pull.c ---- */
void sr__pull_take_cache(sr_client *c);
void sr__pull_drop_cache(sr_client *c);
void sr__pull_free(sr_client *c);

/* ---- session.c ---- */
sr_err sr__session_hello(sr_client *c);
sr_err sr__session_resync(sr_client *c);
decl  *sr__decl_find(sr_client *c, const char *name);

/* ---- client.c ---- */
sr_err sr__client_open_io(sr_client **out, const sr_client_options *opts, const sr__io *io);

#endif
