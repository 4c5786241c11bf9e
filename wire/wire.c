/*
 * The wire codec: fixed-width little-endian fields, every length checked
 * before it is read, no allocation.  Decoders read through a bounds-checked
 * cursor into a local copy and write *out only when the frame was consumed
 * exactly, so a failed decode changes nothing.  Encoders refuse (return 0)
 * everything the matching decoder would reject, so whatever they write
 * decodes, and decode -> encode gives back the same bytes (the fuzz target
 * in tests/fuzz/wire/ checks both).  Protocol reference: docs/protocol.md.
 */
#include "wire/wire.h"

#include <inttypes.h>

#include <string.h>

#include "core/bytes.h"
#include "core/name.h"

/* Header field offsets (docs/protocol.md, "The header"). */
enum {
    HDR_MAGIC = 0,
    HDR_VERSION = 4,
    HDR_TYPE = 5,
    HDR_FLAGS = 6,
    HDR_REQUEST_ID = 8,
    HDR_INCARNATION = 16,
    HDR_CLIENT_ID = 24,
    HDR_TASK_INDEX = 32,
    HDR_STATUS = 36,
    HDR_LOCAL_STEP = 40,
    HDR_SEQ = 48,
};
/* Tensor frames and sparse row indices travel as raw little-endian bytes:
 * syncrep runs only on little-endian hosts. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "syncrep needs a little-endian host");
_Static_assert(HDR_SEQ + 8 == SR_WIRE_HEADER_BYTES, "header fields must fill 56 bytes");

/* Sizes of the fixed-size bodies. */
#define HELLO_REP_BYTES                                                                     \
    33                     /* i64 global_step, u8 model_ready, i32 R, i32 N, u64 max bytes, \
                              u64 partition bytes */
#define READY_REQ_BYTES 1  /* u8 mark */
#define PING_REP_BYTES  9  /* u8 model_ready, i64 global_step */
#define PUSH_REP_BYTES  1  /* u8 outcome */
#define VARS_HDR_BYTES  12 /* i64 global_step, u32 nvars */
#define HAVE_BYTES      8  /* i64 global_step */

#define MAX_TYPE SR_MSG_CURSOR

_Static_assert(SR_WIRE_MAX_NAME == SR_NAME_MAX, "one limit for names: core/name.h");
_Static_assert(2 + SR_WIRE_MAX_NAME + 3 + 8 * SR_MAX_NDIM <= SR_WIRE_BODY_MAX,
               "SR_WIRE_BODY_MAX must bound the largest vardesc");
_Static_assert(HELLO_REP_BYTES <= SR_WIRE_BODY_MAX, "SR_WIRE_BODY_MAX must bound hello_rep");

/* A bounds-checked read cursor over one frame.  `what` names the frame in
 * failure details ("vardesc: ..."). */
typedef struct {
    const uint8_t *buf;
    size_t         len; /* bytes in buf */
    size_t         off; /* bytes consumed */
    const char    *what;
} reader;

/* Two's complement reinterpretation without relying on an out-of-range
 * unsigned -> signed conversion. */
static int64_t
u64_to_i64(uint64_t v)
{
    int64_t s;
    memcpy(&s, &v, sizeof(s));
    return s;
}

static uint64_t
i64_to_u64(int64_t v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof(u));
    return u;
}

static int32_t
u32_to_i32(uint32_t v)
{
    int32_t s;
    memcpy(&s, &v, sizeof(s));
    return s;
}

static uint32_t
i32_to_u32(int32_t v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof(u));
    return u;
}

static sr_err
check_args(const void *buf, size_t len, const void *out, const char *what)
{
    if (out == NULL || (buf == NULL && len != 0)) {
        return sr_fail(SR_EINVAL, "%s: NULL argument", what);
    }
    return SR_OK;
}

static sr_err
rd_need(const reader *r, size_t n, const char *field)
{
    if (r->len - r->off < n) {
        return sr_fail(SR_EPROTO, "%s: truncated at %s (offset %zu needs %zu bytes, %zu left)",
                       r->what, field, r->off, n, r->len - r->off);
    }
    return SR_OK;
}

static sr_err
rd_u8(reader *r, const char *field, uint8_t *v)
{
    sr_err rc;

    if ((rc = rd_need(r, 1, field)) != SR_OK) {
        return rc;
    }
    *v = r->buf[r->off];
    r->off += 1;
    return SR_OK;
}

