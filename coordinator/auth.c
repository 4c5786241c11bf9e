/*
 * CURVE authentication for the coordinator's socket: the server secret key,
 * a ZAP handler (ZeroMQ's RFC 27) that admits only the client public keys
 * listed in the authorized-keys file, and a socket monitor that reports
 * failed handshakes (plaintext clients, wrong server keys).  Refusals are
 * logged once per peer and key per minute, with a count of the rest.
 * Both sockets are polled by the server loop: no extra thread.
 * docs/security.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "coordinator/auth.h"
#include "core/clock.h"
#include "core/log.h"

#define MAX_KEYS      4096
#define LOG_SLOTS     64
#define LOG_PERIOD_MS 60000

struct sr_auth {
    void   *zap;                /* REP on inproc://zeromq.zap.01 */
    void   *mon;                /* PAIR receiving the ROUTER's monitor events */
    uint8_t keys[MAX_KEYS][32]; /* authorized client public keys, binary */
    size_t  nkeys;
    struct {
        uint64_t hash;
        int64_t  last_ms;
        uint64_t suppressed;
    } seen[LOG_SLOTS]; /* rate limit of refusal lines */
    uint64_t refused;
    /* issue 26: elastic.  The keys that may use CTL, binary. */
    uint8_t (*admin)[32];
    size_t nadmin;
};

/* Read the first non-comment line of a key file: 40 Z85 characters. */
static sr_err
read_key_line(FILE *f, const char *path, char out[41], int *found)
{
    char line[512];

    *found = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        char  *p = line;
        size_t n;
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        n = strcspn(p, " \t\r\n");
        if (n == 0 || *p == '#') {
            continue;
        }
        uint8_t bin[32];
        if (n != 40) {
            return sr_fail(SR_EINVAL, "%s: key of %zu characters, expected 40 (Z85)", path, n);
        }
        memcpy(out, p, 40);
        out[40] = '\0';
        if (zmq_z85_decode(bin, out) == NULL) {
            return sr_fail(SR_EINVAL, "%s: '%.40s' is not a Z85 key", path, out);
        }
        *found = 1;
        return SR_OK;
    }
    return SR_OK;
}

static sr_err
load_authorized(sr_auth *a, const char *path)
{
    FILE  *f = fopen(path, "r");
    char   z85[41];
    int    found;
    sr_err rc = SR_OK;

    if (f == NULL) {
        return sr_fail(SR_ENOENT, "authorized keys %s: %s", path, strerror(errno));
    }
    while ((rc = read_key_line(f, path, z85, &found)) == SR_OK && found) {
        if (a->nkeys == MAX_KEYS) {
            rc = sr_fail(SR_EINVAL, "%s: more than %d keys", path, MAX_KEYS);
            break;
        }
        zmq_z85_decode(a->keys[a->nkeys++], z85);
    }
    fclose(f);
    if (rc == SR_OK && a->nkeys == 0) {
        rc = sr_fail(SR_EINVAL, "%s: no keys (every client would be refused)", path);
    }
    return rc;
}

sr_err
sr__auth_read_key_file(const char *path, char out[41])
{
    FILE  *f = fopen(path, "r");
    int    found;
    sr_err rc;

    if (f == NULL) {
        return sr_fail(SR_ENOENT, "key file %s: %s", path, strerror(errno));
    }
    rc = read_key_line(f, path, out, &found);
    fclose(f);
    if (rc == SR_OK && !found) {
        rc = sr_fail(SR_EINVAL, "key file %s: no key", path);
    }
    return rc;
}

static uint64_t
hash_bytes(const void *p, size_t n, uint64_t h)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * 0x100000001b3ULL;
    }
    return h;
}

/* Log a refusal unless this (what, who) was logged in the last minute. */
static void
refusal(sr_auth *a, const char *what, const char *who, const char *key)
{
    uint64_t h =
        hash_bytes(who, strlen(who), hash_bytes(what, strlen(what), 0xcbf29ce484222325ULL));
    int64_t now = sr_clock_now_ms();
    int     slot = (int)(h % LOG_SLOTS);

    h = hash_bytes(key, strlen(key), h);
    a->refused++;
    if (a->seen[slot].hash == h && now - a->seen[slot].last_ms < LOG_PERIOD_MS) {
        a->seen[slot].suppressed++;
        return;
    }
    SR_LOG(SR_LOG_WARN, "COORD-AUTH-REFUSED",
           "reason=\"%s\" peer=%s key=%s total_refused=%" PRIu64 " (repeats of this line within "
           "a minute are counted, not logged; %" PRIu64 " were)",
           what, who, *key ? key : "-", a->refused,
           a->seen[slot].hash == h ? a->seen[slot].suppressed : 0);
    a->seen[slot].hash = h;
    a->seen[slot].last_ms = now;
    a->seen[slot].suppressed = 0;
}

