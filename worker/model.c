/*
 * The model as the unit of a step (sr_client_declare_model,
 * sr_client_model_step): the coordinator lays the tensors out in packs
 * (MODEL, coordinator/server_pack.c); this file declares the packs as
 * ordinary variables, keeps one value arena and, for trainable ones, one
 * gradient arena per pack, and runs a round as the per-variable calls
 * would: push each trainable pack (the last with the token request), take
 * the token, pull the trainable packs.  A pack's gradients are gathered
 * into its arena a partition at a time, each just before it is sent, so
 * the gather of one overlaps the travel of the one before.  Tensors that
 * never change (not trainable) are pulled once.  Sparse tensors are
 * variables of their own, pushed beside the call with
 * sr_client_push_sparse.  docs/protocol.md, MODEL; docs/architecture.md,
 * "Packs".
 *
 * A pull writes each tensor once: straight from the reply's message into
 * the caller's values[i].  The client's own copy of a slab (the value
 * arena, sr_client_model_value) is then behind, and the slab keeps a
 * reference to the message instead (no copy: ZeroMQ counts references to a
 * large message).  The first sr_client_model_value brings every arena up to
 * date from the messages held; from then on the pulls write the arena too,
 * so a pointer handed out is never stale.  A program that only passes its
 * own buffers pays one copy of the model's bytes per pull, not two.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/name.h"
#include "core/text.h"
#include "worker/client_int.h"

/* A tensor of the model: where its bytes are (by_slab lists them by slab). */
typedef struct {
    uint32_t slab;   /* index into the slabs */
    uint64_t offset; /* in the slab's arenas */
    uint64_t nbytes;
} mtensor;

/* A pack, or a tensor kept as a variable of its own (sparse ones): one
 * variable of the coordinator's, with its arenas. */
typedef struct {
    char      name[SR_WIRE_MAX_NAME + 1];
    int       dtype;
    uint64_t  nbytes;
    int       trainable; /* its values change every step */
    int       pushed;    /* a pack of trainable tensors: this call pushes it */
    size_t    alone;     /* a tensor of its own: its index; a pack: SIZE_MAX */
    size_t    t0, tn;    /* its tensors: by_slab[t0 .. t0 + tn) */
    uint8_t  *value;
    uint8_t  *grad;   /* pushed packs only */
    zmq_msg_t last;   /* the last pulled value, while `behind` */
    int       behind; /* value is older than `last` (own copy not handed out yet) */
} mslab;

struct sr__model {
    mtensor     *t;
    size_t       nt;
    mslab       *s;
    size_t       ns;
    size_t      *by_slab;    /* tensor indices, grouped by slab */
    int          all_pulled; /* every slab pulled once: the unchanging ones need no more */
    int          own_out;    /* sr_client_model_value handed out a pointer: pulls keep values */
    const char **names;      /* sr_client_pull_many's arguments, ns each */
    size_t      *sizes;
    size_t      *slab_of; /* the slab of each pulled item */
};

void
sr__model_free(sr_client *c)
{
    sr__model *m = c->model;

    if (m == NULL) {
        return;
    }
    for (size_t i = 0; i < m->ns; i++) {
        free(m->s[i].value);
        free(m->s[i].grad);
        if (m->s[i].behind) {
            zmq_msg_close(&m->s[i].last);
        }
    }
    free(m->t);
    free(m->s);
    free(m->by_slab);
    free(m->names);
    free(m->sizes);
    free(m->slab_of);
    free(m);
    c->model = NULL;
}

/* The specs as the MODEL request's descriptors, checked as the coordinator
 * would, before anything is sent. */
static sr_err
descs_of(sr_client *c, size_t n, const sr_tensor_spec *t, sr_wire_vardesc *d)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t nbytes;
        if (t[i].name == NULL || sr_name_check(t[i].name, strlen(t[i].name)) != SR_OK) {
            return sr__fail(c, SR_EINVAL, "declare model: tensor %zu: %s", i,
                            t[i].name == NULL ? "no name" : sr_errdetail());
        }
        if (t[i].ndim < 0 || t[i].ndim > SR_MAX_NDIM || (t[i].ndim > 0 && t[i].shape == NULL) ||
            sr_shape_bytes(t[i].dtype, t[i].ndim, t[i].shape, &nbytes) != SR_OK) {
            return sr__fail(c, SR_EINVAL, "declare model: tensor %s: bad dtype or shape",
                            SR_ESC(t[i].name));
        }
        if (t[i].flags & ~(unsigned)(SR_DECLARE_NOT_TRAINABLE | SR_DECLARE_SPARSE)) {
            return sr__fail(c, SR_EINVAL, "declare model: tensor %s: unknown flags 0x%x",
                            SR_ESC(t[i].name), t[i].flags);
        }
        memset(&d[i], 0, sizeof(d[i]));
        snprintf(d[i].name, sizeof(d[i].name), "%s", t[i].name);
        d[i].dtype = (uint8_t)t[i].dtype;
        d[i].flags = (uint8_t)t[i].flags;
        d[i].ndim = (uint8_t)t[i].ndim;
        if (t[i].ndim > 0) {
            memcpy(d[i].shape, t[i].shape, (size_t)t[i].ndim * sizeof(*t[i].shape));
        }
    }
    return SR_OK;
}

