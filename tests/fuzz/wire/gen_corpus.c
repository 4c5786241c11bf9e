/*
 * Writes the wire fuzz target's seed corpus (the checked-in
 * tests/fuzz/wire/corpus/): a valid message of every type, request and reply
 * (including error replies), then truncated, malformed and garbled variants.
 * Deterministic: running it again rewrites the same files.  Files named
 * "valid-*" must stay well-formed messages (checked by tests/fuzz/replay.c).
 *
 *     build/tests/fuzz/wire/fuzz_wire_gen_corpus tests/fuzz/wire/corpus
 *
 * File format: fuzz_wire.h (frames, each a u16 little-endian length + bytes).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "fuzz_wire.h"
#include "syncrep/syncrep.h"
#include "wire/wire.h"

#define MSG_CAP 8192 /* a CURSOR of SR_WIRE_CURSOR_MAX + 1 bytes fits */

typedef struct {
    uint8_t buf[MSG_CAP];
    size_t  len;
} msg;

static const char *outdir;
static int         failed;
static int         written;

static void
add_frame(msg *m, const void *p, size_t n)
{
    if (n > UINT16_MAX || m->len + 2 + n > MSG_CAP) {
        fprintf(stderr, "gen_corpus: frame of %zu bytes does not fit\n", n);
        exit(1);
    }
    sr_put_u16(m->buf + m->len, (uint16_t)n);
    if (n > 0) {
        memcpy(m->buf + m->len + 2, p, n);
    }
    m->len += 2 + n;
}

static void
write_bytes(const char *name, const uint8_t *p, size_t n)
{
    char  path[4096];
    FILE *f;

    if (snprintf(path, sizeof(path), "%s/%s", outdir, name) >= (int)sizeof(path)) {
        fprintf(stderr, "gen_corpus: path too long\n");
        exit(1);
    }
    if ((f = fopen(path, "wb")) == NULL || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "gen_corpus: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    written++;
}

/* Write m as `name`; valid-* names are checked to be well-formed here, so a
 * wrong seed is caught when it is made. */
static void
emit(const char *name, const msg *m)
{
    int want_ok = strncmp(name, "valid-", 6) == 0;
    if (fuzz_wire_message_ok(m->buf, m->len) != want_ok) {
        fprintf(stderr, "gen_corpus: %s: well-formed=%d, expected %d\n", name, !want_ok, want_ok);
        failed = 1;
    }
    write_bytes(name, m->buf, m->len);
}

static sr_wire_header
hdr(uint8_t type, int32_t status)
{
    sr_wire_header h;
    memset(&h, 0, sizeof(h));
    h.type = type;
    h.request_id = 42;
    h.incarnation = 3;
    h.client_id = 0x1d2c3b4a59687766u;
    h.task_index = 1;
    h.status = status;
    h.local_step = 12;
    h.seq = 0;
    return h;
}

static void
start(msg *m, const sr_wire_header *h)
{
    uint8_t b[SR_WIRE_HEADER_BYTES];
    m->len = 0;
    sr_wire_header_encode(h, b);
    add_frame(m, b, sizeof(b));
}

/* Seeds are made with the encoders: a refusal is a bug in this file. */
static void
check_encoded(size_t n)
{
    if (n == 0) {
        fprintf(stderr, "gen_corpus: an encoder refused a seed\n");
        exit(1);
    }
}

static sr_wire_vardesc
vardesc(const char *name, uint8_t dtype, int ndim, const int64_t *shape)
{
    sr_wire_vardesc v;
    memset(&v, 0, sizeof(v));
    snprintf(v.name, sizeof(v.name), "%s", name);
    v.dtype = dtype;
    v.ndim = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) {
        v.shape[i] = shape[i];
    }
    return v;
}

static void
add_vardesc(msg *m, const sr_wire_vardesc *v)
{
    uint8_t b[SR_WIRE_BODY_MAX];
    size_t  n = sr_wire_vardesc_encode(v, b, sizeof(b));
    check_encoded(n);
    add_frame(m, b, n);
}

static void
add_pushdesc_at(msg *m, const char *name, uint8_t dtype, uint64_t count, uint64_t offset)
{
    sr_wire_pushdesc p;
    uint8_t          b[SR_WIRE_BODY_MAX];
    size_t           n;

    memset(&p, 0, sizeof(p));
    snprintf(p.name, sizeof(p.name), "%s", name);
    p.dtype = dtype;
    p.count = count;
    p.offset = offset;
    n = sr_wire_pushdesc_encode(&p, b, sizeof(b));
    check_encoded(n);
    add_frame(m, b, n);
}

static void
add_pushdesc(msg *m, const char *name, uint8_t dtype, uint64_t count)
{
    add_pushdesc_at(m, name, dtype, count, 0);
}

