// The gRPC listener's protections, whole-system: the real daemon serving
// mutual TLS with a bearer token. A client with the CA, its own certificate
// and the token is served; without the token it gets UNAUTHENTICATED on
// every Grammard RPC, while health checks stay open for kubelet's probes;
// without a client certificate, or in plaintext, it is not served at all.
// Certificates come from the openssl command line (tests/support).
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grammard.grpc.pb.h"
#include "proto/health.grpc.pb.h"
#include "tests/support/certificates.h"
#include "tests/support/daemon.h"
#include "tests/support/paths.h"

namespace grammard {
namespace {

namespace v1 = grammard::v1;
using testing::Daemon;

constexpr char kToken[] = "t0k3n-for-tests";

class SecureListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::TokenizerDir("llama3").has_value()) {
      GTEST_SKIP() << testing::MissingDataMessage("the llama3 tokenizer");
    }
    dir_ = testing::MakeTempDir();
    ASSERT_FALSE(dir_.empty());
    absl::Status certs = testing::MakeTestCertificates(dir_);
    ASSERT_TRUE(certs.ok()) << certs;
    std::ofstream(dir_ + "/token") << kToken << "\n";
    testing::DaemonOptions options;
    options.flags = {"--tls_cert_file=" + dir_ + "/server.pem",
                     "--tls_key_file=" + dir_ + "/server.key",
                     "--tls_client_ca_file=" + dir_ + "/ca.pem",
                     "--auth_token_file=" + dir_ + "/token"};
    auto daemon = Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
  }

  std::shared_ptr<grpc::Channel> Channel(bool client_cert) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = testing::ReadFileOrEmpty(dir_ + "/ca.pem");
    if (client_cert) {
      ssl.pem_private_key = testing::ReadFileOrEmpty(dir_ + "/client.key");
      ssl.pem_cert_chain = testing::ReadFileOrEmpty(dir_ + "/client.pem");
    }
    return grpc::CreateChannel(daemon_->target(), grpc::SslCredentials(ssl));
  }

  static grpc::Status List(grpc::Channel* channel, const std::string& token) {
    auto stub = v1::Grammard::NewStub(
        std::shared_ptr<grpc::Channel>(channel, [](grpc::Channel*) {}));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    if (!token.empty()) context.AddMetadata("authorization", token);
    v1::ListTokenizersResponse response;
    return stub->ListTokenizers(&context, v1::ListTokenizersRequest(),
                                &response);
  }

  std::string dir_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(SecureListenerTest, ServesOnlyCertifiedClientsWithTheToken) {
  auto channel = Channel(/*client_cert=*/true);
  grpc::Status s = List(channel.get(), absl::StrCat("Bearer ", kToken));
  EXPECT_TRUE(s.ok()) << s.error_message();

  for (const std::string& bad :
       {std::string(), std::string("Bearer wrong"), std::string(kToken)}) {
    s = List(channel.get(), bad);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << bad;
    EXPECT_EQ(s.error_message().find(kToken), std::string::npos)
        << s.error_message();
  }
  // The stream and the other RPCs are guarded too.
  {
    auto stub = v1::Grammard::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    auto stream = stub->Decode(&context);
    v1::DecodeResponse response;
    EXPECT_FALSE(stream->Read(&response));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    auto stub = v1::Grammard::NewStub(channel);
    grpc::ClientContext context;
    v1::CompileRequest request;
    request.set_tokenizer("llama3");
    request.mutable_constraint()->set_regex("a+");
    v1::CompileResponse response;
    EXPECT_EQ(stub->Compile(&context, request, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }

  // Health needs no token (kubelet's probes carry none).
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckResponse response;
  s = health->Check(&context, grpc::health::v1::HealthCheckRequest(),
                    &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(SecureListenerTest, RefusesClientsWithoutACertificateOrTls) {
  const std::string bearer = absl::StrCat("Bearer ", kToken);
  auto no_cert = Channel(/*client_cert=*/false);
  EXPECT_EQ(List(no_cert.get(), bearer).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  auto plaintext = grpc::CreateChannel(daemon_->target(),
                                       grpc::InsecureChannelCredentials());
  EXPECT_EQ(List(plaintext.get(), bearer).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace grammard
