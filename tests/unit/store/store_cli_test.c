/* cli/cmd_store.c through the real `syncrep store` command: exit codes,
 * the --json keys, export --step, and inspect while a writer holds the
 * store open.  Skipped when the command has not been built. */
#include <dirent.h>
#include <sys/wait.h>

#include "store_test_util.h"

/* The command this build made (sr_test_syncrep_bin's library copy is
 * compiled without the path); SR_SYNCREP_BIN in the environment overrides. */
static const char *
syncrep_bin(void)
{
    const char *env = getenv("SR_SYNCREP_BIN");
    return env != NULL && *env != '\0' ? env : SR_SYNCREP_BIN;
}

/* Run `syncrep store ARGS...` (NULL-terminated) with output into
 * dir/out.txt (into *out when not NULL); the exit code. */
static int
run_cli_argv(const store_fixture *f, char **out, const char *const *args)
{
    char        log[700];
    const char *argv[16];
    size_t      n = 0, len;
    int         status;

    argv[n++] = syncrep_bin();
    argv[n++] = "store";
    for (size_t i = 0; args[i] != NULL && n + 1 < sizeof(argv) / sizeof(argv[0]); i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    snprintf(log, sizeof(log), "%s/out.txt", f->dir);
    unlink(log);
    pid_t pid = sr_test_spawn((char *const *)argv, log);
    assert_true(pid > 0);
    status = sr_test_reap(pid, 30000);
    assert_true(status >= 0 && WIFEXITED(status));
    if (out != NULL) {
        uint8_t *b = read_file_bytes(log, &len);
        *out = realloc(b, len + 1);
        assert_non_null(*out);
        (*out)[len] = '\0';
    }
    return WEXITSTATUS(status);
}

/* The same with up to five arguments (the first NULL ends them). */
static int
run_cli(const store_fixture *f, char **out, const char *a1, const char *a2, const char *a3,
        const char *a4, const char *a5)
{
    const char *const args[] = {a1, a2, a3, a4, a5, NULL};
    return run_cli_argv(f, out, args);
}

static sr_store *
make_store(const char *path, int64_t *id)
{
    sr_store     *st = open_small(path, 64, 3);
    const int64_t shape[2] = {4, 5};
    float         v[20];
    uint64_t      inc;

    fill_pattern(v, SR_FLOAT32, 20, 1, 0);
    assert_sr_ok(sr_store_new_incarnation(st, &inc));
    assert_sr_ok(sr_store_set_config(st, "{\"replicas_to_aggregate\":2}"));
    assert_sr_ok(sr_store_declare(st, "layer/w", SR_FLOAT32, 2, shape, 1, v, sizeof(v), id, NULL));
    assert_sr_ok(sr_store_set_ready(st));
    fill_pattern(v, SR_FLOAT32, 20, 1, 1);
    sr_store_tensor t[2] = {{.var_id = *id, .data = v, .len_bytes = sizeof(v)},
                            {.var_id = *id, .slot = "momentum", .data = v, .len_bytes = sizeof(v)}};
    sr_store_worker w = {
        .task_index = 0, .local_step = 0, .last_seen_ms = 1718000000000, .incarnation = inc};
    sr_store_commit c = {
        .global_step = 1, .tensors = t, .ntensors = 2, .workers = &w, .nworkers = 1};
    assert_sr_ok(sr_store_commit_step(st, &c));
    return st;
}

static void
test_cli_store_inspect_verify_export_exit_codes_and_json(void **state)
{
    store_fixture *f = *state;
    char          *out = NULL, copy[700], junk[700];
    int64_t        id;
    sr_store      *st, *cp = NULL;
    sr_store_info  info;
    sr_store_opts  ro = {.readonly = 1};

    if (access(syncrep_bin(), X_OK) != 0) {
        skip(); /* the command is built with the other components */
    }
    st = make_store(f->path, &id); /* stays open: a coordinator holding it */
    assert_int_equal(run_cli(f, &out, "inspect", f->path, "--json", NULL, NULL), 0);
    assert_non_null(strstr(out, "\"global_step\":1"));
    assert_non_null(strstr(out, "\"incarnation\":1"));
    assert_non_null(strstr(out, "\"name\":\"layer/w\""));
    assert_non_null(strstr(out, "\"dtype\":\"float32\""));
    assert_non_null(strstr(out, "\"shape\":[4,5]"));
    assert_non_null(strstr(out, "\"bytes\":80"));
    assert_non_null(strstr(out, "\"slots\":[\"momentum\"]"));
    assert_non_null(strstr(out, "\"task_index\":0,\"local_step\":0,\"last_seen\":\"2024-06-10T"));
    assert_non_null(strstr(out, "\"checkpoints\":[0,1]"));
    free(out);
    assert_int_equal(run_cli(f, &out, "inspect", f->path, NULL, NULL, NULL), 0);
    assert_non_null(strstr(out, "global step   1"));
    free(out);
    assert_int_equal(run_cli(f, &out, "verify", f->path, NULL, NULL, NULL), 0);
    assert_non_null(strstr(out, ": ok (global step 1, mark 1, retained steps 0 1 intact)"));
    free(out);

    snprintf(copy, sizeof(copy), "%s/copy.db", f->dir);
    assert_int_equal(run_cli(f, NULL, "export", f->path, copy, "--step", "0"), 0);
    assert_int_equal(run_cli(f, &out, "export", f->path, copy, NULL, NULL), 1);
    assert_non_null(strstr(out, "syncrep store export: "));
    assert_non_null(strstr(out, copy));
    free(out);
    assert_sr_ok(sr_store_open(copy, &ro, &cp));
    assert_sr_ok(sr_store_get_info(cp, &info));
    assert_int_equal(info.global_step, 0);
    sr_store_close(cp);
    sr_store_close(st);

    snprintf(junk, sizeof(junk), "%s/junk.db", f->dir);
    write_file_bytes(junk, "not a database at all, just words", 33);
    assert_int_equal(run_cli(f, &out, "verify", junk, NULL, NULL, NULL), 1);
    assert_non_null(strstr(out, "not a syncrep store"));
    free(out);
    assert_int_equal(run_cli(f, NULL, "inspect", junk, NULL, NULL, NULL), 1);

    /* Usage errors exit 2; help exits 0. */
    assert_int_equal(run_cli(f, NULL, "inspect", NULL, NULL, NULL, NULL), 2);
    assert_int_equal(run_cli(f, NULL, "inspect", f->path, "--bogus", NULL, NULL), 2);
    assert_int_equal(run_cli(f, NULL, "export", f->path, NULL, NULL, NULL), 2);
    assert_int_equal(run_cli(f, NULL, "export", f->path, copy, "--step", "x"), 2);
    assert_int_equal(run_cli(f, NULL, "frobnicate", NULL, NULL, NULL, NULL), 2);
    assert_int_equal(run_cli(f, NULL, NULL, NULL, NULL, NULL, NULL), 2);
    assert_int_equal(run_cli(f, &out, "--help", NULL, NULL, NULL, NULL), 0);
    assert_non_null(strstr(out, "inspect"));
    free(out);
    assert_int_equal(run_cli(f, &out, "export", "--help", NULL, NULL, NULL), 0);
    assert_non_null(strstr(out, "--step"));
    free(out);
}

#define PYTHON "/usr/bin/python3"

/* python3's strict json.load accepts the file (skipped without python3). */
static void
assert_valid_json_file(const store_fixture *f, const char *path)
{
    char        log[700];
    char *const argv[] = {PYTHON, "-c",
                          "import json, sys; json.load(open(sys.argv[1], encoding='utf-8'))",
                          (char *)path, NULL};

    if (access(PYTHON, X_OK) != 0) {
        fprintf(stderr, "%s missing: %s not validated\n", PYTHON, path);
        return;
    }
    snprintf(log, sizeof(log), "%s/json.log", f->dir);
    pid_t pid = sr_test_spawn(argv, log);
    assert_true(pid > 0);
    int st = sr_test_reap(pid, 30000);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* A store made before names had a rule may hold a name with a newline, an
 * escape code, a quote and invalid UTF-8: inspect prints it escaped, --json
 * stays valid JSON, and no raw control byte reaches the terminal. */
static void
test_cli_store_inspect_old_bad_name_escaped_valid_json(void **state)
{
    store_fixture *f = *state;
    char          *out = NULL, path[700];
    int64_t        id;
    sqlite3       *db;

    if (access(syncrep_bin(), X_OK) != 0) {
        skip();
    }
    sr_store_close(make_store(f->path, &id));
    /* "x\n\x1b[31m\"q\\\xff\xc0\xaf": behind syncrep's back, as an old
     * version could have stored it. */
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE variable SET name = CAST(X'780a1b5b33316d22715cffc0af' "
                                  "AS TEXT) WHERE name = 'layer/w'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_changes(db), 1);
    sqlite3_close(db);

    assert_int_equal(run_cli(f, &out, "inspect", f->path, "--json", NULL, NULL), 0);
    assert_non_null(strstr(out, "\"name\":\"x\\u000a\\u001b[31m\\\"q\\\\\\ufffd\\ufffd\\ufffd\""));
    assert_null(strchr(out, '\x1b'));
    free(out);
    snprintf(path, sizeof(path), "%s/out.txt", f->dir);
    assert_valid_json_file(f, path);

    assert_int_equal(run_cli(f, &out, "inspect", f->path, NULL, NULL, NULL), 0);
    assert_non_null(strstr(out, "x\\x0a\\x1b[31m\\\"q\\\\\\xff\\xc0\\xaf"));
    assert_null(strchr(out, '\x1b'));
    assert_null(strchr(out, '\xff'));
    free(out);
}

/* Flip one byte of the only chunk's version at `step` (SQLite directly). */
static void
flip_value_byte(const char *path, int64_t step)
{
    sqlite3      *db = NULL;
    sqlite3_blob *b = NULL;
    uint8_t       byte;
    char          sql[200];

    snprintf(sql, sizeof(sql),
             "SELECT c.data_id FROM chunk c JOIN tensor t ON t.id = c.tensor_id"
             " WHERE t.slot = '' AND c.idx = 0 AND c.step = %lld",
             (long long)step);
    int64_t data_id = sql_i64(path, sql);
    assert_true(data_id > 0);
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_blob_open(db, "main", "chunk_data", "data", data_id, 1, &b),
                     SQLITE_OK);
    assert_int_equal(sqlite3_blob_read(b, &byte, 1, 0), SQLITE_OK);
    byte ^= 0x40;
    assert_int_equal(sqlite3_blob_write(b, &byte, 1, 0), SQLITE_OK);
    sqlite3_blob_close(b);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

/* verify exits 1 and says why for a flipped byte (which step) and for a
 * store behind its mark (an older copy of the file put back). */
static void
test_cli_store_verify_reports_checksum_and_rollback(void **state)
{
    store_fixture *f = *state;
    char          *out = NULL;
    int64_t        id;
    size_t         len;

    if (access(syncrep_bin(), X_OK) != 0) {
        skip();
    }
    sr_store *st = make_store(f->path, &id);
    sr_store_close(st);
    uint8_t *at1 = read_file_bytes(f->path, &len); /* closed: the WAL is in the file */
    flip_value_byte(f->path, 1);
    assert_int_equal(run_cli(f, &out, "verify", f->path, NULL, NULL, NULL), 1);
    assert_non_null(
        strstr(out, "variable 'layer/w' slot '': chunk 0 version 1 fails its checksum"));
    assert_non_null(strstr(out, "retained steps: 0 ok, 1 corrupt"));
    free(out);

    /* Back to the intact copy, one more commit, then the copy again. */
    write_file_bytes(f->path, at1, len);
    st = open_small(f->path, 64, 3);
    float           v[20] = {0};
    sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = sizeof(v)};
    sr_store_commit c = {.global_step = 2, .tensors = &t, .ntensors = 1};
    assert_sr_ok(sr_store_commit_step(st, &c));
    sr_store_close(st);
    write_file_bytes(f->path, at1, len);
    assert_int_equal(run_cli(f, &out, "verify", f->path, NULL, NULL, NULL), 1);
    assert_non_null(strstr(out, "store is behind its mark: global step 1"));
    assert_non_null(strstr(out, "says step 2 was committed"));
    free(out);
    assert_int_equal(run_cli(f, &out, "inspect", f->path, NULL, NULL, NULL), 0);
    assert_non_null(strstr(out, "BEHIND"));
    free(out);
    free(at1);
}

/* Steps 0..2 of "layer/w" (float32 4x5, momentum from step 1), "b"
 * (float64 3) and "count" (an int64 scalar), values fill_pattern(tag, step). */
static void
make_weights_store(const char *path)
{
    sr_store     *st = open_small(path, 64, 3);
    const int64_t s2[2] = {4, 5}, s1[1] = {3};
    float         w[20], m[20];
    double        b[3];
    int64_t       n, id[3];
    uint64_t      inc;

    assert_sr_ok(sr_store_new_incarnation(st, &inc));
    fill_pattern(w, SR_FLOAT32, 20, 1, 0);
    fill_pattern(b, SR_FLOAT64, 3, 2, 0);
    fill_pattern(&n, SR_INT64, 1, 3, 0);
    assert_sr_ok(sr_store_declare(st, "layer/w", SR_FLOAT32, 2, s2, 1, w, sizeof(w), &id[0], NULL));
    assert_sr_ok(sr_store_declare(st, "b", SR_FLOAT64, 1, s1, 1, b, sizeof(b), &id[1], NULL));
    assert_sr_ok(sr_store_declare(st, "count", SR_INT64, 0, NULL, 0, &n, sizeof(n), &id[2], NULL));
    assert_sr_ok(sr_store_set_ready(st));
    for (int64_t step = 1; step <= 2; step++) {
        fill_pattern(w, SR_FLOAT32, 20, 1, step);
        fill_pattern(m, SR_FLOAT32, 20, 4, step);
        fill_pattern(b, SR_FLOAT64, 3, 2, step);
        fill_pattern(&n, SR_INT64, 1, 3, step);
        sr_store_tensor t[4] = {
            {.var_id = id[0], .data = w, .len_bytes = sizeof(w)},
            {.var_id = id[0], .slot = "momentum", .data = m, .len_bytes = sizeof(m)},
            {.var_id = id[1], .data = b, .len_bytes = sizeof(b)},
            {.var_id = id[2], .data = &n, .len_bytes = sizeof(n)},
        };
        sr_store_commit c = {.global_step = step, .tensors = t, .ntensors = 4};
        assert_sr_ok(sr_store_commit_step(st, &c));
    }
    sr_store_close(st);
}

/* python3 reads `file` (npz with numpy.load, safetensors with a strict
 * parse: header length, JSON, contiguous offsets covering the data) and
 * compares every array with fill_pattern's values at `step`. */
static const char check_weights_py[] =
    "import json, struct, sys\n"
    "import numpy as np\n"
    "path, fmt, step = sys.argv[1], sys.argv[2], int(sys.argv[3])\n"
    "def pat(tag, n):\n"
    "    return np.array([(tag * 7919 + step * 131 + i * 7) % 100003 - 50000 for i in range(n)])\n"
    "want = {'layer/w': (pat(1, 20) * 0.5).astype('<f4').reshape(4, 5),\n"
    "        'b': (pat(2, 3) * 0.25).astype('<f8'),\n"
    "        'count': (pat(3, 1)[0] * 1000003).astype('<i8').reshape(())}\n"
    "if step > 0:\n"
    "    want['layer/w/momentum'] = (pat(4, 20) * 0.5).astype('<f4').reshape(4, 5)\n"
    "if fmt == 'npz':\n"
    "    with np.load(path) as z:\n"
    "        got = {k: z[k] for k in z.files}\n"
    "else:\n"
    "    raw = open(path, 'rb').read()\n"
    "    n = struct.unpack('<Q', raw[:8])[0]\n"
    "    assert n % 8 == 0 and 8 + n <= len(raw)\n"
    "    def strict(pairs):\n"
    "        keys = [k for k, _ in pairs]\n"
    "        assert len(keys) == len(set(keys)), keys\n"
    "        return dict(pairs)\n"
    "    head = json.loads(raw[8:8 + n].decode('utf-8'), object_pairs_hook=strict)\n"
    "    meta = head.pop('__metadata__')\n"
    "    assert meta['global_step'] == str(step), meta\n"
    "    data = raw[8 + n:]\n"
    "    dt = {'F32': '<f4', 'F64': '<f8', 'I32': '<i4', 'I64': '<i8'}\n"
    "    got, end = {}, 0\n"
    "    for k, v in sorted(head.items(), key=lambda kv: kv[1]['data_offsets']):\n"
    "        assert set(v) == {'dtype', 'shape', 'data_offsets'}, v\n"
    "        b, e = v['data_offsets']\n"
    "        assert b == end and e >= b, (k, v)\n"
    "        a = np.frombuffer(data[b:e], dtype=dt[v['dtype']])\n"
    "        got[k] = a.reshape(v['shape'])\n"
    "        end = e\n"
    "    assert end == len(data), (end, len(data))\n"
    "assert sorted(got) == sorted(want), (sorted(got), sorted(want))\n"
    "for k in want:\n"
    "    assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k\n"
    "    assert np.array_equal(got[k], want[k]), (k, got[k], want[k])\n";

static void run_python_check(const store_fixture *f, const char *script, const char *file,
                             const char *fmt, int64_t step);

static void
assert_weights_file(const store_fixture *f, const char *file, const char *fmt, int64_t step)
{
    run_python_check(f, check_weights_py, file, fmt, step);
}

/* No "*.tmp.*" file is left in dir (a failed export removes its own). */
static void
assert_no_temp_files(const char *dir)
{
    DIR           *d = opendir(dir);
    struct dirent *e;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        if (strstr(e->d_name, ".tmp.") != NULL) {
            fprintf(stderr, "left behind: %s/%s\n", dir, e->d_name);
            closedir(d);
            fail();
        }
    }
    closedir(d);
}

/* export --format npz|safetensors: the latest step and a retained older
 * one, values exact, read by numpy; an unknown step is refused and leaves
 * no OUT; OUT is never overwritten. */
static void
test_cli_store_export_npz_safetensors_values_exact(void **state)
{
    store_fixture *f = *state;
    char          *out = NULL, npz[700], sft[700], old[700], bad[700], nodir[700];

    if (access(syncrep_bin(), X_OK) != 0) {
        skip();
    }
    make_weights_store(f->path);
    snprintf(npz, sizeof(npz), "%s/w.npz", f->dir);
    snprintf(sft, sizeof(sft), "%s/w.safetensors", f->dir);
    snprintf(old, sizeof(old), "%s/w1.npz", f->dir);
    snprintf(bad, sizeof(bad), "%s/w9.npz", f->dir);
    snprintf(nodir, sizeof(nodir), "%s/no/such/dir/w.npz", f->dir);

    const char *a1[] = {"export", f->path, "--format", "npz", npz, NULL};
    assert_int_equal(run_cli_argv(f, &out, a1), 0);
    assert_non_null(strstr(out, "at step 2"));
    free(out);
    const char *a2[] = {"export", "--format", "safetensors", f->path, sft, NULL};
    assert_int_equal(run_cli_argv(f, NULL, a2), 0);
    const char *a3[] = {"export", f->path, old, "--step", "1", "--format", "npz", NULL};
    assert_int_equal(run_cli_argv(f, NULL, a3), 0);

    /* Unknown step: refused, named, no OUT (nor a temp file) left. */
    const char *a4[] = {"export", f->path, bad, "--step", "9", "--format", "npz", NULL};
    assert_int_equal(run_cli_argv(f, &out, a4), 1);
    assert_non_null(strstr(out, "step 9 is not retained (retained: 0 1 2)"));
    free(out);
    assert_int_equal(access(bad, F_OK), -1);
    const char *a5[] = {"export", f->path, bad, "--step", "9", "--format", "safetensors", NULL};
    assert_int_equal(run_cli_argv(f, NULL, a5), 1);
    assert_int_equal(access(bad, F_OK), -1);
    /* An existing OUT is kept; an unwritable location is named. */
    assert_int_equal(run_cli_argv(f, &out, a1), 1);
    assert_non_null(strstr(out, "already exists"));
    free(out);
    const char *a6[] = {"export", f->path, nodir, "--format", "npz", NULL};
    assert_int_equal(run_cli_argv(f, &out, a6), 1);
    assert_non_null(strstr(out, nodir));
    free(out);
    const char *a7[] = {"export", f->path, bad, "--format", "hdf5", NULL};
    assert_int_equal(run_cli_argv(f, NULL, a7), 2);
    const char *a8[] = {"export", "--help", NULL};
    assert_int_equal(run_cli_argv(f, &out, a8), 0);
    assert_non_null(strstr(out, "--format store (the default when --format is absent)"));
    free(out);
    assert_no_temp_files(f->dir);

    if (access(PYTHON, X_OK) != 0) {
        fprintf(stderr, "%s missing: exports not validated\n", PYTHON);
        return;
    }
    assert_weights_file(f, npz, "npz", 2);
    assert_weights_file(f, sft, "safetensors", 2);
    assert_weights_file(f, old, "npz", 1);
}

/* Issue 23: a model declared as a whole, stored the way the coordinator
 * stores it (coordinator/server_pack.c): a float32 trainable pack holding
 * enc/w [3,4] at byte 0, enc/b [4] at 64 and dec/w [2,2,2] at 128 (members
 * 64-byte aligned), with a momentum slot from step 1, and an int64 frozen
 * pack holding steps [2].  The packs' values are fill_pattern's (tags 5, 6
 * and 7), so a member's value is a slice of the pattern. */
#define PACK0 SR_STORE_PACK_PREFIX "0"
#define PACK1 SR_STORE_PACK_PREFIX "1"

static void
make_model_store(const char *path)
{
    sr_store             *st = open_small(path, 64, 3);
    const int64_t         s0[1] = {40}, s1[1] = {2};
    float                 p0[40], m0[40];
    int64_t               p1[2], id0, id1;
    uint64_t              inc;
    const sr_store_member mem[4] = {
        {.name = "enc/w",
         .pack = PACK0,
         .offset = 0,
         .dtype = SR_FLOAT32,
         .ndim = 2,
         .shape = {3, 4},
         .nbytes = 48,
         .trainable = 1,
         .pos = 0},
        {.name = "enc/b",
         .pack = PACK0,
         .offset = 64,
         .dtype = SR_FLOAT32,
         .ndim = 1,
         .shape = {4},
         .nbytes = 16,
         .trainable = 1,
         .pos = 1},
        {.name = "steps",
         .pack = PACK1,
         .offset = 0,
         .dtype = SR_INT64,
         .ndim = 1,
         .shape = {2},
         .nbytes = 16,
         .trainable = 0,
         .pos = 2},
        {.name = "dec/w",
         .pack = PACK0,
         .offset = 128,
         .dtype = SR_FLOAT32,
         .ndim = 3,
         .shape = {2, 2, 2},
         .nbytes = 32,
         .trainable = 1,
         .pos = 3},
    };

    assert_sr_ok(sr_store_new_incarnation(st, &inc));
    fill_pattern(p0, SR_FLOAT32, 40, 5, 0);
    fill_pattern(p1, SR_INT64, 2, 7, 0);
    assert_sr_ok(sr_store_declare(st, PACK0, SR_FLOAT32, 1, s0, 1, p0, sizeof(p0), &id0, NULL));
    assert_sr_ok(sr_store_declare(st, PACK1, SR_INT64, 1, s1, 0, p1, sizeof(p1), &id1, NULL));
    assert_sr_ok(sr_store_add_members(st, mem, 4));
    assert_sr_ok(sr_store_set_ready(st));
    for (int64_t step = 1; step <= 2; step++) {
        fill_pattern(p0, SR_FLOAT32, 40, 5, step);
        fill_pattern(m0, SR_FLOAT32, 40, 6, step);
        sr_store_tensor t[2] = {
            {.var_id = id0, .data = p0, .len_bytes = sizeof(p0)},
            {.var_id = id0, .slot = "momentum", .data = m0, .len_bytes = sizeof(m0)},
        };
        sr_store_commit c = {.global_step = step, .tensors = t, .ntensors = 2};
        assert_sr_ok(sr_store_commit_step(st, &c));
    }
    sr_store_close(st);
}

/* numpy reads the npz or safetensors file: exactly the model's tensors by
 * name (no pack), each with its dtype, shape and slice of the pattern. */
static const char check_model_py[] =
    "import json, struct, sys\n"
    "import numpy as np\n"
    "path, fmt, step = sys.argv[1], sys.argv[2], int(sys.argv[3])\n"
    "def pat(tag, n, s):\n"
    "    return np.array([(tag * 7919 + s * 131 + i * 7) % 100003 - 50000 for i in range(n)])\n"
    "p0 = (pat(5, 40, step) * 0.5).astype('<f4')\n"
    "want = {'enc/w': p0[0:12].reshape(3, 4), 'enc/b': p0[16:20], 'dec/w': p0[32:40].reshape(2, 2, "
    "2),\n"
    "        'steps': (pat(7, 2, 0) * 1000003).astype('<i8')}\n"
    "if step > 0:\n"
    "    m0 = (pat(6, 40, step) * 0.5).astype('<f4')\n"
    "    want.update({'enc/w/momentum': m0[0:12].reshape(3, 4), 'enc/b/momentum': m0[16:20],\n"
    "                 'dec/w/momentum': m0[32:40].reshape(2, 2, 2)})\n"
    "if fmt == 'npz':\n"
    "    with np.load(path) as z:\n"
    "        got = {k: z[k] for k in z.files}\n"
    "else:\n"
    "    raw = open(path, 'rb').read()\n"
    "    n = struct.unpack('<Q', raw[:8])[0]\n"
    "    head = json.loads(raw[8:8 + n].decode('utf-8'))\n"
    "    head.pop('__metadata__')\n"
    "    dt = {'F32': '<f4', 'I64': '<i8'}\n"
    "    got = {k: np.frombuffer(raw[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]],\n"
    "                            dtype=dt[v['dtype']]).reshape(v['shape']) for k, v in "
    "head.items()}\n"
    "assert sorted(got) == sorted(want), (sorted(got), sorted(want))\n"
    "for k in want:\n"
    "    assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, (k, "
    "got[k].shape)\n"
    "    assert got[k].tobytes() == want[k].tobytes(), (k, got[k], want[k])\n";

static void
run_python_check(const store_fixture *f, const char *script, const char *file, const char *fmt,
                 int64_t step)
{
    char        log[700], s[32];
    char *const argv[] = {PYTHON, "-c", (char *)script, (char *)file, (char *)fmt, s, NULL};

    snprintf(s, sizeof(s), "%lld", (long long)step);
    snprintf(log, sizeof(log), "%s/py.log", f->dir);
    pid_t pid = sr_test_spawn(argv, log);
    assert_true(pid > 0);
    int st = sr_test_reap(pid, 60000);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        size_t   len;
        uint8_t *b = read_file_bytes(log, &len);
        fprintf(stderr, "%s (%s, step %lld) failed:\n%.*s\n", file, fmt, (long long)step, (int)len,
                b != NULL ? (const char *)b : "");
        free(b);
        fail();
    }
}

