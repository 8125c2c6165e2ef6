// SizedThread: a thread with a stack of a chosen size. std::thread takes the
// process default, which is RLIMIT_STACK, or 2 MB where that is unlimited
// (as it often is in containers); the daemon's compile threads parse and
// convert constraints from clients, bounded in depth but not in the stack
// that depth takes (a regex nested 200 groups deep takes half a megabyte).
//
// Cost: one pthread; the stack is address space, committed as it is used.
// Thread-safety: construct and destroy from one thread.
#ifndef GRAMMARD_SERVICE_SIZED_THREAD_H_
#define GRAMMARD_SERVICE_SIZED_THREAD_H_

#include <pthread.h>

#include <cstddef>
#include <cstdlib>
#include <functional>
#include <utility>

namespace grammard::service {

class SizedThread {
 public:
  // Runs `fn` on a new thread with a `stack_bytes` stack; aborts if no
  // thread can be made (as std::thread would throw).
  SizedThread(size_t stack_bytes, std::function<void()> fn)
      : fn_(std::move(fn)) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, stack_bytes);
    const int error = pthread_create(
        &thread_, &attr,
        [](void* self) -> void* {
          static_cast<SizedThread*>(self)->fn_();
          return nullptr;
        },
        this);
    pthread_attr_destroy(&attr);
    if (error != 0) std::abort();
  }
  // Joins the thread.
  ~SizedThread() { pthread_join(thread_, nullptr); }
  SizedThread(const SizedThread&) = delete;
  SizedThread& operator=(const SizedThread&) = delete;

 private:
  std::function<void()> fn_;
  pthread_t thread_;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_SIZED_THREAD_H_