/* n float32 values 0.5, 1.5, ... (little-endian IEEE-754). */
static void
add_f32_data(msg *m, size_t n)
{
    uint8_t b[256];
    for (size_t i = 0; i < n; i++) {
        float    f = (float)i + 0.5f;
        uint32_t u;
        memcpy(&u, &f, sizeof(u));
        sr_put_u32(b + 4 * i, u);
    }
    add_frame(m, b, 4 * n);
}

static void
add_text(msg *m, const char *text)
{
    add_frame(m, text, strlen(text));
}

/* ---- the valid messages ---------------------------------------------- */

/* Each builder fills m with one valid message; the table drives the
 * truncated and garbled variants too. */
typedef void (*builder)(msg *m);

static void
req_hello(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_HELLO, 0);
    h.incarnation = 0;
    h.request_id = 1;
    start(m, &h);
}

static void
rep_hello(msg *m)
{
    sr_wire_header    h = hdr(SR_MSG_HELLO | SR_WIRE_REPLY, 0);
    sr_wire_hello_rep r = {12, 1, 2, 3, 64u << 20, 4u << 20};
    uint8_t           b[SR_WIRE_BODY_MAX];
    size_t            n = sr_wire_hello_rep_encode(&r, b, sizeof(b));
    start(m, &h);
    check_encoded(n);
    add_frame(m, b, n);
}

static void
rep_hello_edge(msg *m)
{
    sr_wire_header    h = hdr(SR_MSG_HELLO | SR_WIRE_REPLY, 0);
    sr_wire_hello_rep r = {INT64_MAX, 0, INT32_MAX, 1, UINT64_MAX, UINT64_MAX};
    uint8_t           b[SR_WIRE_BODY_MAX];
    size_t            n = sr_wire_hello_rep_encode(&r, b, sizeof(b));
    h.incarnation = UINT64_MAX;
    h.request_id = UINT64_MAX;
    h.local_step = INT64_MIN;
    start(m, &h);
    check_encoded(n);
    add_frame(m, b, n);
}

static void
req_declare(msg *m)
{
    const int64_t   shape[2] = {2, 3};
    sr_wire_header  h = hdr(SR_MSG_DECLARE, 0);
    sr_wire_vardesc v = vardesc("dense/kernel", SR_FLOAT32, 2, shape);
    h.task_index = 0;
    start(m, &h);
    add_vardesc(m, &v);
    add_f32_data(m, 6);
}

/* The second of two parts of a float32[2, 3]'s initial value. */
static void
req_declare_part(msg *m)
{
    const int64_t   shape[2] = {2, 3};
    sr_wire_header  h = hdr(SR_MSG_DECLARE, 0);
    sr_wire_vardesc v = vardesc("dense/kernel", SR_FLOAT32, 2, shape);
    v.flags = SR_WIRE_DECLARE_PART;
    h.task_index = 0;
    start(m, &h);
    add_vardesc(m, &v);
    add_pushdesc_at(m, "dense/kernel", SR_FLOAT32, 12, 12);
    add_f32_data(m, 3);
}

static void
req_declare_no_init(msg *m)
{
    const int64_t   shape[1] = {4};
    sr_wire_header  h = hdr(SR_MSG_DECLARE, 0);
    sr_wire_vardesc v = vardesc("bias", SR_FLOAT32, 1, shape);
    start(m, &h);
    add_vardesc(m, &v);
}

static void
req_declare_scalar(msg *m)
{
    sr_wire_header  h = hdr(SR_MSG_DECLARE, 0);
    sr_wire_vardesc v = vardesc("lr_scale", SR_FLOAT64, 0, NULL);
    uint8_t         b[8];
    v.flags = SR_DECLARE_NOT_TRAINABLE;
    sr_put_f64(b, 0.25);
    h.task_index = 0;
    start(m, &h);
    add_vardesc(m, &v);
    add_frame(m, b, sizeof(b));
}

static void
req_declare_ndim8_empty(msg *m)
{
    const int64_t   shape[SR_MAX_NDIM] = {1, 2, 1, 0, 3, 1, 1, 2};
    sr_wire_header  h = hdr(SR_MSG_DECLARE, 0);
    sr_wire_vardesc v = vardesc("empty8", SR_INT64, SR_MAX_NDIM, shape);
    h.task_index = 0;
    start(m, &h);
    add_vardesc(m, &v);
    add_frame(m, NULL, 0);
}

static void
rep_declare(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_DECLARE | SR_WIRE_REPLY, 0);
    start(m, &h);
}

static void
rep_declare_eexist(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_DECLARE | SR_WIRE_REPLY, SR_EEXIST);
    start(m, &h);
    add_text(m, "declare 'bias': stored float32 [4], declared float32 [5]");
}

