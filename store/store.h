/*
 * The durable store: one SQLite file (WAL) holding everything the
 * coordinator must not lose.  The only code that includes sqlite3.h.
 * Schema, versioning and guarantees: docs/store.md.
 *
 * A step commit is one transaction: a crash leaves the previous committed
 * step or the new one, never a mix.  The last K committed steps stay
 * restorable ("retained checkpoints") without K full copies: tensors are
 * stored in chunks, and a chunk is written only when it changed.
 *
 * One thread per handle.  Every function returns SR_OK or a negative code
 * with the detail in sr_errdetail(); the handle also keeps it
 * (sr_store_errmsg).  Failures that leave the handle in doubt make it sticky:
 * every later call returns the same error until it is closed.
 */
#ifndef SR_STORE_H
#define SR_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/error.h"

typedef struct sr_store sr_store;

#define SR_STORE_SCHEMA_VERSION      4    /* PRAGMA user_version of this build */
#define SR_STORE_CURSOR_MAX          4096 /* issue 24: bytes of a worker's data cursor */
#define SR_STORE_DEFAULT_CHUNK_BYTES (4u << 20)
#define SR_STORE_MAX_NAME            255  /* bytes in a variable or slot name */
#define SR_STORE_KEEP_EVERY_OFF      (-1) /* sr_store_opts.keep_every_steps: no sparse history */

typedef enum {
    SR_STORE_SYNC_FULL = 0,   /* default: fsync at every commit, survives power loss */
    SR_STORE_SYNC_NORMAL = 1, /* WAL NORMAL: survives process crashes, not power loss */
} sr_store_sync;

typedef struct {
    int      sync;                /* sr_store_sync; default FULL */
    int      readonly;            /* open read-only (inspect, verify); never creates */
    int      create;              /* create the file if absent (ignored when readonly) */
    int      busy_timeout_ms;     /* 0 = 5000 */
    uint32_t chunk_bytes;         /* new tensors' chunk size; 0 = 4 MiB; rounded to dtype */
    int      keep_checkpoints;    /* retained restorable steps; 0 = 3 */
    int64_t  keep_every_steps;    /* added (issue 22): sparse history.  Besides the last
                                     keep_checkpoints, keep the first committed step of
                                     every window [jK, (j+1)K) of K steps (step jK when
                                     every step commits), for a rollback after divergence.
                                     K > 0: this rule, recorded in the store at the next
                                     commit; SR_STORE_KEEP_EVERY_OFF: none, recorded so;
                                     0: the rule the store recorded (none if never set),
                                     so a handle that does not say keeps it
                                     (docs/store.md, "Retention") */
    int64_t max_page_count;       /* 0 = unlimited; tests use it to simulate a full disk */
    int     skip_quick_check;     /* 1 = do not run PRAGMA quick_check on open (huge files) */
    int64_t wal_checkpoint_bytes; /* added: copy the WAL into the main file once it holds
                                     this much; 0 = 16 x the largest commit's WAL bytes,
                                     within 8..512 MiB (a lost -wal then loses ~16
                                     commits at most).  Bigger = fewer, cheaper
                                     checkpoints (a page rewritten by several commits is
                                     copied once) and a bigger -wal file on disk */
    int page_size;                /* added: SQLite page size of a new store, a power of two
                                     in 512..65536; 0 = 65536.  Fixed at creation (an
                                     existing store keeps its own).  Big pages make big
                                     tensors cheap to write; every commit writes at least
                                     a handful of whole pages, so small models commit
                                     faster with small ones (docs/store.md) */
    int checkpoint_inline;        /* added: 1 = the commit that fills the WAL copies it
                                     into the main file itself (SQLite's own way, a
                                     stall of that commit); 0 = a thread of the store
                                     does it while commits go on (docs/store.md,
                                     "Checkpoints") */
    int accept_rollback;          /* added (schema 3): a read-write open of a store that
                                     is behind its mark (PATH-mark: a lost or damaged
                                     -wal, an older copy, a missing store) proceeds
                                     instead of failing with SR_EROLLBACK; the next
                                     sr_store_new_incarnation records the loss (table
                                     `rollback`) and resets the mark (docs/store.md,
                                     "The mark") */
} sr_store_opts;

