/*
 * The model's memory: each variable's value in a reference-counted buffer
 * (vbuf) that pulls and the async writer share, the name index
 * (sr__coord_find_var), the optimizer slots, one accumulator per partition
 * and the memory of its sums (sr__coord_acc_memory), the buffer an apply
 * writes into (sr__coord_apply_target), and the model's load from the store
 * (sr__coord_load_model) and growth by declaration (sr__coord_add_var).
 * Invariant: the loop writes only into a buffer nobody else holds, so
 * neither a pull nor a commit ever copies a value.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/server_int.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/text.h"

vbuf *
sr__coord_vbuf_new(size_t bytes)
{
    size_t total = (sizeof(vbuf) + bytes + 63) & ~(size_t)63;
    vbuf  *b = aligned_alloc(64, total);
    if (b != NULL) {
        atomic_init(&b->refs, 1);
    }
    return b;
}

void
sr__coord_vbuf_release(vbuf *b)
{
    if (b != NULL && atomic_fetch_sub(&b->refs, 1) == 1) {
        free(b);
    }
}

/* zmq_msg_init_data's free function: a pull reply has been sent. */
void
sr__coord_vbuf_msg_free(void *data, void *hint)
{
    (void)data;
    sr__coord_vbuf_release(hint);
}

/* Whether every partition of v took dense gradients this step (its sums
 * can become the value: sparse steps change only the rows they touched). */
static int
all_dense(const cvar *v)
{
    for (uint32_t p = 0; p < v->nparts; p++) {
        if (v->acc[p].mode != SR_ACC_DENSE) {
            return 0;
        }
    }
    return 1;
}

/* The buffer the apply writes v's new value into: v's own when nobody else
 * reads it; else, with --commit sync, the accumulators' sums after a dense
 * step; else the spare when that is free (--commit async keeps one, its
 * pages already faulted in), else a new one; NULL when out of memory. */
vbuf *
sr__coord_apply_target(const coord *c, cvar *v)
{
    if (atomic_load(&v->vb->refs) == 1) {
        return v->vb;
    }
    if (!c->o->commit_async && v->ab != NULL && all_dense(v)) {
        return v->ab; /* apply_step hands the sums' memory over */
    }
    if (v->spare != NULL && atomic_load(&v->spare->refs) == 1) {
        vbuf *b = v->spare;
        v->spare = NULL;
        return b;
    }
    vbuf *b = sr__coord_vbuf_new((size_t)v->meta.nbytes);
    if (b == NULL) {
        sr_fail(SR_ENOMEM, "variable %s: %" PRIu64 " bytes", SR_ESC(v->meta.name), v->meta.nbytes);
    }
    return b;
}

static uint64_t
name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s != '\0'; s++) {
        h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    }
    return h;
}

/* Every push, pull and declare looks a variable up by name: an open-
 * addressing index of the variables (slot = index + 1, 0 = empty), at most
 * half full, rebuilt when the model grows. */
static void
index_insert(coord *c, size_t i)
{
    size_t k = (size_t)name_hash(c->vars[i].meta.name) & (c->index_cap - 1);
    while (c->index[k] != 0) {
        k = (k + 1) & (c->index_cap - 1);
    }
    c->index[k] = (uint32_t)(i + 1);
}

/* Make room in the index for one more variable. */
static sr_err
index_reserve(coord *c)
{
    size_t cap = 16;

    if (2 * (c->nvars + 1) <= c->index_cap) {
        return SR_OK;
    }
    while (cap < 2 * (c->nvars + 1)) {
        cap *= 2;
    }
    uint32_t *slots = calloc(cap, sizeof(*slots));
    if (slots == NULL) {
        return sr_fail(SR_ENOMEM, "variable index of %zu slots", cap);
    }
    free(c->index);
    c->index = slots;
    c->index_cap = cap;
    for (size_t i = 0; i < c->nvars; i++) {
        index_insert(c, i);
    }
    return SR_OK;
}