static void
req_ready_mark(msg *m)
{
    sr_wire_header    h = hdr(SR_MSG_READY, 0);
    sr_wire_ready_req r = {1};
    uint8_t           b[1];
    h.task_index = 0;
    start(m, &h);
    check_encoded(sr_wire_ready_req_encode(&r, b, sizeof(b)));
    add_frame(m, b, 1);
}

static void
req_ready_ask(msg *m)
{
    sr_wire_header    h = hdr(SR_MSG_READY, 0);
    sr_wire_ready_req r = {0};
    uint8_t           b[1];
    start(m, &h);
    check_encoded(sr_wire_ready_req_encode(&r, b, sizeof(b)));
    add_frame(m, b, 1);
}

static void
add_ping_rep(msg *m, uint8_t ready, int64_t step)
{
    sr_wire_ping_rep r = {ready, step};
    uint8_t          b[SR_WIRE_BODY_MAX];
    size_t           n = sr_wire_ping_rep_encode(&r, b, sizeof(b));
    check_encoded(n);
    add_frame(m, b, n);
}

static void
rep_ready(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_READY | SR_WIRE_REPLY, 0);
    start(m, &h);
    add_ping_rep(m, 1, 12);
}

static void
rep_declare_enotready(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_DECLARE | SR_WIRE_REPLY, SR_ENOTREADY);
    start(m, &h);
    add_text(m, "model not ready: the chief has not marked it ready");
}

static void
req_pull(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PULL, 0);
    uint8_t        b[SR_WIRE_BODY_MAX];
    size_t         n = sr_wire_name_encode("dense/kernel", b, sizeof(b));
    start(m, &h);
    check_encoded(n);
    add_frame(m, b, n);
}

static void
req_pull_long_name(msg *m)
{
    char           name[SR_WIRE_MAX_NAME + 1];
    sr_wire_header h = hdr(SR_MSG_PULL, 0);
    uint8_t        b[SR_WIRE_BODY_MAX];
    size_t         n;
    for (int i = 0; i < SR_WIRE_MAX_NAME; i++) {
        name[i] = (char)('a' + i % 26);
    }
    name[SR_WIRE_MAX_NAME] = '\0';
    n = sr_wire_name_encode(name, b, sizeof(b));
    start(m, &h);
    check_encoded(n);
    add_frame(m, b, n);
}

static void
rep_pull(msg *m)
{
    const int64_t   shape[2] = {2, 3};
    sr_wire_header  h = hdr(SR_MSG_PULL | SR_WIRE_REPLY, 0);
    sr_wire_vardesc v = vardesc("dense/kernel", SR_FLOAT32, 2, shape);
    h.local_step = 12; /* the global step of the value */
    start(m, &h);
    add_vardesc(m, &v);
    add_f32_data(m, 6);
}

static void
rep_pull_enoent(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PULL | SR_WIRE_REPLY, SR_ENOENT);
    start(m, &h);
    add_text(m, "no variable 'dense/kernel'");
}

static void
req_push(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PUSH, 0);
    h.seq = 7;
    start(m, &h);
    add_pushdesc(m, "dense/kernel", SR_FLOAT32, 24);
    add_f32_data(m, 6);
}

/* One partition of a variable (docs/protocol.md, Partitions). */
static void
req_push_partition(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PUSH, 0);
    h.seq = 8;
    start(m, &h);
    add_pushdesc_at(m, "dense/kernel", SR_FLOAT32, 8, 16);
    add_f32_data(m, 2);
}

static void
req_push_resend(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PUSH, 0);
    h.flags = SR_WIRE_F_RESEND;
    h.seq = 7;
    start(m, &h);
    add_pushdesc(m, "dense/kernel", SR_FLOAT32, 24);
    add_f32_data(m, 6);
}

static void
add_push_rep(msg *m, uint8_t outcome)
{
    sr_wire_push_rep r = {outcome};
    uint8_t          b[1];
    check_encoded(sr_wire_push_rep_encode(&r, b, sizeof(b)));
    add_frame(m, b, 1);
}

static void
rep_push_accepted(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PUSH | SR_WIRE_REPLY, 0);
    start(m, &h);
    add_push_rep(m, SR_PUSH_ACCEPTED);
}

static void
rep_push_stale(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PUSH | SR_WIRE_REPLY, 0);
    start(m, &h);
    add_push_rep(m, SR_PUSH_STALE);
}

static void
rep_push_duplicate(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PUSH | SR_WIRE_REPLY, 0);
    start(m, &h);
    add_push_rep(m, SR_PUSH_DUPLICATE);
}

static void
rep_push_enonfinite(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PUSH | SR_WIRE_REPLY, SR_ENONFINITE);
    start(m, &h);
    add_text(m, "push 'dense/kernel': element 3 is NaN");
}

