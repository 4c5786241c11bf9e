/*
 * Models declared as a whole (MODEL, sr_client_declare_model): the
 * coordinator lays the tensors out in packs, large variables of one dtype
 * and trainability, so that a step costs per megabyte, not per tensor.  A
 * pack is an ordinary variable from there on (its partitions, accumulators,
 * apply and commit are every variable's); its members, the tensors, keep
 * their names in the store (store_member.c) and here, for pulls by name,
 * status and the store's tools.  docs/architecture.md, "Packs".
 *
 * The layout is the coordinator's: the first MODEL of a tensor places it
 * (at the end of a new pack, 64-byte aligned), every later one, in any
 * order, gets the stored place.  A declaration that lacks a stored tensor,
 * changes one's dtype, shape or trainability, or adds one to a ready model
 * without --allow-new-variables is refused, naming the tensors: a model is
 * never silently misaligned.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/server_int.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/name.h"
#include "core/text.h"

#define PACK_ALIGN 64 /* every member starts at a multiple of it */

static uint64_t
align_up(uint64_t v)
{
    return (v + PACK_ALIGN - 1) / PACK_ALIGN * PACK_ALIGN;
}

/* ---- the index ----------------------------------------------------------
 * The members, sorted by name, 32 bytes each; their names in one arena
 * (c->member_names) and their dimensions in another (c->member_dims), the
 * pack by its index in c->packs: a 2,000-tensor model costs the coordinator
 * about 100 KiB, not a 616-byte store record per tensor. */

const char *
sr__coord_member_name(const coord *c, const cmember *m)
{
    return c->member_names + m->name;
}

const int64_t *
sr__coord_member_shape(const coord *c, const cmember *m)
{
    static const int64_t none[1];
    return c->member_dims != NULL ? c->member_dims + m->dims : none; /* NULL: all scalars */
}

const char *
sr__coord_member_pack(const coord *c, const cmember *m)
{
    return c->packs[m->pack].name;
}

static int
member_cmp(const void *a, const void *b, void *arg)
{
    const coord *c = arg;
    return strcmp(sr__coord_member_name(c, a), sr__coord_member_name(c, b));
}

