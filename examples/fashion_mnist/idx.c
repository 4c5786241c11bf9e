/*
 * IDX reader (idx.h).  The header is decoded by a pure function so it can be
 * tested (and fuzzed) on bytes; the loader only moves bytes through zlib's
 * gzread, which decompresses gzip files and passes plain files through.
 */
#include "examples/fashion_mnist/idx.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static sr_err fail(sr_err rc, char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static sr_err
fail(sr_err rc, char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL && err_len > 0) {
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static uint32_t
be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

sr_err
ex_idx_decode_header(const uint8_t *buf, size_t len, ex_idx_header *out, size_t *header_bytes,
                     char *err, size_t err_len)
{
    ex_idx_header h;
    size_t        need;

    if (buf == NULL || out == NULL || header_bytes == NULL) {
        return fail(SR_EINVAL, err, err_len, "ex_idx_decode_header: NULL argument");
    }
    if (len < 4) {
        return fail(SR_ECORRUPT, err, err_len, "header too short: %zu bytes, need 4", len);
    }
    if (buf[0] != 0 || buf[1] != 0) {
        return fail(SR_ECORRUPT, err, err_len,
                    "bad magic %02x %02x %02x %02x (an IDX file starts with 00 00)", buf[0], buf[1],
                    buf[2], buf[3]);
    }
    memset(&h, 0, sizeof(h));
    h.type = buf[2];
    h.ndim = buf[3];
    if (h.ndim < 1 || h.ndim > EX_IDX_MAX_DIMS) {
        return fail(SR_ECORRUPT, err, err_len, "bad dimension count %d (expected 1..%d)", h.ndim,
                    EX_IDX_MAX_DIMS);
    }
    need = EX_IDX_HEADER_BYTES(h.ndim);
    if (len < need) {
        return fail(SR_ECORRUPT, err, err_len, "header too short: %zu bytes, need %zu for %d sizes",
                    len, need, h.ndim);
    }
    h.count = 1;
    for (int i = 0; i < h.ndim; i++) {
        h.dims[i] = be32(buf + 4 + 4 * (size_t)i);
        if (h.dims[i] == 0) {
            return fail(SR_ECORRUPT, err, err_len, "size %d is 0", i);
        }
        if (h.count > SIZE_MAX / h.dims[i]) {
            return fail(SR_ECORRUPT, err, err_len, "sizes overflow (dimension %d = %u)", i,
                        h.dims[i]);
        }
        h.count *= h.dims[i];
    }
    *out = h;
    *header_bytes = need;
    return SR_OK;
}

/* Read exactly len bytes; the reason for a short read goes to err. */
static sr_err
read_exact(gzFile f, const char *path, void *buf, size_t len, const char *what, char *err,
           size_t err_len)
{
    uint8_t *p = buf;

    while (len > 0) {
        unsigned chunk = len > (1u << 30) ? (1u << 30) : (unsigned)len;
        int      n = gzread(f, p, chunk);
        if (n < 0) {
            int         zerr;
            const char *msg = gzerror(f, &zerr);
            return fail(SR_ECORRUPT, err, err_len, "%s: reading the %s: %s", path, what,
                        zerr == Z_ERRNO ? strerror(errno) : msg);
        }
        if (n == 0) {
            return fail(SR_ECORRUPT, err, err_len, "%s: truncated: the file ends inside the %s",
                        path, what);
        }
        p += n;
        len -= (size_t)n;
    }
    return SR_OK;
}

sr_err
ex_idx_load(const char *path, ex_idx *out, char *err, size_t err_len)
{
    uint8_t       hb[EX_IDX_HEADER_BYTES(EX_IDX_MAX_DIMS)];
    ex_idx_header h;
    size_t        hlen, got;
    uint8_t      *data = NULL, extra;
    gzFile        f;
    sr_err        rc;
    int           n;
    char          why[160];

    if (path == NULL || out == NULL) {
        return fail(SR_EINVAL, err, err_len, "ex_idx_load: NULL argument");
    }
    errno = 0;
    if ((f = gzopen(path, "rb")) == NULL) {
        return fail(SR_ENOENT, err, err_len, "%s: cannot open: %s", path,
                    errno ? strerror(errno) : "out of memory");
    }
    /* The magic says how many size fields follow; read them only if it is
     * sane, and let the decoder explain what is wrong otherwise. */
    if ((rc = read_exact(f, path, hb, 4, "header", err, err_len)) != SR_OK) {
        goto fail;
    }
    got = 4;
    if (hb[0] == 0 && hb[1] == 0 && hb[3] >= 1 && hb[3] <= EX_IDX_MAX_DIMS) {
        if ((rc = read_exact(f, path, hb + 4, 4 * (size_t)hb[3], "header", err, err_len)) !=
            SR_OK) {
            goto fail;
        }
        got += 4 * (size_t)hb[3];
    }
    if ((rc = ex_idx_decode_header(hb, got, &h, &hlen, why, sizeof(why))) != SR_OK) {
        rc = fail(rc, err, err_len, "%s: not an IDX file: %s", path, why);
        goto fail;
    }
    if (h.type != EX_IDX_TYPE_UBYTE) {
        rc = fail(SR_ENOTSUP, err, err_len,
                  "%s: element type 0x%02x is not supported (only 0x08, unsigned byte)", path,
                  h.type);
        goto fail;
    }
    if (h.count > EX_IDX_MAX_BYTES) {
        rc = fail(SR_ECORRUPT, err, err_len, "%s: header claims %zu bytes of data (limit %zu)",
                  path, h.count, EX_IDX_MAX_BYTES);
        goto fail;
    }
    if ((data = malloc(h.count)) == NULL) {
        rc = fail(SR_ENOMEM, err, err_len, "%s: %zu bytes", path, h.count);
        goto fail;
    }
    if ((rc = read_exact(f, path, data, h.count, "data", err, err_len)) != SR_OK) {
        goto fail;
    }
    /* Reading past the end also makes zlib check the gzip trailer (CRC and
     * length), so a damaged archive fails here rather than loading silently. */
    if ((n = gzread(f, &extra, 1)) != 0) {
        int zerr;
        rc = n < 0 ? fail(SR_ECORRUPT, err, err_len, "%s: %s", path, gzerror(f, &zerr))
                   : fail(SR_ECORRUPT, err, err_len, "%s: trailing bytes after %zu elements", path,
                          h.count);
        goto fail;
    }
    gzclose(f);
    out->h = h;
    out->data = data;
    return SR_OK;
fail:
    free(data);
    gzclose(f);
    return rc;
}

void
ex_idx_free(ex_idx *t)
{
    if (t == NULL) {
        return;
    }
    free(t->data);
    t->data = NULL;
}
