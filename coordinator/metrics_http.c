/*
 * The metrics endpoint: libmicrohttpd answers GET /metrics on a thread of
 * its own with a copy of the text the coordinator's loop last published
 * (sr_metrics_http_publish, under `mu`).  The loop never waits for HTTP:
 * publishing swaps in a new copy, and a scrape holds the mutex only while
 * it copies the text into its response.  The listening socket is bound
 * here, before libmicrohttpd starts, so a refused address (in use, not
 * local, not ADDR:PORT) is a clear start-up error.  docs/metrics.md.
 */
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "coordinator/metrics.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct sr_metrics_http {
    struct MHD_Daemon *d;
    int                fd; /* the listening socket (libmicrohttpd closes it at stop) */
    char               address[300];
    pthread_mutex_t    mu;
    char              *text; /* under mu: the latest published text, or NULL */
    size_t             len;
    _Atomic uint64_t   scrapes;
};

/* Split "ADDR:PORT" / "[ADDR]:PORT" into host and port. */
static sr_err
split_addr(const char *s, char *host, size_t hcap, char *port, size_t pcap)
{
    const char *colon, *h = s;
    size_t      hl;

    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL || close[1] != ':') {
            return sr_fail(SR_EINVAL, "--metrics-bind '%s': expected [ADDR]:PORT", s);
        }
        h = s + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL || colon == s || strchr(s, ':') != colon) {
            return sr_fail(SR_EINVAL,
                           "--metrics-bind '%s': expected ADDR:PORT (e.g. 127.0.0.1:9464; an "
                           "IPv6 address in brackets: [::1]:9464)",
                           s);
        }
        hl = (size_t)(colon - s);
    }
    if (hl == 0 || hl >= hcap) {
        return sr_fail(SR_EINVAL, "--metrics-bind '%s': missing or too long address", s);
    }
    const char *p = colon + 1;
    size_t      pl = strlen(p);
    char       *end = NULL;
    long        v;
    errno = 0;
    v = pl > 0 && pl < pcap ? strtol(p, &end, 10) : -1;
    if (pl == 0 || pl >= pcap || errno != 0 || end == NULL || *end != '\0' || v < 0 || v > 65535 ||
        p[0] == '-' || p[0] == '+') {
        return sr_fail(SR_EINVAL, "--metrics-bind '%s': port '%s' is not a number 0..65535", s, p);
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    memcpy(port, p, pl + 1);
    return SR_OK;
}

/* A listening TCP socket on addr_port (the first address it resolves to
 * that binds); its real address in m->address. */
