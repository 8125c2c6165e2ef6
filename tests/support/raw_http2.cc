#include "tests/support/raw_http2.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tests/support/daemon.h"

namespace grammard::testing {
namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// An HPACK integer with an `prefix_bits`-bit prefix (RFC 7541 5.1).
void AppendInteger(uint64_t value, int prefix_bits, uint8_t first,
                   std::string* out) {
  const uint64_t max = (uint64_t{1} << prefix_bits) - 1;
  if (value < max) {
    out->push_back(static_cast<char>(first | value));
    return;
  }
  out->push_back(static_cast<char>(first | max));
  value -= max;
  while (value >= 128) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void AppendString(std::string_view s, std::string* out) {
  AppendInteger(s.size(), 7, 0x00, out);  // no Huffman coding
  out->append(s);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RawHttp2>> RawHttp2::Connect(int port) {
  absl::StatusOr<int> connected = ConnectLoopback(port);
  if (!connected.ok()) return connected.status();
  const int one = 1;
  setsockopt(*connected, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return Start(*connected);
}

absl::StatusOr<std::unique_ptr<RawHttp2>> RawHttp2::ConnectUnix(
    const std::string& path) {
  absl::StatusOr<int> connected = grammard::testing::ConnectUnix(path);
  if (!connected.ok()) return connected.status();
  return Start(*connected);
}

absl::StatusOr<std::unique_ptr<RawHttp2>> RawHttp2::Start(int fd) {
  std::unique_ptr<RawHttp2> c(new RawHttp2(fd));
  c->out_.append(kPreface);
  c->Frame(kSettings, 0, 0, "");
  if (!c->Flush()) return absl::UnavailableError("the preface was refused");
  return c;
}

RawHttp2::RawHttp2(int fd) : fd_(fd) {
  reader_ = std::thread([this] { Read(); });
}

RawHttp2::~RawHttp2() {
  shutdown(fd_, SHUT_RDWR);
  reader_.join();
  close(fd_);
}

std::string RawHttp2::HeaderBlock(
    const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string block;
  for (const auto& [name, value] : fields) {
    block.push_back(0x00);  // literal without indexing, new name
    AppendString(name, &block);
    AppendString(value, &block);
  }
  return block;
}

std::string RawHttp2::GrpcRequestHeaders(const std::string& path) {
  return HeaderBlock({{":method", "POST"},
                      {":scheme", "http"},
                      {":path", path},
                      {":authority", "127.0.0.1"},
                      {"content-type", "application/grpc"},
                      {"te", "trailers"}});
}

void RawHttp2::Frame(FrameType type, uint8_t flags, uint32_t stream,
                     std::string_view payload) {
  const size_t n = payload.size();
  const char header[9] = {static_cast<char>(n >> 16),
                          static_cast<char>(n >> 8),
                          static_cast<char>(n),
                          static_cast<char>(type),
                          static_cast<char>(flags),
                          static_cast<char>((stream >> 24) & 0x7f),
                          static_cast<char>(stream >> 16),
                          static_cast<char>(stream >> 8),
                          static_cast<char>(stream)};
  out_.append(header, sizeof(header));
  out_.append(payload);
  if (out_.size() >= (64 << 10)) Flush();
}

bool RawHttp2::Flush() {
  const bool ok = WriteAll(out_);
  out_.clear();
  return ok;
}

bool RawHttp2::WriteAll(std::string_view bytes) {
  absl::MutexLock lock(&write_mu_);
  while (!bytes.empty()) {
    const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      closed_.store(true);
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void RawHttp2::Read() {
  std::string buffer;
  char chunk[16384];
  for (;;) {
    const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      closed_.store(true);
      return;
    }
    received_.fetch_add(n);
    buffer.append(chunk, static_cast<size_t>(n));
    // Whole frames: note GOAWAY, acknowledge SETTINGS.
    size_t at = 0;
    while (buffer.size() - at >= 9) {
      const auto* h = reinterpret_cast<const uint8_t*>(buffer.data() + at);
      const size_t length = (size_t{h[0]} << 16) | (size_t{h[1]} << 8) | h[2];
      if (buffer.size() - at < 9 + length) break;
      if (h[3] == kGoAway) goaway_.store(true);
      if (h[3] == kSettings && (h[4] & kAck) == 0) {
        const char ack[9] = {
            0, 0, 0, static_cast<char>(kSettings), static_cast<char>(kAck), 0,
            0, 0, 0};
        WriteAll(std::string_view(ack, sizeof(ack)));
      }
      at += 9 + length;
    }
    buffer.erase(0, at);
  }
}

}  // namespace grammard::testing
