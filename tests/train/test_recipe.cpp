// The recipes: each built-in model's values, the user's own settings kept,
// the learning rate following the batch for SGD, and a user's optimizer
// choice getting that optimizer's values rather than a mix.
#include <gtest/gtest.h>

#include <map>

#include <fmt/format.h>

#include "hotloop/data/data_spec.h"
#include "hotloop/model/family.h"
#include "hotloop/train/recipe.h"
#include "hotloop/train/resolve_run.h"
#include "hotloop/train/run_options.h"
#include "support/temp_dir.h"

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
  const auto cnn = values(recipe_for({"cnn-small", 64}));
  EXPECT_EQ(cnn.at("optimizer"), "adamw");
  EXPECT_EQ(cnn.at("lr"), "0.003");
  EXPECT_EQ(cnn.at("schedule"), "onecycle");
  EXPECT_EQ(cnn.at("augment"), "none");
  EXPECT_EQ(values(recipe_for({"mlp", 64})).at("lr"), "0.001");
  // Batch-independent: AdamW with a warm-up trains at 32 as at 256.
  EXPECT_EQ(values(recipe_for({"cnn-small", 32})), cnn);
}

TEST(Recipe, LanguageModelsFromScratchOrFineTunedFromTheirWeights) {
  const auto nano = values(recipe_for({"llama-nano", 64}));
  EXPECT_EQ(nano.at("lr"), "0.01");
  EXPECT_EQ(nano.at("weight-decay"), "0.1");
  EXPECT_EQ(nano.at("epochs"), "3");
  EXPECT_EQ(values(recipe_for({"qwen2.5-0.5b", 64})).at("lr"), "0.0003");
  // With --init: the fine-tuning recipe, whatever the model's name.
  for (const char* m : {"llama-nano", "hf:/some/folder", "gpt2"}) {
    const auto tuned = values(recipe_for({m, 64, std::nullopt, true}));
    EXPECT_EQ(tuned.at("lr"), "2e-05") << m;
    EXPECT_EQ(tuned.at("weight-decay"), "0") << m;
    EXPECT_FALSE(tuned.contains("epochs")) << m;
  }
  // LoRA's adapters on pretrained weights: ten times the rate.
  const auto lora =
      values(recipe_for({"hf:/some/folder", 64, std::nullopt, true, true}));
  EXPECT_EQ(lora.at("lr"), "2e-04");
  EXPECT_EQ(lora.at("min-lr"), "2e-05");
  // A folder's architecture from scratch: the larger sizes' recipe.
  EXPECT_EQ(values(recipe_for({"hf:/some/folder", 64})).at("lr"), "0.0003");
}

TEST(Recipe, ResNetsTakeSgdWithTheLearningRateScaledByTheBatch) {
  const auto b128 = values(recipe_for({"resnet18-small", 128}));
  EXPECT_EQ(b128.at("optimizer"), "sgd");
  EXPECT_EQ(b128.at("lr"), "0.1");
  EXPECT_EQ(b128.at("nesterov"), "true");
  EXPECT_EQ(b128.at("label-smoothing"), "0.1");
  EXPECT_EQ(values(recipe_for({"resnet50", 32})).at("lr"), "0.025");
  EXPECT_EQ(values(recipe_for({"resnet18", 512})).at("lr"), "0.4");
  EXPECT_FALSE(b128.contains("augment")); // photos keep crop and flip
}

TEST(Recipe, AnOptimizerTheUserChoseGetsItsOwnValuesNotAMix) {
  const auto adamw =
      values(recipe_for({"resnet18-small", 128, OptimizerKind::AdamW}));
  EXPECT_EQ(adamw.at("lr"), "0.001");
  EXPECT_FALSE(adamw.contains("nesterov")); // would be refused with AdamW
  EXPECT_FALSE(adamw.contains("momentum"));
  const auto sgd = values(recipe_for({"cnn-small", 256, OptimizerKind::Sgd}));
  EXPECT_EQ(sgd.at("lr"), "0.2");
  EXPECT_EQ(sgd.at("nesterov"), "true");
  TrainerOptions o;
  o.optimizer.kind = OptimizerKind::AdamW;
  apply_recipe(
      recipe_for({"resnet18-small", 64, OptimizerKind::AdamW}),
      o,
      {"optimizer"});
  EXPECT_NO_THROW(o.validate());
}

