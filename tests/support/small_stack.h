// RunOnSmallStack: runs a function on a thread whose stack is `bytes` large,
// and waits for it. A test that feeds an engine deeply nested input runs it
// there: recursion that follows the input's depth then crashes the test at
// depths a real thread (8 MB, or 2 MB where the stack is unlimited) would
// only meet with larger inputs.
//
// Cost: one thread. Thread-safety: call from any thread.
#ifndef GRAMMARD_TESTS_SUPPORT_SMALL_STACK_H_
#define GRAMMARD_TESTS_SUPPORT_SMALL_STACK_H_

#include <pthread.h>

#include <cstddef>
#include <functional>

namespace grammard::testing {

inline void RunOnSmallStack(size_t bytes, const std::function<void()>& fn) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t thread;
  auto run = [](void* arg) -> void* {
    (*static_cast<const std::function<void()>*>(arg))();
    return nullptr;
  };
  pthread_create(&thread, &attr, run, const_cast<std::function<void()>*>(&fn));
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

}  // namespace grammard::testing

#endif  // GRAMMARD_TESTS_SUPPORT_SMALL_STACK_H_
