// `hotloop launch --nproc N [...] -- train ...`: starts N local ranks of a
// data-parallel job with torchrun's environment, prefixes each output line
// with its rank, forwards SIGINT/SIGTERM, and when a rank fails stops the
// others and exits 1 naming it and its last step and phase (each rank
// rewrites HOTLOOP_RANK_STATUS_FILE twice a second: parallel/rank_status.h).

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "cli_common.h"
#include "hotloop/core/stop_signal.h"
#include "hotloop/parallel/rank_status.h"

namespace hotloop::cli {

namespace {

struct LaunchFlags {
  int nproc = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  double grace_s = 10;
  std::vector<std::string> command;
};

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  int out = -1; // read end of the rank's stdout+stderr
  std::string partial; // output after the last newline
  bool running = true;
  int status = 0;
  std::string status_file; // its last step and phase
};

// "; its last report: step 12, backward, 0.3 s before", or "" when the rank
// never reported (it died before training started).
std::string last_report(const Rank& r) {
  std::ifstream in(r.status_file);
  std::string line;
  std::getline(in, line);
  const auto report = parallel::parse_report(line);
  return report ? "; its last report: " +
          parallel::describe_report(*report, parallel::unix_ms_now())
                : std::string();
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "hotloop";
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    return fmt::format(
        "was killed by signal {} ({})",
        WTERMSIG(status),
        ::strsignal(WTERMSIG(status)));
  }
  return fmt::format("exited with code {}", WEXITSTATUS(status));
}

