#pragma once
// Runs the hotloop binary as a user would, capturing its output and exit code.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test_paths.h"

extern char** environ;

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

// Starts `args` (args[0]: the program) with stdout and stderr going to
// `log`, without waiting; returns its pid.
inline pid_t spawn_logged(
    const std::vector<std::string>& args,
    const std::string& log) {
  std::vector<char*> argv;
  for (const auto& a : args) {
    argv.push_back(const_cast<char*>(a.c_str()));
  }
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(
      &actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// Waits for `pid` and returns its exit code (128 + the signal that killed it).
inline int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs `args` to its end with its output in `log`; returns the exit code.
inline int run_to_end(
    const std::vector<std::string>& args,
    const std::string& log) {
  return wait_exit(spawn_logged(args, log));
}

// A text file's whole contents ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

} // namespace hotloop::test
