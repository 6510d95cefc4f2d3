// The training loop on small synthetic data: accumulation equals one large
// batch, non-finite losses stop with a diagnosis, the run directory holds
// what it should, bf16 and the graph and loss-scaler paths. Resume and
// checkpoints: test_resume.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>

#include <ATen/Context.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/isfinite.h>
#include <torch/utils.h>

#include "hotloop/data/data_spec.h"
#include "hotloop/errors.h"
#include "hotloop/model/weights.h"
#include "hotloop/train/callback.h"
#include "hotloop/train/checkpoint_file.h"
#include "hotloop/train/graph_policy.h"
#include "hotloop/train/trainer.h"
#include "support/cli_process.h"
#include "support/scoped_env.h"
#include "support/temp_dir.h"
#include "support/train_fixtures.h"

namespace hotloop::train {
namespace {

using test::make;
using test::small_options;
using test::synthetic;

// Wraps a model and records the dtype of the logits of each training
// forward: what autocast made of its activations.
class DtypeProbe : public model::Model {
 public:
  explicit DtypeProbe(std::shared_ptr<model::Model> inner)
      : inner_(register_module("inner", std::move(inner))) {}
  at::Tensor forward(const at::Tensor& images) override {
    at::Tensor out = inner_->forward(images);
    if (is_training()) {
      seen.push_back(out.scalar_type());
    }
    return out;
  }
  std::vector<at::ScalarType> seen;

 private:
  std::shared_ptr<model::Model> inner_;
};

// A model with an objective of its own: cross-entropy plus 1, the same
// gradients with every loss 1 higher.
class OffsetLoss : public model::Model {
 public:
  explicit OffsetLoss(std::shared_ptr<model::Model> inner)
      : inner_(register_module("inner", std::move(inner))) {}
  at::Tensor forward(const at::Tensor& images) override {
    return inner_->forward(images);
  }
  at::Tensor loss(
      const at::Tensor& logits,
      const at::Tensor& labels,
      const model::LossOptions& o) const override {
    const at::Tensor ce = model::cross_entropy_loss(logits, labels, o);
    return o.reduction == at::Reduction::Sum ? ce + labels.numel() : ce + 1;
  }

