// ZeRO stages 1 and 2 (--shard) from the command line, with real processes
// and Gloo over loopback (hotloop launch --nproc 2): each stage trains as
// unsharded data parallel does with the same seed, data and global batch
// (per-step losses and final weights), for a GPT (AdamW, clipping,
// accumulation), a Llama (bf16 autocast), LoRA on a Qwen2 folder and a
// ResNet (SGD with momentum, activation checkpointing);
// each rank holds its share of the optimizer state and gradients (the
// summary's bytes); a sharded run's checkpoint (a file a rank beside it)
// resumes exactly, and resumes unsharded too, after a kill during its save
// too; a missing shard file is refused by name; consolidated into one file
// it resumes exactly; a checkpoint resumes at another number of ranks; the
// optimizer offloaded to the host trains as on the device.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/train/checkpoint_file.h"
#include "hotloop/train/checkpoint_shards.h"
#include "support/cli_process.h"
#include "support/free_port.h"
#include "support/temp_dir.h"

namespace hotloop {
namespace {

std::string corpus(const test::TempDir& dir) {
  std::string text;
  for (int i = 0; i < 300; ++i) {
    text += i % 3 == 0 ? "to be or not to be.\n" : "that is the question.\n";
  }
  dir.write("corpus/a.txt", text);
  return "text:" + (dir.path() / "corpus").string();
}

// `hotloop launch --nproc 2 -- train ARGS --out RUN`.
// `env`: VAR=value pairs for the job.
test::CliResult launch(
    const std::string& args,
    const std::string& run,
    const std::string& env = {},
    int ranks = 2) {
  return test::run_cli(
      "launch --nproc " + std::to_string(ranks) + " --master-port " +
          std::to_string(test::free_port()) + " -- train " + args +
          " --threads 1 --workers 1 --device cpu --seed 3 --out " + run,
      env);
}

std::vector<double> losses(const std::string& run) {
  std::vector<double> out;
  std::ifstream metrics(run + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) {
      out.push_back(j["loss"].get<double>());
    }
  }
  return out;
}

nlohmann::json summary(const std::string& run) {
  return nlohmann::json::parse(test::slurp(run + "/summary.json"));
}

std::string checkpoint_path(const std::string& run, int step) {
  return fmt::format("{}/checkpoints/step-{:08d}.safetensors", run, step);
}

// The checkpoint with its optimizer state whole (a sharded run's put back
// together from its shard files).
train::Checkpoint last_checkpoint(const std::string& run, int step) {
  return train::load_whole_checkpoint(checkpoint_path(run, step));
}

// The same names in the same order, the values within rtol (relative) /
// atol; rtol 0: bit for bit.
void expect_same_tensors(
    const model::StateDict& a,
    const model::StateDict& b,
    double rtol,
    double atol) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(
        rtol == 0 ? at::equal(a[i].second, b[i].second)
                  : at::allclose(a[i].second, b[i].second, rtol, atol))
        << a[i].first;
  }
}

// Per-step losses within `rtol` and the final weights and optimizer state
// within rtol (relative) / atol; rtol 0: bit for bit.
void expect_same_training(
    const std::string& a,
    const std::string& b,
    int steps,
    double rtol,
    double atol) {
  const auto la = losses(a);
  const auto lb = losses(b);
  ASSERT_EQ(la.size(), static_cast<std::size_t>(steps));
  ASSERT_EQ(lb.size(), la.size());
  for (std::size_t i = 0; i < la.size(); ++i) {
    if (rtol == 0) {
      EXPECT_EQ(lb[i], la[i]) << "step " << i + 1;
    } else {
      EXPECT_NEAR(lb[i], la[i], rtol * std::abs(la[i])) << "step " << i + 1;
    }
  }
  const auto ca = last_checkpoint(a, steps);
  const auto cb = last_checkpoint(b, steps);
  expect_same_tensors(ca.model, cb.model, rtol, atol);
  // The sharded run's shard files put back together: the optimizer state
  // named as the unsharded one's.
  expect_same_tensors(ca.optimizer, cb.optimizer, rtol, atol);
}

// Both runs' checkpoints of `step` hold the same model and (put back
// together) optimizer state, bit for bit.
void expect_same_checkpoints(
    const std::string& a,
    const std::string& b,
    int step) {
  const auto ca = last_checkpoint(a, step);
  const auto cb = last_checkpoint(b, step);
  expect_same_tensors(ca.model, cb.model, 0, 0);
  expect_same_tensors(ca.optimizer, cb.optimizer, 0, 0);
}

std::string gpt_args(const test::TempDir& dir, int steps) {
  return "--model gpt-nano --layers 2 --width 32 --context 16 --data " +
      corpus(dir) + " --steps " + std::to_string(steps) +
      " --batch 16 --micro-batch 4 --clip-grad-norm 0.5 --lr 0.003 --log-every 1";
}

} // namespace

