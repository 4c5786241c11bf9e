/*
 * Packs' members (schema 4): the tensors of a model declared as a whole,
 * each a named range of a pack variable.  The rows are metadata only; the
 * bytes are the pack's chunks (store_chunk.c).  A rewind drops the members
 * declared after its step, as it drops variables (rewind_tx).
 * docs/store.md, "Packs".
 */
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/name.h"
#include "core/text.h"
#include "store/store_int.h"

int
sr_store_is_pack_name(const char *name)
{
    return name != NULL && strncmp(name, SR_STORE_PACK_PREFIX, strlen(SR_STORE_PACK_PREFIX)) == 0;
}

static sr_err
check_member(sr_store *st, const sr_store_member *m)
{
    uint64_t nbytes;

    if (m->name == NULL || m->pack == NULL) {
        return sr__store_fail(st, SR_EINVAL, "%s: a member without a name or a pack", st->path);
    }
    if (sr_name_check(m->name, strlen(m->name)) != SR_OK || sr_store_is_pack_name(m->name)) {
        return sr__store_fail(st, SR_EINVAL, "%s: member \"%s\": not a tensor name", st->path,
                              SR_ESC(m->name));
    }
    if (!sr_store_is_pack_name(m->pack) || strlen(m->pack) > SR_STORE_MAX_NAME) {
        return sr__store_fail(st, SR_EINVAL, "%s: member %s: its pack \"%s\" is not a pack name",
                              st->path, SR_ESC(m->name), SR_ESC(m->pack));
    }
    if (sr_shape_bytes(m->dtype, m->ndim, m->shape, &nbytes) != SR_OK || nbytes != m->nbytes ||
        m->offset > (uint64_t)INT64_MAX - nbytes) {
        return sr__store_fail(st, SR_EINVAL, "%s: member %s: bad dtype, shape or offset", st->path,
                              SR_ESC(m->name));
    }
    return SR_OK;
}

static sr_err
name_taken(sr_store *st, const char *name)
{
    sqlite3_stmt *s = NULL;
    int           r = sqlite3_prepare_v2(st->db,
                                         "SELECT 1 FROM member WHERE name = ?1"
                                                   " UNION ALL SELECT 1 FROM variable WHERE name = ?1",
                                         -1, &s, NULL);
    if (r != SQLITE_OK) {
        return sr__store_sqlerr(st, r, "look up a member");
    }
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    r = sqlite3_step(s);
    sqlite3_finalize(s);
    if (r == SQLITE_ROW) {
        return sr__store_fail(st, SR_EEXIST, "%s: a tensor named %s exists already", st->path,
                              SR_ESC(name));
    }
    return r == SQLITE_DONE ? SR_OK : sr__store_sqlerr(st, r, "look up a member");
}

