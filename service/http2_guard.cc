#include "service/http2_guard.h"

#include <algorithm>

namespace grammard::service {
namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

enum FrameType : uint8_t {
  kHeaders = 0x1,
  kRstStream = 0x3,
  kSettings = 0x4,
  kContinuation = 0x9,
};
constexpr uint8_t kAck = 0x1;

}  // namespace

const char* Http2Guard::VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kNotHttp2:
      return "not_http2";
    case Verdict::kRapidReset:
      return "rapid_reset";
    case Verdict::kEndlessHeaders:
      return "endless_headers";
    case Verdict::kSettingsFlood:
      return "settings_flood";
  }
  return "unknown";
}

void Http2Guard::Reset() {
  verdict_ = Verdict::kOk;
  preface_read_ = 0;
  header_read_ = 0;
  payload_left_ = 0;
  header_block_bytes_ = 0;
  continuations_ = 0;
  resets_ = Bucket{kResetBurst, Clock::time_point()};
  settings_ = Bucket{kSettingsBurst, Clock::time_point()};
}

bool RateLimit::Take(Clock::time_point now) {
  absl::MutexLock lock(&mu_);
  if (last_ != Clock::time_point()) {
    const double seconds = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + std::max(0.0, seconds) * rate_);
  }
  last_ = std::max(last_, now);
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

bool Http2Guard::Bucket::Take(double burst, double rate,
                              Clock::time_point now) {
  if (last != Clock::time_point()) {
    const double seconds = std::chrono::duration<double>(now - last).count();
    tokens = std::min(burst, tokens + seconds * rate);
  }
  last = now;
  if (tokens < 1) return false;
  tokens -= 1;
  return true;
}

Http2Guard::Verdict Http2Guard::Feed(std::string_view bytes,
                                     Clock::time_point now) {
  size_t at = 0;
  while (verdict_ == Verdict::kOk && at < bytes.size()) {
    if (preface_read_ < kPreface.size()) {
      const size_t n =
          std::min(kPreface.size() - preface_read_, bytes.size() - at);
      if (bytes.substr(at, n) != kPreface.substr(preface_read_, n)) {
        verdict_ = Verdict::kNotHttp2;
        break;
      }
      preface_read_ += n;
      at += n;
      continue;
    }
    if (payload_left_ > 0) {
      const size_t n = static_cast<size_t>(
          std::min<uint64_t>(payload_left_, bytes.size() - at));
      payload_left_ -= n;
      at += n;
      continue;
    }
    const size_t n =
        std::min(sizeof(header_) - header_read_, bytes.size() - at);
    std::copy(bytes.begin() + at, bytes.begin() + at + n,
              header_ + header_read_);
    header_read_ += n;
    at += n;
    if (header_read_ < sizeof(header_)) break;
    header_read_ = 0;
    const uint32_t length =
        (uint32_t{header_[0]} << 16) | (uint32_t{header_[1]} << 8) | header_[2];
    payload_left_ = length;
    verdict_ = OnFrame(header_[3], header_[4], length, now);
  }
  // Bytes never judged stay kNotHttp2 or kOk; a cut-off verdict sticks.
  return verdict_;
}

Http2Guard::Verdict Http2Guard::OnFrame(uint8_t type, uint8_t flags,
                                        uint32_t length,
                                        Clock::time_point now) {
  switch (type) {
    case kHeaders:
      header_block_bytes_ = length;
      continuations_ = 0;
      break;
    case kContinuation:
      header_block_bytes_ += length;
      ++continuations_;
      if (header_block_bytes_ > kMaxHeaderBlockBytes ||
          continuations_ > kMaxContinuations) {
        return Verdict::kEndlessHeaders;
      }
      break;
    case kRstStream:
      if (!resets_.Take(kResetBurst, kResetsPerSecond, now) ||
          (shared_resets_ != nullptr && !shared_resets_->Take(now))) {
        return Verdict::kRapidReset;
      }
      break;
    case kSettings:
      if ((flags & kAck) == 0 &&
          !settings_.Take(kSettingsBurst, kSettingsPerSecond, now)) {
        return Verdict::kSettingsFlood;
      }
      break;
    default:
      break;
  }
  return Verdict::kOk;
}

}  // namespace grammard::service