static sr_err
rd_u64(reader *r, const char *field, uint64_t *v)
{
    sr_err rc;

    if ((rc = rd_need(r, 8, field)) != SR_OK) {
        return rc;
    }
    *v = sr_get_u64(r->buf + r->off);
    r->off += 8;
    return SR_OK;
}

static sr_err
rd_i64(reader *r, const char *field, int64_t *v)
{
    uint64_t u;
    sr_err   rc;

    if ((rc = rd_u64(r, field, &u)) != SR_OK) {
        return rc;
    }
    *v = u64_to_i64(u);
    return SR_OK;
}

/* u16 length, then 1..SR_WIRE_MAX_NAME bytes without a NUL; dst gets a
 * NUL-terminated copy. */
static sr_err
rd_name(reader *r, char dst[SR_WIRE_MAX_NAME + 1])
{
    const uint8_t *nul;
    uint16_t       n;
    sr_err         rc;

    if ((rc = rd_need(r, 2, "name length")) != SR_OK) {
        return rc;
    }
    n = sr_get_u16(r->buf + r->off);
    if (n == 0 || n > SR_WIRE_MAX_NAME) {
        return sr_fail(SR_EPROTO, "%s: name length %u not in [1, %d]", r->what, (unsigned)n,
                       SR_WIRE_MAX_NAME);
    }
    r->off += 2;
    if ((rc = rd_need(r, n, "name")) != SR_OK) {
        return rc;
    }
    if ((nul = memchr(r->buf + r->off, 0, n)) != NULL) {
        return sr_fail(SR_EPROTO, "%s: name has a NUL byte at %zu of %u", r->what,
                       (size_t)(nul - (r->buf + r->off)), (unsigned)n);
    }
    memcpy(dst, r->buf + r->off, n);
    dst[n] = '\0';
    r->off += n;
    return SR_OK;
}

static sr_err
rd_dtype(reader *r, uint8_t *dtype)
{
    sr_err rc;

    if ((rc = rd_u8(r, "dtype", dtype)) != SR_OK) {
        return rc;
    }
    if (sr_dtype_size(*dtype) == 0) {
        return sr_fail(SR_EPROTO, "%s: dtype %u unknown (float32=%d float64=%d int32=%d int64=%d)",
                       r->what, (unsigned)*dtype, SR_FLOAT32, SR_FLOAT64, SR_INT32, SR_INT64);
    }
    return SR_OK;
}

/* A body is exactly its fields: anything after them is a framing error. */
static sr_err
rd_end(const reader *r)
{
    if (r->off != r->len) {
        return sr_fail(SR_EPROTO, "%s: %zu trailing bytes after %zu", r->what, r->len - r->off,
                       r->off);
    }
    return SR_OK;
}

/* Fixed-size bodies: one length check covers truncation and trailing bytes. */
static sr_err
check_fixed(size_t len, size_t want, const char *what)
{
    if (len != want) {
        return sr_fail(SR_EPROTO, "%s: length %zu != %zu", what, len, want);
    }
    return SR_OK;
}

static sr_err
check_bool(uint8_t v, const char *what, const char *field)
{
    if (v > 1) {
        return sr_fail(SR_EPROTO, "%s: %s %u not 0 or 1", what, field, (unsigned)v);
    }
    return SR_OK;
}

/* Length of a valid name (1..SR_WIRE_MAX_NAME bytes before its NUL), else 0.
 * Reads at most SR_WIRE_MAX_NAME + 1 bytes, so an unterminated
 * name[SR_WIRE_MAX_NAME + 1] array is refused, never overrun. */
static size_t
name_length(const char *name)
{
    size_t n = 0;

    if (name == NULL) {
        return 0;
    }
    while (n <= SR_WIRE_MAX_NAME && name[n] != '\0') {
        n++;
    }
    return n > SR_WIRE_MAX_NAME ? 0 : n;
}

static size_t
put_name(uint8_t *p, const char *name, size_t n)
{
    sr_put_u16(p, (uint16_t)n);
    memcpy(p + 2, name, n);
    return 2 + n;
}

/* ---- header ---------------------------------------------------------- */

