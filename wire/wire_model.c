/*
 * The MODEL message's bodies (wire.h, "MODEL"): a list of descriptors and a
 * list of places.  Pure encoders and decoders, every length checked before
 * it is read.  docs/protocol.md, MODEL.
 */
#include <string.h>

#include "core/bytes.h"
#include "wire/wire.h"

#define ENTRY_MIN 7 /* u16 len, then a vardesc's least: 1-byte name, dtype, flags, ndim */

size_t
sr_wire_desclist_size(const sr_wire_vardesc *d, size_t n)
{
    uint8_t one[SR_WIRE_BODY_MAX];
    size_t  need = 4;

    if (n > UINT32_MAX || (d == NULL && n > 0)) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        size_t k = sr_wire_vardesc_encode(&d[i], one, sizeof(one));
        if (k == 0) {
            return 0;
        }
        need += 2 + k;
    }
    return need;
}

size_t
sr_wire_desclist_encode(const sr_wire_vardesc *d, size_t n, uint8_t *out, size_t cap)
{
    size_t off = 4;

    if (out == NULL || cap < 4 || n > UINT32_MAX || (d == NULL && n > 0)) {
        return 0;
    }
    sr_put_u32(out, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        if (cap - off < 2) {
            return 0;
        }
        size_t k = sr_wire_vardesc_encode(&d[i], out + off + 2, cap - off - 2);
        if (k == 0) {
            return 0;
        }
        sr_put_u16(out + off, (uint16_t)k);
        off += 2 + k;
    }
    return off;
}

sr_err
sr_wire_desclist_count(const uint8_t *buf, size_t len, size_t max, size_t *n)
{
    if (buf == NULL || n == NULL) {
        return sr_fail(SR_EPROTO, "desclist: no body");
    }
    if (len < 4) {
        return sr_fail(SR_EPROTO, "desclist: %zu bytes, no count", len);
    }
    uint32_t k = sr_get_u32(buf);
    if (k > max) {
        return sr_fail(SR_EPROTO, "desclist: %u descriptors, at most %zu", (unsigned)k, max);
    }
    if ((uint64_t)k * ENTRY_MIN > len - 4) {
        return sr_fail(SR_EPROTO, "desclist: %u descriptors cannot fit in %zu bytes", (unsigned)k,
                       len);
    }
    *n = k;
    return SR_OK;
}

sr_err
sr_wire_desclist_decode(const uint8_t *buf, size_t len, sr_wire_vardesc *out, size_t n)
{
    size_t have, off = 4;
    sr_err rc;

    if ((rc = sr_wire_desclist_count(buf, len, SIZE_MAX, &have)) != SR_OK) {
        return rc;
    }
    if (have != n || (out == NULL && n > 0)) {
        return sr_fail(SR_EPROTO, "desclist: %zu descriptors, expected %zu", have, n);
    }
    for (size_t i = 0; i < n; i++) {
        if (len - off < 2) {
            return sr_fail(SR_EPROTO, "desclist: entry %zu cut short", i);
        }
        size_t k = sr_get_u16(buf + off);
        if (k > len - off - 2) {
            return sr_fail(SR_EPROTO, "desclist: entry %zu of %zu bytes runs past the body", i, k);
        }
        if ((rc = sr_wire_vardesc_decode(buf + off + 2, k, &out[i])) != SR_OK) {
            return sr_fail(rc, "desclist: entry %zu: %s", i, sr_errdetail());
        }
        off += 2 + k;
    }
    if (off != len) {
        return sr_fail(SR_EPROTO, "desclist: %zu bytes after the last entry", len - off);
    }
    return SR_OK;
}

size_t
sr_wire_places_encode(const sr_wire_place *p, size_t n, uint8_t *out, size_t cap)
{
    if (out == NULL || (p == NULL && n > 0) || n > cap / SR_WIRE_PLACE_BYTES) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        sr_put_u32(out + i * SR_WIRE_PLACE_BYTES, p[i].pack);
        sr_put_u64(out + i * SR_WIRE_PLACE_BYTES + 4, p[i].offset);
    }
    return n * SR_WIRE_PLACE_BYTES;
}

sr_err
sr_wire_places_decode(const uint8_t *buf, size_t len, sr_wire_place *out, size_t n)
{
    if ((buf == NULL && len > 0) || (out == NULL && n > 0)) {
        return sr_fail(SR_EPROTO, "places: no body");
    }
    if (n > SIZE_MAX / SR_WIRE_PLACE_BYTES || len != n * SR_WIRE_PLACE_BYTES) {
        return sr_fail(SR_EPROTO, "places: %zu bytes for %zu places of %d", len, n,
                       SR_WIRE_PLACE_BYTES);
    }
    for (size_t i = 0; i < n; i++) {
        out[i].pack = sr_get_u32(buf + i * SR_WIRE_PLACE_BYTES);
        out[i].offset = sr_get_u64(buf + i * SR_WIRE_PLACE_BYTES + 4);
    }
    return SR_OK;
}
