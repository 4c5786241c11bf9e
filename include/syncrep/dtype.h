/*
 * syncrep element types, shared by the client API (syncrep.h), gpu.h and
 * the coordinator.  Values travel on the wire and into the store: fixed.
 */
#ifndef SYNCREP_DTYPE_H
#define SYNCREP_DTYPE_H

/* Element types.  Values travel on the wire and into the store: fixed. */
typedef enum { SR_FLOAT32 = 1, SR_FLOAT64 = 2, SR_INT32 = 3, SR_INT64 = 4 } sr_dtype;

#endif
