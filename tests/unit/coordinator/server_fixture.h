/*
 * The fixture shared by the server tests (server_test.c,
 * server_members_test.c): a coordinator on a temp-dir store, driven
 * in-process through its I/O seam (coord_io, server_int.h).  Requests go to
 * sr__coord_dispatch as received messages, replies are recorded by a fake
 * send, time is a number the test sets.  No socket, no sleep, no thread.
 */
#ifndef SR_TEST_SERVER_FIXTURE_H
#define SR_TEST_SERVER_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "coordinator/server_int.h"

/* ---- the fake I/O: every frame sent, in order ---------------------------- */

#define MAX_FRAMES 256

typedef struct {
    uint8_t *data;
    size_t   len;
    int      more; /* ZMQ_SNDMORE: the message goes on */
} sent_frame;

typedef struct {
    sent_frame f[MAX_FRAMES];
    size_t     n;
    size_t     read; /* frames taken by next_reply */
    int64_t    now_ms;
} fake_io;

/* One reply message: its routing id, header and body frames. */
typedef struct {
    char           rid[16];
    sr_wire_header h;
    sent_frame    *body;
    int            nbody;
} reply;

/* The next unread message, or 0 when every sent frame has been read. */
int next_reply(fake_io *io, reply *r);

/* ---- the fixture: a coordinator on a temp-dir store ---------------------- */

enum { TASK0_ID = 0xA0, TASK1_ID = 0xB1, TASK2_ID = 0xC2, TASK2B_ID = 0xC3 };

typedef struct {
    char         *dir;
    char          path[600];
    sr_coord_opts o;
    coord         c;
    fake_io       io;
    uint64_t      req_id;
} fixture;

/* A fixture with R and N set, SGD with lr 0.5, the store's path in its
 * temp dir (options may be changed before fixture_open); NULL when the
 * temp dir cannot be made. */
fixture *fixture_new(int R, int N);
/* Start the coordinator on the options (again after fixture_close: a restart). */
void fixture_open(fixture *t);
/* Stop it as a kill -9 would: the replies read, nothing more committed. */
void fixture_close(fixture *t);
/* Read every reply (the held answers flushed first). */
void fixture_drain(fixture *t);
/* A cmocka teardown: the coordinator, the frames and the temp dir go. */
int fixture_teardown(void **state);

/* ---- requests ----------------------------------------------------------- */

typedef struct {
    const void *p;
    size_t      n;
} blob;

/* A request header of the next request id. */
sr_wire_header hdr(fixture *t, int type, uint64_t client_id, int32_t task);
/* Dispatch one message from routing id rid: the header and nbody frames. */
void deliver(fixture *t, const char *rid, const sr_wire_header *h, const blob *body, int nbody);
/* A request with no body; its header for the caller's checks. */
sr_wire_header simple(fixture *t, const char *rid, int type, uint64_t client_id, int32_t task);
/* The chief declares w: float32[2] = {1, 2}. */
void declare_w(fixture *t);
/* The chief marks the model ready. */
void mark_ready(fixture *t);
/* A PUSH of w = {g0, g1} computed at local_step. */
void push_w(fixture *t, const char *rid, uint64_t client_id, int32_t task, int64_t local_step,
            uint64_t seq, float g0, float g1);

#endif
