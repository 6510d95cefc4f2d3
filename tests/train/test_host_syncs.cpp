// How often a training step waits for the device on the host, counted
// through a seam (support/host_syncs.h: the ops that read a device value on
// the host, on the CPU; every synchronizing CUDA call, on a GPU): none for a
// graphed step or an eager one that reads its losses every N steps; one per
// step with loss scaling (the skip is decided on the host, as
// torch.amp.GradScaler does); the loss (and gradient norm) per step with
// --readback-every 1; and one per evaluation, not one per batch. The
// numbers are docs/speed.md's.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/Context.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/cuda/cuda_info.h"
#include "hotloop/train/callback.h"
#include "hotloop/train/trainer.h"
#include "support/host_syncs.h"
#include "support/scoped_env.h"
#include "support/train_fixtures.h"

namespace hotloop::train {
namespace {

// Counts from each step's begin to the next one's (the step, its
// readback, and what the loop does between steps), and over each
// evaluation.
class SyncLog : public Callback {
 public:
  std::string name() const override {
    return "sync-log";
  }
  void on_step_begin(const RunState& s) override {
    close();
    counter_.emplace(s.device);
  }
  void on_phase(const RunState& s, Phase p) override {
    if (p == Phase::Evaluation) {
      close();
      eval_counter_.emplace(s.device);
    }
  }
  void on_evaluation(const RunState&, const EvalResult&) override {
    if (eval_counter_) {
      per_evaluation.push_back(eval_counter_->count());
      eval_counter_.reset();
    }
  }
  // The syncs of each step (all but the last, whose window runs into the
  // end of the run), and what they were.
  std::vector<std::int64_t> per_step;
  std::vector<std::string> what;
  std::vector<std::int64_t> per_evaluation;

 private:
  void close() {
    if (counter_) {
      per_step.push_back(counter_->count());
      for (auto& w : counter_->what()) {
        what.push_back(fmt::format("step {}: {}", per_step.size(), w));
      }
      counter_.reset();
    }
  }
  std::optional<test::HostSyncCounter> counter_;
  std::optional<test::HostSyncCounter> eval_counter_;
};

struct Counted {
  std::vector<std::int64_t> per_step;
  std::vector<std::string> what;
  std::vector<std::int64_t> per_evaluation;
  TrainSummary summary;
};

// LibTorch's sync-debug mode at "error" for the whole process over steps
// 4..11 (cuda::SyncErrors): a sync on any thread throws, so a step that
// synchronizes where the per-thread count cannot see it fails the run.
class ForbidSyncs : public Callback {
 public:
  std::string name() const override {
    return "forbid-syncs";
  }
  void on_step_begin(const RunState& s) override {
    if (s.step == 3) {
      errors_.emplace();
    } else if (s.step == 11) {
      errors_.reset();
    }
  }
  void on_phase(const RunState&, Phase p) override {
    if (p == Phase::Evaluation) {
      errors_.reset();
    }
  }

 private:
  std::optional<cuda::SyncErrors> errors_;
};

Counted count(
    const TrainerOptions& o,
    const std::shared_ptr<const data::Dataset>& val = nullptr,
    bool forbid = false) {
  TrainerContext ctx;
  const auto log = std::make_shared<SyncLog>();
  if (forbid) {
    ctx.callbacks.push_back(std::make_shared<ForbidSyncs>());
  } else {
    ctx.callbacks.push_back(log);
  }
  const TrainSummary s =
      Trainer(
          test::make(o), test::synthetic("synthetic:512x1x8x8"), val, o, ctx)
          .fit();
  return {log->per_step, log->what, log->per_evaluation, s};
}

TrainerOptions options(std::int64_t readback_every) {
  TrainerOptions o = test::small_options("");
  o.steps = 12;
  o.readback_every = readback_every;
  o.keep_checkpoints = 0;
  o.save_weights = false;
  return o;
}

// Steps 4.. (after the warm-up: the first step checks the devices once).
std::vector<std::int64_t> steady(const std::vector<std::int64_t>& v) {
  return std::vector<std::int64_t>(v.begin() + 3, v.end());
}

TEST(HostSyncs, AGraphedStepReadsNothingOnTheHost) {
  const test::ScopedEnv fake("HOTLOOP_FAKE_CUDA_GRAPH", "1");
  const Counted c = count(options(16)); // the GPU's default readback
  EXPECT_EQ(c.summary.graph_replays, 9);
  ASSERT_EQ(c.per_step.size(), 11u);
  EXPECT_EQ(steady(c.per_step), std::vector<std::int64_t>(8, 0))
      << fmt::format("{}", fmt::join(c.what, "; "));
}

TEST(HostSyncs, AnEagerStepReadingLossesEveryNStepsReadsNothing) {
  const Counted c = count(options(16));
  EXPECT_EQ(steady(c.per_step), std::vector<std::int64_t>(8, 0))
      << fmt::format("{}", fmt::join(c.what, "; "));
}

TEST(HostSyncs, ReadbackEveryStepReadsTheLossAndTheGradientNorm) {
  TrainerOptions o = options(1);
  o.clip_grad_norm = 1;
  const Counted c = count(o);
  EXPECT_EQ(steady(c.per_step), std::vector<std::int64_t>(8, 2))
      << fmt::format("{}", fmt::join(c.what, "; "));
}

TEST(HostSyncs, LossScalingReadsOnlyWhetherTheGradientsOverflowed) {
  // Before: also the scale, twice (the collapse check, the step's record).
  TrainerOptions o = options(16);
  o.loss_scaling = LossScaling::On;
  const Counted c = count(o);
  EXPECT_EQ(steady(c.per_step), std::vector<std::int64_t>(8, 1))
      << fmt::format("{}", fmt::join(c.what, "; "));
}

TEST(HostSyncs, AnEvaluationReadsItsLossOnceNotOncePerBatch) {
  TrainerOptions o = options(16);
  o.steps = 4;
  o.eval_every = 4;
  // 512 validation images in batches of 256 (the evaluator's smallest):
  // two batches, one read.
  const Counted c = count(o, test::synthetic("synthetic:512x1x8x8"));
  ASSERT_EQ(c.per_evaluation.size(), 1u);
  EXPECT_EQ(c.per_evaluation[0], 1);
}

// The same on a GPU (scripts/gpu-check), where each count is a real
// synchronization (LibTorch's sync-debug mode): bf16, batches through the
// loader's pinned copies, the GPU's default readback. Then again with the
// mode at "error" for the whole process: a sync on any thread, not only
// those whose warnings reach this thread's handler, fails the run.
TEST(HostSyncs, OnAGpuAGraphedAndAnEagerStepDoNotSynchronize) {
  if (!at::hasCUDA()) {
    GTEST_SKIP() << "no CUDA device here";
  }
  for (const CudaGraphs g : {CudaGraphs::On, CudaGraphs::Off}) {
    TrainerOptions o = options(0); // 16 on CUDA
    o.device = "cuda";
    o.precision = Precision::Bf16;
    o.cuda_graphs = g;
    const Counted c = count(o);
    EXPECT_EQ(steady(c.per_step), std::vector<std::int64_t>(8, 0))
        << to_string(g) << ": " << fmt::format("{}", fmt::join(c.what, "; "));
    EXPECT_NO_THROW(count(o, nullptr, /*forbid=*/true))
        << to_string(g) << ": a steady step synchronized on some thread";
  }
}

} // namespace
} // namespace hotloop::train
