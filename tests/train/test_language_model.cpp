// A GPT through the Trainer: it learns byte-level text, reports tokens/s,
// model FLOP/s and bits per byte, resumes bit-exactly mid-epoch, and refuses
// data that does not fit it.

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <string>

#include "hotloop/data/data_spec.h"
#include "hotloop/errors.h"
#include "hotloop/model/gpt.h"
#include "hotloop/model/llama.h"
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
  o.model.layers = 1;
  o.model.heads = 2;
  o.model.width = 32;
  o.model.context = 16;
  o.model.vocab = 256;
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
  o.model.vocab = 100;
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

} // namespace
} // namespace hotloop::train
