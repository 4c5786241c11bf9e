/* Growable arrays: the doubling every component used to write for itself. */
#ifndef SR_CORE_MEM_H
#define SR_CORE_MEM_H

#include <stddef.h>

/* Make the array p (of *cap elements of `elem` bytes) hold at least `need`:
 * p itself when it does, else p reallocated to a doubled capacity (at least
 * 8) with *cap updated.  NULL when out of memory (or the size overflows);
 * p and *cap are then unchanged and still valid. */
void *sr_grow_array(void *p, size_t *cap, size_t need, size_t elem);

/* Make glibc keep freed buffers of up to 32 MiB for reuse instead of
 * returning them to the kernel: M_MMAP_THRESHOLD 32 MiB (glibc's largest)
 * and M_TRIM_THRESHOLD 1 GiB.  Every message ZeroMQ receives or sends is
 * such a buffer, allocated by one thread and freed by another; with glibc's
 * defaults the heap is trimmed behind them and each new one page-faults
 * its whole size again (about 15 us per 4 KiB page on these VMs,
 * docs/performance-history.md).  The cost: a process keeps up to its peak of freed
 * heap resident.  Process-wide and done once; the coordinator and
 * sr_client_open call it.  The environment variable SYNCREP_MALLOPT=0
 * leaves the allocator as it is.  Returns 1 if the settings are in force
 * (set now or by an earlier call), 0 if SYNCREP_MALLOPT=0 or glibc refused. */
int sr_tune_malloc(void);

#endif
