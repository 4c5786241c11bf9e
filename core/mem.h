/* Growable arrays: the doubling every component used to write for itself. */
#ifndef SR_CORE_MEM_H
#define SR_CORE_MEM_H

#include <stddef.h>

/* Make the array p (of *cap elements of `elem` bytes) hold at least `need`:
 * p itself when it does, else p reallocated to a doubled capacity (at least
 * 8) with *cap updated.  NULL when out of memory (or the size overflows);
 * p and *cap are then unchanged and still valid. */
void *sr_grow_array(void *p, size_t *cap, size_t need, size_t elem);

#endif