TEST(ShardCli, EachStageTrainsAGptAsUnshardedDataParallelDoes) {
  test::TempDir dir;
  const int steps = 6;
  std::vector<std::string> runs;
  for (int stage : {0, 1, 2, 3}) {
    const std::string run = (dir.path() / fmt::format("s{}", stage)).string();
    // (The CUDA-graph seam: the run decides as on a GPU, and says why not.)
    const auto r = launch(
        gpt_args(dir, steps) + " --shard " + std::to_string(stage),
        run,
        "HOTLOOP_FAKE_CUDA_GRAPH=1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string why =
        summary(run)["cuda_graphs"]["off_reason"].get<std::string>();
    EXPECT_NE(
        why.find(
            stage == 0      ? "data parallel:"
                : stage < 3 ? "gradients are reduced from autograd hooks"
                            : "each block's parameters are allocated"),
        std::string::npos)
        << why;
    if (stage == 3) {
      // Each block's buckets its own: two decayed and exempt pairs, and the
      // embeddings' and final norm's.
      EXPECT_NE(
          r.out.find(
              "shard: stage 3: the parameters of the model's 2 units (its blocks) are sharded too"),
          std::string::npos)
          << r.out;
    } else if (stage > 0) {
      // Two buckets (decayed and exempt), each cut in half.
      EXPECT_NE(
          r.out.find(fmt::format(
              "shard: ZeRO stage {} over 2 ranks in 2 bucket(s): this rank updates 17088 of the 34176 trainable parameters",
              stage)),
          std::string::npos)
          << r.out;
    }
    runs.push_back(run);
  }
  // Two ranks sum in either order alike; the global norm's sum of squares
  // is the one thing taken in another order (float32 rounding: the weights
  // differ by at most 6e-8 after 6 steps here).
  expect_same_training(runs[0], runs[1], steps, 1e-6, 1e-7);
  expect_same_training(runs[0], runs[2], steps, 1e-6, 1e-7);
  expect_same_training(runs[0], runs[3], steps, 1e-6, 1e-7);

  // Each rank's share: the optimizer state halves at stage 1 (plus
  // padding), the gradients at stage 2 are half the parameters (DDP keeps
  // the parameters' own and its buckets: twice).
  const auto whole = summary(runs[0])["model_state_bytes"];
  const auto one = summary(runs[1])["model_state_bytes"];
  const auto two = summary(runs[2])["model_state_bytes"];
  const double p = whole["parameters"].get<double>();
  EXPECT_EQ(summary(runs[2])["shard"], 2);
  EXPECT_DOUBLE_EQ(whole["optimizer"].get<double>(), 2 * p); // AdamW
  EXPECT_DOUBLE_EQ(whole["gradients"].get<double>(), 2 * p);
  const double padding = 64.0 * 4; // at most one element a bucket
  EXPECT_LE(one["optimizer"].get<double>(), p + padding);
  EXPECT_GE(one["optimizer"].get<double>(), p);
  EXPECT_LE(one["gradients"].get<double>(), p + 2 * padding);
  EXPECT_LE(two["optimizer"].get<double>(), p + padding);
  EXPECT_LE(two["gradients"].get<double>(), p / 2 + padding);
  EXPECT_GE(two["gradients"].get<double>(), p / 2);
  // Stage 3: the blocks' parameters halve too (the embeddings, a third of
  // gpt-nano here, stay whole), and at most two blocks were whole at once
  // (the one running, the next one being gathered).
  const auto three = summary(runs[3])["model_state_bytes"];
  EXPECT_LT(three["parameters"].get<double>(), 0.7 * p);
  EXPECT_GE(three["parameters"].get<double>(), p / 2);
  EXPECT_LE(three["gradients"].get<double>(), p / 2 + 6 * padding);
  EXPECT_GT(three["units"]["largest"].get<double>(), 0);
  const double largest = three["units"]["largest"].get<double>();
  EXPECT_LE(three["units"]["peak_whole"].get<double>(), 2 * largest);
  EXPECT_GE(three["units"]["peak_whole"].get<double>(), largest);
}

TEST(ShardCli, Stages2And3TrainALlamaInBf16AsUnshardedDataParallelDoes) {
  test::TempDir dir;
  const int steps = 4;
  const std::string args =
      "--model llama-nano --layers 2 --width 32 --context 16 --data " +
      corpus(dir) +
      " --steps 4 --batch 8 --precision bf16 --clip-grad-norm 0 --log-every 1";
  const std::string whole = (dir.path() / "whole").string();
  const std::string sharded = (dir.path() / "sharded").string();
  const auto a = launch(args, whole);
  ASSERT_EQ(a.exit_code, 0) << a.out;
  const auto b = launch(args + " --shard 2", sharded);
  ASSERT_EQ(b.exit_code, 0) << b.out;
  // The same float32 master weights and updates; autocast's bf16 compute
  // is the same on both; no clipping: bit for bit.
  expect_same_training(whole, sharded, steps, 0, 0);
  // Stage 3 gathers each block's matrices as bf16 copies of its fp32
  // shards (what autocast casts them to anyway) and reduces their bf16
  // gradients in fp32; the norms' weights stay fp32: still bit for bit.
  const std::string three = (dir.path() / "three").string();
  const auto c = launch(args + " --shard 3", three);
  ASSERT_EQ(c.exit_code, 0) << c.out;
  EXPECT_NE(
      c.out.find("they are gathered and computed in bf16"), std::string::npos)
      << c.out;
  expect_same_training(whole, three, steps, 0, 0);
  // Half the bytes whole of a block's matrices: the largest unit's bytes
  // against an fp32 stage-3 run's.
  const std::string fp32 = (dir.path() / "fp32").string();
  const std::string fp32_args =
      args.substr(0, args.find(" --precision")) + " --precision fp32";
  ASSERT_EQ(launch(fp32_args + " --shard 3", fp32).exit_code, 0);
  const auto units = [](const std::string& run) {
    return summary(run)["model_state_bytes"]["units"]["largest"].get<double>();
  };
  EXPECT_LT(units(three), 0.6 * units(fp32));
  EXPECT_GT(units(three), 0.5 * units(fp32));
}

// Gradient accumulation at stage 3 in bf16: each micro-batch's bf16
// gradients of a block's matrices are summed in fp32 (as an unsharded fp32
// master's gradient sums them), bit for bit. Its checkpoint holds the fp32
// master weights, each rank's shards in its file, and resumes into the
// shards exactly (the optimizer state cut in fp32, not in the blocks'
// bf16); a stage-2 checkpoint's whole weights resume at stage 3 exactly
// too, into the fp32 masters a block at a time.
TEST(ShardCli, Stage3InBf16AccumulatesInFp32AndResumesExactly) {
  test::TempDir dir;
  const auto args = [&](int steps) {
    return "--model llama-nano --layers 2 --width 32 --context 16 --data " +
        corpus(dir) + " --steps " + std::to_string(steps) +
        " --batch 16 --micro-batch 2 --precision bf16 --clip-grad-norm 0 --log-every 1";
  };
  const std::string whole = (dir.path() / "whole").string();
  const std::string three = (dir.path() / "three").string();
  ASSERT_EQ(launch(args(3), whole).exit_code, 0);
  const auto r = launch(args(3) + " --shard 3", three);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  expect_same_training(whole, three, 3, 0, 0);

  const std::string halves = (dir.path() / "halves").string();
  ASSERT_EQ(launch(args(2) + " --shard 3", halves).exit_code, 0);
  const auto b = launch(args(3) + " --shard 3 --resume auto", halves);
  ASSERT_EQ(b.exit_code, 0) << b.out;
  expect_same_checkpoints(three, halves, 3);

  const std::string mixed = (dir.path() / "mixed").string();
  ASSERT_EQ(launch(args(2) + " --shard 2", mixed).exit_code, 0);
  const auto m = launch(args(3) + " --shard 3 --resume auto", mixed);
  ASSERT_EQ(m.exit_code, 0) << m.out;
  expect_same_checkpoints(three, mixed, 3);
  // The resume wrote the blocks one at a time.
  const auto units = summary(mixed)["model_state_bytes"]["units"];
  EXPECT_LE(
      units["peak_whole"].get<double>(), 2 * units["largest"].get<double>());
}

// With activation checkpointing: the stages' forward recomputed in backward
// (the gradient hooks fire as the recomputed stages' backward runs).
TEST(ShardCli, EachStageTrainsAResnetWithMomentumAsUnshardedDataParallelDoes) {
  test::TempDir dir;
  const int steps = 3;
  const std::string args =
      "--model resnet18-small --data synthetic:256x3x32x32 --augment none --steps 3 --batch 16 --optimizer sgd --momentum 0.9 --lr 0.05 --activation-checkpointing stages --log-every 1";
  std::vector<std::string> runs;
  for (int stage : {0, 1, 2, 3}) {
    const std::string run = (dir.path() / fmt::format("s{}", stage)).string();
    const auto r = launch(args + " --shard " + std::to_string(stage), run);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    runs.push_back(run);
  }
  expect_same_training(runs[0], runs[1], steps, 0, 0);
  expect_same_training(runs[0], runs[2], steps, 0, 0);
  // Stage 3: each stage gathered again before its recompute and backward.
  expect_same_training(runs[0], runs[3], steps, 0, 0);
}

// Stage 3 never holds the whole model: every rank evaluates (each block
// gathered as it runs), and a checkpoint reads the blocks one at a time in
// fp32 (rank 0 copying each to the host), so at most two blocks' bytes
// were whole at once over a run that evaluates and saves every step; the
// checkpoints are the unsharded run's, bit for bit, the evaluation within
// 1e-6.
TEST(ShardCli, Stage3EvaluatesAndCheckpointsWithoutTheWholeModel) {
  test::TempDir dir;
  const std::string args =
      "--model llama-nano --layers 4 --width 32 --context 16 --data " +
      corpus(dir) +
      " --steps 3 --batch 8 --precision bf16 --clip-grad-norm 0 --eval-every 1 --checkpoint-every 1 --log-every 1";
  const std::string whole = (dir.path() / "whole").string();
  const std::string three = (dir.path() / "three").string();
  ASSERT_EQ(launch(args, whole).exit_code, 0);
  const auto r = launch(args + " --shard 3", three);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  expect_same_training(whole, three, 3, 0, 0);
  for (int step : {1, 2}) {
    expect_same_checkpoints(whole, three, step);
  }
  // Stage 3 evaluates at the training micro-batch (it cannot halve its
  // batch on an OOM), so its batches' sums are grouped otherwise: 1e-6.
  const double val = summary(whole)["val_loss"].get<double>();
  EXPECT_NEAR(summary(three)["val_loss"].get<double>(), val, 1e-6 * val);
  const auto units = summary(three)["model_state_bytes"]["units"];
  EXPECT_LE(
      units["peak_whole"].get<double>(), 2 * units["largest"].get<double>());
}

// In bf16 a stage's convolution kernels are gathered as bf16 copies (what
// autocast casts them to), the batch norms' weights in fp32: bit for bit.
TEST(ShardCli, Stage3InBf16TrainsAResnetAsUnshardedDataParallelDoes) {
  test::TempDir dir;
  const std::string args =
      "--model resnet18-small --data synthetic:128x3x32x32 --augment none --steps 2 --batch 16 --optimizer sgd --momentum 0.9 --lr 0.05 --precision bf16 --log-every 1";
  const std::string whole = (dir.path() / "whole").string();
  const std::string three = (dir.path() / "three").string();
  ASSERT_EQ(launch(args, whole).exit_code, 0);
  const auto r = launch(args + " --shard 3", three);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(
      r.out.find("they are gathered and computed in bf16"), std::string::npos)
      << r.out;
  expect_same_training(whole, three, 2, 0, 0);
}

TEST(ShardCli, Stages2And3TrainLoraOnAQwen2FolderAsUnshardedDataParallelDoes) {
  // A Qwen2-shaped Hugging Face folder (attention biases, grouped heads),
  // small: one step of qwen2.5-0.5b's shape cut down, exported.
  test::TempDir dir;
  const std::string base = (dir.path() / "base").string();
  const auto made = test::run_cli(
      "train --model qwen2.5-0.5b --layers 2 --width 64 --heads 4 --context 16 --vocab 256 --data " +
      corpus(dir) + " --steps 1 --batch 8 --threads 1 --device cpu --out " +
      base);
  ASSERT_EQ(made.exit_code, 0) << made.out;
  const std::string folder = (dir.path() / "qwen2").string();
  const auto exported = test::run_cli(
      "weights export-hf " + base + "/model.safetensors " + folder);
  ASSERT_EQ(exported.exit_code, 0) << exported.out;
  ASSERT_NE(
      test::slurp(folder + "/config.json").find("Qwen2ForCausalLM"),
      std::string::npos);
  // The frozen base, the adapters sharded: bit for bit (no clipping).
  const std::string args = "--init " + folder +
      " --context 16 --lora-rank 4 --data " + corpus(dir) +
      " --steps 4 --batch 8 --lr 0.01 --clip-grad-norm 0 --log-every 1";
  const std::string whole = (dir.path() / "whole").string();
  const std::string sharded = (dir.path() / "sharded").string();
  ASSERT_EQ(launch(args, whole).exit_code, 0);
  const auto r = launch(args + " --shard 2", sharded);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(
      r.out.find("this rank updates 4864 of the 9728 trainable parameters"),
      std::string::npos)
      << r.out;
  expect_same_training(whole, sharded, 4, 0, 0);
  // Stage 3: the adapters of each block gathered, the frozen base whole.
  const std::string three = (dir.path() / "three").string();
  const auto t = launch(args + " --shard 3", three);
  ASSERT_EQ(t.exit_code, 0) << t.out;
  expect_same_training(whole, three, 4, 0, 0);
}

TEST(ShardCli, AShardedCheckpointResumesExactlyAndAlsoUnsharded) {
  test::TempDir dir;
  const std::string straight = (dir.path() / "straight").string();
  const auto a = launch(gpt_args(dir, 8) + " --shard 2", straight);
  ASSERT_EQ(a.exit_code, 0) << a.out;

  // 4 steps, then 4 more from its checkpoint: the same 8 steps exactly.
  const std::string halves = (dir.path() / "halves").string();
  ASSERT_EQ(launch(gpt_args(dir, 4) + " --shard 2", halves).exit_code, 0);
  const auto b = launch(gpt_args(dir, 8) + " --shard 2 --resume auto", halves);
  ASSERT_EQ(b.exit_code, 0) << b.out;
  expect_same_checkpoints(straight, halves, 8);

  // The same checkpoint resumed unsharded: the state put back together.
  const std::string unsharded = (dir.path() / "unsharded").string();
  ASSERT_EQ(launch(gpt_args(dir, 4) + " --shard 2", unsharded).exit_code, 0);
  const auto c = launch(gpt_args(dir, 8) + " --resume auto", unsharded);
  ASSERT_EQ(c.exit_code, 0) << c.out;
  expect_same_tensors(
      last_checkpoint(straight, 8).model,
      last_checkpoint(unsharded, 8).model,
      1e-6,
      1e-7);
}

TEST(
    ShardCli,
    ACheckpointResumesAtAnotherNumberOfRanksAndEndsAsTheUninterruptedRun) {
  test::TempDir dir;
  const std::string straight = (dir.path() / "straight").string();
  ASSERT_EQ(launch(gpt_args(dir, 8) + " --shard 2", straight).exit_code, 0);
  auto single = [&](const std::string& args, const std::string& run) {
    return test::run_cli(
        "train " + args +
        " --threads 1 --workers 1 --device cpu --seed 3 --out " + run);
  };
  // 2 ranks -> 1, and 1 -> 2 ranks sharded: the same global batches, so
  // the run goes on as the uninterrupted one (float32: a mean of two
  // half-batch means is not one mean bit for bit).
  const std::string down = (dir.path() / "down").string();
  ASSERT_EQ(launch(gpt_args(dir, 4) + " --shard 2", down).exit_code, 0);
  const auto d = single(gpt_args(dir, 8) + " --resume auto", down);
  ASSERT_EQ(d.exit_code, 0) << d.out;
  EXPECT_NE(
      d.out.find(
          "resume: the checkpoint was written by 2 rank(s), this run has 1"),
      std::string::npos)
      << d.out;
  const std::string up = (dir.path() / "up").string();
  ASSERT_EQ(single(gpt_args(dir, 4), up).exit_code, 0);
  const auto u = launch(gpt_args(dir, 8) + " --shard 1 --resume auto", up);
  ASSERT_EQ(u.exit_code, 0) << u.out;
  EXPECT_NE(u.out.find("(the optimizer state too)"), std::string::npos)
      << u.out;
  // Each step's logged loss is rank 0's share's, so the runs are compared
  // where they are the job's: the final weights (here within 9e-8) and the
  // validation loss.
  const auto ca = last_checkpoint(straight, 8);
  const double val = summary(straight)["val_loss"].get<double>();
  for (const std::string& run : {down, up}) {
    const auto cb = last_checkpoint(run, 8);
    SCOPED_TRACE(run);
    expect_same_tensors(ca.model, cb.model, 1e-5, 5e-7);
    EXPECT_NEAR(summary(run)["val_loss"].get<double>(), val, 1e-6 * val);
  }
}

TEST(ShardCli, EachRankSavesItsShardAndAKilledSaveResumesFromTheLastOne) {
  test::TempDir dir;
  const std::string args =
      gpt_args(dir, 8) + " --shard 2 --checkpoint-every 2 --keep-checkpoints 2";
  const std::string straight = (dir.path() / "straight").string();
  ASSERT_EQ(launch(args, straight).exit_code, 0);
  // The last two checkpoints, each with one file a rank, and nothing else:
  // the older ones' shard files went with them.
  std::set<std::string> files;
  for (const auto& e :
       std::filesystem::directory_iterator(straight + "/checkpoints")) {
    files.insert(e.path().filename().string());
  }
  EXPECT_EQ(
      files,
      (std::set<std::string>{
          "step-00000006.safetensors",
          "step-00000006.rank-0-of-2.safetensors",
          "step-00000006.rank-1-of-2.safetensors",
          "step-00000008.safetensors",
          "step-00000008.rank-0-of-2.safetensors",
          "step-00000008.rank-1-of-2.safetensors"}));
  // The checkpoint itself keeps of the optimizer only its step count.
  const auto head = train::load_checkpoint(checkpoint_path(straight, 8));
  ASSERT_EQ(head.optimizer.size(), 1u);
  EXPECT_EQ(head.optimizer[0].first, "steps");

  // Killed as rank 0 writes step 6's checkpoint, every rank's shard file
  // already in place: resumed from step 4, step 6's files are removed and
  // the run ends where the uninterrupted one does, bit for bit.
  const std::string killed = (dir.path() / "killed").string();
  EXPECT_NE(
      launch(args, killed, "HOTLOOP_INJECT_KILL=checkpoint:6").exit_code, 0);
  const std::string ckpts = killed + "/checkpoints";
  EXPECT_FALSE(std::filesystem::exists(checkpoint_path(killed, 6)));
  ASSERT_TRUE(std::filesystem::exists(train::shard_file_path(ckpts, 6, 1, 2)));
  const auto r = launch(args + " --resume auto", killed);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(
      r.out.find("removed " + train::shard_file_path(ckpts, 6, 0, 2)),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("resumed"), std::string::npos) << r.out;
  expect_same_checkpoints(straight, killed, 8);
}

TEST(ShardCli, AMissingShardIsRefusedByNameAndConsolidateWritesOneFile) {
  test::TempDir dir;
  const std::string run = (dir.path() / "run").string();
  ASSERT_EQ(launch(gpt_args(dir, 4) + " --shard 2", run).exit_code, 0);
  const std::string ckpts = run + "/checkpoints";
  const std::string rank1 = train::shard_file_path(ckpts, 4, 1, 2);

  // Rank 1's file gone: the resume is refused, naming it.
  const std::string aside = (dir.path() / "aside.safetensors").string();
  std::filesystem::rename(rank1, aside);
  const auto refused = launch(
      gpt_args(dir, 8) + " --shard 2 --resume " + checkpoint_path(run, 4), run);
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_NE(
      refused.out.find("1 of its shard files is missing: " + rank1),
      std::string::npos)
      << refused.out;
  std::filesystem::rename(aside, rank1);

  // Consolidated: one file with the whole state, which resumes with no
  // shard files beside it exactly as the sharded checkpoint does.
  const std::string whole = (dir.path() / "whole.safetensors").string();
  const auto c = test::run_cli("weights consolidate " + run + " " + whole);
  ASSERT_EQ(c.exit_code, 0) << c.out;
  EXPECT_NE(c.out.find("(step 4) -> " + whole), std::string::npos) << c.out;
  const auto one = train::load_checkpoint(whole);
  EXPECT_FALSE(one.meta.contains(train::kShardIndexKey));
  expect_same_tensors(one.optimizer, last_checkpoint(run, 4).optimizer, 0, 0);

  const std::string from_shards = (dir.path() / "from-shards").string();
  const std::string from_whole = (dir.path() / "from-whole").string();
  const std::string resume = gpt_args(dir, 8) + " --shard 2 --resume ";
  ASSERT_EQ(launch(resume + checkpoint_path(run, 4), from_shards).exit_code, 0);
  std::filesystem::remove_all(ckpts);
  const auto w = launch(resume + whole, from_whole);
  ASSERT_EQ(w.exit_code, 0) << w.out;
  expect_same_checkpoints(from_shards, from_whole, 8);

  // Into a folder: the language model as a Hugging Face folder.
  const std::string hf = (dir.path() / "hf").string();
  const auto h = test::run_cli("weights consolidate " + from_whole + " " + hf);
  ASSERT_EQ(h.exit_code, 0) << h.out;
  EXPECT_TRUE(std::filesystem::exists(hf + "/config.json")) << h.out;
  EXPECT_TRUE(std::filesystem::exists(hf + "/model.safetensors")) << h.out;
}

// Four ranks: stage 3 trains as unsharded data parallel over four, and its
// checkpoint, cut for four, resumes at two.
TEST(ShardCli, FourRanksAtStage3TrainAsUnshardedAndResumeAtTwo) {
  test::TempDir dir;
  const std::string whole = (dir.path() / "whole").string();
  ASSERT_EQ(launch(gpt_args(dir, 6), whole, {}, 4).exit_code, 0);
  const std::string three = (dir.path() / "three").string();
  const auto r = launch(gpt_args(dir, 6) + " --shard 3", three, {}, 4);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("ZeRO stage 3 over 4 ranks"), std::string::npos)
      << r.out;
  expect_same_training(whole, three, 6, 1e-6, 1e-7);
  EXPECT_TRUE(std::filesystem::exists(
      train::shard_file_path(three + "/checkpoints", 6, 3, 4)));

  // 4 ranks for 3 steps, then 2 ranks to step 6: the uninterrupted run's
  // weights (a mean over other halves: float32 rounding).
  const std::string down = (dir.path() / "down").string();
  ASSERT_EQ(launch(gpt_args(dir, 3) + " --shard 3", down, {}, 4).exit_code, 0);
  const auto d = launch(gpt_args(dir, 6) + " --shard 3 --resume auto", down);
  ASSERT_EQ(d.exit_code, 0) << d.out;
  EXPECT_NE(
      d.out.find(
          "resume: the checkpoint was written by 4 rank(s), this run has 2"),
      std::string::npos)
      << d.out;
  expect_same_tensors(
      last_checkpoint(three, 6).model,
      last_checkpoint(down, 6).model,
      1e-5,
      5e-7);
}

