/*
 * wire/wire.c: every body and the header round-trip byte for byte with edge
 * values; every truncation, a trailing byte and each bad field is SR_EPROTO;
 * a failed decode leaves *out untouched; encoders refuse a short cap and the
 * fields their decoder would reject.  Protocol: docs/protocol.md.
 */
#include "sr_test.h"

#include <string.h>

#include "syncrep/syncrep.h"
#include "wire/wire.h"

/* A decoder with its output hidden, so one helper can feed any of them. */
typedef sr_err (*decode_fn)(const uint8_t *buf, size_t len);

static sr_err
dec_header(const uint8_t *buf, size_t len)
{
    sr_wire_header o;
    return sr_wire_header_decode(buf, len, &o);
}

static sr_err
dec_name(const uint8_t *buf, size_t len)
{
    sr_wire_name o;
    return sr_wire_name_decode(buf, len, &o);
}

static sr_err
dec_vardesc(const uint8_t *buf, size_t len)
{
    sr_wire_vardesc o;
    return sr_wire_vardesc_decode(buf, len, &o);
}

static sr_err
dec_pushdesc(const uint8_t *buf, size_t len)
{
    sr_wire_pushdesc o;
    return sr_wire_pushdesc_decode(buf, len, &o);
}

static sr_err
dec_hello_rep(const uint8_t *buf, size_t len)
{
    sr_wire_hello_rep o;
    return sr_wire_hello_rep_decode(buf, len, &o);
}

static sr_err
dec_ready_req(const uint8_t *buf, size_t len)
{
    sr_wire_ready_req o;
    return sr_wire_ready_req_decode(buf, len, &o);
}

static sr_err
dec_ping_rep(const uint8_t *buf, size_t len)
{
    sr_wire_ping_rep o;
    return sr_wire_ping_rep_decode(buf, len, &o);
}

static sr_err
dec_push_rep(const uint8_t *buf, size_t len)
{
    sr_wire_push_rep o;
    return sr_wire_push_rep_decode(buf, len, &o);
}

/* Every prefix buf[0..n) with n < len is refused with SR_EPROTO.  Each prefix
 * is copied into its own exactly-sized heap block so that ASan catches a read
 * past it; the empty prefix is also tried as (NULL, 0). */
static void
assert_every_truncation_eproto(const uint8_t *buf, size_t len, decode_fn dec)
{
    assert_sr_err(dec(NULL, 0), SR_EPROTO);
    for (size_t n = 0; n < len; n++) {
        uint8_t *p = test_malloc(n > 0 ? n : 1);
        memcpy(p, buf, n);
        if (dec(p, n) != SR_EPROTO) {
            print_error("prefix of %zu of %zu bytes was not refused\n", n, len);
        }
        assert_sr_err(dec(p, n), SR_EPROTO);
        test_free(p);
    }
}

/* buf plus one byte (of any value) is refused with SR_EPROTO. */
static void
assert_trailing_byte_eproto(const uint8_t *buf, size_t len, decode_fn dec)
{
    uint8_t *p = test_malloc(len + 1);
    memcpy(p, buf, len);
    p[len] = 0;
    assert_sr_err(dec(p, len + 1), SR_EPROTO);
    p[len] = 0xff;
    assert_sr_err(dec(p, len + 1), SR_EPROTO);
    test_free(p);
}

static void
assert_detail_has(const char *needle)
{
    if (strstr(sr_errdetail(), needle) == NULL) {
        print_error("detail \"%s\" does not mention \"%s\"\n", sr_errdetail(), needle);
        fail();
    }
}

/* A name of n bytes: 'a', 'b', ... repeating. */
static void
make_name(char *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[i] = (char)('a' + i % 26);
    }
    dst[n] = '\0';
}

static sr_wire_header
edge_header(void)
{
    sr_wire_header h;
    memset(&h, 0, sizeof(h));
    h.type = SR_MSG_PUSH | SR_WIRE_REPLY;
    h.flags = 0xffff;
    h.request_id = UINT64_MAX;
    h.incarnation = 0x0102030405060708u;
    h.client_id = 0x8000000000000001u;
    h.task_index = INT32_MIN;
    h.status = SR_ENONFINITE;
    h.local_step = INT64_MIN;
    h.seq = UINT64_MAX - 1;
    return h;
}

static sr_wire_vardesc
sample_vardesc(int ndim)
{
    sr_wire_vardesc v;
    memset(&v, 0, sizeof(v));
    make_name(v.name, 5);
    v.dtype = SR_FLOAT32;
    v.flags = SR_DECLARE_NOT_TRAINABLE;
    v.ndim = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) {
        v.shape[i] = i + 2;
    }
    return v;
}

static sr_wire_pushdesc
sample_pushdesc(void)
{
    sr_wire_pushdesc p;
    memset(&p, 0, sizeof(p));
    make_name(p.name, 3);
    p.dtype = SR_FLOAT64;
    p.count = 48;
    p.offset = 4096;
    return p;
}

static sr_wire_hello_rep
sample_hello_rep(void)
{
    sr_wire_hello_rep r;
    memset(&r, 0, sizeof(r));
    r.global_step = 17;
    r.model_ready = 1;
    r.replicas_to_aggregate = 2;
    r.total_replicas = 3;
    r.max_message_bytes = 1u << 30;
    r.partition_bytes = 4u << 20;
    return r;
}

/* ---- header ---------------------------------------------------------- */

static void
test_wire_header_edge_values_roundtrip_identical(void **state)
{
    uint8_t        buf[SR_WIRE_HEADER_BYTES], again[SR_WIRE_HEADER_BYTES];
    sr_wire_header h = edge_header(), d;
    (void)state;

    for (int step = 0; step < 4; step++) {
        const int64_t steps[4] = {INT64_MIN, -1, 0, INT64_MAX};
        h.local_step = steps[step];
        h.task_index = step % 2 ? INT32_MAX : INT32_MIN;
        h.type = (uint8_t)(step % 2 ? SR_MSG_BYE : SR_MSG_HELLO | SR_WIRE_REPLY);
        sr_wire_header_encode(&h, buf);
        assert_sr_ok(sr_wire_header_decode(buf, sizeof(buf), &d));
        assert_int_equal(d.type, h.type);
        assert_int_equal(d.flags, h.flags);
        assert_true(d.request_id == h.request_id);
        assert_true(d.incarnation == h.incarnation);
        assert_true(d.client_id == h.client_id);
        assert_int_equal(d.task_index, h.task_index);
        assert_int_equal(d.status, h.status);
        assert_true(d.local_step == h.local_step);
        assert_true(d.seq == h.seq);
        sr_wire_header_encode(&d, again);
        assert_memory_equal(buf, again, sizeof(buf));
    }
}

