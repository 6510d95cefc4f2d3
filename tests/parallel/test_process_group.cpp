// Two Gloo ranks (threads of this process, the real TCPStore and Gloo over
// loopback): the gradient reducer's bucketed mean (after backward, and
// overlapped with it through the gradient hooks, with accumulation and the
// OOM protocol), broadcast from rank 0, max agreement; the rank status that
// names a silent rank; and the environment of torchrun and Slurm.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <thread>

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "hotloop/errors.h"
#include "hotloop/parallel/dist_env.h"
#include "hotloop/parallel/gradient_reducer.h"
#include "hotloop/parallel/process_group.h"
#include "hotloop/parallel/rank_status.h"
#include "support/free_port.h"
#include "support/rank_gradients.h"
#include "support/wait_until.h"

namespace hotloop::parallel {
namespace {

using test::free_port;

// A job's store on loopback, served by this process (rank 0's side).
c10::intrusive_ptr<c10d::TCPStore> job_store() {
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(free_port());
  so.isServer = true;
  so.numWorkers = 1;
  so.waitWorkers = false;
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
}

// Waits until `rank`'s report in `store` is at `step` and `phase`.
bool published(
    c10d::Store& store,
    int rank,
    std::int64_t step,
    const std::string& phase) {
  return test::wait_until(
      [&] {
        const std::string key = fmt::format("status/{}", rank);
        if (!store.check({key})) {
          return false;
        }
        const auto bytes = store.get(key);
        const auto r = parse_report(std::string(bytes.begin(), bytes.end()));
        return r && r->step == step && r->phase == phase;
      },
      std::chrono::seconds(60));
}

DistEnv rank_env(int rank, int port) {
  DistEnv e;
  e.rank = rank;
  e.world_size = 2;
  e.master_port = port;
  e.source = "test";
  return e;
}

std::function<const char*(const char*)> env_of(
    const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

using test::loss_for;
using test::make_params;
using test::rank_grads;

void expect_means(const std::vector<at::Tensor>& params) {
  EXPECT_TRUE(at::allclose(params[0].grad(), at::arange(10, at::kFloat) * 1.5));
  EXPECT_TRUE(at::allclose(
      params[1].grad(), at::arange(30, at::kFloat).reshape({5, 6}) * 1.5));
  EXPECT_TRUE(at::allclose(params[2].grad(), at::full({3}, 0.5f)));
}

// Runs `body(rank, group)` on two ranks (threads) and waits for both.
template <typename F>
void two_ranks(int port, F body) {
  GroupOptions o;
  o.timeout = std::chrono::seconds(60);
  auto run = [&](int r) {
    body(r, ProcessGroup::create(rank_env(r, port), o));
  };
  auto f0 = std::async(std::launch::async, run, 0);
  auto f1 = std::async(std::launch::async, run, 1);
  f0.get();
  f1.get();
}

ReducerOptions small_buckets(bool overlap) {
  ReducerOptions ro;
  ro.bucket_bytes = 64; // several buckets for these small tensors
  ro.overlap = overlap;
  return ro;
}

// NCCL's watchdog waits longer than the group's timeout, so the host's own
// timed wait on the per-step agreement (which names the ranks that stopped)
// fails first instead of the watchdog taking the process down.
TEST(ProcessGroup, NcclsWatchdogOutlastsTheHostsTimedAgreement) {
  using std::chrono::seconds;
  EXPECT_EQ(nccl_watchdog_timeout(seconds(300)), seconds(330));
  EXPECT_EQ(nccl_watchdog_timeout(seconds(10)), seconds(40)); // at least 30 s
  EXPECT_EQ(nccl_watchdog_timeout(seconds(3000)), seconds(3300));
}

} // namespace

TEST(GradientReducer, BucketsStartDuringBackwardAndEndAsTheMean) {
  two_ranks(free_port(), [](int r, std::shared_ptr<ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    GradientReducer reducer(g, params, small_buckets(true));
    ASSERT_GE(reducer.bucket_count(), 2u);
    for (int step = 0; step < 2; ++step) {
      for (auto& p : params) {
        p.mutable_grad() = at::Tensor();
      }
      reducer.arm();
      loss_for(params, rank_grads(r), 1.0).backward();
      reducer.launch_rest(/*failed=*/false);
      // Every bucket's gradients were ready inside backward.
      EXPECT_EQ(reducer.started_during_backward(), reducer.bucket_count());
      reducer.finish();
      expect_means(params);
    }
  });
}

TEST(GradientReducer, OnlyTheArmedBackwardStartsBucketsWhenAccumulating) {
  two_ranks(free_port(), [](int r, std::shared_ptr<ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    GradientReducer reducer(g, params, small_buckets(true));
    // Two micro-batches of half the gradient each: only the second is armed,
    // so the buckets hold the accumulated sum.
    loss_for(params, rank_grads(r), 0.5).backward();
    reducer.arm();
    loss_for(params, rank_grads(r), 0.5).backward();
    reducer.launch_rest(/*failed=*/false);
    EXPECT_EQ(reducer.started_during_backward(), reducer.bucket_count());
    reducer.finish();
    expect_means(params);
  });
}

TEST(GradientReducer, ARankThatFailedBeforeBackwardStillLinesUpAndDiscards) {
  two_ranks(free_port(), [](int r, std::shared_ptr<ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    GradientReducer reducer(g, params, small_buckets(true));
    // Step 1: rank 1 "runs out of memory" in forward (no backward); rank 0
    // completes its backward. Both start every bucket, agree, discard.
    if (r == 0) {
      reducer.arm();
      loss_for(params, rank_grads(r), 1.0).backward();
    }
    reducer.launch_rest(/*failed=*/false);
    EXPECT_EQ(g->allreduce_max(r == 1 ? 1 : 0, "step agreement"), 1);
    reducer.discard();
    // Step 2, redone by both: the mean, as if step 1 never happened.
    for (auto& p : params) {
      p.mutable_grad() = at::Tensor();
    }
    reducer.arm();
    loss_for(params, rank_grads(r), 1.0).backward();
    reducer.launch_rest(/*failed=*/false);
    EXPECT_EQ(g->allreduce_max(0, "step agreement"), 0);
    reducer.finish();
    expect_means(params);
  });
}

TEST(GradientReducer, WithoutOverlapEveryBucketStartsAfterBackward) {
  two_ranks(free_port(), [](int r, std::shared_ptr<ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    GradientReducer reducer(g, params, small_buckets(false));
    reducer.arm();
    loss_for(params, rank_grads(r), 1.0).backward();
    reducer.launch_rest(/*failed=*/false);
    EXPECT_EQ(reducer.started_during_backward(), 0u);
    reducer.finish();
    expect_means(params);
  });
}

TEST(RankStatus, NamesTheRankThatStoppedReportingWithItsStepAndPhase) {
  auto store = job_store();
  const std::chrono::milliseconds fast(200);
  RankStatus rank0(0, store->clone(), "", fast);
  rank0.set(7, Phase::AllReduce);
  {
    RankStatus rank1(1, store->clone(), "", fast);
    rank1.set(7, Phase::Backward);
    ASSERT_TRUE(published(*store, 1, 7, "backward"));
    RankStatus rank2(2, store->clone(), "", fast);
    rank2.set(7, Phase::AllReduce);
    ASSERT_TRUE(published(*store, 2, 7, "all-reduce"));
    // Rank 1 hangs in its backward; rank 2 waits in the all-reduce as this
    // one did: not named.
    const std::string live = rank0.describe_peers(3);
    EXPECT_NE(
        live.find(
            "alive but stuck outside the collective: rank 1 (still at step 8, backward"),
        std::string::npos)
        << live;
    EXPECT_EQ(live.find("rank 2"), std::string::npos) << live;
  } // ranks 1 and 2 stop here, like a killed process (no last word)
  RankStatus rank3(3, store->clone(), "", fast);
  rank3.set(7, Phase::AllReduce);
  const std::string s = rank0.describe_peers(5);
  EXPECT_NE(s.find("rank 1 (last report: step 8, backward"), std::string::npos)
      << s;
  EXPECT_NE(
      s.find("rank 2 (last report: step 8, all-reduce"), std::string::npos)
      << s;
  EXPECT_EQ(s.find("rank 3"), std::string::npos) << s; // still reporting
  EXPECT_NE(s.find("rank 4 (never reported)"), std::string::npos) << s;
}

// A rank that still reports but whose step and phase do not move while
// this one's collective failed hangs outside the collective: named as stuck,
// not as stopped.
TEST(RankStatus, NamesARankThatIsAliveButStuckOutsideTheCollective) {
  auto store = job_store();
  const std::chrono::milliseconds fast(200);
  RankStatus rank1(1, store->clone(), "", fast);
  rank1.set(2, Phase::Backward);
  ASSERT_TRUE(published(*store, 1, 2, "backward"));
  RankStatus rank0(0, store->clone(), "", fast);
  rank0.set(2, Phase::AllReduce);
  const std::string s = rank0.describe_peers(2);
  EXPECT_NE(
      s.find(
          "alive but stuck outside the collective: rank 1 (still at step 3, backward"),
      std::string::npos)
      << s;
  EXPECT_EQ(s.find("stopped reporting"), std::string::npos) << s;
}

TEST(RankStatus, AFailedRankIsNotBlamedAndTheFileHoldsTheLastReport) {
  auto store = job_store();
  const std::chrono::milliseconds fast(200);
  const std::string file =
      fmt::format("/tmp/hotloop-rank-status-{}", ::getpid());
  {
    RankStatus rank1(1, store->clone(), file, fast);
    rank1.set(41, Phase::AllReduce);
    ASSERT_TRUE(published(*store, 1, 41, "all-reduce"));
    // Rank 1 saw the failure too and said so before stopping.
    EXPECT_NE(
        rank1.describe_peers(2).find("rank 0 (never reported)"),
        std::string::npos);
  }
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  const auto report = parse_report(line);
  ASSERT_TRUE(report.has_value()) << line;
  EXPECT_EQ(report->step, 41);
  EXPECT_EQ(report->phase, "failed");
  std::remove(file.c_str());
  RankStatus rank0(0, store->clone(), "", fast);
  const std::string s = rank0.describe_peers(2);
  EXPECT_NE(s.find("no other rank stopped reporting"), std::string::npos) << s;
}

TEST(ProcessGroup, TwoGlooRanksAverageBroadcastAndAgree) {
  const int port = free_port();
  GroupOptions o;
  o.timeout = std::chrono::seconds(60);
  auto rank = [&](int r) {
    auto g = ProcessGroup::create(rank_env(r, port), o);
    std::vector<at::Tensor> params = make_params();
    const std::vector<at::Tensor> grads = rank_grads(r);
    for (std::size_t i = 0; i < params.size(); ++i) {
      params[i].mutable_grad() = grads[i].clone();
    }
    GradientReducer reducer(g, params, small_buckets(false));
    reducer.launch_rest(/*failed=*/false);
    reducer.finish();
    std::vector<at::Tensor> got;
    for (const auto& p : params) {
      got.push_back(p.grad());
    }
    std::vector<at::Tensor> weights = {
        at::full({4}, static_cast<float>(r + 7))};
    g->broadcast(weights, "start");
    const std::int64_t agreed = g->allreduce_max(r == 1 ? 5 : 2, "oom");
    return std::make_tuple(got, weights, agreed);
  };
  auto f0 = std::async(std::launch::async, rank, 0);
  auto f1 = std::async(std::launch::async, rank, 1);
  for (auto* f : {&f0, &f1}) {
    const auto [grads, weights, agreed] = f->get();
    EXPECT_TRUE(at::allclose(grads[0], at::arange(10, at::kFloat) * 1.5));
    EXPECT_TRUE(at::allclose(
        grads[1], at::arange(30, at::kFloat).reshape({5, 6}) * 1.5));
    EXPECT_TRUE(at::allclose(grads[2], at::full({3}, 0.5f)));
    EXPECT_TRUE(at::allclose(weights[0], at::full({4}, 7.0f)));
    EXPECT_EQ(agreed, 5);
  }
}

// A sibling group: made once per purpose and kept (the same group again),
// its collectives matched among themselves: rank 0 starts one on the
// sibling before the parent's, rank 1 after, and both complete (on one
// group they would pair with each other's other collective).
TEST(ProcessGroup, ASiblingIsMadeOnceAndOrdersItsCollectivesApart) {
  const int port = free_port();
  GroupOptions o;
  o.timeout = std::chrono::seconds(20);
  auto rank = [&](int r) {
    auto g = ProcessGroup::create(rank_env(r, port), o);
    auto s = g->sibling("test");
    const bool same = s == g->sibling("test");
    const bool other = s != g->sibling("other");
    at::Tensor sum = at::full({2}, r + 1.0f);
    std::function<void()> pending;
    if (r == 0) {
      pending = s->start_allreduce_sum(sum, "sibling");
    }
    const std::vector<double> parent =
        g->allreduce_sum({static_cast<double>(r + 1)}, "parent");
    if (r == 1) {
      pending = s->start_allreduce_sum(sum, "sibling");
    }
    pending();
    return std::make_tuple(same, other, parent.front(), sum);
  };
  auto f0 = std::async(std::launch::async, rank, 0);
  auto f1 = std::async(std::launch::async, rank, 1);
  for (auto* f : {&f0, &f1}) {
    const auto [same, other, parent, sum] = f->get();
    EXPECT_TRUE(same);
    EXPECT_TRUE(other);
    EXPECT_EQ(parent, 3.0);
    EXPECT_TRUE(at::equal(sum, at::full({2}, 3.0f)));
  }
}

TEST(ProcessGroup, ARankThatNeverComesIsAnErrorNamingTheMaster) {
  GroupOptions o;
  o.timeout = std::chrono::seconds(2);
  DistEnv e = rank_env(0, free_port());
  try {
    ProcessGroup::create(e, o);
    FAIL() << "expected EnvError";
  } catch (const EnvError& err) {
    EXPECT_NE(
        std::string(err.what()).find("cannot join the job at 127.0.0.1:"),
        std::string::npos)
        << err.what();
  }
}

TEST(DistEnv, ASingleProcessWithoutLauncherVariables) {
  const DistEnv e = read_dist_env(env_of({}));
  EXPECT_FALSE(e.distributed());
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 1);
}

TEST(DistEnv, TorchrunVariables) {
  const DistEnv e = read_dist_env(env_of(
      {{"RANK", "3"},
       {"WORLD_SIZE", "8"},
       {"LOCAL_RANK", "1"},
       {"LOCAL_WORLD_SIZE", "4"},
       {"HOTLOOP_RANK_STATUS_FILE", "/tmp/job/rank3"},
       {"MASTER_ADDR", "node01"},
       {"MASTER_PORT", "29600"}}));
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.status_file, "/tmp/job/rank3");
  EXPECT_EQ(e.master_addr, "node01");
  EXPECT_EQ(e.master_port, 29600);
}

TEST(DistEnv, SlurmVariablesWithTheFirstHostOfTheNodeList) {
  const DistEnv e = read_dist_env(env_of(
      {{"SLURM_PROCID", "5"},
       {"SLURM_NTASKS", "16"},
       {"SLURM_LOCALID", "1"},
       {"SLURM_NTASKS_PER_NODE", "4(x4)"},
       {"SLURM_JOB_NODELIST", "gpu[07-09,12],cpu01"}}));
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 16);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.master_addr, "gpu07");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_EQ(first_slurm_host("a01,b02"), "a01");
  EXPECT_EQ(first_slurm_host("solo"), "solo");
}

TEST(DistEnv, BadValuesNameTheVariable) {
  try {
    read_dist_env(env_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}}));
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK=4"), std::string::npos);
  }
  EXPECT_THROW(read_dist_env(env_of({{"RANK", "0"}})), UsageError);
  EXPECT_THROW(
      read_dist_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "two"}})),
      UsageError);
}

} // namespace hotloop::parallel
