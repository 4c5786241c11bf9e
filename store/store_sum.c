/*
 * Chunk checksums: every chunk version carries XXH3_64bits of its bytes in
 * its `chunk` row (chunk.sum), written in the transaction that writes the
 * bytes, and checked wherever bytes leave the store: every read
 * (sr_store_read_tensor, which the coordinator's load, restore and rewind
 * go through), sr_store_rewind (every version the target step reads, before
 * anything is deleted), sr_store_export (every version of the copy) and
 * sr_store_verify (every version of every retained step).
 *
 * SQLite's own checks (integrity_check, the WAL's frame checksums) cover its
 * pages and b-trees, not what a blob holds: one flipped byte inside a value
 * was read back as a valid value before schema 3.  The sum sits in the small
 * `chunk` row, not beside the blob in `chunk_data`, so that setting it never
 * rewrites the blob (an UPDATE of a row rewrites its whole record).  Why XXH3
 * and not zlib's crc32: docs/store.md, "Checksums" (4 MiB: 0.24 against
 * 0.72 ms here).
 *
 * A mismatch is SR_ECORRUPT naming the variable, the slot, the step read,
 * the version's step and the chunk index.  It does not make the handle
 * sticky: the handle's state is not in doubt, only that chunk's bytes, and
 * every read of that chunk fails the same way while other reads work.
 */
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/text.h"
#include "store/store_int.h"

/* Bytes hashed per blob read when a blob is streamed (verify, rewind,
 * export): memory stays bounded whatever the chunk size. */
#define SUM_PIECE (1u << 20)

uint64_t
sr__store_sum(const void *p, size_t len)
{
    return (uint64_t)XXH3_64bits(p, len);
}

/* *out = the XXH3 of `len` bytes produced by piece(arg, buf, off, n), read
 * through buf (bufcap bytes); the streaming state is heap-allocated by the
 * library (its layout is not part of xxhash's stable ABI). */
typedef sr_err (*piece_fn)(void *arg, uint8_t *buf, size_t off, size_t n);

static sr_err
stream_sum(piece_fn piece, void *arg, uint8_t *buf, size_t bufcap, size_t len, uint64_t *out)
{
    XXH3_state_t *state = XXH3_createState();
    sr_err        rc = SR_OK;

    if (state == NULL) {
        return sr_fail(SR_ENOMEM, "checksum state");
    }
    XXH3_64bits_reset(state);
    for (size_t off = 0; off < len && rc == SR_OK; off += bufcap) {
        size_t n = len - off < bufcap ? len - off : bufcap;
        if ((rc = piece(arg, buf, off, n)) == SR_OK) {
            XXH3_64bits_update(state, buf, n);
        }
    }
    /* XXH3's streaming result equals the one-shot hash of the same bytes. */
    *out = (uint64_t)XXH3_64bits_digest(state);
    XXH3_freeState(state);
    return rc;
}

static sr_err
zero_piece(void *arg, uint8_t *buf, size_t off, size_t n)
{
    (void)arg;
    (void)buf;
    (void)off;
    (void)n;
    return SR_OK; /* buf stays zero */
}

sr_err
sr__store_sum_zeros(size_t len, uint64_t *out)
{
    static const uint8_t zeros[4096];

    if (len <= sizeof(zeros)) {
        *out = sr__store_sum(zeros, len);
        return SR_OK;
    }
    return stream_sum(zero_piece, NULL, (uint8_t *)(uintptr_t)zeros, sizeof(zeros), len, out);
}

sr_err
sr__store_sum_mismatch(sr_store *st, const store_var *v, const store_tensor *t, uint64_t idx,
                       int64_t at, int64_t version, uint64_t stored, uint64_t computed)
{
    return sr__store_fail(st, SR_ECORRUPT,
                          "%s: variable '%s' slot '%s' step %lld: chunk %llu (version of step "
                          "%lld) fails its checksum (stored %016llx, computed %016llx)",
                          st->path, SR_ESC(v->v.name), SR_ESC(t->slot), (long long)at,
                          (unsigned long long)idx, (long long)version, (unsigned long long)stored,
                          (unsigned long long)computed);
}

typedef struct {
    sr_store     *st;
    sqlite3_blob *blob;
} blob_reader;

static sr_err
blob_piece(void *arg, uint8_t *buf, size_t off, size_t n)
{
    blob_reader *b = arg;
    int          r = sqlite3_blob_read(b->blob, buf, (int)n, (int)off);

    return r == SQLITE_OK ? SR_OK : sr__store_sqlerr(b->st, r, "read chunk data");
}