 private:
  std::shared_ptr<model::Model> inner_;
};

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

} // namespace

TEST(Trainer, AccumulatedMicroBatchesGiveTheUpdateOfOneLargeBatch) {
  test::TempDir dir;
  const auto data = synthetic("synthetic:256x1x8x8");
  TrainerOptions whole = small_options((dir.path() / "a").string());
  whole.steps = 3;
  TrainerOptions accum = whole;
  accum.out_dir = (dir.path() / "b").string();
  accum.micro_batch = 8; // 4 micro-batches per step
  auto m1 = make(whole);
  auto m2 = make(accum);
  Trainer(m1, data, nullptr, whole).fit();
  const TrainSummary s = Trainer(m2, data, nullptr, accum).fit();
  EXPECT_EQ(s.accum_steps, 4);
  EXPECT_EQ(s.micro_batch, 8);
  const auto w1 = model::state_dict(*m1);
  const auto w2 = model::state_dict(*m2);
  for (std::size_t i = 0; i < w1.size(); ++i) {
    // Sums of 4 partial means vs one mean in float32: ~1e-7 relative.
    EXPECT_TRUE(at::allclose(w1[i].second, w2[i].second, 1e-5, 1e-6))
        << w1[i].first;
  }
}

// --clip-grad-value V with plain SGD: no weight moves by more than lr x V in
// a step; without it some move further (the bound is the clamp's doing).
TEST(Trainer, ClipGradValueBoundsEachElementOfTheUpdate) {
  test::TempDir dir;
  const auto data = synthetic("synthetic:64x1x8x8");
  TrainerOptions o = small_options("");
  o.steps = 1;
  o.optimizer.momentum = 0;
  const double limit = 1e-4;
  auto largest_move = [&](double clip) {
    TrainerOptions run = o;
    run.clip_grad_value = clip;
    auto m = make(run);
    std::vector<at::Tensor> before;
    for (const auto& [name, t] : model::state_dict(*m)) {
      before.push_back(t.clone());
    }
    Trainer(m, data, nullptr, run, {Callbacks{}}).fit();
    const auto after = model::state_dict(*m);
    double most = 0;
    for (std::size_t i = 0; i < before.size(); ++i) {
      most = std::max(
          most, (after[i].second - before[i]).abs().max().item<double>());
    }
    return most;
  };
  const double bound = o.schedule.lr * limit;
  // The difference of float32 weights near 0.1 is exact to ~1e-8 (their
  // spacing), 0.2% of the bound: 1% tolerance.
  EXPECT_LE(largest_move(limit), bound * 1.01);
  EXPECT_GT(largest_move(0), 10 * bound);
}

TEST(Trainer, ModelFlopsComeFromTheModelOrElseFromCountingItsOperators) {
  test::TempDir dir;
  TrainerOptions o = small_options((dir.path() / "a").string());
  o.steps = 3;
  const auto data = synthetic("synthetic:256x1x8x8");
  const auto mlp = make(o);
  const double analytic = mlp->training_flops_per_sample();
  ASSERT_EQ(analytic, 3 * 2 * (64 * 256 + 256 * 10)); // Mlp's count
  const TrainSummary a = Trainer(mlp, data, nullptr, o).fit();
  EXPECT_NEAR(a.model_flops_per_s, a.images_per_s * analytic, 1e-9 * analytic);
  EXPECT_FALSE(a.mfu); // no peak on the CPU

  // A model without its own count (the probe does not override it): its
  // operators' count of one forward (telemetry/op_flops.h), times 3 -- the
  // same figure.
  o.out_dir = (dir.path() / "b").string();
  auto probe = std::make_shared<DtypeProbe>(make(o));
  ASSERT_EQ(probe->training_flops_per_sample(), 0);
  const TrainSummary b = Trainer(probe, data, nullptr, o).fit();
  EXPECT_NEAR(b.model_flops_per_s, b.images_per_s * analytic, 1e-9 * analytic);
  const auto metrics =
      test::slurp((dir.path() / "b" / "metrics.jsonl").string());
  EXPECT_NE(metrics.find("\"model_flops_per_s\""), std::string::npos);
}

TEST(Trainer, RunDirectoryHoldsConfigMetricsSummaryAndTheLastKCheckpoints) {
  test::TempDir dir;
  TrainerOptions o = small_options((dir.path() / "run").string());
  o.steps = 6;
  o.checkpoint_every = 1;
  o.keep_checkpoints = 2;
  const TrainSummary s = Trainer(
                             make(o),
                             synthetic("synthetic:128x1x8x8"),
                             synthetic("synthetic:40x1x8x8", data::Split::Val),
                             o)
                             .fit();
  const auto run = std::filesystem::path(o.out_dir);
  EXPECT_EQ(read_json(run / "config.json")["options"]["batch"], 32);
  const auto summary = read_json(run / "summary.json");
  for (const char* key :
       {"steps",
        "epochs",
        "train_loss",
        "val_loss",
        "val_accuracy",
        "images_per_s",
        "step_time_ms",
        "data_wait_fraction",
        "peak_memory_bytes",
        "skipped_steps",
        "bad_samples",
        "micro_batch",
        "accum_steps",
        "device",
        "precision",
        "wall_s"}) {
    EXPECT_TRUE(summary.contains(key)) << key;
  }
  EXPECT_EQ(summary["steps"], 6);
  EXPECT_EQ(summary["device"], "cpu");
  EXPECT_EQ(s.eval->samples, 40);
  EXPECT_EQ(s.eval->confusion.size(), 10u);
  const auto checkpoints = list_checkpoints((run / "checkpoints").string());
  ASSERT_EQ(checkpoints.size(), 2u);
  EXPECT_NE(checkpoints[0].find("step-00000006"), std::string::npos);
  EXPECT_EQ(load_checkpoint(checkpoints[0]).meta["step"], 6);
}

TEST(Trainer, ANonFiniteLossStopsWithTheStepAndAFixAfterCheckpointing) {
  test::TempDir dir;
  TrainerOptions o = small_options((dir.path() / "run").string());
  o.steps = 50;
  o.schedule.lr = 1e30; // diverges within a few steps
  try {
    Trainer(make(o), synthetic("synthetic:128x1x8x8"), nullptr, o).fit();
    FAIL() << "a diverging run finished";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the loss is"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("step "), std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("lower the learning rate"), std::string::npos);
  }
  EXPECT_FALSE(list_checkpoints(o.out_dir + "/checkpoints").empty());
}

TEST(Trainer, Bf16AutocastRunsTheForwardInBf16AndTrainsOnTheCpu) {
  test::TempDir dir;
  TrainerOptions o = small_options((dir.path() / "run").string());
  o.model.name = "cnn-small";
  o.precision = Precision::Bf16;
  o.steps = 8;
  o.optimizer.kind = OptimizerKind::AdamW;
  o.schedule.lr = 1e-3;
  const auto probe = std::make_shared<DtypeProbe>(make(o));
  const TrainSummary s =
      Trainer(probe, synthetic("synthetic:256x1x8x8"), nullptr, o).fit();
  EXPECT_EQ(s.precision, "bf16");
  EXPECT_TRUE(std::isfinite(s.train_loss));
  ASSERT_EQ(probe->seen.size(), 8u);
  for (const auto t : probe->seen) {
    EXPECT_EQ(t, at::kBFloat16);
  }
  // The weights stay float32 (autocast casts copies for each op).
  for (const auto& p : probe->parameters()) {
    EXPECT_EQ(p.scalar_type(), at::kFloat);
  }
  // fp32: the same probe sees float32 logits.
  o.precision = Precision::Fp32;
  o.out_dir = (dir.path() / "fp32").string();
  const auto fp32 = std::make_shared<DtypeProbe>(make(o));
  o.steps = 1;
  Trainer(fp32, synthetic("synthetic:256x1x8x8"), nullptr, o).fit();
  ASSERT_EQ(fp32->seen.size(), 1u);
  EXPECT_EQ(fp32->seen[0], at::kFloat);
}

TEST(Trainer, OptionsThatDoNotFitAreUsageErrorsNamingTheKey) {
  TrainerOptions o = small_options("unused");
  o.micro_batch = 5;
  try {
    o.validate();
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "batch: 32 is not divisible by micro-batch 5"),
        std::string::npos)
        << e.what();
  }
  o = small_options("unused");
  o.freeze_backbone = true;
  EXPECT_THROW(o.validate(), UsageError);
  o = small_options("unused");
  o.label_smoothing = 1.5;
  EXPECT_THROW(o.validate(), UsageError);
  o = small_options("unused");
  o.precision = Precision::Fp16;
  o.device = "cpu";
  EXPECT_THROW(
      Trainer(make(o), synthetic("synthetic:64x1x8x8"), nullptr, o),
      UsageError);
}

