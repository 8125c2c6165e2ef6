#include "service/metrics/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "service/metrics/metrics.h"

namespace grammard::metrics {
namespace {

struct HttpResponse {
  int status = 0;       // 0: no valid response
  std::string headers;  // status line and headers, CRLF-separated
  std::string body;
};

// One HTTP/1.1 request to 127.0.0.1:`port`, read until the server closes.
HttpResponse Fetch(int port, const std::string& method,
                   const std::string& path) {
  HttpResponse response;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return response;
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    close(fd);
    return response;
  }
  const std::string request = method + " " + path +
                              " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Connection: close\r\n\r\n";
  if (write(fd, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return response;
  }
  std::string raw;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) raw.append(buffer, n);
  close(fd);
  const size_t end = raw.find("\r\n\r\n");
  if (raw.compare(0, 9, "HTTP/1.1 ") != 0 || end == std::string::npos) {
    return response;
  }
  response.status = std::stoi(raw.substr(9, 3));
  response.headers = raw.substr(0, end + 2);
  response.body = raw.substr(end + 4);
  return response;
}

bool HasHeader(const HttpResponse& response, const std::string& line) {
  return response.headers.find("\r\n" + line + "\r\n") != std::string::npos;
}

// Stopping a server takes up to 2 s (see MetricsServer::Stop), so the tests
// that only scrape share one.
class MetricsServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = new Registry();
    requests_ = *registry_->AddCounter("test_requests_total", "Requests.");
    requests_->Increment(3);
    server_ = new MetricsServer(registry_);
    start_status_ = new absl::Status(server_->Start("127.0.0.1:0"));
  }
  static void TearDownTestSuite() {
    delete start_status_;
    delete server_;
    delete registry_;
  }
  void SetUp() override { ASSERT_TRUE(start_status_->ok()) << *start_status_; }

  static Registry* registry_;
  static Counter* requests_;
  static MetricsServer* server_;
  static absl::Status* start_status_;
};

Registry* MetricsServerTest::registry_ = nullptr;
Counter* MetricsServerTest::requests_ = nullptr;
MetricsServer* MetricsServerTest::server_ = nullptr;
absl::Status* MetricsServerTest::start_status_ = nullptr;

TEST_F(MetricsServerTest, ServesMetricsOnAFreePort) {
  ASSERT_GT(server_->port(), 0);
  HttpResponse response = Fetch(server_->port(), "GET", "/metrics");
  EXPECT_EQ(response.status, 200) << response.headers;
  EXPECT_TRUE(HasHeader(
      response, "Content-Type: text/plain; version=0.0.4; charset=utf-8"))
      << response.headers;
  EXPECT_TRUE(HasHeader(
      response, "Content-Length: " + std::to_string(response.body.size())))
      << response.headers;
  EXPECT_EQ(response.body, registry_->Render());
  EXPECT_NE(response.body.find("# TYPE test_requests_total counter\n"),
            std::string::npos)
      << response.body;

  // A scrape sees updates made since the last one.
  requests_->Increment();
  EXPECT_EQ(Fetch(server_->port(), "GET", "/metrics?x=1").body,
            registry_->Render());
}

TEST_F(MetricsServerTest, OtherPathsAre404AndOtherMethods405) {
  for (const char* path : {"/", "/metric", "/metrics/", "/metrics/x", "/x"}) {
    EXPECT_EQ(Fetch(server_->port(), "GET", path).status, 404) << path;
  }
  HttpResponse post = Fetch(server_->port(), "POST", "/metrics");
  EXPECT_EQ(post.status, 405);
  EXPECT_TRUE(HasHeader(post, "Allow: GET")) << post.headers;
}

TEST_F(MetricsServerTest, ConcurrentScrapesAndUpdates) {
  CounterFamily* family = *registry_->AddCounterFamily("test_updates_total",
                                                       "Updates.", {"thread"});
  std::atomic<bool> done{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 2; ++t) {
    // Made before any scrape: a scrape may come before a writer runs.
    Counter* counter = *family->WithLabels({std::to_string(t)});
    writers.emplace_back([&done, counter] {
      while (!done.load()) counter->Increment();
    });
  }
  std::vector<std::thread> scrapers;
  for (int t = 0; t < 4; ++t) {
    scrapers.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        HttpResponse response = Fetch(server_->port(), "GET", "/metrics");
        EXPECT_EQ(response.status, 200);
        EXPECT_NE(response.body.find("\ntest_updates_total{thread=\"0\"} "),
                  std::string::npos)
            << response.body;
      }
    });
  }
  for (std::thread& scraper : scrapers) scraper.join();
  done = true;
  for (std::thread& writer : writers) writer.join();
}

TEST(MetricsServerStartTest, TakenPortIsAClearError) {
  // Hold a port with a plain listening socket, as any other process could.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string taken =
      "127.0.0.1:" + std::to_string(ntohs(address.sin_port));

  Registry registry;
  MetricsServer server(&registry);
  absl::Status status = server.Start(taken);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find(taken), std::string::npos) << status;
  EXPECT_NE(status.message().find("Address already in use"), std::string::npos)
      << status;
  EXPECT_EQ(server.port(), 0);
  close(fd);
}

TEST(MetricsServerStartTest, RejectsMalformedAddresses) {
  Registry registry;
  MetricsServer server(&registry);
  for (const char* address :
       {"", "9090", ":9090", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:65536",
        "127.0.0.1:9090s", "127.0.0.1:1,127.0.0.1:2", "127.0.0.1:123456"}) {
    EXPECT_EQ(server.Start(address).code(), absl::StatusCode::kInvalidArgument)
        << address;
  }
}

TEST(MetricsServerStartTest, StartTwiceFailsAndStopThenStartWorks) {
  Registry registry;
  MetricsServer server(&registry);
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  EXPECT_EQ(server.Start("127.0.0.1:0").code(),
            absl::StatusCode::kFailedPrecondition);
  server.Stop();
  EXPECT_EQ(server.port(), 0);
  server.Stop();
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  EXPECT_EQ(Fetch(server.port(), "GET", "/metrics").status, 200);
}

}  // namespace
}  // namespace grammard::metrics
