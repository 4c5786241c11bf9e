/*
 * libFuzzer target for store/ (STYLE.md section 7): the loader and every read
 * path on an arbitrary file.  Input format: fuzz_store.h (a mode byte, then
 * the file).  The file is written to a private temporary directory (made once
 * per process, removed at exit; $TMPDIR or /tmp) under a fixed name, opened
 * with sr_store_open (quick_check on), and when the open succeeds every read
 * call runs: info, variables (find, slots, chunking), every tensor and slot
 * at -1 and at every retained checkpoint (and one step that is not),
 * workers, checkpoints, rewinds, incarnations, step log, config, verify.
 * Read-write opens then, on a store that verifies clean, optionally start an
 * incarnation, commit a small valid step (twice, the second rewriting it)
 * and rewind.  The target uses only the store API.
 *
 * abort() (a finding) only on a store bug:
 *   - a call returns something that is not an sr_err, or fails without a
 *     detail (store.h: "a negative code with the detail in sr_errdetail()");
 *   - a refused open does not name the file or changes it; a read-only
 *     handle changes the file (docs/store.md "Opening, and what is refused");
 *   - on a store that sr_store_verify finds clean: a read or list call
 *     reports corruption or a SQLite failure, list counts disagree with
 *     sr_store_get_info, checkpoints are not ascending up to the global step;
 *   - a commit or rewind that succeeded is not what reads show afterwards,
 *     or leaves a store that no longer verifies clean or reopens; a failed
 *     one changed the previous step;
 *   - set_config/new_incarnation results not read back.
 * Crashes, leaks and undefined behaviour are found by ASan/UBSan/LSan.
 * The corpus in corpus/ replays under ctest in every build (tests/fuzz/replay.c).
 */
#include "fuzz_store.h"
#include "../replay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"

#define MAX_VARS       64           /* variables whose tensors are read */
#define MAX_SLOTS      8            /* slots read per variable */
#define MAX_STEPS      16           /* retained checkpoints read */
#define READ_CAP       (256u << 10) /* bigger tensors: only the size refusal is tried */
#define COMMIT_CAP     (16u << 10)
#define COMMIT_TENSORS 6
#define FUZZ_SLOT      "fuzz_slot"
#define FUZZ_CONFIG    "{\"fuzz\":\"\xc3\xa9\xe4\xb8\xad\"}" /* UTF-8: e-acute, a CJK char */

static char dir_path[4096];
static char db_path[4096 + 16];
static int  setup_state; /* 0 not yet, 1 done */

/* Lengths are summed here so that the compiler keeps the strlen() calls that
 * make ASan look at every byte of a returned string. */
static volatile size_t sink;

/* ---- files ----------------------------------------------------------- */

static void
remove_files(void)
{
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal", "-mark"};
    char                     p[sizeof(db_path) + 16];

    for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", db_path, sfx[i]);
        unlink(p);
    }
}

static void
cleanup(void)
{
    remove_files();
    rmdir(dir_path);
}

/* Environment failures (no temp dir, disk full) end the run: they are not
 * findings, and going on would test nothing. */
static void
env_fail(const char *what)
{
    fprintf(stderr, "fuzz_store: %s: %s (not a finding)\n", what, strerror(errno));
    exit(2);
}

static void
setup(void)
{
    const char *tmp = getenv("TMPDIR");

    if (setup_state) {
        return;
    }
    snprintf(dir_path, sizeof(dir_path), "%s/fuzz_store.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir_path) == NULL) {
        env_fail("mkdtemp");
    }
    snprintf(db_path, sizeof(db_path), "%s/store.db", dir_path);
    atexit(cleanup);
    setup_state = 1;
}

static void
write_file(const uint8_t *p, size_t n)
{
    int fd = open(db_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    if (fd < 0) {
        env_fail(db_path);
    }
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            env_fail("write");
        }
        p += w;
        n -= (size_t)w;
    }
    if (close(fd) != 0) {
        env_fail("close");
    }
}

