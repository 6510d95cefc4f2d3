#pragma once
// Runs the hotloop binary as a user would, capturing its output and exit code.

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "test_paths.h"

namespace hotloop::test {

struct CliResult {
  int exit_code = -1;
  std::string out; // stdout and stderr together
};

// Runs the hotloop binary with `args` under `env` (VAR=value pairs) and
// captures its output (standard error too unless `stderr_too` is false).
inline CliResult run_cli(
    const std::string& args,
    const std::string& env = {},
    bool stderr_too = true) {
  const std::string command = env + " " + HOTLOOP_TEST_BINARY + " " + args +
      (stderr_too ? " 2>&1" : " 2>/dev/null");
  CliResult r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return r;
  }
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) {
    r.out += buf.data();
  }
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

} // namespace hotloop::test
