/*
 * Test support shared by every cmocka test: assertions that print the code
 * and detail, waiting on predicates (never sleeping), temporary directories,
 * ipc:// endpoints and child processes that the test owns by PID.
 * Include after <cmocka.h>'s prerequisites; this header includes them.
 */
#ifndef SR_TEST_H
#define SR_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>

#include "core/error.h"

void sr_test_check(int rc, int want, const char *expr, const char *file, int line);

/* Assert a syncrep call returned SR_OK / a given code, printing the code's
 * name and the thread's error detail on failure. */
#define assert_sr_ok(expr)        sr_test_check((int)(expr), SR_OK, #expr, __FILE__, __LINE__)
#define assert_sr_err(expr, want) sr_test_check((int)(expr), (int)(want), #expr, __FILE__, __LINE__)

/* |a - b| <= eps for doubles, printing both (cmocka 1.1.5 has no float asserts). */
void sr_test_near(double a, double b, double eps, const char *expr, const char *file, int line);
#define assert_near(a, b, eps) sr_test_near((a), (b), (eps), #a " ~ " #b, __FILE__, __LINE__)

/* Poll pred(arg) every few ms until it returns nonzero (returns 1) or
 * timeout_ms passes (returns 0). */
int sr_test_wait_until(int (*pred)(void *arg), void *arg, int timeout_ms);

/* A fresh directory under $TMPDIR (or /tmp); malloc'd path.  The caller
 * removes it with sr_test_rmdir_rf. */
char *sr_test_mkdtemp(const char *tag);
void  sr_test_rmdir_rf(const char *path);

/* "ipc://<dir>/<name>" into buf. */
void sr_test_ipc_endpoint(const char *dir, const char *name, char *buf, size_t len);

/* Start `argv[0]` (a path) with argv in a new process group, stdout/stderr
 * appended to log_path (NULL = inherit).  Returns the PID or -1. */
pid_t sr_test_spawn(char *const argv[], const char *log_path);
/* Send sig to the child's process group (only the test's own child). */
void sr_test_kill(pid_t pid, int sig);
/* Wait up to timeout_ms for the child to exit; returns its wait status, or
 * -1 if still running (then it is killed with SIGKILL and reaped). */
int sr_test_reap(pid_t pid, int timeout_ms);

/* The path of the built `syncrep` command ($SR_SYNCREP_BIN overrides it). */
const char *sr_test_syncrep_bin(void);

#endif
