// The optimizer over ZeRO shards (two Gloo ranks, threads of this process):
// AdamW stepping each rank's shard of the mean gradient ends where AdamW on
// the whole parameters ends; the shard files each rank saves put back
// together are the whole optimizer's state (names and values); a whole
// state is cut into the shards exactly; a save by two ranks is cut again for
// one rank and for two; a file of another
// save is refused by name, and a missing one is named.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/zeros.h>

#include "hotloop/errors.h"
#include "hotloop/parallel/process_group.h"
#include "hotloop/parallel/sharded_reducer.h"
#include "hotloop/train/checkpoint_shards.h"
#include "hotloop/train/optimizer.h"
#include "hotloop/train/sharded_state.h"
#include "support/free_port.h"
#include "support/loopback_group.h"
#include "support/temp_dir.h"

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

// The whole state's tensors but the step count, by name.
std::map<std::string, at::Tensor> by_name(const NamedTensors& state) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : state) {
    if (name != "steps") {
      out.emplace(name, t);
    }
  }
  return out;
}

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
  test::TempDir tmp;
  const auto dir = tmp.path() / "checkpoints";
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
      s.reducer->launch_rest(/*failed=*/false);
      s.reducer->finish();
      s.optimizer->step(0.01);
      s.optimizer->zero_grad();
      s.reducer->after_update();
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(at::allclose(params[i], expected[i], 1e-6, 1e-7)) << i;
    }
    // Saved, each rank its file: put back together, the whole optimizer's
    // names (in its order) and values.
    const ShardIndex index =
        s.state->save(dir.string(), 2, *s.optimizer).optimizer;
    const NamedTensors got = whole_tensors(dir.string(), 2, index);
    const auto expected_state = by_name(whole_state);
    ASSERT_EQ(got.size(), expected_state.size());
    std::size_t i = 0;
    for (const auto& [name, t] : whole_state) {
      if (name == "steps") {
        continue;
      }
      EXPECT_EQ(got[i].first, name);
      EXPECT_TRUE(at::allclose(got[i++].second, t, 1e-6, 1e-9)) << name;
    }
  });
}

TEST(ShardedOptimizerState, AWholeStateIsCutIntoEachRanksShardsExactly) {
  std::vector<at::Tensor> expected = make_params();
  const Optimizer whole = whole_run(expected);
  const auto whole_state = whole.state();
  test::TempDir tmp;
  const auto dir = tmp.path() / "checkpoints";
  two_ranks([&](int r, std::shared_ptr<parallel::ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    Sharded s = shard(params, g);
    s.state->scatter(whole_state, *s.optimizer);
    EXPECT_EQ(s.optimizer->steps(), 2);
    // Saved and put back together, it is the state it was cut from, bit for
    // bit.
    const ShardIndex index =
        s.state->save(dir.string(), 2, *s.optimizer).optimizer;
    const auto back = by_name(whole_tensors(dir.string(), 2, index));
    ASSERT_EQ(back.size(), by_name(whole_state).size());
    for (const auto& [name, t] : by_name(whole_state)) {
      ASSERT_TRUE(back.contains(name)) << name << " rank " << r;
      EXPECT_TRUE(at::equal(back.at(name), t)) << name;
    }
  });
}

TEST(ShardedOptimizerState, ASaveByTwoRanksIsCutAgainForOneRankAndForTwo) {
  std::vector<at::Tensor> expected = make_params();
  const Optimizer whole = whole_run(expected);
  const auto whole_state = whole.state();
  test::TempDir tmp;
  const std::string dir = (tmp.path() / "checkpoints").string();
  std::vector<NamedTensors> saved_shards(2);
  ShardIndex index;
  two_ranks([&](int r, std::shared_ptr<parallel::ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    Sharded s = shard(params, g);
    s.state->scatter(whole_state, *s.optimizer);
    saved_shards[static_cast<std::size_t>(r)] = s.optimizer->state();
    const ShardIndex i = s.state->save(dir, 7, *s.optimizer).optimizer;
    if (r == 0) {
      index = i;
    }
  });
  const NamedTensors head = {{"steps", whole_state.front().second}};
  ASSERT_EQ(whole_state.front().first, "steps");
  // Two ranks again: each its own shards, bit for bit.
  two_ranks([&](int r, std::shared_ptr<parallel::ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    Sharded s = shard(params, g);
    s.state->load(dir, 7, index, head, *s.optimizer);
    const auto want = saved_shards[static_cast<std::size_t>(r)];
    const auto got = s.optimizer->state();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].first, want[i].first);
      EXPECT_TRUE(at::equal(got[i].second, want[i].second)) << got[i].first;
    }
  });
  // One rank: its one shard is the whole state.
  const auto g = test::loopback_group(0, 1, test::free_port());
  std::vector<at::Tensor> params = make_params();
  Sharded one = shard(params, g);
  one.state->load(dir, 7, index, head, *one.optimizer);
  const ShardIndex again =
      one.state->save((tmp.path() / "again").string(), 7, *one.optimizer)
          .optimizer;
  const auto back =
      by_name(whole_tensors((tmp.path() / "again").string(), 7, again));
  for (const auto& [name, t] : by_name(whole_state)) {
    ASSERT_TRUE(back.contains(name)) << name;
    EXPECT_TRUE(at::equal(back.at(name), t)) << name;
  }
}

TEST(ShardedOptimizerState, AShardFileOfAnotherSaveIsRefusedByName) {
  std::vector<at::Tensor> expected = make_params();
  const Optimizer whole = whole_run(expected);
  const auto whole_state = whole.state();
  test::TempDir tmp;
  const std::string a = (tmp.path() / "a").string();
  const std::string b = (tmp.path() / "b").string();
  std::vector<ShardIndex> indexes(2);
  two_ranks([&](int r, std::shared_ptr<parallel::ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    Sharded s = shard(params, g);
    s.state->scatter(whole_state, *s.optimizer);
    const ShardIndex ia = s.state->save(a, 3, *s.optimizer).optimizer;
    const ShardIndex ib = s.state->save(b, 3, *s.optimizer).optimizer;
    if (r == 0) {
      indexes = {ia, ib};
    }
  });
  EXPECT_NE(indexes[0].id, indexes[1].id);
  // b's rank-1 file, the same names and sizes, in a's place.
  std::filesystem::copy_file(
      shard_file_path(b, 3, 1, 2),
      shard_file_path(a, 3, 1, 2),
      std::filesystem::copy_options::overwrite_existing);
  try {
    whole_tensors(a, 3, indexes[0]);
    FAIL() << "a shard file of another save was read";
  } catch (const DataError& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            shard_file_path(a, 3, 1, 2) +
            " does not belong to this checkpoint"),
        std::string::npos)
        << e.what();
  }
  std::filesystem::remove(shard_file_path(a, 3, 1, 2));
  EXPECT_EQ(
      missing_shard_files(
          a, {{"step", 3}, {kShardIndexKey, indexes[0].to_json()}}),
      std::vector<std::string>{shard_file_path(a, 3, 1, 2)});
}

} // namespace hotloop::train
