/*
 * Declarations in parts: an initial value bigger than the coordinator's
 * message limit goes in parts, raw parts in order from byte 0 (resends
 * harmless, another declaration's part starts that one), and the limit
 * after a restart.  docs/protocol.md, "DECLARE (2)".
 */
#include "sr_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "raw_peer.h"
#include "syncrep/syncrep.h"
#include "wire/wire.h"

/* A raw DECLARE part of y (float32[n]) from task 0: bytes [off, off + len). */
static void
raw_declare_part(raw_peer *r, const char *name, int64_t n, const float *v, uint64_t off, size_t len)
{
    sr_wire_vardesc  vd;
    sr_wire_pushdesc p;
    uint8_t          vb[SR_WIRE_BODY_MAX], pb[SR_WIRE_BODY_MAX];

    memset(&vd, 0, sizeof(vd));
    snprintf(vd.name, sizeof(vd.name), "%s", name);
    vd.dtype = SR_FLOAT32;
    vd.flags = SR_WIRE_DECLARE_PART;
    vd.ndim = 1;
    vd.shape[0] = n;
    memset(&p, 0, sizeof(p));
    snprintf(p.name, sizeof(p.name), "%s", name);
    p.dtype = SR_FLOAT32;
    p.count = len;
    p.offset = off;
    const void *body[3] = {vb, pb, (const uint8_t *)v + off};
    size_t      blen[3] = {sr_wire_vardesc_encode(&vd, vb, sizeof(vb)),
                           sr_wire_pushdesc_encode(&p, pb, sizeof(pb)), len};
    raw_send(r, SR_MSG_DECLARE, 0, 0, 0, body, blen, 3);
}

/* An initial value bigger than the coordinator's message limit goes in
 * parts (the limit comes in HELLO); any other request that big is refused
 * by the client at once, naming the option, instead of being dropped by
 * ZeroMQ (which left the call to time out).  Raw parts: in order from byte
 * 0, resends harmless, a part of another declaration at 0 starts that one,
 * and a part that does not fit is refused. */
static void
test_protocol_declare_in_parts(void **state)
{
    sr_harness    h;
    raw_peer      r;
    const int64_t n = 3 << 18; /* float32: 3 MiB, the limit 1 MiB */
    const int64_t shape[1] = {n};
    float        *v0 = malloc((size_t)n * sizeof(float)), *v = malloc((size_t)n * sizeof(float));
    float         y0[2048], y[1024]; /* y is float32[1024]; y0 has room for a part past it */
    char          out[8192];
    (void)state;

    assert_non_null(v0);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) {
        v0[i] = (float)(i % 9973) - 0.5f;
    }
    for (int i = 0; i < 2048; i++) {
        y0[i] = (float)i;
    }
    sr_harness_init(&h, "declparts");
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0",
                     "--max-message-mib", "1", "--partition-kib", "0", "--allow-new-variables",
                     NULL);
    sr_client *chief = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare(chief, "big", SR_FLOAT32, 1, shape, v0));
    assert_sr_ok(sr_client_ready(chief));
    assert_int_equal(sr_harness_log_count(&h, "variable=\"big\""), 1);
    assert_int_equal(sr_harness_log_count(&h, "(in parts)"), 1);
    memset(v, 0, (size_t)n * sizeof(float));
    assert_sr_ok(sr_client_pull(chief, "big", v, (size_t)n * sizeof(float)));
    assert_memory_equal(v, v0, (size_t)n * sizeof(float));

    /* Partitions off: a 3 MiB push is one message, over the limit. */
    assert_sr_err(sr_client_push(chief, "big", v0, (size_t)n * sizeof(float)), SR_EINVAL);
    assert_non_null(strstr(sr_client_error(chief), "--max-message-mib"));
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "\"global_step\":0"));

    /* Raw parts of y (4 KiB in two halves). */
    raw_open(&r, h.endpoint, 0x5151);
    raw_hello(&r, 0);
    raw_declare_part(&r, "y", 1024, y0, 2048, 2048); /* not from byte 0 */
    raw_expect_error(&r, SR_EINVAL);
    assert_non_null(strstr((const char *)r.body[0], "in order from byte 0"));
    raw_declare_part(&r, "y", 1024, y0, 0, 2048);
    raw_expect_ok(&r);
    raw_declare_part(&r, "y", 1024, y0, 0, 2048); /* a resend */
    raw_expect_ok(&r);
    raw_declare_part(&r, "y", 1024, y0, 2048, 4096); /* past the end */
    raw_expect_error(&r, SR_EINVAL);
    raw_declare_part(&r, "z", 1024, y0, 0, 2048); /* z starts: y's parts are dropped */
    raw_expect_ok(&r);
    raw_declare_part(&r, "y", 1024, y0, 2048, 2048);
    raw_expect_error(&r, SR_EINVAL);
    assert_sr_err(sr_client_pull(chief, "y", y, sizeof(y)), SR_ENOENT);
    raw_declare_part(&r, "y", 1024, y0, 0, 2048);
    raw_expect_ok(&r);
    raw_declare_part(&r, "y", 1024, y0, 2048, 2048); /* the last: y exists */
    raw_expect_ok(&r);
    raw_declare_part(&r, "y", 1024, y0, 2048, 2048); /* a resend of it */
    raw_expect_ok(&r);
    /* A part whose descriptor names another variable: malformed. */
    {
        sr_wire_vardesc  vd;
        sr_wire_pushdesc p;
        uint8_t          vb[SR_WIRE_BODY_MAX], pb[SR_WIRE_BODY_MAX];
        memset(&vd, 0, sizeof(vd));
        memset(&p, 0, sizeof(p));
        snprintf(vd.name, sizeof(vd.name), "q");
        snprintf(p.name, sizeof(p.name), "other");
        vd.dtype = p.dtype = SR_FLOAT32;
        vd.flags = SR_WIRE_DECLARE_PART;
        p.count = 4;
        const void *body[3] = {vb, pb, y0};
        size_t      blen[3] = {sr_wire_vardesc_encode(&vd, vb, sizeof(vb)),
                               sr_wire_pushdesc_encode(&p, pb, sizeof(pb)), 4};
        raw_send(&r, SR_MSG_DECLARE, 0, 0, 0, body, blen, 3);
        raw_expect_error(&r, SR_EPROTO);
    }
    raw_close(&r);
    assert_sr_ok(sr_client_pull(chief, "y", y, sizeof(y)));
    assert_memory_equal(y, y0, sizeof(y));
    assert_sr_err(sr_client_pull(chief, "z", y, sizeof(y)), SR_ENOENT);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);

    /* Restarted on the store: the limit grows to the biggest variable + 1
     * MiB, and the value is the declared one. */
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0",
                     "--max-message-mib", "1", "--partition-kib", "0", "--allow-new-variables",
                     NULL);
    chief = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare(chief, "big", SR_FLOAT32, 1, shape, v0));
    assert_sr_ok(sr_client_ready(chief));
    memset(v, 0, (size_t)n * sizeof(float));
    assert_sr_ok(sr_client_pull(chief, "big", v, (size_t)n * sizeof(float)));
    assert_memory_equal(v, v0, (size_t)n * sizeof(float));
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
    free(v0);
    free(v);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol_declare_in_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