static void
req_push_sparse(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PUSH_SPARSE, 0);
    uint8_t        idx[24];
    sr_put_u64(idx, 0);
    sr_put_u64(idx + 8, 3);
    sr_put_u64(idx + 16, 3); /* repeated: summed */
    h.seq = 8;
    start(m, &h);
    add_pushdesc(m, "embedding", SR_FLOAT32, 3);
    add_frame(m, idx, sizeof(idx));
    add_f32_data(m, 3 * 4);
}

static void
req_push_sparse_empty(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PUSH_SPARSE, 0);
    h.seq = 9;
    start(m, &h);
    add_pushdesc(m, "embedding", SR_FLOAT64, 0);
    add_frame(m, NULL, 0);
    add_frame(m, NULL, 0);
}

static void
rep_push_sparse(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PUSH_SPARSE | SR_WIRE_REPLY, 0);
    start(m, &h);
    add_push_rep(m, SR_PUSH_ACCEPTED);
}

static void
req_token(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_TOKEN, 0);
    start(m, &h);
}

static void
rep_token(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_TOKEN | SR_WIRE_REPLY, 0);
    h.local_step = 13; /* the token's value */
    start(m, &h);
}

static void
rep_token_estale(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_TOKEN | SR_WIRE_REPLY, SR_ESTALE);
    h.incarnation = 4;
    start(m, &h);
    add_text(m, "request from incarnation 3, coordinator is 4");
}

static void
req_ping(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PING, 0);
    start(m, &h);
}

static void
rep_ping(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PING | SR_WIRE_REPLY, 0);
    start(m, &h);
    add_ping_rep(m, 1, INT64_MAX);
}

static void
req_status(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_STATUS, 0);
    h.incarnation = 0;
    h.task_index = -1;
    start(m, &h);
}

static void
rep_status(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_STATUS | SR_WIRE_REPLY, 0);
    start(m, &h);
    add_text(m, "{\"incarnation\":3,\"global_step\":12,\"model_ready\":true,"
                "\"replicas_to_aggregate\":2,\"total_replicas\":3}");
}

static void
req_bye(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_BYE, 0);
    start(m, &h);
}

static void
rep_bye(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_BYE | SR_WIRE_REPLY, 0);
    start(m, &h);
}

static void
rep_eproto(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PUSH | SR_WIRE_REPLY, SR_EPROTO);
    start(m, &h);
    add_text(m, "pushdesc: dtype 9 unknown (float32=1 float64=2 int32=3 int64=4)");
}

static void
req_pull_many(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PULL, 0);
    const char    *names[3] = {"dense/kernel", "dense/bias", "step_counter"};
    h.flags = SR_WIRE_F_MANY;
    start(m, &h);
    for (int i = 0; i < 3; i++) {
        uint8_t b[SR_WIRE_BODY_MAX];
        size_t  n = sr_wire_name_encode(names[i], b, sizeof(b));
        check_encoded(n);
        add_frame(m, b, n);
    }
}

/* Variables as a PULL-of-many or TOKEN reply carries them: two of them. */
static void
add_vars(msg *m, int64_t global_step)
{
    const int64_t    shape[2] = {2, 3};
    sr_wire_vars_hdr vh = {global_step, 2};
    sr_wire_vardesc  k = vardesc("dense/kernel", SR_FLOAT32, 2, shape);
    sr_wire_vardesc  b = vardesc("dense/bias", SR_FLOAT32, 1, &shape[1]);
    uint8_t          vb[16];
    size_t           n = sr_wire_vars_hdr_encode(&vh, vb, sizeof(vb));
    check_encoded(n);
    add_frame(m, vb, n);
    add_vardesc(m, &k);
    add_f32_data(m, 6);
    add_vardesc(m, &b);
    add_f32_data(m, 3);
}

static void
rep_pull_many(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PULL | SR_WIRE_REPLY, 0);
    h.flags = SR_WIRE_F_MANY;
    h.local_step = 12;
    start(m, &h);
    add_vars(m, 12);
}

static void
rep_token_vars(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_TOKEN | SR_WIRE_REPLY, 0);
    h.local_step = 13;
    start(m, &h);
    add_vars(m, 13);
}

/* Well-formed requests with hostile values (issue 20): the decoders take
 * them; the coordinator refuses them at admission (integrity_test). */
static void
req_hello_task_minus_one(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_HELLO, 0);
    h.incarnation = 0;
    h.task_index = -1;
    start(m, &h);
}

static void
req_hello_task_int_max(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_HELLO, 0);
    h.incarnation = 0;
    h.task_index = INT32_MAX;
    start(m, &h);
}

static void
req_token_task_int_min(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_TOKEN, 0);
    h.task_index = INT32_MIN;
    start(m, &h);
}

static void
req_push_hostile_steps(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_PUSH, 0);
    h.local_step = INT64_MIN;
    h.seq = UINT64_MAX;
    h.request_id = UINT64_MAX;
    start(m, &h);
    add_pushdesc(m, "dense/kernel", SR_FLOAT32, 24);
    add_f32_data(m, 6);
}

