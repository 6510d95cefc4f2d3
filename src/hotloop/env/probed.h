#pragma once
// A fact read from the system: either its value, or the reason it could not be
// read
// ("Not Supported", "function missing from this NVML library", ...). Checks
// turn a missing fact into SKIP, never into a crash or a made-up value.

#include <optional>
#include <string>
#include <utility>

namespace hotloop::env {

template <typename T>
struct Probed {
  std::optional<T> value;
  std::string missing_reason; // set when !value

  static Probed of(T v) {
    return Probed{std::move(v), {}};
  }
  static Probed missing(std::string why) {
    return Probed{std::nullopt, std::move(why)};
  }
  bool has_value() const {
    return value.has_value();
  }
  const T& operator*() const {
    return *value;
  }
  const T* operator->() const {
    return &*value;
  }
};

} // namespace hotloop::env
