/*
 * The wire fuzz target's entry points, shared by the libFuzzer build and the
 * corpus replay driver.  Input format: a sequence of frames, each a u16
 * little-endian length and then that many bytes; the last frame is cut short
 * where the input ends, and frames past FUZZ_WIRE_MAX_FRAMES are ignored.
 * Frame 0 is the header, frames 1.. the body frames (as on the wire, without
 * the ROUTER's routing id frame).
 */
#ifndef SR_FUZZ_WIRE_H
#define SR_FUZZ_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define FUZZ_WIRE_MAX_FRAMES 32 /* the coordinator takes at most 32, routing id included */

/* Run every decoder on every frame (and on the whole input); whatever
 * decodes must re-encode to the same bytes, whatever an encoder writes must
 * decode.  Aborts on a violation: that is a codec bug.  Returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 1 when the input is a complete, well-formed message of the type its header
 * names (request or reply, body frames as docs/protocol.md lists them, data
 * frame sizes consistent with the descriptors), else 0.  The replay driver
 * requires it of every corpus file named "valid-*", so the seeds cannot
 * silently rot when the format changes. */
int fuzz_wire_message_ok(const uint8_t *data, size_t size);

#endif