/* 1 when the file holds exactly p[0..n). */
static int
file_is(const uint8_t *p, size_t n)
{
    struct stat sb;
    uint8_t     buf[4096];
    size_t      off = 0;
    int         fd = open(db_path, O_RDONLY | O_CLOEXEC), same = 1;

    if (fd < 0) {
        return 0;
    }
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != n) {
        close(fd);
        return 0;
    }
    while (same && off < n) {
        ssize_t r = read(fd, buf, n - off < sizeof(buf) ? n - off : sizeof(buf));
        if (r <= 0) {
            same = 0;
            break;
        }
        same = memcmp(buf, p + off, (size_t)r) == 0;
        off += (size_t)r;
    }
    close(fd);
    return same;
}

/* ---- findings -------------------------------------------------------- */

static void bug(const char *fmt, ...) SR_PRINTF(1, 2);

static void
bug(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "fuzz_store: BUG: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    cleanup(); /* abort() skips atexit */
    abort();
}

/* Every call returns SR_OK or a known negative code, with a detail. */
static sr_err
checked(const char *call, sr_err rc)
{
    if (rc > 0 || strcmp(sr_errname(rc), "SR_E?") == 0) {
        bug("%s returned %d, not an sr_err", call, (int)rc);
    }
    if (rc != SR_OK && sr_errdetail()[0] == '\0') {
        bug("%s failed with %s and no detail", call, sr_errname(rc));
    }
    return rc;
}
#define CALL(x) checked(#x, (x))

/* A failure that says the store is damaged or SQLite failed. */
static int
is_damage(sr_err rc)
{
    return rc == SR_ECORRUPT || rc == SR_ESTORE;
}

/* ---- one run --------------------------------------------------------- */

typedef struct {
    sr_store     *st;
    unsigned      mode;
    sr_store_info info;
    int           have_info;
    sr_store_var *vars;
    size_t        nvars;
    int           have_vars;
    int64_t      *ckpts;
    size_t        nckpts;
    int           have_ckpts;
    int           damage;   /* a read or list call reported damage */
    char          why[256]; /* the first such call */
} run;

static void
note_damage(run *r, const char *call, sr_err rc)
{
    if (is_damage(rc) && !r->damage) {
        r->damage = 1;
        snprintf(r->why, sizeof(r->why), "%s: %s: %.180s", call, sr_errname(rc), sr_errdetail());
    }
}

static void
read_one(run *r, const sr_store_var *v, const char *slot, int64_t step)
{
    sr_err rc;

    if (v->nbytes > READ_CAP) {
        /* Too big to read here: the size refusal must still be an sr_err. */
        rc = CALL(sr_store_read_tensor(r->st, v->id, slot, step, NULL, (size_t)READ_CAP));
        note_damage(r, "sr_store_read_tensor (size refusal)", rc);
        return;
    }
    uint8_t *buf = malloc(v->nbytes ? (size_t)v->nbytes : 1);
    if (buf == NULL) {
        env_fail("malloc");
    }
    memset(buf, 0xa5, v->nbytes ? (size_t)v->nbytes : 1);
    rc = CALL(sr_store_read_tensor(r->st, v->id, slot, step, buf, (size_t)v->nbytes));
    note_damage(r, "sr_store_read_tensor", rc);
    free(buf);
}

static void
read_var(run *r, const sr_store_var *v)
{
    sr_store_var found;
    char       **slots = NULL;
    size_t       nslots = 0, nchunks = 0;
    uint64_t     cb = 0;
    sr_err       rc, rc2;

    rc = CALL(sr_store_find_var(r->st, v->name, &found));
    note_damage(r, "sr_store_find_var", rc);
    if (rc == SR_OK && strcmp(found.name, v->name) != 0) {
        bug("sr_store_find_var('%s') gave '%s'", v->name, found.name);
    }
    rc = CALL(sr_store_nchunks(r->st, v->id, &nchunks));
    rc2 = CALL(sr_store_chunk_bytes(r->st, v->id, &cb));
    note_damage(r, "sr_store_nchunks", rc);
    note_damage(r, "sr_store_chunk_bytes", rc2);
    if (rc == SR_OK && rc2 == SR_OK) {
        if (cb != v->chunk_bytes || cb == 0 || nchunks != (v->nbytes + cb - 1) / cb) {
            bug("variable '%s': %llu bytes, chunk_bytes %u in the list, sr_store_chunk_bytes "
                "%llu, sr_store_nchunks %zu",
                v->name, (unsigned long long)v->nbytes, v->chunk_bytes, (unsigned long long)cb,
                nchunks);
        }
    }
    rc = CALL(sr_store_list_slots(r->st, v->id, &slots, &nslots));
    note_damage(r, "sr_store_list_slots", rc);
    if (rc != SR_OK) {
        slots = NULL;
        nslots = 0;
    }
    for (size_t s = 0; s <= nslots && s <= MAX_SLOTS; s++) {
        const char *slot = s == 0 ? "" : slots[s - 1];
        read_one(r, v, slot, -1);
        for (size_t k = 0; k < r->nckpts && k < MAX_STEPS; k++) {
            read_one(r, v, slot, r->ckpts[k]);
        }
        if (r->have_info && r->info.global_step < INT64_MAX) {
            read_one(r, v, slot, r->info.global_step + 1); /* never retained */
        }
    }
    if (nslots > 0) {
        read_one(r, v, "no such slot", -1);
    }
    sr_store_free_names(slots, nslots);
}