const cmember *
sr__coord_find_member(const coord *c, const char *name)
{
    size_t lo = 0, hi = c->nmembers;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int    d = strcmp(name, sr__coord_member_name(c, &c->members[mid]));
        if (d == 0) {
            return &c->members[mid];
        }
        if (d < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return NULL;
}

static cpack *
find_pack(coord *c, const char *name)
{
    for (size_t i = 0; i < c->npacks; i++) {
        if (strcmp(c->packs[i].name, name) == 0) {
            return &c->packs[i];
        }
    }
    return NULL;
}

const cpack *
sr__coord_find_pack(coord *c, const char *name)
{
    return find_pack(c, name);
}

/* The pack of that name, made (dtype, trainability of its first member)
 * when absent; NULL: out of memory. */
static cpack *
pack_for(coord *c, const char *name, int dtype, int trainable)
{
    cpack *p = find_pack(c, name);

    if (p != NULL) {
        return p;
    }
    if ((p = sr_grow_array(c->packs, &c->cap_packs, c->npacks + 1, sizeof(*p))) == NULL) {
        return NULL;
    }
    c->packs = p;
    p = &c->packs[c->npacks++];
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->dtype = dtype;
    p->trainable = trainable;
    return p;
}

/* Room for n more members, their names (name_bytes, NULs counted) and
 * dimensions (ndims), so that taking them in cannot fail half-way. */
static sr_err
reserve_members(coord *c, size_t n, size_t name_bytes, size_t ndims)
{
    void *p;

    if (c->member_names_len + name_bytes > UINT32_MAX || c->member_dims_len + ndims > UINT32_MAX) {
        return sr_fail(SR_ENOMEM, "model tensors: %zu bytes of names, %zu dimensions",
                       c->member_names_len + name_bytes, c->member_dims_len + ndims);
    }
    if ((p = sr_grow_array(c->members, &c->cap_members, c->nmembers + n, sizeof(*c->members))) ==
        NULL) {
        return sr_fail(SR_ENOMEM, "%zu model tensors", c->nmembers + n);
    }
    c->members = p;
    /* (A grown array is NULL only when nothing was asked of it yet.) */
    if ((p = sr_grow_array(c->member_names, &c->cap_member_names, c->member_names_len + name_bytes,
                           1)) == NULL &&
        name_bytes > 0) {
        return sr_fail(SR_ENOMEM, "model tensors' names");
    }
    c->member_names = p;
    if ((p = sr_grow_array(c->member_dims, &c->cap_member_dims, c->member_dims_len + ndims,
                           sizeof(*c->member_dims))) == NULL &&
        ndims > 0) {
        return sr_fail(SR_ENOMEM, "model tensors' shapes");
    }
    c->member_dims = p;
    return SR_OK;
}

/* Take members into the index (sorted by name) and their packs' sizes.
 * On failure the index is as it was (packs it made may stay, empty). */
static sr_err
adopt_members(coord *c, const sr_store_member *m, size_t n)
{
    size_t name_bytes = 0, ndims = 0;
    sr_err rc;

    if (n == 0) {
        return SR_OK;
    }
    for (size_t i = 0; i < n; i++) {
        name_bytes += strlen(m[i].name) + 1;
        ndims += (size_t)m[i].ndim;
        if (pack_for(c, m[i].pack, m[i].dtype, m[i].trainable) == NULL) {
            return sr_fail(SR_ENOMEM, "model packs");
        }
    }
    if ((rc = reserve_members(c, n, name_bytes, ndims)) != SR_OK) {
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        cpack  *p = find_pack(c, m[i].pack);
        size_t  len = strlen(m[i].name) + 1;
        cmember t = {.offset = m[i].offset,
                     .nbytes = m[i].nbytes,
                     .name = (uint32_t)c->member_names_len,
                     .dims = (uint32_t)c->member_dims_len,
                     .pack = (uint32_t)(p - c->packs),
                     .dtype = (uint8_t)m[i].dtype,
                     .ndim = (uint8_t)m[i].ndim,
                     .trainable = m[i].trainable ? 1 : 0};
        memcpy(c->member_names + c->member_names_len, m[i].name, len);
        c->member_names_len += len;
        if (m[i].ndim > 0) {
            memcpy(c->member_dims + c->member_dims_len, m[i].shape,
                   (size_t)m[i].ndim * sizeof(m[i].shape[0]));
        }
        c->member_dims_len += (size_t)m[i].ndim;
        if (align_up(m[i].offset + m[i].nbytes) > p->nbytes) {
            p->nbytes = align_up(m[i].offset + m[i].nbytes);
        }
        p->nmembers++;
        c->members[c->nmembers++] = t;
    }
    if (c->nmembers > 1) {
        qsort_r(c->members, c->nmembers, sizeof(*c->members), member_cmp, c);
    }
    return SR_OK;
}

sr_err
sr__coord_load_members(coord *c)
{
    sr_store_member *m = NULL;
    size_t           n = 0;
    sr_err           rc = sr_store_list_members(c->st, &m, &n);

    if (rc == SR_OK) {
        rc = adopt_members(c, m, n);
    }
    free(m);
    return rc;
}

void
sr__coord_free_members(coord *c)
{
    free(c->members);
    free(c->member_names);
    free(c->member_dims);
    free(c->packs);
    c->members = NULL;
    c->member_names = NULL;
    c->member_dims = NULL;
    c->packs = NULL;
    c->nmembers = c->npacks = c->cap_members = c->cap_packs = 0;
    c->member_names_len = c->cap_member_names = 0;
    c->member_dims_len = c->cap_member_dims = 0;
}

int
sr__coord_check_pack_decl(coord *c, const char *name, int dtype, int ndim, const int64_t *shape,
                          int trainable, char *why, size_t cap)
{
    const cpack *p = find_pack(c, name);

    if (p == NULL) {
        snprintf(why, cap, "%s names a model pack, and the model has no such pack", SR_ESC(name));
        return -1;
    }
    if (dtype != p->dtype || ndim != 1 || trainable != p->trainable ||
        (uint64_t)shape[0] * sr_dtype_size(dtype) != p->nbytes) {
        snprintf(why, cap, "pack %s is %s[%" PRIu64 "] %s", SR_ESC(name), sr_dtype_name(p->dtype),
                 p->nbytes / sr_dtype_size(p->dtype), p->trainable ? "trainable" : "not trainable");
        return -1;
    }
    return 0;
}

int
sr__coord_packs_missing(coord *c, char *why, size_t cap)
{
    for (size_t i = 0; i < c->npacks; i++) {
        if (sr__coord_find_var(c, c->packs[i].name) == NULL) {
            snprintf(why, cap, "model pack %s (%zu tensors) was not declared",
                     SR_ESC(c->packs[i].name), c->packs[i].nmembers);
            return 1;
        }
    }
    return 0;
}

/* ---- MODEL -------------------------------------------------------------- */

/* Is a request's tensor packed (else a variable of its own: sparse ones)? */
static int
packed(const sr_wire_vardesc *d)
{
    return !(d->flags & SR_DECLARE_SPARSE);
}

static int
trainable_of(const sr_wire_vardesc *d)
{
    return sr_dtype_is_float(d->dtype) && !(d->flags & SR_DECLARE_NOT_TRAINABLE);
}

static int
desc_index_cmp(const void *a, const void *b, void *arg)
{
    const sr_wire_vardesc *d = arg;
    return strcmp(d[*(const uint32_t *)a].name, d[*(const uint32_t *)b].name);
}

/* Each request tensor checked on its own and against the others: 0, or -1
 * with `why` (SR_EINVAL). */
static int
check_request(const sr_wire_vardesc *d, size_t n, uint32_t *order, char *why, size_t cap)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t nbytes;
        if (sr_name_check(d[i].name, strlen(d[i].name)) != SR_OK) {
            snprintf(why, cap, "tensor %zu \"%s\": %s", i, SR_ESC(d[i].name), sr_errdetail());
            return -1;
        }
        if (sr_store_is_pack_name(d[i].name)) {
            snprintf(why, cap, "tensor %zu %s: names beginning %s are the coordinator's", i,
                     SR_ESC(d[i].name), SR_STORE_PACK_PREFIX);
            return -1;
        }
        if (sr_shape_bytes(d[i].dtype, d[i].ndim, d[i].shape, &nbytes) != SR_OK) {
            snprintf(why, cap, "tensor %s: %s", SR_ESC(d[i].name), sr_errdetail());
            return -1;
        }
        if ((d[i].flags & SR_DECLARE_SPARSE) && (!trainable_of(&d[i]) || d[i].ndim < 1)) {
            snprintf(why, cap, "tensor %s: a sparse tensor is a trainable float one of rows",
                     SR_ESC(d[i].name));
            return -1;
        }
        order[i] = (uint32_t)i;
    }
    qsort_r(order, n, sizeof(*order), desc_index_cmp, (void *)d);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(d[order[i]].name, d[order[i - 1]].name) == 0) {
            snprintf(why, cap, "tensor %s is declared twice (at %u and %u)",
                     SR_ESC(d[order[i]].name), order[i - 1], order[i]);
            return -1;
        }
    }
    return 0;
}

