#pragma once
// A job's processes as /proc shows them: the tree under one pid (the
// DataLoader workers of a PyTorch script, torchrun's ranks) and, per process,
// its CPU time, threads, resident memory and disk reads; the machine's CPU and
// I/O-wait time. Reading never throws: a process that ends while it is read
// is left out.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hotloop::watch {

struct ProcessStat {
  int pid = 0;
  int ppid = 0;
  std::string name; // /proc/PID/comm
  std::string command; // argv joined by spaces, cut at 160 characters
  char state = '?'; // R running, S sleeping, D waiting on I/O, Z zombie
  std::uint64_t cpu_ticks = 0; // user + system, in clock ticks
  std::uint64_t start_ticks = 0; // since boot; with pid, names the process
  int threads = 0;
  int running_threads = 0; // threads in state R
  std::uint64_t rss_bytes = 0;
  std::optional<std::uint64_t> read_bytes; // from storage; none: unreadable
  // The main thread's time on a core and waiting for one (ns,
  // /proc/PID/schedstat): a thread that is always one or the other wants a
  // whole core, however many cores others take.
  std::optional<std::uint64_t> main_run_ns;
  std::optional<std::uint64_t> main_wait_ns;
};

// Every pid in `proc` with its parent's (one line of /proc/PID/stat each).
std::vector<std::pair<int, int>> read_parents(
    const std::string& proc = "/proc");

// `root` and every descendant (root first, then breadth first), with their
// details. `root` may be excluded (hotloop watch follows its own children).
std::vector<ProcessStat> read_tree(
    int root,
    bool include_root = true,
    const std::string& proc = "/proc");

// One process; nullopt when it does not exist (or is a thread, not a process).
std::optional<ProcessStat> read_process(
    int pid,
    const std::string& proc = "/proc");

// The machine's CPU time from /proc/stat's first line, in ticks.
struct HostTicks {
  std::uint64_t busy = 0;
  std::uint64_t iowait = 0;
  std::uint64_t total = 0;
};
std::optional<HostTicks> read_host_ticks(const std::string& proc = "/proc");

double clock_ticks_per_second();

// Per-process rates between two readings of a tree: CPU use (percent of one
// core), disk reads (bytes/s). A process first seen in the later reading
// started within the interval, so its whole CPU time counts.
struct ProcessRates {
  double cpu_percent = 0;
  double read_bytes_per_s = 0;
  // The main thread: on a core, and runnable (on a core or waiting for
  // one), in percent of the interval; none without schedstat.
  std::optional<double> main_thread_percent;
  std::optional<double> main_runnable_percent;
};
class RateTracker {
 public:
  // Rates of `now`'s processes since the previous call (`dt_s` apart); the
  // first call has no previous reading and returns none.
  std::map<int, ProcessRates> update(
      const std::vector<ProcessStat>& now,
      double dt_s);

 private:
  struct Seen {
    std::uint64_t start_ticks = 0;
    std::uint64_t cpu_ticks = 0;
    std::uint64_t read_bytes = 0;
    std::optional<std::uint64_t> run_ns;
    std::optional<std::uint64_t> wait_ns;
  };
  std::map<int, Seen> seen_;
  bool have_ = false;
};

} // namespace hotloop::watch