static void
read_lists(run *r)
{
    sr_store_worker      *w = NULL;
    sr_store_rewind_rec  *rw = NULL;
    sr_store_incarnation *inc = NULL;
    sr_store_contrib     *log = NULL;
    char                 *config = NULL;
    size_t                n = 0;
    sr_err                rc;

    rc = CALL(sr_store_list_workers(r->st, &w, &n));
    note_damage(r, "sr_store_list_workers", rc);
    free(rc == SR_OK ? w : NULL);
    rc = CALL(sr_store_list_rewinds(r->st, &rw, &n));
    note_damage(r, "sr_store_list_rewinds", rc);
    free(rc == SR_OK ? rw : NULL);
    rc = CALL(sr_store_list_incarnations(r->st, &inc, &n));
    note_damage(r, "sr_store_list_incarnations", rc);
    if (rc == SR_OK) {
        for (size_t i = 0; i < n; i++) {
            sink += strlen(inc[i].config); /* inside the block, or ASan says so */
        }
        free(inc);
    }
    rc = CALL(sr_store_read_log(r->st, INT64_MIN, INT64_MAX, &log, &n));
    note_damage(r, "sr_store_read_log", rc);
    free(rc == SR_OK ? log : NULL);
    if (r->have_info) {
        rc = CALL(sr_store_read_log(r->st, r->info.global_step - (r->info.global_step > 0),
                                    r->info.global_step, &log, &n));
        note_damage(r, "sr_store_read_log", rc);
        free(rc == SR_OK ? log : NULL);
    }
    rc = CALL(sr_store_get_config(r->st, &config));
    note_damage(r, "sr_store_get_config", rc);
    if (rc == SR_OK) {
        sink += strlen(config);
        free(config);
    }
}

/* sr_store_verify: 1 clean, 0 problems or failure.  The report is "" exactly
 * when clean. */
static int
verify(sr_store *st, const char *when)
{
    char  *report = NULL;
    sr_err rc = CALL(sr_store_verify(st, &report));

    if (rc == SR_OK && (report == NULL || report[0] != '\0')) {
        bug("sr_store_verify (%s) is SR_OK with a report '%.200s'", when, report ? report : "NULL");
    }
    if (rc == SR_ECORRUPT && (report == NULL || report[0] == '\0')) {
        bug("sr_store_verify (%s) found problems but the report is empty", when);
    }
    free(report);
    return rc == SR_OK;
}

static void
free_run(run *r)
{
    free(r->vars);
    free(r->ckpts);
    r->vars = NULL;
    r->ckpts = NULL;
    r->nvars = r->nckpts = 0;
    r->have_vars = r->have_ckpts = r->have_info = 0;
}

/* Every read path; returns 1 when sr_store_verify found the store clean, and
 * then checks what a clean store promises. */
