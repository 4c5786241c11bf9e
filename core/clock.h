/* Time: int64_t milliseconds.  Monotonic for durations, wall for records. */
#ifndef SR_CORE_CLOCK_H
#define SR_CORE_CLOCK_H

#include <stdint.h>

/* Monotonic milliseconds (CLOCK_MONOTONIC); only differences mean anything. */
int64_t sr_clock_now_ms(void);
/* Monotonic nanoseconds, for benchmarks. */
int64_t sr_clock_now_ns(void);
/* Wall-clock milliseconds since the Unix epoch, for records a person reads. */
int64_t sr_clock_wall_ms(void);
/* Sleep `ms` milliseconds (restarts after signals). */
void sr_clock_sleep_ms(int64_t ms);

#endif