/* The chief ends the job (header only). */
static void
req_finish(msg *m)
{
    sr_wire_header h = hdr(SR_MSG_FINISH, 0);
    h.task_index = 0;
    start(m, &h);
}

/* A model of three tensors (MODEL), and its layout (two packs, one sparse
 * tensor of its own). */
static void
model_descs(sr_wire_vardesc d[3])
{
    memset(d, 0, 3 * sizeof(*d));
    snprintf(d[0].name, sizeof(d[0].name), "conv1.weight");
    d[0].dtype = SR_FLOAT32;
    d[0].ndim = 4;
    d[0].shape[0] = 8, d[0].shape[1] = 1, d[0].shape[2] = 3, d[0].shape[3] = 3;
    snprintf(d[1].name, sizeof(d[1].name), "bn1.running_mean");
    d[1].dtype = SR_FLOAT32;
    d[1].flags = SR_DECLARE_NOT_TRAINABLE;
    d[1].ndim = 1;
    d[1].shape[0] = 8;
    snprintf(d[2].name, sizeof(d[2].name), "emb");
    d[2].dtype = SR_FLOAT32;
    d[2].flags = SR_DECLARE_SPARSE;
    d[2].ndim = 2;
    d[2].shape[0] = 100, d[2].shape[1] = 4;
}

static void
req_model(msg *m)
{
    sr_wire_header  h = hdr(SR_MSG_MODEL, 0);
    sr_wire_vardesc d[3];
    uint8_t         b[4096];

    model_descs(d);
    start(m, &h);
    add_frame(m, b, sr_wire_desclist_encode(d, 3, b, sizeof(b)));
}

static void
rep_model(msg *m)
{
    sr_wire_header  h = hdr(SR_MSG_MODEL | SR_WIRE_REPLY, 0);
    sr_wire_vardesc p[2];
    sr_wire_place   pl[3] = {{0, 0}, {1, 0}, {SR_WIRE_PLACE_ALONE, 0}};
    uint8_t         b[4096], c[64];

    memset(p, 0, sizeof(p));
    snprintf(p[0].name, sizeof(p[0].name), "syncrep:pack/0");
    p[0].dtype = SR_FLOAT32;
    p[0].ndim = 1;
    p[0].shape[0] = 80;
    snprintf(p[1].name, sizeof(p[1].name), "syncrep:pack/1");
    p[1].dtype = SR_FLOAT32;
    p[1].flags = SR_DECLARE_NOT_TRAINABLE;
    p[1].ndim = 1;
    p[1].shape[0] = 16;
    start(m, &h);
    add_frame(m, b, sr_wire_desclist_encode(p, 2, b, sizeof(b)));
    add_frame(m, c, sr_wire_places_encode(pl, 3, c, sizeof(c)));
}

static const struct {
    const char *name;
    builder     build;
} seeds[] = {
    {"req-model", req_model},
    {"rep-model", rep_model},
    {"req-hello", req_hello},
    {"rep-hello", rep_hello},
    {"rep-hello-edge", rep_hello_edge},
    {"req-declare", req_declare},
    {"req-declare-no-init", req_declare_no_init},
    {"req-declare-scalar", req_declare_scalar},
    {"req-declare-ndim8-empty", req_declare_ndim8_empty},
    {"rep-declare", rep_declare},
    {"rep-declare-eexist", rep_declare_eexist},
    {"req-ready-mark", req_ready_mark},
    {"req-ready-ask", req_ready_ask},
    {"rep-ready", rep_ready},
    {"rep-declare-enotready", rep_declare_enotready},
    {"req-pull", req_pull},
    {"req-pull-long-name", req_pull_long_name},
    {"rep-pull", rep_pull},
    {"rep-pull-enoent", rep_pull_enoent},
    {"req-push", req_push},
    {"req-push-resend", req_push_resend},
    {"req-push-partition", req_push_partition},
    {"rep-push-accepted", rep_push_accepted},
    {"rep-push-stale", rep_push_stale},
    {"rep-push-duplicate", rep_push_duplicate},
    {"rep-push-enonfinite", rep_push_enonfinite},
    {"req-push-sparse", req_push_sparse},
    {"req-push-sparse-empty", req_push_sparse_empty},
    {"rep-push-sparse", rep_push_sparse},
    {"req-token", req_token},
    {"rep-token", rep_token},
    {"rep-token-estale", rep_token_estale},
    {"req-ping", req_ping},
    {"rep-ping", rep_ping},
    {"req-status", req_status},
    {"rep-status", rep_status},
    {"req-bye", req_bye},
    {"rep-bye", rep_bye},
    {"rep-eproto", rep_eproto},
    {"req-declare-part", req_declare_part},
    {"req-pull-many", req_pull_many},
    {"rep-pull-many", rep_pull_many},
    {"rep-token-vars", rep_token_vars},
    {"req-hello-task-minus-one", req_hello_task_minus_one},
    {"req-hello-task-int-max", req_hello_task_int_max},
    {"req-token-task-int-min", req_token_task_int_min},
    {"req-push-hostile-steps", req_push_hostile_steps},
    {"req-finish", req_finish},
};
#define NSEEDS (sizeof(seeds) / sizeof(seeds[0]))

