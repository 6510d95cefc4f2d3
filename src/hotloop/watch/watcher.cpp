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

void check_watch_options(const WatchOptions& o) {
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
  if (!o.command.empty()) {
    require_command(o.command.front());
  }
}

// A running process's command line, from /proc.
std::string command_of(int pid) {
  std::ifstream in(fmt::format("/proc/{}/cmdline", pid));
  std::string c((std::istreambuf_iterator<char>(in)), {});
  while (!c.empty() && c.back() == '\0') {
    c.pop_back();
  }
  std::replace(c.begin(), c.end(), '\0', ' ');
  return c;
}

// One `hotloop watch`: its outputs opened, the job started or followed, then
// the loop of signals, step reports and samples until the job ends, and the
// run's diagnosis written. Each stage is a member, in run()'s order.
class WatchSession {
 public:
  explicit WatchSession(const WatchOptions& o);
  WatchResult run();

 private:
  void open_outputs();
  void start_job();
  void wait_for_something();
  void handle_signals();
  void enforce_grace();
  void take_steps(); // the step lines in the FIFO now (the lowest rank's)
  void take_sample();
  void close_window(double now);
  void kill_tree();
  void diagnose_run();
  WatchResult write_outputs();

  const WatchOptions& o_;
  const bool start_; // watch starts the job (else it follows --pid)
  const std::string dir_;
  // Destroyed in reverse: the sampler, the job, then the outputs and last the
  // signal mask, as they were made.
  std::optional<SignalFd> signals_;
  std::unique_ptr<StepChannel> steps_in_;
  std::unique_ptr<StepRendezvous> rendezvous_;
  std::unique_ptr<telemetry::MetricsServer> metrics_;
  std::unique_ptr<telemetry::TensorBoardWriter> tb_;
  std::ofstream jsonl_;
  std::optional<Job> job_;
  std::unique_ptr<JobSampler> sampler_;

  Clock::time_point t0_;
  double cpu0_ = 0;
  bool tty_ = false;
  WatchRecord rec_;
  WindowFold window_;
  WindowFold whole_;
  std::vector<std::uint64_t> memory_history_;
  std::string verdict_;
  std::optional<telemetry::Diagnosis> latest_;
  double window_start_ = 0;
  std::optional<double> last_loss_;
  double rate_ = 0; // steps/s over the last sample interval
  std::size_t interval_steps_ = 0;
  bool killing_ = false; // the grace period runs
  Clock::time_point kill_at_{}; // and ends then
  int stop_signals_ = 0;
  int lowest_rank_ = -1;
  double next_sample_ = 0;
};

WatchSession::WatchSession(const WatchOptions& o)
    : o_(o),
      start_(!o.command.empty()),
      dir_(o.out_dir.empty() ? default_out_dir() : o.out_dir),
      next_sample_(o.interval_s) {
  // Before anything runs: a pid that cannot be followed starts nothing.
  if (!start_) {
    job_.emplace(Job::attach(o.pid));
  }
  open_outputs();
}

// The run folder, the signal mask (before any thread starts, so that all
// inherit it), the step FIFO, the metrics server, TensorBoard, the JSONL.
void WatchSession::open_outputs() {
  std::error_code ec;
  fs::create_directories(o_.tensorboard ? dir_ + "/tensorboard" : dir_, ec);
  if (ec) {
    throw UsageError(
        fmt::format(
            "watch: cannot create the run folder {}: {}", dir_, ec.message()),
        "pick a writable folder with --out");
  }
  signals_.emplace();
  const std::string fifo = fs::absolute(dir_ + "/steps.fifo").string();
  if (start_) {
    steps_in_ = std::make_unique<StepChannel>(fifo);
    // Orphans of the job (a worker whose parent died) are re-parented to
    // watch rather than to init, so they stay in the tree.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  } else {
    // A running job's helper finds the FIFO through a link named by its
    // pid. Steps are a bonus there: without them watch still follows it.
    try {
      steps_in_ = std::make_unique<StepChannel>(fifo);
      rendezvous_ = std::make_unique<StepRendezvous>(o_.pid, fifo);
    } catch (const Error& e) {
      fmt::print(
          stderr,
          "watch: no step reports from pid {}: {}\n  fix: {}\n",
          o_.pid,
          e.what(),
          e.hint());
    }
  }
  if (o_.metrics_port > 0) {
    metrics_ = std::make_unique<telemetry::MetricsServer>(o_.metrics_port);
    fmt::print(
        stderr,
        "watch: Prometheus metrics on http://127.0.0.1:{}/metrics\n",
        metrics_->port());
  }
  if (o_.tensorboard) {
    tb_ = std::make_unique<telemetry::TensorBoardWriter>(dir_ + "/tensorboard");
  }
  jsonl_.open(dir_ + "/telemetry.jsonl");
}

