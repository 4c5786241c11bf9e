/*
 * The client's network options (sr_client_options, docs/network.md): a
 * value out of range is SR_EINVAL naming the field, before anything is
 * sent; 0 takes SYNCREP_<FIELD> from the environment or the default, and -1
 * turns heartbeats, the connect timeout or keepalive off; a coordinator that cannot be reached for
 * timeout_ms is SR_ETIMEDOUT naming the endpoint.  Runs anywhere (loopback, a port bound by the
 * test and never listened on); the faults on a real network are tests/net/net_test.sh.
 */
#include "sr_test.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "syncrep/syncrep.h"

/* A loopback port nothing listens on while `fd` stays open: bound, never
 * listened on, so a connect to it is refused and ZeroMQ keeps trying. */
static int
dead_port(int *fd)
{
    struct sockaddr_in sa;
    socklen_t          len = sizeof(sa);

    *fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(*fd >= 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(*fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(*fd, (struct sockaddr *)&sa, &len), 0);
    return ntohs(sa.sin_port);
}

static void
open_expect(sr_client_options *o, int want, const char *needle)
{
    sr_client *c = NULL;
    int        rc = sr_client_open(&c, o);

    if (rc != want || strstr(sr_errdetail(), needle) == NULL) {
        fail_msg("sr_client_open: %s \"%s\", want %s with \"%s\"", sr_errname(rc), sr_errdetail(),
                 sr_errname(want), needle);
    }
    assert_null(c);
}

static void
test_net_opts_out_of_range_is_einval_naming_the_field(void **state)
{
    (void)state;
    int               fd, port = dead_port(&fd);
    char              ep[64];
    sr_client_options base = {.endpoint = ep, .timeout_ms = 200}, o;

    snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", port);
    o = base;
    o.heartbeat_ivl_ms = 5;
    open_expect(&o, SR_EINVAL, "heartbeat_ivl_ms 5 is out of range");
    o = base;
    o.heartbeat_timeout_ms = -1; /* no "off" for the timeout itself */
    open_expect(&o, SR_EINVAL, "heartbeat_timeout_ms -1");
    o = base;
    o.connect_timeout_ms = -7;
    open_expect(&o, SR_EINVAL, "connect_timeout_ms -7");
    o = base;
    o.tcp_keepalive_idle_s = 100000;
    open_expect(&o, SR_EINVAL, "tcp_keepalive_idle_s 100000");
    o = base;
    o.tcp_keepalive_intvl_s = -1;
    open_expect(&o, SR_EINVAL, "tcp_keepalive_intvl_s -1");
    o = base;
    o.tcp_keepalive_cnt = 1000;
    open_expect(&o, SR_EINVAL, "tcp_keepalive_cnt 1000");
    close(fd);
}

static void
test_net_opts_unreachable_is_etimedout_naming_the_endpoint(void **state)
{
    (void)state;
    int               fd, port = dead_port(&fd);
    char              ep[64];
    sr_client_options o = {.endpoint = ep, .timeout_ms = 300};

    snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", port);
    open_expect(&o, SR_ETIMEDOUT, ep); /* the defaults (every field 0) */
    o.heartbeat_ivl_ms = -1;
    o.connect_timeout_ms = -1;
    o.tcp_keepalive_idle_s = -1;
    open_expect(&o, SR_ETIMEDOUT, ep); /* everything off: still a clean timeout */
    o.heartbeat_ivl_ms = 200;
    o.heartbeat_timeout_ms = 400;
    o.connect_timeout_ms = 100;
    o.tcp_keepalive_idle_s = 1;
    o.tcp_keepalive_intvl_s = 1;
    o.tcp_keepalive_cnt = 1;
    open_expect(&o, SR_ETIMEDOUT, ep);
    close(fd);
}

/* Fields left 0 take SYNCREP_<FIELD> from the environment (how a Python
 * program sets them); a bad value there is SR_EINVAL naming the variable. */
static void
test_net_opts_environment_fills_unset_fields(void **state)
{
    (void)state;
    int               fd, port = dead_port(&fd);
    char              ep[64];
    sr_client_options o = {.endpoint = ep, .timeout_ms = 200};

    snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", port);
    setenv("SYNCREP_HEARTBEAT_IVL_MS", "soon", 1);
    open_expect(&o, SR_EINVAL, "SYNCREP_HEARTBEAT_IVL_MS=\"soon\" is not in 10..3600000");
    setenv("SYNCREP_HEARTBEAT_IVL_MS", "5", 1);
    open_expect(&o, SR_EINVAL, "SYNCREP_HEARTBEAT_IVL_MS 5 is out of range");
    o.heartbeat_ivl_ms = 500; /* a field that is set wins over the environment */
    open_expect(&o, SR_ETIMEDOUT, ep);
    o.heartbeat_ivl_ms = 0;
    setenv("SYNCREP_HEARTBEAT_IVL_MS", "-1", 1);
    setenv("SYNCREP_TCP_KEEPALIVE_CNT", "2", 1);
    open_expect(&o, SR_ETIMEDOUT, ep);
    unsetenv("SYNCREP_HEARTBEAT_IVL_MS");
    unsetenv("SYNCREP_TCP_KEEPALIVE_CNT");
    close(fd);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_net_opts_out_of_range_is_einval_naming_the_field),
        cmocka_unit_test(test_net_opts_unreachable_is_etimedout_naming_the_endpoint),
        cmocka_unit_test(test_net_opts_environment_fills_unset_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