/* MODEL: the layout, in c->rep (packs, places).  Others wait for the
 * chief's layout, as sr_client_ready waits for the chief's model. */
static sr_err
model_rpc(sr_client *c, const uint8_t *body, size_t len)
{
    sr__frame f = {body, len};
    sr__call  w = {.kind = SR__WAIT_REPLY, .type = SR_MSG_MODEL, .f = &f, .nf = 1};

    for (;;) {
        int    restarted;
        sr_err rc = sr__check_size(c, "declare model", "(the model's list)", len);
        if (rc == SR_OK) {
            rc = sr__conn_call(c, &w, &restarted);
        }
        if (rc == SR_OK && restarted) {
            if ((rc = sr__session_resync(c)) != SR_OK) {
                return rc;
            }
            continue;
        }
        if (rc != SR_OK) {
            return rc;
        }
        if (c->rh.status == SR_ENOTREADY && c->task != 0) {
            c->io.sleep_ms(c->io.arg, 20);
            continue;
        }
        if (c->rh.status != SR_OK) {
            return sr__reply_error(c, "declare model");
        }
        if (c->nrep != 2) {
            return sr__fail(c, SR_EPROTO, "declare model: a reply of %d frames, not 2", c->nrep);
        }
        return SR_OK;
    }
}

/* by_slab: the tensors of each slab together (a counting sort), so a
 * pulled slab is scattered without looking at the others. */
static sr_err
group_by_slab(sr_client *c, sr__model *m)
{
    if ((m->by_slab = calloc(m->nt ? m->nt : 1, sizeof(*m->by_slab))) == NULL) {
        return sr__fail(c, SR_ENOMEM, "declare model: %zu tensors", m->nt);
    }
    for (size_t i = 0; i < m->nt; i++) {
        m->s[m->t[i].slab].tn++;
    }
    for (size_t k = 0, at = 0; k < m->ns; k++) {
        m->s[k].t0 = at;
        at += m->s[k].tn;
        m->s[k].tn = 0;
    }
    for (size_t i = 0; i < m->nt; i++) {
        mslab *s = &m->s[m->t[i].slab];
        m->by_slab[s->t0 + s->tn++] = i;
    }
    return SR_OK;
}

/* The model from the reply: slabs (the packs, then the tensors alone) and
 * each tensor's place, checked against the specs. */