/* A stored tensor against its declaration: 0, or -1 with `why`. */
static int
same_as_stored(const coord *c, const cmember *m, const sr_wire_vardesc *d, char *why, size_t cap)
{
    char           have[160], want[160];
    const int64_t *shape = sr__coord_member_shape(c, m);

    if (!packed(d)) {
        snprintf(why, cap, "tensor %s is stored packed, declared sparse", SR_ESC(d->name));
        return -1;
    }
    if (m->dtype != d->dtype || m->ndim != d->ndim ||
        memcmp(shape, d->shape, (size_t)m->ndim * sizeof(shape[0])) != 0) {
        sr_shape_format(m->ndim, shape, have, sizeof(have));
        sr_shape_format(d->ndim, d->shape, want, sizeof(want));
        snprintf(why, cap, "tensor %s exists as %s%s, declared as %s%s", SR_ESC(d->name),
                 sr_dtype_name(m->dtype), have, sr_dtype_name(d->dtype), want);
        return -1;
    }
    if (m->trainable != trainable_of(d)) {
        snprintf(why, cap, "tensor %s exists %s, declared %s", SR_ESC(d->name),
                 m->trainable ? "trainable" : "not trainable",
                 trainable_of(d) ? "trainable" : "not trainable");
        return -1;
    }
    return 0;
}

