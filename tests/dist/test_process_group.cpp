// Two Gloo ranks (threads of this process, the real TCPStore and Gloo over
// loopback): bucketed mean all-reduce, broadcast from rank 0, max agreement;
// and the environment of torchrun and Slurm.
#include <gtest/gtest.h>
#include <unistd.h>

#include <future>
#include <map>
#include <thread>

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>

#include "hotloop/dist/dist_env.h"
#include "hotloop/dist/process_group.h"
#include "hotloop/errors.h"

namespace hotloop::dist {
namespace {

int free_port() {
  // A port in the dynamic range, different per test process run.
  return 20000 + static_cast<int>(::getpid() % 20000);
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

} // namespace

TEST(ProcessGroup, TwoGlooRanksAverageBroadcastAndAgree) {
  const int port = free_port();
  GroupOptions o;
  o.bucket_bytes = 64; // several buckets for these small tensors
  o.timeout = std::chrono::seconds(60);
  auto rank = [&](int r) {
    auto g = ProcessGroup::create(rank_env(r, port), o);
    // Rank r holds (r + 1) * [0, 1, 2, ...]: the mean is 1.5 * [0, 1, ...].
    std::vector<at::Tensor> grads = {
        at::arange(10, at::kFloat) * (r + 1),
        at::arange(30, at::kFloat).reshape({5, 6}) * (r + 1),
        at::full({3}, static_cast<float>(r))};
    g->allreduce_mean(grads, "gradients");
    std::vector<at::Tensor> weights = {
        at::full({4}, static_cast<float>(r + 7))};
    g->broadcast(weights, "start");
    const std::int64_t agreed = g->allreduce_max(r == 1 ? 5 : 2, "oom");
    return std::make_tuple(grads, weights, agreed);
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

TEST(ProcessGroup, ARankThatNeverComesIsAnErrorNamingTheMaster) {
  GroupOptions o;
  o.timeout = std::chrono::seconds(2);
  DistEnv e = rank_env(0, free_port() + 1);
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
       {"MASTER_ADDR", "node01"},
       {"MASTER_PORT", "29600"}}));
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "node01");
  EXPECT_EQ(e.master_port, 29600);
}

TEST(DistEnv, SlurmVariablesWithTheFirstHostOfTheNodeList) {
  const DistEnv e = read_dist_env(env_of(
      {{"SLURM_PROCID", "5"},
       {"SLURM_NTASKS", "16"},
       {"SLURM_LOCALID", "1"},
       {"SLURM_JOB_NODELIST", "gpu[07-09,12],cpu01"}}));
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 16);
  EXPECT_EQ(e.local_rank, 1);
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

} // namespace hotloop::dist
