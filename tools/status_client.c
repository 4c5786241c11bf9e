/* A STATUS client.  See status_client.h. */
#include "tools/status_client.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "core/clock.h"
#include "wire/wire.h"

struct sr_status_client {
    void    *ctx, *sock;
    uint64_t req; /* the last request id sent */
};

/* A 40-character Z85 key, or SR_EINVAL naming `what`. */
static sr_err
check_key(const char *key, const char *what)
{
    uint8_t bin[32];

    if (key == NULL) {
        return sr_fail(SR_EINVAL, "CURVE: the %s is missing (all three keys, or none)", what);
    }
    if (strlen(key) != 40 || zmq_z85_decode(bin, key) == NULL) {
        return sr_fail(SR_EINVAL, "CURVE: the %s is not a 40-character Z85 key", what);
    }
    return SR_OK;
}

sr_err
sr_status_client_open(sr_status_client **out, const char *endpoint)
{
    return sr_status_client_open_curve(out, endpoint, NULL, NULL, NULL);
}

sr_err
sr_status_client_open_curve(sr_status_client **out, const char *endpoint,
                            const char *server_public_key, const char *public_key,
                            const char *secret_key)
{
    sr_status_client *c;
    int               zero = 0;
    sr_err            rc;

    if (out == NULL || endpoint == NULL) {
        return sr_fail(SR_EINVAL, "sr_status_client_open: NULL argument");
    }
    if (server_public_key != NULL || public_key != NULL || secret_key != NULL) {
        if ((rc = check_key(server_public_key, "server (coordinator) public key")) != SR_OK ||
            (rc = check_key(public_key, "client public key")) != SR_OK ||
            (rc = check_key(secret_key, "client secret key")) != SR_OK) {
            return rc;
        }
        if (!zmq_has("curve")) {
            return sr_fail(SR_ENOTSUP, "CURVE: this libzmq has no CURVE support");
        }
    }
    if ((c = calloc(1, sizeof(*c))) == NULL) {
        return sr_fail(SR_ENOMEM, "sr_status_client_open: %zu bytes", sizeof(*c));
    }
    if ((c->ctx = zmq_ctx_new()) == NULL || (c->sock = zmq_socket(c->ctx, ZMQ_DEALER)) == NULL) {
        rc = sr_fail(SR_EMSG, "zmq: %s", zmq_strerror(errno));
        goto fail;
    }
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof(zero));
    if (server_public_key != NULL &&
        (zmq_setsockopt(c->sock, ZMQ_CURVE_SERVERKEY, server_public_key, 40) != 0 ||
         zmq_setsockopt(c->sock, ZMQ_CURVE_PUBLICKEY, public_key, 40) != 0 ||
         zmq_setsockopt(c->sock, ZMQ_CURVE_SECRETKEY, secret_key, 40) != 0)) {
        rc = sr_fail(SR_EINVAL, "CURVE keys: %s", zmq_strerror(errno));
        goto fail;
    }
    if (zmq_connect(c->sock, endpoint) != 0) {
        rc = sr_fail(SR_EMSG, "connect %s: %s", endpoint, zmq_strerror(errno));
        goto fail;
    }
    *out = c;
    return SR_OK;
fail:
    sr_status_client_close(c);
    return rc;
}

/* Receive the rest of a message and drop it. */
static void
drop_rest(void *sock)
{
    int    more = 1;
    size_t sz = sizeof(more);
    for (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz); more;
         zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz)) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        zmq_msg_recv(&m, sock, 0);
        zmq_msg_close(&m);
    }
}

sr_err
sr_status_client_ask(sr_status_client *c, int timeout_ms, int *status, char **text, size_t *len)
{
    sr_wire_header h;
    uint8_t        hb[SR_WIRE_HEADER_BYTES];
    int64_t        deadline = sr_clock_now_ms() + timeout_ms;

    if (c == NULL || status == NULL || text == NULL || len == NULL) {
        return sr_fail(SR_EINVAL, "sr_status_client_ask: NULL argument");
    }
    memset(&h, 0, sizeof(h));
    h.type = SR_MSG_STATUS;
    h.request_id = ++c->req;
    h.task_index = -1;
    sr_wire_header_encode(&h, hb);
    if (zmq_send(c->sock, hb, sizeof(hb), ZMQ_DONTWAIT) < 0) {
        return sr_fail(SR_EMSG, "send STATUS: %s", zmq_strerror(errno));
    }
    for (;;) {
        int64_t        left = deadline - sr_clock_now_ms();
        zmq_pollitem_t it = {c->sock, 0, ZMQ_POLLIN, 0};
        zmq_msg_t      m;
        int            ok;

        if (left < 0 || zmq_poll(&it, 1, (long)left) <= 0) {
            return sr_fail(SR_ETIMEDOUT, "no answer within %d ms", timeout_ms);
        }
        zmq_msg_init(&m);
        zmq_msg_recv(&m, c->sock, 0);
        ok = sr_wire_header_decode(zmq_msg_data(&m), zmq_msg_size(&m), &h) == SR_OK &&
             zmq_msg_more(&m);
        zmq_msg_close(&m);
        if (!ok) {
            drop_rest(c->sock);
            return sr_fail(SR_EPROTO, "malformed reply");
        }
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, c->sock, 0) < 0) {
            zmq_msg_close(&m);
            return sr_fail(SR_EPROTO, "malformed reply");
        }
        drop_rest(c->sock);
        if (h.request_id != c->req) {
            zmq_msg_close(&m);
            continue; /* a late answer to an earlier request */
        }
        size_t n = zmq_msg_size(&m);
        char  *t = malloc(n + 1);
        if (t == NULL) {
            zmq_msg_close(&m);
            return sr_fail(SR_ENOMEM, "STATUS reply: %zu bytes", n + 1);
        }
        memcpy(t, zmq_msg_data(&m), n);
        t[n] = '\0';
        zmq_msg_close(&m);
        *status = h.status;
        *text = t;
        *len = n;
        return SR_OK;
    }
}

void
sr_status_client_close(sr_status_client *c)
{
    if (c == NULL) {
        return;
    }
    if (c->sock != NULL) {
        zmq_close(c->sock);
    }
    if (c->ctx != NULL) {
        while (zmq_ctx_term(c->ctx) != 0 && errno == EINTR) {
        }
    }
    free(c);
}
