// MetricsServer: serves a Registry at GET /metrics over plain HTTP (civetweb)
// for Prometheus to scrape, as `text/plain; version=0.0.4; charset=utf-8`.
// Any other path is 404; any other method on /metrics is 405.
//
// Cost: Start() spawns civetweb's listener thread and kWorkerThreads workers;
// each scrape renders the registry on a worker (linear in the number of
// series). Nothing here touches the metric update paths.
//
// Thread-safety: every method may be called from any thread; scrapes run
// concurrently with each other and with metric updates. Starting a server
// makes the process ignore SIGPIPE (civetweb sets that), which any process
// writing to sockets wants anyway.
#ifndef GRAMMARD_SERVICE_METRICS_METRICS_SERVER_H_
#define GRAMMARD_SERVICE_METRICS_METRICS_SERVER_H_

#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "service/metrics/metrics.h"

struct mg_connection;
struct mg_context;

namespace grammard::metrics {

class MetricsServer {
 public:
  // Enough for a couple of Prometheus replicas, a person with curl and a
  // few idle connections (each holds a worker for up to kRequestTimeoutMs);
  // a sidecar on a few cores should not hold civetweb's default 50 threads.
  static constexpr int kWorkerThreads = 8;
  // How long a worker waits for a connection's request: a scrape's arrives
  // at once.
  static constexpr int kRequestTimeoutMs = 1000;

  // `registry` must outlive the server.
  explicit MetricsServer(const Registry* registry);
  // Stops the server.
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Listens on `address`, "host:port" with an IPv4 address or a host name
  // ("0.0.0.0:9464", "localhost:9464"; Debian's civetweb has no IPv6); port
  // 0 picks a free port, which port() then tells. InvalidArgument for a
  // malformed address; Unavailable, with civetweb's reason ("Address already
  // in use"), when it cannot listen there; FailedPrecondition if started.
  absl::Status Start(std::string_view address);

  // Stops listening and waits for scrapes in progress. Takes up to 2 s:
  // civetweb's listener notices the stop only between its 2-second polls.
  // Does nothing if not started; Start() may be called again afterwards.
  void Stop();

  // The port listened on, or 0 when not started.
  int port() const;

 private:
  // civetweb's begin_request callback: answers every request.
  static int HandleRequest(mg_connection* connection);

  const Registry* const registry_;
  mutable absl::Mutex mu_;
  mg_context* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  int port_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace grammard::metrics

#endif  // GRAMMARD_SERVICE_METRICS_METRICS_SERVER_H_
