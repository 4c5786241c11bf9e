/*
 * `syncrep status` as an operator runs it (issues 22 and 26): with CURVE on,
 * as docs/operations.md's recipe does, it answers given the keys as options
 * or as the SYNCREP_* environment variables, and says what is missing
 * without them; its text shows the accumulators' fill and the rejected
 * pushes; --watch with a non-terminal stdout prints one block (with --json
 * one JSON line) per interval and stops after --count.
 */
#include "sr_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "syncrep/syncrep.h"

/* `syncrep keygen DIR/name`; the public key into pub. */
static void
keygen(sr_harness *h, const char *name, char pub[41])
{
    char  cmd[1200], path[1100];
    FILE *f;

    snprintf(cmd, sizeof(cmd), "%s keygen %s/%s > /dev/null", sr_test_syncrep_bin(), h->dir, name);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/%s.public", h->dir, name);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(pub, 41, f));
    fclose(f);
}

static void
read_key(sr_harness *h, const char *file, char key[41])
{
    char  path[1100];
    FILE *f;
    snprintf(path, sizeof(path), "%s/%s", h->dir, file);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(key, 41, f));
    fclose(f);
}

/* `env syncrep status ARGS` (sr_harness_cli): its output and exit status. */
static int
run_status(const char *env, const char *args, char *out, size_t cap)
{
    char a[3100];

    snprintf(a, sizeof(a), "status %s", args);
    return sr_harness_cli(env, a, out, cap);
}

static int
count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) {
        n++;
    }
    return n;
}

static void
test_status_curve_options_env_and_watch(void **state)
{
    sr_harness        h;
    char              spub[41], wpub[41], opub[41], wsec[41], osec[41];
    char              keys[1100], secret[1100], args[3000], env[400], out[65536];
    sr_client        *c = NULL;
    sr_client_options o;
    const double      x0 = 0.0, g = 1.0, bad = 1.0 / 0.0;
    FILE             *f;
    (void)state;

    sr_harness_init(&h, "statuscurve");
    keygen(&h, "coord", spub);
    keygen(&h, "worker", wpub);
    keygen(&h, "operator", opub);
    read_key(&h, "worker.secret", wsec);
    read_key(&h, "operator.secret", osec);
    snprintf(keys, sizeof(keys), "%s/authorized", h.dir);
    f = fopen(keys, "w");
    assert_non_null(f);
    fprintf(f, "%s\n%s\n", wpub, opub);
    fclose(f);
    snprintf(secret, sizeof(secret), "%s/coord.secret", h.dir);
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0", "--init-tokens",
                     "0", "--curve-secret-key-file", secret, "--authorized-keys", keys, NULL);

    memset(&o, 0, sizeof(o));
    o.endpoint = h.endpoint;
    o.task_index = 0;
    o.timeout_ms = 20000;
    o.server_public_key = spub;
    o.public_key = wpub;
    o.secret_key = wsec;
    assert_sr_ok(sr_client_open(&c, &o));
    assert_sr_ok(sr_client_declare(c, "x", SR_FLOAT64, 0, NULL, &x0));
    assert_sr_ok(sr_client_ready(c));
    for (int i = 0; i < 3; i++) {
        assert_sr_ok(sr_client_push(c, "x", &g, sizeof(g)));
        assert_sr_ok(sr_client_step(c));
    }
    /* A rejected push (NaN/Inf) takes the task's place: step 4 is taken. */
    sr_client_push(c, "x", &bad, sizeof(bad));
    assert_int_equal(sr_client_step(c), SR_ENONFINITE);

    /* Keys as options (the public key derived from the secret). */
    snprintf(args, sizeof(args),
             "--connect %s --curve-server-key-file %s/coord.public --curve-secret-key-file "
             "%s/operator.secret",
             h.endpoint, h.dir, h.dir);
    assert_int_equal(run_status("", args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "global step 4 (committed 4)"));
    assert_non_null(strstr(out, "accumulators (step 4): x 0/1"));
    assert_non_null(strstr(out, "accepted 3, stale 0, duplicate 0, rejected 1 (non-finite 1)"));
    if (strstr(out, "workers live 1 of 1") == NULL) {
        fprintf(stderr, "status said:\n%s\n", out);
    }
    assert_non_null(strstr(out, "workers live 1 of 1"));

    /* Keys from the environment, with --json. */
    snprintf(env, sizeof(env), "SYNCREP_SERVER_PUBLIC_KEY='%s' SYNCREP_SECRET_KEY='%s'", spub,
             osec); /* Z85 has no quote */
    snprintf(args, sizeof(args), "--connect %s --json", h.endpoint);
    assert_int_equal(run_status(env, args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "\"global_step\":4,"));
    assert_non_null(strstr(out, "\"stragglers\":4"));

    /* No keys: no answer, and the message says what to give. */
    snprintf(args, sizeof(args), "--connect %s --timeout-ms 500", h.endpoint);
    assert_int_equal(run_status("", args, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "--curve-server-key-file"));
    /* Half the keys: refused before connecting, naming what is missing. */
    snprintf(args, sizeof(args), "--connect %s --curve-secret-key-file %s/operator.secret",
             h.endpoint, h.dir);
    assert_int_equal(run_status("", args, out, sizeof(out)), 2);
    assert_non_null(strstr(out, "the coordinator's public key"));
    snprintf(env, sizeof(env), "SYNCREP_SERVER_PUBLIC_KEY=short SYNCREP_SECRET_KEY='%s'", osec);
    snprintf(args, sizeof(args), "--connect %s", h.endpoint);
    assert_int_equal(run_status(env, args, out, sizeof(out)), 2);
    assert_non_null(strstr(out, "$SYNCREP_SERVER_PUBLIC_KEY is not a 40-character Z85 key"));

    /* --watch to a pipe: one block per interval, --count of them. */
    snprintf(env, sizeof(env), "SYNCREP_SERVER_PUBLIC_KEY='%s' SYNCREP_SECRET_KEY='%s'", spub,
             osec);
    snprintf(args, sizeof(args), "--connect %s --watch --interval 0.1 --count 3", h.endpoint);
    assert_int_equal(run_status(env, args, out, sizeof(out)), 0);
    assert_int_equal(count_of(out, "syncrep status "), 3);
    assert_int_equal(count_of(out, "global step 4 (committed 4)"), 3);
    assert_int_equal(count_of(out, "steps/s (last 0."), 2); /* from the second on: between them */
    assert_null(strstr(out, "\033["));                      /* no terminal codes into a pipe */
    snprintf(args, sizeof(args), "--connect %s --watch --json --interval 0.1 --count 2",
             h.endpoint);
    assert_int_equal(run_status(env, args, out, sizeof(out)), 0);
    assert_int_equal(count_of(out, "{\"incarnation\":"), 2);
    assert_int_equal(count_of(out, "\n"), 2);

    sr_client_close(c);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* Issue 23: a model declared as a whole shows its packs, and with --tensors
 * every tensor by its own name, pack, offset, dtype and shape. */