cvar *
sr__coord_find_var(coord *c, const char *name)
{
    if (c->index_cap == 0) {
        return NULL;
    }
    for (size_t k = (size_t)name_hash(name) & (c->index_cap - 1); c->index[k] != 0;
         k = (k + 1) & (c->index_cap - 1)) {
        cvar *v = &c->vars[c->index[k] - 1];
        if (strcmp(v->meta.name, name) == 0) {
            return v;
        }
    }
    return NULL;
}

static sr_err
alloc_slots(coord *c, cvar *v)
{
    size_t bytes = (size_t)v->meta.nbytes ? (size_t)v->meta.nbytes : 1;

    if (!v->meta.trainable) {
        return SR_OK;
    }
    if (c->o->optim.kind != SR_OPT_SGD && (v->s1 = calloc(1, bytes)) == NULL) {
        return sr_fail(SR_ENOMEM, "variable %s: slot of %zu bytes", SR_ESC(v->meta.name), bytes);
    }
    if ((c->o->optim.kind == SR_OPT_ADAM || c->o->optim.kind == SR_OPT_ADAMW) &&
        (v->s2 = calloc(1, bytes)) == NULL) {
        return sr_fail(SR_ENOMEM, "variable %s: slot of %zu bytes", SR_ESC(v->meta.name), bytes);
    }
    if (c->o->optim.ema) {
        if ((v->ema = malloc(bytes)) == NULL) {
            return sr_fail(SR_ENOMEM, "variable %s: EMA of %zu bytes", SR_ESC(v->meta.name), bytes);
        }
        memcpy(v->ema, v->value, (size_t)v->meta.nbytes);
    }
    return SR_OK;
}

/* Read a slot as of the latest commit; a slot that was never stored (new
 * optimizer, new variable) keeps its initial value. */
static sr_err
load_slot(coord *c, cvar *v, const char *name, void *dst)
{
    sr_err rc;
    if (dst == NULL) {
        return SR_OK;
    }
    rc = sr_store_read_tensor(c->st, v->meta.id, name, -1, dst, (size_t)v->meta.nbytes);
    if (rc == SR_ENOENT) {
        SR_LOG(SR_LOG_INFO, "COORD-SLOT-NEW", "variable=\"%s\" slot=\"%s\" initialised",
               SR_ESC(v->meta.name), SR_ESC(name));
        return SR_OK;
    }
    return rc;
}

static sr_err
chunk_layout(coord *c, cvar *v)
{
    uint64_t cb;
    sr_err   rc;
    size_t   es = sr_dtype_size(v->meta.dtype);

    if ((rc = sr_store_nchunks(c->st, v->meta.id, &v->nchunks)) != SR_OK ||
        (rc = sr_store_chunk_bytes(c->st, v->meta.id, &cb)) != SR_OK) {
        return rc;
    }
    v->chunk_elems = es ? cb / es : 0;
    if ((v->dirty = calloc(v->nchunks ? v->nchunks : 1, 1)) == NULL) {
        return sr_fail(SR_ENOMEM, "variable %s: %zu chunk flags", SR_ESC(v->meta.name), v->nchunks);
    }
    return SR_OK;
}

void
sr__coord_free_var(cvar *v)
{
    sr__coord_vbuf_release(v->vb);
    sr__coord_vbuf_release(v->spare);
    free(v->s1);
    free(v->s2);
    free(v->ema);
    free(v->dirty);
    for (uint32_t p = 0; v->acc != NULL && p < v->nparts; p++) {
        sr__accum_destroy(&v->acc[p]);
    }
    free(v->acc);
    sr__coord_vbuf_release(v->ab);
}

/* Partition p of v: its first row and number of rows. */
void
sr__coord_part_range(const cvar *v, uint32_t p, uint64_t *row0, uint64_t *nrows)
{
    uint64_t r0 = (uint64_t)p * v->part_rows;
    *row0 = r0;
    *nrows = v->rows - r0 < v->part_rows ? v->rows - r0 : v->part_rows;
}

