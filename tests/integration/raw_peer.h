/*
 * A raw ZeroMQ DEALER beside real clients: requests built field by field
 * (headers a test chooses, deliberately broken frames), replies read as they
 * come.  Shared by the protocol tests (protocol_*_test.c) and
 * integrity_test.c.  Every call fails the test (cmocka) on a local error;
 * what the coordinator answers is for the test to check.  docs/protocol.md
 * is the wire.
 */
#ifndef SR_RAW_PEER_H
#define SR_RAW_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "syncrep/syncrep.h"
#include "wire/wire.h"

typedef struct {
    void          *ctx, *sock;
    uint64_t       client_id;
    uint64_t       incarnation; /* sent in every header; raw_hello sets it */
    uint64_t       req;         /* the last request id sent */
    sr_wire_header rh;          /* the last reply's header */
    uint8_t        body[2][4096];
    size_t         body_len[2];
    int            nbody; /* body frames of the last reply kept (at most 2) */
} raw_peer;

/* Connect a DEALER to endpoint as client `client_id` (linger 0). */
void raw_open(raw_peer *r, const char *endpoint, uint64_t client_id);
/* raw_open with a receive high-water mark of rcvhwm messages, set before
 * the connect (ZeroMQ applies it to pipes made after it only). */
void raw_open_rcvhwm(raw_peer *r, const char *endpoint, uint64_t client_id, int rcvhwm);
void raw_close(raw_peer *r);

/* Send frames as they are (f[0] may be a deliberately broken header). */
void raw_send_frames(raw_peer *r, const void *const *f, const size_t *len, int n);
/* Encode into hb the header of a request from r (the next request id, r's
 * incarnation and client id) as task `task`; its length.  Not sent. */
size_t raw_hdr_task(raw_peer *r, uint8_t *hb, int type, int task, uint16_t flags,
                    int64_t local_step, uint64_t seq);
/* raw_hdr_task as task 1. */
size_t raw_hdr(raw_peer *r, uint8_t *hb, int type, uint16_t flags, int64_t local_step,
               uint64_t seq);
/* A request: its header, then nbody body frames. */
void raw_send(raw_peer *r, int type, int task, int64_t local_step, uint64_t seq,
              const void *const *body, const size_t *blen, int nbody);
/* Receive one reply within timeout_ms into r->rh and r->body; 0 if one came,
 * -1 if none. */
int raw_recv(raw_peer *r, int timeout_ms);
/* HELLO as `task`, answered SR_OK; keeps the incarnation. */
void raw_hello(raw_peer *r, int task);
/* A header-only request of `type` as `task`, its reply read (body frames
 * dropped) and matched to the request id; the reply's status.  A HELLO
 * answered SR_OK sets the incarnation. */
int raw_ask(raw_peer *r, int type, int task);

/* A dense PUSH of g[0..len) at byte `offset` of `name`. */
void raw_push_at(raw_peer *r, int task, const char *name, int dtype, const void *g, size_t len,
                 uint64_t offset, int64_t step, uint64_t seq);
void raw_push(raw_peer *r, int task, const char *name, int dtype, const void *g, size_t len,
              int64_t step, uint64_t seq);
/* A PULL of one name as task 1. */
void raw_pull(raw_peer *r, const char *name);

/* The next reply is a PUSH answer with SR_OK: its outcome (SR_PUSH_...). */
int raw_push_outcome(raw_peer *r);
/* The next reply has status `code` and an error text (printed if the status
 * is another). */
void raw_expect_error(raw_peer *r, int code);
/* The next reply, within timeout_ms, answers `type` with SR_OK. */
void raw_expect_reply(raw_peer *r, int type, int timeout_ms);
/* The next reply has status SR_OK. */
void raw_expect_ok(raw_peer *r);

/* One whole message as it came: each frame copied (at most 8 of 512 bytes). */
typedef struct {
    int     n;
    size_t  len[8];
    uint8_t data[8][512];
} raw_whole_msg;

/* Receive one whole message (within 10 s). */
void raw_recv_whole(raw_peer *r, raw_whole_msg *m);
/* Header frame `i` of m: decoded, of this type (a reply), flags, status. */
sr_wire_header raw_whole_hdr(const raw_whole_msg *m, int i, int type, uint16_t flags, int status);

/* ---- the protocol tests' job --------------------------------------------- */

/* A coordinator (R, --learning-rate 1, --max-tasks 3) and its chief, which
 * declared x = 10 (float64) and an int64 counter n = 7, and is ready. */
sr_client *proto_setup(sr_harness *h, const char *tag, const char *R);
/* x as the client pulls it. */
double proto_pull_x(sr_client *c);

#endif