static void
test_wire_header_layout_documented_offsets_match(void **state)
{
    uint8_t        buf[SR_WIRE_HEADER_BYTES];
    sr_wire_header h;
    (void)state;

    memset(&h, 0, sizeof(h));
    h.type = SR_MSG_TOKEN;
    h.flags = 0x0201;
    h.request_id = 0x1112131415161718u;
    h.incarnation = 0x2122232425262728u;
    h.client_id = 0x3132333435363738u;
    h.task_index = 0x41424344;
    h.status = -4;
    h.local_step = 0x5152535455565758;
    h.seq = 0x6162636465666768u;
    sr_wire_header_encode(&h, buf);

    const uint8_t want[SR_WIRE_HEADER_BYTES] = {
        'S',  'R',  'P',  '1',  2,    7,    0x01, 0x02, /* 0  */
        0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, /* 8  */
        0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21, /* 16 */
        0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31, /* 24 */
        0x44, 0x43, 0x42, 0x41, 0xfc, 0xff, 0xff, 0xff, /* 32 */
        0x58, 0x57, 0x56, 0x55, 0x54, 0x53, 0x52, 0x51, /* 40 */
        0x68, 0x67, 0x66, 0x65, 0x64, 0x63, 0x62, 0x61, /* 48 */
    };
    assert_memory_equal(buf, want, sizeof(want));
}

static void
test_wire_header_every_truncation_is_eproto(void **state)
{
    uint8_t        buf[SR_WIRE_HEADER_BYTES];
    sr_wire_header h = edge_header();
    (void)state;

    sr_wire_header_encode(&h, buf);
    assert_every_truncation_eproto(buf, sizeof(buf), dec_header);
    assert_sr_err(dec_header(buf, 3), SR_EPROTO);
    assert_detail_has("length 3 != 56");
}

static void
test_wire_header_trailing_byte_is_eproto(void **state)
{
    uint8_t        buf[SR_WIRE_HEADER_BYTES];
    sr_wire_header h = edge_header();
    (void)state;

    sr_wire_header_encode(&h, buf);
    assert_trailing_byte_eproto(buf, sizeof(buf), dec_header);
}

static void
test_wire_header_bad_magic_is_eproto(void **state)
{
    uint8_t        buf[SR_WIRE_HEADER_BYTES];
    sr_wire_header h = edge_header();
    (void)state;

    for (int i = 0; i < 4; i++) {
        sr_wire_header_encode(&h, buf);
        buf[i] ^= 0x20;
        assert_sr_err(dec_header(buf, sizeof(buf)), SR_EPROTO);
        assert_detail_has("magic");
    }
    sr_wire_header_encode(&h, buf);
    memcpy(buf, "1PRS", 4); /* big-endian writer */
    assert_sr_err(dec_header(buf, sizeof(buf)), SR_EPROTO);
    assert_detail_has("header: magic 0x53525031 != 0x31505253");
}

static void
test_wire_header_other_version_is_eproto(void **state)
{
    uint8_t        buf[SR_WIRE_HEADER_BYTES];
    sr_wire_header h = edge_header();
    (void)state;

    const uint8_t versions[] = {0, 1, 3, 0xff}; /* 1: before partitions */
    for (size_t i = 0; i < sizeof(versions); i++) {
        sr_wire_header_encode(&h, buf);
        buf[4] = versions[i];
        assert_sr_err(dec_header(buf, sizeof(buf)), SR_EPROTO);
        assert_detail_has("version");
    }
}

static void
test_wire_header_unknown_type_is_eproto(void **state)
{
    uint8_t        buf[SR_WIRE_HEADER_BYTES];
    sr_wire_header h = edge_header(), d;
    (void)state;

    const uint8_t bad[] = {
        0, SR_MSG_CURSOR + 1, 0x7f, SR_WIRE_REPLY, SR_WIRE_REPLY | (SR_MSG_CURSOR + 1), 0xff};
    for (size_t i = 0; i < sizeof(bad); i++) {
        h.type = bad[i];
        sr_wire_header_encode(&h, buf);
        memset(&d, 0xab, sizeof(d));
        assert_sr_err(sr_wire_header_decode(buf, sizeof(buf), &d), SR_EPROTO);
        assert_detail_has("type");
    }
}

static void
test_wire_header_every_known_type_decodes_ok(void **state)
{
    uint8_t        buf[SR_WIRE_HEADER_BYTES];
    sr_wire_header h = edge_header(), d;
    (void)state;

    for (unsigned t = SR_MSG_HELLO; t <= SR_MSG_BYE; t++) {
        for (unsigned reply = 0; reply <= SR_WIRE_REPLY; reply += SR_WIRE_REPLY) {
            h.type = (uint8_t)(t | reply);
            sr_wire_header_encode(&h, buf);
            assert_sr_ok(sr_wire_header_decode(buf, sizeof(buf), &d));
            assert_int_equal(d.type, t | reply);
        }
    }
}

static void
test_wire_header_failed_decode_leaves_out_untouched(void **state)
{
    uint8_t        buf[SR_WIRE_HEADER_BYTES];
    sr_wire_header h = edge_header(), d, before;
    (void)state;

    sr_wire_header_encode(&h, buf);
    buf[4] = 9;
    memset(&d, 0xab, sizeof(d));
    before = d;
    assert_sr_err(sr_wire_header_decode(buf, sizeof(buf), &d), SR_EPROTO);
    assert_memory_equal(&d, &before, sizeof(d));
    assert_sr_err(sr_wire_header_decode(buf, sizeof(buf) - 1, &d), SR_EPROTO);
    assert_memory_equal(&d, &before, sizeof(d));
}

static void
test_wire_header_null_out_is_einval(void **state)
{
    uint8_t        buf[SR_WIRE_HEADER_BYTES];
    sr_wire_header h = edge_header(), d;
    (void)state;

    sr_wire_header_encode(&h, buf);
    assert_sr_err(sr_wire_header_decode(buf, sizeof(buf), NULL), SR_EINVAL);
    assert_sr_err(sr_wire_header_decode(NULL, sizeof(buf), &d), SR_EINVAL);
}

/* ---- name ------------------------------------------------------------ */

