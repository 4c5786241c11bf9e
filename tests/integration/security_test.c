/*
 * CURVE: `syncrep keygen` writes usable key pairs; with CURVE on, a client
 * with a listed key trains, while a plaintext client, a client with an
 * unlisted key and a client with a wrong server key are all refused, each
 * refusal logged once (rate-limited) and none with an effect on the model;
 * a client refused once connects again (libzmq alone never would) and is
 * admitted when a coordinator that lists its key comes up.
 */
#include "sr_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "harness.h"
#include "syncrep/syncrep.h"

typedef struct {
    char pub[41];
    char sec[41];
} keypair;

static void
keygen(sr_harness *h, const char *name, keypair *k)
{
    char        cmd[1200], path[1100];
    FILE       *f;
    struct stat sb;

    snprintf(cmd, sizeof(cmd), "%s keygen %s/%s > /dev/null", sr_test_syncrep_bin(), h->dir, name);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/%s.secret", h->dir, name);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(k->sec, sizeof(k->sec), f));
    fclose(f);
    snprintf(path, sizeof(path), "%s/%s.public", h->dir, name);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(k->pub, sizeof(k->pub), f));
    fclose(f);
    assert_int_equal(strlen(k->pub), 40);
    assert_int_equal(strlen(k->sec), 40);
    /* keygen refuses to overwrite a key */
    assert_int_not_equal(system(cmd), 0);
}

static int
open_client(sr_harness *h, int task, const char *server_pub, const keypair *k, int timeout_ms,
            sr_client **out)
{
    sr_client_options o;
    memset(&o, 0, sizeof(o));
    o.endpoint = h->endpoint;
    o.task_index = task;
    o.timeout_ms = timeout_ms;
    if (k != NULL) {
        o.server_public_key = server_pub;
        o.public_key = k->pub;
        o.secret_key = k->sec;
    }
    return sr_client_open(out, &o);
}

static void
test_security_curve_admits_listed_refuses_others(void **state)
{
    sr_harness   h;
    keypair      server, client, intruder, fake_server;
    sr_client   *c = NULL, *bad = NULL;
    char         keys[1100], secret[1100];
    const double x0 = 5.0, g = 1.0;
    double       x;
    FILE        *f;
    (void)state;

    sr_harness_init(&h, "curve");
    keygen(&h, "server", &server);
    keygen(&h, "client", &client);
    keygen(&h, "intruder", &intruder);
    keygen(&h, "fake", &fake_server);
    snprintf(keys, sizeof(keys), "%s/authorized", h.dir);
    f = fopen(keys, "w");
    fprintf(f, "# the one training client\n%s\n", client.pub);
    fclose(f);
    snprintf(secret, sizeof(secret), "%s/server.secret", h.dir);
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0",
                     "--curve-secret-key-file", secret, "--authorized-keys", keys, NULL);

    assert_sr_ok(open_client(&h, 0, server.pub, &client, 20000, &c));
    assert_sr_ok(sr_client_declare(c, "x", SR_FLOAT64, 0, NULL, &x0));
    assert_sr_ok(sr_client_ready(c));
    assert_sr_ok(sr_client_push(c, "x", &g, sizeof(g)));

    /* Plaintext, an unlisted key, a wrong server key: no answer at all. */
    assert_sr_err(open_client(&h, 1, NULL, NULL, 1500, &bad), SR_ETIMEDOUT);
    assert_sr_err(open_client(&h, 1, server.pub, &intruder, 1500, &bad), SR_ETIMEDOUT);
    assert_sr_err(open_client(&h, 1, fake_server.pub, &client, 1500, &bad), SR_ETIMEDOUT);
    /* Malformed keys are refused by the client before any connection. */
    keypair shortk = client;
    shortk.pub[10] = '\0';
    assert_sr_err(open_client(&h, 1, server.pub, &shortk, 1500, &bad), SR_EINVAL);

    /* An authorised key is not a trusted one: a task index outside the job
     * (N = 1) is refused like any other client's, and changes nothing. */
    assert_sr_err(open_client(&h, 1, server.pub, &client, 5000, &bad), SR_EINVAL);
    assert_sr_err(open_client(&h, 7, server.pub, &client, 5000, &bad), SR_EINVAL);
    for (int round = 0; round < 2; round++) { /* the init token's round is stale */
        assert_sr_ok(sr_client_step(c));
        assert_sr_ok(sr_client_push(c, "x", &g, sizeof(g)));
    }

    /* The model saw only the listed client: two steps of x -= 1. */
    assert_sr_ok(sr_client_pull(c, "x", &x, sizeof(x)));
    assert_true(x == 3.0);
    sr_client_close(c);
    assert_int_equal(sr_harness_stop(&h), 0);

    /* Each refused peer is logged once, however often it retried. */
    assert_int_equal(sr_harness_log_count(&h, intruder.pub), 1);
    assert_true(sr_harness_log_count(&h, "COORD-AUTH-REFUSED") >= 2);
    assert_true(sr_harness_log_count(&h, "COORD-REFUSED") >= 1);
    assert_int_equal(sr_harness_log_count(&h, "curve=on"), 1);
    sr_harness_fini(&h);
}

