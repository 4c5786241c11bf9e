/*
 * Names are data: a DECLARE, PULL or PUSH of a name with a control
 * character or invalid UTF-8 is refused naming the byte, good names train,
 * and the log and `status --json` stay clean, even for a store made before
 * the rule.  docs/protocol.md, "DECLARE (2)".
 */
#include "sr_test.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/text.h"
#include "harness.h"
#include "raw_peer.h"
#include "store/store.h"
#include "syncrep/syncrep.h"
#include "wire/wire.h"

/* ---- names are data --------------------------------------------------- */

/* Every byte of a text a peer or an operator reads is printable: ASCII
 * 0x20..0x7e, or well-formed UTF-8 above the C1 controls. */
static void
assert_printable(const void *text, size_t len)
{
    const unsigned char *s = text;
    uint32_t             cp;
    size_t               n;

    for (size_t i = 0; i < len; i += n) {
        n = sr_utf8_decode(s + i, len - i, &cp, NULL);
        if (n == 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
            fail_msg("byte %zu of '%.*s' is not printable", i, (int)len, (const char *)text);
        }
    }
}

/* A DECLARE of float32 scalar `name` (len bytes, no NUL) from task. */
static void
raw_declare(raw_peer *r, int task, const char *name)
{
    sr_wire_vardesc vd;
    uint8_t         vb[SR_WIRE_BODY_MAX];
    memset(&vd, 0, sizeof(vd));
    snprintf(vd.name, sizeof(vd.name), "%s", name);
    vd.dtype = SR_FLOAT32;
    const void *db[1] = {vb};
    size_t      dl[1] = {sr_wire_vardesc_encode(&vd, vb, sizeof(vb))};
    assert_true(dl[0] > 0);
    raw_send(r, SR_MSG_DECLARE, task, 0, 0, db, dl, 1);
}

/* A PULL of one name, or (many) of "x" and then `name`, from task 0. */
static void
raw_pull_name(raw_peer *r, const char *name, int many)
{
    uint8_t     hb[SR_WIRE_HEADER_BYTES], n1[2 + SR_WIRE_MAX_NAME], n2[2 + SR_WIRE_MAX_NAME];
    const void *f[3] = {hb, n1, n2};
    size_t      len[3];

    len[0] = raw_hdr_task(r, hb, SR_MSG_PULL, 0, many ? SR_WIRE_F_MANY : 0, 0, 0); /* as task 0 */
    len[1] = sr_wire_name_encode(many ? "x" : name, n1, sizeof(n1));
    len[2] = sr_wire_name_encode(name, n2, sizeof(n2));
    assert_true(len[1] > 0 && len[2] > 0);
    raw_send_frames(r, f, len, many ? 3 : 2);
}

/* The reply is SR_EINVAL naming the byte at fault, in printable text. */
static void
expect_bad_name(raw_peer *r)
{
    raw_expect_error(r, SR_EINVAL);
    assert_printable(r->body[0], r->body_len[0]);
    assert_non_null(memmem(r->body[0], r->body_len[0], "at byte", 7));
}

#define PYTHON "/usr/bin/python3"

/* json (text) is valid JSON (python3's strict json.load of it as UTF-8),
 * and every name in names[0..n) is one of its "accumulators" (key acc) or
 * "variables". */
