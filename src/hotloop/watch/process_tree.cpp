#include "hotloop/watch/process_tree.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <fstream>
#include <set>
#include <sstream>

namespace hotloop::watch {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return in ? std::string((std::istreambuf_iterator<char>(in)), {})
            : std::string();
}

// The fields of /proc/PID/stat after "(comm)": field 3 (state) is [0].
std::vector<std::string> stat_fields(const std::string& text) {
  std::vector<std::string> fields;
  const auto close = text.rfind(')');
  if (close == std::string::npos) {
    return fields;
  }
  std::istringstream rest(text.substr(close + 1));
  for (std::string f; rest >> f;) {
    fields.push_back(f);
  }
  return fields;
}

std::uint64_t to_u64(const std::string& s) {
  return std::strtoull(s.c_str(), nullptr, 10);
}

std::vector<int> numeric_entries(const std::string& dir) {
  std::vector<int> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return out;
  }
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long v = std::strtol(e->d_name, &end, 10);
    if (v > 0 && end != nullptr && *end == '\0') {
      out.push_back(static_cast<int>(v));
    }
  }
  ::closedir(d);
  return out;
}

} // namespace

double clock_ticks_per_second() {
  const long t = ::sysconf(_SC_CLK_TCK);
  return t > 0 ? static_cast<double>(t) : 100.0;
}

std::vector<std::pair<int, int>> read_parents(const std::string& proc) {
  std::vector<std::pair<int, int>> out;
  for (const int pid : numeric_entries(proc)) {
    const auto f =
        stat_fields(read_text(proc + "/" + std::to_string(pid) + "/stat"));
    if (f.size() > 1) {
      out.emplace_back(pid, static_cast<int>(to_u64(f[1])));
    }
  }
  return out;
}

std::optional<ProcessStat> read_process(int pid, const std::string& proc) {
  const std::string dir = proc + "/" + std::to_string(pid);
  const std::string stat = read_text(dir + "/stat");
  const auto f = stat_fields(stat);
  // Fields from 3 (state): utime is 14, stime 15, num_threads 20,
  // starttime 22, rss 24 (pages).
  if (f.size() < 22) {
    return std::nullopt;
  }
  ProcessStat p;
  p.pid = pid;
  p.state = f[0].empty() ? '?' : f[0][0];
  p.ppid = static_cast<int>(to_u64(f[1]));
  p.cpu_ticks = to_u64(f[11]) + to_u64(f[12]);
  p.threads = static_cast<int>(to_u64(f[17]));
  p.start_ticks = to_u64(f[19]);
  p.rss_bytes = to_u64(f[21]) * static_cast<std::uint64_t>(::getpagesize());
  const auto open = stat.find('(');
  const auto close = stat.rfind(')');
  if (open != std::string::npos && close != std::string::npos) {
    p.name = stat.substr(open + 1, close - open - 1);
  }
  std::string cmd = read_text(dir + "/cmdline");
  while (!cmd.empty() && cmd.back() == '\0') {
    cmd.pop_back();
  }
  for (char& c : cmd) {
    c = c == '\0' ? ' ' : c;
  }
  p.command = cmd.size() > 160 ? cmd.substr(0, 157) + "..." : cmd;
  std::istringstream io(read_text(dir + "/io"));
  for (std::string key, value; io >> key >> value;) {
    if (key == "read_bytes:") {
      p.read_bytes = to_u64(value);
    }
  }
  std::istringstream sched(read_text(dir + "/schedstat"));
  std::uint64_t run = 0;
  std::uint64_t wait = 0;
  if (sched >> run >> wait) {
    p.main_run_ns = run;
    p.main_wait_ns = wait;
  }
  for (const int tid : numeric_entries(dir + "/task")) {
    const auto t =
        stat_fields(read_text(dir + "/task/" + std::to_string(tid) + "/stat"));
    p.running_threads += !t.empty() && t[0] == "R" ? 1 : 0;
  }
  return p;
}

std::vector<ProcessStat> read_tree(
    int root,
    bool include_root,
    const std::string& proc) {
  std::multimap<int, int> children;
  for (const auto& [pid, ppid] : read_parents(proc)) {
    children.emplace(ppid, pid);
  }
  std::vector<ProcessStat> out;
  std::deque<int> todo{root};
  std::set<int> visited;
  while (!todo.empty()) {
    const int pid = todo.front();
    todo.pop_front();
    if (!visited.insert(pid).second) {
      continue;
    }
    if (pid != root || include_root) {
      if (auto p = read_process(pid, proc)) {
        out.push_back(std::move(*p));
      } else if (pid == root) {
        return out; // the root has ended
      }
    }
    const auto [from, to] = children.equal_range(pid);
    for (auto it = from; it != to; ++it) {
      todo.push_back(it->second);
    }
  }
  return out;
}

std::optional<HostTicks> read_host_ticks(const std::string& proc) {
  std::istringstream in(read_text(proc + "/stat"));
  std::string cpu;
  in >> cpu;
  if (cpu != "cpu") {
    return std::nullopt;
  }
  // user nice system idle iowait irq softirq steal
  std::uint64_t v[8] = {};
  for (auto& x : v) {
    in >> x;
  }
  HostTicks t;
  t.iowait = v[4];
  for (const auto x : v) {
    t.total += x;
  }
  t.busy = t.total - v[3] - v[4];
  return t;
}

std::map<int, ProcessRates> RateTracker::update(
    const std::vector<ProcessStat>& now,
    double dt_s) {
  std::map<int, ProcessRates> rates;
  std::map<int, Seen> next;
  const double ticks = clock_ticks_per_second();
  for (const auto& p : now) {
    const Seen current{
        p.start_ticks,
        p.cpu_ticks,
        p.read_bytes.value_or(0),
        p.main_run_ns,
        p.main_wait_ns};
    next[p.pid] = current;
    if (!have_ || dt_s <= 0) {
      continue;
    }
    Seen before{p.start_ticks, 0, 0, 0, 0}; // new since the last reading
    const auto it = seen_.find(p.pid);
    if (it != seen_.end() && it->second.start_ticks == p.start_ticks) {
      before = it->second;
    }
    ProcessRates r;
    r.cpu_percent =
        100.0 *
        static_cast<double>(
            current.cpu_ticks - std::min(current.cpu_ticks, before.cpu_ticks)) /
        ticks / dt_s;
    r.read_bytes_per_s = static_cast<double>(
                             current.read_bytes -
                             std::min(current.read_bytes, before.read_bytes)) /
        dt_s;
    if (current.run_ns && current.wait_ns && before.run_ns && before.wait_ns) {
      const auto delta = [](std::uint64_t now_v, std::uint64_t then_v) {
        return static_cast<double>(now_v - std::min(now_v, then_v));
      };
      const double ns = dt_s * 1e9;
      r.main_thread_percent =
          100.0 * delta(*current.run_ns, *before.run_ns) / ns;
      r.main_runnable_percent = 100.0 *
          (delta(*current.run_ns, *before.run_ns) +
           delta(*current.wait_ns, *before.wait_ns)) /
          ns;
    }
    rates[p.pid] = r;
  }
  seen_ = std::move(next);
  have_ = true;
  return rates;
}

} // namespace hotloop::watch