/* Wait for a pull of v's previous value to be sent (sync), rather than
 * hold a third copy of v: briefly, and not again for a while when the
 * wait ran out (a slow reader must not stall every step). */
static void
wait_spare(coord *c, cvar *v)
{
    if (c->o->commit_async || v->spare == NULL || c->global_step < v->spare_wait_from) {
        return;
    }
    for (int ms = 0; atomic_load(&v->spare->refs) != 1; ms++) {
        if (ms == SPARE_WAIT_MS) {
            v->spare_wait_from = c->global_step + SPARE_WAIT_OFF_STEPS;
            SR_LOG(SR_LOG_NOTICE, "COORD-SPARE-WAIT",
                   "%s: a pull of the previous value still in flight after %d ms; a third "
                   "buffer instead (no wait for %d steps)",
                   SR_ESC(v->meta.name), SPARE_WAIT_MS, SPARE_WAIT_OFF_STEPS);
            return;
        }
        sr_clock_sleep_ms(1);
    }
}

/* Give v's accumulators their sums before a push adds into them: one buffer
 * laid out like the value, the spare when nobody reads it any more (the
 * value before the last apply, its pages faulted in), else a new one. */
sr_err
sr__coord_acc_memory(coord *c, cvar *v)
{
    vbuf *b = NULL;

    if (v->ab != NULL) {
        return SR_OK;
    }
    wait_spare(c, v);
    if (v->spare != NULL && atomic_load(&v->spare->refs) == 1) {
        b = v->spare;
        v->spare = NULL;
    } else if ((b = sr__coord_vbuf_new((size_t)v->meta.nbytes)) == NULL) {
        return sr_fail(SR_ENOMEM, "variable %s: %" PRIu64 " bytes of sums", SR_ESC(v->meta.name),
                       v->meta.nbytes);
    }
    if (!c->o->commit_async) {
        sr__coord_vbuf_release(v->spare); /* still read by a pull: it frees it */
        v->spare = NULL;
    }
    v->ab = b;
    for (uint32_t p = 0; p < v->nparts; p++) {
        uint64_t r0, nr;
        sr__coord_part_range(v, p, &r0, &nr);
        sr__accum_set_sum(&v->acc[p], b->data + r0 * v->row_elems * sr_dtype_size(v->meta.dtype));
    }
    return SR_OK;
}

/* One accumulator per partition (a variable of at most partition_bytes is
 * one partition). */
/* The most gradients one task gives a step: R replicas are R tasks when
 * N >= R; with fewer tasks each computes several batches. */
int
sr__coord_task_share(const sr_coord_opts *o)
{
    return o->N >= o->R ? 1 : (o->R + o->N - 1) / o->N;
}

static sr_err
init_accums(coord *c, cvar *v)
{
    uint64_t       elems = v->meta.nbytes / sr_dtype_size(v->meta.dtype);
    sr_wire_layout l = sr_wire_partition_layout(v->meta.nbytes, v->meta.ndim, v->meta.shape[0],
                                                c->o->partition_bytes);
    uint64_t       nparts = l.nparts;

    /* An empty variable is one row of nothing: dense pushes of 0 bytes. */
    v->rows = l.rows;
    v->row_elems = elems / l.rows;
    v->part_rows = l.part_rows;
    if (nparts > (1u << 24)) {
        return sr_fail(SR_EINVAL,
                       "variable %s: %" PRIu64 " partitions (rows of %" PRIu64
                       " bytes, partitions of %" PRIu64 " bytes)",
                       SR_ESC(v->meta.name), nparts, v->row_elems * sr_dtype_size(v->meta.dtype),
                       c->o->partition_bytes);
    }
    if ((v->acc = calloc((size_t)nparts, sizeof(*v->acc))) == NULL) {
        return sr_fail(SR_ENOMEM, "variable %s: %" PRIu64 " accumulators", SR_ESC(v->meta.name),
                       nparts);
    }
    for (uint32_t p = 0; p < (uint32_t)nparts; p++) {
        uint64_t r0, nr;
        sr_err   rc;
        v->nparts = p + 1;
        sr__coord_part_range(v, p, &r0, &nr);
        if ((rc = sr__accum_init(&v->acc[p], v->meta.dtype, nr * v->row_elems, nr, c->o->R,
                                 c->global_step)) != SR_OK) {
            return rc;
        }
        sr__accum_set_rules(&v->acc[p], sr__coord_task_share(c->o), c->o->deterministic_sum);
        sr__accum_set_sumsq(&v->acc[p], c->o->optim.clip_norm > 0, c->o->optim.sparse_mean);
    }
    v->has_acc = 1;
    return SR_OK;
}