Rank spawn(
    const LaunchFlags& f,
    int local,
    const std::string& exe,
    const std::string& status_dir) {
  Rank r;
  r.rank = f.node_rank * f.nproc + local;
  r.status_file = fmt::format("{}/rank{}", status_dir, r.rank);
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    throw Error(fmt::format("launch: pipe: {}", std::strerror(errno)));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    throw Error(fmt::format("launch: fork: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::dup2(pipefd[1], 1);
    ::dup2(pipefd[1], 2);
    ::setenv("RANK", std::to_string(r.rank).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(f.nproc * f.nnodes).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
    ::setenv("LOCAL_WORLD_SIZE", std::to_string(f.nproc).c_str(), 1);
    ::setenv("MASTER_ADDR", f.master_addr.c_str(), 1);
    ::setenv("MASTER_PORT", std::to_string(f.master_port).c_str(), 1);
    ::setenv("NO_COLOR", "1", 1); // the lines are prefixed: no progress bar
    ::setenv("HOTLOOP_RANK_STATUS_FILE", r.status_file.c_str(), 1);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (const auto& a : f.command) {
      argv.push_back(const_cast<char*>(a.c_str()));
    }
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    std::fprintf(
        stderr,
        "launch: cannot run %s: %s\n",
        exe.c_str(),
        std::strerror(errno));
    ::_exit(127);
  }
  ::close(pipefd[1]);
  // The launcher's end only: pump() reads until the pipe is empty, never
  // blocking on a rank that has nothing more to say.
  ::fcntl(pipefd[0], F_SETFL, ::fcntl(pipefd[0], F_GETFL) | O_NONBLOCK);
  r.pid = pid;
  r.out = pipefd[0];
  return r;
}

// Prints the complete lines read from `r`, each prefixed with its rank.
void pump(Rank& r, bool eof) {
  char buf[8192];
  for (ssize_t n; (n = ::read(r.out, buf, sizeof buf)) > 0;) {
    r.partial.append(buf, static_cast<std::size_t>(n));
  }
  std::size_t start = 0;
  for (std::size_t nl; (nl = r.partial.find('\n', start)) != std::string::npos;
       start = nl + 1) {
    fmt::print("[rank {}] {}\n", r.rank, r.partial.substr(start, nl - start));
  }
  r.partial.erase(0, start);
  if (eof && !r.partial.empty()) {
    fmt::print("[rank {}] {}\n", r.rank, r.partial);
    r.partial.clear();
  }
  std::fflush(stdout);
}

int run_launch(const LaunchFlags& f) {
  if (f.nproc < 1 || f.nnodes < 1 || f.node_rank < 0 ||
      f.node_rank >= f.nnodes) {
    throw UsageError(fmt::format(
        "launch: --nproc {} --nnodes {} --node-rank {} do not make a job",
        f.nproc,
        f.nnodes,
        f.node_rank));
  }
  if (f.command.empty()) {
    throw UsageError(
        "launch: no command to run",
        "put the hotloop command after --: hotloop launch --nproc 2 -- train --model mlp");
  }
  const std::string exe = self_exe();
  std::string status_dir =
      (std::filesystem::temp_directory_path() / "hotloop-launch-XXXXXX")
          .string();
  if (::mkdtemp(status_dir.data()) == nullptr) {
    throw Error(fmt::format(
        "launch: cannot create {}: {}", status_dir, std::strerror(errno)));
  }
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_status_dir{status_dir};
  StopSignal stop;
  std::vector<Rank> ranks;
  for (int i = 0; i < f.nproc; ++i) {
    ranks.push_back(spawn(f, i, exe, status_dir));
    fmt::print(
        "[launch] rank {}: pid {}\n", ranks.back().rank, ranks.back().pid);
  }
  std::fflush(stdout);

  std::string failure;
  bool forwarded = false;
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  for (;;) {
    std::vector<pollfd> fds;
    for (const auto& r : ranks) {
      fds.push_back({r.out, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 100);
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP)) != 0) {
        pump(ranks[i], false);
      }
    }
    int running = 0;
    for (auto& r : ranks) {
      if (r.running && ::waitpid(r.pid, &r.status, WNOHANG) == r.pid) {
        r.running = false;
        pump(r, true);
        const bool ok = WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
        if (!ok && failure.empty() && !forwarded) {
          failure = fmt::format(
              "rank {} (pid {}) {}{}",
              r.rank,
              r.pid,
              describe_exit(r.status),
              last_report(r));
          fmt::print(
              stderr,
              "hotloop launch: {}; stopping the other ranks\n",
              failure);
        }
      }
      running += r.running ? 1 : 0;
    }
    if (running == 0) {
      break;
    }
    // A failed rank, or SIGINT/SIGTERM here: SIGTERM to every rank still
    // running (they checkpoint and stop), SIGKILL after the grace period.
    if ((!failure.empty() || stop.flag()->load()) && !kill_at) {
      forwarded = forwarded || failure.empty();
      for (const auto& r : ranks) {
        if (r.running) {
          ::kill(r.pid, SIGTERM);
        }
      }
      kill_at = std::chrono::steady_clock::now() +
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(f.grace_s));
    }
    if (kill_at && std::chrono::steady_clock::now() > *kill_at) {
      for (const auto& r : ranks) {
        if (r.running) {
          ::kill(r.pid, SIGKILL);
        }
      }
    }
  }
  for (auto& r : ranks) {
    ::close(r.out);
  }
  if (!failure.empty()) {
    throw Error(
        "launch: " + failure,
        "its last lines above say why; the other ranks were stopped");
  }
  int worst = 0;
  for (const auto& r : ranks) {
    if (!(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0)) {
      worst = 1;
    }
  }
  return worst;
}

} // namespace

void add_launch_command(CLI::App& app, Action& action) {
  auto f = std::make_shared<LaunchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "launch",
      "Start the local ranks of a data-parallel job (torchrun's environment), each line prefixed with its rank");
  cmd->add_option("--nproc", f->nproc, "Ranks on this node (one per GPU)");
  cmd->add_option("--nnodes", f->nnodes, "Nodes in the job");
  cmd->add_option(
      "--node-rank", f->node_rank, "This node's index, 0 .. nnodes-1");
  cmd->add_option(
      "--master-addr", f->master_addr, "Host of rank 0 (the rendezvous)");
  cmd->add_option("--master-port", f->master_port, "Rendezvous port");
  cmd->add_option(
      "--grace",
      f->grace_s,
      "Seconds between SIGTERM and SIGKILL when stopping the ranks");
  cmd->add_option(
         "command", f->command, "The hotloop command each rank runs, after --")
      ->required();
  cmd->footer(
      "Example:\n"
      "  hotloop launch --nproc 2 -- train --model resnet18-small --batch 256 --device cuda\n"
      "Exit code: 0 when every rank exits 0; 1 when one fails (the others are stopped, the rank is named).");
  cmd->callback([f, &action] { action = [f] { return run_launch(*f); }; });
}

} // namespace hotloop::cli
