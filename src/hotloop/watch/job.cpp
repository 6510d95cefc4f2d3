#include "hotloop/watch/job.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "hotloop/errors.h"

extern char** environ;

namespace hotloop::watch {

namespace fs = std::filesystem;

namespace {

int open_pidfd(int pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

} // namespace

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    const bool plain = !a.empty() &&
        a.find_first_of(" \t\n'\"\\$`*?;&|<>()[]{}!#~") == std::string::npos;
    std::string quoted;
    if (plain) {
      quoted = a;
    } else {
      quoted.push_back('\'');
      for (const char c : a) {
        if (c == '\'') {
          quoted.append("'\\''");
        } else {
          quoted.push_back(c);
        }
      }
      quoted.push_back('\'');
    }
    out += (out.empty() ? "" : " ") + quoted;
  }
  return out;
}

void require_command(const std::string& name) {
  auto runnable = [](const std::string& path) {
    std::error_code ec;
    return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (runnable(name)) {
      return;
    }
    throw UsageError(
        fmt::format(
            "watch: cannot run '{}': {}",
            name,
            fs::exists(name) ? "not an executable file" : "no such file"),
        fs::exists(name)
            ? "chmod +x it, or run it through its interpreter (python3 train.py)"
            : "check the path");
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (std::size_t from = 0; from <= dirs.size();) {
    const auto colon = std::min(dirs.find(':', from), dirs.size());
    const std::string d = dirs.substr(from, colon - from);
    if (runnable((d.empty() ? "." : d) + "/" + name)) {
      return;
    }
    from = colon + 1;
  }
  throw UsageError(
      fmt::format("watch: cannot run '{}': no such command in PATH", name),
      "check the spelling, give a path (./train.sh), or run it through its interpreter (python3 train.py)");
}

Job::Job(int pid, bool child) : pid_(pid), child_(child) {
  pidfd_ = open_pidfd(pid);
}

Job::Job(Job&& other) noexcept
    : pid_(other.pid_),
      child_(other.child_),
      pidfd_(other.pidfd_),
      ended_(other.ended_),
      exit_code_(other.exit_code_),
      extra_env_(std::move(other.extra_env_)) {
  other.pidfd_ = -1;
}

Job::~Job() {
  if (pidfd_ >= 0) {
    ::close(pidfd_);
  }
}

Job Job::start(
    const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& extra_env) {
  if (argv.empty()) {
    throw UsageError(
        "watch: no command to run", "hotloop watch -- python train.py");
  }
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    bool replaced = false;
    for (const auto& [k, v] : extra_env) {
      replaced = replaced || kv.rfind(k + "=", 0) == 0;
    }
    if (!replaced) {
      env_text.push_back(kv);
    }
  }
  for (const auto& [k, v] : extra_env) {
    env_text.push_back(k + "=" + v);
  }
  std::vector<char*> args;
  for (const auto& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : env_text) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);

  // The job gets the default signal mask and dispositions, whatever watch
  // blocks for itself.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (const int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD}) {
    sigaddset(&defaults, s);
  }
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(
      &attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int rc =
      ::posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    const bool missing = rc == ENOENT;
    throw UsageError(
        fmt::format(
            "watch: cannot run '{}': {}",
            argv[0],
            missing ? "no such command (not a file, and not found in PATH)"
                    : std::strerror(rc)),
        missing
            ? "check the spelling, give a path (./train.sh), or run it through its interpreter (python3 train.py)"
            : "check that the file is executable (chmod +x) and its #! line names an interpreter that exists");
  }
  Job job(pid, true);
  job.extra_env_ = extra_env;
  return job;
}

Job Job::attach(int pid) {
  if (pid <= 0) {
    throw UsageError(
        fmt::format("watch --pid {}: not a process id", pid),
        "give the pid of a running job (pgrep -f train.py)");
  }
  if (::kill(pid, 0) != 0) {
    if (errno == ESRCH) {
      throw UsageError(
          fmt::format("watch --pid {}: no such process", pid),
          "the job may have ended; list running jobs with pgrep -af python or hotloop monitor");
    }
    throw UsageError(
        fmt::format(
            "watch --pid {}: the process belongs to another user, so its I/O counters and environment cannot be read",
            pid),
        "run hotloop watch as the job's user (or with sudo)");
  }
  // Signalling may be allowed (root) where reading is not (another user's
  // process under hidepid, or a restricted ptrace scope): check the reads
  // watch needs.
  std::ifstream io(fmt::format("/proc/{}/io", pid));
  std::string first;
  if (!io || !(io >> first)) {
    throw UsageError(
        fmt::format(
            "watch --pid {}: /proc/{}/io cannot be read: the process is not this user's to read",
            pid,
            pid),
        "run hotloop watch as the job's user (or with sudo)");
  }
  return Job(pid, false);
}

bool Job::poll_exit() {
  if (ended_) {
    return true;
  }
  if (child_) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      ended_ = true;
      exit_code_ = WIFEXITED(status)
          ? WEXITSTATUS(status)
          : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1);
    }
    return ended_;
  }
  // Not our child: it has ended when it no longer exists (or is a zombie
  // its parent has not reaped yet).
  std::ifstream stat(fmt::format("/proc/{}/stat", pid_));
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const auto close = text.rfind(')');
  ended_ = close == std::string::npos || close + 2 >= text.size() ||
      text[close + 2] == 'Z' || text[close + 2] == 'X';
  return ended_;
}

bool Job::signal(int sig) const {
  return !ended_ && ::kill(pid_, sig) == 0;
}

std::optional<std::string> Job::env(const std::string& name) const {
  if (child_) {
    for (const auto& [k, v] : extra_env_) {
      if (k == name) {
        return v;
      }
    }
    const char* v = std::getenv(name.c_str());
    return v == nullptr ? std::nullopt : std::optional<std::string>(v);
  }
  std::ifstream in(fmt::format("/proc/{}/environ", pid_), std::ios::binary);
  for (std::string kv; std::getline(in, kv, '\0');) {
    if (kv.rfind(name + "=", 0) == 0) {
      return kv.substr(name.size() + 1);
    }
  }
  return std::nullopt;
}

} // namespace hotloop::watch