void
sr_wire_header_encode(const sr_wire_header *h, uint8_t out[SR_WIRE_HEADER_BYTES])
{
    sr_put_u32(out + HDR_MAGIC, SR_WIRE_MAGIC);
    out[HDR_VERSION] = SR_WIRE_VERSION;
    out[HDR_TYPE] = h->type;
    sr_put_u16(out + HDR_FLAGS, h->flags);
    sr_put_u64(out + HDR_REQUEST_ID, h->request_id);
    sr_put_u64(out + HDR_INCARNATION, h->incarnation);
    sr_put_u64(out + HDR_CLIENT_ID, h->client_id);
    sr_put_u32(out + HDR_TASK_INDEX, i32_to_u32(h->task_index));
    sr_put_u32(out + HDR_STATUS, i32_to_u32(h->status));
    sr_put_u64(out + HDR_LOCAL_STEP, i64_to_u64(h->local_step));
    sr_put_u64(out + HDR_SEQ, h->seq);
}

sr_err
sr_wire_header_decode(const uint8_t *buf, size_t len, sr_wire_header *out)
{
    sr_wire_header h;
    uint32_t       magic;
    unsigned       base;
    sr_err         rc;

    if ((rc = check_args(buf, len, out, "header")) != SR_OK) {
        return rc;
    }
    if (len != SR_WIRE_HEADER_BYTES) {
        return sr_fail(SR_EPROTO, "header: length %zu != %d", len, SR_WIRE_HEADER_BYTES);
    }
    if ((magic = sr_get_u32(buf + HDR_MAGIC)) != SR_WIRE_MAGIC) {
        return sr_fail(SR_EPROTO, "header: magic 0x%08x != 0x%08x", (unsigned)magic,
                       (unsigned)SR_WIRE_MAGIC);
    }
    if (buf[HDR_VERSION] != SR_WIRE_VERSION) {
        return sr_fail(SR_EPROTO, "header: version %u != %d", (unsigned)buf[HDR_VERSION],
                       SR_WIRE_VERSION);
    }
    base = buf[HDR_TYPE] & ~SR_WIRE_REPLY;
    if (base < SR_MSG_HELLO || base > MAX_TYPE) {
        return sr_fail(SR_EPROTO, "header: type 0x%02x unknown (0x%02x without the reply bit)",
                       (unsigned)buf[HDR_TYPE], base);
    }
    memset(&h, 0, sizeof(h));
    h.type = buf[HDR_TYPE];
    h.flags = sr_get_u16(buf + HDR_FLAGS);
    h.request_id = sr_get_u64(buf + HDR_REQUEST_ID);
    h.incarnation = sr_get_u64(buf + HDR_INCARNATION);
    h.client_id = sr_get_u64(buf + HDR_CLIENT_ID);
    h.task_index = u32_to_i32(sr_get_u32(buf + HDR_TASK_INDEX));
    h.status = u32_to_i32(sr_get_u32(buf + HDR_STATUS));
    h.local_step = u64_to_i64(sr_get_u64(buf + HDR_LOCAL_STEP));
    h.seq = sr_get_u64(buf + HDR_SEQ);
    *out = h;
    return SR_OK;
}

/* ---- name ------------------------------------------------------------ */

size_t
sr_wire_name_encode(const char *name, uint8_t *out, size_t cap)
{
    size_t n = name_length(name);

    if (n == 0 || out == NULL || cap < 2 + n) {
        return 0;
    }
    return put_name(out, name, n);
}

sr_err
sr_wire_name_decode(const uint8_t *buf, size_t len, sr_wire_name *out)
{
    reader       r = {buf, len, 0, "name"};
    sr_wire_name v;
    sr_err       rc;

    if ((rc = check_args(buf, len, out, r.what)) != SR_OK) {
        return rc;
    }
    memset(&v, 0, sizeof(v));
    if ((rc = rd_name(&r, v.name)) != SR_OK || (rc = rd_end(&r)) != SR_OK) {
        return rc;
    }
    *out = v;
    return SR_OK;
}

/* ---- vardesc --------------------------------------------------------- */

