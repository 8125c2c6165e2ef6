#include "service/metrics/metrics_server.h"

#include <civetweb.h>

#include <cstring>
#include <ctime>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "grammar/base/status_macros.h"

namespace grammard::metrics {
namespace {

constexpr char kMetricsContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";
constexpr char kErrorContentType[] = "text/plain; charset=utf-8";

absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

// civetweb reads its listening_ports option as a comma-separated list whose
// entries may carry 's' (TLS) or 'r' (redirect) suffixes; only one plain
// "host:port" may get through.
absl::Status CheckAddress(std::string_view address) {
  const size_t colon = address.rfind(':');
  const std::string_view host =
      colon == std::string_view::npos ? "" : address.substr(0, colon);
  const std::string_view port =
      colon == std::string_view::npos ? "" : address.substr(colon + 1);
  bool valid = !host.empty() && !port.empty() && port.size() <= 5 &&
               host.find(',') == std::string_view::npos;
  int number = 0;
  for (const char c : port) {
    valid = valid && absl::ascii_isdigit(c);
    number = number * 10 + (c - '0');
  }
  if (!valid || number > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address must be host:port with a port in "
                     "[0, 65535], got '",
                     AbslView(address), "'"));
  }
  return absl::OkStatus();
}

// civetweb says why it could not start only through its log callback, called
// on the thread inside mg_start2; Start() points this at a string meanwhile.
thread_local std::string* start_log = nullptr;

int CollectStartLog(const mg_connection* /*connection*/, const char* message) {
  if (start_log == nullptr) return 0;  // civetweb's default handling
  if (!start_log->empty()) start_log->append("; ");
  start_log->append(message);
  return 1;
}

// civetweb's one-time setup is not thread-safe and mg_start2 runs it itself
// when nobody has, so two servers starting at once on two threads would race
// in it; a function-local static runs it exactly once.
void InitCivetwebOnce() {
  [[maybe_unused]] static const unsigned features = mg_init_library(0);
}

// Every response goes through here, with a Date header of our own: civetweb
// adds a missing one with gmtime(), whose static buffer its worker threads
// then share (a data race ThreadSanitizer reports on concurrent scrapes).
void SendResponse(mg_connection* connection, int status,
                  const char* content_type, std::string_view body,
                  const char* allow) {
  const std::time_t now = std::time(nullptr);
  std::tm utc;
  gmtime_r(&now, &utc);
  char date[64];
  std::strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &utc);
  const std::string length = std::to_string(body.size());
  mg_response_header_start(connection, status);
  mg_response_header_add(connection, "Content-Type", content_type, -1);
  mg_response_header_add(connection, "Content-Length", length.c_str(), -1);
  mg_response_header_add(connection, "Date", date, -1);
  if (allow != nullptr) mg_response_header_add(connection, "Allow", allow, -1);
  mg_response_header_send(connection);
  mg_write(connection, body.data(), body.size());
}

}  // namespace

MetricsServer::MetricsServer(const Registry* registry) : registry_(registry) {}

MetricsServer::~MetricsServer() { Stop(); }

absl::Status MetricsServer::Start(std::string_view address) {
  GRAMMARD_RETURN_IF_ERROR(CheckAddress(address));
  absl::MutexLock lock(&mu_);
  if (context_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("metrics server already listens on port ", port_));
  }
  InitCivetwebOnce();

  const std::string listening_ports(address);
  const std::string threads = std::to_string(kWorkerThreads);
  // A worker waits for its connection's request at most
  // kRequestTimeoutMs: an idle connection must not hold one of the few
  // workers for long (with 2 workers and 10 s, two idle connections made
  // every scrape fail).
  const std::string timeout = std::to_string(kRequestTimeoutMs);
  const char* options[] = {"listening_ports",
                           listening_ports.c_str(),
                           "num_threads",
                           threads.c_str(),
                           "request_timeout_ms",
                           timeout.c_str(),
                           nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  callbacks.begin_request = &MetricsServer::HandleRequest;
  callbacks.log_message = &CollectStartLog;
  mg_init_data init = {&callbacks, this, options};
  unsigned error_code = 0;
  char error_text[256] = "";
  mg_error_data error = {&error_code, error_text, sizeof(error_text)};

  std::string log;
  start_log = &log;
  mg_context* const context = mg_start2(&init, &error);
  start_log = nullptr;
  if (context == nullptr) {
    // The log holds the cause ("cannot bind to ...: 98 (Address already in
    // use)") followed by error_text's summary.
    return absl::UnavailableError(
        absl::StrCat("metrics server cannot listen on ", AbslView(address),
                     ": ", log.empty() ? error_text : log));
  }
  mg_server_port bound;
  if (mg_get_server_ports(context, 1, &bound) != 1) {
    mg_stop(context);
    return absl::InternalError(absl::StrCat(
        "metrics server on ", AbslView(address), ": no listening port"));
  }
  context_ = context;
  port_ = bound.port;
  return absl::OkStatus();
}

void MetricsServer::Stop() {
  absl::MutexLock lock(&mu_);
  if (context_ == nullptr) return;
  // Blocks until the workers finish; HandleRequest never takes mu_, so
  // scrapes in progress cannot deadlock with this.
  mg_stop(context_);
  context_ = nullptr;
  port_ = 0;
}

int MetricsServer::port() const {
  absl::MutexLock lock(&mu_);
  return port_;
}

int MetricsServer::HandleRequest(mg_connection* connection) {
  const mg_request_info* request = mg_get_request_info(connection);
  const auto* server = static_cast<const MetricsServer*>(request->user_data);
  if (request->local_uri == nullptr ||
      std::strcmp(request->local_uri, "/metrics") != 0) {
    SendResponse(connection, 404, kErrorContentType,
                 "Not found: metrics are at /metrics\n", nullptr);
    return 404;
  }
  if (std::strcmp(request->request_method, "GET") != 0) {
    SendResponse(connection, 405, kErrorContentType,
                 "Method not allowed: use GET\n", "GET");
    return 405;
  }
  SendResponse(connection, 200, kMetricsContentType,
               server->registry_->Render(), nullptr);
  return 200;
}

}  // namespace grammard::metrics
