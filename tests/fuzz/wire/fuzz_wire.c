/*
 * libFuzzer target for wire/ (STYLE.md section 7).  The input is split into
 * frames (format: fuzz_wire.h); every decoder runs on every frame, each frame
 * copied into its own exactly-sized heap block so ASan sees any read past it.
 * Properties checked, abort() on a violation (a codec bug, never bad input):
 *   - decode succeeds -> encode gives back exactly the same bytes;
 *   - decode fails    -> *out is untouched;
 *   - encode of any struct (built from raw input bytes) either refuses (0) or
 *     writes at most cap bytes that decode, and re-encode to the same bytes.
 * The corpus in corpus/ replays under ctest in every build (tests/fuzz/replay.c).
 */
#include "fuzz_wire.h"
#include "../replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/name.h"
#include "wire/wire.h"

typedef struct {
    const uint8_t *p;
    size_t         len;
} frame;

/* Every decoded type, so one buffer (and one poison pattern) serves all. */
typedef union {
    sr_wire_header    header;
    sr_wire_name      name;
    sr_wire_vardesc   vardesc;
    sr_wire_pushdesc  pushdesc;
    sr_wire_hello_rep hello_rep;
    sr_wire_ready_req ready_req;
    sr_wire_ping_rep  ping_rep;
    sr_wire_push_rep  push_rep;
    sr_wire_vars_hdr  vars_hdr;
    sr_wire_have      have;
} any_msg;

/* A body codec behind a uniform signature. */
typedef struct {
    const char *what;
    sr_err (*decode)(const uint8_t *buf, size_t len, any_msg *out);
    size_t (*encode)(const any_msg *in, uint8_t *out, size_t cap);
} codec;

static sr_err
dec_name(const uint8_t *b, size_t n, any_msg *o)
{
    return sr_wire_name_decode(b, n, &o->name);
}

static size_t
enc_name(const any_msg *m, uint8_t *out, size_t cap)
{
    return sr_wire_name_encode(m->name.name, out, cap);
}

static sr_err
dec_vardesc(const uint8_t *b, size_t n, any_msg *o)
{
    return sr_wire_vardesc_decode(b, n, &o->vardesc);
}

static size_t
enc_vardesc(const any_msg *m, uint8_t *out, size_t cap)
{
    return sr_wire_vardesc_encode(&m->vardesc, out, cap);
}

static sr_err
dec_pushdesc(const uint8_t *b, size_t n, any_msg *o)
{
    return sr_wire_pushdesc_decode(b, n, &o->pushdesc);
}

static size_t
enc_pushdesc(const any_msg *m, uint8_t *out, size_t cap)
{
    return sr_wire_pushdesc_encode(&m->pushdesc, out, cap);
}

static sr_err
dec_hello_rep(const uint8_t *b, size_t n, any_msg *o)
{
    return sr_wire_hello_rep_decode(b, n, &o->hello_rep);
}

static size_t
enc_hello_rep(const any_msg *m, uint8_t *out, size_t cap)
{
    return sr_wire_hello_rep_encode(&m->hello_rep, out, cap);
}

static sr_err
dec_ready_req(const uint8_t *b, size_t n, any_msg *o)
{
    return sr_wire_ready_req_decode(b, n, &o->ready_req);
}

static size_t
enc_ready_req(const any_msg *m, uint8_t *out, size_t cap)
{
    return sr_wire_ready_req_encode(&m->ready_req, out, cap);
}

static sr_err
dec_ping_rep(const uint8_t *b, size_t n, any_msg *o)
{
    return sr_wire_ping_rep_decode(b, n, &o->ping_rep);
}

static size_t
enc_ping_rep(const any_msg *m, uint8_t *out, size_t cap)
{
    return sr_wire_ping_rep_encode(&m->ping_rep, out, cap);
}

static sr_err
dec_push_rep(const uint8_t *b, size_t n, any_msg *o)
{
    return sr_wire_push_rep_decode(b, n, &o->push_rep);
}

static size_t
enc_push_rep(const any_msg *m, uint8_t *out, size_t cap)
{
    return sr_wire_push_rep_encode(&m->push_rep, out, cap);
}

