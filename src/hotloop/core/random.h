#pragma once
// Small, fast, platform-independent randomness for shuffles, augmentation
// choices and synthetic data: the same seed gives the same numbers on every
// machine and standard library (std::shuffle and the std distributions do not
// promise that).

#include <cstdint>

namespace hotloop {

// SplitMix64: advances `state` and returns the next well-mixed 64-bit value.
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A well-mixed combination of two values (e.g. a seed and an epoch).
inline std::uint64_t mix64(std::uint64_t a, std::uint64_t b) {
  std::uint64_t state = a ^ (b + 0x9E3779B97F4A7C15ULL + (a << 6) + (a >> 2));
  return splitmix64(state);
}

} // namespace hotloop
