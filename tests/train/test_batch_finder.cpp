// The batch-size finder against the fault-injection hook (the real
// c10::OutOfMemoryError above N samples): it finds exactly N, powers of two
// first and then a binary search, and recommends a size with a margin.
#include <gtest/gtest.h>

#include <algorithm>

#include <torch/utils.h>

#include "hotloop/data/data_spec.h"
#include "hotloop/data/tokens/token_data.h"
#include "hotloop/errors.h"
#include "hotloop/train/batch_finder.h"
#include "support/scoped_env.h"

namespace hotloop::train {
namespace {

BatchFinderOptions finder_options() {
  BatchFinderOptions f;
  TrainerOptions& o = f.trainer;
  o.model.name = "mlp";
  o.model.image.in_channels = 1;
  o.model.image.size = 8;
  o.model.image.num_classes = 10;
  o.device = "cpu";
  o.threads = 1;
  o.loader.workers = 1;
  o.loader.augment = data::Augment::None;
  o.loader.resident = data::Resident::Off;
  f.trial_steps = 3;
  return f;
}

BatchFinderResult find(const BatchFinderOptions& f, const std::string& spec) {
  const std::shared_ptr<const data::Dataset> data =
      data::open_dataset(data::parse_data_spec(spec), data::Split::Train, 1);
  const model::ModelOptions m = f.trainer.model;
  return find_batch_size(
      [m] {
        torch::manual_seed(0);
        return model::make_model(m);
      },
      data,
      f);
}

const BatchTrial* trial(const BatchFinderResult& r, std::int64_t size) {
  for (const auto& t : r.trials) {
    if (t.size == size) {
      return &t;
    }
  }
  return nullptr;
}

BatchTrial made(std::int64_t size, double ips, std::uint64_t reserved_gib) {
  BatchTrial t;
  t.size = size;
  t.ok = true;
  t.images_per_s = ips;
  t.peak_reserved_bytes = reserved_gib << 30;
  return t;
}

} // namespace

class BatchFinderLimit : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(BatchFinderLimit, FindsExactlyTheLargestSizeThatFits) {
  const std::int64_t n = GetParam();
  test::ScopedEnv inject("HOTLOOP_INJECT_OOM_ABOVE", std::to_string(n));
  const BatchFinderResult r = find(finder_options(), "synthetic:512x1x8x8");
  EXPECT_EQ(r.max_batch, n);
  EXPECT_FALSE(r.reached_ceiling);
  ASSERT_NE(trial(r, n), nullptr);
  EXPECT_TRUE(trial(r, n)->ok);
  EXPECT_GT(trial(r, n)->images_per_s, 0);
  ASSERT_NE(trial(r, n + 1), nullptr); // the search closed the gap
  EXPECT_FALSE(trial(r, n + 1)->ok);
  // Powers of two first, then no size twice.
  EXPECT_EQ(r.trials.front().size, 1);
  for (std::size_t i = 0; i < r.trials.size(); ++i) {
    for (std::size_t j = i + 1; j < r.trials.size(); ++j) {
      EXPECT_NE(r.trials[i].size, r.trials[j].size);
    }
  }
  // The CPU does not measure memory: the margin applies to the size.
  EXPECT_GE(r.recommended, 1);
  EXPECT_LE(r.recommended, std::max<std::int64_t>(1, n * 9 / 10));
  EXPECT_FALSE(r.reason.empty());
  const auto j = r.to_json();
  EXPECT_EQ(j["max_batch"], n);
  EXPECT_EQ(j["trials"].size(), r.trials.size());
}

INSTANTIATE_TEST_SUITE_P(
    InjectedLimits,
    BatchFinderLimit,
    ::testing::Values(1, 6, 20, 37, 64, 100));

TEST(BatchFinder, WithoutAnOutOfMemoryStopsAtTheCeiling) {
  test::ScopedEnv inject("HOTLOOP_INJECT_OOM_ABOVE", std::nullopt);
  BatchFinderOptions f = finder_options();
  f.max_batch = 24;
  const BatchFinderResult r = find(f, "synthetic:512x1x8x8");
  EXPECT_EQ(r.max_batch, 24);
  EXPECT_TRUE(r.reached_ceiling);
  EXPECT_EQ(r.trials.back().size, 24); // 1, 2, 4, 8, 16, then the ceiling
  EXPECT_EQ(r.trials.size(), 6u);
}

TEST(BatchFinder, TheDataSetSizeIsACeilingToo) {
  test::ScopedEnv inject("HOTLOOP_INJECT_OOM_ABOVE", std::nullopt);
  const BatchFinderResult r = find(finder_options(), "synthetic:40x1x8x8");
  EXPECT_EQ(r.max_batch, 40);
  EXPECT_TRUE(r.reached_ceiling);
}

// Token data's items are tokens: its samples are the windows at the model's
// context, and the search stops there instead of asking for a batch larger
// than the data (an error).
TEST(BatchFinder, TokenDataCapsTheSearchAtItsWindows) {
  test::ScopedEnv inject("HOTLOOP_INJECT_OOM_ABOVE", std::nullopt);
  BatchFinderOptions f = finder_options();
  f.trainer.model.name = "gpt-nano";
  f.trainer.model.lm.context = 16;
  f.trainer.model.lm.vocab = 256;
  f.trainer.model.lm.layers = 1;
  const std::shared_ptr<const data::Dataset> data =
      data::TokenDataset::from_text(
          {{"t", std::string(16 * 30 + 1, 'a')}}, "30 windows of 17");
  const model::ModelOptions m = f.trainer.model;
  const BatchFinderResult r = find_batch_size(
      [m] {
        torch::manual_seed(0);
        return model::make_model(m);
      },
      data,
      f);
  EXPECT_EQ(r.max_batch, 30);
  EXPECT_TRUE(r.reached_ceiling);
  EXPECT_EQ(r.trials.back().size, 30); // 1, 2, 4, 8, 16, then the windows
}

TEST(BatchFinder, WhenNothingFitsTheResultSaysSo) {
  test::ScopedEnv inject("HOTLOOP_INJECT_OOM_ABOVE", "0");
  const BatchFinderResult r = find(finder_options(), "synthetic:64x1x8x8");
  EXPECT_EQ(r.max_batch, 0);
  EXPECT_EQ(r.recommended, 0);
  EXPECT_EQ(r.trials.size(), 1u);
  EXPECT_NE(r.reason.find("not even one sample"), std::string::npos);
}

TEST(BatchFinder, RejectsOptionsThatCannotMeasure) {
  BatchFinderOptions f = finder_options();
  f.trial_steps = 2;
  EXPECT_THROW(find(f, "synthetic:64x1x8x8"), UsageError);
  f = finder_options();
  f.margin = 1;
  EXPECT_THROW(find(f, "synthetic:64x1x8x8"), UsageError);
}

TEST(BatchFinder, RecommendsTheFastestSizeWithinTheMemoryMargin) {
  BatchFinderOptions f;
  BatchFinderResult r;
  r.memory_budget_bytes = 9ull << 30;
  r.max_batch = 160;
  r.trials = {
      made(16, 1000, 1),
      made(32, 1020, 2), // not 3% faster than 16
      made(64, 1500, 4), // faster: taken
      made(128, 1510, 8), // not faster than 64
      made(160, 1600, 10)}; // faster, but past the 9 GiB budget
  recommend_batch_size(r, f);
  EXPECT_EQ(r.recommended, 64);
  EXPECT_NE(r.reason.find("no larger size"), std::string::npos) << r.reason;

  r.memory_budget_bytes = 3ull << 30; // only 16 and 32 keep the margin
  recommend_batch_size(r, f);
  EXPECT_EQ(r.recommended, 16);

  r.memory_budget_bytes = 100ull << 20; // nothing keeps it
  r.recommended = 0;
  recommend_batch_size(r, f);
  EXPECT_EQ(r.recommended, 16);
  EXPECT_NE(r.reason.find("no size keeps the margin"), std::string::npos);
}

} // namespace hotloop::train

