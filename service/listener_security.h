// Who may use grammard's gRPC listener. A sidecar listens on loopback and
// needs none of this; a listener other pods reach can serve TLS (a server
// certificate), mutual TLS (client certificates signed by a given CA) and
// require a bearer token on every Grammard RPC. Health checks stay open:
// kubelet's gRPC probes carry no token (and report nothing secret).
//
// Cost: files are read once at start; a token check is a metadata lookup
// and a constant-time compare per RPC. Thread-safety: a BearerToken is
// immutable, safe to share.
#ifndef GRAMMARD_SERVICE_LISTENER_SECURITY_H_
#define GRAMMARD_SERVICE_LISTENER_SECURITY_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grammard::service {

// PEM files. All empty: plaintext. cert_file and key_file: TLS.
// client_ca_file as well: mutual TLS, every client presenting a certificate
// that CA signed.
struct TlsFiles {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
};

// The listener's credentials; InvalidArgument naming the flag-level
// mistake (a key without a certificate, a CA without either) or the file
// that cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files);

class BearerToken {
 public:
  // The file's contents without surrounding whitespace (a mounted Secret
  // often ends in a newline); InvalidArgument if it cannot be read or is
  // empty.
  static absl::StatusOr<BearerToken> FromFile(const std::string& path);
  explicit BearerToken(std::string token) : token_(std::move(token)) {}

  // OK when the metadata has "authorization: Bearer <token>"; otherwise
  // Unauthenticated, saying what is missing but never what was expected.
  absl::Status Check(
      const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;

 private:
  std::string token_;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_LISTENER_SECURITY_H_
