/*
 * worker/push.c on the fake peer: pipelined pushes' answers are matched to
 * their requests by request id, a duplicate answer is counted once, and a
 * chained push_step leaves in one message with its TOKEN request.
 */
#include <stdlib.h>
#include <string.h>

#include "fake_peer.h"
#include "sr_test.h"

static const char *const names[3] = {"a", "b", "c"};

/* A chief with a, b and c (4 floats each), ready. */
static sr_client *
open_abc(fake *f)
{
    sr_client    *c;
    const int64_t shape[1] = {4};
    const float   init[4] = {0};

    assert_sr_ok(fake_open(f, 0, &c));
    for (int i = 0; i < 3; i++) {
        assert_sr_ok(sr_client_declare(c, names[i], SR_FLOAT32, 1, shape, init));
    }
    assert_sr_ok(sr_client_ready(c));
    return c;
}

/* Hold the pushes' answers; when the TOKEN comes, answer them last first:
 * c refused, b a duplicate, a accepted; then the token. */
typedef struct {
    fake_req push[3];
    int      n;
} held_pushes;

static void
answer_reversed(fake *f, const fake_req *r)
{
    held_pushes *h = f->user;
    uint8_t      b[8];

    if (r->h.type == SR_MSG_PUSH) {
        h->push[h->n++] = *r;
        return;
    }
    if (r->h.type == SR_MSG_TOKEN) {
        for (int i = h->n - 1; i >= 0; i--) {
            const fake_req *p = &h->push[i];
            if (i == 2) {
                fake_frame t = {(uint8_t *)"wrong dtype", 11};
                fake_reply(f, p, 0, SR_EINVAL, 0, &t, 1);
                continue;
            }
            sr_wire_push_rep rep = {.outcome = i == 1 ? SR_PUSH_DUPLICATE : SR_PUSH_ACCEPTED};
            fake_frame       fr = {b, sr_wire_push_rep_encode(&rep, b, sizeof(b))};
            fake_reply(f, p, 0, 0, 0, &fr, 1);
        }
    }
    fake_answer(f, r);
}

static void
test_push_pipelined_answers_are_matched_to_their_requests(void **state)
{
    (void)state;
    fake            f;
    held_pushes     h = {0};
    sr_client_stats st;
    const float     g[4] = {1, 2, 3, 4};

    fake_init(&f);
    sr_client *c = open_abc(&f);
    f.handler = answer_reversed;
    f.user = &h;
    for (int i = 0; i < 3; i++) {
        assert_sr_ok(sr_client_push(c, names[i], g, sizeof(g))); /* none waits */
    }
    assert_int_equal(h.n, 3);
    assert_sr_err(sr_client_step(c), SR_EINVAL);
    assert_non_null(strstr(sr_client_error(c), "push c: wrong dtype"));
    assert_sr_ok(sr_client_stats_get(c, &st));
    assert_int_equal(st.pushes, 2);
    assert_int_equal(st.accepted, 1);
    assert_int_equal(st.duplicate, 1);
    assert_int_equal(st.resends, 0);
    assert_int_equal(sr_client_local_step(c), 4);
    sr_client_close(c);
    fake_free(&f);
}

static void
answer_twice(fake *f, const fake_req *r)
{
    if (r->h.type == SR_MSG_PUSH) {
        fake_answer(f, r);
    }
    fake_answer(f, r);
}

static void
test_push_duplicate_answer_is_counted_once(void **state)
{
    (void)state;
    fake            f;
    sr_client_stats st;
    const float     g[4] = {1, 2, 3, 4};

    fake_init(&f);
    sr_client *c = open_abc(&f);
    f.handler = answer_twice;
    assert_sr_ok(sr_client_push(c, "a", g, sizeof(g)));
    assert_sr_ok(sr_client_push(c, "b", g, sizeof(g)));
    assert_sr_ok(sr_client_step(c));
    assert_sr_ok(sr_client_stats_get(c, &st));
    assert_int_equal(st.pushes, 2);
    assert_int_equal(st.accepted, 2);
    sr_client_close(c);
    fake_free(&f);
}