sr_err
sr_store_add_members(sr_store *st, const sr_store_member *m, size_t n)
{
    sqlite3_stmt *s = NULL;
    int64_t       g = 0;
    sr_err        rc;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (m == NULL && n > 0) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_add_members: NULL members");
    }
    for (size_t i = 0; i < n; i++) {
        if ((rc = check_member(st, &m[i])) != SR_OK) {
            return rc;
        }
    }
    if ((rc = sr__store_begin_write(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    rc = sr__store_meta_i64(st, "global_step", &g);
    if (rc == SR_OK) {
        int r = sqlite3_prepare_v2(st->db,
                                   "INSERT INTO member(name, pack, offset, dtype, shape, nbytes,"
                                   " trainable, pos, created_step)"
                                   " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                                   -1, &s, NULL);
        if (r != SQLITE_OK) {
            rc = sr__store_sqlerr(st, r, "record members");
        }
    }
    for (size_t i = 0; i < n && rc == SR_OK; i++) {
        char shape[SR_MAX_NDIM * 24 + 4];
        if ((rc = name_taken(st, m[i].name)) != SR_OK) {
            break;
        }
        sr_shape_format(m[i].ndim, m[i].shape, shape, sizeof(shape));
        sqlite3_reset(s);
        sqlite3_bind_text(s, 1, m[i].name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, m[i].pack, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, (sqlite3_int64)m[i].offset);
        sqlite3_bind_int(s, 4, m[i].dtype);
        sqlite3_bind_text(s, 5, shape, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(s, 6, (sqlite3_int64)m[i].nbytes);
        sqlite3_bind_int(s, 7, m[i].trainable ? 1 : 0);
        sqlite3_bind_int(s, 8, m[i].pos);
        sqlite3_bind_int64(s, 9, g);
        rc = sr__store_run(st, s, "record a member");
    }
    sqlite3_finalize(s);
    return sr__store_ret(st, sr__store_end(st, rc));
}

/* The names of the members read so far, back to back, each member's as
 * offsets until the list is done (the records' pointers are set then). */
typedef struct {
    char  *buf;
    size_t len, cap;
    size_t last_pack; /* the offset of the last pack name kept */
} name_buf;

static int
keep_name(name_buf *nb, const char *s, size_t *at)
{
    size_t n = strlen(s) + 1;
    char  *p = sr_grow_array(nb->buf, &nb->cap, nb->len + n, 1);

    if (p == NULL) {
        return -1;
    }
    nb->buf = p;
    memcpy(nb->buf + nb->len, s, n);
    *at = nb->len;
    nb->len += n;
    return 0;
}

/* One row into *m, its names into nb (offsets in at[0], at[1]). */
static sr_err
member_from_row(sr_store *st, sqlite3_stmt *s, sr_store_member *m, name_buf *nb, size_t at[2])
{
    const char *name = (const char *)sqlite3_column_text(s, 0);
    const char *pack = (const char *)sqlite3_column_text(s, 1);
    const char *shape = (const char *)sqlite3_column_text(s, 4);
    uint64_t    nbytes;

    memset(m, 0, sizeof(*m));
    m->offset = (uint64_t)sqlite3_column_int64(s, 2);
    m->dtype = sqlite3_column_int(s, 3);
    m->nbytes = (uint64_t)sqlite3_column_int64(s, 5);
    m->trainable = sqlite3_column_int(s, 6);
    m->pos = sqlite3_column_int(s, 7);
    m->created_step = sqlite3_column_int64(s, 8);
    if (name == NULL || pack == NULL || strlen(name) > SR_STORE_MAX_NAME ||
        strlen(pack) > SR_STORE_MAX_NAME || sqlite3_column_int64(s, 2) < 0 ||
        sr__store_parse_shape(shape, &m->ndim, m->shape) != 0 ||
        sr_shape_bytes(m->dtype, m->ndim, m->shape, &nbytes) != SR_OK || nbytes != m->nbytes) {
        return sr__store_fail(st, SR_ECORRUPT, "%s: member %s has a bad row", st->path,
                              name != NULL ? SR_ESC(name) : "(null)");
    }
    /* A run of members shares its pack's name. */
    if (nb->len > 0 && strcmp(nb->buf + nb->last_pack, pack) == 0) {
        at[1] = nb->last_pack;
    } else if (keep_name(nb, pack, &at[1]) != 0) {
        return sr__store_fail(st, SR_ENOMEM, "member names");
    }
    nb->last_pack = at[1];
    if (keep_name(nb, name, &at[0]) != 0) {
        return sr__store_fail(st, SR_ENOMEM, "member names");
    }
    return SR_OK;
}

/* The records and the names as one block (the list's contract); NULL: out
 * of memory. */
static sr_store_member *
one_block(const sr_store_member *a, const size_t *at, size_t n, const name_buf *nb)
{
    size_t           head = n * sizeof(*a);
    sr_store_member *out = malloc(head + nb->len + 1);

    if (out == NULL) {
        return NULL;
    }
    char *names = (char *)out + head;
    if (n > 0) {
        memcpy(out, a, head);
    }
    if (nb->len > 0) {
        memcpy(names, nb->buf, nb->len);
    }
    for (size_t i = 0; i < n; i++) {
        out[i].name = names + at[2 * i];
        out[i].pack = names + at[2 * i + 1];
    }
    return out;
}

sr_err
sr_store_list_members(sr_store *st, sr_store_member **out, size_t *n)
{
    sqlite3_stmt    *s = NULL;
    sr_store_member *a = NULL, *block = NULL;
    size_t          *at = NULL;
    name_buf         nb = {0};
    size_t           cnt = 0, cap = 0, cap_at = 0;
    sr_err           rc;
    int              r;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (out == NULL || n == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_list_members: NULL argument");
    }
    if ((rc = sr__store_begin_read(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    r = sqlite3_prepare_v2(st->db,
                           "SELECT name, pack, offset, dtype, shape, nbytes, trainable, pos,"
                           " created_step FROM member ORDER BY pos, name",
                           -1, &s, NULL);
    if (r != SQLITE_OK) {
        rc = sr__store_sqlerr(st, r, "list members");
    }
    while (rc == SR_OK && (r = sqlite3_step(s)) == SQLITE_ROW) {
        sr_store_member *p = cnt < cap ? a : sr_grow_array(a, &cap, cnt + 1, sizeof(*a));
        size_t          *q =
            2 * cnt + 2 <= cap_at ? at : sr_grow_array(at, &cap_at, 2 * cnt + 2, sizeof(*at));
        if (p == NULL || q == NULL) {
            a = p != NULL ? p : a;
            at = q != NULL ? q : at;
            rc = sr__store_fail(st, SR_ENOMEM, "%zu members", cnt + 1);
            break;
        }
        a = p;
        at = q;
        rc = member_from_row(st, s, &a[cnt], &nb, &at[2 * cnt]);
        cnt += rc == SR_OK;
    }
    if (rc == SR_OK && r != SQLITE_DONE) {
        rc = sr__store_sqlerr(st, r, "list members");
    }
    sqlite3_finalize(s);
    rc = sr__store_end(st, rc);
    if (rc == SR_OK && (block = one_block(a, at, cnt, &nb)) == NULL) {
        rc = sr__store_fail(st, SR_ENOMEM, "%zu members", cnt);
    }
    free(a);
    free(at);
    free(nb.buf);
    if (rc != SR_OK) {
        return sr__store_ret(st, rc);
    }
    *out = block;
    *n = cnt;
    return SR_OK;
}
