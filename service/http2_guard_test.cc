#include "service/http2_guard.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace grammard::service {
namespace {

using Verdict = Http2Guard::Verdict;
using Clock = Http2Guard::Clock;

std::string Frame(uint8_t type, uint8_t flags, uint32_t stream,
                  const std::string& payload) {
  const size_t n = payload.size();
  std::string f = {static_cast<char>(n >> 16),
                   static_cast<char>(n >> 8),
                   static_cast<char>(n),
                   static_cast<char>(type),
                   static_cast<char>(flags),
                   static_cast<char>(stream >> 24),
                   static_cast<char>(stream >> 16),
                   static_cast<char>(stream >> 8),
                   static_cast<char>(stream)};
  return f + payload;
}

const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const std::string kSettings = Frame(0x4, 0, 0, std::string(12, '\0'));
const std::string kHeaders = Frame(0x1, 0x4, 1, std::string(40, 'h'));
const std::string kReset = Frame(0x3, 0, 1, std::string(4, '\0'));

// What a well-behaved client sends: steps on a stream, a few resets.
std::string Polite() {
  std::string s = kPreface + kSettings + Frame(0x4, 0x1, 0, "");
  for (uint32_t id = 1; id < 200; id += 2) {
    s += Frame(0x1, 0x4, id, std::string(60, 'h'));
    s += Frame(0x0, 0, id, std::string(5000, 'd'));
    s += Frame(0x6, 0, 0, std::string(8, 'p'));  // PING
    if (id % 20 == 1) s += Frame(0x3, 0, id, std::string(4, '\0'));
  }
  return s;
}

TEST(Http2GuardTest, APoliteClientIsLeftAlone) {
  Http2Guard guard;
  EXPECT_EQ(guard.Feed(Polite(), Clock::now()), Verdict::kOk);
}

// The verdict does not depend on how the bytes are split across reads.
TEST(Http2GuardTest, VerdictsDoNotDependOnHowBytesArrive) {
  std::string rapid = kPreface + kSettings;
  for (int i = 0; i < 300; ++i) rapid += kHeaders + kReset;
  std::mt19937 rng(7);
  for (const std::string& bytes : {Polite(), rapid}) {
    Http2Guard whole;
    const auto now = Clock::now();
    const Verdict expected = whole.Feed(bytes, now);
    for (int trial = 0; trial < 20; ++trial) {
      Http2Guard guard;
      Verdict v = Verdict::kOk;
      for (size_t at = 0; at < bytes.size();) {
        const size_t n = std::min<size_t>(1 + rng() % 40, bytes.size() - at);
        v = guard.Feed(std::string_view(bytes).substr(at, n), now);
        at += n;
      }
      EXPECT_EQ(v, expected) << trial;
    }
  }
}

TEST(Http2GuardTest, RapidResetIsCaught) {
  Http2Guard guard;
  const auto now = Clock::now();
  ASSERT_EQ(guard.Feed(kPreface + kSettings, now), Verdict::kOk);
  int pairs = 0;
  Verdict v = Verdict::kOk;
  while (v == Verdict::kOk && pairs < 10000) {
    v = guard.Feed(kHeaders + kReset, now);
    ++pairs;
  }
  EXPECT_EQ(v, Verdict::kRapidReset);
  EXPECT_EQ(pairs, static_cast<int>(Http2Guard::kResetBurst) + 1);
  // It sticks.
  EXPECT_EQ(guard.Feed(kHeaders, now), Verdict::kRapidReset);
}

// Resets at a steady pace under the rate are fine for as long as they go on.
TEST(Http2GuardTest, PacedResetsAreFine) {
  Http2Guard guard;
  auto now = Clock::now();
  ASSERT_EQ(guard.Feed(kPreface + kSettings, now), Verdict::kOk);
  for (int i = 0; i < 10000; ++i) {
    now += std::chrono::milliseconds(40);  // 25 a second
    ASSERT_EQ(guard.Feed(kHeaders + kReset, now), Verdict::kOk) << i;
  }
}

// Resets spread over many connections are limited together: once the
// shared allowance is spent, the next connection to reset is cut at once.
TEST(Http2GuardTest, ResetsOverManyConnectionsShareALimit) {
  RateLimit shared(Http2Guard::kSharedResetBurst,
                   Http2Guard::kSharedResetsPerSecond);
  const auto now = Clock::now();
  int connections = 0;
  int resets = 0;
  for (; connections < 1000; ++connections) {
    Http2Guard guard(&shared);
    ASSERT_EQ(guard.Feed(kPreface + kSettings, now), Verdict::kOk);
    // Under the per-connection burst.
    Verdict v = Verdict::kOk;
    for (int i = 0; i < 10 && v == Verdict::kOk; ++i, ++resets) {
      v = guard.Feed(kHeaders + kReset, now);
    }
    if (v == Verdict::kRapidReset) break;
  }
  EXPECT_EQ(resets, static_cast<int>(Http2Guard::kSharedResetBurst) + 1);
  // Later, a connection may reset again.
  Http2Guard later(&shared);
  ASSERT_EQ(later.Feed(kPreface + kSettings, now), Verdict::kOk);
  EXPECT_EQ(later.Feed(kHeaders + kReset, now + std::chrono::seconds(1)),
            Verdict::kOk);
}

TEST(Http2GuardTest, HeaderBlocksThatNeverEndAreCaught) {
  const auto now = Clock::now();
  {
    Http2Guard guard;
    ASSERT_EQ(guard.Feed(kPreface + kSettings, now), Verdict::kOk);
    std::string s = Frame(0x1, 0, 1, std::string(100, 'h'));  // no END_HEADERS
    for (int i = 0; i < Http2Guard::kMaxContinuations + 1; ++i) {
      s += Frame(0x9, 0, 1, "x");
    }
    EXPECT_EQ(guard.Feed(s, now), Verdict::kEndlessHeaders);
  }
  {
    Http2Guard guard;
    ASSERT_EQ(guard.Feed(kPreface + kSettings, now), Verdict::kOk);
    std::string s = Frame(0x1, 0, 1, std::string(16000, 'h'));
    Verdict v = guard.Feed(s, now);
    int frames = 0;
    while (v == Verdict::kOk && frames < 1000) {
      v = guard.Feed(Frame(0x9, 0, 1, std::string(16000, 'v')), now);
      ++frames;
    }
    EXPECT_EQ(v, Verdict::kEndlessHeaders);
    EXPECT_LE(frames * 16000, Http2Guard::kMaxHeaderBlockBytes);
  }
  {
    // A block that does end, however long its life, is fine.
    Http2Guard guard;
    std::string s = kPreface + kSettings;
    for (int i = 0; i < 1000; ++i) {
      s += Frame(0x1, 0, 1, std::string(100, 'h')) +
           Frame(0x9, 0x4, 1, std::string(100, 'h'));
    }
    EXPECT_EQ(guard.Feed(s, now), Verdict::kOk);
  }
}

TEST(Http2GuardTest, SettingsFloodsAreCaught) {
  Http2Guard guard;
  const auto now = Clock::now();
  ASSERT_EQ(guard.Feed(kPreface, now), Verdict::kOk);
  Verdict v = Verdict::kOk;
  for (int i = 0; i < 100 && v == Verdict::kOk; ++i)
    v = guard.Feed(kSettings, now);
  EXPECT_EQ(v, Verdict::kSettingsFlood);
  // Acknowledgements are not counted.
  Http2Guard acks;
  ASSERT_EQ(acks.Feed(kPreface, now), Verdict::kOk);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(acks.Feed(Frame(0x4, 0x1, 0, ""), now), Verdict::kOk);
  }
}

TEST(Http2GuardTest, TlsIsNotJudged) {
  Http2Guard guard;
  const std::string client_hello =
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
  EXPECT_EQ(guard.Feed(client_hello, Clock::now()), Verdict::kNotHttp2);
  std::string rapid;
  for (int i = 0; i < 1000; ++i) rapid += kHeaders + kReset;
  EXPECT_EQ(guard.Feed(rapid, Clock::now()), Verdict::kNotHttp2);
}

}  // namespace
}  // namespace grammard::service
