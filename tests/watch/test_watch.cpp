// The parts of `hotloop watch` that need no job: step lines, the FIFO and
// its link for --pid, the process tree of this test's own children,
// CUDA_VISIBLE_DEVICES, the window fold, and the report's series. Real jobs:
// tests/watch/watch_jobs.py.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include <gtest/gtest.h>

#include "hotloop/errors.h"
#include "hotloop/watch/job.h"
#include "hotloop/watch/job_window.h"
#include "hotloop/watch/process_tree.h"
#include "hotloop/watch/step_channel.h"
#include "hotloop/watch/watch_report.h"
#include "support/temp_dir.h"

namespace hotloop::watch {
namespace {

TEST(StepLine, KeyValuePairsAndJson) {
  auto e = parse_step_line("step=12 loss=0.53 lr=1e-3", 100);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->step, 12);
  EXPECT_DOUBLE_EQ(e->unix_time, 100);
  EXPECT_DOUBLE_EQ(e->values.at("loss"), 0.53);
  EXPECT_DOUBLE_EQ(e->values.at("lr"), 1e-3);
  e = parse_step_line(
      R"({"step": 7, "time": 5.5, "rank": 3, "loss": 2, "tag": "x"})", 100);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->step, 7);
  EXPECT_EQ(e->rank, 3);
  EXPECT_DOUBLE_EQ(e->unix_time, 5.5);
  EXPECT_EQ(e->values.size(), 1u); // loss; strings are left out
  e = parse_step_line("step=3, loss=1.5\r", 0);
  ASSERT_TRUE(e);
  EXPECT_DOUBLE_EQ(e->values.at("loss"), 1.5);
}

TEST(StepLine, WhatIsNotAStep) {
  for (const char* bad :
       {"",
        "loss=0.5",
        "step=1.5",
        "step=-1",
        "step=abc",
        "hello world",
        "{\"loss\": 1}",
        "{broken",
        "[1, 2]"}) {
    EXPECT_FALSE(parse_step_line(bad, 0)) << bad;
  }
}

TEST(StepChannel, ReadsWholeLinesFromSeveralWritersAndCountsTheRest) {
  const auto dir = std::filesystem::temp_directory_path() /
      ("hotloop-steps-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    StepChannel ch((dir / "steps.fifo").string());
    const int a = ::open(ch.path().c_str(), O_WRONLY | O_NONBLOCK);
    const int b = ::open(ch.path().c_str(), O_WRONLY | O_NONBLOCK);
    ASSERT_GE(a, 0);
    ASSERT_GE(b, 0);
    const std::string first = "step=1 loss=2\nstep=2 lo";
    ASSERT_EQ(
        ::write(a, first.data(), first.size()),
        static_cast<ssize_t>(first.size()));
    auto events = ch.drain(1);
    ASSERT_EQ(events.size(), 1u); // the second line is not complete yet
    const std::string rest = "ss=1\nnonsense\n";
    ASSERT_EQ(
        ::write(a, rest.data(), rest.size()),
        static_cast<ssize_t>(rest.size()));
    const std::string other = "{\"step\": 9, \"rank\": 1}\n";
    ASSERT_EQ(
        ::write(b, other.data(), other.size()),
        static_cast<ssize_t>(other.size()));
    ::close(a); // one writer leaving does not end the channel
    events = ch.drain(2);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].step, 2);
    EXPECT_DOUBLE_EQ(events[0].values.at("loss"), 1);
    EXPECT_EQ(events[1].rank, 1);
    EXPECT_EQ(ch.bad_lines(), 1u);
    EXPECT_EQ(ch.first_bad_line(), "nonsense");
    ::close(b);
    EXPECT_TRUE(ch.drain(3).empty());
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "steps.fifo")); // removed
  std::filesystem::remove_all(dir);
}