/* ---- variants -------------------------------------------------------- */

/* The offset of frame `k`'s first data byte, or 0 if m has no such frame. */
static size_t
frame_at(const msg *m, int k, size_t *len)
{
    size_t off = 0;
    for (int i = 0; off + 2 <= m->len; i++) {
        size_t n = sr_get_u16(m->buf + off);
        if (i == k) {
            *len = n;
            return off + 2;
        }
        off += 2 + n;
    }
    return 0;
}

/* The file cut short: inside the header, inside frame 1's length, and one
 * byte short of the end. */
static void
emit_file_truncations(const char *name, const msg *m)
{
    char         fname[256];
    const size_t cuts[] = {2 + 4, 2 + SR_WIRE_HEADER_BYTES + 1, m->len - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        if (cuts[i] >= m->len) {
            continue;
        }
        snprintf(fname, sizeof(fname), "trunc-%s-at-%zu", name, cuts[i]);
        write_bytes(fname, m->buf, cuts[i]);
    }
}

/* Frame 1 one byte shorter (and frame 0 one byte shorter), still framed. */
static void
emit_frame_truncation(const char *name, const msg *m, int k)
{
    char   fname[256];
    msg    t;
    size_t len, at = frame_at(m, k, &len);

    if (at == 0 || len == 0) {
        return;
    }
    t.len = 0;
    memcpy(t.buf, m->buf, at - 2);
    t.len = at - 2;
    add_frame(&t, m->buf + at, len - 1);
    memcpy(t.buf + t.len, m->buf + at + len, m->len - (at + len));
    t.len += m->len - (at + len);
    snprintf(fname, sizeof(fname), "trunc-frame%d-%s", k, name);
    write_bytes(fname, t.buf, t.len); /* an error text one byte short is still valid */
}

/* Frame 1 with one extra byte. */
static void
emit_frame_trailing(const char *name, const msg *m, int k)
{
    char          fname[256];
    msg           t;
    size_t        len, at = frame_at(m, k, &len);
    uint8_t       grown[SR_WIRE_BODY_MAX + 1024];
    const uint8_t extra = 0;

    if (at == 0 || len + 1 > sizeof(grown)) {
        return;
    }
    memcpy(grown, m->buf + at, len);
    grown[len] = extra;
    memcpy(t.buf, m->buf, at - 2);
    t.len = at - 2;
    add_frame(&t, grown, len + 1);
    memcpy(t.buf + t.len, m->buf + at + len, m->len - (at + len));
    t.len += m->len - (at + len);
    snprintf(fname, sizeof(fname), "trailing-frame%d-%s", k, name);
    emit(fname, &t);
}

/* A few bytes flipped by a fixed LCG, so the same files come out every run. */
static void
emit_garbled(const char *name, const msg *m, uint32_t seed)
{
    char     fname[256];
    msg      g = *m;
    uint32_t x = seed;

    for (int i = 0; i < 3; i++) {
        x = x * 1103515245u + 12345u;
        size_t at = (x >> 8) % g.len;
        x = x * 1103515245u + 12345u;
        g.buf[at] ^= (uint8_t)(1u << ((x >> 16) % 8));
    }
    snprintf(fname, sizeof(fname), "garbled-%s-%u", name, (unsigned)seed);
    write_bytes(fname, g.buf, g.len);
}

/* One byte of frame `k` set to `v`. */
static void
emit_poke(const char *fname, builder build, int k, size_t byte, uint8_t v)
{
    msg    m;
    size_t len, at;

    build(&m);
    at = frame_at(&m, k, &len);
    if (at == 0 || byte >= len) {
        fprintf(stderr, "gen_corpus: %s: no byte %zu in frame %d\n", fname, byte, k);
        failed = 1;
        return;
    }
    m.buf[at + byte] = v;
    emit(fname, &m);
}

/* A DECLARE of a float32[2] named `name` (the chief's); and a PULL and a
 * PUSH of it.  Well-formed for the codec; the coordinator takes them only
 * when the name follows the rule (core/name.h). */