static sr_err
bind_listener(sr_metrics_http *m, const char *addr_port)
{
    char                    host[256], port[16];
    struct addrinfo         hints, *res = NULL;
    int                     gai, err = 0;
    sr_err                  rc;
    struct sockaddr_storage ss;
    socklen_t               sl = sizeof(ss);

    if ((rc = split_addr(addr_port, host, sizeof(host), port, sizeof(port))) != SR_OK) {
        return rc;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    if ((gai = getaddrinfo(host, port, &hints, &res)) != 0) {
        return sr_fail(SR_EINVAL, "--metrics-bind '%s': address '%s': %s", addr_port, host,
                       gai_strerror(gai));
    }
    for (struct addrinfo *ai = res; ai != NULL && m->fd < 0; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        int one = 1;
        if (fd < 0) {
            err = errno;
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
            err = errno;
            close(fd);
            continue;
        }
        m->fd = fd;
    }
    freeaddrinfo(res);
    if (m->fd < 0) {
        return sr_fail(SR_EINVAL, "--metrics-bind '%s': cannot listen there: %s", addr_port,
                       strerror(err));
    }
    char nh[NI_MAXHOST], np[NI_MAXSERV];
    if (getsockname(m->fd, (struct sockaddr *)&ss, &sl) != 0 ||
        getnameinfo((struct sockaddr *)&ss, sl, nh, sizeof(nh), np, sizeof(np),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(m->address, sizeof(m->address), "%s", addr_port);
    } else {
        snprintf(m->address, sizeof(m->address), ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", nh,
                 np);
    }
    return SR_OK;
}

static enum MHD_Result
reply(struct MHD_Connection *conn, unsigned status, const char *type, char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    enum MHD_Result      ret;

    if (r == NULL) {
        free(body);
        return MHD_NO; /* libmicrohttpd closes the connection */
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result
reply_text(struct MHD_Connection *conn, unsigned status, const char *msg)
{
    size_t n = strlen(msg);
    char  *body = malloc(n + 1);

    if (body == NULL) {
        return MHD_NO;
    }
    memcpy(body, msg, n + 1);
    return reply(conn, status, "text/plain; charset=utf-8", body, n);
}

/* libmicrohttpd's request handler (its thread): GET or HEAD of /metrics
 * gets the latest text, / a pointer to it, anything else 404 or 405. */
static enum MHD_Result
handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
       const char *version, const char *upload, size_t *upload_len, void **state)
{
    sr_metrics_http *m = cls;

    (void)version;
    (void)upload;
    if (*state == NULL) {
        static int first;
        *state = &first; /* the headers: answer once the request is complete */
        return MHD_YES;
    }
    if (*upload_len != 0) {
        *upload_len = 0; /* a body to a GET: ignored */
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics is served\n");
    }
    if (strcmp(url, "/") == 0) {
        return reply_text(conn, MHD_HTTP_OK, "syncrep coordinator: metrics at /metrics\n");
    }
    if (strcmp(url, "/metrics") != 0) {
        return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n");
    }
    atomic_fetch_add(&m->scrapes, 1);
    pthread_mutex_lock(&m->mu);
    size_t n = m->len;
    char  *body = m->text != NULL ? malloc(n + 1) : NULL;
    if (body != NULL) {
        memcpy(body, m->text, n);
    }
    int have = m->text != NULL;
    pthread_mutex_unlock(&m->mu);
    if (!have) {
        return reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "the coordinator is starting\n");
    }
    if (body == NULL) {
        return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    }
    return reply(conn, MHD_HTTP_OK, CONTENT_TYPE, body, n);
}

/* libmicrohttpd's own complaints go to stderr, as the coordinator's log. */
static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    fputs("metrics http: ", stderr);
    vfprintf(stderr, fmt, ap);
}

sr_err
sr_metrics_http_open(sr_metrics_http **out, const char *addr_port)
{
    sr_metrics_http *m;
    sr_err           rc;

    if (out == NULL || addr_port == NULL) {
        return sr_fail(SR_EINVAL, "sr_metrics_http_open: NULL argument");
    }
    if ((m = calloc(1, sizeof(*m))) == NULL) {
        return sr_fail(SR_ENOMEM, "sr_metrics_http_open: %zu bytes", sizeof(*m));
    }
    m->fd = -1;
    pthread_mutex_init(&m->mu, NULL);
    atomic_init(&m->scrapes, 0);
    if ((rc = bind_listener(m, addr_port)) != SR_OK) {
        goto fail;
    }
    m->d =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handle,
                         m, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET,
                         m->fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)32,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
    if (m->d == NULL) {
        rc = sr_fail(SR_ENOTSUP, "--metrics-bind %s: libmicrohttpd would not start", m->address);
        goto fail;
    }
    *out = m;
    return SR_OK;
fail:
    sr_metrics_http_close(m);
    return rc;
}

const char *
sr_metrics_http_address(const sr_metrics_http *m)
{
    return m->address;
}

sr_err
sr_metrics_http_publish(sr_metrics_http *m, const char *text, size_t len)
{
    char *copy = malloc(len + 1);
    char *old;

    if (copy == NULL) {
        return sr_fail(SR_ENOMEM, "metrics text: %zu bytes", len + 1);
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    pthread_mutex_lock(&m->mu);
    old = m->text;
    m->text = copy;
    m->len = len;
    pthread_mutex_unlock(&m->mu);
    free(old);
    return SR_OK;
}

uint64_t
sr_metrics_http_scrapes(const sr_metrics_http *m)
{
    return atomic_load(&((sr_metrics_http *)m)->scrapes);
}

void
sr_metrics_http_close(sr_metrics_http *m)
{
    if (m == NULL) {
        return;
    }
    if (m->d != NULL) {
        MHD_stop_daemon(m->d); /* joins its thread; closes the listening socket */
    } else if (m->fd >= 0) {
        close(m->fd);
    }
    pthread_mutex_destroy(&m->mu);
    free(m->text);
    free(m);
}
