#pragma once
// The ZeRO tests' runs from the command line (tests/apps/test_shard_*.cpp):
// a small text corpus, `hotloop launch --nproc N -- train ... --out RUN`
// over Gloo on loopback, and the comparisons of two runs' per-step losses,
// checkpoints and final weights.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/train/checkpoint_file.h"
#include "hotloop/train/checkpoint_shards.h"
#include "support/cli_process.h"
#include "support/free_port.h"
#include "support/temp_dir.h"

namespace hotloop::test::shard {

inline std::string corpus(const test::TempDir& dir) {
  std::string text;
  for (int i = 0; i < 300; ++i) {
    text += i % 3 == 0 ? "to be or not to be.\n" : "that is the question.\n";
  }
  dir.write("corpus/a.txt", text);
  return "text:" + (dir.path() / "corpus").string();
}

// `hotloop launch --nproc 2 -- train ARGS --out RUN`.
// `env`: VAR=value pairs for the job.
inline test::CliResult launch(
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

inline std::vector<double> losses(const std::string& run) {
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

inline nlohmann::json summary(const std::string& run) {
  return nlohmann::json::parse(test::slurp(run + "/summary.json"));
}

inline std::string checkpoint_path(const std::string& run, int step) {
  return fmt::format("{}/checkpoints/step-{:08d}.safetensors", run, step);
}

// The checkpoint with its optimizer state whole (a sharded run's put back
// together from its shard files).
inline train::Checkpoint last_checkpoint(const std::string& run, int step) {
  return train::load_whole_checkpoint(checkpoint_path(run, step));
}

// The same names in the same order, the values within rtol (relative) /
// atol; rtol 0: bit for bit.
inline void expect_same_tensors(
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
inline void expect_same_training(
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
inline void expect_same_checkpoints(
    const std::string& a,
    const std::string& b,
    int step) {
  const auto ca = last_checkpoint(a, step);
  const auto cb = last_checkpoint(b, step);
  expect_same_tensors(ca.model, cb.model, 0, 0);
  expect_same_tensors(ca.optimizer, cb.optimizer, 0, 0);
}

inline std::string gpt_args(const test::TempDir& dir, int steps) {
  return "--model gpt-nano --layers 2 --width 32 --context 16 --data " +
      corpus(dir) + " --steps " + std::to_string(steps) +
      " --batch 16 --micro-batch 4 --clip-grad-norm 0.5 --lr 0.003 --log-every 1";
}

} // namespace hotloop::test::shard
