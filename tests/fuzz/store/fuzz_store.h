/*
 * The store fuzz target's entry points, shared by the libFuzzer build, the
 * corpus replay driver and the seed generator.
 *
 * Input format: byte 0 is the mode (bits below), bytes 1.. are the store
 * file, written as is to a private temporary directory (no -wal or -shm
 * beside it) and opened with sr_store_open (skip_quick_check 0).  An empty
 * input is mode 0 and an empty file.
 */
#ifndef SR_FUZZ_STORE_H
#define SR_FUZZ_STORE_H

#include <stddef.h>
#include <stdint.h>

#define FUZZ_STORE_RW          0x01 /* open read-write (else read-only) */
#define FUZZ_STORE_COMMIT      0x02 /* read-write: a small valid commit */
#define FUZZ_STORE_REWIND      0x04 /* read-write: rewind to the oldest checkpoint */
#define FUZZ_STORE_SYNC_NORMAL 0x08 /* sr_store_opts.sync NORMAL (else FULL) */
#define FUZZ_STORE_KEEP_SHIFT  4    /* keep_checkpoints = 1 + ((mode >> 4) & 3) */
#define FUZZ_STORE_CREATE      0x40 /* sr_store_opts.create (ignored read-only) */
#define FUZZ_STORE_INCARNATION 0x80 /* read-write: new incarnation + set_config */

/* Open the file, run every read path (and, read-write, the writes the mode
 * asks for), close, remove the file.  Every call must return an sr_err;
 * aborts on a crash-free contract breach the target can check (see
 * fuzz_store.c): that is a store bug, never bad input.  Returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 1 when the input's file opens read-only and sr_store_verify finds it
 * clean, else 0.  The replay driver requires it of every corpus file named
 * "valid-*", so the seeds cannot silently rot when the format changes. */
int fuzz_store_seed_ok(const uint8_t *data, size_t size);

#endif
