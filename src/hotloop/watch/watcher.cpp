#include "hotloop/watch/watcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "hotloop/core/atomic_file.h"
#include "hotloop/core/units.h"
#include "hotloop/errors.h"
#include "hotloop/telemetry/metrics_server.h"
#include "hotloop/telemetry/tensorboard.h"
#include "hotloop/watch/job.h"
#include "hotloop/watch/job_window.h"
#include "hotloop/watch/signal_fd.h"
#include "hotloop/watch/step_channel.h"
#include "hotloop/watch/watch_report.h"

namespace hotloop::watch {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double unix_now() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double own_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
      1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string default_out_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  std::string dir = std::string("runs/watch-") + stamp;
  for (int n = 2; fs::exists(dir); ++n) {
    dir = fmt::format("runs/watch-{}-{}", stamp, n);
  }
  return dir;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

// The run's verdict is the one that held longest over its windows (a job's
// start-up, or a phase, should not outvote the rest of it): its latest
// window's finding goes first, with the time it held. Windows before the
// job first held a GPU are its start-up (importing, loading) when it later
// did.
void lead_with_longest_verdict(
    telemetry::Diagnosis& run,
    const std::vector<WindowVerdict>& all) {
  std::size_t first = 0;
  while (first < all.size() &&
         all[first].diagnosis.primary().verdict == "cpu-only") {
    ++first;
  }
  const std::vector<WindowVerdict> windows(
      first < all.size() ? all.begin() + static_cast<std::ptrdiff_t>(first)
                         : all.begin(),
      all.end());
  std::map<std::string, double> held;
  double total = 0;
  for (const auto& w : windows) {
    held[w.diagnosis.primary().verdict] += w.to_s - w.from_s;
    total += w.to_s - w.from_s;
  }
  if (held.empty()) {
    return;
  }
  const auto longest = std::max_element(
      held.begin(), held.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      });
  if (longest->first == run.primary().verdict) {
    return;
  }
  telemetry::Finding lead;
  for (const auto& w : windows) {
    if (w.diagnosis.primary().verdict == longest->first) {
      lead = w.diagnosis.primary();
    }
  }
  lead.evidence = fmt::format(
      "{} for {:.0f} of {:.0f} s; latest: {}",
      lead.verdict,
      longest->second,
      total,
      lead.evidence);
  std::erase_if(run.findings, [&](const telemetry::Finding& f) {
    return f.verdict == lead.verdict || f.verdict == "healthy";
  });
  run.findings.insert(run.findings.begin(), lead);
}

} // namespace