// The job started (or the followed one taken), its record begun, and the
// sampler's baseline for the rates.
void WatchSession::start_job() {
  t0_ = Clock::now();
  rec_.run_dir = dir_;
  rec_.interval_s = o_.interval_s;
  rec_.tensorboard = o_.tensorboard;
  rec_.start_unix = unix_now();
  cpu0_ = own_cpu_seconds();
  if (start_) {
    job_.emplace(Job::start(o_.command, {{kStepsEnv, steps_in_->path()}}));
  }
  Job& job = *job_;
  rec_.pid = job.pid();
  rec_.started_by_watch = start_;
  rec_.command = start_ ? command_line(o_.command) : command_of(o_.pid);
  tty_ = o_.live && ::isatty(STDERR_FILENO) == 1;
  fmt::print(
      stderr,
      "watch: {} pid {}: {}; writing {}\n",
      start_ ? "started" : "following",
      job.pid(),
      rec_.command,
      dir_);
  if (rendezvous_) {
    fmt::print(
        stderr,
        "watch: steps reported by python/hotloop_watch.py in pid {} or its children arrive through {}\n",
        o_.pid,
        rendezvous_->path());
  }
  JobSamplerOptions so;
  so.nvml_library = o_.nvml_library;
  so.root_pid = job.pid();
  so.children_of_self = start_;
  so.cuda_visible_devices = job.env("CUDA_VISIBLE_DEVICES");
  sampler_ = std::make_unique<JobSampler>(so);
  (void)sampler_->sample(0); // the baseline for the rates
}

