#pragma once
// A Prometheus text endpoint on 127.0.0.1 (`--metrics-port P`): a thread that
// answers every HTTP request with the newest metrics text. Off by default;
// only the local host can reach it.

#include <memory>
#include <string>

namespace hotloop::telemetry {

class MetricsServer {
 public:
  // Listens on 127.0.0.1:`port` (0: a free port, see port()). Throws
  // UsageError when the port cannot be bound (in use, privileged).
  explicit MetricsServer(int port);
  ~MetricsServer(); // stops and joins the thread
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The text served from now on (Prometheus exposition format 0.0.4).
  void publish(std::string text);
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hotloop::telemetry