// Stage 3's checkpoint holds no block whole: each rank's shard file has its
// pieces of the blocks' fp32 weights, the checkpoint file the rest and their
// index; put back together they are a model again, which --init reads from
// the shard files as from the consolidated file. Whole weights (a stage-2
// checkpoint) resume at stage 3 a block at a time, never all whole.
TEST(ShardCli, Stage3CheckpointsEachRanksPiecesOfTheBlocks) {
  test::TempDir dir;
  const std::string three = (dir.path() / "three").string();
  ASSERT_EQ(launch(gpt_args(dir, 4) + " --shard 3", three).exit_code, 0);
  const std::string ckpts = three + "/checkpoints";
  const auto head = train::load_checkpoint(checkpoint_path(three, 4));
  ASSERT_TRUE(head.meta.contains(train::kModelShardIndexKey));
  const auto index = train::ShardIndex::from_json(
      head.meta[train::kModelShardIndexKey], "the test");
  const auto whole = last_checkpoint(three, 4).model;
  std::set<std::string> in_file;
  for (const auto& [name, t] : head.model) {
    in_file.insert(name);
  }
  // The blocks' weights are in the shard files only, each rank's about
  // half of them.
  std::int64_t blocks = 0;
  std::set<std::string> sharded;
  for (const auto& t : index.tensors) {
    const std::string name = t.name.substr(6); // "model/"
    EXPECT_TRUE(name.starts_with("transformer.h.")) << name;
    EXPECT_FALSE(in_file.contains(name)) << name;
    sharded.insert(name);
    blocks += t.numel();
  }
  EXPECT_EQ(in_file.size() + sharded.size(), whole.size());
  std::int64_t pieces = 0;
  for (int r = 0; r < 2; ++r) {
    std::int64_t mine = 0;
    for (const auto& [name, t] : train::read_shard_file(ckpts, 4, index, r)) {
      mine += name.starts_with("model/") ? t.numel() : 0;
    }
    EXPECT_GT(mine, blocks / 3) << "rank " << r;
    EXPECT_LT(mine, 2 * blocks / 3) << "rank " << r;
    pieces += mine;
  }
  EXPECT_EQ(pieces, blocks);

  // --init from the checkpoint (its blocks from the shard files) starts
  // where --init from its consolidated copy does.
  const std::string one = (dir.path() / "one.safetensors").string();
  ASSERT_EQ(
      test::run_cli("weights consolidate " + three + " " + one).exit_code, 0);
  auto init = [&](const std::string& from, const std::string& run) {
    return test::run_cli(
        "train " + gpt_args(dir, 2) +
        " --threads 1 --workers 1 --device cpu --seed 3 --init " + from +
        " --out " + run);
  };
  const std::string a = (dir.path() / "init-shards").string();
  const std::string b = (dir.path() / "init-one").string();
  const auto ia = init(checkpoint_path(three, 4), a);
  ASSERT_EQ(ia.exit_code, 0) << ia.out;
  ASSERT_EQ(init(one, b).exit_code, 0);
  EXPECT_EQ(losses(a), losses(b));

  // A stage-2 checkpoint at stage 3: the blocks loaded one at a time.
  const std::string mixed = (dir.path() / "mixed").string();
  ASSERT_EQ(launch(gpt_args(dir, 2) + " --shard 2", mixed).exit_code, 0);
  const auto m = launch(gpt_args(dir, 4) + " --shard 3 --resume auto", mixed);
  ASSERT_EQ(m.exit_code, 0) << m.out;
  expect_same_tensors(whole, last_checkpoint(mixed, 4).model, 1e-6, 1e-7);
  const auto units = summary(mixed)["model_state_bytes"]["units"];
  EXPECT_LE(
      units["peak_whole"].get<double>(), 2 * units["largest"].get<double>());
}

