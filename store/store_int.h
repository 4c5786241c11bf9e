/*
 * store/ internals shared by store.c (handle, errors, small records),
 * store_schema.c (identity, pragmas, migrations), store_chunk.c (chunked
 * tensors, versions, commit, rewind) and store_verify.c.  Only store/ sees
 * this header; only store/ includes sqlite3.h.  See docs/store.md.
 */
#ifndef SR_STORE_INT_H
#define SR_STORE_INT_H

#include <sqlite3.h>
#include <stdint.h>

#include "store/store.h"

/* 'SREP': PRAGMA application_id of every syncrep store. */
#define SR_STORE_APP_ID 0x53524550
/* meta('format') of every syncrep store. */
#define SR_STORE_FORMAT "syncrep-store"
/* New files get this page size (set before the first table exists). */
#define SR_STORE_PAGE_SIZE 65536
/* The largest user_version read as a newer build's schema; above it (or
 * negative) the header is damaged. */
#define SR_STORE_MAX_SCHEMA_VERSION 1000
/* sr_store_opts.wal_checkpoint_bytes = 0 (the default) ties the WAL's limit
 * to the commits: SR_STORE_WAL_COMMITS times the largest commit's WAL
 * bytes, at least SR_STORE_WAL_MIN_BYTES, at most SR_STORE_WAL_MAX_BYTES
 * (store_ckpt.c, docs/store.md "Checkpoints"). */
#define SR_STORE_WAL_COMMITS   16
#define SR_STORE_WAL_MIN_BYTES ((int64_t)8 << 20)
#define SR_STORE_WAL_MAX_BYTES ((int64_t)512 << 20)
/* Largest chunk: SQLite's blob limit is 1e9 bytes; keep well below it. */
#define SR_STORE_MAX_CHUNK_BYTES (256u << 20)

/* The VFS every store connection opens with (store_vfs.c): the default one
 * with the small writes of a WAL commit gathered into one.  Registered by
 * sr__store_vfs_init (idempotent, thread-safe; SQLITE_OK or an SQLite code). */
#define SR_STORE_VFS "syncrep"
int sr__store_vfs_init(void);
/* sqlite3_file_control opcode of the syncrep VFS: *(int *)arg != 0 turns
 * the early writeback of the connection's WAL on (store_vfs.c). */
#define SR__FCNTL_WAL_WRITEBACK 0x53520001

/* The background WAL checkpoint (store_ckpt.c).  setup: on a read-write
 * connection, install the commit hook that hands checkpoints to a thread
 * (or, with opts.checkpoint_inline, SQLite's wal_autocheckpoint); stop:
 * join the thread and close its connection (before the handle's). */
typedef struct store_ckpt store_ckpt;
sr_err                    sr__store_ckpt_setup(sr_store *st, int64_t page_size);
void                      sr__store_ckpt_stop(sr_store *st);
/* The frames the WAL held after the handle's last commit (0: none known). */
int64_t sr__store_ckpt_wal_frames(const sr_store *st);

/* Cached statements.  Prepared once (SQLITE_PREPARE_PERSISTENT) on first use
 * and reused: the commit loop never calls sqlite3_prepare. */
typedef enum {
    STMT_BEGIN,           /* BEGIN (deferred: read snapshots) */
    STMT_BEGIN_IMMEDIATE, /* BEGIN IMMEDIATE (every write transaction) */
    STMT_COMMIT,
    STMT_ROLLBACK,
    STMT_META_GET,           /* ?1 key -> value */
    STMT_META_SET,           /* ?1 key, ?2 value */
    STMT_DATA_VERSION,       /* PRAGMA data_version */
    STMT_VARS,               /* all variables, by id */
    STMT_TENSORS,            /* all tensors, by (var_id, slot) */
    STMT_VAR_ONE,            /* one variable, as STMT_VARS */
    STMT_TENSORS_OF,         /* one variable's tensors, as STMT_TENSORS */
    STMT_VERSION_SUPERSEDED, /* versions superseded in (?2, ?1] -> (tensor_id, idx, step) */
    STMT_VERSION_DELETE,     /* ?1 tensor, ?2 idx, ?3 step */
    STMT_VAR_INSERT,
    STMT_TENSOR_INSERT,
    STMT_CKPT_TOP,         /* newest ?1 checkpoint steps, descending */
    STMT_CKPT_ALL,         /* all checkpoint steps, ascending */
    STMT_CKPT_HAS,         /* ?1 step -> 1 row if retained */
    STMT_CKPT_PUT,         /* ?1 step, ?2 created_ms */
    STMT_CKPT_PRUNE,       /* drop checkpoints < ?1 */
    STMT_CKPT_SPARSE,      /* the first checkpoint < ?1 of each window of ?2 steps, ascending */
    STMT_CKPT_BELOW,       /* checkpoint steps < ?1, ascending */
    STMT_CKPT_DROP,        /* drop checkpoint ?1 */
    STMT_CHUNK_VERSIONS,   /* ?1 tensor, ?2 idx, after step ?3 -> (step, data_id) ascending */
    STMT_CHUNK_RESTEP,     /* recycle: ?1 new step, ?2 tensor, ?3 idx, ?4 old step, ?5 sum */
    STMT_CHUNK_INSERT,     /* ?1 tensor, ?2 idx, ?3 step, ?4 data_id, ?5 sum */
    STMT_CHUNK_SUM,        /* rewrite in place: ?1 tensor, ?2 idx, ?3 step, ?4 sum */
    STMT_DATA_INSERT,      /* zeroblob(?1) -> rowid */
    STMT_VERSION_PRUNE,    /* drop versions no retained step >= ?1 needs */
    STMT_VERSION_PRUNE_IN, /* drop versions in (?1, ?2) no checkpoint needs */
    STMT_CHUNK_AT,         /* ?1 tensor, ?2 idx, ?3 step -> newest (data_id, step, sum) <= step */
    STMT_WORKER_UPSERT,
    STMT_LOG_PUT,
    STMT_REPLICAS_PUT, /* issue 26: one step's replica counts */
    STMT_COUNT
} store_stmt_id;

