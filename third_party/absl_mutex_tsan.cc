// ThreadSanitizer annotations for the system Abseil's absl::Mutex and
// absl::CondVar; linked into every binary only under --config=tsan (see
// :absl_synchronization).
//
// Why: Debian's libabsl_synchronization.so is not built with TSan, so
// absl::Mutex's lock word and futex waits are invisible to it and TSan would
// report every access guarded by an absl::Mutex as a race. Abseil annotates
// itself (ABSL_TSAN_MUTEX_*) only when mutex.cc is compiled with TSan.
//
// How: this file defines the public lock/unlock/wait members itself. The
// binary's definitions take precedence over the shared object's for every
// caller (our code, gRPC and Abseil alike, all of which call them through the
// PLT); each one tells TSan what it does (the same __tsan_mutex_* calls
// Abseil's own TSan build makes) around the real member, found with
// dlsym(RTLD_NEXT). Between the pre and post annotations TSan ignores memory
// accesses, as it does inside an instrumented Abseil: that covers Condition
// functions Abseil evaluates while it hands the mutex over. Calls Abseil makes
// to these members from inside one of them are passed straight through.
//
// Await and CondVar::Wait release and retake the mutex in the mode it is held
// in, which this file tracks per thread for the reader modes.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"

#define GRAMMARD_STR2(x) #x
#define GRAMMARD_STR(x) GRAMMARD_STR2(x)

