/*
 * `syncrep ctl --connect EP [CURVE keys] set-replicas --replicas-to-aggregate R
 * [--total-replicas N] [--min-replicas M]` and `syncrep ctl ... set
 * --learning-rate LR` (issue 26): change a running job at its next step
 * boundary, durably, with no process restarted (docs/operations.md,
 * "Changing a running job"; the CTL message, docs/protocol.md "CTL (12)").
 * Exit codes: 0 the coordinator took the change, 1 it refused or did not
 * answer, 2 a usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "cli/cli.h"
#include "coordinator/auth.h" /* sr__auth_read_key_file */
#include "core/clock.h"
#include "core/error.h"
#include "wire/wire.h"

static const char usage_text[] =
    "usage: syncrep ctl [--connect ENDPOINT] [--timeout-ms MS]\n"
    "                   [--curve-server-key FILE --curve-key PREFIX] COMMAND ...\n"
    "\n"
    "commands:\n"
    "  set-replicas --replicas-to-aggregate R [--total-replicas N] [--min-replicas M]\n"
    "  set-replicas [--total-replicas N] [--min-replicas M]\n"
    "  set --learning-rate LR\n"
    "\n"
    "Changes the job of the coordinator at ENDPOINT (default tcp://127.0.0.1:7070)\n"
    "from its next step boundary: recorded in its store first (a restarted\n"
    "coordinator with the same options keeps it), then answered with the values\n"
    "in force from that step.  With CURVE, --curve-server-key is the coordinator's\n"
    "public key file and PREFIX.public / PREFIX.secret this client's pair\n"
    "(syncrep keygen PREFIX); the key must be in the coordinator's --admin-keys.\n";

typedef struct {
    const char *endpoint;
    long long   timeout_ms;
    const char *server_key_file, *key_prefix;
} ctl_conn;

/* Send the request and print the answer: the exit code. */
static int
ask(const ctl_conn *cc, const sr_wire_ctl_req *q)
{
    void          *ctx = zmq_ctx_new(), *sock = NULL;
    uint8_t        hb[SR_WIRE_HEADER_BYTES], body[SR_WIRE_CTL_REQ_BYTES];
    sr_wire_header h;
    int            zero = 0, rc = 1;
    int64_t        deadline = sr_clock_now_ms() + cc->timeout_ms;

    if (ctx == NULL || (sock = zmq_socket(ctx, ZMQ_DEALER)) == NULL) {
        fprintf(stderr, "syncrep ctl: zmq: %s\n", zmq_strerror(errno));
        goto out;
    }
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero));
    if (cc->server_key_file != NULL) {
        char server[41], pub[41], sec[41], path[4200];
        snprintf(path, sizeof(path), "%s.public", cc->key_prefix);
        if (sr__auth_read_key_file(cc->server_key_file, server) != SR_OK ||
            sr__auth_read_key_file(path, pub) != SR_OK ||
            (snprintf(path, sizeof(path), "%s.secret", cc->key_prefix),
             sr__auth_read_key_file(path, sec)) != SR_OK) {
            fprintf(stderr, "syncrep ctl: %s\n", sr_errdetail());
            goto out;
        }
        if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server, 40) != 0 ||
            zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, pub, 40) != 0 ||
            zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, 40) != 0) {
            fprintf(stderr, "syncrep ctl: CURVE keys: %s\n", zmq_strerror(errno));
            goto out;
        }
        memset(sec, 0, sizeof(sec));
    }
    if (zmq_connect(sock, cc->endpoint) != 0) {
        fprintf(stderr, "syncrep ctl: connect %s: %s\n", cc->endpoint, zmq_strerror(errno));
        goto out;
    }
    memset(&h, 0, sizeof(h));
    h.type = SR_MSG_CTL;
    h.request_id = 1;
    h.task_index = -1;
    sr_wire_header_encode(&h, hb);
    sr_wire_ctl_req_encode(q, body, sizeof(body));
    if (zmq_send(sock, hb, sizeof(hb), ZMQ_SNDMORE) < 0 ||
        zmq_send(sock, body, sizeof(body), 0) < 0) {
        fprintf(stderr, "syncrep ctl: send: %s\n", zmq_strerror(errno));
        goto out;
    }
    for (;;) {
        int64_t        left = deadline - sr_clock_now_ms();
        zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
        zmq_msg_t      m[2];
        int            n = 0, more = 1;
        size_t         sz = sizeof(more);

        if (left <= 0 || zmq_poll(&it, 1, (long)left) <= 0) {
            fprintf(stderr,
                    "syncrep ctl: no answer from %s within %lld ms (under CURVE a key the "
                    "coordinator does not authorize gets none)\n",
                    cc->endpoint, cc->timeout_ms);
            goto out;
        }
        while (more) {
            zmq_msg_t x;
            zmq_msg_init(&x);
            zmq_msg_recv(&x, sock, 0);
            if (n < 2) {
                m[n++] = x;
            } else {
                zmq_msg_close(&x);
            }
            zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz);
        }
        int ok = n >= 1 &&
                 sr_wire_header_decode(zmq_msg_data(&m[0]), zmq_msg_size(&m[0]), &h) == SR_OK &&
                 h.type == (SR_MSG_CTL | SR_WIRE_REPLY) && h.request_id == 1;
        if (ok) {
            int         len = n > 1 ? (int)zmq_msg_size(&m[1]) : 0;
            const char *text = n > 1 ? zmq_msg_data(&m[1]) : "";
            if (h.status == SR_OK) {
                printf("%.*s\n", len, text);
                rc = 0;
            } else {
                fprintf(stderr, "syncrep ctl: refused (%s): %.*s\n", sr_strerror(h.status), len,
                        text);
            }
        }
        for (int i = 0; i < n; i++) {
            zmq_msg_close(&m[i]);
        }
        if (ok) {
            break;
        }
    }
