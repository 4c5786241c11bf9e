/* The store benchmarks' shared helpers (bench_store.h). */
#include "bench_store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void
bench_rm_store(const char *path)
{
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal", "-mark"};
    char                     p[1200];
    for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", path, sfx[i]);
        unlink(p);
    }
}

int
bench_temp_dir(char *tmpl, size_t cap, const char *name)
{
    const char *tmp = getenv("TMPDIR");

    snprintf(tmpl, cap, "%s/sr-bench-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
    if (mkdtemp(tmpl) == NULL) {
        fprintf(stderr, "# mkdtemp %s: %s\n", tmpl, strerror(errno));
        return -1;
    }
    return 0;
}

int
bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