size_t
sr_wire_vardesc_encode(const sr_wire_vardesc *v, uint8_t *out, size_t cap)
{
    size_t n, need, off;

    if (v == NULL || out == NULL || (n = name_length(v->name)) == 0) {
        return 0;
    }
    if (sr_dtype_size(v->dtype) == 0 || v->ndim > SR_MAX_NDIM) {
        return 0;
    }
    for (int i = 0; i < v->ndim; i++) {
        if (v->shape[i] < 0) {
            return 0;
        }
    }
    need = 2 + n + 3 + 8 * (size_t)v->ndim;
    if (cap < need) {
        return 0;
    }
    off = put_name(out, v->name, n);
    out[off++] = v->dtype;
    out[off++] = v->flags;
    out[off++] = v->ndim;
    for (int i = 0; i < v->ndim; i++) {
        sr_put_u64(out + off, i64_to_u64(v->shape[i]));
        off += 8;
    }
    SR_ASSERT(off == need);
    return off;
}

sr_err
sr_wire_vardesc_decode(const uint8_t *buf, size_t len, sr_wire_vardesc *out)
{
    reader          r = {buf, len, 0, "vardesc"};
    sr_wire_vardesc v;
    sr_err          rc;

    if ((rc = check_args(buf, len, out, r.what)) != SR_OK) {
        return rc;
    }
    memset(&v, 0, sizeof(v));
    if ((rc = rd_name(&r, v.name)) != SR_OK || (rc = rd_dtype(&r, &v.dtype)) != SR_OK ||
        (rc = rd_u8(&r, "flags", &v.flags)) != SR_OK ||
        (rc = rd_u8(&r, "ndim", &v.ndim)) != SR_OK) {
        return rc;
    }
    if (v.ndim > SR_MAX_NDIM) {
        return sr_fail(SR_EPROTO, "vardesc: ndim %u > %d", (unsigned)v.ndim, SR_MAX_NDIM);
    }
    for (int i = 0; i < v.ndim; i++) {
        if ((rc = rd_i64(&r, "shape", &v.shape[i])) != SR_OK) {
            return rc;
        }
        if (v.shape[i] < 0) {
            return sr_fail(SR_EPROTO, "vardesc: shape[%d] = %lld < 0", i, (long long)v.shape[i]);
        }
    }
    if ((rc = rd_end(&r)) != SR_OK) {
        return rc;
    }
    *out = v;
    return SR_OK;
}

/* ---- pushdesc -------------------------------------------------------- */

size_t
sr_wire_pushdesc_encode(const sr_wire_pushdesc *p, uint8_t *out, size_t cap)
{
    size_t n, off;

    if (p == NULL || out == NULL || (n = name_length(p->name)) == 0) {
        return 0;
    }
    if (sr_dtype_size(p->dtype) == 0 || cap < 2 + n + 1 + 16) {
        return 0;
    }
    off = put_name(out, p->name, n);
    out[off++] = p->dtype;
    sr_put_u64(out + off, p->count);
    sr_put_u64(out + off + 8, p->offset);
    return off + 16;
}

sr_err
sr_wire_pushdesc_decode(const uint8_t *buf, size_t len, sr_wire_pushdesc *out)
{
    reader           r = {buf, len, 0, "pushdesc"};
    sr_wire_pushdesc v;
    sr_err           rc;

    if ((rc = check_args(buf, len, out, r.what)) != SR_OK) {
        return rc;
    }
    memset(&v, 0, sizeof(v));
    if ((rc = rd_name(&r, v.name)) != SR_OK || (rc = rd_dtype(&r, &v.dtype)) != SR_OK ||
        (rc = rd_u64(&r, "count", &v.count)) != SR_OK ||
        (rc = rd_u64(&r, "offset", &v.offset)) != SR_OK || (rc = rd_end(&r)) != SR_OK) {
        return rc;
    }
    *out = v;
    return SR_OK;
}

/* ---- hello reply ----------------------------------------------------- */

size_t
sr_wire_hello_rep_encode(const sr_wire_hello_rep *r, uint8_t *out, size_t cap)
{
    if (r == NULL || out == NULL || cap < HELLO_REP_BYTES) {
        return 0;
    }
    if (r->model_ready > 1 || r->replicas_to_aggregate < 1 || r->total_replicas < 1) {
        return 0;
    }
    sr_put_u64(out, i64_to_u64(r->global_step));
    out[8] = r->model_ready;
    sr_put_u32(out + 9, i32_to_u32(r->replicas_to_aggregate));
    sr_put_u32(out + 13, i32_to_u32(r->total_replicas));
    sr_put_u64(out + 17, r->max_message_bytes);
    sr_put_u64(out + 25, r->partition_bytes);
    return HELLO_REP_BYTES;
}

