// Test certificates made with the openssl command line: a CA, a server
// certificate for 127.0.0.1 and a client certificate, both signed by the
// CA, for tests of TLS and mutual TLS.
//
// Cost: three RSA-2048 key generations (a fraction of a second).
// Thread-safety: a pure function of its folder.
#ifndef GRAMMARD_TESTS_SUPPORT_CERTIFICATES_H_
#define GRAMMARD_TESTS_SUPPORT_CERTIFICATES_H_

#include <string>

#include "absl/status/status.h"

namespace grammard::testing {

// Writes ca.pem, server.pem, server.key, client.pem and client.key (valid
// for a day) into `dir`. Internal when openssl is missing or fails.
absl::Status MakeTestCertificates(const std::string& dir);

}  // namespace grammard::testing

#endif  // GRAMMARD_TESTS_SUPPORT_CERTIFICATES_H_
