// MemoryRelease: hands freed memory back to the system once more than a
// set amount of it sits unused. jemalloc here keeps freed pages
// (third_party/jemalloc_conf.cc: decay off) so that the next compile reuses
// them instead of faulting in fresh huge pages; without a bound a burst (a
// compile storm, an attack) would keep its high-water mark for good. A
// thread reads jemalloc's count of freed-but-kept pages once a second and,
// past `retain_bytes`, purges every arena.
//
// Measured (the six npm tokenizers loaded, three 5 MB enum schemas compiled
// one after another): resident memory peaked at 679 MB and was 122 MB three
// seconds later (below the 268 MB before the compiles: loading the
// tokenizers' JSON had left freed pages too); with --retain_freed_mb=-1 it
// stayed at its 875 MB peak. A compile storm below the bound keeps its
// pages, and the speed they buy.
//
// Cost: a few mallctl calls a second; a purge is madvise over the freed
// ranges. Builds without jemalloc (the sanitizers) do nothing.
// Thread-safety: construct and destroy from one thread.
#ifndef GRAMMARD_SERVICE_MEMORY_RELEASE_H_
#define GRAMMARD_SERVICE_MEMORY_RELEASE_H_

#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "service/metrics/metrics.h"

namespace grammard::service {

class MemoryRelease {
 public:
  // Starts the thread; `released` (may be null) counts the bytes handed
  // back. retain_bytes < 0: no thread.
  MemoryRelease(int64_t retain_bytes, metrics::Counter* released);
  ~MemoryRelease();
  MemoryRelease(const MemoryRelease&) = delete;
  MemoryRelease& operator=(const MemoryRelease&) = delete;

  // Freed bytes the allocator keeps now; -1 without jemalloc.
  static int64_t UnusedBytes();
  // Hands them back; the bytes released, or -1 without jemalloc.
  static int64_t ReleaseNow();

 private:
  void Run();

  const int64_t retain_bytes_;
  metrics::Counter* const released_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_MEMORY_RELEASE_H_
