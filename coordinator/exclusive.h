/* What one coordinator must have to itself: its store and its endpoint. */
#ifndef SR_COORD_EXCLUSIVE_H
#define SR_COORD_EXCLUSIVE_H

#include "core/error.h"

/* Take the store's writer lock: an exclusive flock(2) on STORE-lock, held
 * until *fd is closed (by sr__coord_unlock_store, or by the kernel when the
 * process dies, however it dies).  SR_EBUSY, naming the holder's pid, if
 * another process holds it. */
sr_err sr__coord_lock_store(const char *store_path, int *fd);
void   sr__coord_unlock_store(int fd);

/* An ipc:// endpoint where another process is listening: SR_EBUSY (ZeroMQ
 * would replace its socket file and take the endpoint over silently).  A
 * tcp://ADDR:PORT whose port is bound already (ADDR * or IPv4): SR_EBUSY
 * too, before the store is touched.  Anything else: SR_OK. */
sr_err sr__coord_check_endpoint(const char *endpoint);

#endif