/* A chunk's bytes waiting for the end of a write transaction's row work
 * (store_chunk.c, "Writing the bytes last"). */
typedef struct {
    int64_t        data_id;
    const uint8_t *src;
    size_t         size;
} store_write;

/* A variable as the commit path needs it (cached on the handle). */
typedef struct {
    sr_store_var v;       /* the public record (id, dtype, shape, chunk_bytes ...) */
    uint64_t     nchunks; /* ceil(nbytes / chunk_bytes); 0 for an empty tensor */
} store_var;

/* A stored tensor: a variable's value (slot "") or one optimizer slot. */
typedef struct {
    int64_t id;
    int64_t var_id;
    char   *slot;         /* malloc'd; "" = the value */
    int64_t created_step; /* first step it was written at */
} store_tensor;

/* The mark record (store_mark.c). */
typedef struct {
    uint64_t seq;         /* newer record = larger seq; slot seq % 2 */
    int64_t  store_id;    /* meta 'store_id' of the store it belongs to */
    int64_t  step;        /* the committed step it vouches for */
    uint64_t incarnation; /* the incarnation that wrote it */
    uint64_t wal_bytes;   /* the -wal's length after that commit (0: checkpointed) */
    int      ready;       /* the model was marked ready */
} store_mark;

struct sr_store {
    sqlite3      *db;
    char         *path;             /* as given to sr_store_open */
    sr_store_opts opts;             /* with defaults filled in */
    sqlite3_stmt *stmt[STMT_COUNT]; /* lazily prepared, see store_stmt_id */
    char          errmsg[1024];     /* last failure text ("" if none) */
    sr_err        sticky;           /* != SR_OK: state in doubt, refuse all */
    int           in_write;         /* the open transaction is BEGIN IMMEDIATE */
    int           marked;           /* read-write and keeps PATH-mark (store_mark.c) */
    int           created;          /* this open created the file (a new store) */
    store_ckpt   *ckpt;             /* background checkpoint; NULL if none */

    /* Variable/tensor cache, sorted by id and (var_id, slot).  Dropped after
     * any own schema-changing transaction and whenever another connection
     * committed (PRAGMA data_version changed). */
    int     cache_ok;
    int64_t cache_data_version;
    /* Every chunk version superseded by one at or before this step is
     * pruned (this handle's last commit said so); -1: not known, the next
     * prune looks at every version.  Reset with the cache.  pruning_to:
     * what the transaction in progress prunes to (-1: not known after it). */
    int64_t       pruned_to, pruning_to;
    store_var    *vars;
    size_t        nvars, cap_vars;
    store_tensor *tensors;
    size_t        ntensors, cap_tensors;

    /* Commit-path buffers, reused so a commit does not allocate. */
    int64_t     *scratch;     /* chunk version list: (step, data_id) pairs */
    size_t       scratch_cap; /* pairs */
    int64_t     *keep;        /* retained steps (sparse history, then the recent ones) */
    size_t       keep_cap;    /* entries of keep */
    store_write *pend;        /* chunk bytes queued by write_chunk (sr__store_write_bytes) */
    size_t       npend, pend_cap;
    int64_t      usable; /* page size less reserved bytes (0: unknown, read-only) */
    void        *keys;   /* duplicate-tensor check, keys_cap bytes */
    size_t       keys_cap;
    uint8_t     *sumbuf; /* 1 MiB for streamed checksums (store_sum.c); NULL until used */
    int64_t      page_size;

