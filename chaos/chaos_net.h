/*
 * The namespace network (issue 27): one network namespace per "host" (the
 * coordinator's "c", workers "w0".."wK"), a switch (a bridge in a namespace
 * "sw" of its own, one veth pair to each host: "p-HOST" on the switch,
 * "eth0" in the host), host i at 198.18.0.(i + 1) (198.18.0.0/15 is
 * reserved for such tests), every name prefixed srnet-PID- with the PID of
 * the process that owns it.  And the faults: a host's cable pulled, a
 * one-way partition and packet loss (nftables, table inet srnet in the
 * host), a host's power loss.  `syncrep chaos --targets network` and
 * tests/net/net_test.sh (through `syncrep netns`) both use it.
 * docs/network.md.
 */
#ifndef SR_CHAOS_NET_H
#define SR_CHAOS_NET_H

#include <stddef.h>

#define SR_NET_MAX_HOSTS 64 /* c and up to 63 workers */

/* Host 0 is the coordinator's ("c"), host i >= 1 worker i - 1's ("w<i-1>"). */
typedef struct {
    char prefix[48]; /* srnet-PID- */
    int  nhosts;
} sr_chaos_net;

/* 0 if this process can build the network (root, ip and nft, a namespace
 * and nft inside it); else -1 and why[] says what is missing. */
int sr__chaos_net_check(char *why, size_t n);

/* A valid prefix is srnet-DIGITS-. */
int sr__chaos_net_prefix_ok(const char *prefix);

/* The host's index from its name ("c", "w3"), or -1. */
int sr__chaos_net_host_index(const char *name, int nhosts);

/* The host's name and address into buf (at least 16 bytes). */
const char *sr__chaos_net_host_name(int host, char *buf, size_t n);
const char *sr__chaos_net_host_addr(int host, char *buf, size_t n);

/* Remove namespaces of runs whose owner PID is gone (a run killed before its
 * teardown), then build the switch and nhosts hosts under prefix.  0, or -1
 * with the reason on stderr (and whatever was made removed). */
int sr__chaos_net_up(sr_chaos_net *net, const char *prefix, int nhosts);

/* SIGKILL every process in the namespaces named prefix* and delete them. */
void sr__chaos_net_down(const char *prefix);

/* The host's cable: its port on the switch down (0) or up (1). */
int sr__chaos_net_link(const sr_chaos_net *net, int host, int up);

/* One-way partition at a worker's host: dir 1 drops what it sends to the
 * coordinator, dir 2 what the coordinator sends it, 0 lifts it. */
int sr__chaos_net_oneway(const sr_chaos_net *net, int host, int dir);

/* pct % of the packets the host sends and receives on eth0 dropped
 * (nftables numgen random); 0 lifts it. */
int sr__chaos_net_loss(const sr_chaos_net *net, int host, int pct);

/* Power loss: SIGKILL every process in the host's namespace at once (never
 * this one) and pull its cable.  The number of processes killed, or -1. */
int sr__chaos_net_power_off(const sr_chaos_net *net, int host);

/* Move the calling thread into the host's namespace (what it forks, and the
 * threads it starts, are there too); *saved restores it with _leave. */
int  sr__chaos_net_enter(const sr_chaos_net *net, int host, int *saved);
void sr__chaos_net_leave(int saved);

/* `syncrep netns`: the same from a shell (tests/net/net_test.sh). */
int sr__chaos_net_cli(int argc, char **argv);

#endif
