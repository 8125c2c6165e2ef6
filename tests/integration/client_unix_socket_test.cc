// The client over the daemon's Unix socket (--unix_socket), as a sidecar's
// engine in the same pod reaches it: the same masks as over TCP, and a
// restart of the daemon (which leaves its socket file behind when killed)
// is survived. The socket is group-writable, and a path too long to bind is
// refused up front.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "client/client.h"
#include "tests/support/daemon.h"
#include "tests/support/paths.h"

namespace grammard {
namespace {

using std::chrono::milliseconds;

class ClientUnixSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::TokenizerDir("llama3")) {
      GTEST_SKIP() << testing::MissingDataMessage("the llama3 tokenizer");
    }
    testing::DaemonOptions options;
    options.unix_socket = true;
    auto daemon = testing::Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    ASSERT_FALSE(daemon_->unix_target().empty());
    struct stat st {};
    ASSERT_EQ(stat(daemon_->unix_socket_path().c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0660);
  }

  std::unique_ptr<client::Client> Connect(const std::string& target) {
    client::ClientOptions o;
    o.target = target;
    o.tokenizer = "llama3";
    o.connect_timeout = milliseconds(60000);
    o.step_timeout = milliseconds(120000);
    auto connected = client::Client::Connect(o);
    EXPECT_TRUE(connected.ok()) << target << ": " << connected.status();
    return connected.ok() ? *std::move(connected) : nullptr;
  }

  // Steps sequence 1 on `c` with `accepted` and returns its row.
  static std::vector<uint32_t> Step(client::Client& c,
                                    const std::vector<int32_t>& accepted) {
    std::vector<uint32_t> row(static_cast<size_t>(c.words_per_row()));
    std::vector<client::SequenceMasks> results;
    EXPECT_TRUE(c.SubmitStep({{1, 0, accepted, {}}}).ok());
    const absl::Status s =
        c.WaitMasks({row.data(), c.words_per_row(), 1}, &results);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_TRUE(!results.empty() && results[0].status.ok())
        << (results.empty() ? absl::UnknownError("no result")
                            : results[0].status);
    return row;
  }

  std::unique_ptr<testing::Daemon> daemon_;
};

TEST_F(ClientUnixSocketTest, MasksMatchTcpAndARestartIsSurvived) {
  auto over_unix = Connect(daemon_->unix_target());
  auto over_tcp = Connect(daemon_->target());
  ASSERT_NE(over_unix, nullptr);
  ASSERT_NE(over_tcp, nullptr);
  grammard::v1::Constraint constraint;
  constraint.set_regex("(yes|no) [0-9]{2}");
  for (client::Client* c : {over_unix.get(), over_tcp.get()}) {
    ASSERT_TRUE(c->Open(1, constraint).ok());
    ASSERT_TRUE(c->WaitReady({1}).ok());
  }
  const std::vector<uint32_t> first = Step(*over_unix, {});
  EXPECT_EQ(first, Step(*over_tcp, {}));
  // Some token the first row allows, accepted by both.
  int32_t token = -1;
  for (size_t w = 0; w < first.size() && token < 0; ++w) {
    if (first[w] != 0) {
      token = static_cast<int32_t>(w * 32 + __builtin_ctz(first[w]));
    }
  }
  ASSERT_GE(token, 0) << "the first row allows nothing";
  const std::vector<uint32_t> second = Step(*over_unix, {token});
  EXPECT_EQ(second, Step(*over_tcp, {token}));
  EXPECT_NE(second, first);

  // Killed, the daemon leaves its socket file; the new one binds the same
  // path, and the client replays its sequence there.
  ASSERT_TRUE(daemon_->Restart().ok());
  EXPECT_EQ(Step(*over_unix, {}), second);
  EXPECT_EQ(over_unix->Metrics().reconnects, 1u);
}

// A path the kernel cannot bind is refused before the tokenizers load,
// naming the flag.
TEST(UnixSocketFlagTest, APathTooLongIsRefused) {
  if (!testing::TokenizerDir("llama3")) {
    GTEST_SKIP() << testing::MissingDataMessage("the llama3 tokenizer");
  }
  testing::DaemonOptions options;
  options.flags = {"--unix_socket=/tmp/" + std::string(200, 's')};
  auto daemon = testing::Daemon::Start(options);
  ASSERT_FALSE(daemon.ok());
  EXPECT_NE(daemon.status().message().find(
                "--unix_socket is 205 bytes long; a Unix socket path has at "
                "most 107"),
            std::string::npos)
      << daemon.status();
}

}  // namespace
}  // namespace grammard
