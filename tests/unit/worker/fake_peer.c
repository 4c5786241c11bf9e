/* The fake coordinator of fake_peer.h. */
#include "fake_peer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint8_t *
dup_bytes(const void *p, size_t n)
{
    uint8_t *d = malloc(n ? n : 1);
    if (d != NULL && n > 0) {
        memcpy(d, p, n);
    }
    return d;
}

/* The message just sent, request by request (a PUSH flagged CHAIN has two
 * body frames, then the next request's header). */
static void
fake_deliver(fake *f)
{
    int i = 0;
    while (i < f->ncur && f->nlog < FAKE_MAX_LOG) {
        fake_req *r = &f->log[f->nlog];
        memset(r, 0, sizeof(*r));
        if (sr_wire_header_decode(f->cur[i].data, f->cur[i].len, &r->h) != SR_OK) {
            break;
        }
        i++;
        int chained = r->h.type == SR_MSG_PUSH && (r->h.flags & SR_WIRE_F_CHAIN);
        int end = chained ? i + 2 : f->ncur;
        for (; i < end && i < f->ncur; i++) {
            r->body[r->nbody++] = f->cur[i];
            f->cur[i].data = NULL;
        }
        r->at_ms = f->now_ms;
        r->msg = f->nmsg;
        f->nlog++;
        if (f->handler != NULL) {
            f->handler(f, r);
        } else {
            fake_answer(f, r);
        }
    }
    for (int k = 0; k < f->ncur; k++) {
        free(f->cur[k].data);
    }
    f->ncur = 0;
    f->nmsg++;
}

static int
fio_send(void *arg, const void *data, size_t len, int flags)
{
    fake *f = arg;
    if (f->ncur == FAKE_MAX_FRAMES) {
        errno = EMSGSIZE;
        return -1;
    }
    f->cur[f->ncur++] = (fake_frame){dup_bytes(data, len), len};
    if (!(flags & SR__IO_MORE)) {
        fake_deliver(f);
    }
    return 0;
}

static int
fio_poll(void *arg, int64_t timeout_ms)
{
    fake *f = arg;
    if (f->reconnect) {
        f->reconnect = 0;
        return SR__IO_RECONNECTED;
    }
    if (f->out != NULL && f->out->due_ms <= f->now_ms + timeout_ms) {
        if (f->out->due_ms > f->now_ms) {
            f->now_ms = f->out->due_ms;
        }
        return SR__IO_IN;
    }
    f->now_ms += timeout_ms;
    return 0;
}

static int
fio_recv(void *arg, zmq_msg_t *m, int *more)
{
    fake     *f = arg;
    fake_out *o = f->out;

    if (o == NULL || o->due_ms > f->now_ms) {
        errno = EAGAIN;
        return -1;
    }
    fake_frame *fr = &o->frames[f->read_pos++];
    zmq_msg_close(m);
    zmq_msg_init_size(m, fr->len);
    memcpy(zmq_msg_data(m), fr->data, fr->len);
    *more = f->read_pos < o->nframes;
    if (!*more) {
        for (int i = 0; i < o->nframes; i++) {
            free(o->frames[i].data);
        }
        f->out = o->next;
        f->read_pos = 0;
        free(o);
    }
    return 0;
}

static int64_t
fio_now(void *arg)
{
    return ((fake *)arg)->now_ms;
}

static void
fio_sleep(void *arg, int64_t ms)
{
    ((fake *)arg)->now_ms += ms;
}

void
fake_init(fake *f)
{
    memset(f, 0, sizeof(*f));
    f->now_ms = 1000000;
    f->incarnation = 7;
    f->global_step = 3;
    f->token_step = 4;
    f->value_bytes = 16;
}

sr_err
fake_open(fake *f, int task, sr_client **out)
{
    sr_client_options o;
    sr__io            io = {.arg = f,
                            .send = fio_send,
                            .poll = fio_poll,
                            .recv = fio_recv,
                            .now_ms = fio_now,
                            .sleep_ms = fio_sleep,
                            .close = NULL};

    memset(&o, 0, sizeof(o));
    o.endpoint = "fake://coordinator";
    o.task_index = task;
    return sr__client_open_io(out, &o, &io);
}

