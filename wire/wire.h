/*
 * The wire protocol: pure encode/decode functions shared by the coordinator
 * and the client.  Nothing here touches a socket.  Every decoder takes
 * (buf, len, out), checks every length before reading, never allocates, and
 * returns SR_EPROTO with a detail naming the field on bad input.
 * The message catalogue and framing: docs/protocol.md.
 *
 * A message is a ZeroMQ multipart message:
 *   frame 0       the fixed header (SR_WIRE_HEADER_BYTES, little-endian)
 *   frame 1..     the body frames of the type (descriptor, then raw tensor
 *                 data frames, never re-encoded: IEEE-754 / two's complement,
 *                 little-endian, as in memory on the supported hosts)
 * (the coordinator's ROUTER adds the peer's routing id frame in front).
 */
#ifndef SR_WIRE_H
#define SR_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/error.h"

#define SR_WIRE_MAGIC        0x31505253u /* bytes "SRP1" */
#define SR_WIRE_VERSION      2 /* 2: partitions (pushdesc offset, hello partition_bytes) */
#define SR_WIRE_HEADER_BYTES 56
#define SR_WIRE_MAX_NAME     255   /* bytes in a variable name, no NUL inside */
#define SR_WIRE_REPLY        0x80u /* type bit set on every reply */

/* Message types.  Never renumber or reuse a value. */
typedef enum {
    SR_MSG_HELLO = 1,       /* -> HELLO|R with sr_wire_hello_rep */
    SR_MSG_DECLARE = 2,     /* frame1 vardesc, frame2 initial value (optional), or
                               (SR_WIRE_DECLARE_PART) pushdesc + one part of it */
    SR_MSG_READY = 3,       /* frame1 sr_wire_ready_req -> sr_wire_ready_rep */
    SR_MSG_PULL = 4,        /* frame1 name -> frame1 vardesc, frame2 data (SR_WIRE_F_MANY:
                               names -> vars_hdr, then vardesc + data per name) */
    SR_MSG_PUSH = 5,        /* frame1 pushdesc (count = bytes), frame2 data -> push_rep */
    SR_MSG_PUSH_SPARSE = 6, /* frame1 pushdesc (count = rows), frame2 int64 indices,
                               frame3 rows -> push_rep */
    SR_MSG_TOKEN = 7,       /* parked until a token exists; reply local_step = token */
    SR_MSG_PING = 8,        /* -> sr_wire_ping_rep (global step, ready) */
    SR_MSG_STATUS = 9,      /* -> frame1 JSON text */
    SR_MSG_BYE = 10,        /* client closing; reply optional */
    SR_MSG_FINISH = 11,     /* the chief ends the job; reply header only */
    SR_MSG_MODEL = 12,      /* frame1 desclist (the model's tensors) -> frame1 desclist
                               (its packs), frame2 places (wire_model.c) */
    SR_MSG_CTL = 13,        /* issue 26: frame1 sr_wire_ctl_req -> frame1 text (the change, or
                               why it was refused); an operator's, not a worker's */
    /* issue 24: cursor.  frame1 the worker's data cursor (at most
     * SR_WIRE_CURSOR_MAX bytes) for its gradient of local_step -> header
     * only; no body: ask -> frame1 the cursor of the last step its gradient
     * went into (absent: none).  docs/protocol.md, CURSOR. */
    SR_MSG_CURSOR = 14,
} sr_wire_type;

#define SR_WIRE_CURSOR_MAX 4096 /* issue 24: bytes of a data cursor */

/* sr_wire_vardesc.flags: SR_DECLARE_NOT_TRAINABLE (0x1, syncrep.h) and: */
#define SR_WIRE_DECLARE_CHECK_ONLY 0x2u /* DECLARE: never create, only check */
#define SR_WIRE_DECLARE_PART                                 \
    0x4u /* DECLARE: frame 2 a pushdesc, frame 3 one part of \
            the initial value (docs/protocol.md) */

/* Header flags. */
#define SR_WIRE_F_RESEND    0x1u /* this request is a resend of the same request_id */
#define SR_WIRE_F_WANT_VARS 0x2u /* TOKEN: send the variables with the token, if small */
/* Chains (docs/protocol.md, Chains): on a PUSH request, another request
 * follows in the same ZeroMQ message after this one's two body frames; on a
 * push's answer, another reply follows after its one body frame; on the
 * HELLO reply, the coordinator accepts chains. */
