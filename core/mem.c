#include "core/mem.h"

#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *
sr_grow_array(void *p, size_t *cap, size_t need, size_t elem)
{
    size_t nc = *cap ? *cap : 8;
    void  *q;

    if (need <= *cap) {
        return p;
    }
    while (nc < need) {
        if (nc > SIZE_MAX / 2) {
            return NULL;
        }
        nc *= 2;
    }
    if (elem != 0 && nc > SIZE_MAX / elem) {
        return NULL;
    }
    if ((q = realloc(p, nc * elem)) == NULL) {
        return NULL;
    }
    *cap = nc;
    return q;
}

static pthread_once_t tune_once = PTHREAD_ONCE_INIT;
static int            tuned;

static void
tune(void)
{
    const char *e = getenv("SYNCREP_MALLOPT");

    if (e != NULL && strcmp(e, "0") == 0) {
        return;
    }
    tuned = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
}

int
sr_tune_malloc(void)
{
    pthread_once(&tune_once, tune);
    return tuned;
}