static sr_err
build(sr_client *c, sr__model *m, size_t n, const sr_wire_vardesc *d)
{
    const uint8_t   *b0 = zmq_msg_data(&c->rep[0]), *b1 = zmq_msg_data(&c->rep[1]);
    size_t           l0 = zmq_msg_size(&c->rep[0]), l1 = zmq_msg_size(&c->rep[1]), np;
    sr_wire_vardesc *pd = NULL;
    sr_wire_place   *pl = calloc(n ? n : 1, sizeof(*pl));
    sr_err           rc = SR_ENOMEM;

    if (pl == NULL || sr_wire_desclist_count(b0, l0, n, &np) != SR_OK ||
        (pd = calloc(np ? np : 1, sizeof(*pd))) == NULL ||
        (m->t = calloc(n ? n : 1, sizeof(*m->t))) == NULL ||
        (m->s = calloc(np + n ? np + n : 1, sizeof(*m->s))) == NULL) {
        goto out;
    }
    if (sr_wire_desclist_decode(b0, l0, pd, np) != SR_OK ||
        sr_wire_places_decode(b1, l1, pl, n) != SR_OK) {
        rc = sr__fail(c, SR_EPROTO, "declare model: a malformed layout: %s", sr_errdetail());
        goto out;
    }
    for (size_t k = 0; k < np; k++) {
        mslab   *s = &m->s[m->ns++];
        uint64_t nbytes;
        if (pd[k].ndim != 1 || sr_shape_bytes(pd[k].dtype, 1, pd[k].shape, &nbytes) != SR_OK) {
            rc = sr__fail(c, SR_EPROTO, "declare model: pack %zu is not a vector", k);
            goto out;
        }
        snprintf(s->name, sizeof(s->name), "%s", pd[k].name);
        s->dtype = pd[k].dtype;
        s->nbytes = nbytes;
        s->trainable = !(pd[k].flags & SR_DECLARE_NOT_TRAINABLE);
        s->pushed = s->trainable;
        s->alone = SIZE_MAX;
    }
    m->nt = n;
    for (size_t i = 0; i < n; i++) {
        uint64_t nbytes;
        sr_shape_bytes(d[i].dtype, d[i].ndim, d[i].shape, &nbytes);
        m->t[i].nbytes = nbytes;
        if (pl[i].pack == SR_WIRE_PLACE_ALONE) {
            mslab *s = &m->s[m->ns];
            snprintf(s->name, sizeof(s->name), "%s", d[i].name);
            s->dtype = d[i].dtype;
            s->nbytes = nbytes;
            s->trainable =
                sr_dtype_is_float(d[i].dtype) && !(d[i].flags & SR_DECLARE_NOT_TRAINABLE);
            s->alone = i;
            m->t[i].slab = (uint32_t)m->ns++;
            continue;
        }
        if (pl[i].pack >= np || pd[pl[i].pack].dtype != d[i].dtype ||
            pl[i].offset > m->s[pl[i].pack].nbytes ||
            nbytes > m->s[pl[i].pack].nbytes - pl[i].offset) {
            rc = sr__fail(c, SR_EPROTO, "declare model: tensor %s is placed outside its pack",
                          SR_ESC(d[i].name));
            goto out;
        }
        m->t[i].slab = pl[i].pack;
        m->t[i].offset = pl[i].offset;
    }
    rc = group_by_slab(c, m);
out:
    free(pd);
    free(pl);
    return rc == SR_ENOMEM ? sr__fail(c, SR_ENOMEM, "declare model: %zu tensors", n) : rc;
}

/* Arenas for every slab, and the pull lists. */
static sr_err
alloc_arenas(sr_client *c, sr__model *m)
{
    if ((m->names = calloc(m->ns ? m->ns : 1, sizeof(*m->names))) == NULL ||
        (m->sizes = calloc(m->ns ? m->ns : 1, sizeof(*m->sizes))) == NULL ||
        (m->slab_of = calloc(m->ns ? m->ns : 1, sizeof(*m->slab_of))) == NULL) {
        return sr__fail(c, SR_ENOMEM, "declare model: %zu variables", m->ns);
    }
    for (size_t k = 0; k < m->ns; k++) {
        mslab *s = &m->s[k];
        size_t b = s->nbytes ? (size_t)s->nbytes : 1;
        if ((s->value = calloc(1, b)) == NULL || (s->pushed && (s->grad = calloc(1, b)) == NULL)) {
            return sr__fail(c, SR_ENOMEM, "declare model: %s: %zu bytes", SR_ESC(s->name), b);
        }
    }
    return SR_OK;
}

/* Declare every slab as a variable: the chief's with the initial values of
 * its tensors, laid out as the coordinator placed them. */
static sr_err
declare_slabs(sr_client *c, sr__model *m, size_t n, const sr_tensor_spec *t)
{
    if (c->task == 0) {
        /* The value arenas hold the initial values until the first pull. */
        for (size_t i = 0; i < n; i++) {
            if (t[i].initial_value != NULL) {
                memcpy(m->s[m->t[i].slab].value + m->t[i].offset, t[i].initial_value,
                       (size_t)m->t[i].nbytes);
            }
        }
    }
    for (size_t k = 0; k < m->ns; k++) {
        const mslab *s = &m->s[k];
        const void  *init = c->task == 0 ? s->value : NULL;
        int64_t      elems = (int64_t)(s->nbytes / sr_dtype_size(s->dtype));
        sr_err       rc;

        if (s->alone != SIZE_MAX) {
            const sr_tensor_spec *a = &t[s->alone];
            rc = sr_client_declare_ex(c, a->name, a->dtype, a->ndim, a->shape, init,
                                      a->flags & SR_DECLARE_NOT_TRAINABLE);
        } else {
            rc = sr_client_declare_ex(c, s->name, (sr_dtype)s->dtype, 1, &elems, init,
                                      s->trainable ? 0 : SR_DECLARE_NOT_TRAINABLE);
        }
        if (rc != SR_OK) {
            return rc;
        }
    }
    return SR_OK;
}

