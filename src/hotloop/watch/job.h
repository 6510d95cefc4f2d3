#pragma once
// The job `hotloop watch` follows: a command it starts (its own child, in its
// process group, so a terminal's Ctrl-C reaches both) or a running process it
// attaches to by pid. Waiting uses a pidfd, so it wakes the moment the job
// ends, also for a process that is not watch's child.

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hotloop::watch {

class Job {
 public:
  // Starts `argv` (looked up in PATH) with the environment plus `extra_env`.
  // Throws UsageError when the command does not exist or cannot be run;
  // nothing has started then.
  static Job start(
      const std::vector<std::string>& argv,
      const std::vector<std::pair<std::string, std::string>>& extra_env);
  // Follows a running process. Throws UsageError when there is no such
  // process, or when it is not this user's to read (its I/O counters and
  // environment are private to its owner and root).
  static Job attach(int pid);

  Job(Job&& other) noexcept;
  Job& operator=(Job&&) = delete;
  Job(const Job&) = delete;
  ~Job();

  int pid() const {
    return pid_;
  }
  bool started_by_watch() const {
    return child_;
  }
  // The fd that becomes readable when the job ends (for poll); -1: none.
  int exit_fd() const {
    return pidfd_;
  }
  // True once the job has ended (and, for a child, was reaped).
  bool poll_exit();
  bool ended() const {
    return ended_;
  }
  // The exit code a shell would show: the status, or 128 + the signal that
  // killed it. None for an attached process (only its parent can know).
  std::optional<int> exit_code() const {
    return exit_code_;
  }
  // Sends `sig` to the job's main process. Returns false when it is gone.
  bool signal(int sig) const;
  // The job's environment variable `name` (an attached job's, from
  // /proc/PID/environ); none when unset or unreadable.
  std::optional<std::string> env(const std::string& name) const;

 private:
  Job(int pid, bool child);
  int pid_ = 0;
  bool child_ = false;
  int pidfd_ = -1;
  bool ended_ = false;
  std::optional<int> exit_code_;
  std::vector<std::pair<std::string, std::string>> extra_env_;
};

// Throws UsageError when `name` cannot be run (a path that is not an
// executable file, a name not found in PATH): checked before anything is
// created.
void require_command(const std::string& name);

// "python3 train.py --lr 0.1", quoted where a shell would need it.
std::string command_line(const std::vector<std::string>& argv);

} // namespace hotloop::watch