namespace {

// metrics.jsonl's step lines: step -> the line.
std::map<std::int64_t, nlohmann::json> step_lines(const std::string& run) {
  std::map<std::int64_t, nlohmann::json> out;
  std::ifstream in(run + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("lr")) {
      out[j["step"].get<std::int64_t>()] = j;
    }
  }
  return out;
}

} // namespace

TEST(Trainer, ReadingLossesBackEveryFewStepsWritesTheSameLinesAndWeights) {
  test::TempDir dir;
  const auto data = synthetic("synthetic:256x1x8x8");
  TrainerOptions every = small_options((dir.path() / "every").string());
  every.steps = 11; // not a multiple of 4: the end drains a partial block
  every.clip_grad_norm = 0.5;
  every.readback_every = 1;
  TrainerOptions deferred = every;
  deferred.out_dir = (dir.path() / "deferred").string();
  deferred.readback_every = 4;
  auto m1 = make(every);
  auto m2 = make(deferred);
  const TrainSummary s1 = Trainer(m1, data, nullptr, every).fit();
  const TrainSummary s2 = Trainer(m2, data, nullptr, deferred).fit();
  const auto a = step_lines(every.out_dir);
  const auto b = step_lines(deferred.out_dir);
  ASSERT_EQ(a.size(), 11u);
  ASSERT_EQ(b.size(), 11u);
  for (const auto& [step, line] : a) {
    // The same computation in the same order: identical, not just close.
    EXPECT_EQ(line["loss"].get<double>(), b.at(step)["loss"].get<double>())
        << "step " << step;
    EXPECT_EQ(
        line["grad_norm"].get<double>(), b.at(step)["grad_norm"].get<double>())
        << "step " << step;
  }
  EXPECT_EQ(s1.train_loss, s2.train_loss);
  const auto w1 = model::state_dict(*m1);
  const auto w2 = model::state_dict(*m2);
  for (std::size_t i = 0; i < w1.size(); ++i) {
    EXPECT_TRUE(at::equal(w1[i].second, w2[i].second)) << w1[i].first;
  }
  // On the CPU, the graph decision says why it stays eager.
  EXPECT_NE(
      s1.graph_off_reason.find("the device is the CPU"), std::string::npos)
      << s1.graph_off_reason;
  EXPECT_EQ(s1.graph_replays, 0);
}

