// A GPT through the Trainer: it learns byte-level text, reports tokens/s,
// model FLOP/s and bits per byte, resumes bit-exactly mid-epoch, and refuses
// data that does not fit it.

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <string>

#include "hotloop/data/data_spec.h"
#include "hotloop/errors.h"
#include "hotloop/model/gpt/gpt.h"
#include "hotloop/model/llama/llama.h"
#include "hotloop/train/evaluation.h"
#include "hotloop/train/trainer.h"
#include "support/temp_dir.h"
#include "support/train_fixtures.h"

namespace hotloop::train {
namespace {

struct Corpus {
  test::TempDir dir;
  std::shared_ptr<const data::Dataset> train;
  std::shared_ptr<const data::Dataset> val;
  Corpus() {
    // A few sentences, over and over: a pattern a tiny model learns fast.
    std::string text;
    for (int i = 0; i < 400; ++i) {
      text += i % 3 == 0 ? "the cat sat on the mat.\n"
                         : (i % 3 == 1 ? "a dog ran to the log.\n"
                                       : "we fit a model to text.\n");
    }
    dir.write("corpus/a.txt", text);
    const auto spec =
        data::parse_data_spec("text:" + (dir.path() / "corpus").string());
    train = data::open_dataset(spec, data::Split::Train);
    val = data::open_dataset(spec, data::Split::Val);
  }
};

TrainerOptions gpt_options(const std::string& out) {
  TrainerOptions o = test::small_options(out);
  o.model = model::ModelOptions();
  o.model.name = "gpt-nano";
  o.model.lm.layers = 1;
  o.model.lm.heads = 2;
  o.model.lm.width = 32;
  o.model.lm.context = 16;
  o.model.lm.vocab = 256;
  o.batch = 16;
  o.optimizer.kind = OptimizerKind::AdamW;
  o.optimizer.weight_decay = 0.1;
  o.schedule.lr = 3e-3;
  o.clip_grad_norm = 1;
  return o;
}

TEST(LanguageModel, LearnsTextAndReportsTokensFlopsAndBitsPerByte) {
  Corpus c;
  TrainerOptions o = gpt_options((c.dir.path() / "run").string());
  o.steps = 60;
  o.eval_every = 60;
  const TrainSummary s = Trainer(test::make(o), c.train, c.val, o).fit();
  ASSERT_TRUE(s.eval);
  // A uniform guess over 256 bytes is 5.55 nats; 60 steps of this repetitive
  // text get far below it.
  EXPECT_LT(s.eval->loss, 2.0);
  EXPECT_LT(s.train_loss, 2.5);
  ASSERT_TRUE(s.eval->bits_per_byte);
  EXPECT_DOUBLE_EQ(*s.eval->bits_per_byte, s.eval->loss / std::log(2.0));
  ASSERT_TRUE(s.eval->perplexity);
  EXPECT_DOUBLE_EQ(*s.eval->perplexity, std::exp(s.eval->loss));
  EXPECT_TRUE(s.eval->confusion.empty()); // no 256 x 256 matrix
  EXPECT_DOUBLE_EQ(s.tokens_per_s, s.images_per_s * 16);
  const model::GptConfig g = model::gpt_config(o.model);
  EXPECT_DOUBLE_EQ(
      s.model_flops_per_s, s.images_per_s * g.training_flops_per_token() * 16);
  EXPECT_FALSE(s.mfu); // the CPU has no peak in the table
}

TEST(LanguageModel, ALlamaLearnsTextAndReportsItsFlops) {
  Corpus c;
  TrainerOptions o = gpt_options((c.dir.path() / "run").string());
  o.model.name = "llama-nano"; // 2 heads sharing the size's 2 K/V heads
  o.steps = 60;
  o.eval_every = 60;
  const TrainSummary s = Trainer(test::make(o), c.train, c.val, o).fit();
  ASSERT_TRUE(s.eval);
  // The GPT's bar above: far below a uniform guess's 5.55 nats.
  EXPECT_LT(s.eval->loss, 2.0);
  const model::LlamaConfig l = model::llama_config(o.model);
  EXPECT_EQ(l.kv_heads, 2);
  EXPECT_DOUBLE_EQ(
      s.model_flops_per_s, s.images_per_s * l.training_flops_per_token() * 16);
}

TEST(LanguageModel, AStoppedRunResumesToExactlyTheUninterruptedResult) {
  Corpus c;
  TrainerOptions o = gpt_options((c.dir.path() / "full").string());
  o.epochs = 2; // the run crosses an epoch
  o.schedule.kind = ScheduleKind::Cosine;
  const TrainSummary full = Trainer(test::make(o), c.train, c.val, o).fit();
  TrainerOptions split = o;
  split.out_dir = (c.dir.path() / "split").string();
  std::atomic<bool> stop{true};
  const TrainSummary first =
      Trainer(test::make(split), c.train, c.val, split).fit(&stop);
  ASSERT_TRUE(first.stopped_early);
  ASSERT_EQ(first.steps, 1);
  split.resume = "auto";
  const TrainSummary resumed =
      Trainer(test::make(split), c.train, c.val, split).fit();
  ASSERT_TRUE(resumed.eval && full.eval);
  EXPECT_EQ(resumed.steps, full.steps);
  EXPECT_EQ(resumed.eval->loss, full.eval->loss); // bit-exact on the CPU
  // From the checkpoint, not from step 0 (which would end the same way: the
  // run is deterministic): each step's metrics line is there once.
  EXPECT_EQ(resumed.resumed_at, 1);
  EXPECT_EQ(
      test::steps_with_a_loss(split.out_dir), test::steps_one_to(full.steps));
}

TEST(LanguageModel, DataThatDoesNotFitTheModelIsRefusedBeforeTraining) {
  Corpus c;
  TrainerOptions o = gpt_options((c.dir.path() / "run").string());
  o.steps = 1;
  // A GPT on images.
  const auto images = test::synthetic("synthetic:64x1x8x8");
  EXPECT_THROW(Trainer(test::make(o), images, nullptr, o), UsageError);
  // An image model on tokens.
  TrainerOptions mlp = test::small_options(o.out_dir);
  EXPECT_THROW(Trainer(test::make(mlp), c.train, nullptr, mlp), UsageError);
  // Bytes (ids up to 255) into a vocabulary of 100.
  o.model.lm.vocab = 100;
  try {
    Trainer(test::make(o), c.train, nullptr, o);
    FAIL() << "ids outside the vocabulary were accepted";
  } catch (const DataError& e) {
    EXPECT_NE(
        std::string(e.what()).find("outside the model's vocabulary of 100"),
        std::string::npos)
        << e.what();
  }
}

// The evaluation batch from the logits' bytes (train/evaluation.h): never
// below the micro-batch, above it only within the budget, at most 256.
TEST(LanguageModel, TheEvaluationBatchIsSizedFromTheLogitsBytes) {
  // Qwen2.5's vocabulary at context 1024, bf16 (1.6 GB a sequence): the
  // micro-batch, not 256 (400 GB).
  EXPECT_EQ(language_model_eval_batch(16, 1024, 151936, 10), 16);
  EXPECT_EQ(language_model_eval_batch(2, 1024, 151936, 10), 2);
  // gpt2 at 1024 in fp32 (412 MB a sequence): the micro-batch.
  EXPECT_EQ(language_model_eval_batch(8, 1024, 50257, 8), 8);
  // Two sequences fit the 256 MiB budget at 256 tokens (129 MB each).
  EXPECT_EQ(language_model_eval_batch(1, 256, 50257, 10), 2);
  // gpt-nano (256 tokens at 128: 262 kB): 256, the cap.
  EXPECT_EQ(language_model_eval_batch(64, 128, 256, 8), 256);
  EXPECT_EQ(language_model_eval_batch(300, 8, 8, 8), 300); // the micro-batch
  // Through the model: a language model's logits decide, an image model
  // keeps max(micro-batch, 256).
  TrainerOptions o = gpt_options("");
  o.model.lm.context = 1024;
  o.model.lm.vocab = 50257;
  const auto gpt = test::make(o);
  EXPECT_EQ(evaluation_batch(*gpt, 4, Precision::Bf16), 4);
  EXPECT_EQ(
      evaluation_batch(
          *test::make(test::small_options("")), 4, Precision::Bf16),
      256);
}

} // namespace
} // namespace hotloop::train