static void
emit_named(const char *tag, const char *name, int good)
{
    const int64_t   shape[1] = {2};
    sr_wire_header  h = hdr(SR_MSG_DECLARE, 0);
    sr_wire_vardesc v = vardesc(name, SR_FLOAT32, 1, shape);
    uint8_t         b[SR_WIRE_BODY_MAX];
    char            fname[256];
    msg             m;

    h.task_index = 0;
    start(&m, &h);
    add_vardesc(&m, &v);
    add_f32_data(&m, 2);
    snprintf(fname, sizeof(fname), "%s-req-declare-name-%s", good ? "valid" : "bad", tag);
    emit(fname, &m);
    h = hdr(SR_MSG_PULL, 0);
    start(&m, &h);
    size_t n = sr_wire_name_encode(name, b, sizeof(b));
    check_encoded(n);
    add_frame(&m, b, n);
    snprintf(fname, sizeof(fname), "%s-req-pull-name-%s", good ? "valid" : "bad", tag);
    emit(fname, &m);
    h = hdr(SR_MSG_PUSH, 0);
    h.seq = 9;
    start(&m, &h);
    add_pushdesc(&m, name, SR_FLOAT32, 8);
    add_f32_data(&m, 2);
    snprintf(fname, sizeof(fname), "%s-req-push-name-%s", good ? "valid" : "bad", tag);
    emit(fname, &m);
}

/* Names are data: what the rule lets through and what it refuses. */
static void
emit_names(void)
{
    emit_named("pytorch", "module.encoder.layers.11.self_attn.in_proj_bias", 1);
    emit_named("quotes", "with spaces, \"quotes\" and \\backslashes\\", 1);
    emit_named("utf8",
               "Gewichte/Gr\xc3\xb6\xc3\x9f"
               "e/\xe9\x87\x8d\xe3\x81\xbf/\xf0\x9f\x94\xa5",
               1);
    emit_named("newline", "a\nCOORD-FAKE forged=1", 0);
    emit_named("escape", "\x1b[31mred", 0);
    emit_named("del", "del\x7f", 0);
    emit_named("c1", "c1\xc2\x85", 0);
    emit_named("ff", "ff\xff", 0);
    emit_named("overlong", "\xc0\xaf", 0);
    emit_named("surrogate", "\xed\xa0\x80", 0);
    emit_named("above-10ffff", "\xf4\x90\x80\x80", 0);
    emit_named("cut", "cut\xe9\x87", 0);
}

static void
emit_malformed(void)
{
    msg     m;
    uint8_t b[SR_WIRE_HEADER_BYTES + 1];
    size_t  name_len = strlen("dense/kernel");

    /* header */
    emit_poke("bad-header-magic", req_hello, 0, 0, 'X');
    emit_poke("bad-header-magic-byte3", req_hello, 0, 3, 'S');
    emit_poke("bad-header-version-0", req_hello, 0, 4, 0);
    emit_poke("bad-header-version-1", req_ping, 0, 4, 1);
    emit_poke("bad-header-version-3", req_ping, 0, 4, 3);
    emit_poke("bad-header-type-0", req_hello, 0, 5, 0);
    emit_poke("bad-header-type-15", req_hello, 0, 5, SR_MSG_CURSOR + 1);
    emit_poke("bad-header-type-reply-0", rep_ping, 0, 5, SR_WIRE_REPLY);
    emit_poke("bad-header-type-0xff", rep_ping, 0, 5, 0xff);
    req_token(&m);
    memcpy(b, m.buf + 2, SR_WIRE_HEADER_BYTES);
    m.len = 0;
    add_frame(&m, b, SR_WIRE_HEADER_BYTES - 1);
    emit("bad-header-55-bytes", &m);
    b[SR_WIRE_HEADER_BYTES] = 0;
    m.len = 0;
    add_frame(&m, b, SR_WIRE_HEADER_BYTES + 1);
    emit("bad-header-57-bytes", &m);
    m.len = 0;
    emit("bad-empty", &m);

    /* names and descriptors (frame 1) */
    emit_poke("bad-name-len0", req_pull, 1, 0, 0);
    emit_poke("bad-name-nul", req_pull, 1, 4, 0);
    emit_poke("bad-name-len-too-big", req_pull, 1, 1, 1);
    emit_poke("bad-vardesc-dtype-0", req_declare, 1, 2 + name_len, 0);
    emit_poke("bad-vardesc-dtype-5", req_declare, 1, 2 + name_len, 5);
    emit_poke("bad-vardesc-ndim-9", req_declare, 1, 2 + name_len + 2, SR_MAX_NDIM + 1);
    emit_poke("bad-vardesc-negative-dim", req_declare, 1, 2 + name_len + 3 + 7, 0xff);
    emit_poke("bad-vardesc-name-nul", rep_pull, 1, 2, 0);
    emit_poke("bad-pushdesc-dtype", req_push, 1, 2 + name_len, 0x7f);
    emit_poke("bad-pushdesc-name-len0", req_push, 1, 0, 0);
    emit_poke("bad-hello-rep-ready-2", rep_hello, 1, 8, 2);
    emit_poke("bad-hello-rep-r-0", rep_hello, 1, 9, 0);
    emit_poke("bad-hello-rep-n-negative", rep_hello, 1, 16, 0x80);
    emit_poke("bad-ready-req-mark-2", req_ready_mark, 1, 0, 2);
    emit_poke("bad-ping-rep-ready-2", rep_ping, 1, 0, 2);
    emit_poke("bad-push-rep-outcome-3", rep_push_stale, 1, 0, 3);

    /* Well-formed frames, inconsistent message: data sizes disagree with
     * the descriptor (the coordinator answers SR_EINVAL). */
    emit_poke("bad-push-count-mismatch", req_push, 1, 2 + name_len + 1, 25);
    emit_poke("bad-sparse-count-mismatch", req_push_sparse, 1, 2 + strlen("embedding") + 1, 4);
    emit_poke("bad-declare-shape-mismatch", req_declare, 1, 2 + name_len + 3, 3);
    emit_poke("bad-declare-part-count-mismatch", req_declare_part, 2, 2 + name_len + 1, 16);
    emit_poke("bad-declare-part-other-name", req_declare_part, 2, 2, 'x');
}

