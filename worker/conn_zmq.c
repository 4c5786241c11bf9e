/*
 * The connection's I/O seam over ZeroMQ: one DEALER socket to the
 * coordinator (reconnecting every 100 ms; heartbeats and TCP keepalive find
 * a dead or half-open connection in seconds, docs/network.md), and a monitor that tells the
 * wait loop when the socket (re)connected, so what was in flight on the old
 * connection goes again at once.  The only worker/ file that makes sockets;
 * unit tests replace it with a fake peer (tests/unit/worker/).
 *
 * Functions: zio_send, zio_handshake_failed, zio_reconnected, zio_poll, zio_recv, zio_now_ms,
 * zio_sleep_ms, zio_close, net_opt, set_net_opts, sr__io_zmq_open.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "worker/client_int.h"

/* The defaults of the network options (sr_client_options; docs/network.md):
 * a dead coordinator is noticed within about 6 s, a link that returns is
 * used within about 1 s. */
enum {
    SR__NET_HEARTBEAT_IVL_MS = 1000,
    SR__NET_HEARTBEAT_TIMEOUT_MS = 5000,
    SR__NET_CONNECT_TIMEOUT_MS = 2000,
    SR__NET_KEEPALIVE_IDLE_S = 10,
    SR__NET_KEEPALIVE_INTVL_S = 2,
    SR__NET_KEEPALIVE_CNT = 3
};

typedef struct {
    void   *ctx, *sock;
    void   *mon;        /* PAIR reading the DEALER's connect and handshake events */
    int     connects;   /* CONNECTED events seen */
    int     handshakes; /* failed handshakes (each one connected again) */
    int64_t redo_at;    /* when to connect again after one (0: not pending) */
    char   *endpoint;
} zio;

#define ZIO_REDO_AFTER_MS 100 /* libzmq's own reconnect interval here */

/* The events the monitor reports: a connection made, and a handshake that
 * failed for good.  libzmq (4.3) does not connect again after a handshake's
 * protocol error or the server's refusal: the session is gone, and the
 * client would wait for the coordinator for ever (a worker of the net
 * tests did, after a ZMTP error at start: about one start in 80 on a
 * loaded machine).  This one connects again.  (A handshake cut by a reset
 * or a timeout, HANDSHAKE_FAILED_NO_DETAIL, libzmq retries itself.) */
#define ZIO_HANDSHAKE_FAILED (ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

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

/* A handshake failed for good (event, with libzmq's detail: a ZMTP error
 * code, or the ZAP status): say so, the first time and every 100th, and
 * make the connection again ZIO_REDO_AFTER_MS later (zio_poll). */