sr_err
sr__auth_open(void *ctx, void *router, const char *secret_key_file,
              const char *authorized_keys_file, sr_auth **out)
{
    sr_auth *a;
    char     secret[41], pub[41];
    int      one = 1;
    sr_err   rc;

    if (!zmq_has("curve")) {
        return sr_fail(SR_ENOTSUP, "this libzmq was built without CURVE (libsodium)");
    }
    if ((a = calloc(1, sizeof(*a))) == NULL) {
        return sr_fail(SR_ENOMEM, "auth");
    }
    if ((rc = sr__auth_read_key_file(secret_key_file, secret)) != SR_OK ||
        (rc = load_authorized(a, authorized_keys_file)) != SR_OK) {
        goto fail;
    }
    if (zmq_curve_public(pub, secret) != 0) {
        rc = sr_fail(SR_EINVAL, "%s: cannot derive the public key", secret_key_file);
        goto fail;
    }
    /* The ZAP handler must exist before the first handshake. */
    if ((a->zap = zmq_socket(ctx, ZMQ_REP)) == NULL ||
        zmq_bind(a->zap, "inproc://zeromq.zap.01") != 0) {
        rc = sr_fail(SR_EMSG, "ZAP handler: %s", zmq_strerror(errno));
        goto fail;
    }
    if (zmq_setsockopt(router, ZMQ_CURVE_SERVER, &one, sizeof(one)) != 0 ||
        zmq_setsockopt(router, ZMQ_CURVE_SECRETKEY, secret, 40) != 0 ||
        zmq_setsockopt(router, ZMQ_ZAP_DOMAIN, "syncrep", 7) != 0) {
        rc = sr_fail(SR_EMSG, "CURVE options: %s", zmq_strerror(errno));
        goto fail;
    }
    if (zmq_socket_monitor(router, "inproc://syncrep.monitor",
                           ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0 ||
        (a->mon = zmq_socket(ctx, ZMQ_PAIR)) == NULL ||
        zmq_connect(a->mon, "inproc://syncrep.monitor") != 0) {
        rc = sr_fail(SR_EMSG, "socket monitor: %s", zmq_strerror(errno));
        goto fail;
    }
    memset(secret, 0, sizeof(secret));
    SR_LOG(SR_LOG_NOTICE, "COORD-AUTH", "CURVE on: server key %s, %zu authorized client keys", pub,
           a->nkeys);
    *out = a;
    return SR_OK;
fail:
    memset(secret, 0, sizeof(secret));
    sr__auth_close(a);
    return rc;
}

void
sr__auth_close(sr_auth *a)
{
    if (a == NULL) {
        return;
    }
    if (a->zap != NULL) {
        zmq_close(a->zap);
    }
    if (a->mon != NULL) {
        zmq_close(a->mon);
    }
    free(a->admin); /* issue 26 */
    free(a);
}

int
sr__auth_pollitems(sr_auth *a, zmq_pollitem_t *items)
{
    if (a == NULL) {
        return 0;
    }
    items[0] = (zmq_pollitem_t){a->zap, 0, ZMQ_POLLIN, 0};
    items[1] = (zmq_pollitem_t){a->mon, 0, ZMQ_POLLIN, 0};
    return 2;
}

/* Receive a multipart message into up to n frames; returns the count, or
 * -1 when nothing was waiting. */
static int
recv_parts(void *s, zmq_msg_t *m, int n)
{
    int k = 0, more = 1;
    while (more) {
        zmq_msg_t tmp;
        zmq_msg_init(&tmp);
        if (zmq_msg_recv(&tmp, s, k == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(&tmp);
            return k == 0 ? -1 : k;
        }
        more = zmq_msg_more(&tmp);
        if (k < n) {
            m[k++] = tmp;
        } else {
            zmq_msg_close(&tmp);
        }
    }
    return k;
}

static void
close_parts(zmq_msg_t *m, int n)
{
    for (int i = 0; i < n; i++) {
        zmq_msg_close(&m[i]);
    }
}

static int
key_allowed(const sr_auth *a, const uint8_t *key)
{
    for (size_t i = 0; i < a->nkeys; i++) {
        if (memcmp(a->keys[i], key, 32) == 0) {
            return 1;
        }
    }
    return 0;
}

/* One ZAP request: version, request id, domain, address, identity,
 * mechanism, credentials... -> version, request id, status code, status
 * text, user id, metadata. */
static void
zap_one(sr_auth *a)
{
    zmq_msg_t   m[8];
    int         n = recv_parts(a->zap, m, 8);
    const char *code = "400", *text = "no access";
    char        who[128] = "?", z85[41] = "";

    if (n < 0) {
        return;
    }
    if (n >= 7 && zmq_msg_size(&m[5]) == 5 && memcmp(zmq_msg_data(&m[5]), "CURVE", 5) == 0 &&
        zmq_msg_size(&m[6]) == 32) {
        const uint8_t *key = zmq_msg_data(&m[6]);
        zmq_z85_encode(z85, key, 32);
        snprintf(who, sizeof(who), "%.*s", (int)zmq_msg_size(&m[3]),
                 (const char *)zmq_msg_data(&m[3]));
        if (key_allowed(a, key)) {
            code = "200";
            text = "OK";
        } else {
            refusal(a, "client key not in the authorized keys", who, z85);
        }
    } else {
        refusal(a, "not a CURVE handshake", who, "");
    }
    const char *reply[6] = {"1.0", NULL, code, text, "", ""};
    for (int i = 0; i < 6; i++) {
        int flags = i < 5 ? ZMQ_SNDMORE : 0;
        if (i == 1) {
            /* echo the request id */
            zmq_send(a->zap, n > 1 ? zmq_msg_data(&m[1]) : "", n > 1 ? zmq_msg_size(&m[1]) : 0,
                     flags);
        } else if (i == 4 && code[0] == '2') {
            zmq_send(a->zap, z85, 40, flags); /* user id: the client's public key */
        } else {
            zmq_send(a->zap, reply[i], strlen(reply[i]), flags);
        }
    }
    close_parts(m, n);
}

static void
monitor_one(sr_auth *a)
{
    zmq_msg_t m[2];
    int       n = recv_parts(a->mon, m, 2);
    char      who[256] = "?";

    if (n < 0) {
        return;
    }
    if (n == 2 && zmq_msg_size(&m[0]) >= 6) {
        const uint8_t *e = zmq_msg_data(&m[0]);
        uint16_t       event = (uint16_t)(e[0] | e[1] << 8);
        snprintf(who, sizeof(who), "%.*s", (int)zmq_msg_size(&m[1]),
                 (const char *)zmq_msg_data(&m[1]));
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
            refusal(a,
                    "handshake failed: protocol error (a plaintext client or a wrong server key)",
                    who, "");
        } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            refusal(a, "handshake failed (a plaintext client or a wrong server key)", who, "");
        }
        /* HANDSHAKE_FAILED_AUTH follows a ZAP refusal, already logged. */
    }
    close_parts(m, n);
}

