// Language models from the command line: train a small GPT on text, sample
// from its checkpoint (the KV cache and the plain path agree), and the
// errors a user meets: a bad token file, ids past the vocabulary, an image
// model on tokens, a model with no tokenizer for it; tune batch's unit.

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/cli_process.h"
#include "support/temp_dir.h"

namespace hotloop {
namespace {

using test::run_cli;

std::string corpus(const test::TempDir& dir) {
  std::string text;
  for (int i = 0; i < 300; ++i) {
    text += i % 2 == 0 ? "to be or not to be.\n" : "that is the question.\n";
  }
  dir.write("corpus/a.txt", text);
  return "text:" + (dir.path() / "corpus").string();
}

TEST(TrainCliLm, TrainsAGptOnTextAndGeneratesFromItsCheckpoint) {
  test::TempDir dir;
  const std::string run = (dir.path() / "run").string();
  const auto r = run_cli(
      "train --model gpt-nano --layers 1 --width 32 --context 16 --data " +
      corpus(dir) +
      " --steps 60 --warmup-steps 5 --batch 16 --threads 1 --out " + run);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The recipe (AdamW, beta2 0.95, ...) and the LM figures.
  const auto recipe = r.out.find("recipe for gpt-nano: ");
  ASSERT_NE(recipe, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("optimizer=adamw", recipe), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bits per byte"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos) << r.out;
  const auto summary =
      nlohmann::json::parse(test::slurp(run + "/summary.json"));
  EXPECT_GT(summary["tokens_per_s"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(
      summary["tokens_per_s"].get<double>(),
      summary["images_per_s"].get<double>() * 16);
  EXPECT_GT(summary["model_flops_per_s"].get<double>(), 0);
  EXPECT_LT(summary["val_bits_per_byte"].get<double>(), 4.0); // 8 at chance
  const auto config = nlohmann::json::parse(test::slurp(run + "/config.json"));
  EXPECT_EQ(config["model"]["layers"], 1);
  EXPECT_EQ(config["model"]["vocab"], 256);

  // generate: the size comes from the run's config.json.
  const std::string weights = run + "/checkpoints/step-00000060.safetensors";
  const std::string args = "generate --weights " + weights +
      " --prompt 'to be' --tokens 40 --seed 3";
  const auto cached = run_cli(args, {}, false);
  const auto plain = run_cli(args + " --no-cache", {}, false);
  ASSERT_EQ(cached.exit_code, 0) << cached.out;
  EXPECT_EQ(cached.out, plain.out);
  EXPECT_TRUE(cached.out.starts_with("to be")) << cached.out;
  EXPECT_EQ(cached.out.size(), 5u + 40u + 1u); // prompt, tokens, newline
  // A model the file is not: a clear error, exit 1.
  const auto wrong = run_cli(
      "generate --weights " + weights + " --layers 2 --prompt x --tokens 1");
  EXPECT_EQ(wrong.exit_code, 1) << wrong.out;
  EXPECT_NE(wrong.out.find("transformer.h.1"), std::string::npos) << wrong.out;
}

TEST(TrainCliLm, TuneBatchStatesTokensPerSecond) {
  test::TempDir dir;
  const auto r = run_cli(
      "tune batch --model gpt-nano --layers 1 --width 32 --context 16 --data " +
      corpus(dir) + " --max-batch 4 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("images/s"), std::string::npos) << r.out;
}

TEST(TrainCliLm, GenerateRefusesANonByteModelWithoutItsTokenizer) {
  test::TempDir dir;
  const std::string run = (dir.path() / "run").string();
  ASSERT_EQ(
      run_cli(
          "train --model gpt-nano --layers 1 --width 32 --context 16 --vocab 512 --data " +
          corpus(dir) + " --steps 2 --batch 4 --threads 1 --out " + run)
          .exit_code,
      0);
  const std::string weights = run + "/checkpoints/step-00000002.safetensors";
  const auto r = run_cli("generate --weights " + weights + " --tokens 2");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--tokenizer bpe:DIR"), std::string::npos) << r.out;
  // Named, the byte tokenizer is taken at its word.
  EXPECT_EQ(
      run_cli("generate --weights " + weights + " --tokens 2 --tokenizer bytes")
          .exit_code,
      0);
}

TEST(TrainCliLm, BadTokenDataStopsBeforeTrainingNamingTheFileAndOffset) {
  test::TempDir dir;
  // An llm.c shard whose header promises more tokens than it holds.
  std::vector<std::uint8_t> bytes(1024 + 2 * 100);
  const std::int32_t header[3] = {20240520, 1, 500};
  std::memcpy(bytes.data(), header, sizeof(header));
  test::write_bytes(dir.path() / "cut" / "x_train_000.bin", bytes);
  auto r = run_cli(
      "train --model gpt-nano --data tokens:" + (dir.path() / "cut").string() +
      " --steps 1 --out " + (dir.path() / "a").string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(
      r.out.find("x_train_000.bin: the header (byte 8) says 500 tokens"),
      std::string::npos)
      << r.out;

  // Token 700 in a model of vocabulary 512.
  std::vector<std::uint16_t> tokens(4000, 5);
  tokens[2345] = 700;
  std::vector<std::uint8_t> raw(2 * tokens.size());
  std::memcpy(raw.data(), tokens.data(), raw.size());
  test::write_bytes(dir.path() / "big" / "train.bin", raw);
  r = run_cli(
      "train --model gpt-nano --vocab 512 --data tokens:" +
      (dir.path() / "big" / "train.bin").string() +
      " --steps 1 --no-eval --out " + (dir.path() / "b").string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(
      r.out.find(
          "train.bin: token id 700 at token 2345 (byte 4690) is outside the model's vocabulary of 512"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--vocab 701"), std::string::npos) << r.out;

  // An image model on token data.
  r = run_cli(
      "train --model mlp --data tokens:" +
      (dir.path() / "big" / "train.bin").string() + " --steps 1 --out " +
      (dir.path() / "c").string());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("is token data"), std::string::npos) << r.out;
}

} // namespace
} // namespace hotloop
