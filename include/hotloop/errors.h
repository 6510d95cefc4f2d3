#pragma once
// The exceptions hotloop's library throws. Only apps/ turns them into messages
// and exit codes: UsageError and ConfigError exit 2 (bad usage), every other
// Error exits 1 (failure).

#include <stdexcept>
#include <string>

namespace hotloop {

// Base of every hotloop error. `what()` says what went wrong and where;
// `hint()` says how to fix it.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, std::string hint = {})
      : std::runtime_error(what), hint_(std::move(hint)) {}
  const std::string& hint() const noexcept {
    return hint_;
  }

 private:
  std::string hint_;
};

// A command line or option value that cannot be used (exit code 2).
class UsageError : public Error {
 public:
  using Error::Error;
};

// A configuration file or key that is wrong: unknown key, wrong type, out of
// range (exit code 2).
class ConfigError : public UsageError {
 public:
  using UsageError::UsageError;
};

// Input data that cannot be read or is corrupt: names the file and the problem.
class DataError : public Error {
 public:
  using Error::Error;
};

// The machine's environment: a driver, a library or a device that is missing or
// unusable.
class EnvError : public Error {
 public:
  using Error::Error;
};

// Training ran out of device memory and could not recover (the micro-batch is
// already 1, or recovery is off). what() says what was allocated and what
// else holds the device; hint() lists the options that need less memory.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

} // namespace hotloop