/* Stored tensors the request lacks (the request's names sorted in
 * `order`): 0, or -1 with `why` naming the first few. */
static int
check_missing(const coord *c, const sr_wire_vardesc *d, size_t n, const uint32_t *order, char *why,
              size_t cap)
{
    size_t lacking = 0, i = 0, len;

    snprintf(why, cap, "the store's model has tensors this declaration lacks:");
    for (size_t k = 0; k < c->nmembers; k++) {
        const char *name = sr__coord_member_name(c, &c->members[k]);
        while (i < n && strcmp(d[order[i]].name, name) < 0) {
            i++;
        }
        if (i < n && strcmp(d[order[i]].name, name) == 0) {
            continue;
        }
        if (++lacking <= 5 && (len = strlen(why)) < cap) {
            snprintf(why + len, cap - len, " %s", SR_ESC(name));
        }
    }
    if (lacking == 0) {
        return 0;
    }
    if ((len = strlen(why)) < cap) {
        snprintf(why + len, cap - len,
                 "%s (%zu in all); declare every tensor of the stored model, or remove one with "
                 "`syncrep store drop-variable` while the coordinator is stopped",
                 lacking > 5 ? " ..." : "", lacking);
    }
    return -1;
}

/* A new pack's name: the first free "syncrep:pack/K". */
static void
new_pack_name(coord *c, char *out, size_t cap)
{
    for (size_t k = c->npacks;; k++) {
        snprintf(out, cap, "%s%zu", SR_STORE_PACK_PREFIX, k);
        if (find_pack(c, out) == NULL && sr__coord_find_var(c, out) == NULL) {
            return;
        }
    }
}

/* A new pack of a MODEL request: its (dtype, trainability) and name, and
 * the end of what it holds so far.  The member records point at name. */
typedef struct {
    int      dtype, trainable;
    char     name[SR_STORE_MAX_NAME + 1];
    uint64_t end;
} new_pack;
enum { NEW_PACKS_MAX = 2 * 8 }; /* (dtype, trainable) pairs: four dtypes */

/* Place the request's new tensors in new packs g[] (NEW_PACKS_MAX, the
 * caller's: m's records point into them and into d), one per (dtype,
 * trainability), into m[*nm]. */
static sr_err
place_new(coord *c, const sr_wire_vardesc *d, size_t n, new_pack *g, sr_store_member *m, size_t *nm)
{
    size_t  ng = 0;
    int32_t pos0 = (int32_t)c->nmembers;

    for (size_t i = 0; i < n; i++) {
        if (!packed(&d[i]) || sr__coord_find_member(c, d[i].name) != NULL) {
            continue;
        }
        size_t k = 0;
        while (k < ng && (g[k].dtype != d[i].dtype || g[k].trainable != trainable_of(&d[i]))) {
            k++;
        }
        if (k == ng) {
            g[ng].dtype = d[i].dtype;
            g[ng].trainable = trainable_of(&d[i]);
            g[ng].end = 0;
            new_pack_name(c, g[ng].name, sizeof(g[ng].name));
            /* Reserve the name against the next group's. */
            if (pack_for(c, g[ng].name, g[ng].dtype, g[ng].trainable) == NULL) {
                return sr_fail(SR_ENOMEM, "model packs");
            }
            ng++;
        }
        sr_store_member *t = &m[(*nm)++];
        memset(t, 0, sizeof(*t));
        t->name = d[i].name;
        t->pack = g[k].name;
        t->offset = g[k].end;
        t->dtype = d[i].dtype;
        t->ndim = d[i].ndim;
        memcpy(t->shape, d[i].shape, sizeof(t->shape));
        sr_shape_bytes(t->dtype, t->ndim, t->shape, &t->nbytes);
        t->trainable = g[k].trainable;
        t->pos = pos0 + (int32_t)i;
        t->created_step = c->global_step;
        g[k].end = align_up(g[k].end + t->nbytes);
    }
    return SR_OK;
}

