// SocketGuard: puts an Http2Guard on every connection grammard's gRPC
// listeners accept (its TCP port and its Unix socket), and cuts a connection
// its guard condemns (rapid reset, a header block that never ends, a SETTINGS
// flood: see http2_guard.h). It also bounds how fast new connections are taken
// (a burst of 256, then 128 a second): past it they are closed at once, so that
// a flood spread over many connections cannot build calls faster than that.
//
// gRPC 1.51 offers no hook below its HTTP/2 parser, so this works beneath
// it: the grammard binary defines accept4, recvmsg and close, which
// libgrpc's own calls resolve to (an executable's definitions come first in
// symbol lookup). Each makes the system call itself; for a connection
// accepted on a guarded port, recvmsg also feeds what was read to the
// connection's guard, and on a condemning verdict shuts the socket down and
// reports ECONNRESET, which gRPC takes as the peer going away: the
// connection and its calls end, nothing else does. Bytes are only read,
// never changed or copied. TLS connections are not HTTP/2 in the clear and
// go unwatched (see http2_guard.h). Sanitizer builds, whose runtimes hook
// the same functions, leave the hooks out (Active() is then false).
//
// Cost: per read, a table lookup and a parse of the frame headers in the
// bytes read; per accept, one getsockname. Thread-safety: every function
// may be called from any thread.
#ifndef GRAMMARD_SERVICE_SOCKET_GUARD_H_
#define GRAMMARD_SERVICE_SOCKET_GUARD_H_

#include <cstdint>

#include "service/metrics/metrics.h"

namespace grammard::service::socket_guard {

// Whether this build has the hooks.
bool Active();

// Connections accepted from now on whose local port is `port` are guarded
// (a few ports at most: the gRPC listener's).
void GuardPort(int port);

// Connections accepted from now on on any Unix socket listener are guarded
// (grammard listens on one at most: --unix_socket).
void GuardUnixSockets();

// Counts cut connections by reason ("rapid_reset", "endless_headers",
// "settings_flood", "connection_flood") in `family`, which must outlive the
// process's use of sockets.
void CountCutsIn(metrics::CounterFamily* family);

// Connections cut so far, over all reasons.
int64_t Cuts();

}  // namespace grammard::service::socket_guard

#endif  // GRAMMARD_SERVICE_SOCKET_GUARD_H_