static sr_err
dec_vars_hdr(const uint8_t *b, size_t n, any_msg *o)
{
    return sr_wire_vars_hdr_decode(b, n, &o->vars_hdr);
}

static size_t
enc_vars_hdr(const any_msg *m, uint8_t *out, size_t cap)
{
    return sr_wire_vars_hdr_encode(&m->vars_hdr, out, cap);
}

static sr_err
dec_have(const uint8_t *b, size_t n, any_msg *o)
{
    return sr_wire_have_decode(b, n, &o->have);
}

static size_t
enc_have(const any_msg *m, uint8_t *out, size_t cap)
{
    return sr_wire_have_encode(&m->have, out, cap);
}

static const codec codecs[] = {
    {"name", dec_name, enc_name},
    {"vardesc", dec_vardesc, enc_vardesc},
    {"pushdesc", dec_pushdesc, enc_pushdesc},
    {"hello_rep", dec_hello_rep, enc_hello_rep},
    {"ready_req", dec_ready_req, enc_ready_req},
    {"ping_rep", dec_ping_rep, enc_ping_rep},
    {"push_rep", dec_push_rep, enc_push_rep},
    {"vars_hdr", dec_vars_hdr, enc_vars_hdr},
    {"have", dec_have, enc_have},
};
#define NCODECS (sizeof(codecs) / sizeof(codecs[0]))

static void
bug(const char *what, const char *why, const uint8_t *buf, size_t len)
{
    fprintf(stderr, "fuzz_wire: %s: %s (frame of %zu bytes:", what, why, len);
    for (size_t i = 0; i < len && i < 64; i++) {
        fprintf(stderr, " %02x", buf[i]);
    }
    fprintf(stderr, "%s)\n", len > 64 ? " ..." : "");
    abort();
}

/* Split data into frames.  *complete (optional) is 1 when every frame had
 * all its declared bytes and nothing was left over. */
static size_t
split(const uint8_t *data, size_t size, frame f[FUZZ_WIRE_MAX_FRAMES], int *complete)
{
    size_t off = 0, n = 0;
    int    whole = 1;

    while (n < FUZZ_WIRE_MAX_FRAMES && size - off >= 2) {
        size_t want = sr_get_u16(data + off);
        off += 2;
        f[n].p = data + off;
        f[n].len = want < size - off ? want : size - off;
        whole = whole && f[n].len == want;
        off += f[n].len;
        n++;
    }
    if (complete != NULL) {
        *complete = whole && off == size;
    }
    return n;
}

static void
check_header(const uint8_t *buf, size_t len)
{
    sr_wire_header h, poison;
    uint8_t        again[SR_WIRE_HEADER_BYTES];

    memset(&h, 0x5a, sizeof(h));
    poison = h;
    if (sr_wire_header_decode(buf, len, &h) != SR_OK) {
        if (memcmp(&h, &poison, sizeof(h)) != 0) {
            bug("header", "failed decode wrote *out", buf, len);
        }
        return;
    }
    if (sr_wire_type_name(h.type)[0] == '?') {
        bug("header", "decoded a type that has no name", buf, len);
    }
    sr_wire_header_encode(&h, again);
    if (len != sizeof(again) || memcmp(again, buf, len) != 0) {
        bug("header", "decode -> encode changed the bytes", buf, len);
    }
}

/* Encode a header built from raw bytes: it must decode (when its type is
 * known) to the same fields. */