int
sr_client_declare_model(sr_client *c, size_t n, const sr_tensor_spec *tensors)
{
    sr_wire_vardesc *d = NULL;
    uint8_t         *body = NULL;
    sr__model       *m = NULL;
    sr_err           rc;

    if (c == NULL || (tensors == NULL && n > 0)) {
        return sr_fail(SR_EINVAL, "sr_client_declare_model: NULL argument");
    }
    if (c->model != NULL) {
        return sr__fail(c, SR_EEXIST, "declare model: this client has declared its model");
    }
    if (c->ready_done) {
        return sr__fail(c, SR_EINVAL, "declare model: after sr_client_ready");
    }
    if (n > SR_WIRE_MODEL_MAX) {
        return sr__fail(c, SR_EINVAL, "declare model: %zu tensors, at most %d", n,
                        SR_WIRE_MODEL_MAX);
    }
    if ((d = calloc(n ? n : 1, sizeof(*d))) == NULL || (m = calloc(1, sizeof(*m))) == NULL) {
        rc = sr__fail(c, SR_ENOMEM, "declare model: %zu tensors", n);
        goto out;
    }
    if ((rc = descs_of(c, n, tensors, d)) != SR_OK) {
        goto out;
    }
    size_t len = sr_wire_desclist_size(d, n);
    if (len == 0 || (body = malloc(len)) == NULL ||
        sr_wire_desclist_encode(d, n, body, len) != len) {
        rc = sr__fail(c, len == 0 ? SR_EINVAL : SR_ENOMEM, "declare model: cannot encode %zu", n);
        goto out;
    }
    if ((rc = model_rpc(c, body, len)) != SR_OK || (rc = build(c, m, n, d)) != SR_OK ||
        (rc = alloc_arenas(c, m)) != SR_OK) {
        goto out;
    }
    c->model = m;
    if ((rc = declare_slabs(c, m, n, tensors)) != SR_OK) {
        goto out;
    }
    m = NULL; /* the client's */
out:
    if (m != NULL) {
        c->model = m;
        sr__model_free(c);
    }
    free(d);
    free(body);
    return rc;
}

/* The own copy of slab s is up to date again (from the message held). */
static void
catch_up(mslab *s)
{
    if (s->behind) {
        memcpy(s->value, zmq_msg_data(&s->last), (size_t)s->nbytes);
        zmq_msg_close(&s->last);
        s->behind = 0;
    }
}

/* What a model pull writes where. */
typedef struct {
    sr__model   *m;
    void *const *values;
} pull_ctx;

/* sr__pull_sink: slab slab_of[item]'s pulled value into values[i] of each
 * of its tensors given one, and into the own copy: whole once it has been
 * handed out (or for a tensor given no buffer); else the copy falls
 * behind and the slab holds the message for catch_up. */
static void
take_slab(void *arg, size_t item, zmq_msg_t *msg)
{
    const pull_ctx *x = arg;
    sr__model      *m = x->m;
    mslab          *s = &m->s[m->slab_of[item]];
    const uint8_t  *src = zmq_msg_data(msg);
    int             own = m->own_out || x->values == NULL;

    /* Tensor by tensor, each copied on while its bytes are in the cache.
     * The bytes between tensors (padding, a dropped tensor's place) are of
     * no tensor, and no call reads them from the own copy. */
    for (size_t j = s->t0; j < s->t0 + s->tn; j++) {
        const mtensor *t = &m->t[m->by_slab[j]];
        void          *dst = x->values != NULL ? x->values[m->by_slab[j]] : NULL;
        if (dst != NULL) {
            memcpy(dst, src + t->offset, (size_t)t->nbytes);
        }
        if (own || dst == NULL) {
            memcpy(s->value + t->offset, src + t->offset, (size_t)t->nbytes);
        }
    }
    if (s->behind) {
        zmq_msg_close(&s->last);
        s->behind = 0;
    }
    if (!own) { /* the own copy falls behind: hold the message instead */
        zmq_msg_init(&s->last);
        s->behind = zmq_msg_copy(&s->last, msg) == 0;
        if (!s->behind) { /* no reference to be had: copy now */
            zmq_msg_close(&s->last);
            memcpy(s->value, src, (size_t)s->nbytes);
        }
    }
}

/* Pull the slabs (all: every one; else those whose values change) into
 * values[i] (when given) and the own copy (above). */