#define SR_WIRE_F_CHAIN 0x4u
/* Pulls of many variables (docs/protocol.md, PULL): on a PULL request, the
 * body is 1..SR_WIRE_PULL_MANY_MAX name frames and the reply carries their
 * values as a TOKEN reply carries the model (sr_wire_vars_hdr, then a
 * vardesc and a value per name, in the request's order); on the HELLO
 * reply, the coordinator takes such pulls. */
#define SR_WIRE_F_MANY        0x8u
#define SR_WIRE_PULL_MANY_MAX 24
/* Token deltas (issue 23, docs/protocol.md, TOKEN): on a TOKEN request with
 * SR_WIRE_F_WANT_VARS, frame 1 is an sr_wire_have: the client holds every
 * variable's value of that global step, from this incarnation's earlier token
 * replies.  On the reply, the variables carried are only those changed
 * since that step; the others are unchanged. */
#define SR_WIRE_F_HAVE_VARS 0x10u

/* Frame 0 of every message.  Replies echo request_id, client_id, task_index
 * and carry the coordinator's incarnation; status is 0 or a negative sr_err,
 * and a failed reply's frame 1 is the error text (UTF-8, no NUL). */
typedef struct {
    uint8_t  type; /* sr_wire_type, | SR_WIRE_REPLY on replies */
    uint16_t flags;
    uint64_t request_id;  /* client-chosen, increasing per client */
    uint64_t incarnation; /* request: the client's view (0 = none yet);
                             reply: the coordinator's */
    uint64_t client_id;   /* random per client instance; deduplication key */
    int32_t  task_index;
    int32_t  status;     /* replies: sr_err */
    int64_t  local_step; /* push: the step the gradient was computed at;
                            token reply: the token's value */
    uint64_t seq;        /* push: per-client sequence number (dedup) */
} sr_wire_header;

/* 56 bytes: magic u32, version u8, type u8, flags u16, request_id u64,
 * incarnation u64, client_id u64, task_index i32, status i32, local_step i64,
 * seq u64. */
void sr_wire_header_encode(const sr_wire_header *h, uint8_t out[SR_WIRE_HEADER_BYTES]);
/* Checks len, magic, version, and that the type (without the reply bit) is
 * a known sr_wire_type. */
sr_err sr_wire_header_decode(const uint8_t *buf, size_t len, sr_wire_header *out);

/* A variable name frame on its own (PULL request): u16 len, bytes. */
typedef struct {
    char name[SR_WIRE_MAX_NAME + 1]; /* NUL-terminated copy */
} sr_wire_name;

/* A variable's description (DECLARE request, PULL reply):
 * u16 name_len, name, u8 dtype, u8 flags, u8 ndim, ndim x i64 shape. */
typedef struct {
    char    name[SR_WIRE_MAX_NAME + 1];
    uint8_t dtype;              /* sr_dtype */
    uint8_t flags;              /* SR_DECLARE_* */
    uint8_t ndim;               /* <= SR_MAX_NDIM */
    int64_t shape[SR_MAX_NDIM]; /* each >= 0 */
} sr_wire_vardesc;

/* A push's description: u16 name_len, name, u8 dtype, u64 count, u64 offset
 * (PUSH: bytes of frame 2, and its byte offset in the variable: the whole
 * variable or exactly one of its partitions; PUSH_SPARSE: rows, frame 2 =
 * count x 8 bytes, offset 0). */
typedef struct {
    char     name[SR_WIRE_MAX_NAME + 1];
    uint8_t  dtype;
    uint64_t count;
    uint64_t offset;
} sr_wire_pushdesc;

/* HELLO reply body: i64 global_step, u8 model_ready, i32 R, i32 N,
 * u64 max_message_bytes, u64 partition_bytes. */
typedef struct {
    int64_t  global_step;
    uint8_t  model_ready;
    int32_t  replicas_to_aggregate;
    int32_t  total_replicas;
    uint64_t max_message_bytes;
    uint64_t partition_bytes; /* variables above this are split (sr_wire_partition);
                                 0 = never */
} sr_wire_hello_rep;