TEST(Recipe, MomentumZeroFromTheUserIsPlainSgdWithoutNesterov) {
  TrainerOptions o;
  o.optimizer.kind = OptimizerKind::Sgd;
  o.optimizer.momentum = 0;
  apply_recipe(
      recipe_for({"resnet18-small", 64, OptimizerKind::Sgd}),
      o,
      {"optimizer", "momentum"});
  EXPECT_FALSE(o.optimizer.nesterov);
  EXPECT_NO_THROW(o.validate());
  // Any other momentum keeps the recipe's Nesterov.
  o.optimizer.momentum = 0.5;
  apply_recipe(
      recipe_for({"resnet18-small", 64, OptimizerKind::Sgd}),
      o,
      {"optimizer", "momentum"});
  EXPECT_TRUE(o.optimizer.nesterov);
}

TEST(Recipe, ApplyingSetsOnlyWhatTheUserLeftUnsetAndSaysWhat) {
  TrainerOptions o;
  o.schedule.lr = 0.5; // given by the user
  const std::vector<std::string> set =
      apply_recipe(recipe_for({"cnn-small", 64}), o, {"lr"});
  EXPECT_EQ(o.schedule.lr, 0.5);
  EXPECT_EQ(o.optimizer.kind, OptimizerKind::AdamW);
  EXPECT_EQ(o.schedule.kind, ScheduleKind::OneCycle);
  EXPECT_EQ(o.loader.augment, data::Augment::None);
  EXPECT_EQ(
      set, (std::vector<std::string>{"optimizer", "schedule", "augment"}));
  // A model hotloop does not know has none: nothing changes.
  TrainerOptions mine;
  EXPECT_TRUE(apply_recipe(recipe_for({"my-net", 64}), mine).empty());
  EXPECT_EQ(mine.schedule.lr, TrainerOptions{}.schedule.lr);
}

} // namespace hotloop::train

namespace hotloop::train {

TEST(Recipe, GptsTrainWithNanoGptsAdamWSettings) {
  const auto nano = values(recipe_for({"gpt-nano", 64}));
  EXPECT_EQ(nano.at("optimizer"), "adamw");
  EXPECT_EQ(nano.at("lr"), "0.01");
  EXPECT_EQ(nano.at("min-lr"), "0.001");
  EXPECT_EQ(nano.at("beta2"), "0.95");
  EXPECT_EQ(nano.at("weight-decay"), "0.1");
  EXPECT_EQ(nano.at("clip-grad-norm"), "1");
  EXPECT_EQ(nano.at("epochs"), "3");
  const auto gpt2 = values(recipe_for({"gpt2", 512}));
  EXPECT_EQ(gpt2.at("lr"), "0.0006");
  EXPECT_EQ(gpt2.at("warmup-steps"), "700");
  EXPECT_FALSE(gpt2.contains("epochs"));
  // Applied: the user's own value stays.
  TrainerOptions o;
  o.schedule.lr = 0.5;
  apply_recipe(recipe_for({"gpt-nano", 64}), o, {"lr"});
  EXPECT_EQ(o.schedule.lr, 0.5);
  EXPECT_EQ(o.optimizer.kind, OptimizerKind::AdamW);
  EXPECT_EQ(o.optimizer.beta2, 0.95);
  EXPECT_EQ(o.schedule.warmup_steps, 50);
  EXPECT_EQ(o.epochs, 3);
  EXPECT_EQ(o.clip_grad_norm, 1.0);
  EXPECT_NO_THROW(o.validate());
}

} // namespace hotloop::train

