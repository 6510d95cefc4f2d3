// A run folder's files (train/run_folder.h): one owner for their names, and
// what a run on token data keeps whoever drives it (a C++ Trainer, LoopRun).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include "hotloop/data/data_spec.h"
#include "hotloop/data/tokens/token_data.h"
#include "hotloop/errors.h"
#include "hotloop/model/model.h"
#include "hotloop/train/loop_run.h"
#include "hotloop/train/run_folder.h"
#include "hotloop/train/trainer.h"
#include "support/byte_stand_ins.h"
#include "support/temp_dir.h"

namespace hotloop::train {
namespace {

namespace fs = std::filesystem;

// tokens:DIR as `pack --tokenizer` leaves it: headerless uint16 train and val
// files of byte ids, and a byte-level tokenizer.json beside them.
std::string token_folder(const test::TempDir& dir) {
  std::vector<std::uint16_t> ids(2000);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<std::uint16_t>('a' + i % 26);
  }
  const std::string bytes(
      reinterpret_cast<const char*>(ids.data()), 2 * ids.size());
  dir.write("tokens/train.bin", bytes);
  dir.write("tokens/val.bin", bytes.substr(0, 400));
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) {
    vocab[test::stand_in(b)] = b;
  }
  dir.write(
      "tokens/tokenizer.json",
      nlohmann::json({{"model",
                       {{"type", "BPE"},
                        {"vocab", vocab},
                        {"merges", nlohmann::json::array()}}},
                      {"pre_tokenizer",
                       {{"type", "ByteLevel"},
                        {"add_prefix_space", false},
                        {"use_regex", true}}},
                      {"added_tokens", nlohmann::json::array()},
                      {"normalizer", nullptr},
                      {"post_processor", nullptr}})
          .dump());
  return (dir.path() / "tokens").string();
}

TEST(RunFolder, NamesEveryFileOfARun) {
  const RunFolder run("runs/a");
  EXPECT_EQ(run.config(), "runs/a/config.json");
  EXPECT_EQ(run.metrics(), "runs/a/metrics.jsonl");
  EXPECT_EQ(run.telemetry(), "runs/a/telemetry.jsonl");
  EXPECT_EQ(run.summary(), "runs/a/summary.json");
  EXPECT_EQ(run.report(), "runs/a/report.html");
  EXPECT_EQ(run.weights(), "runs/a/model.safetensors");
  EXPECT_EQ(run.checkpoints(), "runs/a/checkpoints");
  EXPECT_EQ(run.adapter(), "runs/a/adapter");
  EXPECT_EQ(run.tokenizer(), "runs/a/tokenizer");
  EXPECT_EQ(run.batch_finder(), "runs/a/batch_finder.json");
  const auto around =
      RunFolder::around("runs/a/checkpoints/step-00000010.safetensors");
  ASSERT_EQ(around.size(), 2u);
  EXPECT_EQ(around[0].dir(), "runs/a/checkpoints");
  EXPECT_EQ(around[1].dir(), "runs/a");
}

TEST(RunFolder, AFolderThatCannotBeMadeIsADataErrorNamingIt) {
  test::TempDir dir;
  dir.write("file", "not a folder");
  const std::string bad = (dir.path() / "file" / "run").string();
  try {
    RunFolder(bad).create();
    FAIL() << "a run folder inside a file was made";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

// The C++ Trainer on token data packed with a tokenizer keeps it in
// RUN/tokenizer/, as `hotloop train` does (generate decodes with it).
TEST(RunFolder, ATrainerOnTokenDataKeepsItsTokenizer) {
  test::TempDir dir;
  const data::DataSpec spec =
      data::parse_data_spec("tokens:" + token_folder(dir));
  const std::shared_ptr<const data::Dataset> train =
      data::open_dataset(spec, data::Split::Train);
  TrainerOptions o;
  o.model.name = "gpt-nano";
  o.model.lm.layers = 1;
  o.model.lm.context = 16;
  o.model.lm.vocab = 256;
  o.batch = 4;
  o.steps = 1;
  o.device = "cpu";
  o.threads = 1;
  o.out_dir = (dir.path() / "run").string();
  o.keep_checkpoints = 0;
  torch::manual_seed(0);
  Trainer trainer(model::make_model(o.model), train, nullptr, o);
  trainer.fit();
  EXPECT_TRUE(fs::is_regular_file(dir.path() / "run/tokenizer/tokenizer.json"));
  EXPECT_TRUE(fs::is_regular_file(RunFolder(o.out_dir).config()));
  EXPECT_TRUE(fs::is_regular_file(RunFolder(o.out_dir).summary()));
}

// LoopRun (Python's hotloop.Run) keeps the tokenizer it is given.
TEST(RunFolder, ALoopRunKeepsTheTokenizerItIsGiven) {
  test::TempDir dir;
  const std::string tokens = token_folder(dir);
  LoopRunOptions o;
  o.out_dir = (dir.path() / "run").string();
  o.callbacks.telemetry.enabled = false;
  o.tokenizer_files = {tokens + "/tokenizer.json"};
  {
    LoopRun run(o);
    run.finish();
  }
  EXPECT_TRUE(fs::is_regular_file(dir.path() / "run/tokenizer/tokenizer.json"));
}

} // namespace
} // namespace hotloop::train
