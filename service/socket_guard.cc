#include "service/socket_guard.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <string_view>

#include "service/http2_guard.h"

// The sanitizers' runtimes hook the same functions: their builds go
// without ours.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GRAMMARD_SOCKET_HOOKS 0
#else
#define GRAMMARD_SOCKET_HOOKS 1
#endif

namespace grammard::service::socket_guard {
namespace {

// Descriptors past this go unguarded (the daemon's limit on open files is
// far below it).
constexpr int kMaxFds = 1 << 16;
constexpr int kMaxPorts = 4;
// Stands in the port list for every Unix socket listener.
constexpr int kUnixPort = -2;

#if GRAMMARD_SOCKET_HOOKS
// Per descriptor: its guard (made on first use, reused by later
// connections on the same number, never freed, so that a read racing a
// close never touches freed memory) and whether it is watched.
std::atomic<Http2Guard*> guards[kMaxFds];
std::atomic<bool> watched[kMaxFds];
#endif
std::atomic<int> ports[kMaxPorts];
std::atomic<int> num_ports{0};

#if GRAMMARD_SOCKET_HOOKS
// Resets over all guarded connections (see http2_guard.h).
RateLimit shared_resets(Http2Guard::kSharedResetBurst,
                        Http2Guard::kSharedResetsPerSecond);
// New connections on guarded ports: a burst of kAcceptBurst, then
// kAcceptsPerSecond. A client opening connections faster (to spread a
// flood over them) has the others closed as soon as they are accepted;
// connections already open are not touched.
constexpr double kAcceptBurst = 256;
constexpr double kAcceptsPerSecond = 128;
RateLimit accepts(kAcceptBurst, kAcceptsPerSecond);

#endif

// Where cuts are counted: by verdict, and the connection flood last.
constexpr int kNumVerdicts = 5;
constexpr int kConnectionFlood = kNumVerdicts;
std::atomic<metrics::Counter*> counters[kNumVerdicts + 1];
std::atomic<int64_t> cuts{0};

#if GRAMMARD_SOCKET_HOOKS
void CountCut(int which) {
  cuts.fetch_add(1, std::memory_order_relaxed);
  if (metrics::Counter* c = counters[which].load(std::memory_order_acquire)) {
    c->Increment();
  }
}

int LocalPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return -1;
  }
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  }
  if (addr.ss_family == AF_UNIX) return kUnixPort;
  return -1;
}

bool Guarded(int listener) {
  const int n = num_ports.load(std::memory_order_acquire);
  if (n == 0) return false;
  const int port = LocalPort(listener);
  for (int i = 0; i < n; ++i) {
    if (ports[i].load(std::memory_order_relaxed) == port) return true;
  }
  return false;
}

void Watch(int fd) {
  Http2Guard* guard = guards[fd].load(std::memory_order_acquire);
  if (guard == nullptr) {
    guard = new Http2Guard(&shared_resets);
    guards[fd].store(guard, std::memory_order_release);
  }
  guard->Reset();
  watched[fd].store(true, std::memory_order_release);
}

// Whether the connection on `fd` may go on after reading `n` bytes into
// `msg`.
bool Judge(int fd, const msghdr* msg, size_t n) {
  Http2Guard* guard = guards[fd].load(std::memory_order_acquire);
  const auto now = Http2Guard::Clock::now();
  Http2Guard::Verdict verdict = Http2Guard::Verdict::kOk;
  for (size_t i = 0; i < msg->msg_iovlen && n > 0; ++i) {
    const size_t len = std::min(n, msg->msg_iov[i].iov_len);
    verdict = guard->Feed(
        std::string_view(static_cast<const char*>(msg->msg_iov[i].iov_base),
                         len),
        now);
    n -= len;
    if (verdict != Http2Guard::Verdict::kOk) break;
  }
  if (verdict == Http2Guard::Verdict::kOk) return true;
  watched[fd].store(false, std::memory_order_relaxed);
  if (verdict == Http2Guard::Verdict::kNotHttp2) return true;
  CountCut(static_cast<int>(verdict));
  return false;
}

#endif

}  // namespace

bool Active() { return GRAMMARD_SOCKET_HOOKS; }

void GuardPort(int port) {
  const int n = num_ports.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (ports[i].load() == port) return;
  }
  if (n == kMaxPorts) return;
  ports[n].store(port, std::memory_order_relaxed);
  num_ports.store(n + 1, std::memory_order_release);
}

void GuardUnixSockets() { GuardPort(kUnixPort); }

void CountCutsIn(metrics::CounterFamily* family) {
  for (Http2Guard::Verdict v :
       {Http2Guard::Verdict::kRapidReset, Http2Guard::Verdict::kEndlessHeaders,
        Http2Guard::Verdict::kSettingsFlood}) {
    auto counter = family->WithLabels({Http2Guard::VerdictName(v)});
    if (counter.ok()) {
      counters[static_cast<int>(v)].store(*counter, std::memory_order_release);
    }
  }
  auto flood = family->WithLabels({"connection_flood"});
  if (flood.ok()) counters[kConnectionFlood].store(*flood);
}

int64_t Cuts() { return cuts.load(std::memory_order_relaxed); }

}  // namespace grammard::service::socket_guard

#if GRAMMARD_SOCKET_HOOKS

// The hooks (see the header). Each makes its system call directly.
namespace gs = grammard::service::socket_guard;

extern "C" int accept4(int listener, sockaddr* addr, socklen_t* len,
                       int flags) {
  // Connections over the rate are closed here, and the next one taken,
  // until one is within it or none is left (EAGAIN, as the caller expects).
  for (;;) {
    const int fd =
        static_cast<int>(syscall(SYS_accept4, listener, addr, len, flags));
    if (fd < 0 || fd >= gs::kMaxFds || !gs::Guarded(listener)) return fd;
    if (gs::accepts.Take(std::chrono::steady_clock::now())) {
      gs::Watch(fd);
      return fd;
    }
    gs::watched[fd].store(false, std::memory_order_release);
    syscall(SYS_close, fd);
    gs::CountCut(gs::kConnectionFlood);
  }
}

extern "C" ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  const ssize_t n = syscall(SYS_recvmsg, fd, msg, flags);
  if (n <= 0 || fd < 0 || fd >= gs::kMaxFds ||
      (flags & (MSG_PEEK | MSG_ERRQUEUE)) != 0 ||
      !gs::watched[fd].load(std::memory_order_acquire)) {
    return n;
  }
  if (gs::Judge(fd, msg, static_cast<size_t>(n))) return n;
  shutdown(fd, SHUT_RDWR);
  errno = ECONNRESET;
  return -1;
}

extern "C" int close(int fd) {
  if (fd >= 0 && fd < gs::kMaxFds) {
    gs::watched[fd].store(false, std::memory_order_release);
  }
  return static_cast<int>(syscall(SYS_close, fd));
}

#endif