static void
check_header_encode(const uint8_t *buf, size_t len)
{
    sr_wire_header h, d;
    uint8_t        enc[SR_WIRE_HEADER_BYTES], again[SR_WIRE_HEADER_BYTES];

    memset(&h, 0, sizeof(h));
    if (len > 0) {
        memcpy(&h, buf, len < sizeof(h) ? len : sizeof(h));
    }
    sr_wire_header_encode(&h, enc);
    if (sr_wire_header_decode(enc, sizeof(enc), &d) != SR_OK) {
        if (sr_wire_type_name(h.type)[0] != '?') {
            bug("header", "encoded header with a known type does not decode", enc, sizeof(enc));
        }
        return;
    }
    if (d.type != h.type || d.flags != h.flags || d.request_id != h.request_id ||
        d.incarnation != h.incarnation || d.client_id != h.client_id ||
        d.task_index != h.task_index || d.status != h.status || d.local_step != h.local_step ||
        d.seq != h.seq) {
        bug("header", "encode -> decode changed a field", enc, sizeof(enc));
    }
    sr_wire_header_encode(&d, again);
    if (memcmp(enc, again, sizeof(enc)) != 0) {
        bug("header", "encode -> decode -> encode changed the bytes", enc, sizeof(enc));
    }
}

static void
check_decode(const codec *c, const uint8_t *buf, size_t len)
{
    any_msg m, poison;
    uint8_t again[SR_WIRE_BODY_MAX];
    size_t  n;

    memset(&m, 0x5a, sizeof(m));
    poison = m;
    if (c->decode(buf, len, &m) != SR_OK) {
        if (memcmp(&m, &poison, sizeof(m)) != 0) {
            bug(c->what, "failed decode wrote *out", buf, len);
        }
        return;
    }
    n = c->encode(&m, again, sizeof(again));
    if (n == 0) {
        bug(c->what, "encoder refuses what the decoder accepted", buf, len);
    }
    if (n != len || memcmp(again, buf, len) != 0) {
        bug(c->what, "decode -> encode changed the bytes", buf, len);
    }
}

static void
check_encode(const codec *c, const uint8_t *buf, size_t len)
{
    any_msg m, d;
    uint8_t enc[SR_WIRE_BODY_MAX], again[SR_WIRE_BODY_MAX];
    size_t  n;

    memset(&m, 0, sizeof(m));
    if (len > 0) {
        memcpy(&m, buf, len < sizeof(m) ? len : sizeof(m));
    }
    if ((n = c->encode(&m, enc, sizeof(enc))) == 0) {
        return;
    }
    if (n > sizeof(enc)) {
        bug(c->what, "encoder wrote past cap", buf, len);
    }
    if (c->encode(&m, again, n - 1) != 0) {
        bug(c->what, "encoder ignores a cap one byte short", enc, n);
    }
    if (c->decode(enc, n, &d) != SR_OK) {
        bug(c->what, "what the encoder wrote does not decode", enc, n);
    }
    if (c->encode(&d, again, sizeof(again)) != n || memcmp(enc, again, n) != 0) {
        bug(c->what, "encode -> decode -> encode changed the bytes", enc, n);
    }
}

static void
check_frame(const uint8_t *buf, size_t len)
{
    check_header(buf, len);
    check_header_encode(buf, len);
    for (size_t i = 0; i < NCODECS; i++) {
        check_decode(&codecs[i], buf, len);
        check_encode(&codecs[i], buf, len);
    }
}

/* ---- whole-message validity (fuzz_wire.h) ---------------------------- */

static int
data_matches_vardesc(const sr_wire_vardesc *v, const frame *data)
{
    uint64_t bytes;

    if (sr_shape_bytes(v->dtype, v->ndim, v->shape, &bytes) != SR_OK) {
        return 0;
    }
    return bytes == data->len;
}

/* A request's name follows the rule the coordinator checks (core/name.h):
 * the wire codec takes any bytes but NUL, the coordinator refuses the rest. */
static int
name_ok(const char *name)
{
    return sr_name_check(name, strlen(name)) == SR_OK;
}

/* A MODEL body's list of descriptors decodes, every name well formed (*n:
 * how many, when not NULL). */
static int
desclist_ok(const frame *f, size_t *count)
{
    static sr_wire_vardesc d[64];
    size_t                 n;

    if (sr_wire_desclist_count(f->p, f->len, 64, &n) != SR_OK ||
        sr_wire_desclist_decode(f->p, f->len, d, n) != SR_OK) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!name_ok(d[i].name)) {
            return 0;
        }
    }
    if (count != NULL) {
        *count = n;
    }
    return 1;
}