static int
read_all(run *r, const char *when)
{
    sr_err rc;

    free_run(r);
    r->damage = 0;
    rc = CALL(sr_store_get_info(r->st, &r->info));
    note_damage(r, "sr_store_get_info", rc);
    r->have_info = rc == SR_OK;
    rc = CALL(sr_store_list_vars(r->st, &r->vars, &r->nvars));
    note_damage(r, "sr_store_list_vars", rc);
    r->have_vars = rc == SR_OK;
    if (!r->have_vars) {
        r->vars = NULL;
        r->nvars = 0;
    }
    rc = CALL(sr_store_list_checkpoints(r->st, &r->ckpts, &r->nckpts));
    note_damage(r, "sr_store_list_checkpoints", rc);
    r->have_ckpts = rc == SR_OK;
    if (!r->have_ckpts) {
        r->ckpts = NULL;
        r->nckpts = 0;
    }
    for (size_t i = 0; i < r->nvars && i < MAX_VARS; i++) {
        read_var(r, &r->vars[i]);
    }
    read_lists(r);
    if (!verify(r->st, when)) {
        return 0;
    }
    /* A clean store: everything above must have worked and agree. */
    if (r->damage) {
        bug("%s: verify is clean but %s", when, r->why);
    }
    if (!r->have_info || !r->have_vars || !r->have_ckpts) {
        bug("%s: verify is clean but get_info %d, list_vars %d, list_checkpoints %d failed", when,
            !r->have_info, !r->have_vars, !r->have_ckpts);
    }
    if ((int64_t)r->nvars != r->info.nvariables || (int64_t)r->nckpts != r->info.ncheckpoints) {
        bug("%s: get_info says %lld variables, %lld checkpoints; the lists have %zu, %zu", when,
            (long long)r->info.nvariables, (long long)r->info.ncheckpoints, r->nvars, r->nckpts);
    }
    for (size_t i = 1; i < r->nckpts; i++) {
        if (r->ckpts[i] <= r->ckpts[i - 1]) {
            bug("%s: checkpoints not ascending at %zu", when, i);
        }
    }
    if (r->nckpts > 0 && r->ckpts[r->nckpts - 1] != r->info.global_step) {
        bug("%s: verify is clean but the newest checkpoint %lld is not the global step %lld", when,
            (long long)r->ckpts[r->nckpts - 1], (long long)r->info.global_step);
    }
    return 1;
}

/* ---- writes (read-write, clean stores only) -------------------------- */

static void
check_incarnation(run *r)
{
    sr_store_incarnation *list = NULL;
    uint64_t              inc = 0;
    size_t                n = 0;
    char                 *config = NULL;
    sr_err                rc;

    if (CALL(sr_store_new_incarnation(r->st, &inc)) != SR_OK) {
        return;
    }
    if (inc != r->info.incarnation + 1) {
        bug("new_incarnation gave %llu after %llu", (unsigned long long)inc,
            (unsigned long long)r->info.incarnation);
    }
    if (CALL(sr_store_set_config(r->st, FUZZ_CONFIG)) != SR_OK) {
        return;
    }
    if ((rc = CALL(sr_store_get_config(r->st, &config))) == SR_OK) {
        if (strcmp(config, FUZZ_CONFIG) != 0) {
            bug("get_config gave '%.100s' after set_config", config);
        }
        free(config);
    }
    if ((rc = CALL(sr_store_list_incarnations(r->st, &list, &n))) == SR_OK) {
        if (n == 0 || strcmp(list[n - 1].config, FUZZ_CONFIG) != 0) {
            bug("the newest of %zu incarnations does not hold the config just set", n);
        }
        free(list);
    }
}

typedef struct {
    sr_store_var v;
    const char  *slot;
    uint8_t     *before; /* read at -1 before the commit; NULL for a new slot */
    uint8_t     *data;   /* what the commit passes */
    uint8_t     *dirty;  /* NULL = all */
    uint8_t     *want;   /* what a read must give after it */
} ctensor;

static void
read_exact(run *r, const ctensor *t, const uint8_t *want, const char *when)
{
    uint8_t *buf = malloc(t->v.nbytes ? (size_t)t->v.nbytes : 1);
    sr_err   rc;

    if (buf == NULL) {
        env_fail("malloc");
    }
    rc = CALL(sr_store_read_tensor(r->st, t->v.id, t->slot, -1, buf, (size_t)t->v.nbytes));
    if (rc != SR_OK) {
        bug("%s: variable '%s' slot '%s' unreadable: %s %s", when, t->v.name, t->slot,
            sr_errname(rc), sr_errdetail());
    }
    if (t->v.nbytes > 0 && memcmp(buf, want, (size_t)t->v.nbytes) != 0) {
        bug("%s: variable '%s' slot '%s' does not read back as expected", when, t->v.name, t->slot);
    }
    free(buf);
}

/* One commit at step g of tensors t[0..n) with byte pattern `seed`; checks
 * the outcome either way.  1 when it succeeded. */