    /* The mark (store_mark.c). */
    int               mark_fd;          /* PATH-mark, read-write handles; -1 if none */
    int               mark_created;     /* this open created PATH-mark */
    store_mark        mark;             /* the record last written or read */
    sr_store_rollback rb;               /* what the open found */
    int64_t           wal_size_at_open; /* PATH-wal's size before SQLite opened it; -1 none */
    int               shm_at_open;      /* PATH-shm existed before SQLite opened the store */
};

/* --- store.c --------------------------------------------------------- */

/* Convert a SQLite result code (and sqlite3_errmsg) into an sr_err with the
 * detail "PATH: what: message (code)".  The one place SQLite errors are
 * translated.  rc must not be SQLITE_OK/ROW/DONE. */
sr_err sr__store_sqlerr(sr_store *st, int rc, const char *what);
/* Record a failure on the handle: sr_fail + copy into st->errmsg. */
sr_err sr__store_fail(sr_store *st, sr_err e, const char *fmt, ...) SR_PRINTF(3, 4);
/* Copy sr_errdetail() into the handle for a failing rc; returns rc. */
sr_err sr__store_ret(sr_store *st, sr_err rc);
/* The sticky error, re-recorded as this thread's detail; SR_OK if none. */
sr_err sr__store_check(sr_store *st);

/* The cached statement `id`, reset and with bindings cleared. */
sr_err sr__store_stmt(sr_store *st, store_stmt_id id, sqlite3_stmt **out);
/* Run a cached statement that returns no rows (or ignores them). */
sr_err sr__store_run(sr_store *st, sqlite3_stmt *s, const char *what);
/* Run SQL text once (schema, pragmas). */
sr_err sr__store_exec(sr_store *st, const char *sql);
/* A single-integer query (PRAGMA user_version, counts ...). */
sr_err sr__store_query_i64(sr_store *st, const char *sql, int64_t *out);

/* Transactions.  begin_write takes the write lock (BEGIN IMMEDIATE).
 * sr__store_end commits when rc == SR_OK, else rolls back; a failed COMMIT
 * that cannot be rolled back, or a failed ROLLBACK, makes the handle sticky.
 * Returns the final code (rc, or the COMMIT failure). */
sr_err sr__store_begin_read(sr_store *st);
sr_err sr__store_begin_write(sr_store *st);
sr_err sr__store_end(sr_store *st, sr_err rc);

/* A shape's text as stored ("[2,3]", sr_shape_format's) -> ndim, shape;
 * 0, or -1 when it is not one. */
int sr__store_parse_shape(const char *text, int *ndim, int64_t *shape);

/* meta table values. */
sr_err sr__store_meta_i64(sr_store *st, const char *key, int64_t *out);
sr_err sr__store_meta_set_i64(sr_store *st, const char *key, int64_t v);

/* The variable/tensor cache, (re)loaded when stale.  Call inside a
 * transaction.  Lookups return NULL when absent. */
sr_err sr__store_cache_load(sr_store *st);
void   sr__store_cache_drop(sr_store *st);
/* After an own transaction that added variable var_id (the largest id) and
 * its tensors: add them to the cache, if one is loaded (else, or on any
 * doubt, the cache is dropped and the next load reads it whole).  Declaring
 * N variables so costs N reads, not N^2 / 2. */
void                sr__store_cache_add_var(sr_store *st, int64_t var_id);
const store_var    *sr__store_var(const sr_store *st, int64_t var_id);
const store_tensor *sr__store_tensor(const sr_store *st, int64_t var_id, const char *slot);

/* Retained checkpoint steps, ascending (malloc'd).  Inside a transaction. */
sr_err sr__store_checkpoints(sr_store *st, int64_t **out, size_t *n);

/* Unlink `path` and its -wal, -shm and -journal companions. */
void sr__store_unlink_all(const char *path);
/* The directory part of `path` ("." when none) into dir. */
sr_err sr__store_dirname(const char *path, char *dir, size_t len);
/* fsync the directory holding `path` (best effort: a failure is returned). */
sr_err sr__store_sync_dir(const char *path);

/* issue 26: collect_tx for other files: the rows of `sql` (nbinds int64
 * bindings) as records of `size` bytes filled by row(), in a read
 * transaction.  *out malloc'd. */
sr_err sr__store_collect_tx(sr_store *st, const char *sql, const int64_t *binds, int nbinds,
                            size_t size, void (*row)(sqlite3_stmt *s, void *rec), void **out,
                            size_t *n);

/* --- store_schema.c -------------------------------------------------- */

/* Check the file before SQLite touches it: existence, creation (mode 0600),
 * writability, and the raw 100-byte header (SQLite magic, application_id,
 * user_version).  *created = 1 when this call created the (empty) file,
 * *empty = 1 when the file is empty (new store). */
