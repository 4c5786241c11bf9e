#include "sr_test.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/mem.h"

#define BIG (20u << 20) /* above glibc's default mmap threshold, below 32 MiB */

/* Under a sanitizer, malloc is the sanitizer's: mallopt and mallinfo2 say
 * nothing about it. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* In a fresh child (the settings are once per process): with env set to
 * `mallopt_env` (NULL: unset), call sr_tune_malloc twice, then allocate,
 * touch and free BIG bytes.  The child's exit status: bit 0 the first
 * call's result, bit 1 the second's, bit 2 "BIG came from a fresh mmap",
 * bit 3 "the heap still holds BIG after the free" (not trimmed). */
static int
probe(const char *mallopt_env)
{
    pid_t pid = fork();
    int   st = 0;

    assert_true(pid >= 0);
    if (pid == 0) {
        if (mallopt_env != NULL) {
            setenv("SYNCREP_MALLOPT", mallopt_env, 1);
        } else {
            unsetenv("SYNCREP_MALLOPT");
        }
        int              r1 = sr_tune_malloc(), r2 = sr_tune_malloc();
        struct mallinfo2 a = mallinfo2();
        char            *p = malloc(BIG);
        if (p == NULL) {
            _exit(64);
        }
        memset(p, 1, BIG);
        struct mallinfo2 b = mallinfo2();
        free(p);
        struct mallinfo2 c = mallinfo2();
        _exit((r1 ? 1 : 0) | (r2 ? 2 : 0) | (b.hblkhd >= a.hblkhd + BIG ? 4 : 0) |
              (c.arena >= BIG ? 8 : 0));
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* Tuned: buffers up to 32 MiB come from the heap and stay there for reuse
 * when freed (no fresh mapping, no page faults the next time). */
static void
test_mem_tune_malloc_keeps_freed_buffers(void **state)
{
    (void)state;
    if (SANITIZED) {
        skip(); /* the sanitizer's allocator ignores mallopt */
    }
    assert_int_equal(probe(NULL), 1 | 2 | 8);
    assert_int_equal(probe("1"), 1 | 2 | 8);
}

/* SYNCREP_MALLOPT=0 leaves glibc's defaults: a 20 MiB buffer is a fresh
 * mapping, returned to the kernel when freed. */
static void
test_mem_tune_malloc_env_zero_leaves_defaults(void **state)
{
    (void)state;
    if (SANITIZED) {
        skip();
    }
    assert_int_equal(probe("0"), 4);
}

static void
test_mem_grow_array(void **state)
{
    size_t cap = 0;
    int   *p = NULL, *q;
    (void)state;

    q = sr_grow_array(p, &cap, 3, sizeof(int));
    assert_non_null(q);
    assert_int_equal(cap, 8);
    p = q;
    assert_ptr_equal(sr_grow_array(p, &cap, 8, sizeof(int)), p);
    q = sr_grow_array(p, &cap, 9, sizeof(int));
    assert_non_null(q);
    assert_int_equal(cap, 16);
    p = q;
    /* An overflowing size fails and leaves the array as it was. */
    assert_null(sr_grow_array(p, &cap, SIZE_MAX / 2, sizeof(int)));
    assert_int_equal(cap, 16);
    free(p);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mem_tune_malloc_keeps_freed_buffers),
        cmocka_unit_test(test_mem_tune_malloc_env_zero_leaves_defaults),
        cmocka_unit_test(test_mem_grow_array),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