static void
assert_json_names(const char *dir, const char *json, const char *key, const char *const *names,
                  int n)
{
    static const char py[] = "import json, sys\n"
                             "d = json.load(open(sys.argv[1], encoding='utf-8'))\n"
                             "have = {a['name'] for a in d[sys.argv[2]]}\n"
                             "miss = [n for n in sys.argv[3:] if n not in have]\n"
                             "print('missing', [m.encode() for m in miss])\n"
                             "sys.exit(1 if miss else 0)\n";
    char              path[700], log[700];
    const char       *argv[24] = {PYTHON, "-c", py, path, key};
    FILE             *f;

    if (access(PYTHON, X_OK) != 0) {
        fprintf(stderr, "%s missing: JSON of %s not validated\n", PYTHON, dir);
        return;
    }
    snprintf(path, sizeof(path), "%s/names.json", dir);
    snprintf(log, sizeof(log), "%s/names.log", dir);
    assert_non_null(f = fopen(path, "w"));
    fputs(json, f);
    fclose(f);
    assert_true(n <= 18);
    for (int i = 0; i < n; i++) {
        argv[5 + i] = names[i];
    }
    argv[5 + n] = NULL;
    pid_t pid = sr_test_spawn((char *const *)argv, log);
    assert_true(pid > 0);
    int st = sr_test_reap(pid, 30000);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        fprintf(stderr, "not valid JSON, or names missing (see %s): %s\n", log, json);
    }
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* No line of the coordinator's log starts with `forged`, and none holds a
 * raw control character or invalid UTF-8. */
static void
assert_log_clean(const sr_harness *h, const char *forged)
{
    FILE *f = fopen(h->log, "r");
    char  line[4096];

    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        size_t n = strlen(line);
        assert_false(strncmp(line, forged, strlen(forged)) == 0);
        if (n > 0 && line[n - 1] == '\n') {
            n--;
        }
        assert_printable(line, n);
    }
    fclose(f);
}

/* Names are valid UTF-8 without control characters.  A DECLARE, PULL or
 * PUSH of a name with a newline, an escape code or invalid UTF-8 is
 * SR_EINVAL naming the byte, in printable text, and declares nothing;
 * PyTorch-style and non-ASCII names declare, train and pull exactly; the
 * log and `status --json` stay clean and valid.  A store made before the
 * rule may hold a bad name: the coordinator's status still prints it as
 * valid JSON. */
