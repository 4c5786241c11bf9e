/*
 * Explicit little-endian fixed-width encoding for the wire and the disk
 * (never memcpy a struct out).  Inline: used on hot paths.
 */
#ifndef SR_CORE_BYTES_H
#define SR_CORE_BYTES_H

#include <stdint.h>
#include <string.h>

static inline void
sr_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void
sr_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static inline void
sr_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static inline uint16_t
sr_get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t
sr_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static inline uint64_t
sr_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static inline void
sr_put_f64(uint8_t *p, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof(v));
    sr_put_u64(p, v);
}

static inline double
sr_get_f64(const uint8_t *p)
{
    uint64_t v = sr_get_u64(p);
    double   d;
    memcpy(&d, &v, sizeof(d));
    return d;
}

#endif