/* CURSOR (issue 24): a request gives the worker's data cursor (opaque
 * bytes, at most SR_WIRE_CURSOR_MAX) or, with no body, asks for the one to
 * resume from; the reply carries it, or nothing.  Made here rather than in
 * seeds[]: one extra byte in a cursor is still a cursor, which the trailing
 * variant expects to be refused. */
static void
cursor_msg(msg *m, int reply, const void *cur, size_t len, int nframes)
{
    sr_wire_header h = hdr(reply ? SR_MSG_CURSOR | SR_WIRE_REPLY : SR_MSG_CURSOR, 0);
    start(m, &h);
    for (int i = 0; i < nframes; i++) {
        add_frame(m, cur, len);
    }
}

static void
emit_cursor(void)
{
    static const char cur[] = "{\"epoch\":2,\"pos\":48,\"seed\":5,\"n\":96,\"tasks\":2}";
    static uint8_t    big[SR_WIRE_CURSOR_MAX + 1];
    static const struct {
        const char *name;
        int         reply;
        size_t      len; /* of big; 0: cur */
        int         nframes;
    } cases[] = {
        {"valid-req-cursor-set", 0, 0, 1},
        {"valid-req-cursor-ask", 0, 0, 0},
        {"valid-req-cursor-set-empty", 0, 1, 1}, /* len 1 - 1: an empty cursor */
        {"valid-req-cursor-set-max", 0, SR_WIRE_CURSOR_MAX + 1, 1},
        {"valid-rep-cursor", 1, 0, 1},
        {"valid-rep-cursor-none", 1, 0, 0},
        {"bad-req-cursor-over-max", 0, SR_WIRE_CURSOR_MAX + 2, 1},
        {"bad-req-cursor-two-frames", 0, 0, 2},
        {"bad-rep-cursor-over-max", 1, SR_WIRE_CURSOR_MAX + 2, 1},
        {"bad-rep-cursor-two-frames", 1, 0, 2},
    };
    msg m;

    for (size_t i = 0; i < sizeof(big); i++) {
        big[i] = (uint8_t)(i * 7u); /* opaque: any byte, NUL included */
    }
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (cases[i].len > 0) {
            cursor_msg(&m, cases[i].reply, big, cases[i].len - 1, cases[i].nframes);
        } else {
            cursor_msg(&m, cases[i].reply, cur, sizeof(cur) - 1, cases[i].nframes);
        }
        emit(cases[i].name, &m);
        if (i < 2 || i == 4) { /* the usual variants of the three common ones */
            const char *base = cases[i].name + strlen("valid-");
            emit_file_truncations(base, &m);
            emit_frame_truncation(base, &m, 0);
            emit_garbled(base, &m, (uint32_t)(301 + 2 * i));
            emit_garbled(base, &m, (uint32_t)(302 + 2 * i));
        }
    }
}

int
main(int argc, char **argv)
{
    msg m;

    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    outdir = argv[1];
    for (size_t i = 0; i < NSEEDS; i++) {
        char fname[256];
        seeds[i].build(&m);
        snprintf(fname, sizeof(fname), "valid-%s", seeds[i].name);
        emit(fname, &m);
        emit_file_truncations(seeds[i].name, &m);
        emit_frame_truncation(seeds[i].name, &m, 0);
        emit_frame_truncation(seeds[i].name, &m, 1);
        emit_frame_trailing(seeds[i].name, &m, 1);
        emit_garbled(seeds[i].name, &m, (uint32_t)(2 * i + 1));
        emit_garbled(seeds[i].name, &m, (uint32_t)(2 * i + 2));
    }
    emit_malformed();
    emit_names();
    emit_cursor();
    printf("gen_corpus: wrote %d files to %s\n", written, outdir);
    return failed;
}