static void
test_security_bad_key_files_refuse_to_start(void **state)
{
    sr_harness h;
    char       keys[1100], cmd[4000];
    FILE      *f;
    (void)state;

    sr_harness_init(&h, "curvebad");
    snprintf(keys, sizeof(keys), "%s/keys", h.dir);
    f = fopen(keys, "w");
    fprintf(f, "not-a-key\n");
    fclose(f);
    snprintf(cmd, sizeof(cmd),
             "%s coordinator --store %s --bind %s --replicas-to-aggregate 1 --learning-rate 1 "
             "--curve-secret-key-file %s --authorized-keys %s 2>/dev/null",
             sr_test_syncrep_bin(), h.store, h.endpoint, keys, keys);
    assert_int_equal(WEXITSTATUS(system(cmd)), 1);
    /* One of the pair alone is a usage error. */
    snprintf(cmd, sizeof(cmd),
             "%s coordinator --store %s --replicas-to-aggregate 1 --learning-rate 1 "
             "--authorized-keys %s 2>/dev/null",
             sr_test_syncrep_bin(), h.store, keys);
    assert_int_equal(WEXITSTATUS(system(cmd)), 2);
    sr_harness_fini(&h);
}

/* The client side's log lines of id WORKER-HANDSHAKE (sr_log_set_sink). */
static int handshake_lines;

static void
count_handshake(void *arg, int level, const char *id, const char *msg)
{
    (void)arg;
    (void)level;
    if (strcmp(id, "WORKER-HANDSHAKE") == 0 && strstr(msg, "refused by the coordinator") &&
        strstr(msg, "--authorized-keys")) {
        handshake_lines++;
    }
}

typedef struct {
    sr_harness *h;
    const char *server_pub;
    keypair    *k;
    sr_client  *c;
    int         rc;
} opener;

static void *
open_thread(void *arg)
{
    opener *o = arg;
    o->rc = open_client(o->h, 0, o->server_pub, o->k, 20000, &o->c);
    return NULL;
}

static void
write_keys(const char *path, const char *key)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", key);
    fclose(f);
}

/* libzmq (4.3) ends a connection whose handshake the server refused and
 * never makes it again: a worker that started while its key was not yet
 * listed (or hit any handshake error) waited for ever.  The client connects
 * again, says why it was refused, and is admitted by the next coordinator
 * on the endpoint that lists its key. */
static void
test_security_refused_client_connects_again(void **state)
{
    sr_harness h;
    keypair    server, client, other;
    char       keys[1100], secret[1100];
    pthread_t  t;
    (void)state;

    sr_harness_init(&h, "curveagain");
    keygen(&h, "server", &server);
    keygen(&h, "client", &client);
    keygen(&h, "other", &other);
    snprintf(keys, sizeof(keys), "%s/authorized", h.dir);
    snprintf(secret, sizeof(secret), "%s/server.secret", h.dir);
    write_keys(keys, other.pub);
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0",
                     "--curve-secret-key-file", secret, "--authorized-keys", keys, NULL);
    sr_log_set_sink(count_handshake, NULL);
    opener o = {&h, server.pub, &client, NULL, -1};
    assert_int_equal(pthread_create(&t, NULL, open_thread, &o), 0);
    for (int i = 0; i < 100 && sr_harness_log_count(&h, client.pub) == 0; i++) {
        usleep(50 * 1000);
    }
    assert_int_equal(sr_harness_log_count(&h, client.pub), 1); /* refused */
    usleep(300 * 1000);
    assert_int_equal(sr_harness_stop(&h), 0);
    write_keys(keys, client.pub);
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0",
                     "--curve-secret-key-file", secret, "--authorized-keys", keys, NULL);
    assert_int_equal(pthread_join(t, NULL), 0);
    sr_log_set_sink(NULL, NULL);
    assert_sr_ok(o.rc); /* HELLO answered by the second coordinator */
    assert_true(handshake_lines >= 1);
    const double x0 = 2.0;
    assert_sr_ok(sr_client_declare(o.c, "x", SR_FLOAT64, 0, NULL, &x0));
    assert_sr_ok(sr_client_ready(o.c));
    sr_client_close(o.c);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_security_curve_admits_listed_refuses_others),
        cmocka_unit_test(test_security_bad_key_files_refuse_to_start),
        cmocka_unit_test(test_security_refused_client_connects_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
