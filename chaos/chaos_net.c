/*
 * The namespace network and its faults (chaos_net.h): `ip` builds the
 * namespaces, veths and the bridge; nftables (in the host's namespace)
 * drops packets; setns(2) puts a thread into a host.  Everything is named
 * by its prefix, srnet-PID-, and removed by it: a namespace is only ever
 * deleted, and its processes only killed, when its name carries a prefix
 * this code made (sr__chaos_net_down) or one whose owner PID is gone.
 * docs/network.md.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chaos/chaos_net.h"
#include "tools/args.h"

#define NETNS_DIR "/run/netns"

/* ---- commands ----------------------------------------------------------- */

/* Run argv (argv[0] found on PATH), in the namespace at ns_path when not
 * NULL, with input on its stdin when not NULL, stdout discarded; stderr
 * passes through (a failure says why).  0 when it exited 0. */
static int
run_cmd(const char *ns_path, char *const argv[], const char *input)
{
    int   fds[2] = {-1, -1}, st;
    pid_t pid;

    if (input != NULL && pipe(fds) != 0) {
        return -1;
    }
    fflush(NULL);
    if ((pid = fork()) < 0) {
        return -1;
    }
    if (pid == 0) {
        int fd, dn = open("/dev/null", O_RDWR);
        if (ns_path != NULL &&
            ((fd = open(ns_path, O_RDONLY | O_CLOEXEC)) < 0 || setns(fd, CLONE_NEWNET) != 0)) {
            fprintf(stderr, "netns: cannot enter %s: %s\n", ns_path, strerror(errno));
            _exit(126);
        }
        if (input != NULL) {
            dup2(fds[0], 0);
            close(fds[0]);
            close(fds[1]);
        } else if (dn >= 0) {
            dup2(dn, 0);
        }
        if (dn >= 0) {
            dup2(dn, 1);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "netns: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (input != NULL) {
        close(fds[0]);
        size_t len = strlen(input), off = 0;
        while (off < len) {
            ssize_t w = write(fds[1], input + off, len - off);
            if (w <= 0) {
                break;
            }
            off += (size_t)w;
        }
        close(fds[1]);
    }
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            return -1;
        }
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* `ip` with up to 12 arguments, NULL-terminated. */
static int
ip(const char *a0, ...)
{
    char   *argv[16] = {"ip", (char *)a0};
    int     n = 2;
    va_list ap;

    va_start(ap, a0);
    while (n < 15 && (argv[n] = va_arg(ap, char *)) != NULL) {
        n++;
    }
    va_end(ap);
    argv[n] = NULL;
    return run_cmd(NULL, argv, NULL);
}

/* ---- names -------------------------------------------------------------- */

int
sr__chaos_net_prefix_ok(const char *p)
{
    size_t n = strlen(p), i = 6;

    if (n < 8 || n >= sizeof(((sr_chaos_net *)0)->prefix) - 4 || strncmp(p, "srnet-", 6) != 0 ||
        p[n - 1] != '-') {
        return 0;
    }
    for (; i < n - 1; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return 0;
        }
    }
    return 1;
}

const char *
sr__chaos_net_host_name(int host, char *buf, size_t n)
{
    if (host == 0) {
        snprintf(buf, n, "c");
    } else {
        snprintf(buf, n, "w%d", host - 1);
    }
    return buf;
}

const char *
sr__chaos_net_host_addr(int host, char *buf, size_t n)
{
    snprintf(buf, n, "198.18.0.%d", host + 1);
    return buf;
}

int
sr__chaos_net_host_index(const char *name, int nhosts)
{
    long long v;

    if (strcmp(name, "c") == 0) {
        return 0;
    }
    if (name[0] != 'w' || sr_args_parse_i64(name + 1, 0, SR_NET_MAX_HOSTS - 2, &v) != 0 ||
        v + 1 >= nhosts) {
        return -1;
    }
    return (int)v + 1;
}

static void
ns_name(const sr_chaos_net *net, int host, char *buf, size_t n)
{
    char h[16];
    snprintf(buf, n, "%s%s", net->prefix, sr__chaos_net_host_name(host, h, sizeof(h)));
}

static void
ns_path(const sr_chaos_net *net, int host, char *buf, size_t n)
{
    char name[80];
    ns_name(net, host, name, sizeof(name));
    snprintf(buf, n, NETNS_DIR "/%s", name);
}

/* ---- processes in a namespace ------------------------------------------- */

/* SIGKILL every process whose network namespace is the one at path (never
 * this process); how many. */