/* What the store's mark (PATH-mark) was found to be by sr_store_open. */
typedef enum {
    SR_STORE_MARK_OK = 0,      /* present, readable, this store's */
    SR_STORE_MARK_MISSING = 1, /* no PATH-mark (a store older than marks, or deleted) */
    SR_STORE_MARK_DAMAGED = 2, /* neither slot readable (bad magic or checksum) */
    SR_STORE_MARK_FOREIGN = 3, /* another store's (store id differs): replaced */
} sr_store_mark_state;

/* The store against its mark, as sr_store_open found them.  A read-write
 * open refuses a store that is behind (SR_EROLLBACK) unless accept_rollback;
 * a read-only open only reports it here (sr_store_verify reports it too). */
typedef struct {
    int state;                 /* sr_store_mark_state */
    int behind;                /* 1: store step < mark step, the ready model lost, or
                                  the store file missing while a mark exists */
    int      accepted;         /* 1: opened with accept_rollback while behind */
    int      recorded;         /* 1: sr_store_new_incarnation recorded it */
    int64_t  store_step;       /* the store's global step at open */
    int      store_ready;      /* its model_ready at open */
    int64_t  nvariables;       /* its variables at open */
    int64_t  mark_step;        /* the step the mark says was committed; -1 if none */
    uint64_t mark_incarnation; /* the incarnation that wrote the mark */
    char     cause[256];       /* what was found: "the -wal is missing", ... */
} sr_store_rollback;

/* What the store says about itself. */
typedef struct {
    int64_t  global_step; /* the last committed step */
    uint64_t incarnation; /* bumped by sr_store_new_incarnation */
    int      model_ready; /* chief declared everything and marked ready */
    int      schema_version;
    int64_t  nvariables;
    int64_t  ncheckpoints;
    int64_t  keep_every_steps; /* added (issue 22): the sparse-history rule in force (the
                                  handle's, else the recorded one); 0 = none */
} sr_store_info;

/* A variable's metadata. */
typedef struct {
    int64_t  id; /* stable within a store */
    char     name[SR_STORE_MAX_NAME + 1];
    int      dtype; /* sr_dtype */
    int      ndim;
    int64_t  shape[SR_MAX_NDIM];
    uint64_t nbytes; /* dtype x shape */
    int      trainable;
    int64_t  created_step; /* global step when it was declared */
    uint32_t chunk_bytes;  /* added: bytes per stored chunk (the last chunk
                              may be shorter); chunk i holds bytes
                              [i*chunk_bytes, min((i+1)*chunk_bytes, nbytes)) */
} sr_store_var;

/* One worker's record. */
typedef struct {
    int32_t  task_index;
    int64_t  local_step;
    int64_t  last_seen_ms; /* wall clock, ms since the epoch */
    uint64_t incarnation;  /* coordinator incarnation that last saw it */
    /* issue 24: cursor (schema 4).  The worker's data cursor (opaque bytes:
     * epoch, position, RNG state) of the last step its gradient went into.
     * Commit: written when has_cursor, else the stored one stays.  List:
     * has_cursor says whether the row holds one. */
    int      has_cursor;
    uint32_t cursor_len; /* <= SR_STORE_CURSOR_MAX */
    uint8_t  cursor[SR_STORE_CURSOR_MAX];
} sr_store_worker;

/* One contribution to a step's accumulator, in arrival order. */
typedef struct {
    int64_t step; /* the step the contribution was applied in:
                     the global step before the apply (g when
                     the commit moves to g + 1) */
    int64_t var_id;
    int64_t part; /* added (schema 2): the first element of the variable's
                     partition this contribution went to; 0 for a variable
                     that is one partition */
    int32_t pos;  /* 0, 1, ... arrival order within (step, var, part) */
    int32_t task_index;
    int64_t local_step; /* the step the gradient was computed at */
} sr_store_contrib;

/* A tensor to write in a commit: a variable's value (slot "") or one of its
 * optimizer slots ("momentum", "adam_m", "adam_v", "ema", ...).  A slot
 * tensor has the variable's dtype and size and is created on first write. */