/* Add a variable to the in-memory model with its value in `vb` (adopted
 * on success). */
sr_err
sr__coord_add_var(coord *c, const sr_store_var *meta, vbuf *vb, int load_slots)
{
    cvar  *v;
    sr_err rc;

    if ((rc = index_reserve(c)) != SR_OK) {
        return rc;
    }
    v = sr_grow_array(c->vars, &c->cap_vars, c->nvars + 1, sizeof(*v));
    if (v == NULL) {
        return sr_fail(SR_ENOMEM, "variable table");
    }
    c->vars = v;
    v = &c->vars[c->nvars];
    memset(v, 0, sizeof(*v));
    v->meta = *meta;
    v->vb = vb;
    v->value = vb->data;
    v->fresh_from = c->global_step + 1; /* new to every client (token deltas) */
    if ((rc = chunk_layout(c, v)) != SR_OK || (rc = alloc_slots(c, v)) != SR_OK) {
        goto fail;
    }
    if (load_slots && v->meta.trainable) {
        const char *mom = c->o->optim.kind == SR_OPT_MOMENTUM ? "momentum" : "adam_m";
        if ((rc = load_slot(c, v, mom, v->s1)) != SR_OK ||
            (rc = load_slot(c, v, "adam_v", v->s2)) != SR_OK ||
            (rc = load_slot(c, v, "ema", v->ema)) != SR_OK) {
            goto fail;
        }
    }
    if (v->meta.trainable) {
        if ((rc = init_accums(c, v)) != SR_OK) {
            goto fail;
        }
        c->ntrainable += v->nparts;
    }
    c->nvars++;
    index_insert(c, c->nvars - 1);
    if (v->meta.nbytes > c->max_var_bytes) {
        c->max_var_bytes = v->meta.nbytes;
    }
    c->total_var_bytes += v->meta.nbytes;
    return SR_OK;
fail:
    v->vb = NULL; /* still the caller's */
    sr__coord_free_var(v);
    return rc;
}

sr_err
sr__coord_load_model(coord *c)
{
    sr_store_var *metas = NULL;
    size_t        n = 0;
    sr_err        rc;

    if ((rc = sr_store_list_vars(c->st, &metas, &n)) != SR_OK) {
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        vbuf *vb = sr__coord_vbuf_new((size_t)metas[i].nbytes);
        if (vb == NULL) {
            rc = sr_fail(SR_ENOMEM, "variable %s: %" PRIu64 " bytes", SR_ESC(metas[i].name),
                         metas[i].nbytes);
            break;
        }
        rc = sr_store_read_tensor(c->st, metas[i].id, "", -1, vb->data, (size_t)metas[i].nbytes);
        if (rc == SR_OK) {
            rc = sr__coord_add_var(c, &metas[i], vb, 1);
        }
        if (rc != SR_OK) {
            sr__coord_vbuf_release(vb);
            break;
        }
    }
    free(metas);
    return rc == SR_OK ? sr__coord_load_members(c) : rc;
}