/* A PULL of many (SR_WIRE_F_MANY): 1..SR_WIRE_PULL_MANY_MAX names. */
static int
pull_many_ok(const frame *body, size_t nb)
{
    sr_wire_name name;

    if (nb < 1 || nb > SR_WIRE_PULL_MANY_MAX) {
        return 0;
    }
    for (size_t i = 0; i < nb; i++) {
        if (sr_wire_name_decode(body[i].p, body[i].len, &name) != SR_OK || !name_ok(name.name)) {
            return 0;
        }
    }
    return 1;
}

/* Variables as a TOKEN or PULL-of-many reply carries them: vars header,
 * then (vardesc, value) pairs. */
static int
vars_ok(const frame *body, size_t nb)
{
    sr_wire_vars_hdr vh;
    sr_wire_vardesc  v;

    if (nb < 1 || sr_wire_vars_hdr_decode(body[0].p, body[0].len, &vh) != SR_OK ||
        nb != 1 + 2 * (size_t)vh.nvars) {
        return 0;
    }
    for (size_t i = 0; i < vh.nvars; i++) {
        if (sr_wire_vardesc_decode(body[1 + 2 * i].p, body[1 + 2 * i].len, &v) != SR_OK ||
            !data_matches_vardesc(&v, &body[2 + 2 * i])) {
            return 0;
        }
    }
    return 1;
}

static int
request_ok(unsigned type, unsigned flags, const frame *body, size_t nb)
{
    sr_wire_vardesc   v;
    sr_wire_pushdesc  p;
    sr_wire_name      name;
    sr_wire_ready_req ready;
    sr_wire_ctl_req   ctl; /* issue 26 */

    switch (type) {
    case SR_MSG_HELLO:
    case SR_MSG_TOKEN:
    case SR_MSG_PING:
    case SR_MSG_STATUS:
    case SR_MSG_BYE:
    case SR_MSG_FINISH:
        return nb == 0;
    case SR_MSG_CURSOR: /* issue 24: ask, or give a cursor */
        return nb == 0 || (nb == 1 && body[0].len <= SR_WIRE_CURSOR_MAX);
    case SR_MSG_DECLARE:
        if (nb < 1 || sr_wire_vardesc_decode(body[0].p, body[0].len, &v) != SR_OK ||
            !name_ok(v.name)) {
            return 0;
        }
        if (v.flags & SR_WIRE_DECLARE_PART) { /* vardesc, pushdesc, one part */
            return nb == 3 && sr_wire_pushdesc_decode(body[1].p, body[1].len, &p) == SR_OK &&
                   strcmp(p.name, v.name) == 0 && p.dtype == v.dtype && p.count == body[2].len;
        }
        return nb == 1 || (nb == 2 && data_matches_vardesc(&v, &body[1]));
    case SR_MSG_READY:
        return nb == 1 && sr_wire_ready_req_decode(body[0].p, body[0].len, &ready) == SR_OK;
    case SR_MSG_CTL:
        return nb == 1 && sr_wire_ctl_req_decode(body[0].p, body[0].len, &ctl) == SR_OK;
    case SR_MSG_PULL:
        if (flags & SR_WIRE_F_MANY) {
            return pull_many_ok(body, nb);
        }
        return nb == 1 && sr_wire_name_decode(body[0].p, body[0].len, &name) == SR_OK &&
               name_ok(name.name);
    case SR_MSG_PUSH:
        return nb == 2 && sr_wire_pushdesc_decode(body[0].p, body[0].len, &p) == SR_OK &&
               name_ok(p.name) && p.count == body[1].len;
    case SR_MSG_PUSH_SPARSE:
        if (nb != 3 || sr_wire_pushdesc_decode(body[0].p, body[0].len, &p) != SR_OK ||
            !name_ok(p.name)) {
            return 0;
        }
        if (p.count > SIZE_MAX / 8 || body[1].len != p.count * 8) {
            return 0;
        }
        return p.count == 0 ? body[2].len == 0 : body[2].len % p.count == 0;
    case SR_MSG_MODEL:
        return nb == 1 && desclist_ok(&body[0], NULL);
    default:
        return 0;
    }
}