typedef struct {
    int64_t        var_id;
    const char    *slot;      /* NULL or "" = the value */
    const void    *data;      /* the whole tensor, var nbytes */
    size_t         len_bytes; /* must equal the variable's nbytes */
    const uint8_t *dirty;     /* NULL = every chunk; else one byte per chunk
                                 (sr_store_nchunks), nonzero = changed */
} sr_store_tensor;

/* Everything of one step, committed in one transaction. */
typedef struct {
    int64_t global_step; /* the new global step (> the stored one,
                            or equal to rewrite the same step) */
    const sr_store_tensor  *tensors;
    size_t                  ntensors;
    const sr_store_worker  *workers; /* upserted by task_index */
    size_t                  nworkers;
    const sr_store_contrib *log; /* step log rows; may be empty */
    size_t                  nlog;
    /* issue 26: elastic.  The replicas each step averaged over (table
     * step_replicas, schema 4); may be empty. */
    const struct sr_store_step_replicas *replicas;
    size_t                               nreplicas;
} sr_store_commit;

/* Open (create if opts->create) the store at `path`: WAL, synchronous per
 * opts, busy timeout, schema check and migration, quick_check.  Refuses with
 * a clear error naming the file and modifies nothing for: a file that is not
 * a syncrep store, an empty (0-byte) file we did not create, a damaged header
 * (SQLite magic, application_id, an absurd user_version) or a corrupt file
 * (SR_ECORRUPT), a schema newer than this build (SR_EVERSION), a missing
 * file without create (SR_ENOENT), a location that cannot be written
 * (SR_EACCES), and, read-write, a store behind its mark (SR_EROLLBACK, see
 * accept_rollback).  New files are mode 0600; a read-write handle keeps
 * PATH-mark (0600) beside the store.  *out is written only on success. */
sr_err sr_store_open(const char *path, const sr_store_opts *opts, sr_store **out);

/* Close; NULL is fine.  Never fails visibly (a failed checkpoint of the WAL
 * leaves the WAL, which the next open replays). */
void sr_store_close(sr_store *st);

/* Process-wide: keep SQLite's heap (page caches of every connection) near
 * `bytes` (sqlite3_soft_heap_limit64; 0 = no limit).  Without it a big
 * transaction (a 64 MiB variable declared or committed) leaves about half
 * its size in SQLite's page cache, resident for the life of the process.
 * The coordinator sets it at start (docs/store.md). */
void sr_store_set_heap_limit(int64_t bytes);

/* The handle's last failure text ("" if none). */
const char *sr_store_errmsg(const sr_store *st);

/* Start a new coordinator incarnation: increment and return it, durably.
 * Also records it (see sr_store_list_incarnations) with the current global
 * step as its restored step.  On a handle opened with accept_rollback while
 * the store was behind its mark, the same transaction records the rollback
 * (sr_store_list_rollbacks) and the mark is then reset to the store. */
sr_err sr_store_new_incarnation(sr_store *st, uint64_t *out);

/* Added: one coordinator incarnation as recorded by sr_store_new_incarnation. */
typedef struct {
    uint64_t    incarnation;
    int64_t     restored_step; /* the global step it started from */
    int64_t     started_ms;    /* wall clock */
    const char *config;        /* the JSON text it stored with sr_store_set_config,
                                  "" if none; points into the same allocation */
} sr_store_incarnation;
/* Added: every recorded incarnation, ascending (rewinds do not remove any).
 * *out is one malloc'd block, strings included: free(*out) frees it all. */
sr_err sr_store_list_incarnations(sr_store *st, sr_store_incarnation **out, size_t *n);

sr_err sr_store_get_info(sr_store *st, sr_store_info *out);

/* Informational: the configuration last used, as a JSON object text (also
 * recorded on the newest incarnation's record). */
sr_err sr_store_set_config(sr_store *st, const char *json);
/* *out is malloc'd (caller frees); "" when never set. */
sr_err sr_store_get_config(sr_store *st, char **out);

/* Declare a variable (its own durable transaction).  Creates it with the
 * initial value (nbytes of data; NULL = zeros) at the current global step.
 * If a variable of that name exists with the same dtype and shape, nothing
 * changes and *out_id gets its id (existed=1); another dtype or shape is
 * SR_EEXIST with both described.  out_existed may be NULL. */
