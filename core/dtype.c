/* dtype helpers.  See core/dtype.h. */
#include "core/dtype.h"

#include <stdio.h>
#include <string.h>

size_t
sr_dtype_size(int dtype)
{
    switch (dtype) {
    case SR_FLOAT32:
    case SR_INT32:
        return 4;
    case SR_FLOAT64:
    case SR_INT64:
        return 8;
    default:
        return 0;
    }
}

const char *
sr_dtype_name(int dtype)
{
    switch (dtype) {
    case SR_FLOAT32:
        return "float32";
    case SR_FLOAT64:
        return "float64";
    case SR_INT32:
        return "int32";
    case SR_INT64:
        return "int64";
    default:
        return "?";
    }
}

sr_err
sr_dtype_parse(const char *name, sr_dtype *out)
{
    static const sr_dtype all[] = {SR_FLOAT32, SR_FLOAT64, SR_INT32, SR_INT64};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        if (strcmp(name, sr_dtype_name(all[i])) == 0) {
            *out = all[i];
            return SR_OK;
        }
    }
    return sr_fail(SR_EINVAL, "unknown dtype '%s' (float32|float64|int32|int64)", name);
}

int
sr_dtype_is_float(int dtype)
{
    return dtype == SR_FLOAT32 || dtype == SR_FLOAT64;
}

sr_err
sr_shape_elems(int ndim, const int64_t *shape, uint64_t *out_elems)
{
    uint64_t n = 1;

    if (ndim < 0 || ndim > SR_MAX_NDIM) {
        return sr_fail(SR_EINVAL, "ndim %d out of range [0, %d]", ndim, SR_MAX_NDIM);
    }
    if (ndim > 0 && shape == NULL) {
        return sr_fail(SR_EINVAL, "shape is NULL for ndim %d", ndim);
    }
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            return sr_fail(SR_EINVAL, "dimension %d is negative (%lld)", i, (long long)shape[i]);
        }
        if (shape[i] != 0 && n > UINT64_MAX / (uint64_t)shape[i]) {
            return sr_fail(SR_EINVAL, "shape overflows at dimension %d", i);
        }
        n *= (uint64_t)shape[i];
    }
    *out_elems = n;
    return SR_OK;
}

sr_err
sr_shape_bytes(int dtype, int ndim, const int64_t *shape, uint64_t *out_bytes)
{
    size_t   es = sr_dtype_size(dtype);
    uint64_t n;
    sr_err   rc;

    if (es == 0) {
        return sr_fail(SR_EINVAL, "unknown dtype %d", dtype);
    }
    if ((rc = sr_shape_elems(ndim, shape, &n)) != SR_OK) {
        return rc;
    }
    if (n > (UINT64_MAX >> 4)) {
        return sr_fail(SR_EINVAL, "tensor too large (%llu elements)", (unsigned long long)n);
    }
    *out_bytes = n * es;
    return SR_OK;
}

void
sr_shape_format(int ndim, const int64_t *shape, char *buf, size_t len)
{
    size_t off = 0;
    int    n;

    if (len == 0) {
        return;
    }
    buf[0] = '\0';
    n = snprintf(buf, len, "[");
    off = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < ndim && off < len; i++) {
        n = snprintf(buf + off, len - off, "%s%lld", i ? "," : "", (long long)shape[i]);
        if (n < 0) {
            return;
        }
        off += (size_t)n;
    }
    if (off < len) {
        snprintf(buf + off, len - off, "]");
    }
}