// After training, stage 3 gathers the model whole only where every rank
// can hold it. When one rank cannot (an OOM injected on rank 1 once its
// buffers are allocated), the model stays sharded on both, saying so, and
// rank 0 writes the final weights from host memory a block at a time: the
// weights of the run that ended whole, bit for bit, and its evaluation.
TEST(ShardCli, Stage3EndsShardedWhereTheWholeModelDoesNotFit) {
  test::TempDir dir;
  const std::string args = gpt_args(dir, 2) + " --shard 3";
  const std::string whole = (dir.path() / "whole").string();
  const auto w = launch(args, whole);
  ASSERT_EQ(w.exit_code, 0) << w.out;
  const std::string stays = "shard: the model stays sharded after training";
  EXPECT_EQ(w.out.find(stays), std::string::npos) << w.out;
  const std::string sharded = (dir.path() / "sharded").string();
  const auto r = launch(
      args, sharded, "HOTLOOP_INJECT_OOM_WHOLE=1 HOTLOOP_INJECT_OOM_RANK=1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(stays), std::string::npos) << r.out;
  expect_same_tensors(
      model::read_weight_file(whole + "/model.safetensors").tensors,
      model::read_weight_file(sharded + "/model.safetensors").tensors,
      0,
      0);
  EXPECT_EQ(summary(whole)["val_loss"], summary(sharded)["val_loss"]);
}

TEST(ShardCli, AnOffloadedOptimizerTrainsAsOnTheDevice) {
  test::TempDir dir;
  const std::string device = (dir.path() / "device").string();
  const std::string host = (dir.path() / "host").string();
  ASSERT_EQ(launch(gpt_args(dir, 4) + " --shard 2", device).exit_code, 0);
  const auto r =
      launch(gpt_args(dir, 4) + " --shard 2 --offload optimizer", host);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(
      r.out.find(
          "offload: the optimizer's state and its float32 copies of the 17088 parameters it updates live in host memory"),
      std::string::npos)
      << r.out;
  // The same arithmetic on the CPU: bit for bit, the checkpoint included.
  expect_same_training(device, host, 4, 0, 0);
  const auto bytes = summary(host)["model_state_bytes"];
  EXPECT_EQ(bytes["optimizer"], 0);
  // AdamW's two moments plus the copies and their gradients: 4 x the shard.
  EXPECT_EQ(
      bytes["host"].get<double>(),
      2 * summary(device)["model_state_bytes"]["optimizer"].get<double>());

  // Resumed: the host copies are taken from the loaded weights (they were
  // made before the resume), so 4 + 4 steps end as 8 straight, bit for bit.
  const std::string straight = (dir.path() / "straight").string();
  ASSERT_EQ(
      launch(gpt_args(dir, 8) + " --shard 2 --offload optimizer", straight)
          .exit_code,
      0);
  const auto again = launch(
      gpt_args(dir, 8) + " --shard 2 --offload optimizer --resume auto", host);
  ASSERT_EQ(again.exit_code, 0) << again.out;
  expect_same_checkpoints(straight, host, 8);
}

// Rank 1 alone runs out of memory above 2 samples: both ranks discard the
// step's shards, shrink the micro-batch and redo it, as unsharded ranks do.
TEST(ShardCli, AnOutOfMemoryOnOneRankIsRecoveredShardedAsUnsharded) {
  test::TempDir dir;
  const std::string args =
      "--model gpt-nano --layers 2 --width 32 --context 16 --data " +
      corpus(dir) +
      " --steps 4 --batch 16 --micro-batch 4 --clip-grad-norm 0 --log-every 1";
  auto run = [&](const std::string& name, int stage) {
    const std::string out = (dir.path() / name).string();
    const auto r = test::run_cli(
        "launch --nproc 2 --master-port " + std::to_string(test::free_port()) +
            " -- train " + args + " --shard " + std::to_string(stage) +
            " --threads 1 --workers 1 --device cpu --seed 3 --out " + out,
        "HOTLOOP_INJECT_OOM_ABOVE=2 HOTLOOP_INJECT_OOM_RANK=1");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return out;
  };
  const std::string whole = run("whole", 0);
  const std::string sharded = run("sharded", 2);
  EXPECT_EQ(summary(sharded)["oom_recoveries"], 1);
  EXPECT_EQ(summary(sharded)["micro_batch"], 2);
  expect_same_training(whole, sharded, 4, 0, 0);
}

// Without OOM recovery an OOM on one rank stops every rank after the step's
// agreement, each naming it, rather than leaving the others to be stopped.
TEST(ShardCli, WithRecoveryOffAnOutOfMemoryOnOneRankStopsEveryRankSayingSo) {
  test::TempDir dir;
  const auto r = launch(
      gpt_args(dir, 4) + " --shard 2 --oom-recovery false",
      (dir.path() / "run").string(),
      "HOTLOOP_INJECT_OOM_ABOVE=2 HOTLOOP_INJECT_OOM_RANK=1");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(
      r.out.find(
          "[rank 0] hotloop: error: step 1: out of memory at micro-batch 4 with OOM recovery off (out of memory on another rank)"),
      std::string::npos)
      << r.out;
  EXPECT_NE(
      r.out.find(
          "[rank 1] hotloop: error: step 1: out of memory at micro-batch 4 with OOM recovery off (out of memory (injected"),
      std::string::npos)
      << r.out;
}

// A sharded batch trial that runs out of memory on one rank is off on every
// rank, so the search goes on in step and all find the same size.
TEST(ShardCli, AShardedBatchTrialOutOfMemoryOnOneRankIsOffOnEveryRank) {
  test::TempDir dir;
  const std::string run = (dir.path() / "run").string();
  const auto r = launch(
      "--model gpt-nano --layers 2 --width 32 --context 16 --data " +
          corpus(dir) + " --steps 2 --batch auto --shard 2",
      run,
      "HOTLOOP_INJECT_OOM_ABOVE=8 HOTLOOP_INJECT_OOM_RANK=1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("batch    16: out of memory"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("batch     9: out of memory"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("max batch: 8\n"), std::string::npos) << r.out;
}

// The batch finder under data parallelism (the ranks agree on the
// smallest finding); it was refused before a trial ran ("batch: 1 is not
// divisible by micro-batch 0 x 2 rank(s)").
// The trials train sharded over the job's ranks, so they measure what a
// rank of the sharded run holds (on the CPU the host allocator counts it):
// less than an unsharded run's trials by the optimizer state sharding saves.
TEST(ShardCli, BatchAutoIsFoundOverTwoRanksWithShardedTrials) {
  test::TempDir dir;
  const std::string args =
      "--model gpt-nano --layers 2 --width 128 --context 16 --data " +
      corpus(dir) + " --steps 2 --batch auto";
  const std::string run = (dir.path() / "run").string();
  const auto r =
      launch(args + " --shard 2", run, "HOTLOOP_COUNT_HOST_MEMORY=1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("batch auto: "), std::string::npos) << r.out;
  const auto config = nlohmann::json::parse(test::slurp(run + "/config.json"));
  const std::int64_t batch = config["options"]["batch"].get<std::int64_t>();
  EXPECT_GE(batch, 2);
  EXPECT_EQ(batch % 2, 0); // the finding a rank, times the 2 ranks
  EXPECT_EQ(summary(run)["shard"], 2);

  const std::string whole = (dir.path() / "whole").string();
  ASSERT_EQ(launch(args, whole, "HOTLOOP_COUNT_HOST_MEMORY=1").exit_code, 0);
  const auto finder = [](const std::string& folder) {
    return nlohmann::json::parse(test::slurp(folder + "/batch_finder.json"));
  };
  // The least any trial peaked at (the sharded trials' peaks vary by some
  // 1% with when Gloo's buffers come and go).
  const auto peak = [&](const std::string& folder) {
    double least = 0;
    const nlohmann::json found = finder(folder);
    for (const auto& t : found["trials"]) {
      const double bytes = t["peak_allocated_bytes"].get<double>();
      least = least == 0 ? bytes : std::min(least, bytes);
    }
    return least;
  };
  // Stage 2 over 2 ranks: half of AdamW's 2 x P of state, against the P/2
  // more of gradients it holds at the peak (shard and whole buffer); some
  // 0.5 P measured.
  const double p = finder(run)["model_state"]["weight_bytes"].get<double>();
  EXPECT_GT(peak(whole) - peak(run), p / 4)
      << peak(whole) << " vs " << peak(run);
}

TEST(ShardCli, OneProcessSaysItHasNothingToShardAndTrains) {
  test::TempDir dir;
  const auto r = test::run_cli(
      "train " + gpt_args(dir, 2) +
      " --shard 2 --threads 1 --device cpu --out " +
      (dir.path() / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(
      r.out.find("--shard 2 has nothing to shard over in one process"),
      std::string::npos)
      << r.out;
}

TEST(ShardCli, AStageAboveThreeIsRefused) {
  const auto r = test::run_cli("train --shard 4 --steps 1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("must be 0, 1, 2 or 3"), std::string::npos) << r.out;
}

// Stage 3's checkpoint (the model gathered whole for it, the optimizer's
// shards in their files): resumed at stage 3 it ends as the run straight
// through, bit for bit, and it resumes at stage 2 too.
TEST(ShardCli, AStage3CheckpointResumesExactlyAndAtStage2) {
  test::TempDir dir;
  const std::string straight = (dir.path() / "straight").string();
  ASSERT_EQ(launch(gpt_args(dir, 8) + " --shard 3", straight).exit_code, 0);
  const std::string halves = (dir.path() / "halves").string();
  ASSERT_EQ(launch(gpt_args(dir, 4) + " --shard 3", halves).exit_code, 0);
  const auto b = launch(gpt_args(dir, 8) + " --shard 3 --resume auto", halves);
  ASSERT_EQ(b.exit_code, 0) << b.out;
  expect_same_checkpoints(straight, halves, 8);
  EXPECT_EQ(summary(straight)["val_loss"], summary(halves)["val_loss"]);

  const std::string two = (dir.path() / "two").string();
  ASSERT_EQ(launch(gpt_args(dir, 4) + " --shard 3", two).exit_code, 0);
  const auto c = launch(gpt_args(dir, 8) + " --shard 2 --resume auto", two);
  ASSERT_EQ(c.exit_code, 0) << c.out;
  expect_same_tensors(
      last_checkpoint(straight, 8).model,
      last_checkpoint(two, 8).model,
      1e-6,
      1e-7);
}

} // namespace hotloop