static void
zio_handshake_failed(zio *z, uint16_t event, uint32_t detail)
{
    int auth = event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;

    if (z->handshakes++ % 100 != 0 || sr__conn_quiet()) {
        /* said already */
    } else if (auth) {
        SR_LOG(SR_LOG_WARN, "WORKER-HANDSHAKE",
               "endpoint=%s failures=%d the connection's handshake: refused by the coordinator "
               "(status %u: is this client's public key in the coordinator's --authorized-keys?); "
               "connecting again",
               z->endpoint, z->handshakes, (unsigned)detail);
    } else {
        SR_LOG(SR_LOG_WARN, "WORKER-HANDSHAKE",
               "endpoint=%s failures=%d the connection's handshake: protocol error (ZMTP error "
               "0x%x); connecting again",
               z->endpoint, z->handshakes, (unsigned)detail);
    }
    z->redo_at = sr_clock_now_ms() + ZIO_REDO_AFTER_MS;
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
        if (zmq_msg_size(&ev) >= 6) {
            const uint8_t *e = zmq_msg_data(&ev);
            uint16_t       event = (uint16_t)(e[0] | e[1] << 8);
            uint32_t       detail =
                (uint32_t)e[2] | (uint32_t)e[3] << 8 | (uint32_t)e[4] << 16 | (uint32_t)e[5] << 24;
            if (event == ZMQ_EVENT_CONNECTED) {
                connected |= z->connects++ > 0;
            } else if (event & ZIO_HANDSHAKE_FAILED) {
                zio_handshake_failed(z, event, detail);
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
    int            rc;

    if (z->redo_at != 0) {
        int64_t left = z->redo_at - sr_clock_now_ms();
        if (left <= 0) {
            z->redo_at = 0;
            zmq_disconnect(z->sock, z->endpoint); /* ENOENT when libzmq dropped it already */
            zmq_connect(z->sock, z->endpoint);
        } else if (timeout_ms < 0 || timeout_ms > left) {
            timeout_ms = left;
        }
    }
    rc = zmq_poll(it, z->mon ? 2 : 1, (long)timeout_ms);

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
    free(z->endpoint);
    free(z);
}

/* One of the network options (docs/network.md): 0 means the environment's
 * SYNCREP_<NAME> when set (how a Python program or a launcher sets them),
 * else `def`; -1 means off (where `off_ok`); anything else in [lo, hi] is
 * itself.  SR_EINVAL names the field or the variable otherwise. */
static sr_err
net_opt(const char *name, int given, int def, int lo, int hi, int off_ok, int *out)
{
    char        var[64], *end = NULL;
    const char *from = name, *env;
    size_t      n = snprintf(var, sizeof(var), "SYNCREP_%s", name);

    for (size_t i = 8; i < n && i < sizeof(var); i++) {
        var[i] = (char)(var[i] >= 'a' && var[i] <= 'z' ? var[i] - 'a' + 'A' : var[i]);
    }
    if (given == 0 && (env = getenv(var)) != NULL && *env != '\0') {
        long v = strtol(env, &end, 10);
        if (*end != '\0' || v < -1 || v > hi) {
            return sr_fail(SR_EINVAL, "sr_client_open: %s=\"%s\" is not in %d..%d%s", var, env, lo,
                           hi, off_ok ? " or -1 (off)" : "");
        }
        given = (int)v;
        from = var;
    }
    if (given == 0) {
        *out = def;
    } else if (given == -1 && off_ok) {
        *out = -1;
    } else if (given < lo || given > hi) {
        return sr_fail(SR_EINVAL,
                       "sr_client_open: %s %d is out of range (%d..%d%s, 0 = default %d)", from,
                       given, lo, hi, off_ok ? ", -1 = off" : "", def);
    } else {
        *out = given;
    }
    return SR_OK;
}

/* Heartbeats and TCP keepalive, so that a dead coordinator or a half-open
 * connection (a link gone while the kernel still believes in the
 * connection) is found in seconds: the DEALER drops the connection and
 * makes it again, and the wait loop resends what was in flight (the
 * CONNECTED event).  A connect attempt into a dead link is cut short too,
 * or the kernel's SYN back-off would leave a returning link unused for up
 * to half a minute. */
static sr_err
set_net_opts(void *sock, const sr_client_options *o)
{
    int    ivl, hb_timeout, conn_timeout, idle, intvl, cnt;
    sr_err rc;

    if ((rc = net_opt("heartbeat_ivl_ms", o->heartbeat_ivl_ms, SR__NET_HEARTBEAT_IVL_MS, 10,
                      3600000, 1, &ivl)) != SR_OK ||
        (rc = net_opt("heartbeat_timeout_ms", o->heartbeat_timeout_ms, SR__NET_HEARTBEAT_TIMEOUT_MS,
                      10, 6553500, 0, &hb_timeout)) != SR_OK ||
        (rc = net_opt("connect_timeout_ms", o->connect_timeout_ms, SR__NET_CONNECT_TIMEOUT_MS, 10,
                      3600000, 1, &conn_timeout)) != SR_OK ||
        (rc = net_opt("tcp_keepalive_idle_s", o->tcp_keepalive_idle_s, SR__NET_KEEPALIVE_IDLE_S, 1,
                      86400, 1, &idle)) != SR_OK ||
        (rc = net_opt("tcp_keepalive_intvl_s", o->tcp_keepalive_intvl_s, SR__NET_KEEPALIVE_INTVL_S,
                      1, 3600, 0, &intvl)) != SR_OK ||
        (rc = net_opt("tcp_keepalive_cnt", o->tcp_keepalive_cnt, SR__NET_KEEPALIVE_CNT, 1, 100, 0,
                      &cnt)) != SR_OK) {
        return rc;
    }
    if (ivl > 0) {
        int ttl = hb_timeout - hb_timeout % 100; /* ZeroMQ sends it in tenths of seconds */
        zmq_setsockopt(sock, ZMQ_HEARTBEAT_IVL, &ivl, sizeof(ivl));
        zmq_setsockopt(sock, ZMQ_HEARTBEAT_TIMEOUT, &hb_timeout, sizeof(hb_timeout));
        zmq_setsockopt(sock, ZMQ_HEARTBEAT_TTL, &ttl, sizeof(ttl));
    }
    if (conn_timeout > 0) {
        zmq_setsockopt(sock, ZMQ_CONNECT_TIMEOUT, &conn_timeout, sizeof(conn_timeout));
    }
    if (idle > 0) {
        int one = 1;
        zmq_setsockopt(sock, ZMQ_TCP_KEEPALIVE, &one, sizeof(one));
        zmq_setsockopt(sock, ZMQ_TCP_KEEPALIVE_IDLE, &idle, sizeof(idle));
        zmq_setsockopt(sock, ZMQ_TCP_KEEPALIVE_INTVL, &intvl, sizeof(intvl));
        zmq_setsockopt(sock, ZMQ_TCP_KEEPALIVE_CNT, &cnt, sizeof(cnt));
    }
    return SR_OK;
}

/* A DEALER connected (asynchronously) to opts->endpoint, with CURVE when
 * the options carry keys (checked by the caller), heartbeats and TCP
 * keepalive (set_net_opts).  Errors: SR_ENOMEM, SR_EMSG, SR_EINVAL (keys,
 * network options or endpoint refused); *io untouched. */
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
    if ((rc = set_net_opts(z->sock, opts)) != SR_OK) {
        goto fail;
    }
    if (opts->server_public_key != NULL &&
        (zmq_setsockopt(z->sock, ZMQ_CURVE_SERVERKEY, opts->server_public_key, 40) != 0 ||
         zmq_setsockopt(z->sock, ZMQ_CURVE_PUBLICKEY, opts->public_key, 40) != 0 ||
         zmq_setsockopt(z->sock, ZMQ_CURVE_SECRETKEY, opts->secret_key, 40) != 0)) {
        rc = sr_fail(SR_EINVAL, "CURVE keys: %s", zmq_strerror(errno));
        goto fail;
    }
    snprintf(mon, sizeof(mon), "inproc://syncrep-client-%016llx", (unsigned long long)client_id);
    if ((z->endpoint = strdup(opts->endpoint)) == NULL) {
        rc = sr_fail(SR_ENOMEM, "sr_client_open");
        goto fail;
    }
    if (zmq_socket_monitor(z->sock, mon, ZMQ_EVENT_CONNECTED | ZIO_HANDSHAKE_FAILED) == 0 &&
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