static int
commit_once(run *r, ctensor *t, size_t n, int64_t g, unsigned seed, const char *when)
{
    sr_store_tensor  ts[COMMIT_TENSORS + 1];
    sr_store_contrib log[COMMIT_TENSORS + 1];
    sr_store_worker  w[2];
    sr_store_commit  c;
    sr_store_info    after;
    int64_t          g0 = r->info.global_step;
    sr_err           rc;

    memset(&c, 0, sizeof(c));
    for (size_t i = 0; i < n; i++) {
        size_t nb = (size_t)t[i].v.nbytes, cb = t[i].v.chunk_bytes;
        for (size_t j = 0; j < nb; j++) {
            t[i].data[j] = (uint8_t)(j * 31u + seed + (unsigned)i * 7u);
            int dirty = t[i].dirty == NULL || t[i].dirty[j / cb];
            t[i].want[j] = dirty ? t[i].data[j] : t[i].before[j];
        }
        ts[i] = (sr_store_tensor){t[i].v.id, t[i].slot, t[i].data, nb, t[i].dirty};
        log[i] = (sr_store_contrib){g0, t[i].v.id, 0, (int32_t)i, 3, g0};
    }
    w[0] = (sr_store_worker){
        .task_index = 0, .local_step = g, .last_seen_ms = 1000, .incarnation = r->info.incarnation};
    w[1] = (sr_store_worker){.task_index = 7,
                             .local_step = g0,
                             .last_seen_ms = 2000,
                             .incarnation = r->info.incarnation};
    c.global_step = g;
    c.tensors = ts;
    c.ntensors = n;
    c.workers = w;
    c.nworkers = 2;
    c.log = log;
    c.nlog = n;
    rc = CALL(sr_store_commit_step(r->st, &c));
    if (rc != SR_OK) {
        /* Rolled back: the previous step intact, the handle usable. */
        if (CALL(sr_store_get_info(r->st, &after)) != SR_OK || after.global_step != g0) {
            bug("%s: failed commit (%s) left the store unreadable or moved its step", when,
                sr_errname(rc));
        }
        for (size_t i = 0; i < n; i++) {
            if (t[i].before != NULL) {
                read_exact(r, &t[i], t[i].before, "after a failed commit");
            }
        }
        return 0;
    }
    if (CALL(sr_store_get_info(r->st, &after)) != SR_OK || after.global_step != g) {
        bug("%s: commit of step %lld succeeded but get_info says otherwise", when, (long long)g);
    }
    for (size_t i = 0; i < n; i++) {
        read_exact(r, &t[i], t[i].want, when);
        if (t[i].before != NULL) {
            memcpy(t[i].before, t[i].want, (size_t)t[i].v.nbytes);
        } else if ((t[i].before = malloc(t[i].v.nbytes ? (size_t)t[i].v.nbytes : 1)) != NULL) {
            memcpy(t[i].before, t[i].want, (size_t)t[i].v.nbytes);
        } else {
            env_fail("malloc");
        }
        free(t[i].dirty);
        t[i].dirty = NULL; /* the rewrite writes every chunk */
    }
    r->info.global_step = g;
    return 1;
}

/* 1 when sr_store_list_slots names `slot` for the variable (or fails). */
static int
has_slot(sr_store *st, int64_t var_id, const char *slot)
{
    char **names = NULL;
    size_t n = 0;
    int    found = 0;

    if (CALL(sr_store_list_slots(st, var_id, &names, &n)) != SR_OK) {
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        found = found || strcmp(names[i], slot) == 0;
    }
    sr_store_free_names(names, n);
    return found;
}

