#include "service/listener_security.h"

#include <openssl/crypto.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace grammard::service {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     const char* what) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  // An empty file inserts nothing, which streams report as a failure.
  if (!in || (in.peek() != EOF && !(text << in.rdbuf()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " cannot be read"));
  }
  return text.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files) {
  if (files.cert_file.empty() && files.key_file.empty()) {
    if (!files.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca_file needs --tls_cert_file and --tls_key_file");
    }
    return grpc::InsecureServerCredentials();
  }
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both --tls_cert_file and --tls_key_file");
  }
  auto cert = ReadFile(files.cert_file, "--tls_cert_file");
  if (!cert.ok()) return cert.status();
  auto key = ReadFile(files.key_file, "--tls_key_file");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!files.client_ca_file.empty()) {
    auto ca = ReadFile(files.client_ca_file, "--tls_client_ca_file");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<BearerToken> BearerToken::FromFile(const std::string& path) {
  auto text = ReadFile(path, "--auth_token_file");
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_token_file ", path, " is empty"));
  }
  return BearerToken(std::move(token));
}

absl::Status BearerToken::Check(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "this server requires \"authorization: Bearer <token>\" metadata");
  }
  const std::string value(it->second.data(), it->second.size());
  constexpr char kScheme[] = "Bearer ";
  if (value.rfind(kScheme, 0) != 0) {
    return absl::UnauthenticatedError(
        "the authorization metadata is not \"Bearer <token>\"");
  }
  const std::string given = value.substr(sizeof(kScheme) - 1);
  // Constant time, so the comparison does not reveal a matching prefix.
  if (given.size() != token_.size() ||
      CRYPTO_memcmp(given.data(), token_.data(), token_.size()) != 0) {
    return absl::UnauthenticatedError("the bearer token is not valid");
  }
  return absl::OkStatus();
}

}  // namespace grammard::service
