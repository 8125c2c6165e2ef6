// The client against the real daemon serving mutual TLS with a bearer
// token: steps, the rank exchange (which rides the same channel, token
// included) and a restart are served; without the token the daemon refuses
// the client at Connect.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/rank_exchange.h"
#include "tests/support/certificates.h"
#include "tests/support/daemon.h"
#include "tests/support/paths.h"

namespace grammard {
namespace {

using std::chrono::milliseconds;

class ClientSecureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::TokenizerDir("llama3")) {
      GTEST_SKIP() << testing::MissingDataMessage("the llama3 tokenizer");
    }
    dir_ = testing::MakeTempDir();
    ASSERT_FALSE(dir_.empty());
    absl::Status made = testing::MakeTestCertificates(dir_);
    ASSERT_TRUE(made.ok()) << made;
    std::ofstream(dir_ + "/token") << "s3cret-t0ken\n";
    testing::DaemonOptions options;
    options.flags = {"--tls_cert_file=" + dir_ + "/server.pem",
                     "--tls_key_file=" + dir_ + "/server.key",
                     "--tls_client_ca_file=" + dir_ + "/ca.pem",
                     "--auth_token_file=" + dir_ + "/token"};
    auto daemon = testing::Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
  }

  client::ClientOptions Options(bool with_token) const {
    client::ClientOptions o;
    o.target = daemon_->target();
    o.tokenizer = "llama3";
    o.tls = true;
    o.tls_ca_file = dir_ + "/ca.pem";
    o.tls_cert_file = dir_ + "/client.pem";
    o.tls_key_file = dir_ + "/client.key";
    if (with_token) o.auth_token_file = dir_ + "/token";
    o.connect_timeout = milliseconds(60000);
    o.step_timeout = milliseconds(120000);
    return o;
  }

  std::string dir_;
  std::unique_ptr<testing::Daemon> daemon_;
};

TEST_F(ClientSecureTest, MutualTlsWithTheTokenIsServedAcrossARestart) {
  auto connected = client::Client::Connect(Options(/*with_token=*/true));
  ASSERT_TRUE(connected.ok()) << connected.status();
  client::Client& c = **connected;
  grammard::v1::Constraint constraint;
  constraint.set_regex("(yes|no)");
  ASSERT_TRUE(c.Open(1, constraint).ok());
  ASSERT_TRUE(c.WaitReady({1}).ok());
  EXPECT_EQ(c.State(1)->state, client::GrammarState::kReady);

  client::GrammardRankExchange exchange(c.channel(), "secure", 0, 1);
  auto agreed = client::SyncReadiness(c, exchange, 1, {1}, milliseconds(10000));
  ASSERT_TRUE(agreed.ok()) << agreed.status();
  EXPECT_EQ(agreed->ready, std::vector<uint64_t>{1});

  std::vector<uint32_t> rows(static_cast<size_t>(c.words_per_row()));
  std::vector<client::SequenceMasks> results;
  for (int step = 0; step < 2; ++step) {
    if (step == 1) {
      ASSERT_TRUE(daemon_->Restart().ok());
    }
    ASSERT_TRUE(c.SubmitStep({{1, 0, {}, {}}}).ok());
    absl::Status s = c.WaitMasks({rows.data(), c.words_per_row(), 1}, &results);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_TRUE(results[0].status.ok()) << results[0].status;
  }
  EXPECT_EQ(c.Metrics().reconnects, 1u);
}

TEST_F(ClientSecureTest, WithoutTheTokenTheDaemonRefusesTheClient) {
  auto connected = client::Client::Connect(Options(/*with_token=*/false));
  EXPECT_EQ(connected.status().code(), absl::StatusCode::kUnauthenticated)
      << connected.status();
}

}  // namespace
}  // namespace grammard