namespace hotloop::train {
namespace {

// LoRA's saving as the finder reports it: gradients and AdamW's two moments
// for the adapters only, and a bf16 base stored in half the bytes.
TEST(BatchFinder, ModelStateShowsWhatLoraSaves) {
  TrainerOptions o;
  o.model.name = "llama-nano";
  o.model.lm.vocab = 256;
  o.optimizer.kind = OptimizerKind::AdamW;
  const ModelFactory make = model_factory(o);
  const ModelState full = model_state(*make(), o);
  EXPECT_EQ(full.trainable, full.parameters);
  EXPECT_EQ(
      full.gradient_bytes, 4 * static_cast<std::uint64_t>(full.parameters));
  EXPECT_EQ(full.optimizer_bytes, 2 * full.gradient_bytes);
  o.model.lora.rank = 4;
  o.precision = Precision::Bf16;
  const ModelState lora = model_state(*make(), o);
  // 4 layers x (q, k, v, o, gate, up, down): rank x (in + out) each.
  const std::int64_t adapters = 4 * 4 *
      ((128 + 128) + (128 + 64) * 2 + (128 + 128) + (128 + 352) * 2 +
       (352 + 128));
  EXPECT_EQ(lora.trainable, adapters);
  EXPECT_EQ(lora.gradient_bytes, 4 * static_cast<std::uint64_t>(adapters));
  EXPECT_EQ(lora.optimizer_bytes, 8 * static_cast<std::uint64_t>(adapters));
  EXPECT_EQ(lora.full_gradient_bytes, full.gradient_bytes);
  EXPECT_EQ(lora.full_optimizer_bytes, full.optimizer_bytes);
  EXPECT_LT(lora.weight_bytes, full.weight_bytes); // the projections in bf16
  EXPECT_NE(
      lora.describe("AdamW").find("(training every weight:"),
      std::string::npos);
}

} // namespace
} // namespace hotloop::train
