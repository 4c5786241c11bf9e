/*
 * coordinator/exclusive.c: one coordinator per store, one per endpoint.
 *
 * Two coordinators on one store would both commit steps into it, each from
 * its own variables and global step: the store would hold a mix of two
 * trainings while each reported every step durable.  SQLite serialises the
 * transactions but cannot know they belong to different histories, so the
 * coordinator takes a lock of its own first: flock(2) on STORE-lock, a
 * file beside the store (not the database file, whose POSIX locks are
 * SQLite's).  The kernel releases it when the process ends, whatever ends
 * it, so a coordinator restarted after a SIGKILL finds it free, and one
 * started while the old one is still shutting down is refused, naming it.
 * Readers (export, verify, status) do not take it.
 *
 * The endpoint: binding an ipc:// path that another process listens on
 * succeeds in ZeroMQ (it replaces the socket file), and that process's
 * workers then reach the new one; so a listening peer there is refused too.
 */
#include "coordinator/exclusive.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

sr_err
sr__coord_lock_store(const char *store_path, int *fd)
{
    char path[4096];
    char holder[32] = "";

    *fd = -1;
    if (snprintf(path, sizeof(path), "%s-lock", store_path) >= (int)sizeof(path)) {
        return sr_fail(SR_EINVAL, "store path too long: %s", store_path);
    }
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (f < 0) {
        int e = errno;
        return sr_fail(sr_err_from_errno(e, SR_ESTORE),
                       "store %s: cannot open its lock file %s: %s%s", store_path, path,
                       strerror(e), e == ENOENT ? " (does its directory exist?)" : "");
    }
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        int     e = errno;
        ssize_t n = pread(f, holder, sizeof(holder) - 1, 0);
        close(f);
        if (e != EWOULDBLOCK) {
            return sr_fail(SR_ESTORE, "store lock %s: %s", path, strerror(e));
        }
        holder[n > 0 ? n : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        return sr_fail(SR_EBUSY,
                       "store %s is in use by another coordinator (pid %s holds %s); one store "
                       "has one coordinator",
                       store_path, holder[0] ? holder : "unknown", path);
    }
    /* Who holds it, for the next one's message (best effort). */
    int n = snprintf(holder, sizeof(holder), "%ld\n", (long)getpid());
    if (ftruncate(f, 0) != 0 || pwrite(f, holder, (size_t)n, 0) != n) {
        /* The lock is what counts. */
    }
    *fd = f;
    return SR_OK;
}

void
sr__coord_unlock_store(int fd)
{
    if (fd >= 0) {
        close(fd); /* releases the flock */
    }
}

/* tcp://ADDR:PORT with ADDR "*" or an IPv4 literal and a numeric port: the
 * port already bound there (bind(2) of a socket of our own, with ZeroMQ's
 * SO_REUSEADDR, closed at once) is SR_EBUSY.  ZeroMQ would refuse the bind
 * as well, but only after the store had counted a new incarnation; other
 * forms (names, IPv6, ephemeral ports) are left to ZeroMQ. */
static sr_err
check_tcp(const char *endpoint)
{
    struct sockaddr_in a;
    char               host[64];
    const char        *colon = strrchr(endpoint + 6, ':');
    char              *end;

    if (colon == NULL || (size_t)(colon - (endpoint + 6)) >= sizeof(host)) {
        return SR_OK;
    }
    memcpy(host, endpoint + 6, (size_t)(colon - (endpoint + 6)));
    host[colon - (endpoint + 6)] = '\0';
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end != '\0' || end == colon + 1 || port == 0 || port > 65535) {
        return SR_OK;
    }
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (strcmp(host, "*") == 0) {
        a.sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        return SR_OK;
    }
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (s < 0) {
        return SR_OK;
    }
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int r = bind(s, (const struct sockaddr *)&a, sizeof(a)), e = errno;
    close(s);
    if (r != 0 && e == EADDRINUSE) {
        return sr_fail(SR_EBUSY, "endpoint %s: the port is in use by another process", endpoint);
    }
    return SR_OK;
}

sr_err
sr__coord_check_endpoint(const char *endpoint)
{
    struct sockaddr_un a;
    const char        *p;

    if (endpoint != NULL && strncmp(endpoint, "tcp://", 6) == 0) {
        return check_tcp(endpoint);
    }
    if (endpoint == NULL || strncmp(endpoint, "ipc://", 6) != 0) {
        return SR_OK;
    }
    p = endpoint + 6;
    /* An abstract name (@...) cannot be bound twice anyway; a path too
     * long for sun_path is ZeroMQ's to refuse. */
    if (p[0] == '@' || p[0] == '\0' || strlen(p) >= sizeof(a.sun_path)) {
        return SR_OK;
    }
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, p, strlen(p));
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        return SR_OK;
    }
    int r = connect(s, (const struct sockaddr *)&a, sizeof(a));
    close(s);
    if (r == 0) {
        return sr_fail(SR_EBUSY,
                       "endpoint %s: another process is listening there (binding would take it "
                       "over from it)",
                       endpoint);
    }
    return SR_OK; /* no socket, or a stale one nobody listens on */
}
