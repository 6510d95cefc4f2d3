// hotloop plan's arithmetic: each rank's bytes by kind at each ZeRO stage
// and with the optimizer offloaded, as the trainer counts its own; the
// activations on a straight line through two measurements; the
// configurations in the order of their cost, the first that fits marked.
#include <gtest/gtest.h>

#include <algorithm>

#include "hotloop/train/memory_plan.h"

namespace hotloop::train {
namespace {

// 1000 float32 parameters, all trained with AdamW.
ModelState adamw_state() {
  ModelState s;
  s.parameters = s.trainable = 1000;
  s.weight_bytes = s.gradient_bytes = 4000;
  s.optimizer_bytes = 8000;
  return s;
}

const ActivationFit kFlat{2, 4, 100, 100};

std::vector<std::string> flags_of(const std::vector<PlanCandidate>& c) {
  std::vector<std::string> out;
  for (const auto& p : c) {
    out.push_back(p.config.flags());
  }
  return out;
}

} // namespace

TEST(MemoryPlan, EachStageHoldsWhatTheTrainerCounts) {
  PlanConfig c;
  c.ranks = 4;
  RankMemory m = rank_memory(adamw_state(), c, kFlat);
  EXPECT_EQ(m.parameters, 4000u);
  EXPECT_EQ(m.gradients, 8000u); // the parameters' own and the buckets
  EXPECT_EQ(m.optimizer, 8000u);
  c.shard = 1;
  m = rank_memory(adamw_state(), c, kFlat);
  EXPECT_EQ(m.gradients, 4000u);
  EXPECT_EQ(m.optimizer, 2000u);
  c.shard = 2;
  m = rank_memory(adamw_state(), c, kFlat);
  EXPECT_EQ(m.gradients, 1000u + 4000u); // 1/N, and the buffers in flight
  EXPECT_EQ(m.optimizer, 2000u);
  // At most so many bytes of them at once (never more than all of them).
  EXPECT_EQ(rank_memory(adamw_state(), c, kFlat, {}, {1500}).gradients, 2500u);
  EXPECT_EQ(rank_memory(adamw_state(), c, kFlat, {}, {9000}).gradients, 5000u);
  c.offload = true;
  m = rank_memory(adamw_state(), c, kFlat);
  EXPECT_EQ(m.optimizer, 0u);
  EXPECT_EQ(m.host, 2000u + 2 * 1000u); // the state, the copies, their grads
  EXPECT_EQ(m.device(), 4000u + 5000u + 100u);
  // One process: one set of gradients.
  PlanConfig one;
  EXPECT_EQ(rank_memory(adamw_state(), one, kFlat).gradients, 4000u);
  // Stage 3: units holding 3000 of the 4000 bytes, the two largest 1500:
  // 1000 outside them, 1500 of the units' shards, two units whole.
  c.shard = 3;
  c.offload = false;
  const UnitSizes units{3000, 1500};
  m = rank_memory(adamw_state(), c, kFlat, units);
  EXPECT_EQ(m.parameters, 1000u + 750u + 1500u);
  EXPECT_EQ(m.gradients, 1000u + 4000u);
  // Without units stage 3 is stage 2.
  EXPECT_EQ(rank_memory(adamw_state(), c, kFlat).parameters, 4000u);
}

TEST(MemoryPlan, ActivationsFollowTheLineThroughTwoMeasurements) {
  const ActivationFit fit{2, 4, 300, 500};
  EXPECT_EQ(fit.at(2), 300u);
  EXPECT_EQ(fit.at(8), 900u);
  EXPECT_EQ(fit.at(1), 200u);
  EXPECT_EQ((ActivationFit{2, 4, 500, 100}).at(16), 0u); // never below 0
}

TEST(MemoryPlan, CandidatesGoFromTheAskedToTheCostliestAndMarkWhatFits) {
  PlanConfig asked;
  asked.ranks = 2;
  asked.micro_batch = 4;
  const ActivationFit fit{2, 4, 1000, 2000};
  const auto c = plan_candidates(adamw_state(), asked, fit, 12500);
  EXPECT_EQ(
      flags_of(c),
      (std::vector<std::string>{
          "--shard 0 --micro-batch 4",
          "--shard 1 --micro-batch 4",
          "--shard 2 --micro-batch 4",
          "--shard 2 --micro-batch 2",
          "--shard 2 --micro-batch 1",
          "--shard 2 --offload optimizer --micro-batch 4",
          "--shard 2 --offload optimizer --micro-batch 2",
          "--shard 2 --offload optimizer --micro-batch 1"}));
  // Stage 2 at micro-batch 2 holds 15000 (weights 4000, gradients 2000 +
  // the buffers 4000, AdamW 4000, activations 1000); the first under 12500
  // is the optimizer offloaded at micro-batch 4 (12000).
  std::vector<bool> fits;
  for (const auto& p : c) {
    fits.push_back(p.fits);
  }
  EXPECT_EQ(
      fits,
      (std::vector<bool>{false, false, false, false, false, true, true, true}));
  EXPECT_EQ(c[3].memory.device(), 4000u + 6000u + 4000u + 1000u);
  EXPECT_EQ(c[5].memory.device(), 4000u + 6000u + 2000u);
  // A model with units: stage 3 comes after stage 2.
  const auto with_units =
      plan_candidates(adamw_state(), asked, fit, 12500, UnitSizes{3000, 1500});
  ASSERT_GT(with_units.size(), 3u);
  EXPECT_EQ(with_units[3].config.flags(), "--shard 3 --micro-batch 4");
}

// With the activations measured under activation checkpointing too, it
// comes after halving the micro-batch and before the offload, each with
// its own activations.
TEST(MemoryPlan, ActivationCheckpointingComesBeforeTheOffload) {
  PlanConfig asked;
  asked.ranks = 2;
  asked.shard = 2;
  asked.micro_batch = 2;
  const ActivationFit fit{1, 2, 1000, 2000};
  const ActivationFit checkpointed{1, 2, 200, 400};
  const auto c = plan_candidates(
      adamw_state(), asked, fit, 14500, UnitSizes{}, &checkpointed);
  EXPECT_EQ(
      flags_of(c),
      (std::vector<std::string>{
          "--shard 2 --micro-batch 2",
          "--shard 2 --micro-batch 1",
          "--shard 2 --activation-checkpointing stages --micro-batch 2",
          "--shard 2 --activation-checkpointing stages --micro-batch 1",
          "--shard 2 --offload optimizer --micro-batch 2",
          "--shard 2 --offload optimizer --micro-batch 1",
          "--shard 2 --offload optimizer --activation-checkpointing stages --micro-batch 2",
          "--shard 2 --offload optimizer --activation-checkpointing stages --micro-batch 1"}));
  EXPECT_EQ(c[0].memory.activations, 2000u);
  EXPECT_EQ(c[2].memory.activations, 400u);
  // 4000 + 6000 + 4000 = 14000 of model state over 2 ranks: with 1000 of
  // activations at micro-batch 1 over the budget of 14500, checkpointed at
  // micro-batch 2 (400) under it.
  EXPECT_FALSE(c[1].fits);
  const auto first = std::find_if(
      c.begin(), c.end(), [](const PlanCandidate& p) { return p.fits; });
  ASSERT_NE(first, c.end());
  EXPECT_EQ(
      first->config.flags(),
      "--shard 2 --activation-checkpointing stages --micro-batch 2");
  // Asked with checkpointing: every candidate keeps it, nothing measured
  // twice.
  asked.checkpointing = true;
  for (const auto& p : plan_candidates(adamw_state(), asked, fit, 12000)) {
    EXPECT_TRUE(p.config.checkpointing) << p.config.flags();
  }
}

} // namespace hotloop::train