static sr_err
pull_slabs(sr_client *c, sr__model *m, int all, void *const *values)
{
    pull_ctx x = {m, values};
    size_t   n = 0;
    sr_err   rc;

    for (size_t k = 0; k < m->ns; k++) {
        if (all || m->s[k].trainable) {
            m->names[n] = m->s[k].name;
            m->slab_of[n] = k;
            m->sizes[n++] = (size_t)m->s[k].nbytes;
        }
    }
    if ((rc = sr__pull_many_into(c, n, m->names, NULL, m->sizes, take_slab, &x)) != SR_OK) {
        return rc;
    }
    m->all_pulled |= all;
    return SR_OK;
}

static sr_err
check_model(sr_client *c, const char *what)
{
    if (c == NULL) {
        return sr_fail(SR_EINVAL, "%s: NULL client", what);
    }
    if (c->model == NULL) {
        return sr__fail(c, SR_EINVAL, "%s: no model declared (sr_client_declare_model)", what);
    }
    if (!c->ready_done) {
        return sr__fail(c, SR_ENOTREADY, "%s: call sr_client_ready first", what);
    }
    return SR_OK;
}

int
sr_client_model_pull(sr_client *c, void *const *values)
{
    sr_err rc = check_model(c, "model pull");
    return rc != SR_OK ? rc : pull_slabs(c, c->model, 1, values);
}

/* What a model push gathers: the caller's gradients of one slab. */
typedef struct {
    const sr__model   *m;
    const mslab       *s;
    const void *const *grads;
} gather_ctx;

/* sr__push_fill: bytes [off, off + len) of the slab's gradient arena from
 * the caller's gradients (a NULL one: zeros) of the tensors there.  The
 * bytes of no tensor stay the zeros they were allocated with. */
static void
gather(void *arg, size_t off, size_t len)
{
    const gather_ctx *x = arg;
    const sr__model  *m = x->m;
    const mslab      *s = x->s;

    for (size_t j = s->t0; j < s->t0 + s->tn; j++) {
        const mtensor *t = &m->t[m->by_slab[j]];
        const uint8_t *g = x->grads[m->by_slab[j]];
        uint64_t       lo = t->offset > off ? t->offset : off;
        uint64_t       hi = t->offset + t->nbytes < off + len ? t->offset + t->nbytes : off + len;
        if (lo >= hi) {
            continue;
        }
        if (g != NULL) {
            memcpy(s->grad + lo, g + (lo - t->offset), (size_t)(hi - lo));
        } else {
            memset(s->grad + lo, 0, (size_t)(hi - lo));
        }
    }
}

int
sr_client_model_step(sr_client *c, const void *const *grads, void *const *values)
{
    sr__model *m;
    size_t     last = SIZE_MAX;
    sr_err     rc = check_model(c, "model step");

    if (rc != SR_OK) {
        return rc;
    }
    m = c->model;
    for (size_t k = 0; k < m->ns; k++) {
        last = m->s[k].pushed ? k : last;
    }
    for (size_t k = 0; k < m->ns; k++) {
        const mslab  *s = &m->s[k];
        gather_ctx    x = {m, s, grads};
        sr__push_fill fill = {gather, &x};
        if (!s->pushed) {
            continue;
        }
        /* The gradients are gathered a partition at a time, as it is sent
         * (grads NULL: they are in the arena already). */
        rc = sr__push_filled(c, s->name, s->grad, (size_t)s->nbytes, grads != NULL ? &fill : NULL,
                             k == last);
        if (rc != SR_OK) {
            return rc;
        }
    }
    if (last == SIZE_MAX && (rc = sr_client_step(c)) != SR_OK) {
        return rc;
    }
    return pull_slabs(c, m, !m->all_pulled, values);
}

void *
sr_client_model_value(sr_client *c, size_t i)
{
    sr__model *m = c != NULL ? c->model : NULL;

    if (m == NULL || i >= m->nt) {
        return NULL;
    }
    if (!m->own_out) { /* from now on every pull keeps the own copy */
        for (size_t k = 0; k < m->ns; k++) {
            catch_up(&m->s[k]);
        }
        m->own_out = 1;
    }
    return m->s[m->t[i].slab].value + m->t[i].offset;
}

void *
sr_client_model_grad(sr_client *c, size_t i)
{
    if (c == NULL || c->model == NULL || i >= c->model->nt ||
        !c->model->s[c->model->t[i].slab].pushed) {
        return NULL;
    }
    return c->model->s[c->model->t[i].slab].grad + c->model->t[i].offset;
}