static void
check_commit(run *r)
{
    ctensor t[COMMIT_TENSORS + 1];
    size_t  n = 0;
    int64_t g = r->info.global_step < INT64_MAX ? r->info.global_step + 1 : r->info.global_step;

    memset(t, 0, sizeof(t));
    for (size_t i = 0; i < r->nvars && n < COMMIT_TENSORS; i++) {
        const sr_store_var *v = &r->vars[i];
        size_t              nb = (size_t)v->nbytes, nchunks = 0;
        if (v->nbytes > COMMIT_CAP || v->chunk_bytes == 0) {
            continue;
        }
        ctensor *c = &t[n];
        c->v = *v;
        c->slot = "";
        c->before = malloc(nb ? nb : 1);
        c->data = malloc(nb ? nb : 1);
        c->want = malloc(nb ? nb : 1);
        if (c->before == NULL || c->data == NULL || c->want == NULL) {
            env_fail("malloc");
        }
        if (CALL(sr_store_read_tensor(r->st, v->id, "", -1, c->before, nb)) != SR_OK) {
            free(c->before);
            free(c->data);
            free(c->want);
            memset(c, 0, sizeof(*c));
            continue; /* not readable at the current step (declared later) */
        }
        /* Every other variable: a sparse update of every other chunk. */
        if (n % 2 == 1 && CALL(sr_store_nchunks(r->st, v->id, &nchunks)) == SR_OK && nchunks > 0) {
            if ((c->dirty = calloc(nchunks, 1)) == NULL) {
                env_fail("calloc");
            }
            for (size_t k = 0; k < nchunks; k += 2) {
                c->dirty[k] = 1;
            }
        }
        n++;
    }
    if (n > 0) {
        /* A slot of the first variable: created on first write (when it
         * does not exist yet) or written over. */
        ctensor *c = &t[n];
        size_t   nb = (size_t)t[0].v.nbytes;
        c->v = t[0].v;
        c->slot = FUZZ_SLOT;
        c->data = malloc(nb ? nb : 1);
        c->want = malloc(nb ? nb : 1);
        if (c->data == NULL || c->want == NULL) {
            env_fail("malloc");
        }
        c->before = malloc(nb ? nb : 1);
        if (c->before == NULL) {
            env_fail("malloc");
        }
        if (CALL(sr_store_read_tensor(r->st, c->v.id, FUZZ_SLOT, -1, c->before, nb)) != SR_OK) {
            free(c->before);
            c->before = NULL;
        }
        /* Unreadable but present (first written after the current step):
         * a write would not be readable either; leave it out. */
        if (c->before != NULL || !has_slot(r->st, c->v.id, FUZZ_SLOT)) {
            n++;
        } else {
            free(c->data);
            free(c->want);
            memset(c, 0, sizeof(*c));
        }
    }
    if (commit_once(r, t, n, g, 1, "commit") && n > 0) {
        /* Rewrite the same step in place with other bytes. */
        (void)commit_once(r, t, 1, g, 2, "rewrite of the same step");
    }
    for (size_t i = 0; i < n; i++) {
        free(t[i].before);
        free(t[i].data);
        free(t[i].dirty);
        free(t[i].want);
    }
}

static void
check_rewind(run *r)
{
    int64_t             *ck = NULL;
    sr_store_rewind_rec *rw = NULL;
    size_t               nck = 0, nrw = 0, nrw2 = 0;
    sr_store_info        after;
    sr_err               rc;
    int64_t              g0 = r->info.global_step;

    if (CALL(sr_store_list_checkpoints(r->st, &ck, &nck)) != SR_OK) {
        return;
    }
    if (nck == 0 || CALL(sr_store_list_rewinds(r->st, &rw, &nrw)) != SR_OK) {
        free(ck);
        return;
    }
    free(rw);
    rw = NULL;
    int64_t to = ck[0];
    free(ck);
    ck = NULL;
    rc = CALL(sr_store_rewind(r->st, to));
    if (CALL(sr_store_get_info(r->st, &after)) != SR_OK) {
        bug("get_info fails after a rewind (%s)", sr_errname(rc));
    }
    if (rc != SR_OK) {
        if (after.global_step != g0) {
            bug("failed rewind (%s) moved the global step %lld -> %lld", sr_errname(rc),
                (long long)g0, (long long)after.global_step);
        }
        return;
    }
    if (after.global_step != to) {
        bug("rewind to %lld left the global step at %lld", (long long)to,
            (long long)after.global_step);
    }
    if (CALL(sr_store_list_checkpoints(r->st, &ck, &nck)) != SR_OK || nck == 0 ||
        ck[nck - 1] != to) {
        bug("after a rewind to %lld the newest checkpoint is not %lld", (long long)to,
            (long long)to);
    }
    free(ck);
    if (CALL(sr_store_list_rewinds(r->st, &rw, &nrw2)) != SR_OK || nrw2 != nrw + 1 ||
        rw[nrw2 - 1].to_step != to || rw[nrw2 - 1].from_step != g0) {
        bug("the rewind %lld -> %lld is not the last recorded one", (long long)g0, (long long)to);
    }
    free(rw);
    r->info.global_step = to;
}

