#pragma once
// Waiting on a condition with a deadline, instead of sleeping for a time that
// a loaded machine may not honour: polls `done` every 10 ms until it holds or
// `limit` has passed, and returns whether it holds.

#include <chrono>
#include <thread>

namespace hotloop::test {

template <typename Condition>
bool wait_until(Condition done, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= end) {
      return done();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

} // namespace hotloop::test
