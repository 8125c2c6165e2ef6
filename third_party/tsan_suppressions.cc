// ThreadSanitizer's built-in suppressions for every binary of a --config=tsan
// build that links gRPC or Abseil's synchronization (see :absl_mutex_tsan).
// Compiled in rather than passed as TSAN_OPTIONS=suppressions=FILE so that
// they also hold for a plain `bazel test --config=tsan` and for the daemons
// the integration tests start.
//
// Only system libraries are named here, never our code; only
// "called_from_lib", never "race".
//
// Debian's gRPC and Abseil are not built with TSan. They hand memory between
// threads in code TSan cannot see: reference counts and lock-free queues made
// of atomics (absl::Status payloads, gRPC's slices, closures and call
// batches). TSan still sees the libc and operator new/delete calls those
// libraries make (free, delete, memcpy, memcmp, sendmsg), and without the
// hidden ordering reports them as races with the threads that used the
// memory before. called_from_lib:LIB makes TSan ignore the memory accesses
// of the calls LIB itself makes to TSan's interceptors; every access our
// instrumented code makes is still checked. (TSan's flag
// ignore_noninstrumented_modules would be the general form, but on Linux it
// also ignores the calls instrumented binaries make: it hides real races.)
// The libraries, each with the calls TSan reported from it:
//   libgrpc.so, libgrpc++.so, libgpr.so, libupb.so: free, delete, calloc,
//       memcpy, sendmsg on slices, closures, call batches, parsed messages
//   libabsl_status.so, libabsl_cord.so, libabsl_strings.so: new, delete,
//       memcpy, memcmp on absl::Status payloads (shared by reference count)
//   libabsl_cord_internal.so: new and delete of a payload's CordRepBtree
//       nodes (built on a gRPC thread, freed by the thread that shuts the
//       server down; client_test under a CI run)
//   libabsl_time.so: memcpy in absl::ParseTime (gRPC's deadline parsing)
//   libabsl_graphcycles_internal.so: free in GraphCycles::RemoveNode
//       (absl::Mutex's deadlock graph, guarded by an uninstrumented lock)
//   libabsl_random_internal_pool_urbg.so: new in its pool of generators
//   libcrypto.so: CRYPTO_THREAD_lock_free (OpenSSL's own locking)
//   libssl.so: memcpy of decrypted TLS records into gRPC's slices, which
//       gRPC then hands to the thread that parses the request
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         "called_from_lib:libupb.so\n"
         "called_from_lib:libabsl_status.so\n"
         "called_from_lib:libabsl_cord.so\n"
         "called_from_lib:libabsl_cord_internal.so\n"
         "called_from_lib:libabsl_strings.so\n"
         "called_from_lib:libabsl_time.so\n"
         "called_from_lib:libabsl_graphcycles_internal.so\n"
         "called_from_lib:libabsl_random_internal_pool_urbg.so\n"
         "called_from_lib:libcrypto.so\n"
         "called_from_lib:libssl.so\n";
}