TEST(Trainer, ADeferredNonFiniteLossStopsNamingItsStepWithoutCheckpointingIt) {
  test::TempDir dir;
  TrainerOptions o = small_options((dir.path() / "run").string());
  o.steps = 50;
  o.readback_every = 4;
  o.checkpoint_every = 1; // a checkpoint is due after every step
  o.schedule.lr = 1e30;
  try {
    Trainer(make(o), synthetic("synthetic:128x1x8x8"), nullptr, o).fit();
    FAIL() << "a diverging run finished";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the loss is"), std::string::npos) << what;
    EXPECT_NE(what.find("losses are read every 4 steps"), std::string::npos)
        << what;
    EXPECT_NE(e.hint().find("--readback-every 1"), std::string::npos);
    // "step K: the loss is ...": the K - 1 steps before it have their lines.
    const std::int64_t bad = std::stoll(what.substr(what.find("step ") + 5));
    EXPECT_EQ(step_lines(o.out_dir).size(), static_cast<std::size_t>(bad - 1))
        << what;
  }
  // Every checkpoint written holds finite weights: the readback is drained
  // (and the bad loss found) before a checkpoint is written.
  for (const auto& path : list_checkpoints(o.out_dir + "/checkpoints")) {
    for (const auto& [name, t] : load_checkpoint(path).model) {
      EXPECT_TRUE(at::isfinite(t).all().item<bool>()) << path << " " << name;
    }
  }
}

