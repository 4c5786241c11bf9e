/*
 * IDX files (the MNIST / Fashion-MNIST format): a 4-byte magic
 * {0, 0, type, ndim}, ndim big-endian uint32 sizes, then the elements in
 * row-major order.  Files may be gzip-compressed (read through zlib, which
 * also reads plain files).  Only the unsigned-byte type (0x08) is loaded:
 * it is what image and label files use.  See docs/example.md.
 */
#ifndef EX_IDX_H
#define EX_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "syncrep/error.h"

#define EX_IDX_MAX_DIMS   4
#define EX_IDX_TYPE_UBYTE 0x08
/* Largest payload ex_idx_load accepts: refuses absurd sizes in a corrupt
 * header before allocating. */
#define EX_IDX_MAX_BYTES ((size_t)1 << 30)

/* A decoded header. */
typedef struct {
    uint8_t  type;                  /* element type code (0x08 ubyte, 0x0D float, ...) */
    int      ndim;                  /* 1..EX_IDX_MAX_DIMS */
    uint32_t dims[EX_IDX_MAX_DIMS]; /* each >= 1 */
    size_t   count;                 /* elements: the product of dims */
} ex_idx_header;

/* A loaded unsigned-byte IDX file. */
typedef struct {
    ex_idx_header h;
    uint8_t      *data; /* h.count bytes, owned; free with ex_idx_free */
} ex_idx;

/* Bytes of a header with ndim dimensions (4 + 4 ndim). */
#define EX_IDX_HEADER_BYTES(ndim) (4 + 4 * (size_t)(ndim))

/* Decode the header at buf[0..len): pure, no I/O.  len must hold at least the
 * 4-byte magic, and then all ndim sizes.  Success: *out filled and
 * *header_bytes = its length.  Errors: SR_EINVAL (NULL argument),
 * SR_ECORRUPT (short buffer, bad magic, ndim 0 or > EX_IDX_MAX_DIMS, a zero
 * size, a product that overflows); the reason goes to err[0..err_len). */
sr_err ex_idx_decode_header(const uint8_t *buf, size_t len, ex_idx_header *out,
                            size_t *header_bytes, char *err, size_t err_len);

/* Read the IDX file at path (gzip or plain) into *out.  Refuses any type but
 * unsigned byte, payloads over EX_IDX_MAX_BYTES, truncated files and trailing
 * bytes.  Success: *out owns the data.  Failure: *out untouched, the reason
 * (with the path) in err.  Errors: SR_EINVAL, SR_ENOENT (cannot open),
 * SR_ECORRUPT (malformed), SR_ENOTSUP (another element type), SR_ENOMEM. */
sr_err ex_idx_load(const char *path, ex_idx *out, char *err, size_t err_len);

/* Free what ex_idx_load allocated; NULL or a zeroed struct is fine. */
void ex_idx_free(ex_idx *t);

#endif
