// The recipes: each built-in model's values, the user's own settings kept,
// the learning rate following the batch for SGD, and a user's optimizer
// choice getting that optimizer's values rather than a mix.
#include <gtest/gtest.h>

#include <map>

#include "hotloop/train/recipe.h"

namespace hotloop::train {
namespace {

std::map<std::string, std::string> values(const Recipe& r) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : r.values) {
    m[k] = v;
  }
  return m;
}

} // namespace

TEST(Recipe, SmallModelsTrainWithAdamWOneCycleAndNoAugmentation) {
  const auto cnn = values(recipe_for("cnn-small", 64));
  EXPECT_EQ(cnn.at("optimizer"), "adamw");
  EXPECT_EQ(cnn.at("lr"), "3e-3");
  EXPECT_EQ(cnn.at("schedule"), "onecycle");
  EXPECT_EQ(cnn.at("augment"), "none");
  EXPECT_EQ(values(recipe_for("mlp", 64)).at("lr"), "1e-3");
  // Batch-independent: AdamW with a warm-up trains at 32 as at 256.
  EXPECT_EQ(values(recipe_for("cnn-small", 32)), cnn);
}

TEST(Recipe, LanguageModelsFromScratchOrFineTunedFromTheirWeights) {
  const auto nano = values(recipe_for("llama-nano", 64));
  EXPECT_EQ(nano.at("lr"), "0.01");
  EXPECT_EQ(nano.at("weight-decay"), "0.1");
  EXPECT_EQ(nano.at("epochs"), "3");
  EXPECT_EQ(values(recipe_for("qwen2.5-0.5b", 64)).at("lr"), "0.0003");
  // With --init: the fine-tuning recipe, whatever the model's name.
  for (const char* m : {"llama-nano", "hf:/some/folder", "gpt2"}) {
    const auto tuned = values(recipe_for(m, 64, std::nullopt, true));
    EXPECT_EQ(tuned.at("lr"), "2e-05") << m;
    EXPECT_EQ(tuned.at("weight-decay"), "0") << m;
    EXPECT_FALSE(tuned.contains("epochs")) << m;
  }
  // LoRA's adapters on pretrained weights: ten times the rate.
  const auto lora =
      values(recipe_for("hf:/some/folder", 64, std::nullopt, true, true));
  EXPECT_EQ(lora.at("lr"), "2e-04");
  EXPECT_EQ(lora.at("min-lr"), "2e-05");
  // A folder's architecture from scratch: the larger sizes' recipe.
  EXPECT_EQ(values(recipe_for("hf:/some/folder", 64)).at("lr"), "0.0003");
}

TEST(Recipe, ResNetsTakeSgdWithTheLearningRateScaledByTheBatch) {
  const auto b128 = values(recipe_for("resnet18-small", 128));
  EXPECT_EQ(b128.at("optimizer"), "sgd");
  EXPECT_EQ(b128.at("lr"), "0.1");
  EXPECT_EQ(b128.at("nesterov"), "true");
  EXPECT_EQ(b128.at("label-smoothing"), "0.1");
  EXPECT_EQ(values(recipe_for("resnet50", 32)).at("lr"), "0.025");
  EXPECT_EQ(values(recipe_for("resnet18", 512)).at("lr"), "0.4");
  EXPECT_FALSE(b128.contains("augment")); // photos keep crop and flip
}

TEST(Recipe, AnOptimizerTheUserChoseGetsItsOwnValuesNotAMix) {
  const auto adamw =
      values(recipe_for("resnet18-small", 128, OptimizerKind::AdamW));
  EXPECT_EQ(adamw.at("lr"), "1e-3");
  EXPECT_FALSE(adamw.contains("nesterov")); // would be refused with AdamW
  EXPECT_FALSE(adamw.contains("momentum"));
  const auto sgd = values(recipe_for("cnn-small", 256, OptimizerKind::Sgd));
  EXPECT_EQ(sgd.at("lr"), "0.2");
  EXPECT_EQ(sgd.at("nesterov"), "true");
  TrainerOptions o;
  o.optimizer.kind = OptimizerKind::AdamW;
  apply_recipe(
      recipe_for("resnet18-small", 64, OptimizerKind::AdamW), o, {"optimizer"});
  EXPECT_NO_THROW(o.validate());
}

