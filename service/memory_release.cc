#include "service/memory_release.h"

#include <dlfcn.h>

#include <cstddef>

#include "absl/time/time.h"

namespace grammard::service {
namespace {

using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);

// jemalloc's control interface when this binary links it; found at run time
// so that builds with another allocator still link.
Mallctl Ctl() {
  static const Mallctl ctl =
      reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  return ctl;
}

// jemalloc's MALLCTL_ARENAS_ALL: every arena at once.
#define ALL_ARENAS "4096"

size_t ReadSize(Mallctl ctl, const char* name) {
  size_t value = 0, size = sizeof(value);
  return ctl(name, &value, &size, nullptr, 0) == 0 ? value : 0;
}

}  // namespace

int64_t MemoryRelease::UnusedBytes() {
  const Mallctl ctl = Ctl();
  if (ctl == nullptr) return -1;
  uint64_t epoch = 1;
  size_t size = sizeof(epoch);
  ctl("epoch", &epoch, &size, &epoch, size);  // refreshes the statistics
  const size_t pages = ReadSize(ctl, "stats.arenas." ALL_ARENAS ".pdirty") +
                       ReadSize(ctl, "stats.arenas." ALL_ARENAS ".pmuzzy");
  return static_cast<int64_t>(pages * ReadSize(ctl, "arenas.page"));
}

int64_t MemoryRelease::ReleaseNow() {
  const int64_t unused = UnusedBytes();
  if (unused < 0) return -1;
  Ctl()("arena." ALL_ARENAS ".purge", nullptr, nullptr, nullptr, 0);
  return unused;
}

MemoryRelease::MemoryRelease(int64_t retain_bytes, metrics::Counter* released)
    : retain_bytes_(retain_bytes), released_(released) {
  if (retain_bytes_ >= 0 && Ctl() != nullptr) {
    thread_ = std::thread([this] { Run(); });
  }
}

MemoryRelease::~MemoryRelease() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void MemoryRelease::Run() {
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Seconds(1))) {
    if (UnusedBytes() <= retain_bytes_) continue;
    const int64_t released = ReleaseNow();
    if (released_ != nullptr && released > 0) {
      released_->Increment(static_cast<double>(released));
    }
  }
}

}  // namespace grammard::service
