/*
 * A fake coordinator behind the client's I/O seam (worker/client_int.h,
 * sr__io): no sockets, no threads, no sleeps.  Every request the client
 * sends is split out of its message (chains included), logged with the fake
 * clock's time, and handed to the test's handler, which answers at once, at
 * a later fake time, or not at all.  poll() moves the fake clock forward by
 * its whole timeout when nothing is due, so a resend timer fires at exactly
 * its time.
 */
#ifndef SR_TEST_FAKE_PEER_H
#define SR_TEST_FAKE_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "worker/client_int.h"

#define FAKE_MAX_LOG    512
#define FAKE_MAX_FRAMES 64

typedef struct {
    uint8_t *data;
    size_t   len;
} fake_frame;

/* One request as the client sent it. */
typedef struct {
    sr_wire_header h;
    int64_t        at_ms; /* the fake clock when it was sent */
    int            msg;   /* the message it came in (counted from 0) */
    int            nbody;
    fake_frame     body[FAKE_MAX_FRAMES];
} fake_req;

typedef struct fake fake;
typedef void (*fake_handler)(fake *f, const fake_req *r);

/* A reply frame waiting to be read, due at a fake time. */
typedef struct fake_out {
    int64_t          due_ms;
    int              nframes;
    fake_frame       frames[FAKE_MAX_FRAMES];
    struct fake_out *next;
} fake_out;

struct fake {
    int64_t      now_ms;
    fake_req     log[FAKE_MAX_LOG];
    int          nlog;
    int          nmsg;
    fake_frame   cur[FAKE_MAX_FRAMES]; /* the message being sent */
    int          ncur;
    fake_out    *out;      /* replies in due order (then send order) */
    int          read_pos; /* frames of out's head already read */
    int          reconnect;
    fake_handler handler; /* NULL: fake_answer */
    void        *user;
    /* What fake_answer says. */
    uint64_t incarnation;
    int64_t  global_step;
    uint16_t hello_flags;               /* SR_WIRE_F_CHAIN, SR_WIRE_F_MANY */
    size_t   value_bytes;               /* a PULL's answer: this many zero bytes */
    int64_t  token_step;                /* a TOKEN's value */
    uint16_t token_flags;               /* fake_reply's header flags on TOKEN replies */
    int      push_status[FAKE_MAX_LOG]; /* by seq: a PUSH's reply status (0: accepted) */
};

/* A fake and the client opened over it (task `task`; HELLO answered). */
void   fake_init(fake *f);
sr_err fake_open(fake *f, int task, sr_client **out);

/* The default coordinator: answers every request at once. */
void fake_answer(fake *f, const fake_req *r);
/* Queue a reply to r, due `delay_ms` from now: its header (status, local_step)
 * and body frames (n of them). */
void fake_reply(fake *f, const fake_req *r, int delay_ms, int32_t status, int64_t local_step,
                const fake_frame *body, int n);

/* The log's requests of a type (0: all) from index `from`; -1 when none. */
int  fake_find(const fake *f, int type, int from);
int  fake_count(const fake *f, int type);
void fake_free(fake *f);

#endif