TEST(Recipe, MomentumZeroFromTheUserIsPlainSgdWithoutNesterov) {
  TrainerOptions o;
  o.optimizer.kind = OptimizerKind::Sgd;
  o.optimizer.momentum = 0;
  apply_recipe(
      recipe_for("resnet18-small", 64, OptimizerKind::Sgd),
      o,
      {"optimizer", "momentum"});
  EXPECT_FALSE(o.optimizer.nesterov);
  EXPECT_NO_THROW(o.validate());
  // Any other momentum keeps the recipe's Nesterov.
  o.optimizer.momentum = 0.5;
  apply_recipe(
      recipe_for("resnet18-small", 64, OptimizerKind::Sgd),
      o,
      {"optimizer", "momentum"});
  EXPECT_TRUE(o.optimizer.nesterov);
}

TEST(Recipe, ApplyingSetsOnlyWhatTheUserLeftUnsetAndSaysWhat) {
  TrainerOptions o;
  o.schedule.lr = 0.5; // given by the user
  const std::vector<std::string> set =
      apply_recipe(recipe_for("cnn-small", 64), o, {"lr"});
  EXPECT_EQ(o.schedule.lr, 0.5);
  EXPECT_EQ(o.optimizer.kind, OptimizerKind::AdamW);
  EXPECT_EQ(o.schedule.kind, ScheduleKind::OneCycle);
  EXPECT_EQ(o.loader.augment, data::Augment::None);
  EXPECT_EQ(
      set, (std::vector<std::string>{"optimizer", "schedule", "augment"}));
  // A model hotloop does not know has none: nothing changes.
  TrainerOptions mine;
  EXPECT_TRUE(apply_recipe(recipe_for("my-net", 64), mine).empty());
  EXPECT_EQ(mine.schedule.lr, TrainerOptions{}.schedule.lr);
}

} // namespace hotloop::train

namespace hotloop::train {

TEST(Recipe, GptsTrainWithNanoGptsAdamWSettings) {
  const auto nano = values(recipe_for("gpt-nano", 64));
  EXPECT_EQ(nano.at("optimizer"), "adamw");
  EXPECT_EQ(nano.at("lr"), "0.01");
  EXPECT_EQ(nano.at("min-lr"), "0.001");
  EXPECT_EQ(nano.at("beta2"), "0.95");
  EXPECT_EQ(nano.at("weight-decay"), "0.1");
  EXPECT_EQ(nano.at("clip-grad-norm"), "1");
  EXPECT_EQ(nano.at("epochs"), "3");
  const auto gpt2 = values(recipe_for("gpt2", 512));
  EXPECT_EQ(gpt2.at("lr"), "0.0006");
  EXPECT_EQ(gpt2.at("warmup-steps"), "700");
  EXPECT_FALSE(gpt2.contains("epochs"));
  // Applied: the user's own value stays.
  TrainerOptions o;
  o.schedule.lr = 0.5;
  apply_recipe(recipe_for("gpt-nano", 64), o, {"lr"});
  EXPECT_EQ(o.schedule.lr, 0.5);
  EXPECT_EQ(o.optimizer.kind, OptimizerKind::AdamW);
  EXPECT_EQ(o.optimizer.beta2, 0.95);
  EXPECT_EQ(o.schedule.warmup_steps, 50);
  EXPECT_EQ(o.epochs, 3);
  EXPECT_EQ(o.clip_grad_norm, 1.0);
  EXPECT_NO_THROW(o.validate());
}

} // namespace hotloop::train
