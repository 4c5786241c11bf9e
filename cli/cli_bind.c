/*
 * cli/cli_bind.c: `syncrep coordinator --bind ENDPOINT`, checked in words
 * before anything is opened (issue 22).
 *
 * ZeroMQ's own refusals name errno only ("No such device" for
 * tcp://localhost:7070, "Invalid argument" for a bare host:port or a
 * missing port), and it gives them after the coordinator has created its
 * store.  So the CLI checks the endpoint first: its form (transport, address,
 * port), then, for tcp://, a trial bind of sockets of its own, closed at
 * once (trial_bind: none of them listens on the port), whose errno it turns
 * into a sentence.  A refused --bind then exits 2
 * with no store created.  ipc:// is only checked for its form: a trial bind
 * of a path another coordinator listens on would take the path over
 * (coordinator/exclusive.c refuses that case before the store is opened).
 * A port taken between this check and the coordinator's bind is the one
 * race left: ZeroMQ then refuses it, and a store the start created stays
 * empty (docs/operations.md).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "cli/cli.h"

/* The host part of tcp://HOST:PORT into host (cap bytes), the port into
 * port; -1 with why filled when the form is wrong. */
static int
split_tcp(const char *ep, const char *rest, char *host, size_t hcap, char *port, size_t pcap,
          char *why, size_t cap)
{
    const char *colon = strrchr(rest, ':');
    const char *close = strrchr(rest, ']');

    if (colon == NULL || (close != NULL && colon < close)) {
        snprintf(why, cap,
                 "'%s' has no port: a tcp endpoint is tcp://ADDRESS:PORT "
                 "(e.g. tcp://127.0.0.1:7070)",
                 ep);
        return -1;
    }
    size_t hl = (size_t)(colon - rest), pl = strlen(colon + 1);
    if (hl == 0) {
        snprintf(why, cap,
                 "'%s' has no address before the port: tcp://127.0.0.1:PORT for this "
                 "machine only, tcp://0.0.0.0:PORT (or tcp://*:PORT) for every interface",
                 ep);
        return -1;
    }
    if (pl == 0) {
        snprintf(why, cap, "'%s' has no port after the ':': tcp://ADDRESS:PORT", ep);
        return -1;
    }
    if (hl >= hcap || pl >= pcap) {
        snprintf(why, cap, "'%s' is too long", ep);
        return -1;
    }
    memcpy(host, rest, hl);
    host[hl] = '\0';
    memcpy(port, colon + 1, pl + 1);
    if (strcmp(port, "*") != 0) {
        char         *end;
        unsigned long p = strtoul(port, &end, 10);
        if (*end != '\0' || port[0] < '0' || port[0] > '9' || p > 65535) {
            snprintf(why, cap, "the port '%s' of '%s' is not a number 0..65535 (0 or *: any)", port,
                     ep);
            return -1;
        }
    }
    return 0;
}

/* Bind (without listening) a TCP socket to the numeric address of a
 * ZeroMQ last endpoint ("tcp://A:P", A possibly [v6]) and `port`: errno of
 * a refusal (EADDRINUSE, EACCES), 0 when it bound.  Nothing can connect to
 * it. */
static int
raw_bind(const char *last, const char *port)
{
    char                    addr[INET6_ADDRSTRLEN + 2];
    const char             *a = last + 6, *colon = strrchr(last, ':');
    struct sockaddr_storage ss;
    socklen_t               len;
    int                     fd, one = 1, e = 0;
    unsigned short          p = (unsigned short)strtoul(port, NULL, 10);

    memset(&ss, 0, sizeof(ss));
    if (colon == NULL || colon <= a || (size_t)(colon - a) >= sizeof(addr)) {
        return 0; /* not understood: leave it to the coordinator */
    }
    snprintf(addr, sizeof(addr), "%.*s", (int)(colon - a), a);
    if (addr[0] == '[') {
        memmove(addr, addr + 1, strlen(addr));
        addr[strcspn(addr, "]")] = '\0';
    }
    struct sockaddr_in  *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(p);
        len = sizeof(*v4);
    } else if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(p);
        len = sizeof(*v6);
    } else {
        return 0;
    }
    if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        return 0;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)); /* as ZeroMQ's listener */
    if (bind(fd, (struct sockaddr *)&ss, len) != 0) {
        e = errno;
    }
    close(fd);
    return e;
}