sr_err
sr__store_blob_sum(sr_store *st, sqlite3_blob **blob, int64_t data_id, size_t size, uint64_t *out)
{
    sr_err rc;

    if (st->sumbuf == NULL && (st->sumbuf = malloc(SUM_PIECE)) == NULL) {
        return sr__store_fail(st, SR_ENOMEM, "checksum buffer (%u bytes)", SUM_PIECE);
    }
    if ((rc = sr__store_blob_at(st, blob, data_id, 0, size)) != SR_OK) {
        return rc;
    }
    blob_reader b = {st, *blob};
    if ((rc = stream_sum(blob_piece, &b, st->sumbuf, SUM_PIECE, size, out)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    return SR_OK;
}

/* One version of a chunk: its bytes against its stored sum. */
static sr_err
check_version(sr_store *st, sqlite3_blob **blob, sqlite3_stmt *s, int64_t at)
{
    int64_t             tensor_id = sqlite3_column_int64(s, 0);
    int64_t             idx = sqlite3_column_int64(s, 1);
    int64_t             version = sqlite3_column_int64(s, 2);
    int64_t             data_id = sqlite3_column_int64(s, 3);
    int                 has_sum = sqlite3_column_type(s, 4) != SQLITE_NULL;
    uint64_t            stored = (uint64_t)sqlite3_column_int64(s, 4), got = 0;
    const store_tensor *t = NULL;
    const store_var    *v = NULL;
    sr_err              rc;

    for (size_t i = 0; i < st->ntensors && t == NULL; i++) {
        t = st->tensors[i].id == tensor_id ? &st->tensors[i] : NULL;
    }
    if (t == NULL || (v = sr__store_var(st, t->var_id)) == NULL || idx < 0 ||
        (uint64_t)idx >= v->nchunks) {
        return sr__store_fail(st, SR_ECORRUPT,
                              "%s: chunk version (tensor %lld, chunk %lld, step %lld) belongs to "
                              "no variable",
                              st->path, (long long)tensor_id, (long long)idx, (long long)version);
    }
    uint64_t off = (uint64_t)idx * v->v.chunk_bytes;
    uint64_t size = v->v.nbytes - off < v->v.chunk_bytes ? v->v.nbytes - off : v->v.chunk_bytes;
    if ((rc = sr__store_blob_sum(st, blob, data_id, (size_t)size, &got)) != SR_OK) {
        return rc;
    }
    if (!has_sum) {
        return sr__store_fail(st, SR_ECORRUPT,
                              "%s: variable '%s' slot '%s': chunk %lld (version of step %lld) "
                              "has no checksum",
                              st->path, SR_ESC(v->v.name), SR_ESC(t->slot), (long long)idx,
                              (long long)version);
    }
    if (got != stored) {
        return sr__store_sum_mismatch(st, v, t, (uint64_t)idx, at < 0 ? version : at, version,
                                      stored, got);
    }
    return SR_OK;
}

sr_err
sr__store_check_sums(sr_store *st, int64_t step)
{
    /* The versions step S reads: per chunk the newest version <= S (SQLite
     * takes the bare columns of a max() aggregate from the max row). */
    static const char at_step[] =
        "SELECT tensor_id, idx, max(step), data_id, sum FROM chunk WHERE step <= ?1"
        " GROUP BY tensor_id, idx ORDER BY tensor_id, idx";
    static const char every[] = "SELECT tensor_id, idx, step, data_id, sum FROM chunk"
                                " ORDER BY tensor_id, idx, step";
    sqlite3_stmt     *s = NULL;
    sqlite3_blob     *blob = NULL;
    sr_err            rc;
    int               r;

    if ((rc = sr__store_cache_load(st)) != SR_OK) {
        return rc;
    }
    if ((r = sqlite3_prepare_v2(st->db, step >= 0 ? at_step : every, -1, &s, NULL)) != SQLITE_OK) {
        return sr__store_sqlerr(st, r, "read chunk versions");
    }
    sqlite3_bind_int64(s, 1, step);
    while (rc == SR_OK && (r = sqlite3_step(s)) == SQLITE_ROW) {
        rc = check_version(st, &blob, s, step);
    }
    if (rc == SR_OK && r != SQLITE_DONE) {
        rc = sr__store_sqlerr(st, r, "read chunk versions");
    }
    sqlite3_blob_close(blob);
    sqlite3_finalize(s);
    return rc;
}
