// RawHttp2: a cleartext HTTP/2 connection that sends whatever frames a test
// builds, for hostile-client tests that no well-behaved gRPC client can
// produce (rapid reset, a header block that never ends). It speaks just
// enough HTTP/2 to be taken for a client: the preface, SETTINGS and their
// acknowledgement; everything the server sends is read and dropped, except
// that GOAWAY and the connection's end are noted.
//
// Header blocks are HPACK literals without indexing or Huffman coding, so a
// test can cut them anywhere.
//
// Cost: a socket and a reader thread. Thread-safety: Send* may be called
// from one thread at a time; the accessors from any.
#ifndef GRAMMARD_TESTS_SUPPORT_RAW_HTTP2_H_
#define GRAMMARD_TESTS_SUPPORT_RAW_HTTP2_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace grammard::testing {

class RawHttp2 {
 public:
  enum FrameType : uint8_t {
    kData = 0x0,
    kHeaders = 0x1,
    kRstStream = 0x3,
    kSettings = 0x4,
    kGoAway = 0x7,
    kContinuation = 0x9,
  };
  static constexpr uint8_t kEndStream = 0x1;
  static constexpr uint8_t kAck = 0x1;
  static constexpr uint8_t kEndHeaders = 0x4;

  // Connects to 127.0.0.1:port (or the Unix socket at `path`) and sends
  // the preface and SETTINGS.
  static absl::StatusOr<std::unique_ptr<RawHttp2>> Connect(int port);
  static absl::StatusOr<std::unique_ptr<RawHttp2>> ConnectUnix(
      const std::string& path);
  ~RawHttp2();

  // An HPACK block of literal fields, in order.
  static std::string HeaderBlock(
      const std::vector<std::pair<std::string, std::string>>& fields);
  // The request headers of a gRPC call to `path` (e.g.
  // "/grammard.v1.Grammard/Decode").
  static std::string GrpcRequestHeaders(const std::string& path);

  // Queues one frame (sent at the next Flush, or once 64 KB are queued).
  void Frame(FrameType type, uint8_t flags, uint32_t stream,
             std::string_view payload);
  // Sends the queued frames; false once the connection is broken.
  bool Flush();

  // The server closed the connection (or it broke).
  bool closed() const { return closed_.load(); }
  bool got_goaway() const { return goaway_.load(); }
  // Bytes the server has sent so far.
  int64_t bytes_received() const { return received_.load(); }

 private:
  explicit RawHttp2(int fd);
  // Takes `fd` over and sends the preface and SETTINGS.
  static absl::StatusOr<std::unique_ptr<RawHttp2>> Start(int fd);
  void Read();
  bool WriteAll(std::string_view bytes);

  const int fd_;
  absl::Mutex write_mu_;
  std::string out_;  // queued frames (the sending thread's)
  std::atomic<bool> closed_{false};
  std::atomic<bool> goaway_{false};
  std::atomic<int64_t> received_{0};
  std::thread reader_;
};

}  // namespace grammard::testing

#endif  // GRAMMARD_TESTS_SUPPORT_RAW_HTTP2_H_
