// Http2Guard: reads the frame headers a client sends on one cleartext
// HTTP/2 connection and says when the client abuses the protocol in ways
// Debian's gRPC 1.51 does not bound, so that the connection can be cut
// before the abuse costs the daemon its threads and memory:
//
// - rapid reset (CVE-2023-44487): HEADERS then RST_STREAM, over and over.
//   gRPC 1.51 builds a whole call for every such stream and does not count
//   reset streams against MAX_CONCURRENT_STREAMS; 8 s of it once took the
//   daemon to 32,000 threads and 17 GB. A connection may reset a burst of
//   kResetBurst streams and then kResetsPerSecond a second, and all
//   connections together (a RateLimit their guards share) a burst of
//   kSharedResetBurst and kSharedResetsPerSecond: an attacker spreading
//   resets over many connections is cut at its first reset once they are
//   spent, before the read holding it reaches gRPC.
// - a header block that never ends (CVE-2023-33953's class): gRPC 1.51
//   checks its header size limit per frame and buffers a field split across
//   CONTINUATION frames whole. A block may take kMaxHeaderBlockBytes in at
//   most kMaxContinuations CONTINUATION frames (gRPC itself refuses metadata
//   past --max_metadata_bytes, far below both).
// - a SETTINGS flood: a burst of kSettingsBurst, then kSettingsPerSecond.
// Everything else (DATA, PING, which gRPC bounds itself, ...) only moves
// the parser along.
//
// Bytes that do not start with the HTTP/2 client preface (a TLS
// handshake) are not HTTP/2 in the clear: the guard stops reading them.
//
// Cost: a few comparisons per frame; payloads are skipped, never copied.
// Thread-safety: one guard per connection, fed by one thread at a time.
#ifndef GRAMMARD_SERVICE_HTTP2_GUARD_H_
#define GRAMMARD_SERVICE_HTTP2_GUARD_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace grammard::service {

// A token bucket: `burst` at once, then `rate` a second. Thread-safe.
class RateLimit {
 public:
  using Clock = std::chrono::steady_clock;
  RateLimit(double burst, double rate)
      : burst_(burst), rate_(rate), tokens_(burst) {}
  // Takes one token; false when there is none.
  bool Take(Clock::time_point now);

 private:
  const double burst_;
  const double rate_;
  absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  Clock::time_point last_ ABSL_GUARDED_BY(mu_);
};

class Http2Guard {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr double kResetBurst = 64;
  static constexpr double kResetsPerSecond = 32;
  static constexpr double kSharedResetBurst = 512;
  static constexpr double kSharedResetsPerSecond = 256;
  static constexpr int64_t kMaxHeaderBlockBytes = 256 << 10;
  static constexpr int kMaxContinuations = 64;
  static constexpr double kSettingsBurst = 32;
  static constexpr double kSettingsPerSecond = 8;

  enum class Verdict {
    kOk,
    kNotHttp2,  // not cleartext HTTP/2: nothing more will be judged
    kRapidReset,
    kEndlessHeaders,
    kSettingsFlood,
  };
  static const char* VerdictName(Verdict v);

  // `shared_resets` (may be null) limits the resets of every guard given
  // it, together; it must outlive the guard.
  explicit Http2Guard(RateLimit* shared_resets = nullptr)
      : shared_resets_(shared_resets) {
    Reset();
  }
  // Back to a new connection's start.
  void Reset();

  // Reads the next bytes the client sent; the first verdict other than kOk
  // is returned for these bytes and every later call.
  Verdict Feed(std::string_view bytes, Clock::time_point now);

 private:
  // A token bucket: `burst` at once, then `rate` a second.
  struct Bucket {
    double tokens;
    Clock::time_point last;
    bool Take(double burst, double rate, Clock::time_point now);
  };

  Verdict OnFrame(uint8_t type, uint8_t flags, uint32_t length,
                  Clock::time_point now);

  Verdict verdict_;
  size_t preface_read_;  // bytes of the client preface matched so far
  // The frame header being read (9 bytes), and the payload left to skip.
  uint8_t header_[9];
  size_t header_read_;
  uint64_t payload_left_;
  // The header block being read: its bytes and CONTINUATION frames so far.
  int64_t header_block_bytes_;
  int continuations_;
  Bucket resets_;
  Bucket settings_;
  RateLimit* const shared_resets_;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_HTTP2_GUARD_H_
