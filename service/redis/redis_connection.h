// RedisConnection: one blocking connection to a Redis server, with a
// deadline on every call, optional TLS and AUTH.
//
// hiredis (Debian's 0.14) formats commands and parses replies; the socket
// and TLS (OpenSSL) are ours, because that hiredis has no TLS. Every wait
// is a poll() bounded by the call's deadline, so a server that stops
// answering costs at most that long.
//
// Cost: one round trip per Command. Thread-safety: one thread at a time per
// connection; after any error the connection is broken() and must be
// dropped (a reply may be half read).
#ifndef GRAMMARD_SERVICE_REDIS_REDIS_CONNECTION_H_
#define GRAMMARD_SERVICE_REDIS_REDIS_CONNECTION_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace grammard::service::redis {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  // AUTH: a password alone, or an ACL user and its password.
  std::string user;
  std::string password;
  bool tls = false;
  std::string tls_ca_file;  // empty: the system's trust store
  // Connect and per-command limit.
  std::chrono::milliseconds timeout{100};
};

// A reply: Redis errors (-ERR ...) come back as a non-OK status instead.
struct RedisReply {
  enum class Type { kNil, kString, kInteger, kStatus, kArray };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus
  int64_t integer = 0;
  std::vector<RedisReply> elements;
};

class RedisConnection {
 public:
  // Connects (and authenticates) within options.timeout. Unavailable when
  // the server cannot be reached; PermissionDenied when AUTH is refused.
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(
      const RedisOptions& options);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends one command and reads its reply within options.timeout.
  // DeadlineExceeded or Unavailable on I/O trouble (the connection is then
  // broken); Internal with Redis' message for an error reply.
  absl::StatusOr<RedisReply> Command(const std::vector<std::string_view>& args);
  bool broken() const { return broken_; }

 private:
  explicit RedisConnection(const RedisOptions& options) : options_(options) {}
  absl::Status Open();
  absl::Status WriteAll(std::string_view bytes,
                        std::chrono::steady_clock::time_point deadline);
  // Reads what is available into the reply parser.
  absl::Status ReadSome(std::chrono::steady_clock::time_point deadline);
  // Waits until the socket is readable (or writable), or the deadline.
  absl::Status Wait(bool write, std::chrono::steady_clock::time_point deadline);
  absl::Status Break(absl::Status status);

  const RedisOptions options_;
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  void* reader_ = nullptr;  // redisReader
  bool broken_ = false;
};

}  // namespace grammard::service::redis

#endif  // GRAMMARD_SERVICE_REDIS_REDIS_CONNECTION_H_
