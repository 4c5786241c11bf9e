/*
 * Resends and duplicates at the protocol level, a raw peer beside real
 * clients: a resent PUSH counted once, a pipelined push's refusal reported
 * once, a parked token request whose peer went away, and a big pull not
 * sent again while it is on its way.  docs/protocol.md, "Resends and
 * deduplication".
 */
#include "sr_test.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "raw_peer.h"
#include "syncrep/syncrep.h"
#include "wire/wire.h"

static void
test_protocol_resent_push_counted_once(void **state)
{
    sr_harness   h;
    sr_client   *chief = proto_setup(&h, "dup", "2");
    raw_peer     r;
    const double g1 = 2.0, g2 = 4.0;
    int64_t      gs;
    (void)state;

    raw_open(&r, h.endpoint, 0x1111);
    raw_hello(&r, 1);
    raw_push(&r, 1, "x", SR_FLOAT64, &g1, sizeof(g1), 0, 1);
    assert_int_equal(raw_push_outcome(&r), SR_PUSH_ACCEPTED);
    /* The same (client, seq) again, as a client resending after a timeout. */
    raw_push(&r, 1, "x", SR_FLOAT64, &g1, sizeof(g1), 0, 1);
    assert_int_equal(raw_push_outcome(&r), SR_PUSH_DUPLICATE);
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 0); /* one of R = 2 so far */
    assert_sr_ok(sr_client_push(chief, "x", &g2, sizeof(g2)));
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 1);
    assert_true(proto_pull_x(chief) == 10.0 - (2.0 + 4.0) / 2);
    raw_close(&r);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* Small pushes of declared variables are pipelined: push returns before the
 * answer, the step (or sr_client_flush) takes it, and a refusal is reported
 * there, once, naming the variable, with nothing applied. */
static void
test_protocol_pipelined_push_refusal_reported_by_flush_and_step(void **state)
{
    sr_harness      h;
    sr_client      *chief = proto_setup(&h, "pipeline", "1");
    const int64_t   bad = 3;
    const double    g = 1.0;
    sr_client_stats s;
    int64_t         gs;
    (void)state;

    assert_sr_ok(sr_client_push(chief, "n", &bad, sizeof(bad))); /* int64: not trainable */
    assert_sr_err(sr_client_flush(chief), SR_EINVAL);
    assert_non_null(strstr(sr_client_error(chief), "push n"));
    assert_sr_ok(sr_client_flush(chief)); /* reported once */

    assert_sr_ok(sr_client_push(chief, "n", &bad, sizeof(bad)));
    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g)));
    assert_sr_err(sr_client_step(chief), SR_EINVAL); /* x's push still counted */
    assert_non_null(strstr(sr_client_error(chief), "push n"));
    assert_int_equal(sr_client_local_step(chief), 0); /* the init token */
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 1);
    assert_true(proto_pull_x(chief) == 9.0);
    assert_sr_ok(sr_client_stats_get(chief, &s));
    assert_int_equal(s.accepted, 1);
    assert_int_equal(s.pushes, 1); /* refusals are not pushes */

    /* Many in flight (computed at local step 0: stale), answered in one step. */
    for (int i = 0; i < 200; i++) {
        assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g)));
    }
    assert_sr_ok(sr_client_step(chief));
    assert_int_equal(sr_client_local_step(chief), 1);
    assert_sr_ok(sr_client_stats_get(chief, &s));
    assert_int_equal(s.accepted, 1);
    assert_int_equal(s.stale, 200);
    assert_true(proto_pull_x(chief) == 9.0);
    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g)));
    assert_sr_ok(sr_client_step(chief));
    assert_sr_ok(sr_client_stats_get(chief, &s));
    assert_int_equal(s.accepted, 2);
    assert_true(proto_pull_x(chief) == 8.0);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

static int
task1_not_waiting(void *arg)
{
    char        out[8192];
    const char *w;
    if (sr_harness_status(arg, out, sizeof(out)) != 0 ||
        (w = strstr(out, "\"task_index\":1,")) == NULL) {
        return 0;
    }
    return strstr(w, "\"waiting_for_token\":false") != NULL;
}