/* The reply: the packs the request's tensors live in, and each one's place. */
static void
reply_layout(coord *c, req_ctx *r, const sr_wire_vardesc *d, size_t n)
{
    sr_wire_vardesc *pd = calloc(c->npacks ? c->npacks : 1, sizeof(*pd));
    sr_wire_place   *pl = calloc(n ? n : 1, sizeof(*pl));
    uint32_t        *idx = calloc(c->npacks ? c->npacks : 1, sizeof(*idx));
    uint8_t         *b1 = NULL, *b2 = NULL;
    size_t           np = 0;

    if (pd == NULL || pl == NULL || idx == NULL) {
        REPLY_ERR(r, SR_ENOMEM, "MODEL: the reply for %zu tensors", n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const cmember *m = packed(&d[i]) ? sr__coord_find_member(c, d[i].name) : NULL;
        if (m == NULL) {
            pl[i] = (sr_wire_place){SR_WIRE_PLACE_ALONE, 0};
            continue;
        }
        size_t p = m->pack;
        if (idx[p] == 0) {
            const cpack *cp = &c->packs[p];
            idx[p] = (uint32_t)++np;
            snprintf(pd[np - 1].name, sizeof(pd[np - 1].name), "%s", cp->name);
            pd[np - 1].dtype = (uint8_t)cp->dtype;
            pd[np - 1].flags = cp->trainable ? 0 : SR_DECLARE_NOT_TRAINABLE;
            pd[np - 1].ndim = 1;
            pd[np - 1].shape[0] = (int64_t)(cp->nbytes / sr_dtype_size(cp->dtype));
        }
        pl[i] = (sr_wire_place){idx[p] - 1, m->offset};
    }
    size_t n1 = sr_wire_desclist_size(pd, np), n2 = n * SR_WIRE_PLACE_BYTES;
    if ((b1 = malloc(n1 ? n1 : 1)) == NULL || (b2 = malloc(n2 ? n2 : 1)) == NULL) {
        REPLY_ERR(r, SR_ENOMEM, "MODEL: the reply for %zu tensors", n);
        goto out;
    }
    frame f[2] = {{b1, sr_wire_desclist_encode(pd, np, b1, n1)},
                  {b2, sr_wire_places_encode(pl, n, b2, n2)}};
    sr__coord_send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, f, 2);
out:
    free(pd);
    free(pl);
    free(idx);
    free(b1);
    free(b2);
}

