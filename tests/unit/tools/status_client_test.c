/* tools/status_client.c against a fake coordinator (a ROUTER in a thread of
 * the test): the answer to this request, late answers skipped, a refusal
 * passed on, a malformed reply and silence reported. */
#include "sr_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "tools/status_client.h"
#include "wire/wire.h"

typedef struct {
    void *ctx;
    char  endpoint[600];
    int   nreq; /* requests to answer, each as script[i] says */
} fake;

enum { ANSWER_LATE_THEN_OK = 0, ANSWER_REFUSED = 1, ANSWER_NO_BODY = 2 };

/* Reply to the request `h` from `id`: header (request id + delta, status), then
 * the body unless NULL. */
static void
reply(void *sock, zmq_msg_t *id, const sr_wire_header *req, int64_t delta, int status,
      const char *body)
{
    sr_wire_header h = *req;
    uint8_t        hb[SR_WIRE_HEADER_BYTES];
    zmq_msg_t      copy;

    h.type = (uint8_t)(req->type | SR_WIRE_REPLY);
    h.request_id = req->request_id + (uint64_t)delta;
    h.status = status;
    sr_wire_header_encode(&h, hb);
    zmq_msg_init(&copy);
    zmq_msg_copy(&copy, id);
    zmq_msg_send(&copy, sock, ZMQ_SNDMORE);
    zmq_send(sock, hb, sizeof(hb), body != NULL ? ZMQ_SNDMORE : 0);
    if (body != NULL) {
        zmq_send(sock, body, strlen(body), 0);
    }
}

static void *
fake_loop(void *arg)
{
    fake *f = arg;
    void *sock = zmq_socket(f->ctx, ZMQ_ROUTER);
    int   zero = 0;

    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_bind(sock, f->endpoint);
    for (int i = 0; i < f->nreq; i++) {
        zmq_msg_t      id;
        uint8_t        hb[SR_WIRE_HEADER_BYTES + 8];
        sr_wire_header h;
        zmq_msg_init(&id);
        zmq_msg_recv(&id, sock, 0);
        int n = zmq_recv(sock, hb, sizeof(hb), 0);
        if (n < 0 || sr_wire_header_decode(hb, (size_t)n, &h) != SR_OK) {
            break;
        }
        switch (i) {
        case ANSWER_LATE_THEN_OK:
            reply(sock, &id, &h, -1, SR_OK, "{\"late\":1}");
            reply(sock, &id, &h, 0, SR_OK, "{\"global_step\":7}");
            break;
        case ANSWER_REFUSED:
            reply(sock, &id, &h, 0, SR_ENOTREADY, "not yet");
            break;
        default:
            reply(sock, &id, &h, 0, SR_OK, NULL);
            break;
        }
        zmq_msg_close(&id);
    }
    zmq_close(sock);
    return NULL;
}

static void
test_status_client_answers_refusals_and_failures(void **state)
{
    char             *dir = sr_test_mkdtemp("status");
    fake              f = {.nreq = 3};
    pthread_t         t;
    sr_status_client *c = NULL;
    char             *text = NULL;
    size_t            len = 0;
    int               status = -1;
    (void)state;

    assert_non_null(dir);
    f.ctx = zmq_ctx_new();
    sr_test_ipc_endpoint(dir, "coord.sock", f.endpoint, sizeof(f.endpoint));
    assert_int_equal(pthread_create(&t, NULL, fake_loop, &f), 0);
    assert_sr_ok(sr_status_client_open(&c, f.endpoint));

    assert_sr_ok(sr_status_client_ask(c, 10000, &status, &text, &len));
    assert_int_equal(status, SR_OK);
    assert_string_equal(text, "{\"global_step\":7}"); /* not the late answer */
    assert_int_equal(len, strlen(text));
    free(text);

    assert_sr_ok(sr_status_client_ask(c, 10000, &status, &text, &len));
    assert_int_equal(status, SR_ENOTREADY);
    assert_string_equal(text, "not yet");
    free(text);

    text = NULL;
    assert_sr_err(sr_status_client_ask(c, 10000, &status, &text, &len), SR_EPROTO);
    assert_null(text);
    pthread_join(t, NULL);

    /* Nobody answers any more. */
    assert_sr_err(sr_status_client_ask(c, 50, &status, &text, &len), SR_ETIMEDOUT);
    assert_null(text);
    sr_status_client_close(c);
    zmq_ctx_term(f.ctx);

    assert_sr_err(sr_status_client_open(&c, "nope://x"), SR_EMSG);
    sr_status_client_close(NULL);
    sr_test_rmdir_rf(dir);
    free(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_client_answers_refusals_and_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
