/* dtype helpers: sizes, names, and shape arithmetic with overflow checks. */
#ifndef SR_CORE_DTYPE_H
#define SR_CORE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "syncrep/dtype.h"

/* Largest ndim syncrep accepts anywhere (wire, store, API). */
#define SR_MAX_NDIM 8

/* Element size in bytes; 0 for an unknown dtype. */
size_t sr_dtype_size(int dtype);
/* "float32", "float64", "int32", "int64"; "?" for unknown. */
const char *sr_dtype_name(int dtype);
/* Parse a name as above; SR_EINVAL for unknown. */
sr_err sr_dtype_parse(const char *name, sr_dtype *out);
/* 1 for float32/float64 (the dtypes gradients may be pushed to). */
int sr_dtype_is_float(int dtype);
/* Number of elements and bytes of a shape.  Checks ndim in [0, SR_MAX_NDIM],
 * every dimension >= 0 and no overflow; SR_EINVAL with detail otherwise. */
sr_err sr_shape_elems(int ndim, const int64_t *shape, uint64_t *out_elems);
sr_err sr_shape_bytes(int dtype, int ndim, const int64_t *shape, uint64_t *out_bytes);
/* Format "[2,3]" ("[]" for a scalar) into buf. */
void sr_shape_format(int ndim, const int64_t *shape, char *buf, size_t len);

#endif