/* The partition layout of a variable (docs/protocol.md, Partitions): a
 * variable of more than partition_bytes bytes (partition_bytes > 0) is split
 * along its first dimension into partitions of
 * max(1, partition_bytes / row_bytes) rows, the last one shorter; any other
 * variable is one partition.  row_bytes = nbytes / rows (rows = shape[0],
 * 1 for a scalar).  Returns the rows per partition (>= 1), or 0 when the
 * variable is one partition. */
uint64_t sr_wire_partition_rows(uint64_t nbytes, uint64_t rows, uint64_t partition_bytes);

/* The whole layout, as the coordinator, the client and the chaos verifier
 * use it: rows = shape[0] (1 for a scalar or an empty first dimension),
 * part_rows per partition (rows when the variable is one partition), nparts
 * >= 1; partition p holds rows [p * part_rows, min((p + 1) * part_rows, rows)). */
typedef struct {
    uint64_t rows, part_rows, nparts;
} sr_wire_layout;
sr_wire_layout sr_wire_partition_layout(uint64_t nbytes, int ndim, int64_t shape0,
                                        uint64_t partition_bytes);

/* READY request body: u8 mark (1: the chief marks the model ready; 0: ask). */
typedef struct {
    uint8_t mark;
} sr_wire_ready_req;

/* READY and PING reply body: u8 model_ready, i64 global_step. */
typedef struct {
    uint8_t model_ready;
    int64_t global_step;
} sr_wire_ping_rep;

/* PUSH / PUSH_SPARSE reply body: u8 outcome. */
typedef enum {
    SR_PUSH_ACCEPTED = 0,
    SR_PUSH_STALE = 1,
    SR_PUSH_DUPLICATE = 2,
} sr_wire_push_outcome;
typedef struct {
    uint8_t outcome; /* sr_wire_push_outcome */
} sr_wire_push_rep;

/* TOKEN reply with the variables piggybacked (request flag
 * SR_WIRE_F_WANT_VARS, model small enough): frame 1 is this header
 * (i64 global_step of the values, u32 nvars), then nvars pairs of frames
 * (vardesc, value). */
typedef struct {
    int64_t  global_step;
    uint32_t nvars;
} sr_wire_vars_hdr;

/* TOKEN request body with SR_WIRE_F_HAVE_VARS: i64 global_step (>= 0) of
 * the values the client holds. */
typedef struct {
    int64_t global_step;
} sr_wire_have;

/* Encoders write into out[cap] and return the bytes written, or 0 when cap
 * is too small or a field is out of range (a name too long or with a NUL,
 * ndim > SR_MAX_NDIM).  SR_WIRE_BODY_MAX bounds every body above. */
#define SR_WIRE_BODY_MAX (2 + SR_WIRE_MAX_NAME + 3 + 8 * SR_MAX_NDIM + 16)

size_t sr_wire_name_encode(const char *name, uint8_t *out, size_t cap);
sr_err sr_wire_name_decode(const uint8_t *buf, size_t len, sr_wire_name *out);

size_t sr_wire_vardesc_encode(const sr_wire_vardesc *v, uint8_t *out, size_t cap);
/* Also checks dtype is known, ndim <= SR_MAX_NDIM, dims >= 0, no trailing bytes. */
sr_err sr_wire_vardesc_decode(const uint8_t *buf, size_t len, sr_wire_vardesc *out);

size_t sr_wire_pushdesc_encode(const sr_wire_pushdesc *p, uint8_t *out, size_t cap);
sr_err sr_wire_pushdesc_decode(const uint8_t *buf, size_t len, sr_wire_pushdesc *out);

size_t sr_wire_hello_rep_encode(const sr_wire_hello_rep *r, uint8_t *out, size_t cap);
sr_err sr_wire_hello_rep_decode(const uint8_t *buf, size_t len, sr_wire_hello_rep *out);

size_t sr_wire_ready_req_encode(const sr_wire_ready_req *r, uint8_t *out, size_t cap);
sr_err sr_wire_ready_req_decode(const uint8_t *buf, size_t len, sr_wire_ready_req *out);

size_t sr_wire_ping_rep_encode(const sr_wire_ping_rep *r, uint8_t *out, size_t cap);
sr_err sr_wire_ping_rep_decode(const uint8_t *buf, size_t len, sr_wire_ping_rep *out);