static void
test_wire_name_length_1_and_255_roundtrip_identical(void **state)
{
    char         name[SR_WIRE_MAX_NAME + 1];
    uint8_t      buf[2 + SR_WIRE_MAX_NAME], again[2 + SR_WIRE_MAX_NAME];
    sr_wire_name d;
    (void)state;

    const size_t lens[] = {1, 2, 200, SR_WIRE_MAX_NAME};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        make_name(name, lens[i]);
        size_t n = sr_wire_name_encode(name, buf, sizeof(buf));
        assert_int_equal(n, 2 + lens[i]);
        assert_int_equal(buf[0], lens[i] & 0xff);
        assert_int_equal(buf[1], lens[i] >> 8);
        assert_sr_ok(sr_wire_name_decode(buf, n, &d));
        assert_string_equal(d.name, name);
        assert_int_equal(sr_wire_name_encode(d.name, again, sizeof(again)), n);
        assert_memory_equal(buf, again, n);
    }
    /* Any byte but NUL is allowed: names are opaque UTF-8 to the codec. */
    const char odd[] = "layer/0:w\xc3\xa9\x01\xff";
    size_t     n = sr_wire_name_encode(odd, buf, sizeof(buf));
    assert_int_equal(n, 2 + strlen(odd));
    assert_sr_ok(sr_wire_name_decode(buf, n, &d));
    assert_string_equal(d.name, odd);
}

static void
test_wire_name_every_truncation_is_eproto(void **state)
{
    char    name[SR_WIRE_MAX_NAME + 1];
    uint8_t buf[2 + SR_WIRE_MAX_NAME];
    (void)state;

    make_name(name, 7);
    size_t n = sr_wire_name_encode(name, buf, sizeof(buf));
    assert_int_equal(n, 9);
    assert_every_truncation_eproto(buf, n, dec_name);
    make_name(name, SR_WIRE_MAX_NAME);
    n = sr_wire_name_encode(name, buf, sizeof(buf));
    assert_every_truncation_eproto(buf, n, dec_name);
}

static void
test_wire_name_trailing_byte_is_eproto(void **state)
{
    uint8_t buf[16];
    (void)state;

    size_t n = sr_wire_name_encode("w", buf, sizeof(buf));
    assert_int_equal(n, 3);
    assert_trailing_byte_eproto(buf, n, dec_name);
    assert_detail_has("trailing");
}

static void
test_wire_name_bad_length_or_nul_is_eproto(void **state)
{
    uint8_t      buf[2 + SR_WIRE_MAX_NAME + 1];
    sr_wire_name d, before;
    (void)state;

    memset(&d, 0xab, sizeof(d));
    before = d;
    /* length 0 */
    buf[0] = 0;
    buf[1] = 0;
    assert_sr_err(sr_wire_name_decode(buf, 2, &d), SR_EPROTO);
    assert_detail_has("name length 0");
    /* length 256, all bytes present */
    memset(buf, 'x', sizeof(buf));
    buf[0] = 0x00;
    buf[1] = 0x01;
    assert_sr_err(sr_wire_name_decode(buf, sizeof(buf), &d), SR_EPROTO);
    assert_detail_has("name length 256");
    /* length 0xffff with few bytes */
    buf[0] = 0xff;
    buf[1] = 0xff;
    assert_sr_err(sr_wire_name_decode(buf, 10, &d), SR_EPROTO);
    /* NUL inside, at the start and at the end */
    const uint8_t mid[] = {3, 0, 'a', 0, 'b'};
    const uint8_t first[] = {2, 0, 0, 'b'};
    const uint8_t last[] = {2, 0, 'a', 0};
    assert_sr_err(sr_wire_name_decode(mid, sizeof(mid), &d), SR_EPROTO);
    assert_detail_has("NUL");
    assert_sr_err(sr_wire_name_decode(first, sizeof(first), &d), SR_EPROTO);
    assert_sr_err(sr_wire_name_decode(last, sizeof(last), &d), SR_EPROTO);
    assert_memory_equal(&d, &before, sizeof(d));
}

static void
test_wire_name_encode_bad_name_or_cap_returns_0(void **state)
{
    char    name[SR_WIRE_MAX_NAME + 2];
    uint8_t buf[2 + SR_WIRE_MAX_NAME + 1];
    (void)state;

    assert_int_equal(sr_wire_name_encode(NULL, buf, sizeof(buf)), 0);
    assert_int_equal(sr_wire_name_encode("", buf, sizeof(buf)), 0);
    make_name(name, SR_WIRE_MAX_NAME + 1);
    assert_int_equal(sr_wire_name_encode(name, buf, sizeof(buf)), 0);
    assert_int_equal(sr_wire_name_encode("abc", NULL, 100), 0);
    for (size_t cap = 0; cap < 5; cap++) {
        assert_int_equal(sr_wire_name_encode("abc", buf, cap), 0);
    }
    assert_int_equal(sr_wire_name_encode("abc", buf, 5), 5);
}

/* ---- vardesc --------------------------------------------------------- */

static void
assert_vardesc_equal(const sr_wire_vardesc *a, const sr_wire_vardesc *b)
{
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->flags, b->flags);
    assert_int_equal(a->ndim, b->ndim);
    for (int i = 0; i < a->ndim; i++) {
        assert_true(a->shape[i] == b->shape[i]);
    }
}

static void
test_wire_vardesc_edge_values_roundtrip_identical(void **state)
{
    uint8_t         buf[SR_WIRE_BODY_MAX], again[SR_WIRE_BODY_MAX];
    sr_wire_vardesc v, d;
    (void)state;

    const sr_dtype dtypes[] = {SR_FLOAT32, SR_FLOAT64, SR_INT32, SR_INT64};
    for (int ndim = 0; ndim <= SR_MAX_NDIM; ndim++) {
        for (size_t k = 0; k < 4; k++) {
            v = sample_vardesc(ndim);
            make_name(v.name, k % 2 ? SR_WIRE_MAX_NAME : 1);
            v.dtype = (uint8_t)dtypes[k];
            v.flags = (uint8_t)k;
            for (int i = 0; i < ndim; i++) {
                const int64_t dims[3] = {0, 1, INT64_MAX};
                v.shape[i] = dims[(i + (int)k) % 3];
            }
            size_t n = sr_wire_vardesc_encode(&v, buf, sizeof(buf));
            assert_int_equal(n, 2 + strlen(v.name) + 3 + 8 * (size_t)ndim);
            memset(&d, 0xab, sizeof(d));
            assert_sr_ok(sr_wire_vardesc_decode(buf, n, &d));
            assert_vardesc_equal(&d, &v);
            assert_int_equal(sr_wire_vardesc_encode(&d, again, sizeof(again)), n);
            assert_memory_equal(buf, again, n);
        }
    }
}

static void
test_wire_vardesc_layout_documented_order_matches(void **state)
{
    uint8_t         buf[SR_WIRE_BODY_MAX];
    sr_wire_vardesc v = sample_vardesc(2);
    (void)state;

    memcpy(v.name, "w", 2);
    v.shape[0] = 3;
    v.shape[1] = 0x0102;
    /* name "w", dtype float32, flags not trainable, ndim 2, shape 3 and 258 */
    const uint8_t want[] = "\x01\x00w\x01\x01\x02"
                           "\x03\x00\x00\x00\x00\x00\x00\x00"
                           "\x02\x01\x00\x00\x00\x00\x00\x00";
    assert_int_equal(sr_wire_vardesc_encode(&v, buf, sizeof(buf)), sizeof(want) - 1);
    assert_memory_equal(buf, want, sizeof(want) - 1);
}