static int
reply_ok(unsigned type, unsigned flags, const frame *body, size_t nb)
{
    sr_wire_vardesc   v;
    sr_wire_hello_rep hello;
    sr_wire_ping_rep  ping;
    sr_wire_push_rep  push;

    switch (type) {
    case SR_MSG_TOKEN:
        return nb == 0 || vars_ok(body, nb);
    case SR_MSG_DECLARE:
    case SR_MSG_BYE:
    case SR_MSG_FINISH:
        return nb == 0;
    case SR_MSG_MODEL: {
        static sr_wire_place pl[SR_WIRE_MODEL_MAX];
        size_t               np;
        return nb == 2 && desclist_ok(&body[0], &np) && body[1].len % SR_WIRE_PLACE_BYTES == 0 &&
               body[1].len / SR_WIRE_PLACE_BYTES <= SR_WIRE_MODEL_MAX &&
               sr_wire_places_decode(body[1].p, body[1].len, pl,
                                     body[1].len / SR_WIRE_PLACE_BYTES) == SR_OK;
    }
    case SR_MSG_CURSOR: /* issue 24 */
        return nb <= 1 && (nb == 0 || body[0].len <= SR_WIRE_CURSOR_MAX);
    case SR_MSG_HELLO:
        return nb == 1 && sr_wire_hello_rep_decode(body[0].p, body[0].len, &hello) == SR_OK;
    case SR_MSG_READY:
    case SR_MSG_PING:
        return nb == 1 && sr_wire_ping_rep_decode(body[0].p, body[0].len, &ping) == SR_OK;
    case SR_MSG_PULL:
        if (flags & SR_WIRE_F_MANY) {
            return vars_ok(body, nb);
        }
        return nb == 2 && sr_wire_vardesc_decode(body[0].p, body[0].len, &v) == SR_OK &&
               data_matches_vardesc(&v, &body[1]);
    case SR_MSG_PUSH:
    case SR_MSG_PUSH_SPARSE:
        return nb == 1 && sr_wire_push_rep_decode(body[0].p, body[0].len, &push) == SR_OK;
    case SR_MSG_STATUS:
    case SR_MSG_CTL: /* issue 26: the change in force, as text */
        return nb == 1 && memchr(body[0].p, 0, body[0].len) == NULL;
    default:
        return 0;
    }
}

int
fuzz_wire_message_ok(const uint8_t *data, size_t size)
{
    frame          f[FUZZ_WIRE_MAX_FRAMES];
    sr_wire_header h;
    size_t         nf;
    int            complete;
    unsigned       type;

    nf = split(data, size, f, &complete);
    if (!complete || nf == 0 || sr_wire_header_decode(f[0].p, f[0].len, &h) != SR_OK) {
        return 0;
    }
    type = h.type & ~SR_WIRE_REPLY;
    if ((h.type & SR_WIRE_REPLY) == 0) {
        return h.status == 0 && request_ok(type, h.flags, f + 1, nf - 1);
    }
    if (h.status > 0) {
        return 0;
    }
    if (h.status < 0) { /* a failed reply: frame 1 is the error text */
        return nf == 2 && f[1].len > 0 && memchr(f[1].p, 0, f[1].len) == NULL;
    }
    return reply_ok(type, h.flags, f + 1, nf - 1);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frame  f[FUZZ_WIRE_MAX_FRAMES];
    size_t nf = split(data, size, f, NULL);

    check_frame(data, size);
    for (size_t i = 0; i < nf; i++) {
        uint8_t *copy = malloc(f[i].len > 0 ? f[i].len : 1);
        if (copy == NULL) {
            return 0;
        }
        if (f[i].len > 0) {
            memcpy(copy, f[i].p, f[i].len);
        }
        check_frame(copy, f[i].len);
        free(copy);
    }
    (void)fuzz_wire_message_ok(data, size);
    return 0;
}

/* The replay driver's hooks (tests/fuzz/replay.h). */
int
fuzz_seed_ok(const uint8_t *data, size_t size)
{
    return fuzz_wire_message_ok(data, size);
}

const char fuzz_seed_rule[] = "is not a well-formed message";
