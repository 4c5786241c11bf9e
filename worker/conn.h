/*
 * The client's connection layer (conn.c), internal to worker/: the I/O seam
 * it runs over (sr__io: conn_zmq.c's ZeroMQ DEALER, or a unit test's fake
 * peer), the in-flight request contexts of its id map (sr__req, as nng's
 * req0 contexts), and what one wait is for (sr__call).  The client struct
 * these functions take is in client_int.h.
 */
#ifndef SR_WORKER_CONN_H
#define SR_WORKER_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "core/error.h"
#include "syncrep/syncrep.h"

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
    SR__WAIT_PULLS, /* no request: until the pulls in flight (.pulls) are done */
} sr__wait_kind;

typedef struct {
    sr__wait_kind                kind;
    int                          type; /* the request (REPLY, TOKEN) */
    uint16_t                     flags;
    int64_t                      local_step;
    uint64_t                     seq;
    const sr__frame             *f;
    int                          nf;
    size_t                       need, budget; /* SR__WAIT_ROOM */
    const struct sr__pull_batch *pulls;        /* SR__WAIT_PULLS */
} sr__call;

/* ---- conn.c: errors, sending, the id map, the wait ---- */
sr_err sr__fail(sr_client *c, sr_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
sr_err sr__reply_error(sr_client *c, const char *what);
sr_err sr__check_size(sr_client *c, const char *what, const char *name, uint64_t bytes);
sr_err sr__conn_call(sr_client *c, const sr__call *call, int *restarted);
/* Issue 22: SYNCREP_QUIET is set (and not "0"): the waits' WORKER-WAIT
 * line (logged once per wait after 5 s) is not logged. */
int    sr__conn_quiet(void);
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

#endif
