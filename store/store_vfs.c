/*
 * store/store_vfs.c: the "syncrep" SQLite VFS, a thin layer over the
 * default one ("unix") that gathers the small writes SQLite makes to a WAL.
 *
 * SQLite appends a WAL frame as two writes, the 24-byte frame header and the
 * page; a commit of a small model is about nine frames, so eighteen pwrite
 * calls.  On a virtual machine a system call costs a few microseconds, which
 * made those writes about a third of a small commit (docs/store.md, "The
 * syncrep VFS").  This layer keeps contiguous small WAL writes (each at most
 * SMALL_WRITE bytes) in a buffer (WAL_BUF bytes) and writes them with one
 * call:
 *
 * - when the page of a commit frame arrives (a frame header whose "database
 *   size after commit" field is not zero marks the commit frame), inside
 *   that page's xWrite, so a failure (a full disk) is the failure of the
 *   commit's own write and SQLite rolls the transaction back as before;
 * - before any other operation on the WAL (read, sync, truncate, size,
 *   close...) or on its database file (every shared-memory call included),
 *   and before a write that is not contiguous or does not fit.
 *
 * SQLite publishes a commit in the shared wal-index only after its last frame
 * is written, so no reader, in this process or another, can see a frame that
 * is still in the buffer; a process killed with frames in the buffer leaves
 * a WAL without that transaction, exactly as a kill before the writes did.
 * Big writes (pages above SMALL_WRITE) go straight through, as before.
 *
 * Early writeback (synchronous=FULL only, SR__FCNTL_WAL_WRITEBACK): a FULL
 * commit writes its frames and then fsyncs the WAL, so the disk idles while
 * SQLite produces a big commit's frames and the CPU idles during the fsync.
 * Every WAL_WRITEBACK bytes written since the last sync this layer starts
 * their writeback (sync_file_range SYNC_FILE_RANGE_WRITE, on a descriptor
 * of its own) so the two overlap and the commit's fsync finds most of it on
 * disk.  It only starts I/O the kernel would do anyway: what is durable when
 * is still decided by the fsync.  At NORMAL, where no fsync follows a
 * commit, it would only move the kernel's writeback into the commit, so it
 * is off there (measured: docs/store.md, "The syncrep VFS").
 *
 * Everything else is the default VFS unchanged.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store_int.h"

#define SMALL_WRITE (16u << 10) /* buffer writes of at most this many bytes */
/* Buffer capacity.  Below 128 KiB: the default VFS writes only the low 17
 * bits of a length (SQLite's own writes are a page at most) and calls the
 * rest a full disk.  Until 2026-12-01 this was 256 KiB and every commit of
 * more than 128 KiB in pages of 16 KiB or less failed with "database or
 * disk is full" (strace: 173,040 bytes reached the file as 41,968, then a
 * zero-length write); store_vfs_test commits 512 KiB at 1, 4 and 16 KiB. */
#define WAL_BUF (64u << 10)
_Static_assert(WAL_BUF < (128u << 10), "the default VFS writes less than 128 KiB per call");
#define WAL_FRAME_HDR 24        /* SQLite's WAL frame header size */
#define WAL_WRITEBACK (1 << 20) /* early writeback every this many bytes */

typedef struct shim_file shim_file;
struct shim_file {
    sqlite3_file   base; /* pMethods = &shim_io */
    sqlite3_file  *real; /* the default VFS's file, right after this struct */
    int            is_wal;
    int            commit_next; /* the next write is the page of a commit frame */
    shim_file     *wal;         /* a database file: its open WAL (to flush first) */
    shim_file     *db;          /* a WAL: its database file */
    unsigned char *buf;         /* a WAL: pending bytes for [off, off + len) */
    size_t         len;
    sqlite3_int64  off;
    /* Early writeback: on (database file: set by SR__FCNTL_WAL_WRITEBACK;
     * WAL: its database's), and for a WAL its path, own descriptor (-1: not
     * open, or it could not be) and the written range [wb_lo, wb_hi) whose
     * writeback has not been started since the last sync. */
    int           writeback;
    const char   *path;
    int           wb_fd;
    sqlite3_int64 wb_lo, wb_hi;
};
/* The real file follows the struct; keep it aligned for any type. */
#define SHIM_SIZE ((sizeof(shim_file) + 15) & ~(size_t)15)

static sqlite3_vfs        shim_vfs;
static sqlite3_vfs       *real_vfs;
static sqlite3_io_methods shim_io;
static pthread_once_t     shim_once = PTHREAD_ONCE_INIT;
static int                shim_rc = SQLITE_ERROR;
static _Atomic uint64_t   n_wal_writes;  /* WAL writes SQLite asked for */
static _Atomic uint64_t   n_file_writes; /* WAL writes that reached the file */
static _Atomic uint64_t   n_writebacks;  /* early writebacks started */

static const sqlite3_io_methods *
R(sqlite3_file *f)
{
    return ((shim_file *)f)->real->pMethods;
}

