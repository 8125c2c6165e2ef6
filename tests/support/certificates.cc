#include "tests/support/certificates.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace grammard::testing {

absl::Status MakeTestCertificates(const std::string& dir) {
  const std::string cmd = absl::StrCat(
      "set -e; cd '", dir, "'; ",
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=test-ca "
      "-keyout ca.key -out ca.pem; ",
      "openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 "
      "-keyout server.key -out server.csr; ",
      "echo subjectAltName=IP:127.0.0.1 > san.ext; ",
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
      "-CAcreateserial -days 1 -extfile san.ext -out server.pem; ",
      "openssl req -newkey rsa:2048 -nodes -subj /CN=engine "
      "-keyout client.key -out client.csr; ",
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key "
      "-CAcreateserial -days 1 -out client.pem");
  if (std::system(("(" + cmd + ") >/dev/null 2>&1").c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("openssl could not make test certificates in ", dir));
  }
  return absl::OkStatus();
}

}  // namespace grammard::testing
