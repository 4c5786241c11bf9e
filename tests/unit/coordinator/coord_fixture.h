/*
 * A coordinator driven in-process through its I/O seam (coord_io,
 * server_int.h), for the unit tests beside it: requests go to
 * sr__coord_dispatch as received messages, replies are recorded by a fake
 * send, time is a number the test sets; a real store in a temp dir; no
 * socket, no sleep, no thread.  The same fixture as server_test.c's (which
 * still has its own copy): new tests use this one.
 */
#ifndef SR_TEST_COORD_FIXTURE_H
#define SR_TEST_COORD_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "coordinator/server_int.h"

#define CF_MAX_FRAMES 256

typedef struct {
    uint8_t *data;
    size_t   len;
    int      more; /* ZMQ_SNDMORE: the message goes on */
} cf_frame;

typedef struct {
    cf_frame f[CF_MAX_FRAMES];
    size_t   n;
    size_t   read; /* frames taken by cf_next_reply */
    int64_t  now_ms;
} cf_io;

/* One reply message: its routing id, header and body frames. */
typedef struct {
    char           rid[16];
    sr_wire_header h;
    cf_frame      *body;
    int            nbody;
} cf_reply;

typedef struct {
    char         *dir;
    char          path[600];
    sr_coord_opts o; /* defaults with R = N = 2, SGD lr 0.5, NORMAL; change before cf_open */
    coord         c;
    cf_io         io;
    uint64_t      req_id;
} cf_fixture;

typedef struct {
    const void *p;
    size_t      n;
} cf_blob;

/* cmocka setup / teardown: *state is a cf_fixture. */
int cf_setup(void **state);
int cf_teardown(void **state);
/* Start the coordinator on the fixture's store (again after cf_close: a
 * restart). */
void cf_open(cf_fixture *t);
/* Stop it (as a kill -9 would: nothing more is committed). */
void cf_close(cf_fixture *t);

/* A request header of the current incarnation. */
sr_wire_header cf_hdr(cf_fixture *t, int type, uint64_t client_id, int32_t task);
/* Deliver a request (routing id, header, body frames). */
void cf_deliver(cf_fixture *t, const char *rid, const sr_wire_header *h, const cf_blob *body,
                int nbody);
/* A request with no body. */
void cf_simple(cf_fixture *t, const char *rid, int type, uint64_t client_id, int32_t task);
/* The next unread reply, or 0 when every sent frame has been read. */
int cf_next_reply(cf_fixture *t, cf_reply *r);
/* Read every reply (held batches flushed first). */
void cf_drain(cf_fixture *t);

/* The chief (client_id, task 0) declares w: float32[2] = {1, 2}; marks ready. */
void cf_declare_w(cf_fixture *t, uint64_t client_id);
void cf_mark_ready(cf_fixture *t, uint64_t client_id);
/* A push of w's gradient {g0, g1} computed at local_step. */
void cf_push_w(cf_fixture *t, const char *rid, uint64_t client_id, int32_t task, int64_t local_step,
               uint64_t seq, float g0, float g1);

#endif
