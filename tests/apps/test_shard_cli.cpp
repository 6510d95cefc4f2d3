// ZeRO stages 1 to 3 (--shard) from the command line, with real processes
// and Gloo over loopback (hotloop launch --nproc 2): each stage trains as
// unsharded data parallel does with the same seed, data and global batch
// (per-step losses and final weights), for a GPT (AdamW, clipping,
// accumulation), a Llama (bf16 autocast), LoRA on a Qwen2 folder and a
// ResNet (SGD with momentum, activation checkpointing); each rank holds its
// share of the model state (the summary's bytes); stage 3 evaluates without
// the whole model and ends sharded where it does not fit; the optimizer
// offloaded to the host trains as on the device; OOM recovery and the
// batch finder over sharded ranks. Checkpoints: test_shard_checkpoints.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/shard_runs.h"

namespace hotloop {
namespace {
using namespace test::shard;
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

// Many buckets (--bucket-mb 0.01: some 10 KB each): at stages 2 and 3 at
// most two buckets' whole gradients are being reduce-scattered at once
// (before, every bucket's lived until the step's end: the whole model's
// gradients at the peak), and the training is unsharded data parallel's.
TEST(ShardCli, Stages2And3HoldAtMostTwoBucketsWholeGradientsAtOnce) {
  test::TempDir dir;
  const int steps = 3;
  const std::string args = gpt_args(dir, steps) + " --bucket-mb 0.01";
  const std::string whole = (dir.path() / "whole").string();
  ASSERT_EQ(launch(args + " --shard 0", whole).exit_code, 0);
  const double p = summary(whole)["model_state_bytes"]["parameters"];
  for (const int stage : {2, 3}) {
    const std::string run = (dir.path() / fmt::format("s{}", stage)).string();
    const auto r = launch(args + " --shard " + std::to_string(stage), run);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto reducing = summary(run)["model_state_bytes"]["reduce_scatter"];
    const double largest = reducing["largest_bucket"].get<double>();
    const double peak = reducing["peak_whole"].get<double>();
    EXPECT_GT(largest, 0) << stage;
    EXPECT_LT(largest, p / 4) << stage; // many buckets
    EXPECT_GT(peak, largest / 2) << stage; // some bucket was whole
    EXPECT_LE(peak, 2 * largest) << stage;
    expect_same_training(whole, run, steps, 1e-6, 1e-7);
  }
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

// Stage 3: rank 1 alone runs out of memory inside a block, in its forward
// (the next block's gather under way) or its backward (the previous one's),
// in an earlier micro-batch or the last one (whose buckets it has started
// in part): it starts the rest of its buckets, waits for that gather, makes
// the rest of the step's gathers so that rank 0's find their partner, and
// both redo the step at half the micro-batch, as unsharded ranks do after
// an OOM anywhere in the step.
TEST(ShardCli, Stage3RecoversAnOutOfMemoryInsideABlockOnOneRank) {
  test::TempDir dir;
  const int steps = 3;
  const std::string args =
      "--model gpt-nano --layers 3 --width 32 --context 16 --data " +
      corpus(dir) + " --steps " + std::to_string(steps) +
      " --batch 16 --clip-grad-norm 0 --log-every 1" +
      // Many buckets: a healthy rank waits for its oldest reduce-scatter
      // (--reduces-in-flight) within a block's backward, before the
      // gathers of the blocks below it.
      " --bucket-mb 0.004" +
      " --dist-timeout 60"; // a gather left without its partner fails
  auto run = [&](const std::string& name,
                 const std::string& more,
                 int above,
                 const std::string& unit) {
    const std::string out = (dir.path() / name).string();
    const auto r = test::run_cli(
        "launch --nproc 2 --master-port " + std::to_string(test::free_port()) +
            " -- train " + args + more +
            " --threads 1 --workers 1 --device cpu --seed 3 --out " + out,
        "HOTLOOP_INJECT_OOM_ABOVE=" + std::to_string(above) +
            " HOTLOOP_INJECT_OOM_RANK=1" +
            (unit.empty() ? "" : " HOTLOOP_INJECT_OOM_UNIT=" + unit));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return out;
  };
  struct Case {
    std::string name;
    std::string more; // micro-batch 4: two a step; 8: one
    std::string unit;
  };
  // (Recomputed in backward, a checkpointed block's gathers stay in line.)
  const std::vector<Case> cases = {
      {"forward", " --micro-batch 4", "forward:1"},
      {"backward", " --micro-batch 4", "backward:1"},
      {"checkpointed",
       " --micro-batch 4 --activation-checkpointing blocks",
       "backward:1"},
      {"last-micro-batch", " --micro-batch 8", "backward:1"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const int micro = c.more.find("8") != std::string::npos ? 8 : 4;
    const std::string whole =
        run("whole-" + c.name, c.more + " --shard 0", micro / 2, "");
    const std::string sharded =
        run(c.name, c.more + " --shard 3", micro / 2, c.unit);
    const std::string report = test::slurp(sharded + "/oom_report-rank1.jsonl");
    EXPECT_NE(
        report.find(fmt::format(
            "injected: HOTLOOP_INJECT_OOM_ABOVE={} in unit 1's {}",
            micro / 2,
            c.unit.substr(0, c.unit.find(':')))),
        std::string::npos)
        << report;
    EXPECT_EQ(summary(sharded)["oom_recoveries"], 1);
    EXPECT_EQ(summary(sharded)["micro_batch"], micro / 2);
    // As stage 3 without an OOM: the global norm's sum aside, two ranks
    // sum alike in either order.
    expect_same_training(whole, sharded, steps, 1e-6, 1e-7);
  }
}

// A frozen first block has no buckets, but its output still needs a
// gradient (the embeddings train), so its backward hook frees the second
// block: under accumulation every micro-batch gathers the same blocks all
// the same, and stage 3 trains as unsharded data parallel does.
TEST(ShardCli, Stage3TrainsWithItsFirstBlockFrozenUnderAccumulation) {
  test::TempDir dir;
  const std::string args = gpt_args(dir, 3) + " --freeze 'transformer.h.0.*'";
  const std::string whole = (dir.path() / "whole").string();
  ASSERT_EQ(launch(args + " --shard 0", whole).exit_code, 0);
  const std::string sharded = (dir.path() / "sharded").string();
  const auto r = launch(args + " --shard 3", sharded);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  expect_same_training(whole, sharded, 3, 1e-6, 1e-7);
}

// Without OOM recovery an OOM on one rank stops every rank after the step's
// agreement, each naming it, rather than leaving the others to be stopped;
// at stage 3 too, from inside a block's forward.
TEST(ShardCli, WithRecoveryOffAnOutOfMemoryOnOneRankStopsEveryRankSayingSo) {
  test::TempDir dir;
  for (const int stage : {2, 3}) {
    const auto r = launch(
        gpt_args(dir, 4) + " --shard " + std::to_string(stage) +
            " --oom-recovery false --dist-timeout 60",
        (dir.path() / fmt::format("s{}", stage)).string(),
        std::string("HOTLOOP_INJECT_OOM_ABOVE=2 HOTLOOP_INJECT_OOM_RANK=1") +
            (stage == 3 ? " HOTLOOP_INJECT_OOM_UNIT=forward:0" : ""));
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
}

// A sharded batch trial that runs out of memory on one rank is off on every
// rank, so the search goes on in step and all find the same size.
// Stage 3's trials train at stage 3: the OOM is injected inside a block's
// backward, which only a stage-3 trial runs.
TEST(ShardCli, AShardedBatchTrialOutOfMemoryOnOneRankIsOffOnEveryRank) {
  test::TempDir dir;
  for (const int stage : {2, 3}) {
    const std::string run = (dir.path() / fmt::format("s{}", stage)).string();
    const auto r = launch(
        "--model gpt-nano --layers 2 --width 32 --context 16 --data " +
            corpus(dir) + " --steps 2 --batch auto --shard " +
            std::to_string(stage),
        run,
        std::string("HOTLOOP_INJECT_OOM_ABOVE=8 HOTLOOP_INJECT_OOM_RANK=1") +
            (stage == 3 ? " HOTLOOP_INJECT_OOM_UNIT=backward:0" : ""));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("batch    16: out of memory"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("batch     9: out of memory"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("max batch: 8\n"), std::string::npos) << r.out;
    EXPECT_EQ(summary(run)["shard"], stage);
  }
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

} // namespace hotloop