static void
test_wire_vardesc_every_truncation_is_eproto(void **state)
{
    uint8_t         buf[SR_WIRE_BODY_MAX];
    sr_wire_vardesc v;
    (void)state;

    for (int ndim = 0; ndim <= SR_MAX_NDIM; ndim += 4) {
        v = sample_vardesc(ndim);
        size_t n = sr_wire_vardesc_encode(&v, buf, sizeof(buf));
        assert_true(n > 0);
        assert_every_truncation_eproto(buf, n, dec_vardesc);
    }
}

static void
test_wire_vardesc_trailing_byte_is_eproto(void **state)
{
    uint8_t         buf[SR_WIRE_BODY_MAX];
    sr_wire_vardesc v;
    (void)state;

    for (int ndim = 0; ndim <= SR_MAX_NDIM; ndim += 4) {
        v = sample_vardesc(ndim);
        size_t n = sr_wire_vardesc_encode(&v, buf, sizeof(buf));
        assert_trailing_byte_eproto(buf, n, dec_vardesc);
    }
}

static void
test_wire_vardesc_bad_fields_are_eproto(void **state)
{
    uint8_t         buf[SR_WIRE_BODY_MAX + 16];
    sr_wire_vardesc v = sample_vardesc(2), d, before;
    size_t          n, dtype_at;
    (void)state;

    memset(&d, 0xab, sizeof(d));
    before = d;
    n = sr_wire_vardesc_encode(&v, buf, sizeof(buf));
    dtype_at = 2 + strlen(v.name);

    const uint8_t bad_dtypes[] = {0, SR_INT64 + 1, 0xff};
    for (size_t i = 0; i < sizeof(bad_dtypes); i++) {
        buf[dtype_at] = bad_dtypes[i];
        assert_sr_err(sr_wire_vardesc_decode(buf, n, &d), SR_EPROTO);
        assert_detail_has("dtype");
    }
    buf[dtype_at] = SR_FLOAT32;

    /* ndim 9 with nine dims present: refused for ndim, not for length. */
    n = sr_wire_vardesc_encode(&v, buf, sizeof(buf));
    buf[dtype_at + 2] = SR_MAX_NDIM + 1;
    memset(buf + n, 0, 8 * (SR_MAX_NDIM + 1 - 2));
    assert_sr_err(sr_wire_vardesc_decode(buf, dtype_at + 3 + 8 * (SR_MAX_NDIM + 1), &d), SR_EPROTO);
    assert_detail_has("ndim 9");
    buf[dtype_at + 2] = 0xff;
    assert_sr_err(sr_wire_vardesc_decode(buf, n, &d), SR_EPROTO);

    /* negative second dimension */
    n = sr_wire_vardesc_encode(&v, buf, sizeof(buf));
    buf[n - 1] = 0x80;
    assert_sr_err(sr_wire_vardesc_decode(buf, n, &d), SR_EPROTO);
    assert_detail_has("shape[1]");

    /* name: length 0, and a NUL inside */
    n = sr_wire_vardesc_encode(&v, buf, sizeof(buf));
    buf[2] = '\0';
    assert_sr_err(sr_wire_vardesc_decode(buf, n, &d), SR_EPROTO);
    assert_detail_has("NUL");
    const uint8_t empty_name[] = {0, 0, SR_FLOAT32, 0, 0};
    assert_sr_err(sr_wire_vardesc_decode(empty_name, sizeof(empty_name), &d), SR_EPROTO);
    assert_memory_equal(&d, &before, sizeof(d));
}

static void
test_wire_vardesc_encode_bad_field_or_cap_returns_0(void **state)
{
    uint8_t         buf[SR_WIRE_BODY_MAX];
    sr_wire_vardesc v = sample_vardesc(3);
    (void)state;

    size_t n = sr_wire_vardesc_encode(&v, buf, sizeof(buf));
    assert_true(n > 0);
    for (size_t cap = 0; cap < n; cap++) {
        assert_int_equal(sr_wire_vardesc_encode(&v, buf, cap), 0);
    }
    assert_int_equal(sr_wire_vardesc_encode(&v, buf, n), n);
    assert_int_equal(sr_wire_vardesc_encode(NULL, buf, sizeof(buf)), 0);
    assert_int_equal(sr_wire_vardesc_encode(&v, NULL, sizeof(buf)), 0);

    v = sample_vardesc(3);
    v.dtype = 0;
    assert_int_equal(sr_wire_vardesc_encode(&v, buf, sizeof(buf)), 0);
    v.dtype = SR_INT64 + 1;
    assert_int_equal(sr_wire_vardesc_encode(&v, buf, sizeof(buf)), 0);

    v = sample_vardesc(3);
    v.ndim = SR_MAX_NDIM + 1;
    assert_int_equal(sr_wire_vardesc_encode(&v, buf, sizeof(buf)), 0);

    v = sample_vardesc(3);
    v.shape[2] = -1;
    assert_int_equal(sr_wire_vardesc_encode(&v, buf, sizeof(buf)), 0);
    v.shape[2] = INT64_MIN;
    assert_int_equal(sr_wire_vardesc_encode(&v, buf, sizeof(buf)), 0);

    v = sample_vardesc(3);
    v.name[0] = '\0';
    assert_int_equal(sr_wire_vardesc_encode(&v, buf, sizeof(buf)), 0);
    /* An unterminated name array (256 non-NUL bytes) is too long, not overrun. */
    memset(v.name, 'n', sizeof(v.name));
    assert_int_equal(sr_wire_vardesc_encode(&v, buf, sizeof(buf)), 0);
}

/* ---- pushdesc -------------------------------------------------------- */

static void
test_wire_pushdesc_edge_values_roundtrip_identical(void **state)
{
    uint8_t          buf[SR_WIRE_BODY_MAX], again[SR_WIRE_BODY_MAX];
    sr_wire_pushdesc p = sample_pushdesc(), d;
    (void)state;

    const uint64_t counts[] = {0, 1, (uint64_t)INT64_MAX + 1, UINT64_MAX};
    for (size_t k = 0; k < 4; k++) {
        make_name(p.name, k % 2 ? SR_WIRE_MAX_NAME : 1);
        p.dtype = (uint8_t)(SR_FLOAT32 + k);
        p.count = counts[k];
        p.offset = counts[3 - k];
        size_t n = sr_wire_pushdesc_encode(&p, buf, sizeof(buf));
        assert_int_equal(n, 2 + strlen(p.name) + 1 + 16);
        assert_sr_ok(sr_wire_pushdesc_decode(buf, n, &d));
        assert_string_equal(d.name, p.name);
        assert_int_equal(d.dtype, p.dtype);
        assert_true(d.count == p.count);
        assert_true(d.offset == p.offset);
        assert_int_equal(sr_wire_pushdesc_encode(&d, again, sizeof(again)), n);
        assert_memory_equal(buf, again, n);
    }
}