// The CUDA-graph step's own path (static batch, learning rate and optimizer
// update as device scalars, warm-up, capture, replays, the fallback when OOM
// recovery splits the batch) on the CPU, through HOTLOOP_FAKE_CUDA_GRAPH: a
// backend whose capture keeps the body and whose replay runs it. What only a
// GPU shows (that the capture succeeds, the replay's speed) is not here.
TEST(Trainer, TheGraphStepReplaysLikeTheEagerStepAndFallsBackWhenOomSplitsIt) {
  test::TempDir dir;
  const auto data = synthetic("synthetic:256x1x8x8");
  TrainerOptions o = small_options((dir.path() / "eager").string());
  o.steps = 8;
  auto eager_model = make(o);
  const TrainSummary eager = Trainer(eager_model, data, nullptr, o).fit();
  EXPECT_EQ(eager.graph_replays, 0);

  const test::ScopedEnv fake("HOTLOOP_FAKE_CUDA_GRAPH", "1");
  o.out_dir = (dir.path() / "graph").string();
  auto graph_model = make(o);
  const TrainSummary graph = Trainer(graph_model, data, nullptr, o).fit();
  EXPECT_EQ(graph.graph_replays, 5); // 8 steps after 3 eager warm-up steps
  EXPECT_EQ(graph.graph_off_reason, "");
  // The same updates: the eager optimizer step and the device-scalar one
  // differ only in rounding (float32, 8 steps).
  const auto w1 = model::state_dict(*eager_model);
  const auto w2 = model::state_dict(*graph_model);
  for (std::size_t i = 0; i < w1.size(); ++i) {
    EXPECT_TRUE(at::allclose(w1[i].second, w2[i].second, 1e-4, 1e-6))
        << w1[i].first;
  }
  EXPECT_NEAR(graph.train_loss, eager.train_loss, 1e-4 * eager.train_loss);

  // A precision mode that decides on the host (loss scaling skips
  // overflowing steps) is not captured, and the run says why.
  TrainerOptions scaled_options = o;
  scaled_options.loss_scaling = LossScaling::On;
  scaled_options.out_dir = (dir.path() / "scaled").string();
  const TrainSummary scaled =
      Trainer(make(scaled_options), data, nullptr, scaled_options).fit();
  EXPECT_EQ(scaled.graph_replays, 0);
  EXPECT_NE(scaled.graph_off_reason.find("loss scaling"), std::string::npos)
      << scaled.graph_off_reason;

  // OOM recovery halves the micro-batch: two micro-batches per step cannot
  // be one graph, so the run goes on eagerly and says why.
  const test::ScopedEnv oom("HOTLOOP_INJECT_OOM_ABOVE", "16");
  o.out_dir = (dir.path() / "oom").string();
  const TrainSummary split = Trainer(make(o), data, nullptr, o).fit();
  EXPECT_EQ(split.steps, 8);
  EXPECT_EQ(split.accum_steps, 2);
  EXPECT_EQ(split.graph_replays, 0);
  EXPECT_NE(
      split.graph_off_reason.find(
          "OOM recovery split the batch into 2 micro-batches"),
      std::string::npos)
      << split.graph_off_reason;
}

// Model::loss is the objective everywhere: the eager step, the graph step
// (its seam) and evaluation all report the model's loss, 1 above plain
// cross-entropy's, and train the same weights (its gradients are the same).
TEST(Trainer, TheModelsOwnLossIsWhatTheStepsAndEvaluationUse) {
  const auto data = synthetic("synthetic:256x1x8x8");
  TrainerOptions o = small_options("");
  o.steps = 6;
  o.readback_every = 1;
  const TrainSummary plain =
      Trainer(make(o), data, data, o, {Callbacks{}}).fit();
  for (const bool graph : {false, true}) {
    std::optional<test::ScopedEnv> fake;
    if (graph) {
      fake.emplace("HOTLOOP_FAKE_CUDA_GRAPH", "1");
    }
    auto m = std::make_shared<OffsetLoss>(make(o));
    const TrainSummary own = Trainer(m, data, data, o, {Callbacks{}}).fit();
    EXPECT_EQ(own.graph_replays, graph ? 3 : 0);
    // Float32 sums of 6 steps' losses, and the graph step's device-scalar
    // update: 1e-4 relative.
    EXPECT_NEAR(own.train_loss, plain.train_loss + 1, 1e-4) << graph;
    ASSERT_TRUE(own.eval && plain.eval);
    EXPECT_NEAR(own.eval->loss, plain.eval->loss + 1, 1e-4) << graph;
    EXPECT_NEAR(own.eval->accuracy, plain.eval->accuracy, 1e-9) << graph;
  }
}

// Records each step's loss scale and whether it was skipped.
class ScaleLog : public Callback {
 public:
  std::string name() const override {
    return "scale-log";
  }
  void on_step_end(const RunState&, const StepEnd& e) override {
    scales.push_back(e.loss_scale);
    skipped.push_back(e.skipped);
  }
  std::vector<double> scales;
  std::vector<bool> skipped;
};