sr_err
sr_wire_hello_rep_decode(const uint8_t *buf, size_t len, sr_wire_hello_rep *out)
{
    sr_wire_hello_rep v;
    sr_err            rc;

    if ((rc = check_args(buf, len, out, "hello_rep")) != SR_OK ||
        (rc = check_fixed(len, HELLO_REP_BYTES, "hello_rep")) != SR_OK ||
        (rc = check_bool(buf[8], "hello_rep", "model_ready")) != SR_OK) {
        return rc;
    }
    memset(&v, 0, sizeof(v));
    v.global_step = u64_to_i64(sr_get_u64(buf));
    v.model_ready = buf[8];
    v.replicas_to_aggregate = u32_to_i32(sr_get_u32(buf + 9));
    v.total_replicas = u32_to_i32(sr_get_u32(buf + 13));
    v.max_message_bytes = sr_get_u64(buf + 17);
    v.partition_bytes = sr_get_u64(buf + 25);
    if (v.replicas_to_aggregate < 1 || v.total_replicas < 1) {
        return sr_fail(SR_EPROTO, "hello_rep: R %d, N %d (both must be >= 1)",
                       (int)v.replicas_to_aggregate, (int)v.total_replicas);
    }
    *out = v;
    return SR_OK;
}

uint64_t
sr_wire_partition_rows(uint64_t nbytes, uint64_t rows, uint64_t partition_bytes)
{
    if (partition_bytes == 0 || nbytes <= partition_bytes || rows <= 1) {
        return 0;
    }
    uint64_t row_bytes = nbytes / rows;
    uint64_t per = row_bytes > 0 ? partition_bytes / row_bytes : rows;
    per = per > 0 ? per : 1;
    return per >= rows ? 0 : per;
}

sr_wire_layout
sr_wire_partition_layout(uint64_t nbytes, int ndim, int64_t shape0, uint64_t partition_bytes)
{
    sr_wire_layout l;
    uint64_t       per;

    l.rows = ndim > 0 && shape0 > 0 ? (uint64_t)shape0 : 1;
    per = sr_wire_partition_rows(nbytes, l.rows, partition_bytes);
    l.part_rows = per ? per : l.rows;
    l.nparts = (l.rows + l.part_rows - 1) / l.part_rows;
    return l;
}

/* ---- ready request --------------------------------------------------- */

size_t
sr_wire_ready_req_encode(const sr_wire_ready_req *r, uint8_t *out, size_t cap)
{
    if (r == NULL || out == NULL || cap < READY_REQ_BYTES || r->mark > 1) {
        return 0;
    }
    out[0] = r->mark;
    return READY_REQ_BYTES;
}

sr_err
sr_wire_ready_req_decode(const uint8_t *buf, size_t len, sr_wire_ready_req *out)
{
    sr_err rc;

    if ((rc = check_args(buf, len, out, "ready_req")) != SR_OK ||
        (rc = check_fixed(len, READY_REQ_BYTES, "ready_req")) != SR_OK ||
        (rc = check_bool(buf[0], "ready_req", "mark")) != SR_OK) {
        return rc;
    }
    out->mark = buf[0];
    return SR_OK;
}

/* ---- ready / ping reply ---------------------------------------------- */

size_t
sr_wire_ping_rep_encode(const sr_wire_ping_rep *r, uint8_t *out, size_t cap)
{
    if (r == NULL || out == NULL || cap < PING_REP_BYTES || r->model_ready > 1) {
        return 0;
    }
    out[0] = r->model_ready;
    sr_put_u64(out + 1, i64_to_u64(r->global_step));
    return PING_REP_BYTES;
}

sr_err
sr_wire_ping_rep_decode(const uint8_t *buf, size_t len, sr_wire_ping_rep *out)
{
    sr_wire_ping_rep v;
    sr_err           rc;

    if ((rc = check_args(buf, len, out, "ping_rep")) != SR_OK ||
        (rc = check_fixed(len, PING_REP_BYTES, "ping_rep")) != SR_OK ||
        (rc = check_bool(buf[0], "ping_rep", "model_ready")) != SR_OK) {
        return rc;
    }
    memset(&v, 0, sizeof(v));
    v.model_ready = buf[0];
    v.global_step = u64_to_i64(sr_get_u64(buf + 1));
    *out = v;
    return SR_OK;
}