out:
    if (sock != NULL) {
        zmq_close(sock);
    }
    if (ctx != NULL) {
        zmq_ctx_term(ctx);
    }
    return rc;
}

int
sr__cli_ctl(int argc, char **argv)
{
    ctl_conn        cc = {"tcp://127.0.0.1:7070", 5000, NULL, NULL};
    sr_wire_ctl_req q;
    long long       v;
    int             i = 1;

    memset(&q, 0, sizeof(q));
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            return sr_args_usage_error("ctl", "%s needs a value", a);
        }
        const char *val = argv[++i];
        if (strcmp(a, "--connect") == 0) {
            cc.endpoint = val;
        } else if (strcmp(a, "--timeout-ms") == 0) {
            if (sr_args_parse_i64(val, 1, 3600000, &cc.timeout_ms) != 0) {
                return sr_args_usage_error("ctl", "bad value '%s' for %s", val, a);
            }
        } else if (strcmp(a, "--curve-server-key") == 0) {
            cc.server_key_file = val;
        } else if (strcmp(a, "--curve-key") == 0) {
            cc.key_prefix = val;
        } else {
            return sr_args_usage_error("ctl", "unknown option '%s'", a);
        }
    }
    if ((cc.server_key_file == NULL) != (cc.key_prefix == NULL)) {
        return sr_args_usage_error("ctl", "--curve-server-key and --curve-key go together");
    }
    if (i >= argc) {
        return sr_args_usage_error("ctl", "a command is required (set-replicas, set)");
    }
    const char *cmd = argv[i++];
    if (strcmp(cmd, "set-replicas") == 0) {
        q.op = SR_WIRE_CTL_SET_REPLICAS;
    } else if (strcmp(cmd, "set") == 0) {
        q.op = SR_WIRE_CTL_SET;
    } else {
        return sr_args_usage_error("ctl", "unknown command '%s' (set-replicas, set)", cmd);
    }
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            return sr_args_usage_error("ctl", "%s needs a value", a);
        }
        const char *val = argv[++i];
        int         bad = 0;
        if (q.op == SR_WIRE_CTL_SET_REPLICAS && strcmp(a, "--replicas-to-aggregate") == 0) {
            bad = sr_args_parse_i64(val, 1, 1 << 20, &v);
            q.replicas_to_aggregate = (int32_t)v;
            q.fields |= SR_WIRE_CTL_R;
        } else if (q.op == SR_WIRE_CTL_SET_REPLICAS && strcmp(a, "--total-replicas") == 0) {
            bad = sr_args_parse_i64(val, 1, 1 << 20, &v);
            q.total_replicas = (int32_t)v;
            q.fields |= SR_WIRE_CTL_N;
        } else if (q.op == SR_WIRE_CTL_SET_REPLICAS && strcmp(a, "--min-replicas") == 0) {
            bad = sr_args_parse_i64(val, 1, 1 << 20, &v);
            q.min_replicas = (int32_t)v;
            q.fields |= SR_WIRE_CTL_M;
        } else if (q.op == SR_WIRE_CTL_SET && strcmp(a, "--learning-rate") == 0) {
            bad = sr_args_parse_f64(val, &q.learning_rate) || !(q.learning_rate > 0);
            q.fields |= SR_WIRE_CTL_LR;
        } else {
            return sr_args_usage_error("ctl", "unknown option '%s' for %s", a, cmd);
        }
        if (bad) {
            return sr_args_usage_error("ctl", "bad value '%s' for %s", val, a);
        }
    }
    if (q.fields == 0) {
        return sr_args_usage_error("ctl", "%s: nothing to change (%s)", cmd,
                                   q.op == SR_WIRE_CTL_SET ? "--learning-rate LR"
                                                           : "--replicas-to-aggregate R, "
                                                             "--total-replicas N, "
                                                             "--min-replicas M");
    }
    return ask(&cc, &q);
}
