// The optimizer over ZeRO shards (two Gloo ranks, threads of this process):
// AdamW stepping each rank's shard of the mean gradient ends where AdamW on
// the whole parameters ends, the state gathered from the shards is the
// whole optimizer's (names and values), and a whole state is cut back into
// the shards exactly.
#include <gtest/gtest.h>

#include <map>

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/zeros.h>

#include "hotloop/parallel/process_group.h"
#include "hotloop/parallel/sharded_reducer.h"
#include "hotloop/train/optimizer.h"
#include "hotloop/train/sharded_state.h"
#include "support/free_port.h"
#include "support/loopback_group.h"

namespace hotloop::train {
namespace {

template <typename F>
void two_ranks(F body) {
  test::two_loopback_ranks(test::free_port(), body);
}

std::vector<at::Tensor> make_params() {
  return {
      at::sin(at::arange(10, at::kFloat)).requires_grad_(),
      (at::arange(30, at::kFloat).reshape({5, 6}) * 0.01).requires_grad_(),
      at::full({3}, 0.25f).requires_grad_()};
}

// Rank r's gradient of parameter i at step s; their mean is what the whole
// optimizer is given.
at::Tensor grad_of(const at::Tensor& p, int r, int s, std::size_t i) {
  return at::sin(
      at::arange(p.numel(), at::kFloat).reshape(p.sizes()) *
          static_cast<float>(r + 1 + s) +
      static_cast<float>(i));
}

OptimizerOptions adamw() {
  OptimizerOptions o;
  o.kind = OptimizerKind::AdamW;
  o.weight_decay = 0.1;
  return o;
}

// Two groups as the trainer makes them: decayed and not.
std::vector<ParamGroup> groups_of(const std::vector<at::Tensor>& p) {
  return {{"all", {p[0], p[1]}, 1.0, true}, {"no_decay", {p[2]}, 1.0, false}};
}

// The whole optimizer, two steps on the mean gradients.
Optimizer whole_run(std::vector<at::Tensor>& params) {
  Optimizer whole(groups_of(params), adamw());
  for (int s = 0; s < 2; ++s) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      params[i].mutable_grad() =
          (grad_of(params[i], 0, s, i) + grad_of(params[i], 1, s, i)) * 0.5;
    }
    whole.step(0.01);
  }
  return whole;
}

struct Sharded {
  std::unique_ptr<parallel::ShardedReducer> reducer;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<ShardedOptimizerState> state;
};

Sharded shard(
    std::vector<at::Tensor>& params,
    std::shared_ptr<parallel::ProcessGroup> g) {
  parallel::ShardOptions so;
  so.stage = 2;
  so.buckets.bucket_bytes = 64;
  Sharded s;
  s.reducer = std::make_unique<parallel::ShardedReducer>(
      g, params, std::vector<int>{0, 0, 1}, so);
  std::vector<ParamGroup> shards = {
      {"all", {}, 1.0, true}, {"no_decay", {}, 1.0, false}};
  for (const auto& sh : s.reducer->shards()) {
    shards[static_cast<std::size_t>(sh.partition)].params.push_back(sh.tensor);
  }
  s.optimizer = std::make_unique<Optimizer>(std::move(shards), adamw());
  s.state =
      std::make_unique<ShardedOptimizerState>(*s.reducer, groups_of(params), g);
  return s;
}

} // namespace

TEST(ShardedOptimizerState, AdamwOnShardsEndsWhereTheWholeOptimizerEnds) {
  std::vector<at::Tensor> expected = make_params();
  const Optimizer whole = whole_run(expected);
  const auto whole_state = whole.state();
  two_ranks([&](int r, std::shared_ptr<parallel::ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    Sharded s = shard(params, g);
    for (int step = 0; step < 2; ++step) {
      s.reducer->arm();
      at::Tensor loss = at::zeros({});
      for (std::size_t i = 0; i < params.size(); ++i) {
        loss = loss + (params[i] * grad_of(params[i], r, step, i)).sum();
      }
      loss.backward();
      s.reducer->launch_rest();
      s.reducer->finish();
      s.optimizer->step(0.01);
      s.optimizer->zero_grad();
      s.reducer->after_update();
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(at::allclose(params[i], expected[i], 1e-6, 1e-7)) << i;
    }
    // Gathered: the whole optimizer's names and values (rank 0 keeps them).
    const NamedTensors got = s.state->gather(*s.optimizer, r == 0);
    if (r == 0) {
      ASSERT_EQ(got.size(), whole_state.size());
      std::map<std::string, at::Tensor> by_name(got.begin(), got.end());
      for (const auto& [name, t] : whole_state) {
        ASSERT_TRUE(by_name.contains(name)) << name;
        EXPECT_TRUE(at::allclose(by_name[name], t, 1e-6, 1e-9)) << name;
      }
    } else {
      EXPECT_EQ(got.size(), 1u); // the step count only
    }
  });
}

TEST(ShardedOptimizerState, AWholeStateIsCutIntoEachRanksShardsExactly) {
  std::vector<at::Tensor> expected = make_params();
  const Optimizer whole = whole_run(expected);
  const auto whole_state = whole.state();
  two_ranks([&](int r, std::shared_ptr<parallel::ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    Sharded s = shard(params, g);
    s.state->scatter(whole_state, *s.optimizer);
    EXPECT_EQ(s.optimizer->steps(), 2);
    // Gathered back, it is the state it was cut from, bit for bit.
    const NamedTensors back = s.state->gather(*s.optimizer, true);
    std::map<std::string, at::Tensor> by_name(back.begin(), back.end());
    for (const auto& [name, t] : whole_state) {
      ASSERT_TRUE(by_name.contains(name)) << name << " rank " << r;
      EXPECT_TRUE(at::equal(by_name[name], t)) << name;
    }
  });
}

} // namespace hotloop::train