/* The errno of a refusal of ep, 0 when it would bind.  ZeroMQ resolves the
 * host (an address, '*' or an interface name) with a bind of its own to an
 * ephemeral port; the port itself is tried with a socket that is bound but
 * never listens.  A trial ZeroMQ listener on the real port would take the
 * handshakes of workers that connect meanwhile, with no CURVE: libzmq (4.3)
 * never connects again after such a mechanism mismatch, so a worker started
 * with its coordinator waited for ever (about one start in 80 of the net
 * tests' on a loaded machine). */
static int
trial_bind(const char *host, const char *port)
{
    void  *ctx = zmq_ctx_new(), *s = ctx ? zmq_socket(ctx, ZMQ_ROUTER) : NULL;
    int    zero = 0, e = 0;
    char   any[300], last[300] = "";
    size_t n = sizeof(last);

    if (s != NULL) {
        zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
        snprintf(any, sizeof(any), "tcp://%s:*", host);
        if (zmq_bind(s, any) != 0) {
            e = errno;
        } else if (zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, last, &n) != 0) {
            last[0] = '\0';
        }
        zmq_close(s);
    } /* else cannot try: leave it to the coordinator */
    if (ctx != NULL) {
        zmq_ctx_term(ctx);
    }
    if (e == 0 && strncmp(last, "tcp://", 6) == 0 && strcmp(port, "*") != 0 &&
        strcmp(port, "0") != 0) {
        e = raw_bind(last, port);
    }
    return e;
}

/* The sentence for a trial bind's errno e. */
static void
explain_errno(const char *ep, const char *host, const char *port, int e, char *why, size_t cap)
{
    switch (e) {
    case ENODEV:
        snprintf(why, cap,
                 "--bind %s: '%s' is neither an IP address of this machine, '*', nor "
                 "a network interface name; a bind takes an address, not a host name "
                 "(tcp://127.0.0.1:%s for this machine only, tcp://0.0.0.0:%s for every "
                 "interface)",
                 ep, host, port, port);
        break;
    case EADDRNOTAVAIL:
        snprintf(why, cap,
                 "--bind %s: %s is not an address of this machine (tcp://0.0.0.0:%s "
                 "binds every interface)",
                 ep, host, port);
        break;
    case EADDRINUSE:
        snprintf(why, cap, "--bind %s: the port is in use by another process", ep);
        break;
    case EACCES:
        snprintf(why, cap,
                 "--bind %s: port %s needs privileges this process lacks (ports below "
                 "1024); use a port above 1023",
                 ep, port);
        break;
    default:
        snprintf(why, cap, "--bind %s: %s", ep, zmq_strerror(e));
        break;
    }
}

int
sr__cli_check_bind(const char *ep, char *why, size_t cap)
{
    const char *sep;
    char        host[256], port[16];

    if (ep == NULL) {
        return 0; /* the default, tcp://127.0.0.1:7070 */
    }
    if ((sep = strstr(ep, "://")) == NULL) {
        snprintf(why, cap,
                 "'%s' is not an endpoint: --bind takes tcp://ADDRESS:PORT (e.g. "
                 "tcp://127.0.0.1:7070; tcp://0.0.0.0:7070 for every interface) or ipc://PATH",
                 ep);
        return -1;
    }
    if (strncmp(ep, "ipc://", 6) == 0 || strncmp(ep, "inproc://", 9) == 0) {
        if (sep[3] == '\0') {
            snprintf(why, cap, "'%s' names no path: ipc://PATH", ep);
            return -1;
        }
        return 0;
    }
    if (strncmp(ep, "tcp://", 6) != 0) {
        snprintf(why, cap, "'%s': unknown transport '%.*s': --bind takes tcp:// or ipc://", ep,
                 (int)(sep - ep), ep);
        return -1;
    }
    if (split_tcp(ep, ep + 6, host, sizeof(host), port, sizeof(port), why, cap) != 0) {
        return -1;
    }
    int e = trial_bind(host, port);
    if (e != 0) {
        explain_errno(ep, host, port, e, why, cap);
        return -1;
    }
    return 0;
}