static int
kill_in_ns(const char *path)
{
    struct stat ns, st;
    DIR        *d;
    int         n = 0;

    if (stat(path, &ns) != 0 || (d = opendir("/proc")) == NULL) {
        return 0;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char  p[300];
        char *end;
        long  pid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0 || pid == (long)getpid()) {
            continue;
        }
        snprintf(p, sizeof(p), "/proc/%ld/ns/net", pid);
        if (stat(p, &st) == 0 && st.st_dev == ns.st_dev && st.st_ino == ns.st_ino &&
            kill((pid_t)pid, SIGKILL) == 0) {
            n++;
        }
    }
    closedir(d);
    return n;
}

/* Every namespace named prefix*, or (prefix NULL) srnet-PID-* of a PID that
 * is gone: its processes killed, then deleted. */
static void
remove_ns(const char *prefix)
{
    DIR *d = opendir(NETNS_DIR);

    if (d == NULL) {
        return;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *name = e->d_name;
        if (prefix != NULL ? strncmp(name, prefix, strlen(prefix)) != 0
                           : strncmp(name, "srnet-", 6) != 0) {
            continue;
        }
        if (prefix == NULL) {
            char *end;
            long  pid = strtol(name + 6, &end, 10);
            if (end == name + 6 || *end != '-' || pid <= 0 ||
                !(kill((pid_t)pid, 0) != 0 && errno == ESRCH)) {
                continue; /* not ours, or its owner still runs */
            }
            fprintf(stderr, "netns: removing the stale namespace %s\n", name);
        }
        char path[300], nm[256];
        snprintf(path, sizeof(path), NETNS_DIR "/%s", name);
        snprintf(nm, sizeof(nm), "%s", name);
        kill_in_ns(path);
        ip("netns", "del", nm, NULL);
    }
    closedir(d);
}

/* ---- the network -------------------------------------------------------- */

int
sr__chaos_net_check(char *why, size_t n)
{
    char name[64], path[128];

    if (geteuid() != 0) {
        snprintf(why, n,
                 "needs root for network namespaces and nftables (run as root, as CI does)");
        return -1;
    }
    char *ipv[] = {"ip", "-V", NULL}, *nftv[] = {"nft", "--version", NULL};
    if (run_cmd(NULL, ipv, NULL) != 0) {
        snprintf(why, n, "ip (iproute2) is not installed");
        return -1;
    }
    if (run_cmd(NULL, nftv, NULL) != 0) {
        snprintf(why, n, "nft is not installed (apt-get install nftables; ./run test installs it)");
        return -1;
    }
    snprintf(name, sizeof(name), "srnet-%ld-probe", (long)getpid());
    snprintf(path, sizeof(path), NETNS_DIR "/%s", name);
    if (ip("netns", "add", name, NULL) != 0) {
        snprintf(why, n, "cannot create a network namespace here (ip netns add failed)");
        return -1;
    }
    char *list[] = {"nft", "list", "ruleset", NULL};
    int   rc = run_cmd(path, list, NULL);
    ip("netns", "del", name, NULL);
    if (rc != 0) {
        snprintf(why, n, "nft cannot run in a network namespace here");
        return -1;
    }
    return 0;
}

int
sr__chaos_net_up(sr_chaos_net *net, const char *prefix, int nhosts)
{
    char sw[80], ns[80], port[32], addr[32], cidr[40], h[16];

    if (!sr__chaos_net_prefix_ok(prefix) || nhosts < 1 || nhosts > SR_NET_MAX_HOSTS) {
        fprintf(stderr, "netns: bad prefix '%s' or host count %d (srnet-DIGITS-, 1..%d)\n", prefix,
                nhosts, SR_NET_MAX_HOSTS);
        return -1;
    }
    if (net->prefix != prefix) {
        snprintf(net->prefix, sizeof(net->prefix), "%s", prefix);
    }
    net->nhosts = nhosts;
    remove_ns(NULL);
    snprintf(sw, sizeof(sw), "%ssw", prefix);
    if (ip("netns", "add", sw, NULL) != 0 || ip("-n", sw, "link", "set", "lo", "up", NULL) != 0 ||
        ip("-n", sw, "link", "add", "br0", "type", "bridge", NULL) != 0 ||
        ip("-n", sw, "link", "set", "br0", "up", NULL) != 0) {
        fprintf(stderr, "netns: cannot build the switch %s\n", sw);
        sr__chaos_net_down(prefix);
        return -1;
    }
    for (int i = 0; i < nhosts; i++) {
        ns_name(net, i, ns, sizeof(ns));
        snprintf(port, sizeof(port), "p-%s", sr__chaos_net_host_name(i, h, sizeof(h)));
        snprintf(cidr, sizeof(cidr), "%s/24", sr__chaos_net_host_addr(i, addr, sizeof(addr)));
        if (ip("netns", "add", ns, NULL) != 0 ||
            ip("-n", ns, "link", "set", "lo", "up", NULL) != 0 ||
            ip("-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns,
               NULL) != 0 ||
            ip("-n", sw, "link", "set", port, "master", "br0", "up", NULL) != 0 ||
            ip("-n", ns, "addr", "add", cidr, "dev", "eth0", NULL) != 0 ||
            ip("-n", ns, "link", "set", "eth0", "up", NULL) != 0) {
            fprintf(stderr, "netns: cannot build host %s\n", ns);
            sr__chaos_net_down(prefix);
            return -1;
        }
    }
    return 0;
}

