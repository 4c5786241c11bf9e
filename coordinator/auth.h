/* CURVE authentication of the coordinator's socket (coordinator/auth.c,
 * docs/security.md).  Internal to the coordinator. */
#ifndef SR_COORD_AUTH_H
#define SR_COORD_AUTH_H

#include <stdint.h>
#include <zmq.h>

#include "core/error.h"

typedef struct sr_auth sr_auth;

/* Turn CURVE on for `router` (before it binds): its secret key from
 * secret_key_file, a ZAP handler admitting the keys in authorized_keys_file
 * (one Z85 key a line, '#' comments), and a monitor for failed handshakes.
 * Errors: SR_ENOENT (a file), SR_EINVAL (a malformed key, no keys),
 * SR_ENOTSUP (libzmq without CURVE), SR_EMSG. */
sr_err sr__auth_open(void *ctx, void *router, const char *secret_key_file,
                     const char *authorized_keys_file, sr_auth **out);
void   sr__auth_close(sr_auth *a);
/* The sockets the loop must poll (0 or 2 items written). */
int sr__auth_pollitems(sr_auth *a, zmq_pollitem_t *items);
/* Answer pending ZAP requests and read monitor events; never blocks. */
void sr__auth_handle(sr_auth *a);
/* The first key (40 Z85 characters) of a key file, NUL-terminated. */
sr_err sr__auth_read_key_file(const char *path, char out[41]);

/* issue 26: elastic.  The keys that may use CTL (--admin-keys: one Z85 key
 * a line, '#' comments, like the authorized keys; an admin key must also
 * be authorized to connect at all).  Errors: SR_ENOENT, SR_EINVAL (a
 * malformed key, no keys, more than the table holds). */
sr_err sr__auth_load_admin_keys(sr_auth *a, const char *path);
/* 1 if `z85` (a message's "User-Id" property: the client's public key) is
 * an admin key. */
int sr__auth_is_admin(const sr_auth *a, const char *z85);

#endif