/* Reopen the closed store read-only: it must open and verify clean. */
static void
check_reopen(int64_t g)
{
    sr_store     *st = NULL;
    sr_store_opts o;
    sr_store_info info;

    memset(&o, 0, sizeof(o));
    o.readonly = 1;
    if (CALL(sr_store_open(db_path, &o, &st)) != SR_OK) {
        bug("a store that verified clean does not reopen: %s", sr_errdetail());
    }
    if (!verify(st, "after reopening")) {
        bug("a store that verified clean does not after close and reopen");
    }
    if (CALL(sr_store_get_info(st, &info)) != SR_OK || info.global_step != g) {
        bug("reopened store lost its global step %lld", (long long)g);
    }
    sr_store_close(st);
}

static void
fuzz_one(unsigned mode, const uint8_t *file, size_t len)
{
    sr_store_opts o;
    run           r;
    sr_err        rc;
    int           rw = (mode & FUZZ_STORE_RW) != 0;

    memset(&o, 0, sizeof(o));
    memset(&r, 0, sizeof(r));
    o.readonly = !rw;
    o.create = (mode & FUZZ_STORE_CREATE) != 0;
    o.sync = (mode & FUZZ_STORE_SYNC_NORMAL) ? SR_STORE_SYNC_NORMAL : SR_STORE_SYNC_FULL;
    o.keep_checkpoints = 1 + (int)((mode >> FUZZ_STORE_KEEP_SHIFT) & 3);
    o.chunk_bytes = 64;
    o.skip_quick_check = 0;
    rc = CALL(sr_store_open(db_path, &o, &r.st));
    if (rc != SR_OK) {
        if (strstr(sr_errdetail(), db_path) == NULL) {
            bug("refused open (%s) does not name the file: %s", sr_errname(rc), sr_errdetail());
        }
        if (!file_is(file, len)) {
            bug("refused open (%s: %s) changed the file", sr_errname(rc), sr_errdetail());
        }
        return;
    }
    r.mode = mode;
    int clean = read_all(&r, "as opened");
    if (rw && clean) {
        if (mode & FUZZ_STORE_INCARNATION) {
            check_incarnation(&r);
        }
        if (mode & FUZZ_STORE_COMMIT) {
            check_commit(&r);
        }
        if (mode & FUZZ_STORE_REWIND) {
            check_rewind(&r);
        }
        if (mode & (FUZZ_STORE_INCARNATION | FUZZ_STORE_COMMIT | FUZZ_STORE_REWIND)) {
            int64_t g = r.info.global_step;
            if (!read_all(&r, "after the writes")) {
                bug("a clean store is no longer clean after valid writes");
            }
            if (r.info.global_step != g) {
                bug("global step %lld after the writes, expected %lld",
                    (long long)r.info.global_step, (long long)g);
            }
        }
    }
    int64_t g = r.info.global_step;
    free_run(&r);
    sr_store_close(r.st);
    if (!rw && !file_is(file, len)) {
        bug("a read-only handle changed the file");
    }
    if (rw && clean) {
        check_reopen(g);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned       mode = size > 0 ? data[0] : 0;
    const uint8_t *file = size > 0 ? data + 1 : data;
    size_t         len = size > 0 ? size - 1 : 0;

    setup();
    remove_files();
    write_file(file, len);
    fuzz_one(mode, file, len);
    remove_files();
    return 0;
}

int
fuzz_store_seed_ok(const uint8_t *data, size_t size)
{
    sr_store     *st = NULL;
    sr_store_opts o;
    int           ok = 0;

    setup();
    remove_files();
    write_file(size > 0 ? data + 1 : data, size > 0 ? size - 1 : 0);
    memset(&o, 0, sizeof(o));
    o.readonly = 1;
    if (sr_store_open(db_path, &o, &st) == SR_OK) {
        ok = verify(st, "seed check");
        sr_store_close(st);
    }
    remove_files();
    return ok;
}

/* The replay driver's hooks (tests/fuzz/replay.h). */
int
fuzz_seed_ok(const uint8_t *data, size_t size)
{
    return fuzz_store_seed_ok(data, size);
}

const char fuzz_seed_rule[] = "does not open and verify clean";