sr_err sr_store_declare(sr_store *st, const char *name, int dtype, int ndim, const int64_t *shape,
                        int trainable, const void *data, size_t len_bytes, int64_t *out_id,
                        int *out_existed);

/* Mark the model ready (durable).  Creates the checkpoint of the current
 * global step if none exists, so the initial values are restorable. */
sr_err sr_store_set_ready(sr_store *st);

/* The variables, ordered by id.  *out is malloc'd (caller frees); *n set. */
sr_err sr_store_list_vars(sr_store *st, sr_store_var **out, size_t *n);

/* Added: the variable named `name` (SR_ENOENT if none). */
sr_err sr_store_find_var(sr_store *st, const char *name, sr_store_var *out);

/* Slot names stored for a variable ("" excluded).  *out is a malloc'd array
 * of malloc'd strings; free with sr_store_free_names. */
sr_err sr_store_list_slots(sr_store *st, int64_t var_id, char ***out, size_t *n);
void   sr_store_free_names(char **names, size_t n);

/* Number of chunks of a variable's tensors (for sr_store_tensor.dirty). */
sr_err sr_store_nchunks(sr_store *st, int64_t var_id, size_t *out);
/* The chunk size in bytes of a variable's tensors (every chunk but the last
 * is exactly this long; a multiple of the dtype size). */
sr_err sr_store_chunk_bytes(sr_store *st, int64_t var_id, uint64_t *out);

/* Read a tensor as of `step` (-1 = the latest committed state) into dst
 * (len_bytes must equal the variable's nbytes).  SR_ENOENT if the slot does
 * not exist or the variable did not exist at that step.  Chunks are checked
 * (size, presence, checksum): a missing, short or altered chunk is
 * SR_ECORRUPT naming variable, slot, step, version and chunk; dst may then
 * hold partial data.  Not sticky: other reads still work. */
sr_err sr_store_read_tensor(sr_store *st, int64_t var_id, const char *slot, int64_t step, void *dst,
                            size_t len_bytes);

/* Commit one step (one transaction): tensors, the global step, workers, step
 * log, a new retained checkpoint, pruning of checkpoints beyond K.  On any
 * failure (including a full disk: SR_ENOSPC) the transaction is rolled back,
 * the previous step stays intact and readable, and the handle stays usable. */
sr_err sr_store_commit_step(sr_store *st, const sr_store_commit *c);

/* Workers, ordered by task index.  *out malloc'd. */
sr_err sr_store_list_workers(sr_store *st, sr_store_worker **out, size_t *n);

/* Retained checkpoint steps, ascending.  *out malloc'd. */
sr_err sr_store_list_checkpoints(sr_store *st, int64_t **out, size_t *n);

/* Make retained step `step` the current state (durably): the global step
 * becomes `step`, later checkpoints, chunk versions, variables created after
 * it and step-log rows after it are removed, and the rewind is recorded
 * (incarnation, from step, to step, time).  SR_ENOENT if not retained. */
sr_err sr_store_rewind(sr_store *st, int64_t step);

/* A recorded rewind. */
typedef struct {
    uint64_t incarnation;
    int64_t  from_step;
    int64_t  to_step;
    int64_t  at_ms; /* wall clock */
} sr_store_rewind_rec;
sr_err sr_store_list_rewinds(sr_store *st, sr_store_rewind_rec **out, size_t *n);

/* Added (schema 3): what sr_store_open found about the store's mark (a copy;
 * never fails on a valid handle). */
sr_err sr_store_get_rollback(sr_store *st, sr_store_rollback *out);

/* Added (schema 3): an accepted rollback, recorded by the incarnation that
 * started on it; `cause` is what the open found (truncated to fit). */
typedef struct {
    uint64_t incarnation;
    int64_t  from_step; /* the mark's step: what had been committed */
    int64_t  to_step;   /* the store's step the incarnation started from */
    int64_t  at_ms;     /* wall clock */
    char     cause[256];
} sr_store_rollback_rec;
/* Every recorded rollback, oldest first.  *out malloc'd (caller frees). */
sr_err sr_store_list_rollbacks(sr_store *st, sr_store_rollback_rec **out, size_t *n);

