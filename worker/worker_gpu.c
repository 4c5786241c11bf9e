/*
 * The worker path between gpu/ and the client library: average a variable's
 * per-device gradients on the root device (participant 0), stage the result
 * in pinned host memory and push it; pull a variable into pinned memory,
 * copy it to the root device and broadcast it to every device.  Declared in
 * include/syncrep/gpu.h; how a training loop uses it: docs/gpu.md.
 * Invariant: arguments are checked before anything is launched or pushed,
 * so SR_EINVAL means nothing happened.
 */
#include <stdint.h>
#include <stdlib.h>

#include "core/dtype.h"
#include "core/error.h"
#include "syncrep/worker_gpu.h"

/* Check one variable against the staging buffer; *bytes gets its size. */
static sr_err
check_var(const char *fn, size_t k, const sr_gpu_var *v, const void *pinned, size_t pinned_bytes,
          size_t *bytes)
{
    size_t es;

    if (v->name == NULL) {
        return sr_fail(SR_EINVAL, "%s: variable %zu has no name", fn, k);
    }
    if ((es = sr_dtype_size(v->dtype)) == 0) {
        return sr_fail(SR_EINVAL, "%s: '%s': unknown dtype %d", fn, v->name, (int)v->dtype);
    }
    if (v->count > SIZE_MAX / es) {
        return sr_fail(SR_EINVAL, "%s: '%s': count %zu overflows", fn, v->name, v->count);
    }
    *bytes = v->count * es;
    if (*bytes > pinned_bytes || (*bytes > 0 && pinned == NULL)) {
        return sr_fail(SR_EINVAL, "%s: '%s' needs %zu bytes of staging, pinned has %zu%s", fn,
                       v->name, *bytes, pinned_bytes, pinned == NULL ? " (NULL)" : "");
    }
    if (*bytes > 0 && v->dev_bufs == NULL) {
        return sr_fail(SR_EINVAL, "%s: '%s': dev_bufs is NULL", fn, v->name);
    }
    return SR_OK;
}

static sr_err
check_vars(const char *fn, sr_gpu *g, sr_client *c, const sr_gpu_var *vars, size_t n,
           const void *pinned, size_t pinned_bytes)
{
    size_t bytes;
    sr_err rc;

    if (g == NULL || c == NULL || (n > 0 && vars == NULL)) {
        return sr_fail(SR_EINVAL, "%s: NULL argument", fn);
    }
    for (size_t k = 0; k < n; k++) {
        if ((rc = check_var(fn, k, &vars[k], pinned, pinned_bytes, &bytes)) != SR_OK) {
            return rc;
        }
    }
    return SR_OK;
}

/* One grouped collective over the variables' device buffers, root 0, the
 * result in place on the root. */
static sr_err
group_vars(sr_gpu *g, sr_gpu_coll coll, const sr_gpu_var *vars, size_t n)
{
    sr_gpu_tensor *ts;
    sr_err         rc;

    if (n == 0) {
        return SR_OK;
    }
    if ((ts = calloc(n, sizeof(*ts))) == NULL) {
        return sr_fail(SR_ENOMEM, "gpu worker path: %zu tensors", n);
    }
    for (size_t k = 0; k < n; k++) {
        ts[k].bufs = vars[k].dev_bufs;
        ts[k].root_out = vars[k].dev_bufs != NULL ? vars[k].dev_bufs[0] : NULL;
        ts[k].count = vars[k].count;
        ts[k].dtype = vars[k].dtype;
    }
    rc = sr_gpu_group(g, coll, ts, n, SR_GPU_SUM, 0);
    free(ts);
    return rc;
}

sr_err
sr_gpu_push_average_vars(sr_gpu *g, sr_client *c, const sr_gpu_var *vars, size_t n, void *pinned,
                         size_t pinned_bytes)
{
    const char *fn = "sr_gpu_push_average";
    sr_err      rc;

    if ((rc = check_vars(fn, g, c, vars, n, pinned, pinned_bytes)) != SR_OK) {
        return rc;
    }
    if ((rc = group_vars(g, SR_GPU_AVERAGE, vars, n)) != SR_OK) {
        return rc;
    }
    for (size_t k = 0; k < n; k++) {
        size_t bytes = vars[k].count * sr_dtype_size(vars[k].dtype);
        if (bytes > 0 &&
            (rc = sr_gpu_copy_to_host(g, 0, pinned, vars[k].dev_bufs[0], bytes)) != SR_OK) {
            return rc;
        }
        int crc = sr_client_push(c, vars[k].name, pinned, bytes);
        if (crc != 0) {
            return (sr_err)crc; /* the client's own text: sr_client_error(c) */
        }
    }
    return SR_OK;
}

sr_err
sr_gpu_push_average(sr_gpu *g, sr_client *c, const char *name, void *const dev_bufs[], size_t count,
                    sr_dtype dtype, void *pinned, size_t pinned_bytes)
{
    sr_gpu_var v = {.name = name, .dev_bufs = dev_bufs, .count = count, .dtype = dtype};
    return sr_gpu_push_average_vars(g, c, &v, 1, pinned, pinned_bytes);
}

sr_err
sr_gpu_pull_broadcast_vars(sr_gpu *g, sr_client *c, const sr_gpu_var *vars, size_t n, void *pinned,
                           size_t pinned_bytes)
{
    const char *fn = "sr_gpu_pull_broadcast";
    sr_err      rc;

    if ((rc = check_vars(fn, g, c, vars, n, pinned, pinned_bytes)) != SR_OK) {
        return rc;
    }
    /* One staging buffer serves every variable in turn: each copy to the
     * root device completes before the next pull overwrites it. */
    for (size_t k = 0; k < n; k++) {
        size_t bytes = vars[k].count * sr_dtype_size(vars[k].dtype);
        int    crc = sr_client_pull(c, vars[k].name, pinned, bytes);
        if (crc != 0) {
            return (sr_err)crc;
        }
        if (bytes > 0 &&
            (rc = sr_gpu_copy_from_host(g, 0, vars[k].dev_bufs[0], pinned, bytes)) != SR_OK) {
            return rc;
        }
    }
    return group_vars(g, SR_GPU_BROADCAST, vars, n);
}

sr_err
sr_gpu_pull_broadcast(sr_gpu *g, sr_client *c, const char *name, void *const dev_bufs[],
                      size_t count, sr_dtype dtype, void *pinned, size_t pinned_bytes)
{
    sr_gpu_var v = {.name = name, .dev_bufs = dev_bufs, .count = count, .dtype = dtype};
    return sr_gpu_pull_broadcast_vars(g, c, &v, 1, pinned, pinned_bytes);
}
