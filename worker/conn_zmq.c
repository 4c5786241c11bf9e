/*
 * The connection's I/O seam over ZeroMQ: one DEALER socket to the
 * coordinator (reconnecting every 100 ms), and a monitor that tells the
 * wait loop when the socket (re)connected, so what was in flight on the old
 * connection goes again at once.  The only worker/ file that makes sockets;
 * unit tests replace it with a fake peer (tests/unit/worker/).
 *
 * Functions: zio_send, zio_reconnected, zio_poll, zio_recv, zio_now_ms,
 * zio_sleep_ms, zio_close, sr__io_zmq_open.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "worker/client_int.h"

typedef struct {
    void *ctx, *sock;
    void *mon;      /* PAIR reading the DEALER's connect events */
    int   connects; /* CONNECTED events seen */
} zio;

static int
zio_send(void *arg, const void *data, size_t len, int flags)
{
    zio *z = arg;
    return zmq_send(z->sock, data, len,
                    ((flags & SR__IO_MORE) ? ZMQ_SNDMORE : 0) |
                        ((flags & SR__IO_DONTWAIT) ? ZMQ_DONTWAIT : 0)) < 0
               ? -1
               : 0;
}

/* Drain the monitor; 1 if the DEALER reconnected.  The first connection
 * is not one: what was sent before it waited in ZeroMQ's queue and goes out
 * on it. */
static int
zio_reconnected(zio *z)
{
    int connected = 0;
    for (;;) {
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, z->mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return connected;
        }
        if (zmq_msg_size(&ev) >= 2) {
            const uint8_t *e = zmq_msg_data(&ev);
            if ((uint16_t)(e[0] | e[1] << 8) == ZMQ_EVENT_CONNECTED) {
                connected |= z->connects++ > 0;
            }
        }
        int more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        if (more) {
            zmq_msg_init(&addr);
            zmq_msg_recv(&addr, z->mon, 0);
            zmq_msg_close(&addr);
        }
    }
}

static int
zio_poll(void *arg, int64_t timeout_ms)
{
    zio           *z = arg;
    zmq_pollitem_t it[2] = {{z->sock, 0, ZMQ_POLLIN, 0}, {z->mon, 0, ZMQ_POLLIN, 0}};
    int            rc = zmq_poll(it, z->mon ? 2 : 1, (long)timeout_ms);

    if (rc <= 0) {
        return rc;
    }
    if (z->mon != NULL && (it[1].revents & ZMQ_POLLIN) && zio_reconnected(z)) {
        return SR__IO_RECONNECTED;
    }
    return (it[0].revents & ZMQ_POLLIN) ? SR__IO_IN : 0;
}

static int
zio_recv(void *arg, zmq_msg_t *m, int *more)
{
    zio *z = arg;
    if (zmq_msg_recv(m, z->sock, 0) < 0) {
        return -1;
    }
    *more = zmq_msg_more(m);
    return 0;
}

static int64_t
zio_now_ms(void *arg)
{
    (void)arg;
    return sr_clock_now_ms();
}

static void
zio_sleep_ms(void *arg, int64_t ms)
{
    (void)arg;
    sr_clock_sleep_ms(ms);
}

static void
zio_close(void *arg)
{
    zio *z = arg;
    if (z == NULL) {
        return;
    }
    if (z->mon != NULL) {
        zmq_close(z->mon);
    }
    if (z->sock != NULL) {
        zmq_socket_monitor(z->sock, NULL, 0);
        zmq_close(z->sock);
    }
    if (z->ctx != NULL) {
        /* A signal interrupts it (EINTR) before the I/O thread is done with
         * what refers to this client: wait on. */
        while (zmq_ctx_term(z->ctx) != 0 && errno == EINTR) {
        }
    }
    free(z);
}

/* A DEALER connected (asynchronously) to opts->endpoint, with CURVE when
 * the options carry keys (checked by the caller).  Errors: SR_ENOMEM,
 * SR_EMSG, SR_EINVAL (keys or endpoint refused); *io untouched. */
sr_err
sr__io_zmq_open(sr__io *io, const sr_client_options *opts, uint64_t client_id)
{
    int    zero = 0, ivl = 100, ivl_max = 0, sndtimeo = 5000;
    char   mon[64];
    sr_err rc;
    zio   *z = calloc(1, sizeof(*z));

    if (z == NULL) {
        return sr_fail(SR_ENOMEM, "sr_client_open");
    }
    if ((z->ctx = zmq_ctx_new()) == NULL || (z->sock = zmq_socket(z->ctx, ZMQ_DEALER)) == NULL) {
        rc = sr_fail(SR_EMSG, "zmq socket: %s", zmq_strerror(errno));
        goto fail;
    }
    zmq_setsockopt(z->sock, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(z->sock, ZMQ_RECONNECT_IVL, &ivl, sizeof(ivl));
    zmq_setsockopt(z->sock, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof(ivl_max));
    zmq_setsockopt(z->sock, ZMQ_SNDTIMEO, &sndtimeo, sizeof(sndtimeo));
    if (opts->server_public_key != NULL &&
        (zmq_setsockopt(z->sock, ZMQ_CURVE_SERVERKEY, opts->server_public_key, 40) != 0 ||
         zmq_setsockopt(z->sock, ZMQ_CURVE_PUBLICKEY, opts->public_key, 40) != 0 ||
         zmq_setsockopt(z->sock, ZMQ_CURVE_SECRETKEY, opts->secret_key, 40) != 0)) {
        rc = sr_fail(SR_EINVAL, "CURVE keys: %s", zmq_strerror(errno));
        goto fail;
    }
    snprintf(mon, sizeof(mon), "inproc://syncrep-client-%016llx", (unsigned long long)client_id);
    if (zmq_socket_monitor(z->sock, mon, ZMQ_EVENT_CONNECTED) == 0 &&
        (z->mon = zmq_socket(z->ctx, ZMQ_PAIR)) != NULL && zmq_connect(z->mon, mon) != 0) {
        zmq_close(z->mon); /* without it, resends wait for their timer */
        z->mon = NULL;
    }
    if (zmq_connect(z->sock, opts->endpoint) != 0) {
        rc = sr_fail(SR_EINVAL, "connect %s: %s", opts->endpoint, zmq_strerror(errno));
        goto fail;
    }
    *io = (sr__io){.arg = z,
                   .send = zio_send,
                   .poll = zio_poll,
                   .recv = zio_recv,
                   .now_ms = zio_now_ms,
                   .sleep_ms = zio_sleep_ms,
                   .close = zio_close};
    return SR_OK;
fail:
    zio_close(z);
    return rc;
}