// fp16's loss-scaler path through the trainer on the CPU (--loss-scaling on,
// as fp16 on a GPU turns it on): a step whose gradients overflow (injected
// +inf) is skipped and counted, the scale halves at each, and the good steps
// after it keep the scale (growth comes after 2000 good steps).
TEST(Trainer, AnOverflowingStepIsSkippedAndHalvesTheLossScale) {
  test::TempDir dir;
  const test::ScopedEnv overflow("HOTLOOP_INJECT_OVERFLOW_STEPS", "3,4");
  TrainerOptions o = small_options((dir.path() / "run").string());
  o.steps = 6;
  o.loss_scaling = LossScaling::On;
  TrainerContext ctx;
  const auto log = std::make_shared<ScaleLog>();
  ctx.callbacks.push_back(log);
  const TrainSummary s =
      Trainer(make(o), synthetic("synthetic:256x1x8x8"), nullptr, o, ctx).fit();
  EXPECT_EQ(s.skipped_steps, 2);
  EXPECT_EQ(
      log->skipped,
      (std::vector<bool>{false, false, true, true, false, false}));
  EXPECT_EQ(
      log->scales,
      (std::vector<double>{65536, 65536, 32768, 16384, 16384, 16384}));
  EXPECT_TRUE(std::isfinite(s.train_loss));
}

TEST(Trainer, CudaGraphsOnWithoutAGpuIsAUsageErrorNamingTheOption) {
  TrainerOptions o = small_options("unused");
  o.cuda_graphs = CudaGraphs::On;
  try {
    o.validate();
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda-graphs"), std::string::npos)
        << e.what();
  }
  o.readback_every = -1;
  o.cuda_graphs = CudaGraphs::Auto;
  EXPECT_THROW(o.validate(), UsageError);
}

// GPU only (scripts/gpu-check runs it there): the captured step trains like
// the eager one. cuDNN's algorithms may differ between the two runs, so the
// losses are compared with a tolerance rather than bit for bit.
TEST(Trainer, OnAGpuTheCudaGraphStepReplaysAndTrainsLikeTheEagerStep) {
  if (!at::hasCUDA()) {
    GTEST_SKIP() << "no CUDA device here";
  }
  test::TempDir dir;
  const auto data = synthetic("synthetic:512x1x8x8");
  // The mlp: no dropout (whose masks would differ), no cuDNN.
  TrainerOptions eager = small_options((dir.path() / "eager").string());
  eager.device = "cuda";
  eager.steps = 12;
  eager.readback_every = 5;
  eager.clip_grad_norm = 1.0;
  eager.cuda_graphs = CudaGraphs::Off;
  TrainerOptions graphs = eager;
  graphs.out_dir = (dir.path() / "graphs").string();
  graphs.cuda_graphs = CudaGraphs::On;
  const TrainSummary a = Trainer(make(eager), data, nullptr, eager).fit();
  const TrainSummary b = Trainer(make(graphs), data, nullptr, graphs).fit();
  EXPECT_EQ(a.graph_replays, 0);
  EXPECT_EQ(b.graph_replays, 12 - kGraphWarmupSteps);
  EXPECT_EQ(b.graph_off_reason, "");
  const auto la = step_lines(eager.out_dir);
  const auto lb = step_lines(graphs.out_dir);
  ASSERT_EQ(lb.size(), 12u);
  for (const auto& [step, line] : la) {
    EXPECT_NEAR(
        line["loss"].get<double>(), lb.at(step)["loss"].get<double>(), 1e-4)
        << "step " << step;
  }
  // A convolutional model in bf16 with BatchNorm and dropout captures too.
  TrainerOptions cnn = graphs;
  cnn.out_dir = (dir.path() / "cnn").string();
  cnn.model.name = "cnn-small";
  cnn.precision = Precision::Bf16;
  const TrainSummary c = Trainer(make(cnn), data, nullptr, cnn).fit();
  EXPECT_EQ(c.graph_replays, 12 - kGraphWarmupSteps);
  EXPECT_TRUE(std::isfinite(c.train_loss));
}

} // namespace hotloop::train