static void
test_wire_pushdesc_every_truncation_is_eproto(void **state)
{
    uint8_t          buf[SR_WIRE_BODY_MAX];
    sr_wire_pushdesc p = sample_pushdesc();
    (void)state;

    size_t n = sr_wire_pushdesc_encode(&p, buf, sizeof(buf));
    assert_every_truncation_eproto(buf, n, dec_pushdesc);
}

static void
test_wire_pushdesc_trailing_byte_is_eproto(void **state)
{
    uint8_t          buf[SR_WIRE_BODY_MAX];
    sr_wire_pushdesc p = sample_pushdesc();
    (void)state;

    size_t n = sr_wire_pushdesc_encode(&p, buf, sizeof(buf));
    assert_trailing_byte_eproto(buf, n, dec_pushdesc);
}

static void
test_wire_pushdesc_bad_fields_are_eproto(void **state)
{
    uint8_t          buf[SR_WIRE_BODY_MAX];
    sr_wire_pushdesc p = sample_pushdesc(), d, before;
    (void)state;

    memset(&d, 0xab, sizeof(d));
    before = d;
    size_t n = sr_wire_pushdesc_encode(&p, buf, sizeof(buf));
    size_t dtype_at = 2 + strlen(p.name);
    buf[dtype_at] = 0;
    assert_sr_err(sr_wire_pushdesc_decode(buf, n, &d), SR_EPROTO);
    assert_detail_has("pushdesc: dtype 0");
    buf[dtype_at] = 200;
    assert_sr_err(sr_wire_pushdesc_decode(buf, n, &d), SR_EPROTO);

    n = sr_wire_pushdesc_encode(&p, buf, sizeof(buf));
    buf[3] = '\0';
    assert_sr_err(sr_wire_pushdesc_decode(buf, n, &d), SR_EPROTO);
    buf[0] = 0;
    buf[1] = 0;
    assert_sr_err(sr_wire_pushdesc_decode(buf, n, &d), SR_EPROTO);
    buf[1] = 1; /* 256 */
    assert_sr_err(sr_wire_pushdesc_decode(buf, n, &d), SR_EPROTO);
    assert_memory_equal(&d, &before, sizeof(d));
}

static void
test_wire_pushdesc_encode_bad_field_or_cap_returns_0(void **state)
{
    uint8_t          buf[SR_WIRE_BODY_MAX];
    sr_wire_pushdesc p = sample_pushdesc();
    (void)state;

    size_t n = sr_wire_pushdesc_encode(&p, buf, sizeof(buf));
    for (size_t cap = 0; cap < n; cap++) {
        assert_int_equal(sr_wire_pushdesc_encode(&p, buf, cap), 0);
    }
    assert_int_equal(sr_wire_pushdesc_encode(&p, buf, n), n);
    assert_int_equal(sr_wire_pushdesc_encode(NULL, buf, sizeof(buf)), 0);
    p.dtype = 9;
    assert_int_equal(sr_wire_pushdesc_encode(&p, buf, sizeof(buf)), 0);
    p = sample_pushdesc();
    p.name[0] = '\0';
    assert_int_equal(sr_wire_pushdesc_encode(&p, buf, sizeof(buf)), 0);
    memset(p.name, 'n', sizeof(p.name));
    assert_int_equal(sr_wire_pushdesc_encode(&p, buf, sizeof(buf)), 0);
}

/* ---- hello reply ----------------------------------------------------- */

static void
test_wire_hello_rep_edge_values_roundtrip_identical(void **state)
{
    uint8_t           buf[SR_WIRE_BODY_MAX], again[SR_WIRE_BODY_MAX];
    sr_wire_hello_rep r = sample_hello_rep(), d;
    (void)state;

    const int64_t steps[] = {INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX};
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        r.global_step = steps[k];
        r.model_ready = (uint8_t)(k % 2);
        r.replicas_to_aggregate = k % 2 ? 1 : INT32_MAX;
        r.total_replicas = k % 2 ? INT32_MAX : 1;
        r.max_message_bytes = k % 2 ? UINT64_MAX : 0;
        r.partition_bytes = k % 2 ? 0 : UINT64_MAX;
        size_t n = sr_wire_hello_rep_encode(&r, buf, sizeof(buf));
        assert_int_equal(n, 33);
        assert_sr_ok(sr_wire_hello_rep_decode(buf, n, &d));
        assert_true(d.global_step == r.global_step);
        assert_int_equal(d.model_ready, r.model_ready);
        assert_int_equal(d.replicas_to_aggregate, r.replicas_to_aggregate);
        assert_int_equal(d.total_replicas, r.total_replicas);
        assert_true(d.max_message_bytes == r.max_message_bytes);
        assert_true(d.partition_bytes == r.partition_bytes);
        assert_int_equal(sr_wire_hello_rep_encode(&d, again, sizeof(again)), n);
        assert_memory_equal(buf, again, n);
    }
}

/* The partition layout both sides compute from a variable's size. */
static void
test_wire_partition_rows_layout(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    /* (nbytes, rows, partition_bytes) -> rows per partition, 0 = one partition */
    const uint64_t cases[][4] = {
        {64 * MiB, 16 * MiB, 4 * MiB, MiB}, /* float32 vector: 1 Mi elements each */
        {64 * MiB, 16 * MiB, 0, 0},         /* partitions off */
        {4 * MiB, MiB, 4 * MiB, 0},         /* exactly the size: one partition */
        {4 * MiB + 4, MiB + 1, 4 * MiB, MiB},
        {64 * MiB, 2, 4 * MiB, 1},  /* rows bigger than a partition: one row each */
        {64 * MiB, 1, 4 * MiB, 0},  /* a single row (or scalar) is never split */
        {10 * MiB, 10, 3 * MiB, 3}, /* 3 rows per partition, the last one 1 row */
        {0, 0, 4 * MiB, 0},         /* empty */
        {16 * MiB, 4096, MiB, 256}, /* 4 KiB rows */
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        assert_true(sr_wire_partition_rows(cases[k][0], cases[k][1], cases[k][2]) == cases[k][3]);
    }
    /* The layout around it: scalars and empty first dimensions are one row. */
    sr_wire_layout l = sr_wire_partition_layout(10 * MiB, 2, 10, 3 * MiB);
    assert_true(l.rows == 10 && l.part_rows == 3 && l.nparts == 4);
    l = sr_wire_partition_layout(8, 0, 0, 4);
    assert_true(l.rows == 1 && l.part_rows == 1 && l.nparts == 1);
    l = sr_wire_partition_layout(0, 2, 0, 4);
    assert_true(l.rows == 1 && l.part_rows == 1 && l.nparts == 1);
    l = sr_wire_partition_layout(64 * MiB, 1, 16 * MiB, 0);
    assert_true(l.rows == 16 * MiB && l.part_rows == 16 * MiB && l.nparts == 1);
}