WatchResult watch(const WatchOptions& o) {
  if (o.command.empty() == (o.pid == 0)) {
    throw UsageError(
        "watch: give a command after -- or --pid PID (one of them)",
        "hotloop watch -- python train.py   or   hotloop watch --pid 12345");
  }
  const char* defaults = "the defaults: --interval 1 --window 10 --grace 10";
  if (!(o.interval_s > 0)) {
    throw UsageError(
        fmt::format("watch: --interval {:g}: must be positive", o.interval_s),
        defaults);
  }
  if (!(o.window_s >= o.interval_s)) {
    throw UsageError(
        fmt::format(
            "watch: --window {:g} is shorter than --interval {:g} (a window holds whole samples)",
            o.window_s,
            o.interval_s),
        defaults);
  }
  if (!(o.grace_s >= 0)) {
    throw UsageError(
        fmt::format("watch: --grace {:g}: must be at least 0", o.grace_s),
        defaults);
  }
  const bool start = !o.command.empty();
  if (start) {
    require_command(o.command.front());
  }
  const std::string dir = o.out_dir.empty() ? default_out_dir() : o.out_dir;
  // Before anything runs: a pid that cannot be followed starts nothing.
  std::optional<Job> attached;
  if (!start) {
    attached.emplace(Job::attach(o.pid));
  }
  std::error_code ec;
  fs::create_directories(o.tensorboard ? dir + "/tensorboard" : dir, ec);
  if (ec) {
    throw UsageError(
        fmt::format(
            "watch: cannot create the run folder {}: {}", dir, ec.message()),
        "pick a writable folder with --out");
  }
  SignalFd signals; // before any thread starts, so that all inherit the mask
  const std::string fifo = fs::absolute(dir + "/steps.fifo").string();
  std::unique_ptr<StepChannel> steps_in;
  std::unique_ptr<StepRendezvous> rendezvous;
  if (start) {
    steps_in = std::make_unique<StepChannel>(fifo);
  } else {
    // A running job's helper finds the FIFO through a link named by its
    // pid. Steps are a bonus there: without them watch still follows it.
    try {
      steps_in = std::make_unique<StepChannel>(fifo);
      rendezvous = std::make_unique<StepRendezvous>(o.pid, fifo);
    } catch (const Error& e) {
      fmt::print(
          stderr,
          "watch: no step reports from pid {}: {}\n  fix: {}\n",
          o.pid,
          e.what(),
          e.hint());
    }
  }
  if (start) {
    // Orphans of the job (a worker whose parent died) are re-parented to
    // watch rather than to init, so they stay in the tree.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  }
  std::unique_ptr<telemetry::MetricsServer> metrics;
  if (o.metrics_port > 0) {
    metrics = std::make_unique<telemetry::MetricsServer>(o.metrics_port);
    fmt::print(
        stderr,
        "watch: Prometheus metrics on http://127.0.0.1:{}/metrics\n",
        metrics->port());
  }
  std::unique_ptr<telemetry::TensorBoardWriter> tb;
  if (o.tensorboard) {
    tb = std::make_unique<telemetry::TensorBoardWriter>(dir + "/tensorboard");
  }
  std::ofstream jsonl(dir + "/telemetry.jsonl");

  const auto t0 = Clock::now();
  WatchRecord rec;
  rec.run_dir = dir;
  rec.interval_s = o.interval_s;
  rec.tensorboard = o.tensorboard;
  rec.start_unix = unix_now();
  const double cpu0 = own_cpu_seconds();
  Job job = start ? Job::start(o.command, {{kStepsEnv, steps_in->path()}})
                  : std::move(*attached);
  rec.pid = job.pid();
  rec.started_by_watch = start;
  rec.command = start ? command_line(o.command) : [&] {
    std::ifstream in(fmt::format("/proc/{}/cmdline", o.pid));
    std::string c((std::istreambuf_iterator<char>(in)), {});
    while (!c.empty() && c.back() == '\0') {
      c.pop_back();
    }
    std::replace(c.begin(), c.end(), '\0', ' ');
    return c;
  }();
  const bool tty = o.live && ::isatty(STDERR_FILENO) == 1;
  fmt::print(
      stderr,
      "watch: {} pid {}: {}; writing {}\n",
      start ? "started" : "following",
      job.pid(),
      rec.command,
      dir);
  if (rendezvous) {
    fmt::print(
        stderr,
        "watch: steps reported by python/hotloop_watch.py in pid {} or its children arrive through {}\n",
        o.pid,
        rendezvous->path());
  }

  JobSamplerOptions so;
  so.nvml_library = o.nvml_library;
  so.root_pid = job.pid();
  so.children_of_self = start;
  so.cuda_visible_devices = job.env("CUDA_VISIBLE_DEVICES");
  JobSampler sampler(so);
  (void)sampler.sample(0); // the baseline for the rates

  WindowFold window;
  WindowFold whole;
  std::vector<std::uint64_t> memory_history;
  std::string verdict;
  std::optional<telemetry::Diagnosis> latest;
  double window_start = 0;
  std::optional<double> last_loss;
  double rate = 0; // steps/s over the last sample interval
  std::size_t interval_steps = 0;
  bool killing = false; // the grace period runs
  Clock::time_point kill_at{}; // and ends then
  int stop_signals = 0;
  int lowest_rank = -1;
  double next_sample = o.interval_s;

  auto close_window = [&](double now) {
    if (window.samples() == 0) {
      return;
    }
    auto input = window.input(memory_history);
    input.from_s = window_start; // the window, not its first sample
    auto d = telemetry::diagnose_job(input);
    jsonl << nlohmann::json{{"window",
                             {{"from_s", input.from_s},
                              {"to_s", input.to_s},
                              {"diagnosis", telemetry::to_json(d)}}}}
                 .dump()
          << "\n";
    if (!tty && d.primary().verdict != verdict) {
      fmt::print(
          stderr,
          "watch: {:.0f}-{:.0f} s: {}: {}\n",
          input.from_s,
          input.to_s,
          d.primary().verdict,
          d.primary().evidence);
    }
    verdict = d.primary().verdict;
    rec.windows.push_back({input.from_s, input.to_s, d});
    latest = d;
    window = WindowFold{};
    window_start = now;
  };
  auto kill_tree = [&] {
    for (const auto& p :
         read_tree(start ? static_cast<int>(::getpid()) : job.pid(), !start)) {
      ::kill(p.pid, SIGKILL);
    }
    job.signal(SIGKILL);
  };

  // The step lines in the FIFO now (the lowest rank's count).
  auto take_steps = [&] {
    if (!steps_in) {
      return;
    }
    auto events = steps_in->drain(unix_now());
    for (const auto& e : events) {
      if (lowest_rank < 0 || e.rank < lowest_rank) {
        lowest_rank = e.rank;
      }
      if (e.rank != lowest_rank) {
        continue;
      }
      ++interval_steps;
      std::optional<double> loss;
      if (const auto l = e.values.find("loss"); l != e.values.end()) {
        loss = l->second;
        last_loss = loss;
      }
      rec.steps.push_back(
          {std::max(0.0, e.unix_time - rec.start_unix), e.step, loss});
    }
    window.add_steps(events);
    whole.add_steps(events);
  };

  while (!job.poll_exit()) {
    const double now = seconds_since(t0);
    double wait_s = std::max(0.0, next_sample - now);
    if (killing) {
      wait_s = std::min(
          wait_s,
          std::max(
              0.0,
              std::chrono::duration<double>(kill_at - Clock::now()).count()));
    }
    if (job.exit_fd() < 0) {
      wait_s = std::min(wait_s, 0.1); // no pidfd: look again soon
    }
    pollfd fds[3] = {
        {signals.fd(), POLLIN, 0},
        {job.exit_fd(), POLLIN, 0},
        {steps_in ? steps_in->fd() : -1, POLLIN, 0}};
    ::poll(fds, 3, static_cast<int>(std::ceil(wait_s * 1000)));
    while (auto sig = signals.next()) {
      ++stop_signals;
      if (!start) {
        rec.notes.push_back(fmt::format(
            "{} received: stopped watching; the job goes on",
            signal_name(sig->first)));
        break;
      }
      if (stop_signals == 1) {
        if (sig->second) {
          job.signal(sig->first);
        }
        rec.notes.push_back(fmt::format(
            "{} at {:.1f} s {}",
            signal_name(sig->first),
            seconds_since(t0),
            sig->second ? "passed on to the job"
                        : "from the terminal (the job got it too)"));
        killing = true;
        kill_at = Clock::now() +
            std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double>(o.grace_s));
        fmt::print(
            stderr,
            "\nwatch: {}: the job has {:g} s to end before SIGKILL\n",
            signal_name(sig->first),
            o.grace_s);
      } else {
        rec.notes.push_back(fmt::format(
            "a second signal ({}): SIGKILL sent to the job's processes",
            signal_name(sig->first)));
        kill_tree();
      }
    }
    if (!start && stop_signals > 0) {
      rec.ended = "still running (watch was stopped)";
      break;
    }
    if (killing && Clock::now() >= kill_at && !job.poll_exit()) {
      rec.notes.push_back(fmt::format(
          "the job ignored the signal for {:g} s: SIGKILL sent to its processes",
          o.grace_s));
      fmt::print(
          stderr,
          "watch: the job did not end within {:g} s: SIGKILL\n",
          o.grace_s);
      rec.ended = "killed after the grace period";
      kill_tree();
      killing = false;
    }
    take_steps();
    if (seconds_since(t0) + 1e-3 >= next_sample) {
      const double t = seconds_since(t0);
      JobSample s = sampler.sample(t);
      rate = static_cast<double>(interval_steps) / o.interval_s;
      interval_steps = 0;
      auto line = to_json(s);
      line["steps"] = {
          {"steps_per_s", rate},
          {"loss", last_loss ? nlohmann::json(*last_loss) : nullptr}};
      jsonl << nlohmann::json{{"sample", line}}.dump() << "\n";
      jsonl.flush();
      if (tb) {
        tb->scalars(
            static_cast<std::int64_t>(std::lround(t)),
            tensorboard_values(s, rate, last_loss));
      }
      if (metrics) {
        metrics->publish(prometheus_text(s, latest, rate, last_loss));
      }
      window.add(s);
      whole.add(s);
      rec.samples.push_back(std::move(s));
      if (t - window_start + 1e-3 >= o.window_s) {
        close_window(t);
      }
      if (tty) {
        fmt::print(
            stderr,
            "\r\033[K{}",
            status_line(rec.samples.back(), rate, verdict));
        std::fflush(stderr);
      }
      next_sample += o.interval_s;
      while (next_sample < seconds_since(t0)) {
        next_sample += o.interval_s; // a slow sample skips, never bunches
      }
    }
  }
  // What the job wrote just before it exited is still in the FIFO (watch
  // holds a writer end, so it stays open): read it before the last window.
  take_steps();
  if (tty) {
    fmt::print(stderr, "\n");
  }
  // Re-parented orphans that have ended are reaped here (the subreaper's
  // duty); live ones are left running.
  while (start && ::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  rec.wall_s = seconds_since(t0);
  close_window(rec.wall_s);
  rec.exit_code = job.exit_code();
  if (rec.ended.empty()) {
    rec.ended = start ? "exited" : "ended";
  }
  if (rec.samples.empty()) {
    rec.run.findings.push_back(
        {"too-short",
         fmt::format(
             "the job ended after {:.2f} s, before the first sample at {:g} s",
             rec.wall_s,
             o.interval_s),
         fmt::format(
             "nothing to diagnose; for a job this short sample more often (--interval {:g})",
             std::max(0.01, rec.wall_s / 5))});
  } else {
    std::vector<std::uint64_t> run_history = memory_history;
    run_history.pop_back(); // whole-run memory replaces the last window's
    // The whole run's memory stands in for the last window's, so that
    // growth across windows is still seen.
    auto run_input = whole.input(run_history);
    run_input.from_s = 0;
    rec.run = telemetry::diagnose_job(run_input);
    lead_with_longest_verdict(rec.run, rec.windows);
  }
  rec.watch_cpu_s = own_cpu_seconds() - cpu0;
  jsonl.close();
  if (tb) {
    tb->flush();
  }
  if (steps_in) {
    rec.bad_step_lines = steps_in->bad_lines();
    rec.first_bad_step_line = steps_in->first_bad_line();
  }
  write_text_atomic(dir + "/summary.json", summary_json(rec).dump(2) + "\n");
  write_text_atomic(dir + "/report.html", report_html(rec));
  const auto& f = rec.run.primary();
  fmt::print(
      stderr,
      "watch: {} {}{} after {:.0f} s\nverdict: {}: {}\n{}report: {}/report.html\n",
      start ? "job" : "pid",
      rec.ended,
      rec.exit_code ? fmt::format(" with exit code {}", *rec.exit_code)
                    : std::string(),
      rec.wall_s,
      f.verdict,
      f.evidence,
      f.fix.empty() ? std::string() : "fix: " + f.fix + "\n",
      dir);
  WatchResult r;
  r.exit_code = rec.exit_code.value_or(0);
  r.run_dir = dir;
  r.diagnosis = rec.run;
  return r;
}

} // namespace hotloop::watch
