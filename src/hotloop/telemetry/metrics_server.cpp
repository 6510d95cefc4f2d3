#include "hotloop/telemetry/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::telemetry {

struct MetricsServer::Impl {
  int fd = -1;
  int port = 0;
  std::mutex mutex;
  std::string text;
  std::atomic<bool> stop{false};
  std::thread thread;

  void serve(int client) {
    // Read the request head (a scraper sends a few hundred bytes), then
    // answer whatever it asked.
    pollfd p{client, POLLIN, 0};
    std::string request;
    char buf[2048];
    while (request.find("\r\n\r\n") == std::string::npos &&
           request.size() < 16384 && ::poll(&p, 1, 1000) > 0) {
      const ssize_t n = ::recv(client, buf, sizeof buf, 0);
      if (n <= 0) {
        break;
      }
      request.append(buf, static_cast<std::size_t>(n));
    }
    std::string body;
    {
      std::lock_guard<std::mutex> lock(mutex);
      body = text;
    }
    const bool metrics =
        request.starts_with("GET /metrics") || request.starts_with("GET / ");
    const std::string response = metrics
        ? fmt::format(
              "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{}",
              body.size(),
              body)
        : std::string("HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    std::size_t sent = 0;
    while (sent < response.size()) {
      const ssize_t n = ::send(
          client, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        break;
      }
      sent += static_cast<std::size_t>(n);
    }
    ::close(client);
  }

  void run() {
    pollfd p{fd, POLLIN, 0};
    while (!stop.load()) {
      if (::poll(&p, 1, 200) > 0) {
        const int client = ::accept(fd, nullptr, nullptr);
        if (client >= 0) {
          serve(client);
        }
      }
    }
  }
};

MetricsServer::MetricsServer(int port) : impl_(std::make_unique<Impl>()) {
  impl_->fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(impl_->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (impl_->fd < 0 ||
      ::bind(impl_->fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(impl_->fd, 8) != 0) {
    const std::string why = std::strerror(errno);
    if (impl_->fd >= 0) {
      ::close(impl_->fd);
    }
    throw UsageError(
        fmt::format(
            "--metrics-port {}: cannot listen on 127.0.0.1: {}", port, why),
        "choose a free port above 1024, or leave --metrics-port at 0 (off)");
  }
  socklen_t len = sizeof addr;
  ::getsockname(impl_->fd, reinterpret_cast<sockaddr*>(&addr), &len);
  impl_->port = ntohs(addr.sin_port);
  impl_->thread = std::thread([this] { impl_->run(); });
}

MetricsServer::~MetricsServer() {
  impl_->stop = true;
  impl_->thread.join();
  ::close(impl_->fd);
}

void MetricsServer::publish(std::string text) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->text = std::move(text);
}

int MetricsServer::port() const {
  return impl_->port;
}

} // namespace hotloop::telemetry