/* Start the writeback of the WAL range written since the last one. */
static void
wb_start(shim_file *w)
{
    if (w->wb_hi > w->wb_lo) {
        if (w->wb_fd == -1 && w->path != NULL) {
            w->wb_fd = open(w->path, O_RDONLY | O_CLOEXEC);
            if (w->wb_fd < 0) {
                w->wb_fd = -2; /* do without */
            }
        }
#ifdef SYNC_FILE_RANGE_WRITE /* Linux */
        if (w->wb_fd >= 0 &&
            sync_file_range(w->wb_fd, w->wb_lo, w->wb_hi - w->wb_lo, SYNC_FILE_RANGE_WRITE) == 0) {
            atomic_fetch_add_explicit(&n_writebacks, 1, memory_order_relaxed);
        }
#endif
    }
    w->wb_lo = w->wb_hi;
}

/* A write of [off, off + n) reached the WAL file. */
static void
wb_note(shim_file *w, sqlite3_int64 off, size_t n)
{
    if (!(w->db != NULL && w->db->writeback)) {
        return;
    }
    if (off != w->wb_hi) {
        wb_start(w); /* not contiguous: what came before goes now */
        w->wb_lo = off;
    }
    w->wb_hi = off + (sqlite3_int64)n;
    if (w->wb_hi - w->wb_lo >= WAL_WRITEBACK) {
        wb_start(w);
    }
}

/* One write that reaches the WAL file: counted, and noted for writeback. */
static int
wal_write(shim_file *w, const void *p, int n, sqlite3_int64 off)
{
    atomic_fetch_add_explicit(&n_file_writes, 1, memory_order_relaxed);
    int rc = w->real->pMethods->xWrite(w->real, p, n, off);
    if (rc == SQLITE_OK && n > 0) {
        wb_note(w, off, (size_t)n);
    }
    return rc;
}

static int
wal_flush(shim_file *w)
{
    if (w == NULL || w->len == 0) {
        return SQLITE_OK;
    }
    size_t n = w->len;
    w->len = 0;
    w->commit_next = 0;
    return wal_write(w, w->buf, (int)n, w->off);
}

/* Before any operation but a buffered write: the WAL's pending bytes reach
 * the file (a database file flushes its WAL). */
static int
flush(sqlite3_file *f)
{
    shim_file *s = (shim_file *)f;
    return wal_flush(s->is_wal ? s : s->wal);
}

static int
shim_close(sqlite3_file *f)
{
    shim_file *s = (shim_file *)f;
    int        rc = flush(f);
    if (s->is_wal && s->db != NULL) {
        s->db->wal = NULL;
    } else if (!s->is_wal && s->wal != NULL) {
        s->wal->db = NULL;
    }
    free(s->buf);
    s->buf = NULL;
    if (s->wb_fd >= 0) {
        close(s->wb_fd);
    }
    s->wb_fd = -1;
    int rc2 = R(f)->xClose(s->real);
    return rc != SQLITE_OK ? rc : rc2;
}

static int
shim_read(sqlite3_file *f, void *p, int n, sqlite3_int64 off)
{
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : R(f)->xRead(((shim_file *)f)->real, p, n, off);
}

static int
shim_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 off)
{
    shim_file *s = (shim_file *)f;
    int        rc;

    if (s->is_wal) {
        atomic_fetch_add_explicit(&n_wal_writes, 1, memory_order_relaxed);
    }
    if (!s->is_wal || n <= 0 || (size_t)n > SMALL_WRITE ||
        (s->buf == NULL && (s->buf = malloc(WAL_BUF)) == NULL)) {
        /* Straight through (without a buffer too: as without this layer). */
        if ((rc = flush(f)) != SQLITE_OK) {
            return rc;
        }
        return s->is_wal ? wal_write(s, p, n, off) : R(f)->xWrite(s->real, p, n, off);
    }
    if (s->len > 0 && (off != s->off + (sqlite3_int64)s->len || s->len + (size_t)n > WAL_BUF)) {
        int commit = s->commit_next;
        if ((rc = wal_flush(s)) != SQLITE_OK) {
            return rc;
        }
        s->commit_next = commit;
    }
    if (s->len == 0) {
        s->off = off;
    }
    memcpy(s->buf + s->len, p, (size_t)n);
    s->len += (size_t)n;
    if (s->commit_next) {
        return wal_flush(s); /* the commit frame's page: the transaction is complete */
    }
    if (n == WAL_FRAME_HDR) {
        const unsigned char *h = p; /* bytes 4..7: database size after a commit, else 0 */
        s->commit_next = (h[4] | h[5] | h[6] | h[7]) != 0;
    }
    return SQLITE_OK;
}

static int
shim_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : R(f)->xTruncate(((shim_file *)f)->real, size);
}

static int
shim_sync(sqlite3_file *f, int flags)
{
    shim_file *s = (shim_file *)f;
    int        rc = flush(f);
    if (s->is_wal) {
        s->wb_lo = s->wb_hi; /* the sync covers it */
    }
    return rc != SQLITE_OK ? rc : R(f)->xSync(s->real, flags);
}

static int
shim_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : R(f)->xFileSize(((shim_file *)f)->real, size);
}