sr_err sr__store_precheck(sr_store *st, int *created, int *empty);
/* After sqlite3_open: identity, version, quick_check, pragmas, migrations,
 * WAL.  `empty`: the file was empty before the open. */
sr_err sr__store_setup(sr_store *st, int empty);

/* --- store_chunk.c --------------------------------------------------- */

/* Choose or create the chunk versions of one tensor of a commit or
 * declaration at step g and queue their bytes (written by
 * sr__store_write_bytes, which the transaction must call after its other
 * row work).  keep[0..nkeep) are the retained steps after `floor` other
 * than g after the transaction (ascending); versions they need are never
 * recycled.  The versions at or before `floor` (the newest sparse-history
 * step, -1 if none) are all needed by a retained step and are not even read,
 * so a commit's bookkeeping does not grow with the history.  dirty NULL =
 * every chunk. */
sr_err sr__store_write_tensor(sr_store *st, const store_var *v, int64_t tensor_id, const void *data,
                              const uint8_t *dirty, int64_t g, int64_t floor, const int64_t *keep,
                              size_t nkeep);
/* The sparse-history rule in force (issue 22): the handle's
 * keep_every_steps when it sets one, else the one the store recorded (meta
 * 'keep_every_steps', 0 when absent).  In a transaction. */
sr_err sr__store_keep_every(sr_store *st, int64_t *out);
/* Write the queued chunk bytes (and empty the queue). */
sr_err sr__store_write_bytes(sr_store *st);
/* Point *blob at chunk_data row `data_id` (opening or moving the handle),
 * checking that it is `size` bytes (else SR_ECORRUPT). */
sr_err sr__store_blob_at(sr_store *st, sqlite3_blob **blob, int64_t data_id, int writable,
                         size_t size);

/* --- store_sum.c ----------------------------------------------------- */

/* XXH3_64bits of len bytes at p: a chunk version's checksum (chunk.sum). */
uint64_t sr__store_sum(const void *p, size_t len);
/* The checksum of len zero bytes (a zeroblob version), streamed (SR_ENOMEM
 * if the hash state cannot be allocated). */
sr_err sr__store_sum_zeros(size_t len, uint64_t *out);
/* The checksum of the `size` bytes of chunk_data row data_id, read through
 * *blob 1 MiB at a time. */
sr_err sr__store_blob_sum(sr_store *st, sqlite3_blob **blob, int64_t data_id, size_t size,
                          uint64_t *out);
/* SR_ECORRUPT "variable V slot S step AT: chunk I (version of step VER)
 * fails its checksum (stored, computed)". */
sr_err sr__store_sum_mismatch(sr_store *st, const store_var *v, const store_tensor *t, uint64_t idx,
                              int64_t at, int64_t version, uint64_t stored, uint64_t computed);
/* Check the bytes of every chunk version that step `step` reads (step >= 0),
 * or of every version (step == -1), against their sums; the first bad one is
 * SR_ECORRUPT (as sr__store_sum_mismatch).  Inside a transaction. */
sr_err sr__store_check_sums(sr_store *st, int64_t step);

/* --- store_mark.c ---------------------------------------------------- */

/* Read PATH-mark: *state SR_STORE_MARK_OK (into *out), _MISSING or _DAMAGED.
 * Fails only when the file exists and cannot be read. */
sr_err sr__store_mark_read(const char *path, store_mark *out, int *state);
/* Precheck, the store file missing and to be created: a valid mark means a
 * store was lost here: SR_EROLLBACK unless accept_rollback. */
sr_err sr__store_mark_precheck_missing(sr_store *st);
/* After identity and quick_check, before any write: the mark (read first)
 * against the store; fills st->rb; read-write and behind: SR_EROLLBACK
 * unless accept_rollback.  `empty`: a new store. */
sr_err sr__store_mark_check(sr_store *st, int empty);
/* Read-write handles, after the migrations: open (create) PATH-mark and
 * write a fresh record if it was missing, unreadable or another store's. */
sr_err sr__store_mark_open(sr_store *st);
void   sr__store_mark_close(sr_store *st);
/* After a successful COMMIT: the mark vouches for max(mark, step). */
void sr__store_mark_committed(sr_store *st, int64_t step, int ready, uint64_t wal_bytes);
/* After a rewind or an accepted rollback: the mark becomes exactly this. */
void sr__store_mark_reset(sr_store *st, int64_t step, int ready, uint64_t incarnation);
/* The -wal's expected length after the last commit (for the mark). */
uint64_t sr__store_wal_bytes(const sr_store *st);

/* --- store_elastic.c (issue 26) --------------------------------------- */

/* Inside a commit: write c's step_replicas rows. */
sr_err sr__store_put_step_replicas(sr_store *st, const sr_store_commit *c);

/* --- store_verify.c -------------------------------------------------- */

/* (sr_store_verify is public.) */

#endif