static void
test_status_names_a_models_tensors(void **state)
{
    sr_harness     h;
    sr_client     *c;
    char           out[16384], args[1200];
    const int64_t  s_w[2] = {3, 4}, s_b[1] = {4}, s_f[1] = {2};
    const float    w[12] = {0}, b[4] = {0}, f[2] = {0};
    sr_tensor_spec m[3] = {
        {"layer1/weight", SR_FLOAT32, 2, s_w, w, 0},
        {"layer1/bias", SR_FLOAT32, 1, s_b, b, 0},
        {"frozen_scale", SR_FLOAT32, 1, s_f, f, SR_DECLARE_NOT_TRAINABLE},
    };
    (void)state;

    sr_harness_init(&h, "stmodel");
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "0.5", NULL);
    c = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare_model(c, 3, m));
    assert_sr_ok(sr_client_ready(c));
    snprintf(args, sizeof(args), "--connect %s", h.endpoint);
    assert_int_equal(run_status("", args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "model: 3 tensors in 2 packs ("));
    assert_non_null(strstr(out, "syncrep:pack/0 float32 trainable"));
    assert_null(strstr(out, "layer1/weight")); /* listed with --tensors only */
    snprintf(args, sizeof(args), "--connect %s --tensors", h.endpoint);
    assert_int_equal(run_status("", args, out, sizeof(out)), 0);
    const char *lw = strstr(out, "layer1/weight"), *lb = strstr(out, "layer1/bias");
    const char *lf = strstr(out, "frozen_scale");
    assert_non_null(lw);
    assert_non_null(lb);
    assert_non_null(lf);
    assert_non_null(strstr(lw, "float32  [3,4]\n"));
    assert_non_null(strstr(lf, "[2] frozen\n"));
    snprintf(args, sizeof(args), "--connect %s --json", h.endpoint);
    assert_int_equal(run_status("", args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "{\"name\":\"layer1/bias\",\"pack\":\"syncrep:pack/"));
    assert_int_equal(count_of(out, "\"pack\":"), 3);
    sr_client_close(c);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_curve_options_env_and_watch),
        cmocka_unit_test(test_status_names_a_models_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