static void
test_protocol_names_are_data(void **state)
{
    static const char *const bad[] = {
        "a\nCOORD-FAKE forged=1", "\x1b[31mred", "ff\xff",  "\xc0\xaf",
        "\xed\xa0\x80",           "c1\xc2\x85",  "del\x7f",
    };
    static const char *const good[] = {
        "layer1.0.conv1.weight",
        "module.encoder.layers.11.self_attn.in_proj_bias",
        "Gewichte/Gr\xc3\xb6\xc3\x9f"
        "e",
        "\xe9\x87\x8d\xe3\x81\xbf",
        "with spaces, \"quotes\" and \\back\\slashes",
        "\xf0\x9f\x94\xa5/emoji",
    };
    const int     nbad = (int)(sizeof(bad) / sizeof(bad[0]));
    const int     ngood = (int)(sizeof(good) / sizeof(good[0]));
    const int64_t shape[1] = {2};
    const float   v0[2] = {1.0f, 2.0f}, g[2] = {0.5f, 0.25f};
    const double  gx = 1.0;
    sr_harness    h;
    const double  x0 = 10.0;
    sr_client    *chief;
    raw_peer      r;
    char          out[16384];
    int64_t       gs;
    (void)state;

    sr_harness_init(&h, "names");
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0", NULL);
    chief = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare(chief, "x", SR_FLOAT64, 0, NULL, &x0));
    for (int i = 0; i < ngood; i++) {
        assert_sr_ok(sr_client_declare(chief, good[i], SR_FLOAT32, 1, shape, v0));
    }
    assert_sr_ok(sr_client_ready(chief));

    raw_open(&r, h.endpoint, 0x4e4e);
    raw_hello(&r, 0); /* the chief's task: a declaration would create the variable */
    for (int i = 0; i < nbad; i++) {
        float f = 1.0f;
        raw_declare(&r, 0, bad[i]);
        expect_bad_name(&r);
        raw_pull_name(&r, bad[i], 0);
        expect_bad_name(&r);
        raw_pull_name(&r, bad[i], 1);
        expect_bad_name(&r);
        raw_push(&r, 0, bad[i], SR_FLOAT32, &f, sizeof(f), 0, (uint64_t)i + 1);
        expect_bad_name(&r);
        /* libsyncrep refuses before sending, in printable words. */
        assert_sr_err(sr_client_declare(chief, bad[i], SR_FLOAT32, 0, NULL, &f), SR_EINVAL);
        assert_printable(sr_client_error(chief), strlen(sr_client_error(chief)));
        assert_non_null(strstr(sr_client_error(chief), "at byte"));
        assert_sr_err(sr_client_pull(chief, bad[i], &f, sizeof(f)), SR_EINVAL);
        assert_sr_err(sr_client_push(chief, bad[i], &f, sizeof(f)), SR_EINVAL);
    }
    raw_close(&r);
    /* The refusal names what is wrong. */
    assert_sr_err(sr_client_declare(chief, bad[0], SR_FLOAT32, 0, NULL, v0), SR_EINVAL);
    assert_non_null(strstr(sr_client_error(chief), "control character 0x0a at byte 1"));
    assert_non_null(strstr(sr_client_error(chief), "a\\x0aCOORD-FAKE"));

    /* Good names: declared (above), trained (R = 1, lr 1: v - g), pulled. */
    for (int i = 0; i < ngood; i++) {
        assert_sr_ok(sr_client_push(chief, good[i], g, sizeof(g)));
    }
    assert_sr_ok(sr_client_push(chief, "x", &gx, sizeof(gx)));
    assert_sr_ok(sr_client_flush(chief));
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 1);
    for (int i = 0; i < ngood; i++) {
        float v[2] = {0, 0};
        assert_sr_ok(sr_client_pull(chief, good[i], v, sizeof(v)));
        assert_true(v[0] == 0.5f && v[1] == 1.75f);
    }
    assert_int_equal(sr_harness_log_count(&h, "variable=\"with spaces, \\\"quotes\\\" and "
                                              "\\\\back\\\\slashes\""),
                     1);

    /* status --json: valid, every good name there, no bad one. */
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    assert_json_names(h.dir, out, "accumulators", good, ngood);
    assert_null(strstr(out, "COORD-FAKE"));
    assert_null(strstr(out, "red\""));
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    assert_log_clean(&h, "COORD-FAKE");

    /* Nothing bad was declared: the store holds x and the good names. */
    sr_store     *st;
    sr_store_var *vars;
    size_t        nvars;
    sr_store_opts ro = {.readonly = 1};
    assert_sr_ok(sr_store_open(h.store, &ro, &st));
    assert_sr_ok(sr_store_list_vars(st, &vars, &nvars));
    assert_int_equal(nvars, 1 + (size_t)ngood);
    free(vars);
    sr_store_close(st);

    /* A store made before the rule: one name gets a newline, an escape
     * code and invalid bytes behind syncrep's back. */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(h.store, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE variable SET name = CAST(X'6f6c640a1b5b33316dffc0af' AS "
                                  "TEXT) WHERE name = 'layer1.0.conv1.weight'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_changes(db), 1);
    sqlite3_close(db);
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0", NULL);
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    const char *old[2] = {"old\n\x1b[31m\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", good[4]};
    assert_json_names(h.dir, out, "accumulators", old, 2);
    assert_non_null(strstr(out, "\"old\\u000a\\u001b[31m\\ufffd\\ufffd\\ufffd\""));
    /* It cannot be pulled by its name (no such name can be sent). */
    raw_open(&r, h.endpoint, 0x4e4f);
    raw_hello(&r, 0);
    raw_pull_name(&r, "old\n\x1b[31m\xff\xc0\xaf", 0);
    expect_bad_name(&r);
    raw_close(&r);
    assert_int_equal(sr_harness_stop(&h), 0);
    assert_log_clean(&h, "COORD-FAKE");
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol_names_are_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