static void
test_wire_hello_rep_every_truncation_is_eproto(void **state)
{
    uint8_t           buf[SR_WIRE_BODY_MAX];
    sr_wire_hello_rep r = sample_hello_rep();
    (void)state;

    size_t n = sr_wire_hello_rep_encode(&r, buf, sizeof(buf));
    assert_every_truncation_eproto(buf, n, dec_hello_rep);
    assert_trailing_byte_eproto(buf, n, dec_hello_rep);
}

static void
test_wire_hello_rep_bad_fields_are_eproto(void **state)
{
    uint8_t           buf[SR_WIRE_BODY_MAX];
    sr_wire_hello_rep r = sample_hello_rep(), d, before;
    (void)state;

    memset(&d, 0xab, sizeof(d));
    before = d;
    size_t n = sr_wire_hello_rep_encode(&r, buf, sizeof(buf));
    buf[8] = 2; /* model_ready */
    assert_sr_err(sr_wire_hello_rep_decode(buf, n, &d), SR_EPROTO);
    assert_detail_has("model_ready");

    const int32_t bad[] = {0, -1, INT32_MIN};
    for (size_t i = 0; i < 3; i++) {
        n = sr_wire_hello_rep_encode(&r, buf, sizeof(buf));
        buf[9] = (uint8_t)bad[i]; /* R, little-endian */
        buf[10] = (uint8_t)(bad[i] >> 8);
        buf[11] = (uint8_t)(bad[i] >> 16);
        buf[12] = (uint8_t)((uint32_t)bad[i] >> 24);
        assert_sr_err(sr_wire_hello_rep_decode(buf, n, &d), SR_EPROTO);
        n = sr_wire_hello_rep_encode(&r, buf, sizeof(buf));
        buf[13] = (uint8_t)bad[i]; /* N */
        buf[14] = (uint8_t)(bad[i] >> 8);
        buf[15] = (uint8_t)(bad[i] >> 16);
        buf[16] = (uint8_t)((uint32_t)bad[i] >> 24);
        assert_sr_err(sr_wire_hello_rep_decode(buf, n, &d), SR_EPROTO);
    }
    assert_memory_equal(&d, &before, sizeof(d));
}

static void
test_wire_hello_rep_encode_bad_field_or_cap_returns_0(void **state)
{
    uint8_t           buf[SR_WIRE_BODY_MAX];
    sr_wire_hello_rep r = sample_hello_rep();
    (void)state;

    for (size_t cap = 0; cap < 25; cap++) {
        assert_int_equal(sr_wire_hello_rep_encode(&r, buf, cap), 0);
    }
    assert_int_equal(sr_wire_hello_rep_encode(NULL, buf, sizeof(buf)), 0);
    r.model_ready = 2;
    assert_int_equal(sr_wire_hello_rep_encode(&r, buf, sizeof(buf)), 0);
    r = sample_hello_rep();
    r.replicas_to_aggregate = 0;
    assert_int_equal(sr_wire_hello_rep_encode(&r, buf, sizeof(buf)), 0);
    r = sample_hello_rep();
    r.total_replicas = -3;
    assert_int_equal(sr_wire_hello_rep_encode(&r, buf, sizeof(buf)), 0);
}

/* ---- ready request --------------------------------------------------- */

static void
test_wire_ready_req_mark_0_and_1_roundtrip_identical(void **state)
{
    uint8_t           buf[4], again[4];
    sr_wire_ready_req r, d;
    (void)state;

    for (uint8_t mark = 0; mark <= 1; mark++) {
        r.mark = mark;
        assert_int_equal(sr_wire_ready_req_encode(&r, buf, sizeof(buf)), 1);
        assert_int_equal(buf[0], mark);
        assert_sr_ok(sr_wire_ready_req_decode(buf, 1, &d));
        assert_int_equal(d.mark, mark);
        assert_int_equal(sr_wire_ready_req_encode(&d, again, sizeof(again)), 1);
        assert_memory_equal(buf, again, 1);
        assert_every_truncation_eproto(buf, 1, dec_ready_req);
        assert_trailing_byte_eproto(buf, 1, dec_ready_req);
    }
}

static void
test_wire_ready_req_bad_mark_is_eproto(void **state)
{
    uint8_t           buf[4] = {2};
    sr_wire_ready_req r = {2}, d = {0xab};
    (void)state;

    assert_sr_err(sr_wire_ready_req_decode(buf, 1, &d), SR_EPROTO);
    assert_detail_has("mark 2");
    assert_int_equal(d.mark, 0xab);
    assert_int_equal(sr_wire_ready_req_encode(&r, buf, sizeof(buf)), 0);
    r.mark = 1;
    assert_int_equal(sr_wire_ready_req_encode(&r, buf, 0), 0);
    assert_int_equal(sr_wire_ready_req_encode(NULL, buf, sizeof(buf)), 0);
}

/* ---- ready / ping reply ---------------------------------------------- */

static void
test_wire_ping_rep_edge_values_roundtrip_identical(void **state)
{
    uint8_t          buf[SR_WIRE_BODY_MAX], again[SR_WIRE_BODY_MAX];
    sr_wire_ping_rep r, d;
    (void)state;

    const int64_t steps[] = {INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX};
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        r.model_ready = (uint8_t)(k % 2);
        r.global_step = steps[k];
        size_t n = sr_wire_ping_rep_encode(&r, buf, sizeof(buf));
        assert_int_equal(n, 9);
        assert_sr_ok(sr_wire_ping_rep_decode(buf, n, &d));
        assert_int_equal(d.model_ready, r.model_ready);
        assert_true(d.global_step == r.global_step);
        assert_int_equal(sr_wire_ping_rep_encode(&d, again, sizeof(again)), n);
        assert_memory_equal(buf, again, n);
    }
}

static sr_err
dec_vars_hdr(const uint8_t *buf, size_t len)
{
    sr_wire_vars_hdr v;
    return sr_wire_vars_hdr_decode(buf, len, &v);
}

static void
test_wire_vars_hdr_roundtrip_truncation_and_cap(void **state)
{
    uint8_t          buf[SR_WIRE_BODY_MAX];
    sr_wire_vars_hdr v = {INT64_MIN, UINT32_MAX}, d;
    (void)state;

    size_t n = sr_wire_vars_hdr_encode(&v, buf, sizeof(buf));
    assert_int_equal(n, 12);
    assert_sr_ok(sr_wire_vars_hdr_decode(buf, n, &d));
    assert_true(d.global_step == INT64_MIN && d.nvars == UINT32_MAX);
    assert_every_truncation_eproto(buf, n, dec_vars_hdr);
    assert_trailing_byte_eproto(buf, n, dec_vars_hdr);
    for (size_t cap = 0; cap < n; cap++) {
        assert_int_equal(sr_wire_vars_hdr_encode(&v, buf, cap), 0);
    }
}