void
fake_reply(fake *f, const fake_req *r, int delay_ms, int32_t status, int64_t local_step,
           const fake_frame *body, int n)
{
    sr_wire_header h = r->h;
    uint8_t        hb[SR_WIRE_HEADER_BYTES];
    fake_out      *o = calloc(1, sizeof(*o)), **p = &f->out;

    h.type = (uint8_t)(r->h.type | SR_WIRE_REPLY);
    h.flags = r->h.type == SR_MSG_HELLO   ? f->hello_flags
              : r->h.type == SR_MSG_TOKEN ? f->token_flags
                                          : 0;
    h.incarnation = f->incarnation;
    h.status = status;
    h.local_step = local_step;
    h.seq = 0;
    sr_wire_header_encode(&h, hb);
    o->due_ms = f->now_ms + delay_ms;
    o->frames[o->nframes++] = (fake_frame){dup_bytes(hb, sizeof(hb)), sizeof(hb)};
    for (int i = 0; i < n; i++) {
        o->frames[o->nframes++] = (fake_frame){dup_bytes(body[i].data, body[i].len), body[i].len};
    }
    /* After every reply due no later (the head may be partly read). */
    if (*p != NULL && f->read_pos > 0) {
        p = &(*p)->next;
    }
    while (*p != NULL && (*p)->due_ms <= o->due_ms) {
        p = &(*p)->next;
    }
    o->next = *p;
    *p = o;
}

void
fake_answer(fake *f, const fake_req *r)
{
    uint8_t    b[2][512];
    fake_frame fr[2];
    int        n = 0;
    int32_t    status = 0;
    int64_t    step = 0;

    switch (r->h.type) {
    case SR_MSG_HELLO: {
        sr_wire_hello_rep h = {.global_step = f->global_step,
                               .model_ready = 1,
                               .replicas_to_aggregate = 1,
                               .total_replicas = 1};
        fr[n++] = (fake_frame){b[0], sr_wire_hello_rep_encode(&h, b[0], sizeof(b[0]))};
        break;
    }
    case SR_MSG_READY:
    case SR_MSG_PING: {
        sr_wire_ping_rep p = {.model_ready = 1, .global_step = f->global_step};
        fr[n++] = (fake_frame){b[0], sr_wire_ping_rep_encode(&p, b[0], sizeof(b[0]))};
        break;
    }
    case SR_MSG_DECLARE:
        break;
    case SR_MSG_PUSH:
    case SR_MSG_PUSH_SPARSE: {
        if (r->h.seq < FAKE_MAX_LOG && f->push_status[r->h.seq] != 0) {
            status = f->push_status[r->h.seq];
            break;
        }
        sr_wire_push_rep p = {.outcome = SR_PUSH_ACCEPTED};
        fr[n++] = (fake_frame){b[0], sr_wire_push_rep_encode(&p, b[0], sizeof(b[0]))};
        break;
    }
    case SR_MSG_TOKEN:
        step = f->token_step;
        break;
    case SR_MSG_PULL: {
        sr_wire_name    nm;
        sr_wire_vardesc vd;
        memset(&vd, 0, sizeof(vd));
        if (r->nbody >= 1 && sr_wire_name_decode(r->body[0].data, r->body[0].len, &nm) == SR_OK) {
            memcpy(vd.name, nm.name, sizeof(vd.name));
        }
        vd.dtype = SR_FLOAT32;
        vd.ndim = 1;
        vd.shape[0] = (int64_t)(f->value_bytes / 4);
        fr[n++] = (fake_frame){b[0], sr_wire_vardesc_encode(&vd, b[0], sizeof(b[0]))};
        uint8_t *zeros = calloc(1, f->value_bytes ? f->value_bytes : 1);
        fr[n++] = (fake_frame){zeros, f->value_bytes};
        fake_reply(f, r, 0, 0, f->global_step, fr, n);
        free(zeros);
        return;
    }
    default:
        return; /* BYE: no answer needed */
    }
    fake_reply(f, r, 0, status, step, fr, n);
}

int
fake_find(const fake *f, int type, int from)
{
    for (int i = from; i < f->nlog; i++) {
        if (type == 0 || f->log[i].h.type == type) {
            return i;
        }
    }
    return -1;
}

int
fake_count(const fake *f, int type)
{
    int n = 0;
    for (int i = 0; i < f->nlog; i++) {
        n += f->log[i].h.type == type;
    }
    return n;
}

void
fake_free(fake *f)
{
    for (int i = 0; i < f->nlog; i++) {
        for (int k = 0; k < f->log[i].nbody; k++) {
            free(f->log[i].body[k].data);
        }
    }
    while (f->out != NULL) {
        fake_out *o = f->out;
        f->out = o->next;
        for (int i = 0; i < o->nframes; i++) {
            free(o->frames[i].data);
        }
        free(o);
    }
}