void
sr__chaos_net_down(const char *prefix)
{
    if (sr__chaos_net_prefix_ok(prefix)) {
        remove_ns(prefix);
    }
}

int
sr__chaos_net_link(const sr_chaos_net *net, int host, int up)
{
    char sw[80], port[32], h[16];

    if (host < 0 || host >= net->nhosts) {
        return -1;
    }
    snprintf(sw, sizeof(sw), "%ssw", net->prefix);
    snprintf(port, sizeof(port), "p-%s", sr__chaos_net_host_name(host, h, sizeof(h)));
    return ip("-n", sw, "link", "set", port, up ? "up" : "down", NULL);
}

/* Replace the host's table inet srnet with rules (NULL: none). */
static int
nft_set(const sr_chaos_net *net, int host, const char *rules)
{
    char  path[128], text[1024];
    char *argv[] = {"nft", "-f", "-", NULL};

    if (host < 0 || host >= net->nhosts) {
        return -1;
    }
    ns_path(net, host, path, sizeof(path));
    /* add then delete: a table that is not there is no error */
    snprintf(text, sizeof(text), "add table inet srnet\ndelete table inet srnet\n%s%s%s",
             rules ? "table inet srnet {\n" : "", rules ? rules : "", rules ? "}\n" : "");
    return run_cmd(path, argv, text);
}

int
sr__chaos_net_oneway(const sr_chaos_net *net, int host, int dir)
{
    char rules[512], c[32];

    if (host < 1 || dir < 0 || dir > 2) {
        return -1;
    }
    sr__chaos_net_host_addr(0, c, sizeof(c));
    if (dir == 1) {
        snprintf(rules, sizeof(rules),
                 "chain out { type filter hook output priority 0; oifname \"eth0\" ip daddr %s "
                 "drop; }\n",
                 c);
    } else if (dir == 2) {
        snprintf(rules, sizeof(rules),
                 "chain in { type filter hook input priority 0; iifname \"eth0\" ip saddr %s "
                 "drop; }\n",
                 c);
    }
    return nft_set(net, host, dir == 0 ? NULL : rules);
}

int
sr__chaos_net_loss(const sr_chaos_net *net, int host, int pct)
{
    char rules[512];

    if (pct < 0 || pct > 100) {
        return -1;
    }
    snprintf(rules, sizeof(rules),
             "chain in { type filter hook input priority 0; iifname \"eth0\" numgen random mod "
             "100 < %d drop; }\n"
             "chain out { type filter hook output priority 0; oifname \"eth0\" numgen random "
             "mod 100 < %d drop; }\n",
             pct, pct);
    return nft_set(net, host, pct == 0 ? NULL : rules);
}

int
sr__chaos_net_power_off(const sr_chaos_net *net, int host)
{
    char path[128];

    if (host < 0 || host >= net->nhosts) {
        return -1;
    }
    ns_path(net, host, path, sizeof(path));
    int n = kill_in_ns(path);
    return sr__chaos_net_link(net, host, 0) == 0 ? n : -1;
}

