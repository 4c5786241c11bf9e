/*
 * A STATUS client: asks a running coordinator for its state (the STATUS
 * message, docs/protocol.md "STATUS (9)") over a DEALER of its own.  Used by
 * `syncrep status` and the chaos harness.  One thread per client.
 */
#ifndef SR_TOOLS_STATUS_CLIENT_H
#define SR_TOOLS_STATUS_CLIENT_H

#include <stddef.h>

#include "core/error.h"

typedef struct sr_status_client sr_status_client;

/* Connect to endpoint (a ZeroMQ context and socket of the client's own).
 * Success: *out owns the client; release with sr_status_client_close.
 * Errors: SR_EINVAL (NULL argument), SR_ENOMEM, SR_EMSG (ZeroMQ refused the
 * endpoint; the detail says why). */
sr_err sr_status_client_open(sr_status_client **out, const char *endpoint);

/* The same with CURVE (docs/security.md) when server_public_key is not
 * NULL: the coordinator's public key and this client's key pair, each 40
 * Z85 characters (all three, or server_public_key NULL for plaintext).
 * Errors as sr_status_client_open, and SR_EINVAL (a key missing or not 40
 * Z85 characters; the detail names it), SR_ENOTSUP (libzmq without CURVE). */
sr_err sr_status_client_open_curve(sr_status_client **out, const char *endpoint,
                                   const char *server_public_key, const char *public_key,
                                   const char *secret_key);

/* Send one STATUS request and wait up to timeout_ms for its answer (late
 * answers to earlier requests are skipped).  Success: *status is the
 * reply's status (SR_OK, or the coordinator's refusal) and *text a malloc'd,
 * NUL-terminated copy of its body (the JSON, or the refusal's text), *len
 * its length; the caller frees *text.  Errors: SR_ETIMEDOUT (no answer),
 * SR_EPROTO (a malformed reply), SR_EMSG, SR_ENOMEM; outputs untouched. */
sr_err sr_status_client_ask(sr_status_client *c, int timeout_ms, int *status, char **text,
                            size_t *len);

/* Close the socket and the context; NULL is a no-op. */
void sr_status_client_close(sr_status_client *c);

#endif