namespace hotloop::train {

// bf16 for every language model on a GPU that has it (compute capability
// 8.0 and up: mixed_precision_for says bf16), whatever the recipe; fp32 on
// the CPU and on a GPU without bf16; image models keep fp32.
TEST(Recipe, LanguageModelsTrainInBf16OnAGpuThatHasIt) {
  auto lm = [](std::optional<Precision> gpu, bool pretrained = false) {
    return values(recipe_for(
        {.model = "llama-nano",
         .pretrained = pretrained,
         .lora = pretrained,
         .gpu_precision = gpu}));
  };
  EXPECT_EQ(lm(Precision::Bf16).at("precision"), "bf16");
  EXPECT_EQ(lm(Precision::Bf16, true).at("precision"), "bf16"); // LoRA
  EXPECT_FALSE(lm(Precision::Fp16).contains("precision")); // V100, T4
  EXPECT_FALSE(lm(std::nullopt).contains("precision")); // the CPU
  EXPECT_EQ(
      values(recipe_for({.model = "gpt2", .gpu_precision = Precision::Bf16}))
          .at("precision"),
      "bf16");
  EXPECT_FALSE(
      values(
          recipe_for({.model = "cnn-small", .gpu_precision = Precision::Bf16}))
          .contains("precision"));
  // And applied, it is the run's precision.
  TrainerOptions o;
  apply_recipe(
      recipe_for({.model = "llama-nano", .gpu_precision = Precision::Bf16}), o);
  EXPECT_EQ(o.precision, Precision::Bf16);
}

// resolve_run asks the device the run's --device means (the seam stands in
// a bf16 GPU's answer): the run's precision is then bf16 with "recipe" as
// its source, unless the user chose one; on the CPU it stays fp32.
TEST(Recipe, ResolvingALanguageModelRunOnABf16GpuPicksBf16FromTheRecipe) {
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text += "the cat sat on the mat.\n";
  }
  dir.write("corpus/a.txt", text);
  auto resolve =
      [&](std::optional<Precision> gpu,
          const std::vector<std::pair<std::string, std::string>>& flags) {
        RunOptions run;
        set_flag(run, "model", "llama-nano");
        set_flag(run, "data", "text:" + (dir.path() / "corpus").string());
        set_flag(run, "batch", "8");
        set_flag(run, "out", (dir.path() / "run").string());
        for (const auto& [k, v] : flags) {
          set_flag(run, k, v);
        }
        ResolveContext context;
        context.open_train = [](const std::string& spec, const std::string&) {
          return std::shared_ptr<const data::Dataset>(data::open_dataset(
              data::parse_data_spec(spec), data::Split::Train));
        };
        std::vector<std::string> asked;
        context.gpu_precision = [gpu, &asked](const std::string& device) {
          asked.push_back(device);
          return gpu;
        };
        resolve_run(run, context);
        EXPECT_EQ(asked, std::vector<std::string>{"auto"});
        return run;
      };
  const RunOptions gpu = resolve(Precision::Bf16, {});
  EXPECT_EQ(gpu.trainer.precision, Precision::Bf16);
  EXPECT_EQ(gpu.source("precision"), kFromRecipe);
  const RunOptions cpu = resolve(std::nullopt, {});
  EXPECT_EQ(cpu.trainer.precision, Precision::Fp32);
  EXPECT_EQ(cpu.source("precision"), kFromDefault);
  const RunOptions chosen = resolve(Precision::Bf16, {{"precision", "fp32"}});
  EXPECT_EQ(chosen.trainer.precision, Precision::Fp32);
  EXPECT_EQ(chosen.source("precision"), kFromFlag);
}

// Each named size trains with its family entry's rate and length, and
// train --help's recipes name every size.
TEST(Recipe, EveryNamedSizeTakesItsFamilyEntrysRecipe) {
  const std::string help = recipes_help(128);
  for (const model::ModelFamilyEntry& f : model::model_families()) {
    for (const model::NamedModel& size : f.sizes) {
      const auto v = values(recipe_for({size.name, 128}));
      EXPECT_EQ(v.at("optimizer"), size.recipe.sgd ? "sgd" : "adamw")
          << size.name;
      if (!size.recipe.sgd) {
        EXPECT_EQ(v.at("lr"), fmt::format("{:g}", size.recipe.lr)) << size.name;
      }
      EXPECT_EQ(v.contains("epochs"), size.recipe.small) << size.name;
      EXPECT_NE(help.find(size.name), std::string::npos) << size.name;
    }
  }
  EXPECT_NE(help.find("--lr 2e-05"), std::string::npos); // --init's
}

} // namespace hotloop::train