namespace {

// Depth of wrapped calls on this thread: Abseil's own calls between members
// (LockWhenWithTimeout calls LockWhenWithDeadline) are not annotated twice.
thread_local int depth = 0;
// Mutexes this thread holds in reader mode (a fixed array: it outlives the
// thread's other thread_local objects, whose destructors may lock).
constexpr int kMaxReadHeld = 16;
thread_local const void* read_held[kMaxReadHeld];
thread_local int read_held_count = 0;

struct Nested {
  Nested() : outer(depth++ == 0) {}
  ~Nested() { --depth; }
  const bool outer;
};

// The shared object's definition of absl::<member> ("5Mutex4LockEv").
template <typename F>
F Real(const char* member) {
  const std::string ns = GRAMMARD_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = "_ZN4absl" + std::to_string(ns.size()) + ns + member;
  void* f = dlsym(RTLD_NEXT, name.c_str());
  if (f == nullptr) {
    std::fprintf(stderr, "absl_mutex_tsan: no %s in the system Abseil\n",
                 name.c_str());
    std::abort();
  }
  return reinterpret_cast<F>(f);
}

unsigned Mode(const void* mu) {
  const void** end = read_held + read_held_count;
  return std::find(read_held, end, mu) != end ? __tsan_mutex_read_lock : 0;
}

void Held(const void* mu, unsigned flags) {
  if (!(flags & __tsan_mutex_read_lock)) return;
  if (read_held_count == kMaxReadHeld) {
    std::fprintf(stderr, "absl_mutex_tsan: over %d reader locks held\n",
                 kMaxReadHeld);
    std::abort();
  }
  read_held[read_held_count++] = mu;
}

void Released(const void* mu, unsigned flags) {
  if (!(flags & __tsan_mutex_read_lock)) return;
  const void** end = read_held + read_held_count;
  const void** it = std::find(read_held, end, mu);
  if (it != end) {
    *it = *(end - 1);
    --read_held_count;
  }
}

// A member that takes the mutex (flags: 0 or __tsan_mutex_read_lock).
template <typename R, typename... P, typename... A>
R Acquire(R (*real)(absl::Mutex*, P...), absl::Mutex* mu, unsigned flags,
          A&&... args) {
  Nested nested;
  if (!nested.outer) return real(mu, std::forward<A>(args)...);
  __tsan_mutex_pre_lock(mu, flags);
  struct Post {
    ~Post() {
      __tsan_mutex_post_lock(mu, flags, 0);
      Held(mu, flags);
    }
    absl::Mutex* mu;
    unsigned flags;
  } post{mu, flags};
  return real(mu, std::forward<A>(args)...);
}

// A member that releases the held mutex and takes it again before returning
// (Await, CondVar::Wait).
template <typename R, typename S, typename... P, typename... A>
R Reacquire(R (*real)(S*, P...), S* self, absl::Mutex* mu, A&&... args) {
  Nested nested;
  if (!nested.outer) return real(self, std::forward<A>(args)...);
  const unsigned flags = Mode(mu);
  __tsan_mutex_pre_unlock(mu, flags);
  __tsan_mutex_post_unlock(mu, flags);
  __tsan_mutex_pre_lock(mu, flags);
  struct Post {
    ~Post() { __tsan_mutex_post_lock(mu, flags, 0); }
    absl::Mutex* mu;
    unsigned flags;
  } post{mu, flags};
  return real(self, std::forward<A>(args)...);
}

void Release(void (*real)(absl::Mutex*), absl::Mutex* mu, unsigned flags) {
  Nested nested;
  if (!nested.outer) return real(mu);
  Released(mu, flags);
  __tsan_mutex_pre_unlock(mu, flags);
  real(mu);
  __tsan_mutex_post_unlock(mu, flags);
}

bool Try(bool (*real)(absl::Mutex*), absl::Mutex* mu, unsigned flags) {
  Nested nested;
  if (!nested.outer) return real(mu);
  flags |= __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(mu, flags);
  const bool locked = real(mu);
  __tsan_mutex_post_lock(
      mu, locked ? flags : flags | __tsan_mutex_try_lock_failed, 0);
  if (locked) Held(mu, flags);
  return locked;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

using Cond = const Condition&;

void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex4LockEv");
  Acquire(real, this, 0);
}
void Mutex::ReaderLock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  Acquire(real, this, __tsan_mutex_read_lock);
}
void Mutex::LockWhen(Cond cond) {
  static const auto real =
      Real<void (*)(Mutex*, Cond)>("5Mutex8LockWhenERKNS0_9ConditionE");
  Acquire(real, this, 0, cond);
}
void Mutex::ReaderLockWhen(Cond cond) {
  static const auto real =
      Real<void (*)(Mutex*, Cond)>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Acquire(real, this, __tsan_mutex_read_lock, cond);
}
bool Mutex::LockWhenWithTimeout(Cond cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, Cond, Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Acquire(real, this, 0, cond, timeout);
}
bool Mutex::ReaderLockWhenWithTimeout(Cond cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, Cond, Duration)>(
      "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Acquire(real, this, __tsan_mutex_read_lock, cond, timeout);
}
bool Mutex::LockWhenWithDeadline(Cond cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, Cond, Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Acquire(real, this, 0, cond, deadline);
}
bool Mutex::ReaderLockWhenWithDeadline(Cond cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, Cond, Time)>(
      "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Acquire(real, this, __tsan_mutex_read_lock, cond, deadline);
}
bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  return Try(real, this, 0);
}
bool Mutex::ReaderTryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  return Try(real, this, __tsan_mutex_read_lock);
}
void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex6UnlockEv");
  Release(real, this, 0);
}
void Mutex::ReaderUnlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  Release(real, this, __tsan_mutex_read_lock);
}
void Mutex::Await(Cond cond) {
  static const auto real =
      Real<void (*)(Mutex*, Cond)>("5Mutex5AwaitERKNS0_9ConditionE");
  Reacquire(real, this, this, cond);
}
bool Mutex::AwaitWithTimeout(Cond cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, Cond, Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Reacquire(real, this, this, cond, timeout);
}
bool Mutex::AwaitWithDeadline(Cond cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, Cond, Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Reacquire(real, this, this, cond, deadline);
}
Mutex::~Mutex() {
  static const auto real = Real<void (*)(Mutex*)>("5MutexD2Ev");
  __tsan_mutex_destroy(this, __tsan_mutex_not_static);
  real(this);
}

void CondVar::Wait(Mutex* mu) {
  static const auto real =
      Real<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  Reacquire(real, this, mu, mu);
}
bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return Reacquire(real, this, mu, mu, timeout);
}
bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, Time)>(
      "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return Reacquire(real, this, mu, mu, deadline);
}

ABSL_NAMESPACE_END
}  // namespace absl
