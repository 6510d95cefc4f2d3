#include "hotloop/core/stop_signal.h"

#include <csignal>

namespace hotloop {

namespace {

// Signal handlers can only reach process-wide, lock-free state.
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
struct sigaction g_old_int {};
struct sigaction g_old_term {};

extern "C" void on_stop_signal(int sig) {
  g_signal.store(sig);
  g_stop.store(true);
  // A second signal gets the default action (terminate).
  std::signal(sig, SIG_DFL);
}

} // namespace

StopSignal::StopSignal() {
  g_stop.store(false);
  g_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

StopSignal::~StopSignal() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

const std::atomic<bool>* StopSignal::flag() const {
  return &g_stop;
}

int StopSignal::signal() const {
  return g_signal.load();
}

} // namespace hotloop