/* Step log rows with from <= step < to, ordered by (step, var_id, pos).
 * *out malloc'd. */
sr_err sr_store_read_log(sr_store *st, int64_t from, int64_t to, sr_store_contrib **out, size_t *n);

/* Copy a consistent snapshot to a new file `out_path` (must not exist) with
 * SQLite's online backup API while the store stays in use.  step >= 0: the
 * copy is then rewound to that retained step.  The copy is mode 0600. */
sr_err sr_store_export(sr_store *st, const char *out_path, int64_t step);

/* Integrity check (PRAGMA integrity_check) plus syncrep's own: every tensor
 * has every chunk at the right size, matching its checksum, for each
 * retained checkpoint, the global step equals the newest checkpoint, schema
 * tables and meta present, the store not behind its mark (PATH-mark).
 * Writes one line per problem into report (malloc'd, caller frees; "" if
 * clean), then, when there was one, "retained steps: S ok, T corrupt, ...".
 * Returns SR_OK when clean, SR_ECORRUPT when a problem was found. */
sr_err sr_store_verify(sr_store *st, char **report);

/* Added (schema 3): the retained steps whose every chunk (of every tensor
 * that existed then) is present and matches its checksum, ascending: the
 * steps a coordinator can still restore.  Reads every chunk version once.
 * *steps malloc'd (caller frees), *n set.  SR_OK even when some are not
 * intact (sr_store_verify says why). */
sr_err sr_store_intact_steps(sr_store *st, int64_t **steps, size_t *n);

/* Process-wide counts of the WAL writes of every store connection: the
 * writes SQLite made, the writes that reached the file once the syncrep
 * VFS gathered the small ones, and the early writebacks it started at
 * synchronous=FULL (docs/store.md, "The syncrep VFS").  For diagnostics
 * and tests. */
typedef struct {
    uint64_t wal_writes;
    uint64_t file_writes;
    uint64_t writebacks;
} sr_store_wal_stats;
void sr_store_get_wal_stats(sr_store_wal_stats *out);

/* What the WAL checkpoints of a read-write handle did (docs/store.md,
 * "Checkpoints").  Passes by the store's thread and by the committing
 * thread itself (the short last bit of a cycle, or a wait when the thread
 * falls behind), with their durations. */
typedef struct {
    int      background;    /* 1: a thread checkpoints (0: inline, or read-only) */
    uint64_t passes;        /* the thread's checkpoints */
    uint64_t pass_us;       /* their time, summed */
    uint64_t pass_max_us;   /* the longest */
    uint64_t inline_passes; /* checkpoints the committing thread ran */
    uint64_t inline_us;
    uint64_t inline_max_us;
    uint64_t waits;      /* commits that waited for the thread (WAL at 2x its limit) */
    uint64_t failures;   /* checkpoints that failed (not counting "busy") */
    uint64_t wal_frames; /* the frames the WAL held after the last commit */
    uint64_t max_frames; /* the most it held */
    char     last_error[256];
} sr_store_ckpt_stats;
void sr_store_get_ckpt_stats(sr_store *st, sr_store_ckpt_stats *out);

/* ---- Packs (schema 4; docs/store.md "Packs") ----------------------------
 * A model declared as a whole (sr_client_declare_model) keeps its tensors in
 * a few large variables, its packs: each member tensor is the bytes
 * [offset, offset + nbytes) of its pack's value (and of each of its slots),
 * so a step commits a pack's chunks, not one row per tensor.  A member has
 * its own name, dtype and shape; the pack is an ordinary variable (a 1-D
 * tensor of its dtype, named SR_STORE_PACK_PREFIX...). */
#define SR_STORE_PACK_PREFIX "syncrep:pack/"
typedef struct {
    const char *name;   /* NUL-terminated, at most SR_STORE_MAX_NAME bytes */
    const char *pack;   /* the variable that holds its bytes (the same) */
    uint64_t    offset; /* its first byte in the pack */
    int         dtype;
    int         ndim;
    int64_t     shape[SR_MAX_NDIM];
    uint64_t    nbytes; /* dtype x shape */
    int         trainable;
    int32_t     pos;          /* its place in the model's declared order */
    int64_t     created_step; /* the global step it was declared at */
} sr_store_member;