WatchResult WatchSession::run() {
  start_job();
  while (!job_->poll_exit()) {
    wait_for_something();
    handle_signals();
    if (!start_ && stop_signals_ > 0) {
      rec_.ended = "still running (watch was stopped)";
      break;
    }
    enforce_grace();
    take_steps();
    if (seconds_since(t0_) + 1e-3 >= next_sample_) {
      take_sample();
    }
  }
  // What the job wrote just before it exited is still in the FIFO (watch
  // holds a writer end, so it stays open): read it before the last window.
  take_steps();
  if (tty_) {
    fmt::print(stderr, "\n");
  }
  // Re-parented orphans that have ended are reaped here (the subreaper's
  // duty); live ones are left running.
  while (start_ && ::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  rec_.wall_s = seconds_since(t0_);
  close_window(rec_.wall_s);
  rec_.exit_code = job_->exit_code();
  if (rec_.ended.empty()) {
    rec_.ended = start_ ? "exited" : "ended";
  }
  diagnose_run();
  return write_outputs();
}

// Until the next sample, the end of the grace period, a signal, the job's
// exit or a step line.
void WatchSession::wait_for_something() {
  double wait_s = std::max(0.0, next_sample_ - seconds_since(t0_));
  if (killing_) {
    wait_s = std::min(
        wait_s,
        std::max(
            0.0,
            std::chrono::duration<double>(kill_at_ - Clock::now()).count()));
  }
  if (job_->exit_fd() < 0) {
    wait_s = std::min(wait_s, 0.1); // no pidfd: look again soon
  }
  pollfd fds[3] = {
      {signals_->fd(), POLLIN, 0},
      {job_->exit_fd(), POLLIN, 0},
      {steps_in_ ? steps_in_->fd() : -1, POLLIN, 0}};
  ::poll(fds, 3, static_cast<int>(std::ceil(wait_s * 1000)));
}

// A followed job: the first signal stops watching. A started one: the first
// is passed on and the grace period starts; a second kills the tree.
void WatchSession::handle_signals() {
  while (auto sig = signals_->next()) {
    ++stop_signals_;
    if (!start_) {
      rec_.notes.push_back(fmt::format(
          "{} received: stopped watching; the job goes on",
          signal_name(sig->first)));
      return;
    }
    if (stop_signals_ == 1) {
      if (sig->second) {
        job_->signal(sig->first);
      }
      rec_.notes.push_back(fmt::format(
          "{} at {:.1f} s {}",
          signal_name(sig->first),
          seconds_since(t0_),
          sig->second ? "passed on to the job"
                      : "from the terminal (the job got it too)"));
      killing_ = true;
      kill_at_ = Clock::now() +
          std::chrono::duration_cast<Clock::duration>(
                     std::chrono::duration<double>(o_.grace_s));
      fmt::print(
          stderr,
          "\nwatch: {}: the job has {:g} s to end before SIGKILL\n",
          signal_name(sig->first),
          o_.grace_s);
    } else {
      rec_.notes.push_back(fmt::format(
          "a second signal ({}): SIGKILL sent to the job's processes",
          signal_name(sig->first)));
      kill_tree();
    }
  }
}

void WatchSession::enforce_grace() {
  if (!killing_ || Clock::now() < kill_at_ || job_->poll_exit()) {
    return;
  }
  rec_.notes.push_back(fmt::format(
      "the job ignored the signal for {:g} s: SIGKILL sent to its processes",
      o_.grace_s));
  fmt::print(
      stderr,
      "watch: the job did not end within {:g} s: SIGKILL\n",
      o_.grace_s);
  rec_.ended = "killed after the grace period";
  kill_tree();
  killing_ = false;
}

void WatchSession::kill_tree() {
  for (const auto& p : read_tree(
           start_ ? static_cast<int>(::getpid()) : job_->pid(), !start_)) {
    ::kill(p.pid, SIGKILL);
  }
  job_->signal(SIGKILL);
}

void WatchSession::take_steps() {
  if (!steps_in_) {
    return;
  }
  auto events = steps_in_->drain(unix_now());
  for (const auto& e : events) {
    if (lowest_rank_ < 0 || e.rank < lowest_rank_) {
      lowest_rank_ = e.rank;
    }
    if (e.rank != lowest_rank_) {
      continue;
    }
    ++interval_steps_;
    std::optional<double> loss;
    if (const auto l = e.values.find("loss"); l != e.values.end()) {
      loss = l->second;
      last_loss_ = loss;
    }
    rec_.steps.push_back(
        {std::max(0.0, e.unix_time - rec_.start_unix), e.step, loss});
  }
  window_.add_steps(events);
  whole_.add_steps(events);
}

// One sample of the job, written to the JSONL, TensorBoard, the metrics
// endpoint and the status line; a full window is diagnosed.
void WatchSession::take_sample() {
  const double t = seconds_since(t0_);
  JobSample s = sampler_->sample(t);
  rate_ = static_cast<double>(interval_steps_) / o_.interval_s;
  interval_steps_ = 0;
  auto line = to_json(s);
  line["steps"] = {
      {"steps_per_s", rate_},
      {"loss", last_loss_ ? nlohmann::json(*last_loss_) : nullptr}};
  jsonl_ << nlohmann::json{{"sample", line}}.dump() << "\n";
  jsonl_.flush();
  if (tb_) {
    tb_->scalars(
        static_cast<std::int64_t>(std::lround(t)),
        tensorboard_values(s, rate_, last_loss_));
  }
  if (metrics_) {
    metrics_->publish(prometheus_text(s, latest_, rate_, last_loss_));
  }
  window_.add(s);
  whole_.add(s);
  rec_.samples.push_back(std::move(s));
  if (t - window_start_ + 1e-3 >= o_.window_s) {
    close_window(t);
  }
  if (tty_) {
    fmt::print(
        stderr,
        "\r\033[K{}",
        status_line(rec_.samples.back(), rate_, verdict_));
    std::fflush(stderr);
  }
  next_sample_ += o_.interval_s;
  while (next_sample_ < seconds_since(t0_)) {
    next_sample_ += o_.interval_s; // a slow sample skips, never bunches
  }
}

void WatchSession::close_window(double now) {
  if (window_.samples() == 0) {
    return;
  }
  auto input = window_.input(memory_history_);
  input.from_s = window_start_; // the window, not its first sample
  auto d = telemetry::diagnose_job(input);
  jsonl_ << nlohmann::json{{"window",
                            {{"from_s", input.from_s},
                             {"to_s", input.to_s},
                             {"diagnosis", telemetry::to_json(d)}}}}
                .dump()
         << "\n";
  if (!tty_ && d.primary().verdict != verdict_) {
    fmt::print(
        stderr,
        "watch: {:.0f}-{:.0f} s: {}: {}\n",
        input.from_s,
        input.to_s,
        d.primary().verdict,
        d.primary().evidence);
  }
  verdict_ = d.primary().verdict;
  rec_.windows.push_back({input.from_s, input.to_s, d});
  latest_ = d;
  window_ = WindowFold{};
  window_start_ = now;
}

// The whole run's verdict, led by the one that held longest.
void WatchSession::diagnose_run() {
  if (rec_.samples.empty()) {
    rec_.run.findings.push_back(
        {"too-short",
         fmt::format(
             "the job ended after {:.2f} s, before the first sample at {:g} s",
             rec_.wall_s,
             o_.interval_s),
         fmt::format(
             "nothing to diagnose; for a job this short sample more often (--interval {:g})",
             std::max(0.01, rec_.wall_s / 5))});
    return;
  }
  std::vector<std::uint64_t> run_history = memory_history_;
  run_history.pop_back(); // whole-run memory replaces the last window's
  // The whole run's memory stands in for the last window's, so that growth
  // across windows is still seen.
  auto run_input = whole_.input(run_history);
  run_input.from_s = 0;
  rec_.run = telemetry::diagnose_job(run_input);
  lead_with_longest_verdict(rec_.run, rec_.windows);
}

// summary.json and report.html, and the verdict on the terminal.
WatchResult WatchSession::write_outputs() {
  rec_.watch_cpu_s = own_cpu_seconds() - cpu0_;
  jsonl_.close();
  if (tb_) {
    tb_->flush();
  }
  if (steps_in_) {
    rec_.bad_step_lines = steps_in_->bad_lines();
    rec_.first_bad_step_line = steps_in_->first_bad_line();
  }
  write_text_atomic(dir_ + "/summary.json", summary_json(rec_).dump(2) + "\n");
  write_text_atomic(dir_ + "/report.html", report_html(rec_));
  const auto& f = rec_.run.primary();
  fmt::print(
      stderr,
      "watch: {} {}{} after {:.0f} s\nverdict: {}: {}\n{}report: {}/report.html\n",
      start_ ? "job" : "pid",
      rec_.ended,
      rec_.exit_code ? fmt::format(" with exit code {}", *rec_.exit_code)
                     : std::string(),
      rec_.wall_s,
      f.verdict,
      f.evidence,
      f.fix.empty() ? std::string() : "fix: " + f.fix + "\n",
      dir_);
  WatchResult r;
  r.exit_code = rec_.exit_code.value_or(0);
  r.run_dir = dir_;
  r.diagnosis = rec_.run;
  return r;
}

} // namespace

WatchResult watch(const WatchOptions& o) {
  check_watch_options(o);
  WatchSession session(o);
  return session.run();
}

} // namespace hotloop::watch