TEST(StepRendezvous, LinksTheFifoByPidOnceAndReplacesOnlyAStaleLink) {
  namespace fs = std::filesystem;
  const auto dir = fs::temp_directory_path() /
      ("hotloop-rendezvous-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // A number no process has (pid_max is at most 2^22), unique to this test.
  const int pid = 1000000000 + static_cast<int>(::getpid());
  const std::string link = rendezvous_path(pid);
  EXPECT_EQ(
      link,
      "/tmp/hotloop-watch-" + std::to_string(::geteuid()) + "/" +
          std::to_string(pid));
  {
    StepChannel ch((dir / "steps.fifo").string());
    {
      StepRendezvous r(pid, ch.path());
      EXPECT_EQ(r.path(), link);
      EXPECT_EQ(fs::read_symlink(link).string(), ch.path());
      EXPECT_EQ(
          fs::status(fs::path(link).parent_path()).permissions() &
              fs::perms::all,
          fs::perms::owner_all); // private to the user
      // A second watch of the same pid would take the steps from the first.
      EXPECT_THROW((StepRendezvous{pid, ch.path()}), DataError);
      EXPECT_EQ(fs::read_symlink(link).string(), ch.path()); // untouched
    }
    EXPECT_FALSE(fs::is_symlink(link)); // removed with its watch
    // Links left by a watch that was killed: to a FIFO nobody reads any
    // more, or to one already removed. Both are replaced.
    const auto left = dir / "left.fifo";
    ASSERT_EQ(::mkfifo(left.c_str(), 0600), 0);
    for (const auto& target : {left, dir / "gone.fifo"}) {
      fs::create_symlink(target, link);
      {
        StepRendezvous r(pid, ch.path());
        EXPECT_EQ(fs::read_symlink(link).string(), ch.path()) << target;
      }
      EXPECT_FALSE(fs::is_symlink(link));
    }
  }
  fs::remove_all(dir);
}

// The rendezvous folder must be this user's alone: one others can enter or
// write would let them read the job's steps or plant their own. Refused with
// what, where and the fix; nothing is linked.
TEST(StepRendezvous, AFolderThatIsNotPrivateIsRefusedNamingIt) {
  namespace fs = std::filesystem;
  test::TempDir tmp;
  const fs::path shared = tmp.path() / "shared";
  fs::create_directories(shared);
  fs::permissions(
      shared,
      fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
          fs::perms::others_read | fs::perms::others_exec);
  StepChannel ch((tmp.path() / "steps.fifo").string());
  try {
    StepRendezvous r(1000000000, ch.path(), shared.string());
    FAIL() << "a folder others can read was used";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(
        what.find(shared.string() + " is not a private folder of yours"),
        std::string::npos)
        << what;
    EXPECT_NE(e.hint().find("remove " + shared.string()), std::string::npos)
        << e.hint();
  }
  EXPECT_TRUE(fs::is_empty(shared));
}

TEST(ProcessTree, FindsChildrenAndGrandchildren) {
  int ready[2];
  int hold[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(hold), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    // The child forks a grandchild, says so, and both wait for the pipe's
    // end-of-file (the parent's write end is then the only one).
    ::close(hold[1]);
    const pid_t grandchild = ::fork();
    if (grandchild != 0) {
      const int g = grandchild;
      (void)!::write(ready[1], &g, sizeof g);
    }
    char c;
    (void)!::read(hold[0], &c, 1);
    _exit(0);
  }
  int grandchild = 0;
  ASSERT_EQ(
      ::read(ready[0], &grandchild, sizeof grandchild),
      static_cast<ssize_t>(sizeof grandchild));
  const auto tree = read_tree(child);
  ASSERT_EQ(tree.size(), 2u);
  EXPECT_EQ(tree[0].pid, child);
  EXPECT_EQ(tree[1].pid, grandchild);
  EXPECT_EQ(tree[1].ppid, child);
  EXPECT_GT(tree[0].rss_bytes, 0u);
  EXPECT_GE(tree[0].threads, 1);
  EXPECT_TRUE(tree[0].main_run_ns.has_value());
  // From this process, without itself: both are there.
  const auto mine = read_tree(::getpid(), false);
  EXPECT_GE(mine.size(), 2u);
  for (const auto& p : mine) {
    EXPECT_NE(p.pid, ::getpid());
  }
  ::close(hold[1]); // both read end-of-file and exit
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(read_tree(child).empty()); // gone: nothing, no throw
  EXPECT_FALSE(read_process(child));
}

TEST(ProcessTree, RatesCountANewProcessFromItsStart) {
  RateTracker rates;
  ProcessStat p;
  p.pid = 10;
  p.start_ticks = 5;
  p.cpu_ticks = 100;
  EXPECT_TRUE(rates.update({p}, 0).empty()); // the baseline
  p.cpu_ticks = 100 + static_cast<std::uint64_t>(clock_ticks_per_second());
  ProcessStat q;
  q.pid = 11;
  q.start_ticks = 9;
  q.cpu_ticks = static_cast<std::uint64_t>(clock_ticks_per_second() / 2);
  const auto r = rates.update({p, q}, 2.0);
  EXPECT_NEAR(r.at(10).cpu_percent, 50, 1e-9); // one second of CPU in two
  EXPECT_NEAR(r.at(11).cpu_percent, 25, 1e-9); // new: all its CPU time
  // A reused pid (another start time) is a new process.
  p.start_ticks = 77;
  p.cpu_ticks = 0;
  EXPECT_NEAR(rates.update({p}, 1.0).at(10).cpu_percent, 0, 1e-9);
}

TEST(VisibleGpus, IndicesUuidPrefixesAndEmpty) {
  const std::vector<std::string> uuids = {
      "GPU-aaaa-1", "GPU-bbbb-2", "GPU-cccc-3"};
  EXPECT_EQ(visible_gpus("0,2", uuids), (std::set<unsigned int>{0, 2}));
  EXPECT_EQ(visible_gpus("GPU-bbbb", uuids), (std::set<unsigned int>{1}));
  EXPECT_TRUE(visible_gpus("", uuids).empty());
  EXPECT_TRUE(visible_gpus("-1", uuids).empty());
  EXPECT_EQ(
      visible_gpus("1,x,2", uuids),
      (std::set<unsigned int>{1})); // CUDA stops at x
  EXPECT_TRUE(visible_gpus("7", uuids).empty());
}

TEST(CommandLine, QuotesWhatAShellWould) {
  EXPECT_EQ(
      command_line({"python", "train.py", "--lr", "0.1"}),
      "python train.py --lr 0.1");
  EXPECT_EQ(command_line({"sh", "-c", "echo it's"}), "sh -c 'echo it'\\''s'");
}

JobSample sample_at(double t, double worker_cpu, double job_sm) {
  JobSample s;
  s.elapsed_s = t;
  s.main_pid = 100;
  s.nvml = true;
  s.gpus_on_machine = 1;
  s.host_cpu_percent = 50;
  s.host_iowait_percent = 0;
  JobGpu g;
  g.gpu.index = 0;
  g.gpu.uuid = "GPU-x";
  g.gpu.util_percent = static_cast<unsigned int>(job_sm);
  g.gpu.memory_total_bytes = 80ull << 30;
  g.gpu.memory_used_bytes = 10ull << 30;
  g.held = true;
  g.job_memory_bytes = 9ull << 30;
  g.job_sm_percent = job_sm;
  g.others_sm_percent = 0;
  s.gpus.push_back(g);
  JobProcess main;
  main.pid = 100;
  main.name = "python";
  main.cpu_percent = 20;
  JobProcess worker;
  worker.pid = 101;
  worker.name = "pt_data_worker";
  worker.cpu_percent = worker_cpu;
  s.processes = {main, worker};
  return s;
}

TEST(WindowFold, MeansOverTheWindowAndTheJobsGpu) {
  WindowFold fold;
  fold.add(sample_at(1, 90, 10));
  fold.add(sample_at(2, 100, 20));
  StepEvent e;
  e.unix_time = 1000;
  e.step = 1;
  StepEvent f = e;
  f.unix_time = 1001;
  f.step = 2;
  fold.add_steps({e, f});
  std::vector<std::uint64_t> history;
  const auto w = fold.input(history);
  EXPECT_TRUE(w.holds_gpu);
  ASSERT_TRUE(w.job_sm_mean);
  EXPECT_DOUBLE_EQ(*w.job_sm_mean, 15);
  EXPECT_DOUBLE_EQ(w.main_cpu_mean, 20);
  ASSERT_EQ(w.helpers.size(), 1u);
  EXPECT_DOUBLE_EQ(w.helpers[0].cpu_mean, 95);
  EXPECT_EQ(w.job_memory, 9ull << 30);
  EXPECT_EQ(history, (std::vector<std::uint64_t>{9ull << 30}));
  EXPECT_EQ(w.steps, 2u);
  EXPECT_EQ(telemetry::diagnose_job(w).primary().verdict, "input-bound");
}

TEST(WatchReport, SummaryAndTimelinesCarryTheSeries) {
  WatchRecord r;
  r.command = "python train.py";
  r.pid = 100;
  r.exit_code = 0;
  r.ended = "exited";
  r.wall_s = 3;
  for (int t = 1; t <= 3; ++t) {
    r.samples.push_back(sample_at(t, 95, 12));
  }
  r.steps = {{0.5, 0, 2.0}, {1.5, 1, 1.0}, {2.5, 2, std::nullopt}};
  std::vector<std::uint64_t> history;
  WindowFold fold;
  for (const auto& s : r.samples) {
    fold.add(s);
  }
  r.run = telemetry::diagnose_job(fold.input(history));
  r.windows.push_back({0, 3, r.run});
  r.watch_cpu_s = 0.03;
  const auto j = summary_json(r);
  EXPECT_EQ(j["verdict"], "input-bound");
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["steps"]["reported"], 3);
  EXPECT_DOUBLE_EQ(j["steps"]["last_loss"].get<double>(), 1.0);
  EXPECT_EQ(j["processes"]["seen"], 2);
  EXPECT_NEAR(j["overhead"]["cpu_share_percent"].get<double>(), 1.0, 1e-9);
  const std::string html = report_html(r);
  for (const char* series :
       {"whole GPU",
        "the job's share",
        "other processes",
        "pt_data_worker 101",
        "python 100 (main)",
        "steps/s",
        "loss",
        "I/O wait"}) {
    EXPECT_NE(html.find(">" + std::string(series) + "<"), std::string::npos)
        << series;
  }
  EXPECT_NE(html.find("<td><b>input-bound</b></td>"), std::string::npos);
  const std::string prom = prometheus_text(r.samples.back(), r.run, 1.0, 1.0);
  EXPECT_NE(
      prom.find("hotloop_watch_job_sm_percent{gpu=\"0\"} 12"),
      std::string::npos);
  EXPECT_NE(
      prom.find("hotloop_watch_verdict{verdict=\"input-bound\"} 1"),
      std::string::npos);
  EXPECT_NE(
      prom.find(
          "hotloop_watch_process_cpu_percent{pid=\"101\",name=\"pt_data_worker\"} 95"),
      std::string::npos);
  // Each sample follows its own family's TYPE line (the format's rule: a
  // family's samples are one group), power's and temperature's included.
  JobSample hot = r.samples.back();
  hot.gpus[0].gpu.power_w = 300;
  hot.gpus[0].gpu.temperature_c = 70u;
  const std::string hot_prom = prometheus_text(hot, r.run, 1.0, 1.0);
  EXPECT_NE(
      hot_prom.find("hotloop_watch_gpu_temperature_celsius{gpu=\"0\"} 70"),
      std::string::npos);
  std::istringstream lines(hot_prom);
  std::string line;
  std::string family;
  while (std::getline(lines, line)) {
    if (line.starts_with("# TYPE ")) {
      family = line.substr(7, line.find(' ', 7) - 7);
    } else if (!line.starts_with("#")) {
      EXPECT_EQ(line.substr(0, line.find_first_of("{ ")), family) << line;
    }
  }
  JobSample odd = r.samples.back();
  odd.processes[1].name = "a\"b\\c"; // a comm may hold anything
  EXPECT_NE(
      prometheus_text(odd, std::nullopt, 0, std::nullopt)
          .find(R"(name="a\"b\\c")"),
      std::string::npos);
}

} // namespace
} // namespace hotloop::watch