/* ---- piggybacked variables header ------------------------------------ */

size_t
sr_wire_vars_hdr_encode(const sr_wire_vars_hdr *v, uint8_t *out, size_t cap)
{
    if (v == NULL || out == NULL || cap < VARS_HDR_BYTES) {
        return 0;
    }
    sr_put_u64(out, i64_to_u64(v->global_step));
    sr_put_u32(out + 8, v->nvars);
    return VARS_HDR_BYTES;
}

sr_err
sr_wire_vars_hdr_decode(const uint8_t *buf, size_t len, sr_wire_vars_hdr *out)
{
    sr_wire_vars_hdr v;
    sr_err           rc;

    if ((rc = check_args(buf, len, out, "vars_hdr")) != SR_OK ||
        (rc = check_fixed(len, VARS_HDR_BYTES, "vars_hdr")) != SR_OK) {
        return rc;
    }
    v.global_step = u64_to_i64(sr_get_u64(buf));
    v.nvars = sr_get_u32(buf + 8);
    *out = v;
    return SR_OK;
}

/* ---- a TOKEN request's values held (issue 23) ------------------------ */

size_t
sr_wire_have_encode(const sr_wire_have *v, uint8_t *out, size_t cap)
{
    if (v == NULL || out == NULL || cap < HAVE_BYTES || v->global_step < 0) {
        return 0;
    }
    sr_put_u64(out, i64_to_u64(v->global_step));
    return HAVE_BYTES;
}

sr_err
sr_wire_have_decode(const uint8_t *buf, size_t len, sr_wire_have *out)
{
    sr_err rc;

    if ((rc = check_args(buf, len, out, "have")) != SR_OK ||
        (rc = check_fixed(len, HAVE_BYTES, "have")) != SR_OK) {
        return rc;
    }
    int64_t step = u64_to_i64(sr_get_u64(buf));
    if (step < 0) {
        return sr_fail(SR_EPROTO, "have: global_step %" PRId64 " is negative", step);
    }
    out->global_step = step;
    return SR_OK;
}

/* ---- push reply ------------------------------------------------------ */

size_t
sr_wire_push_rep_encode(const sr_wire_push_rep *r, uint8_t *out, size_t cap)
{
    if (r == NULL || out == NULL || cap < PUSH_REP_BYTES || r->outcome > SR_PUSH_DUPLICATE) {
        return 0;
    }
    out[0] = r->outcome;
    return PUSH_REP_BYTES;
}

sr_err
sr_wire_push_rep_decode(const uint8_t *buf, size_t len, sr_wire_push_rep *out)
{
    sr_err rc;

    if ((rc = check_args(buf, len, out, "push_rep")) != SR_OK ||
        (rc = check_fixed(len, PUSH_REP_BYTES, "push_rep")) != SR_OK) {
        return rc;
    }
    if (buf[0] > SR_PUSH_DUPLICATE) {
        return sr_fail(SR_EPROTO, "push_rep: outcome %u unknown (0..%d)", (unsigned)buf[0],
                       SR_PUSH_DUPLICATE);
    }
    out->outcome = buf[0];
    return SR_OK;
}

/* ---- names for logs -------------------------------------------------- */

/* The reply bit is ignored: a HELLO reply logs as "HELLO". */
const char *
sr_wire_type_name(int type)
{
    if (type < 0 || type > 0xff) {
        return "?";
    }
    switch (type & ~(int)SR_WIRE_REPLY) {
    case SR_MSG_HELLO:
        return "HELLO";
    case SR_MSG_DECLARE:
        return "DECLARE";
    case SR_MSG_READY:
        return "READY";
    case SR_MSG_PULL:
        return "PULL";
    case SR_MSG_PUSH:
        return "PUSH";
    case SR_MSG_PUSH_SPARSE:
        return "PUSH_SPARSE";
    case SR_MSG_TOKEN:
        return "TOKEN";
    case SR_MSG_PING:
        return "PING";
    case SR_MSG_STATUS:
        return "STATUS";
    case SR_MSG_BYE:
        return "BYE";
    case SR_MSG_FINISH:
        return "FINISH";
    case SR_MSG_MODEL:
        return "MODEL";
    case SR_MSG_CTL:
        return "CTL";
    case SR_MSG_CURSOR:
        return "CURSOR";
    default:
        return "?";
    }
}