int
sr__chaos_net_enter(const sr_chaos_net *net, int host, int *saved)
{
    char path[128];
    int  fd;

    *saved = -1;
    if (host < 0 || host >= net->nhosts) {
        return -1;
    }
    ns_path(net, host, path, sizeof(path));
    if ((*saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
        return -1;
    }
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || setns(fd, CLONE_NEWNET) != 0) {
        fprintf(stderr, "netns: cannot enter %s: %s\n", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        close(*saved);
        *saved = -1;
        return -1;
    }
    close(fd);
    return 0;
}

void
sr__chaos_net_leave(int saved)
{
    if (saved >= 0) {
        if (setns(saved, CLONE_NEWNET) != 0) {
            fprintf(stderr, "netns: cannot return to my namespace: %s\n", strerror(errno));
            abort(); /* every later socket would be in the wrong network */
        }
        close(saved);
    }
}

/* ---- syncrep netns ------------------------------------------------------ */

static const char cli_usage[] =
    "usage: syncrep netns check\n"
    "       syncrep netns up PREFIX HOSTS       (HOSTS: c, w0 .. w<HOSTS-2>)\n"
    "       syncrep netns down PREFIX\n"
    "       syncrep netns link PREFIX HOST up|down\n"
    "       syncrep netns oneway PREFIX HOST to-coord|from-coord|off\n"
    "       syncrep netns loss PREFIX HOST PCT  (0: off)\n"
    "       syncrep netns power-off PREFIX HOST\n"
    "\n"
    "The namespace network of tests/net and `syncrep chaos --targets network`\n"
    "(root): a namespace per host, PREFIX = srnet-PID- (PID: the owner; `up` removes\n"
    "the namespaces of owners that are gone), host i at 198.18.0.(i+1) on a bridge.\n"
    "check exits 0 if it can run here, else 77 and says why.  docs/network.md.\n";

int
sr__chaos_net_cli(int argc, char **argv)
{
    sr_chaos_net net;
    long long    v;
    char         why[256];
    int          host = -1;

    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(cli_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "check") == 0) {
        if (sr__chaos_net_check(why, sizeof(why)) != 0) {
            printf("%s\n", why);
            return 77;
        }
        return 0;
    }
    if (argc < 3 || !sr__chaos_net_prefix_ok(argv[2])) {
        return sr_args_usage_error("netns", "a PREFIX srnet-DIGITS- is required, not '%s'",
                                   argc < 3 ? "" : argv[2]);
    }
    memset(&net, 0, sizeof(net));
    snprintf(net.prefix, sizeof(net.prefix), "%s", argv[2]);
    net.nhosts = SR_NET_MAX_HOSTS;
    if (strcmp(cmd, "down") == 0 && argc == 3) {
        sr__chaos_net_down(net.prefix);
        return 0;
    }
    if (strcmp(cmd, "up") == 0 && argc == 4) {
        if (sr_args_parse_i64(argv[3], 1, SR_NET_MAX_HOSTS, &v) != 0) {
            return sr_args_usage_error("netns", "bad host count '%s' (1..64)", argv[3]);
        }
        return sr__chaos_net_up(&net, net.prefix, (int)v) == 0 ? 0 : 1;
    }
    if (argc < 4 || (host = sr__chaos_net_host_index(argv[3], SR_NET_MAX_HOSTS)) < 0) {
        return sr_args_usage_error("netns", "a HOST (c, w0, w1, ...) is required, not '%s'",
                                   argc < 4 ? "" : argv[3]);
    }
    if (strcmp(cmd, "power-off") == 0 && argc == 4) {
        return sr__chaos_net_power_off(&net, host) >= 0 ? 0 : 1;
    }
    if (argc != 5) {
        return sr_args_usage_error(
            "netns", "unknown or incomplete command '%s' (syncrep netns --help)", cmd);
    }
    const char *a = argv[4];
    if (strcmp(cmd, "link") == 0) {
        if (strcmp(a, "up") != 0 && strcmp(a, "down") != 0) {
            return sr_args_usage_error("netns", "link: up or down, not '%s'", a);
        }
        return sr__chaos_net_link(&net, host, strcmp(a, "up") == 0) == 0 ? 0 : 1;
    }
    if (strcmp(cmd, "oneway") == 0) {
        int dir = strcmp(a, "off") == 0          ? 0
                  : strcmp(a, "to-coord") == 0   ? 1
                  : strcmp(a, "from-coord") == 0 ? 2
                                                 : -1;
        if (dir < 0 || host == 0) {
            return sr_args_usage_error(
                "netns", "oneway: a worker's host and to-coord, from-coord or off, not '%s'", a);
        }
        return sr__chaos_net_oneway(&net, host, dir) == 0 ? 0 : 1;
    }
    if (strcmp(cmd, "loss") == 0) {
        if (sr_args_parse_i64(a, 0, 100, &v) != 0) {
            return sr_args_usage_error("netns", "loss: a percentage 0..100, not '%s'", a);
        }
        return sr__chaos_net_loss(&net, host, (int)v) == 0 ? 0 : 1;
    }
    return sr_args_usage_error("netns", "unknown command '%s' (syncrep netns --help)", cmd);
}
