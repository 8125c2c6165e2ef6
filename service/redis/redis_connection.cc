#include "service/redis/redis_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "grammar/base/status_macros.h"

namespace grammard::service::redis {
namespace {

using Clock = std::chrono::steady_clock;

std::string Where(const RedisOptions& o) {
  return absl::StrCat("redis ", o.host, ":", o.port);
}

std::string SslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "TLS error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

RedisReply Convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      for (size_t i = 0; i < r->elements; ++i) {
        out.elements.push_back(Convert(r->element[i]));
      }
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(
    const RedisOptions& options) {
  std::unique_ptr<RedisConnection> c(new RedisConnection(options));
  GRAMMARD_RETURN_IF_ERROR(c->Open());
  if (!options.password.empty()) {
    std::vector<std::string_view> auth = {"AUTH"};
    if (!options.user.empty()) auth.push_back(options.user);
    auth.push_back(options.password);
    absl::StatusOr<RedisReply> r = c->Command(auth);
    if (!r.ok()) {
      if (c->broken()) return r.status();
      return absl::PermissionDeniedError(absl::StrCat(
          Where(options), ": AUTH refused: ", r.status().message()));
    }
  }
  return c;
}

RedisConnection::~RedisConnection() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  if (fd_ >= 0) close(fd_);
  if (reader_ != nullptr) redisReaderFree(static_cast<redisReader*>(reader_));
}

absl::Status RedisConnection::Break(absl::Status status) {
  broken_ = true;
  return status;
}

absl::Status RedisConnection::Open() {
  const Clock::time_point deadline = Clock::now() + options_.timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addrs = nullptr;
  const std::string port = std::to_string(options_.port);
  if (int rc = getaddrinfo(options_.host.c_str(), port.c_str(), &hints, &addrs);
      rc != 0) {
    return Break(absl::UnavailableError(
        absl::StrCat(Where(options_), ": ", gai_strerror(rc))));
  }
  absl::Status last =
      absl::UnavailableError(absl::StrCat(Where(options_), ": no address"));
  for (addrinfo* a = addrs; a != nullptr; a = a->ai_next) {
    fd_ = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                 a->ai_protocol);
    if (fd_ < 0) continue;
    if (connect(fd_, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS) {
      last = Wait(/*write=*/true, deadline);
      int err = 0;
      socklen_t len = sizeof(err);
      if (last.ok() && getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
          err == 0) {
        break;
      }
      if (last.ok()) {
        last = absl::UnavailableError(
            absl::StrCat(Where(options_), ": ", std::strerror(err)));
      }
    } else {
      last = absl::UnavailableError(
          absl::StrCat(Where(options_), ": ", std::strerror(errno)));
    }
    close(fd_);
    fd_ = -1;
  }
  freeaddrinfo(addrs);
  if (fd_ < 0) return Break(last);
  broken_ = false;
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  reader_ = redisReaderCreate();
  if (!options_.tls) return absl::OkStatus();

  ctx_ = SSL_CTX_new(TLS_client_method());
  if (ctx_ == nullptr) return Break(absl::InternalError(SslError()));
  SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
  const int loaded = options_.tls_ca_file.empty()
                         ? SSL_CTX_set_default_verify_paths(ctx_)
                         : SSL_CTX_load_verify_locations(
                               ctx_, options_.tls_ca_file.c_str(), nullptr);
  if (loaded != 1) {
    return Break(absl::FailedPreconditionError(
        absl::StrCat(Where(options_), ": cannot load TLS CA certificates ",
                     options_.tls_ca_file, ": ", SslError())));
  }
  ssl_ = SSL_new(ctx_);
  SSL_set_fd(ssl_, fd_);
  // The certificate must name the host: as an IP address, or by DNS name
  // (then also sent as SNI).
  in6_addr ip;
  if (inet_pton(AF_INET, options_.host.c_str(), &ip) == 1 ||
      inet_pton(AF_INET6, options_.host.c_str(), &ip) == 1) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), options_.host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl_, options_.host.c_str());
    SSL_set1_host(ssl_, options_.host.c_str());
  }
  for (;;) {
    const int rc = SSL_connect(ssl_);
    if (rc == 1) return absl::OkStatus();
    const int e = SSL_get_error(ssl_, rc);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
      return Break(absl::UnavailableError(
          absl::StrCat(Where(options_), ": TLS handshake: ", SslError())));
    }
    if (absl::Status s = Wait(e == SSL_ERROR_WANT_WRITE, deadline); !s.ok()) {
      return Break(s);
    }
  }
}

