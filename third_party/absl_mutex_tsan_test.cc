// Every way of taking and handing over an absl::Mutex orders the accesses it
// guards. Meaningful under --config=tsan (tools/sanitize.sh runs it there):
// without absl_mutex_tsan.cc, TSan reports each guarded access below as a
// data race, since the system Abseil's locking is invisible to it.
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace {

TEST(AbslMutexTsanTest, GuardedAccessesAreOrdered) {
  absl::Mutex mu;
  absl::CondVar cv;
  long counter = 0;  // guarded by mu
  bool go = false;   // guarded by mu
  std::vector<std::thread> threads;
  threads.emplace_back([&] {  // Await hands the mutex over and back
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&go));
    ++counter;
  });
  threads.emplace_back([&] {  // LockWhen
    mu.LockWhen(absl::Condition(&go));
    ++counter;
    mu.Unlock();
  });
  threads.emplace_back([&] {  // CondVar
    absl::MutexLock lock(&mu);
    while (!go) cv.WaitWithTimeout(&mu, absl::Milliseconds(10));
    ++counter;
  });
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        if (i % 2 == 0) {
          absl::MutexLock lock(&mu);
          ++counter;
        } else {
          while (!mu.TryLock()) {
          }
          ++counter;
          mu.Unlock();
        }
        absl::ReaderMutexLock read(&mu);
        EXPECT_GT(counter, 0);
      }
    });
  }
  {
    absl::MutexLock lock(&mu);
    go = true;
    cv.SignalAll();
  }
  for (std::thread& t : threads) t.join();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(counter, 203);
}

}  // namespace
