#include "tests/load/prometheus_scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace grammard::load {

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string error = strerror(errno);
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("connect 127.0.0.1:", port, ": ", error));
  }
  // HTTP/1.0: the server closes the connection after the response, which
  // marks its end.
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (write(fd, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("short write of the HTTP request");
  }
  std::string response;
  char buffer[16384];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) {
    response.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  const size_t space = response.find(' ');
  if (body == std::string::npos || space == std::string::npos ||
      response.compare(space + 1, 3, "200") != 0) {
    return absl::UnavailableError(absl::StrCat(
        "GET ", path, ": ", response.substr(0, response.find('\r'))));
  }
  return response.substr(body + 4);
}

absl::StatusOr<std::vector<Bucket>> HistogramBuckets(
    const std::string& exposition, const std::string& name) {
  const std::string prefix = name + "_bucket{le=\"";
  std::vector<Bucket> buckets;
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t quote = line.find('"', prefix.size());
    if (quote == std::string::npos) continue;
    const std::string le = line.substr(prefix.size(), quote - prefix.size());
    Bucket b;
    b.upper_bound = le == "+Inf" ? std::numeric_limits<double>::infinity()
                                 : std::strtod(le.c_str(), nullptr);
    b.count = std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
    buckets.push_back(b);
  }
  if (buckets.empty()) {
    return absl::NotFoundError(absl::StrCat("no histogram ", name));
  }
  std::sort(buckets.begin(), buckets.end(),
            [](const Bucket& a, const Bucket& b) {
              return a.upper_bound < b.upper_bound;
            });
  return buckets;
}

std::vector<Bucket> Subtract(const std::vector<Bucket>& after,
                             const std::vector<Bucket>& before) {
  std::vector<Bucket> out = after;
  for (size_t i = 0; i < out.size() && i < before.size(); ++i) {
    out[i].count -= before[i].count;
  }
  return out;
}

double HistogramQuantile(const std::vector<Bucket>& buckets, double q) {
  if (buckets.empty() || buckets.back().count <= 0) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  const double rank = q * buckets.back().count;
  double lower = 0, below = 0;
  for (const Bucket& b : buckets) {
    if (b.count >= rank) {
      if (std::isinf(b.upper_bound)) return lower;
      const double in_bucket = b.count - below;
      return in_bucket <= 0
                 ? b.upper_bound
                 : lower + (b.upper_bound - lower) * (rank - below) / in_bucket;
    }
    lower = b.upper_bound;
    below = b.count;
  }
  return lower;
}

}  // namespace grammard::load