void
sr__auth_handle(sr_auth *a)
{
    for (int i = 0; a != NULL && i < 64; i++) {
        zmq_pollitem_t it[2];
        sr__auth_pollitems(a, it);
        if (zmq_poll(it, 2, 0) <= 0) {
            return;
        }
        if (it[0].revents & ZMQ_POLLIN) {
            zap_one(a);
        }
        if (it[1].revents & ZMQ_POLLIN) {
            monitor_one(a);
        }
    }
}

/* ---- issue 26: elastic ------------------------------------------------- */

sr_err
sr__auth_load_admin_keys(sr_auth *a, const char *path)
{
    FILE  *f = fopen(path, "r");
    char   z85[41];
    int    found;
    sr_err rc = SR_OK;

    if (f == NULL) {
        return sr_fail(SR_ENOENT, "admin keys %s: %s", path, strerror(errno));
    }
    free(a->admin);
    a->nadmin = 0;
    if ((a->admin = calloc(MAX_KEYS, sizeof(*a->admin))) == NULL) {
        fclose(f);
        return sr_fail(SR_ENOMEM, "admin keys %s", path);
    }
    while ((rc = read_key_line(f, path, z85, &found)) == SR_OK && found) {
        if (a->nadmin == MAX_KEYS) {
            rc = sr_fail(SR_EINVAL, "%s: more than %d keys", path, MAX_KEYS);
            break;
        }
        zmq_z85_decode(a->admin[a->nadmin++], z85);
    }
    fclose(f);
    if (rc == SR_OK && a->nadmin == 0) {
        rc = sr_fail(SR_EINVAL, "%s: no keys (nobody could use ctl)", path);
    }
    return rc;
}

int
sr__auth_is_admin(const sr_auth *a, const char *z85)
{
    uint8_t key[32];

    if (a == NULL || z85 == NULL || strlen(z85) != 40 || zmq_z85_decode(key, z85) == NULL) {
        return 0;
    }
    for (size_t i = 0; i < a->nadmin; i++) {
        if (memcmp(a->admin[i], key, 32) == 0) {
            return 1;
        }
    }
    return 0;
}