static sr_err
dec_have(const uint8_t *buf, size_t len)
{
    sr_wire_have v;
    return sr_wire_have_decode(buf, len, &v);
}

/* Issue 23: a TOKEN request's values held; a negative step is refused both ways. */
static void
test_wire_have_roundtrip_negative_truncation_and_cap(void **state)
{
    uint8_t      buf[SR_WIRE_BODY_MAX];
    sr_wire_have v = {INT64_MAX}, d = {5};
    (void)state;

    size_t n = sr_wire_have_encode(&v, buf, sizeof(buf));
    assert_int_equal(n, 8);
    assert_sr_ok(sr_wire_have_decode(buf, n, &d));
    assert_true(d.global_step == INT64_MAX);
    assert_every_truncation_eproto(buf, n, dec_have);
    assert_trailing_byte_eproto(buf, n, dec_have);
    for (size_t cap = 0; cap < n; cap++) {
        assert_int_equal(sr_wire_have_encode(&v, buf, cap), 0);
    }
    v.global_step = -1;
    assert_int_equal(sr_wire_have_encode(&v, buf, sizeof(buf)), 0);
    memset(buf, 0xff, 8);
    assert_sr_err(sr_wire_have_decode(buf, 8, &d), SR_EPROTO);
    assert_detail_has("negative");
    assert_true(d.global_step == INT64_MAX); /* a failed decode changes nothing */
}

static void
test_wire_ping_rep_every_truncation_is_eproto(void **state)
{
    uint8_t          buf[SR_WIRE_BODY_MAX];
    sr_wire_ping_rep r = {1, INT64_MAX};
    (void)state;

    size_t n = sr_wire_ping_rep_encode(&r, buf, sizeof(buf));
    assert_every_truncation_eproto(buf, n, dec_ping_rep);
    assert_trailing_byte_eproto(buf, n, dec_ping_rep);
}

static void
test_wire_ping_rep_bad_field_or_cap_is_refused(void **state)
{
    uint8_t          buf[SR_WIRE_BODY_MAX];
    sr_wire_ping_rep r = {1, 5}, d = {0xab, 77};
    (void)state;

    size_t n = sr_wire_ping_rep_encode(&r, buf, sizeof(buf));
    buf[0] = 0xff;
    assert_sr_err(sr_wire_ping_rep_decode(buf, n, &d), SR_EPROTO);
    assert_detail_has("model_ready");
    assert_int_equal(d.model_ready, 0xab);
    assert_true(d.global_step == 77);
    for (size_t cap = 0; cap < n; cap++) {
        assert_int_equal(sr_wire_ping_rep_encode(&r, buf, cap), 0);
    }
    r.model_ready = 2;
    assert_int_equal(sr_wire_ping_rep_encode(&r, buf, sizeof(buf)), 0);
}

/* ---- push reply ------------------------------------------------------ */

static void
test_wire_push_rep_every_outcome_roundtrip_identical(void **state)
{
    uint8_t          buf[4], again[4];
    sr_wire_push_rep r, d;
    (void)state;

    for (uint8_t o = SR_PUSH_ACCEPTED; o <= SR_PUSH_DUPLICATE; o++) {
        r.outcome = o;
        assert_int_equal(sr_wire_push_rep_encode(&r, buf, sizeof(buf)), 1);
        assert_sr_ok(sr_wire_push_rep_decode(buf, 1, &d));
        assert_int_equal(d.outcome, o);
        assert_int_equal(sr_wire_push_rep_encode(&d, again, sizeof(again)), 1);
        assert_memory_equal(buf, again, 1);
        assert_every_truncation_eproto(buf, 1, dec_push_rep);
        assert_trailing_byte_eproto(buf, 1, dec_push_rep);
    }
}

static void
test_wire_push_rep_unknown_outcome_is_refused(void **state)
{
    uint8_t          buf[4] = {SR_PUSH_DUPLICATE + 1};
    sr_wire_push_rep r = {SR_PUSH_DUPLICATE + 1}, d = {0xab};
    (void)state;

    assert_sr_err(sr_wire_push_rep_decode(buf, 1, &d), SR_EPROTO);
    assert_detail_has("outcome 3");
    buf[0] = 0xff;
    assert_sr_err(sr_wire_push_rep_decode(buf, 1, &d), SR_EPROTO);
    assert_int_equal(d.outcome, 0xab);
    assert_int_equal(sr_wire_push_rep_encode(&r, buf, sizeof(buf)), 0);
    r.outcome = SR_PUSH_STALE;
    assert_int_equal(sr_wire_push_rep_encode(&r, buf, 0), 0);
}

/* ---- type names ------------------------------------------------------ */

static void
test_wire_type_name_known_and_unknown_named(void **state)
{
    (void)state;
    const char *names[] = {"HELLO",       "DECLARE", "READY", "PULL",   "PUSH",
                           "PUSH_SPARSE", "TOKEN",   "PING",  "STATUS", "BYE"};
    for (int t = SR_MSG_HELLO; t <= SR_MSG_BYE; t++) {
        assert_string_equal(sr_wire_type_name(t), names[t - 1]);
        assert_string_equal(sr_wire_type_name(t | (int)SR_WIRE_REPLY), names[t - 1]);
    }
    assert_string_equal(sr_wire_type_name(0), "?");
    assert_string_equal(sr_wire_type_name(SR_MSG_FINISH), "FINISH");
    assert_string_equal(sr_wire_type_name(SR_MSG_CTL), "CTL");
    assert_string_equal(sr_wire_type_name(SR_MSG_MODEL), "MODEL");
    assert_string_equal(sr_wire_type_name(SR_MSG_CURSOR), "CURSOR");
    assert_string_equal(sr_wire_type_name(SR_MSG_CURSOR + 1), "?");
    assert_string_equal(sr_wire_type_name((int)SR_WIRE_REPLY), "?");
    assert_string_equal(sr_wire_type_name(-1), "?");
    assert_string_equal(sr_wire_type_name(0x101), "?");
}

/* issue 26: the CTL request round-trips; bad ops, fields and values are
 * refused naming what was wrong. */