static int
shim_lock(sqlite3_file *f, int level)
{
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : R(f)->xLock(((shim_file *)f)->real, level);
}

static int
shim_unlock(sqlite3_file *f, int level)
{
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : R(f)->xUnlock(((shim_file *)f)->real, level);
}

static int
shim_check_reserved(sqlite3_file *f, int *out)
{
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : R(f)->xCheckReservedLock(((shim_file *)f)->real, out);
}

static int
shim_file_control(sqlite3_file *f, int op, void *arg)
{
    shim_file *s = (shim_file *)f;
    if (op == SR__FCNTL_WAL_WRITEBACK) {
        s->writeback = *(int *)arg != 0;
        return SQLITE_OK;
    }
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : R(f)->xFileControl(s->real, op, arg);
}

static int
shim_sector_size(sqlite3_file *f)
{
    return R(f)->xSectorSize(((shim_file *)f)->real);
}

static int
shim_device_characteristics(sqlite3_file *f)
{
    return R(f)->xDeviceCharacteristics(((shim_file *)f)->real);
}

static int
shim_shm_map(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp)
{
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : R(f)->xShmMap(((shim_file *)f)->real, pg, pgsz, extend, pp);
}

static int
shim_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : R(f)->xShmLock(((shim_file *)f)->real, offset, n, flags);
}

/* Called between the two copies of a new wal-index header: the last point
 * where pending frames can still precede their publication.  A commit never
 * gets here with bytes pending (its commit frame flushed them); this only
 * covers a frame sequence this layer did not recognise. */
static void
shim_shm_barrier(sqlite3_file *f)
{
    (void)flush(f);
    R(f)->xShmBarrier(((shim_file *)f)->real);
}

static int
shim_shm_unmap(sqlite3_file *f, int del)
{
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : R(f)->xShmUnmap(((shim_file *)f)->real, del);
}

static int
shim_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp)
{
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : R(f)->xFetch(((shim_file *)f)->real, off, n, pp);
}

static int
shim_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    return R(f)->xUnfetch(((shim_file *)f)->real, off, p);
}

static int
shim_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file, int flags, int *out_flags)
{
    shim_file *s = (shim_file *)file;
    (void)vfs;

    memset(s, 0, SHIM_SIZE);
    s->wb_fd = -1;
    s->real = (sqlite3_file *)((unsigned char *)file + SHIM_SIZE);
    int rc = real_vfs->xOpen(real_vfs, name, s->real, flags, out_flags);
    if (s->real->pMethods == NULL) {
        file->pMethods = NULL;
        return rc;
    }
    if (s->real->pMethods->iVersion < 3) {
        /* Every method of shim_io forwards; an older table lacks some. */
        s->real->pMethods->xClose(s->real);
        file->pMethods = NULL;
        return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
    }
    file->pMethods = &shim_io;
    if (rc == SQLITE_OK && (flags & SQLITE_OPEN_WAL) && name != NULL) {
        s->is_wal = 1;
        s->path = name; /* valid while the file is open */
        sqlite3_file *db = sqlite3_database_file_object(name);
        if (db != NULL && db->pMethods == &shim_io) {
            s->db = (shim_file *)db;
            s->db->wal = s;
        }
    }
    return rc;
}

static void
shim_register(void)
{
    real_vfs = sqlite3_vfs_find(NULL);
    if (real_vfs == NULL || real_vfs->iVersion < 1) {
        return;
    }
    shim_vfs = *real_vfs; /* same methods and pAppData; only opening differs */
    shim_vfs.pNext = NULL;
    shim_vfs.zName = SR_STORE_VFS;
    shim_vfs.szOsFile = (int)SHIM_SIZE + real_vfs->szOsFile;
    shim_vfs.xOpen = shim_open;
    shim_io = (sqlite3_io_methods){
        .iVersion = 3,
        .xClose = shim_close,
        .xRead = shim_read,
        .xWrite = shim_write,
        .xTruncate = shim_truncate,
        .xSync = shim_sync,
        .xFileSize = shim_file_size,
        .xLock = shim_lock,
        .xUnlock = shim_unlock,
        .xCheckReservedLock = shim_check_reserved,
        .xFileControl = shim_file_control,
        .xSectorSize = shim_sector_size,
        .xDeviceCharacteristics = shim_device_characteristics,
        .xShmMap = shim_shm_map,
        .xShmLock = shim_shm_lock,
        .xShmBarrier = shim_shm_barrier,
        .xShmUnmap = shim_shm_unmap,
        .xFetch = shim_fetch,
        .xUnfetch = shim_unfetch,
    };
    shim_rc = sqlite3_vfs_register(&shim_vfs, 0);
}

int
sr__store_vfs_init(void)
{
    pthread_once(&shim_once, shim_register);
    return shim_rc;
}

void
sr_store_get_wal_stats(sr_store_wal_stats *out)
{
    out->wal_writes = atomic_load_explicit(&n_wal_writes, memory_order_relaxed);
    out->writebacks = atomic_load_explicit(&n_writebacks, memory_order_relaxed);
    out->file_writes = atomic_load_explicit(&n_file_writes, memory_order_relaxed);
}
