/*
 * What the store benchmarks (store_commit, store_small) share: removing a
 * store and the files beside it, and the run's temporary directory.
 */
#ifndef SR_BENCH_STORE_H
#define SR_BENCH_STORE_H

#include <stddef.h>

/* Remove the store at path and its -wal, -shm, -journal and -mark. */
void bench_rm_store(const char *path);

/* A new directory $TMPDIR/sr-bench-NAME-XXXXXX (or /tmp) into tmpl; 0, or
 * -1 with the reason printed. */
int bench_temp_dir(char *tmpl, size_t cap, const char *name);

/* qsort's comparison of doubles, ascending. */
int bench_cmp_double(const void *a, const void *b);

#endif