static void
test_wire_ctl_req_round_trip_and_refusals(void **state)
{
    uint8_t         buf[SR_WIRE_CTL_REQ_BYTES + 1];
    sr_wire_ctl_req r = {SR_WIRE_CTL_SET_REPLICAS, SR_WIRE_CTL_R | SR_WIRE_CTL_M, 3, 0, 2, 0};
    sr_wire_ctl_req d;
    (void)state;

    assert_int_equal(sr_wire_ctl_req_encode(&r, buf, sizeof(buf)), SR_WIRE_CTL_REQ_BYTES);
    assert_int_equal(sr_wire_ctl_req_encode(&r, buf, SR_WIRE_CTL_REQ_BYTES - 1), 0);
    assert_sr_ok(sr_wire_ctl_req_decode(buf, SR_WIRE_CTL_REQ_BYTES, &d));
    assert_int_equal(d.op, SR_WIRE_CTL_SET_REPLICAS);
    assert_int_equal(d.replicas_to_aggregate, 3);
    assert_int_equal(d.min_replicas, 2);
    assert_sr_err(sr_wire_ctl_req_decode(buf, SR_WIRE_CTL_REQ_BYTES - 1, &d), SR_EPROTO);
    assert_detail_has("bytes");
    assert_sr_err(sr_wire_ctl_req_decode(buf, SR_WIRE_CTL_REQ_BYTES + 1, &d), SR_EPROTO);
    const struct {
        sr_wire_ctl_req r;
        const char     *why;
    } bad[] = {
        {{9, SR_WIRE_CTL_R, 1, 0, 0, 0}, "op"},
        {{SR_WIRE_CTL_SET_REPLICAS, 0, 1, 0, 0, 0}, "fields"},
        {{SR_WIRE_CTL_SET_REPLICAS, SR_WIRE_CTL_LR, 0, 0, 0, 0.5}, "fields"},
        {{SR_WIRE_CTL_SET, SR_WIRE_CTL_R, 2, 0, 0, 0}, "fields"},
        {{SR_WIRE_CTL_SET_REPLICAS, SR_WIRE_CTL_N, 0, 0, 0, 0}, "below 1"},
        {{SR_WIRE_CTL_SET_REPLICAS, SR_WIRE_CTL_M, 0, 0, -4, 0}, "below 1"},
        {{SR_WIRE_CTL_SET, SR_WIRE_CTL_LR, 0, 0, 0, -1}, "learning rate"},
        {{SR_WIRE_CTL_SET, SR_WIRE_CTL_LR, 0, 0, 0, 1.0 / 0.0}, "learning rate"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&d, 0xab, sizeof(d));
        assert_int_equal(sr_wire_ctl_req_encode(&bad[i].r, buf, sizeof(buf)),
                         SR_WIRE_CTL_REQ_BYTES);
        assert_sr_err(sr_wire_ctl_req_decode(buf, SR_WIRE_CTL_REQ_BYTES, &d), SR_EPROTO);
        assert_detail_has(bad[i].why);
    }
    sr_wire_ctl_req lr = {SR_WIRE_CTL_SET, SR_WIRE_CTL_LR, 0, 0, 0, 0.125};
    assert_int_equal(sr_wire_ctl_req_encode(&lr, buf, sizeof(buf)), SR_WIRE_CTL_REQ_BYTES);
    assert_sr_ok(sr_wire_ctl_req_decode(buf, SR_WIRE_CTL_REQ_BYTES, &d));
    assert_true(d.learning_rate == 0.125);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire_header_edge_values_roundtrip_identical),
        cmocka_unit_test(test_wire_header_layout_documented_offsets_match),
        cmocka_unit_test(test_wire_header_every_truncation_is_eproto),
        cmocka_unit_test(test_wire_header_trailing_byte_is_eproto),
        cmocka_unit_test(test_wire_header_bad_magic_is_eproto),
        cmocka_unit_test(test_wire_header_other_version_is_eproto),
        cmocka_unit_test(test_wire_header_unknown_type_is_eproto),
        cmocka_unit_test(test_wire_header_every_known_type_decodes_ok),
        cmocka_unit_test(test_wire_header_failed_decode_leaves_out_untouched),
        cmocka_unit_test(test_wire_header_null_out_is_einval),
        cmocka_unit_test(test_wire_name_length_1_and_255_roundtrip_identical),
        cmocka_unit_test(test_wire_name_every_truncation_is_eproto),
        cmocka_unit_test(test_wire_name_trailing_byte_is_eproto),
        cmocka_unit_test(test_wire_name_bad_length_or_nul_is_eproto),
        cmocka_unit_test(test_wire_name_encode_bad_name_or_cap_returns_0),
        cmocka_unit_test(test_wire_vardesc_edge_values_roundtrip_identical),
        cmocka_unit_test(test_wire_vardesc_layout_documented_order_matches),
        cmocka_unit_test(test_wire_vardesc_every_truncation_is_eproto),
        cmocka_unit_test(test_wire_vardesc_trailing_byte_is_eproto),
        cmocka_unit_test(test_wire_vardesc_bad_fields_are_eproto),
        cmocka_unit_test(test_wire_vardesc_encode_bad_field_or_cap_returns_0),
        cmocka_unit_test(test_wire_pushdesc_edge_values_roundtrip_identical),
        cmocka_unit_test(test_wire_pushdesc_every_truncation_is_eproto),
        cmocka_unit_test(test_wire_pushdesc_trailing_byte_is_eproto),
        cmocka_unit_test(test_wire_pushdesc_bad_fields_are_eproto),
        cmocka_unit_test(test_wire_pushdesc_encode_bad_field_or_cap_returns_0),
        cmocka_unit_test(test_wire_hello_rep_edge_values_roundtrip_identical),
        cmocka_unit_test(test_wire_hello_rep_every_truncation_is_eproto),
        cmocka_unit_test(test_wire_partition_rows_layout),
        cmocka_unit_test(test_wire_hello_rep_bad_fields_are_eproto),
        cmocka_unit_test(test_wire_hello_rep_encode_bad_field_or_cap_returns_0),
        cmocka_unit_test(test_wire_ready_req_mark_0_and_1_roundtrip_identical),
        cmocka_unit_test(test_wire_ready_req_bad_mark_is_eproto),
        cmocka_unit_test(test_wire_ping_rep_edge_values_roundtrip_identical),
        cmocka_unit_test(test_wire_ping_rep_every_truncation_is_eproto),
        cmocka_unit_test(test_wire_vars_hdr_roundtrip_truncation_and_cap),
        cmocka_unit_test(test_wire_have_roundtrip_negative_truncation_and_cap),
        cmocka_unit_test(test_wire_ping_rep_bad_field_or_cap_is_refused),
        cmocka_unit_test(test_wire_push_rep_every_outcome_roundtrip_identical),
        cmocka_unit_test(test_wire_push_rep_unknown_outcome_is_refused),
        cmocka_unit_test(test_wire_type_name_known_and_unknown_named),
        cmocka_unit_test(test_wire_ctl_req_round_trip_and_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
