#include "core/mem.h"

#include <stdint.h>
#include <stdlib.h>

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