size_t sr_wire_push_rep_encode(const sr_wire_push_rep *r, uint8_t *out, size_t cap);
sr_err sr_wire_push_rep_decode(const uint8_t *buf, size_t len, sr_wire_push_rep *out);

size_t sr_wire_vars_hdr_encode(const sr_wire_vars_hdr *v, uint8_t *out, size_t cap);
sr_err sr_wire_vars_hdr_decode(const uint8_t *buf, size_t len, sr_wire_vars_hdr *out);

size_t sr_wire_have_encode(const sr_wire_have *v, uint8_t *out, size_t cap);
/* Also checks global_step >= 0. */
sr_err sr_wire_have_decode(const uint8_t *buf, size_t len, sr_wire_have *out);

/* ---- issue 26: elastic (wire_ctl.c) ------------------------------------
 * CTL request body (docs/protocol.md, "CTL (12)"): u8 op, u8 fields,
 * i32 replicas_to_aggregate, i32 total_replicas, i32 min_replicas,
 * f64 learning_rate (22 bytes); a field not in `fields` is ignored (0). */
enum { SR_WIRE_CTL_SET_REPLICAS = 1, SR_WIRE_CTL_SET = 2 };
#define SR_WIRE_CTL_R         0x1u
#define SR_WIRE_CTL_N         0x2u
#define SR_WIRE_CTL_M         0x4u
#define SR_WIRE_CTL_LR        0x8u
#define SR_WIRE_CTL_REQ_BYTES 22
typedef struct {
    uint8_t op;     /* SR_WIRE_CTL_SET_REPLICAS (R, N, M) or SR_WIRE_CTL_SET (learning rate) */
    uint8_t fields; /* SR_WIRE_CTL_* bits: the values given */
    int32_t replicas_to_aggregate;
    int32_t total_replicas;
    int32_t min_replicas;
    double  learning_rate;
} sr_wire_ctl_req;
size_t sr_wire_ctl_req_encode(const sr_wire_ctl_req *r, uint8_t *out, size_t cap);
/* Also checks: a known op, fields a non-empty subset of the op's (R, N, M
 * for set-replicas; the learning rate for set), given counts >= 1 and a
 * given learning rate finite and > 0.  Exactly 22 bytes. */
sr_err sr_wire_ctl_req_decode(const uint8_t *buf, size_t len, sr_wire_ctl_req *out);

/* "HELLO", "PUSH", ... for logs; "?" for unknown. */
const char *sr_wire_type_name(int type);

/* ---- MODEL (wire_model.c; docs/protocol.md, MODEL) ---------------------
 * A model declared as a whole: the request lists its tensors, the reply
 * the packs that hold them and each tensor's place in one. */
#define SR_WIRE_MODEL_MAX 65536 /* tensors of one MODEL request */

/* A list of descriptors: u32 n, then n x (u16 len, vardesc of len bytes).
 * _size is the bytes _encode writes (0: a descriptor cannot be encoded);
 * _encode returns them, or 0 when cap is too small. */
size_t sr_wire_desclist_size(const sr_wire_vardesc *d, size_t n);
size_t sr_wire_desclist_encode(const sr_wire_vardesc *d, size_t n, uint8_t *out, size_t cap);
/* The list's count, checked against max and against len (every entry takes
 * at least 7 bytes). */
sr_err sr_wire_desclist_count(const uint8_t *buf, size_t len, size_t max, size_t *n);
/* Exactly n entries into out[n] (n from _count); no trailing bytes. */
sr_err sr_wire_desclist_decode(const uint8_t *buf, size_t len, sr_wire_vardesc *out, size_t n);

/* Where a tensor of a MODEL request lives: in pack `pack` (an index into
 * the reply's packs) from byte `offset`, or (SR_WIRE_PLACE_ALONE) as a
 * variable of its own name.  n x (u32 pack, u64 offset). */
#define SR_WIRE_PLACE_ALONE 0xffffffffu
#define SR_WIRE_PLACE_BYTES 12
typedef struct {
    uint32_t pack;
    uint64_t offset;
} sr_wire_place;
size_t sr_wire_places_encode(const sr_wire_place *p, size_t n, uint8_t *out, size_t cap);
/* len must be exactly n x SR_WIRE_PLACE_BYTES. */
sr_err sr_wire_places_decode(const uint8_t *buf, size_t len, sr_wire_place *out, size_t n);

#endif
