#include "service/listener_security.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace grammard::service {
namespace {

using Metadata = std::multimap<grpc::string_ref, grpc::string_ref>;

std::string WriteFile(const std::string& dir, const std::string& name,
                      const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(BearerToken, AcceptsOnlyTheExactBearerToken) {
  BearerToken token("s3cret");
  Metadata none;
  absl::Status s = token.Check(none);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(s.message().find("authorization"), std::string::npos) << s;

  const std::string key = "authorization";
  for (const std::string value :
       {"s3cret", "Basic s3cret", "Bearer s3cre", "Bearer s3cret2",
        "Bearer S3cret", "bearer s3cret", "Bearer "}) {
    Metadata m{{key, value}};
    s = token.Check(m);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << value;
    EXPECT_EQ(s.message().find("s3cret"), std::string::npos)
        << "the message gives the token away: " << s;
  }
  const std::string good = "Bearer s3cret";
  EXPECT_TRUE(token.Check(Metadata{{key, good}}).ok());
}

TEST(BearerToken, ReadsATrimmedTokenAndRefusesAnEmptyOrMissingFile) {
  const std::string dir = testing::MakeTempDir();
  ASSERT_FALSE(dir.empty());
  auto token = BearerToken::FromFile(WriteFile(dir, "t", "  abc\n"));
  ASSERT_TRUE(token.ok()) << token.status();
  const std::string key = "authorization", value = "Bearer abc";
  EXPECT_TRUE(token->Check(Metadata{{key, value}}).ok());

  auto empty = BearerToken::FromFile(WriteFile(dir, "e", "\n"));
  EXPECT_NE(empty.status().message().find("is empty"), std::string::npos)
      << empty.status();
  auto missing = BearerToken::FromFile(dir + "/none");
  EXPECT_NE(missing.status().message().find("cannot be read"),
            std::string::npos)
      << missing.status();
}

TEST(MakeServerCredentials, NamesWhatIsMissing) {
  EXPECT_TRUE(MakeServerCredentials(TlsFiles{}).ok());
  auto half = MakeServerCredentials(TlsFiles{"cert.pem", "", ""});
  EXPECT_NE(half.status().message().find("both"), std::string::npos)
      << half.status();
  auto ca_only = MakeServerCredentials(TlsFiles{"", "", "ca.pem"});
  EXPECT_NE(ca_only.status().message().find("--tls_client_ca_file"),
            std::string::npos)
      << ca_only.status();
  auto unreadable =
      MakeServerCredentials(TlsFiles{"/nonexistent/cert.pem", "k", ""});
  EXPECT_NE(unreadable.status().message().find("/nonexistent/cert.pem"),
            std::string::npos)
      << unreadable.status();
}

}  // namespace
}  // namespace grammard::service