/* inspect lists each model tensor with its pack and offset (text and
 * JSON); export writes each under its own name, never a pack. */
static void
test_cli_store_model_tensors_inspect_and_export_by_name(void **state)
{
    store_fixture *f = *state;
    char          *out = NULL, npz[700], sft[700], old[700];

    if (access(syncrep_bin(), X_OK) != 0) {
        skip();
    }
    make_model_store(f->path);
    assert_int_equal(run_cli(f, &out, "inspect", f->path, NULL, NULL, NULL), 0);
    assert_non_null(strstr(out, "model tensors (4"));
    assert_non_null(strstr(out, PACK0 "@128"));
    assert_non_null(strstr(out, PACK1 "@0"));
    const char *dec = strstr(out, "dec/w");
    assert_non_null(dec);
    assert_non_null(strstr(dec, "[2,2,2]"));
    free(out);
    assert_int_equal(run_cli(f, &out, "inspect", f->path, "--json", NULL, NULL), 0);
    assert_non_null(strstr(out, "\"members\":[{\"name\":\"enc/w\",\"dtype\":\"float32\","
                                "\"shape\":[3,4],\"bytes\":48,\"trainable\":true,\"pack\":\"" PACK0
                                "\",\"offset\":0,\"pos\":0,\"created_step\":0}"));
    assert_non_null(strstr(out, "{\"name\":\"steps\",\"dtype\":\"int64\",\"shape\":[2],"
                                "\"bytes\":16,\"trainable\":false,\"pack\":\"" PACK1
                                "\",\"offset\":0,\"pos\":2,"));
    free(out);

    snprintf(npz, sizeof(npz), "%s/m.npz", f->dir);
    snprintf(sft, sizeof(sft), "%s/m.safetensors", f->dir);
    snprintf(old, sizeof(old), "%s/m0.npz", f->dir);
    const char *a1[] = {"export", f->path, "--format", "npz", npz, NULL};
    assert_int_equal(run_cli_argv(f, NULL, a1), 0);
    const char *a2[] = {"export", f->path, "--format", "safetensors", sft, NULL};
    assert_int_equal(run_cli_argv(f, NULL, a2), 0);
    const char *a3[] = {"export", f->path, old, "--step", "0", "--format", "npz", NULL};
    assert_int_equal(run_cli_argv(f, NULL, a3), 0);
    /* No pack name anywhere in the files (npz keeps names in clear). */
    size_t   len;
    uint8_t *b = read_file_bytes(sft, &len);
    assert_non_null(b);
    assert_null(memmem(b, len, SR_STORE_PACK_PREFIX, strlen(SR_STORE_PACK_PREFIX)));
    free(b);
    b = read_file_bytes(npz, &len);
    assert_non_null(b);
    assert_null(memmem(b, len, SR_STORE_PACK_PREFIX, strlen(SR_STORE_PACK_PREFIX)));
    free(b);
    if (access(PYTHON, X_OK) != 0) {
        fprintf(stderr, "%s missing: exports not validated\n", PYTHON);
        return;
    }
    run_python_check(f, check_model_py, npz, "npz", 2);
    run_python_check(f, check_model_py, sft, "safetensors", 2);
    run_python_check(f, check_model_py, old, "npz", 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_store_inspect_verify_export_exit_codes_and_json,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cli_store_inspect_old_bad_name_escaped_valid_json,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cli_store_verify_reports_checksum_and_rollback,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cli_store_model_tensors_inspect_and_export_by_name,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cli_store_export_npz_safetensors_values_exact,
                                        store_fixture_setup, store_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
