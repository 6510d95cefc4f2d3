// A sharded run's checkpoints (--shard) from the command line, with real
// processes and Gloo over loopback: each rank writes its part (the optimizer
// state; at stage 3 the blocks' weights too) into a file of its own beside
// the checkpoint; the run resumes exactly from it, and unsharded, at
// another stage and at another number of ranks; a save killed part-way
// resumes from the one before; a missing shard file is refused by name;
// consolidated into one file it resumes exactly; --init reads a stage-3
// checkpoint's blocks from its shard files.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "support/shard_runs.h"

namespace hotloop {
namespace {
using namespace test::shard;
} // namespace

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