static void
test_push_step_chains_push_and_token_in_one_message(void **state)
{
    (void)state;
    fake        f;
    const float g[4] = {1, 2, 3, 4};

    fake_init(&f);
    f.hello_flags = SR_WIRE_F_CHAIN;
    sr_client *c = open_abc(&f);
    int        first = f.nlog;
    assert_sr_ok(sr_client_push_step(c, "a", g, sizeof(g)));
    assert_int_equal(f.nlog - first, 2);
    assert_int_equal(f.log[first].h.type, SR_MSG_PUSH);
    assert_int_equal(f.log[first].h.flags, SR_WIRE_F_CHAIN);
    assert_int_equal(f.log[first].h.seq, 1);
    assert_int_equal(f.log[first + 1].h.type, SR_MSG_TOKEN);
    assert_int_equal(f.log[first + 1].msg, f.log[first].msg);
    assert_int_equal(f.log[first].body[1].len, sizeof(g));
    assert_memory_equal(f.log[first].body[1].data, g, sizeof(g));
    sr_client_close(c);
    fake_free(&f);
}

/* Issue 27: a sparse push's answer chained before another reply in one
 * message, as the coordinator sends held answers (docs/protocol.md,
 * Chains): the sparse answer's header flagged CHAIN, its push_rep, then a
 * reply to a request the client no longer waits for.  The client read the
 * rest of the message as the sparse answer's body and failed "push a:
 * malformed reply" (found by the network chaos soak). */
static uint8_t *
copy(const void *p, size_t n)
{
    uint8_t *d = malloc(n);
    assert_non_null(d);
    memcpy(d, p, n);
    return d;
}

static void
answer_sparse_chained(fake *f, const fake_req *r)
{
    if (r->h.type != SR_MSG_PUSH_SPARSE) {
        fake_answer(f, r);
        return;
    }
    fake_out        *o = calloc(1, sizeof(*o));
    sr_wire_header   h = r->h;
    sr_wire_push_rep rep = {.outcome = SR_PUSH_ACCEPTED};
    uint8_t          hb[SR_WIRE_HEADER_BYTES], b[8];
    size_t           nb = sr_wire_push_rep_encode(&rep, b, sizeof(b));

    assert_non_null(o);
    h.type = (uint8_t)(SR_MSG_PUSH_SPARSE | SR_WIRE_REPLY);
    h.flags = SR_WIRE_F_CHAIN;
    h.incarnation = f->incarnation;
    h.status = 0;
    h.seq = 0;
    sr_wire_header_encode(&h, hb);
    o->frames[o->nframes++] = (fake_frame){copy(hb, sizeof(hb)), sizeof(hb)};
    o->frames[o->nframes++] = (fake_frame){copy(b, nb), nb};
    h.type = (uint8_t)(SR_MSG_PUSH | SR_WIRE_REPLY);
    h.flags = 0;
    h.request_id = 999999; /* nothing in flight: dropped */
    sr_wire_header_encode(&h, hb);
    o->frames[o->nframes++] = (fake_frame){copy(hb, sizeof(hb)), sizeof(hb)};
    o->frames[o->nframes++] = (fake_frame){copy(b, nb), nb};
    o->due_ms = f->now_ms;
    o->next = f->out;
    f->out = o;
}

static void
test_push_sparse_answer_in_a_chain(void **state)
{
    (void)state;
    fake            f;
    sr_client_stats st;
    const int64_t   idx[1] = {2};
    const float     row[1] = {1};

    fake_init(&f);
    f.hello_flags = SR_WIRE_F_CHAIN;
    sr_client *c = open_abc(&f);
    f.handler = answer_sparse_chained;
    assert_sr_ok(sr_client_push_sparse(c, "a", 1, idx, row, sizeof(row)));
    assert_sr_ok(sr_client_stats_get(c, &st));
    assert_int_equal(st.accepted, 1);
    assert_sr_ok(sr_client_step(c)); /* the rest of the chain read and dropped */
    sr_client_close(c);
    fake_free(&f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_pipelined_answers_are_matched_to_their_requests),
        cmocka_unit_test(test_push_duplicate_answer_is_counted_once),
        cmocka_unit_test(test_push_step_chains_push_and_token_in_one_message),
        cmocka_unit_test(test_push_sparse_answer_in_a_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