void
sr__coord_handle_model(coord *c, req_ctx *r)
{
    sr_wire_vardesc *d = NULL;
    sr_store_member *m = NULL;
    new_pack         g[NEW_PACKS_MAX];
    uint32_t        *order = NULL;
    size_t           n = 0, nm = 0, fresh = 0;
    char             why[900];
    const uint8_t   *body = r->nbody == 1 ? zmq_msg_data(&r->body[0]) : NULL;
    size_t           len = r->nbody == 1 ? zmq_msg_size(&r->body[0]) : 0;
    int              check_only = r->h.task_index != 0; /* only the chief lays out */

    if (r->nbody != 1 || sr_wire_desclist_count(body, len, SR_WIRE_MODEL_MAX, &n) != SR_OK) {
        REPLY_ERR(r, SR_EPROTO, "MODEL: %s", r->nbody != 1 ? "not one body frame" : sr_errdetail());
        return;
    }
    if ((d = calloc(n ? n : 1, sizeof(*d))) == NULL ||
        (order = calloc(n ? n : 1, sizeof(*order))) == NULL) {
        REPLY_ERR(r, SR_ENOMEM, "MODEL: %zu tensors", n);
        goto out;
    }
    if (sr_wire_desclist_decode(body, len, d, n) != SR_OK) {
        REPLY_ERR(r, SR_EPROTO, "MODEL: %s", sr_errdetail());
        goto out;
    }
    if (check_request(d, n, order, why, sizeof(why)) != 0) {
        REPLY_ERR(r, SR_EINVAL, "declare model: %s", why);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const cmember *cm = sr__coord_find_member(c, d[i].name);
        if (cm != NULL && same_as_stored(c, cm, &d[i], why, sizeof(why)) != 0) {
            REPLY_ERR(r, SR_EEXIST, "declare model: %s", why);
            goto out;
        }
        if (cm == NULL && packed(&d[i]) && sr__coord_find_var(c, d[i].name) != NULL) {
            REPLY_ERR(r, SR_EEXIST,
                      "declare model: tensor %s exists as a variable of its own (declared with "
                      "sr_client_declare), not as part of a model",
                      SR_ESC(d[i].name));
            goto out;
        }
        fresh += cm == NULL && packed(&d[i]);
    }
    if (check_missing(c, d, n, order, why, sizeof(why)) != 0) {
        REPLY_ERR(r, SR_EINVAL, "declare model: %s", why);
        goto out;
    }
    if (fresh > 0 && check_only) {
        int ready = sr__coord_model_ready(c);
        REPLY_ERR(r, ready || r->h.task_index == 0 ? SR_ENOENT : SR_ENOTREADY,
                  "declare model: %zu of its tensors are not declared by the chief%s", fresh,
                  ready ? "" : " (model not ready yet)");
        goto out;
    }
    if (fresh > 0 && sr__coord_model_ready(c) && !c->o->allow_new_variables) {
        REPLY_ERR(r, SR_EINVAL,
                  "declare model: the model is ready and %zu of these tensors are new to it; "
                  "adding tensors to a ready model needs the coordinator option "
                  "--allow-new-variables",
                  fresh);
        goto out;
    }
    if (fresh > 0) {
        size_t npacks0 = c->npacks;
        /* Records for the new tensors only: a worker's request (all of
         * them stored) allocates none. */
        sr_err rc = (m = calloc(fresh, sizeof(*m))) == NULL
                        ? sr_fail(SR_ENOMEM, "%zu new tensors", fresh)
                        : place_new(c, d, n, g, m, &nm);
        if (rc == SR_OK) {
            rc = sr_store_add_members(c->st, m, nm);
        }
        if (rc == SR_OK) {
            c->npacks = npacks0; /* adopt_members counts them again */
            rc = adopt_members(c, m, nm);
        }
        if (rc != SR_OK) {
            c->npacks = npacks0;
            REPLY_ERR(r, rc, "declare model: %s", sr_errdetail());
            goto out;
        }
        SR_LOG(SR_LOG_NOTICE, "COORD-MODEL",
               "tensors=%zu new=%zu packs=%zu global_step=%" PRId64 "%s", n, nm, c->npacks,
               c->global_step, sr__coord_model_ready(c) ? " (added to a ready model)" : "");
    }
    reply_layout(c, r, d, n);
out:
    free(d);
    free(order);
    free(m);
}

void
sr__coord_packs_json(const coord *c, sr_strbuf *b)
{
    sr_strbuf_printf(b, ",\"packs\":[");
    for (size_t i = 0; i < c->npacks; i++) {
        const cpack *p = &c->packs[i];
        sr_strbuf_printf(b, "%s{\"name\":", i ? "," : "");
        sr_strbuf_json_str(b, p->name);
        sr_strbuf_printf(
            b, ",\"dtype\":\"%s\",\"trainable\":%s,\"bytes\":%" PRIu64 ",\"tensors\":%zu}",
            sr_dtype_name(p->dtype), p->trainable ? "true" : "false", p->nbytes, p->nmembers);
    }
    sr_strbuf_printf(b, "],\"tensors\":[");
    for (size_t i = 0; i < c->nmembers; i++) {
        const cmember *m = &c->members[i];
        const int64_t *shape = sr__coord_member_shape(c, m);
        sr_strbuf_printf(b, "%s{\"name\":", i ? "," : "");
        sr_strbuf_json_str(b, sr__coord_member_name(c, m));
        sr_strbuf_printf(b, ",\"pack\":");
        sr_strbuf_json_str(b, sr__coord_member_pack(c, m));
        sr_strbuf_printf(
            b, ",\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"dtype\":\"%s\",\"shape\":[",
            m->offset, m->nbytes, sr_dtype_name(m->dtype));
        for (int d = 0; d < m->ndim; d++) {
            sr_strbuf_printf(b, "%s%" PRId64, d ? "," : "", shape[d]);
        }
        sr_strbuf_printf(b, "],\"trainable\":%s}", m->trainable ? "true" : "false");
    }
    sr_strbuf_printf(b, "]");
}
