/*
 * Issue 26, elastic: the CTL request's codec (docs/protocol.md, "CTL (12)").
 * Pure: (buf, len, out), every length and field checked, nothing allocated.
 */
#include <math.h>
#include <string.h>

#include "core/bytes.h"
#include "wire/wire.h"

size_t
sr_wire_ctl_req_encode(const sr_wire_ctl_req *r, uint8_t *out, size_t cap)
{
    if (r == NULL || out == NULL || cap < SR_WIRE_CTL_REQ_BYTES) {
        return 0;
    }
    out[0] = r->op;
    out[1] = r->fields;
    sr_put_u32(out + 2, (uint32_t)r->replicas_to_aggregate);
    sr_put_u32(out + 6, (uint32_t)r->total_replicas);
    sr_put_u32(out + 10, (uint32_t)r->min_replicas);
    sr_put_f64(out + 14, r->learning_rate);
    return SR_WIRE_CTL_REQ_BYTES;
}

sr_err
sr_wire_ctl_req_decode(const uint8_t *buf, size_t len, sr_wire_ctl_req *out)
{
    sr_wire_ctl_req r;
    unsigned        allowed;

    if (buf == NULL || out == NULL) {
        return sr_fail(SR_EPROTO, "ctl_req: NULL argument");
    }
    if (len != SR_WIRE_CTL_REQ_BYTES) {
        return sr_fail(SR_EPROTO, "ctl_req: %zu bytes, want %d", len, SR_WIRE_CTL_REQ_BYTES);
    }
    memset(&r, 0, sizeof(r));
    r.op = buf[0];
    r.fields = buf[1];
    r.replicas_to_aggregate = (int32_t)sr_get_u32(buf + 2);
    r.total_replicas = (int32_t)sr_get_u32(buf + 6);
    r.min_replicas = (int32_t)sr_get_u32(buf + 10);
    r.learning_rate = sr_get_f64(buf + 14);
    if (r.op == SR_WIRE_CTL_SET_REPLICAS) {
        allowed = SR_WIRE_CTL_R | SR_WIRE_CTL_N | SR_WIRE_CTL_M;
    } else if (r.op == SR_WIRE_CTL_SET) {
        allowed = SR_WIRE_CTL_LR;
    } else {
        return sr_fail(SR_EPROTO, "ctl_req: op %u unknown (set-replicas=%d set=%d)", (unsigned)r.op,
                       SR_WIRE_CTL_SET_REPLICAS, SR_WIRE_CTL_SET);
    }
    if (r.fields == 0 || (r.fields & ~allowed) != 0) {
        return sr_fail(SR_EPROTO, "ctl_req: fields 0x%02x are not a non-empty subset of 0x%02x",
                       (unsigned)r.fields, allowed);
    }
    if (((r.fields & SR_WIRE_CTL_R) && r.replicas_to_aggregate < 1) ||
        ((r.fields & SR_WIRE_CTL_N) && r.total_replicas < 1) ||
        ((r.fields & SR_WIRE_CTL_M) && r.min_replicas < 1)) {
        return sr_fail(SR_EPROTO, "ctl_req: a replica count below 1 (R %d, N %d, M %d)",
                       (int)r.replicas_to_aggregate, (int)r.total_replicas, (int)r.min_replicas);
    }
    if ((r.fields & SR_WIRE_CTL_LR) && !(isfinite(r.learning_rate) && r.learning_rate > 0)) {
        return sr_fail(SR_EPROTO, "ctl_req: learning rate %g is not finite and > 0",
                       r.learning_rate);
    }
    *out = r;
    return SR_OK;
}
