/* What a fuzz target gives the shared corpus replay driver (replay.c). */
#ifndef SR_FUZZ_REPLAY_H
#define SR_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>

/* The libFuzzer entry point; aborts on a bug. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* 1 if a "valid-*" seed is what its name says. */
int fuzz_seed_ok(const uint8_t *data, size_t size);
/* What a refused valid-* seed is not, for the message ("is not ..."). */
extern const char fuzz_seed_rule[];

#endif