/* Record members (one durable transaction; created_step is set to the
 * current global step).  The names are the caller's, read during the call.
 * SR_EEXIST when a name is already a member or a variable; SR_EINVAL for a
 * bad record (name, shape, nbytes).  Their packs are declared with
 * sr_store_declare, before or after. */
sr_err sr_store_add_members(sr_store *st, const sr_store_member *m, size_t n);
/* Every member, in declared order (pos).  *out is one malloc'd block, the
 * records and then their names (a pack's name is kept once for a run of
 * its members): the caller frees *out, and the names with it. */
sr_err sr_store_list_members(sr_store *st, sr_store_member **out, size_t *n);
/* Is `name` a pack's name (SR_STORE_PACK_PREFIX)? */
int sr_store_is_pack_name(const char *name);
/* Issue 22: remove the variable `name` (its value, optimizer slots, chunk
 * versions and step-log rows) in one durable transaction; the other
 * variables and every retained checkpoint are untouched (store/store_drop.c).
 * The caller keeps coordinators off the store (the CLI takes STORE-lock).
 * dropped (may be NULL) gets the variable's record.  SR_ENOENT naming the
 * variable if there is none (nothing changed), SR_EACCES on a read-only
 * handle, SR_ESTORE. */
sr_err sr_store_drop_variable(sr_store *st, const char *name, sr_store_var *dropped);

/* Issue 22: rebuild the store file from its live rows (SQLite VACUUM, then
 * a TRUNCATE checkpoint of the WAL), giving back the pages that retention
 * and sr_store_drop_variable freed (store/store_vacuum.c).  Nothing stored
 * changes.  The caller keeps coordinators off the store.  *before_bytes and
 * *after_bytes (may be NULL) get the file's plus the -wal's size around it.
 * SR_EACCES on a read-only handle, SR_ESTORE (a failed VACUUM changes
 * nothing). */
sr_err sr_store_vacuum(sr_store *st, int64_t *before_bytes, int64_t *after_bytes);
/* ---- issue 26: elastic (schema 4) -------------------------------------- */

/* The replicas one step averaged over, committed with the step (table
 * step_replicas).  `step` is the step before its apply, as in the step log. */
typedef struct sr_store_step_replicas {
    int64_t step;
    int32_t replicas;      /* R' in force at the apply: each accumulator took this many */
    int32_t replicas_open; /* R' when the step opened (>= replicas: lowered during the step
                              when a worker left; an accumulator taken before took more) */
    int32_t total;         /* N' in force */
    int32_t min_replicas;  /* M in force */
    int32_t live;          /* live task indexes at the apply */
} sr_store_step_replicas;

/* Rows with from <= step < to, ascending.  *out malloc'd (caller frees). */
sr_err sr_store_read_step_replicas(sr_store *st, int64_t from, int64_t to,
                                   sr_store_step_replicas **out, size_t *n);

/* A change of a running job's configuration (`syncrep ctl`, table
 * ctl_change): `key` one of replicas_to_aggregate, total_replicas,
 * min_replicas, learning_rate; `base` the value the coordinator's options
 * gave when it was made (a restart whose options give the same value keeps
 * the change; other options win); `value` the new one; `step` the first
 * step it applies to. */
typedef struct {
    int64_t  id; /* ascending; set by the store */
    uint64_t incarnation;
    int64_t  step;
    int64_t  at_ms; /* wall clock */
    char     key[32];
    double   base;
    double   value;
} sr_store_ctl_change;

/* Record one change durably (its own transaction); rec->id is ignored.
 * SR_EINVAL: a NULL argument or an empty/too long key. */
sr_err sr_store_add_ctl_change(sr_store *st, const sr_store_ctl_change *rec);
/* Every recorded change, oldest first.  *out malloc'd (caller frees). */
sr_err sr_store_list_ctl_changes(sr_store *st, sr_store_ctl_change **out, size_t *n);

#endif