absl::Status RedisConnection::Wait(bool write, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) {
      return absl::DeadlineExceededError(
          absl::StrCat(Where(options_), ": no answer within ",
                       options_.timeout.count(), " ms"));
    }
    pollfd p{fd_, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    const int rc = poll(&p, 1, static_cast<int>(left.count()) + 1);
    if (rc > 0) return absl::OkStatus();
    if (rc < 0 && errno != EINTR) {
      return absl::UnavailableError(
          absl::StrCat(Where(options_), ": poll: ", std::strerror(errno)));
    }
  }
}

absl::Status RedisConnection::WriteAll(std::string_view bytes,
                                       Clock::time_point deadline) {
  while (!bytes.empty()) {
    ssize_t n;
    bool want_write = true;
    if (ssl_ != nullptr) {
      n = SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()));
      if (n <= 0) {
        const int e = SSL_get_error(ssl_, static_cast<int>(n));
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
          return absl::UnavailableError(
              absl::StrCat(Where(options_), ": write: ", SslError()));
        }
        want_write = e == SSL_ERROR_WANT_WRITE;
        n = 0;
      }
    } else {
      n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) {
          return absl::UnavailableError(
              absl::StrCat(Where(options_), ": write: ", std::strerror(errno)));
        }
        n = 0;
      }
    }
    bytes.remove_prefix(static_cast<size_t>(n));
    if (n == 0) {
      GRAMMARD_RETURN_IF_ERROR(Wait(want_write, deadline));
    }
  }
  return absl::OkStatus();
}

absl::Status RedisConnection::ReadSome(Clock::time_point deadline) {
  char buf[64 * 1024];
  for (;;) {
    ssize_t n;
    bool want_write = false;
    if (ssl_ != nullptr) {
      n = SSL_read(ssl_, buf, sizeof(buf));
      if (n <= 0) {
        const int e = SSL_get_error(ssl_, static_cast<int>(n));
        if (e == SSL_ERROR_ZERO_RETURN) {
          return absl::UnavailableError(
              absl::StrCat(Where(options_), ": connection closed"));
        }
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
          return absl::UnavailableError(
              absl::StrCat(Where(options_), ": read: ", SslError()));
        }
        want_write = e == SSL_ERROR_WANT_WRITE;
        n = -1;
      }
    } else {
      n = recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) {
        return absl::UnavailableError(
            absl::StrCat(Where(options_), ": connection closed"));
      }
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        return absl::UnavailableError(
            absl::StrCat(Where(options_), ": read: ", std::strerror(errno)));
      }
    }
    if (n > 0) {
      redisReaderFeed(static_cast<redisReader*>(reader_), buf,
                      static_cast<size_t>(n));
      return absl::OkStatus();
    }
    GRAMMARD_RETURN_IF_ERROR(Wait(want_write, deadline));
  }
}

absl::StatusOr<RedisReply> RedisConnection::Command(
    const std::vector<std::string_view>& args) {
  if (broken_) {
    return absl::UnavailableError(
        absl::StrCat(Where(options_), ": connection broken"));
  }
  const Clock::time_point deadline = Clock::now() + options_.timeout;
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  const int len = redisFormatCommandArgv(&cmd, static_cast<int>(args.size()),
                                         argv.data(), lens.data());
  if (len < 0) return absl::ResourceExhaustedError("redis: out of memory");
  absl::Status written =
      WriteAll(std::string_view(cmd, static_cast<size_t>(len)), deadline);
  redisFreeCommand(cmd);
  if (!written.ok()) return Break(written);
  auto* reader = static_cast<redisReader*>(reader_);
  for (;;) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader, &raw) != REDIS_OK) {
      return Break(absl::DataLossError(absl::StrCat(
          Where(options_), ": malformed reply: ", reader->errstr)));
    }
    if (raw != nullptr) {
      auto* reply = static_cast<redisReply*>(raw);
      absl::StatusOr<RedisReply> out;
      if (reply->type == REDIS_REPLY_ERROR) {
        out = absl::InternalError(absl::StrCat(
            Where(options_), ": ", std::string(reply->str, reply->len)));
      } else {
        out = Convert(reply);
      }
      freeReplyObject(reply);
      return out;
    }
    if (absl::Status s = ReadSome(deadline); !s.ok()) return Break(s);
  }
}

}  // namespace grammard::service::redis