static void *
step_thread(void *arg)
{
    sr_client *c = arg;
    intptr_t   rc = sr_client_step(c);
    return (void *)rc;
}

static void
test_protocol_parked_token_of_vanished_peer_not_lost(void **state)
{
    sr_harness h;
    sr_client *chief = proto_setup(&h, "park", "1");
    raw_peer   r;
    int64_t    gs;
    (void)state;

    /* One init token (R = 1).  The chief takes it. */
    assert_sr_ok(sr_client_step(chief));
    /* A peer asks for a token (none left: it is parked), then vanishes. */
    raw_open(&r, h.endpoint, 0x2222);
    raw_hello(&r, 1);
    raw_send(&r, SR_MSG_TOKEN, 1, 0, 0, NULL, NULL, 0);
    assert_int_equal(raw_recv(&r, 300), -1); /* parked: no answer */
    raw_close(&r);
    /* The coordinator drops the request once the peer is gone: at once when
     * ZeroMQ reports it unreachable, at the latest when it stops pinging. */
    assert_true(sr_test_wait_until(task1_not_waiting, &h, 20000));
    /* The next step's tokens (max(N, R) = 1) must reach the chief, not the
     * vanished peer: the chief pushes, applies step 1, and gets its token. */
    const double g = 1.0;
    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g)));
    pthread_t t;
    void     *ret;
    assert_int_equal(pthread_create(&t, NULL, step_thread, chief), 0);
    pthread_join(t, &ret);
    assert_int_equal((intptr_t)ret, SR_OK);
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 1);
    assert_int_equal(sr_client_local_step(chief), 1);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* Resumes a SIGSTOPped coordinator after `ms` (the fault this test injects). */
typedef struct {
    pid_t pid;
    int   ms;
} resume_later;

static void *
resume_thread(void *arg)
{
    const resume_later *r = arg;
    struct timespec     ts = {r->ms / 1000, (long)(r->ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    kill(r->pid, SIGCONT);
    return NULL;
}

/* A pull whose value is big is not sent again after a second of waiting
 * (a resent PULL is answered again, value and all: a 2 GiB model's pulls
 * went out up to four times): the coordinator stopped for 1.5 s, the
 * 2 MiB pull waits for it and is answered once, no resend. */
static void
test_protocol_big_pull_not_resent_while_on_its_way(void **state)
{
    sr_harness      h;
    sr_client      *c;
    const int64_t   n = 1 << 19; /* 2 MiB of float32 */
    float          *v = malloc((size_t)n * sizeof(float));
    sr_client_stats st;
    pthread_t       t;
    resume_later    rl;
    (void)state;

    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) {
        v[i] = (float)(i % 97);
    }
    sr_harness_init(&h, "bigpull");
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0", NULL);
    c = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare(c, "w", SR_FLOAT32, 1, &n, v));
    assert_sr_ok(sr_client_ready(c));
    memset(v, 0, (size_t)n * sizeof(float));
    rl.pid = h.pid;
    rl.ms = 1500;
    assert_int_equal(kill(h.pid, SIGSTOP), 0);
    assert_int_equal(pthread_create(&t, NULL, resume_thread, &rl), 0);
    assert_sr_ok(sr_client_pull(c, "w", v, (size_t)n * sizeof(float)));
    pthread_join(t, NULL);
    assert_true(v[n - 1] == (float)((n - 1) % 97));
    assert_sr_ok(sr_client_stats_get(c, &st));
    assert_int_equal(st.resends, 0);
    sr_client_close(c);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
    free(v);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol_resent_push_counted_once),
        cmocka_unit_test(test_protocol_pipelined_push_refusal_reported_by_flush_and_step),
        cmocka_unit_test(test_protocol_parked_token_of_vanished_peer_not_lost),
        cmocka_unit_test(test_protocol_big_pull_not_resent_while_on_its_way),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
