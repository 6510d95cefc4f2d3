// `hotloop train` as users run it: killed with SIGKILL and resumed, stopped
// with SIGTERM, configured from a TOML file with bad keys.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <ATen/ops/equal.h>

#include "hotloop/train/checkpoint_file.h"
#include "support/cli_process.h"
#include "support/scoped_env.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"
#include "test_paths.h"

namespace hotloop {
namespace {

// A few seconds of training on 28 px synthetic data, checkpointing often.
std::vector<std::string> train_args(const std::string& out) {
  return {
      HOTLOOP_TEST_BINARY,
      "train",
      "--data",
      "synthetic:1280x1x28x28",
      "--model",
      "cnn-small",
      "--epochs",
      "3",
      "--batch",
      "32",
      "--optimizer",
      "adamw",
      "--lr",
      "1e-3",
      "--threads",
      "1",
      "--workers",
      "1",
      "--seed",
      "3",
      "--checkpoint-every",
      "5",
      "--out",
      out};
}

using test::run_to_end;
using test::wait_exit;

// Waits until `path` has at least `lines` lines (the run is that far);
// false when it has not within two minutes.
bool wait_for_lines(const std::filesystem::path& path, long lines) {
  return test::wait_until(
      [&] {
        std::ifstream in(path);
        return std::count(std::istreambuf_iterator<char>(in), {}, '\n') >=
            lines;
      },
      std::chrono::minutes(2));
}

nlohmann::json summary(const std::filesystem::path& run) {
  std::ifstream in(run / "summary.json");
  return nlohmann::json::parse(in);
}

} // namespace

TEST(TrainCli, KilledWithSigkillAndResumedEndsWhereAnUninterruptedRunEnds) {
  test::TempDir dir;
  const auto full = dir.path() / "full";
  ASSERT_EQ(
      run_to_end(train_args(full.string()), (dir.path() / "full.log").string()),
      0)
      << test::slurp(dir.path() / "full.log");

  // Kill it twice at different moments (between and during checkpoints), then
  // let it finish.
  const auto killed = dir.path() / "killed";
  for (const long lines : {8L, 57L}) {
    auto args = train_args(killed.string());
    args.push_back("--resume");
    args.push_back("auto");
    const pid_t pid =
        test::spawn_logged(args, (dir.path() / "killed.log").string());
    ASSERT_TRUE(wait_for_lines(killed / "metrics.jsonl", lines));
    ::kill(pid, SIGKILL);
    EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
  }
  auto args = train_args(killed.string());
  args.push_back("--resume");
  args.push_back("auto");
  ASSERT_EQ(run_to_end(args, (dir.path() / "resumed.log").string()), 0)
      << test::slurp(dir.path() / "resumed.log");
  EXPECT_NE(
      test::slurp(dir.path() / "resumed.log").find("resumed from"),
      std::string::npos);

  const auto a = summary(full);
  const auto b = summary(killed);
  EXPECT_EQ(a["steps"], b["steps"]);
  EXPECT_EQ(
      a["val_loss"],
      b["val_loss"]); // bit for bit: same seed, same threads, CPU
  EXPECT_EQ(a["val_accuracy"], b["val_accuracy"]);
}

// cnn-small (BatchNorm, dropout) for 12 steps, checkpointing every 4, with
// the one evaluation at the end: small enough to run nine times.
std::vector<std::string> kill_args(const std::string& out) {
  return {
      HOTLOOP_TEST_BINARY,
      "train",
      "--data",
      "synthetic:512x1x28x28",
      "--model",
      "cnn-small",
      "--steps",
      "12",
      "--batch",
      "32",
      "--optimizer",
      "adamw",
      "--lr",
      "2e-3",
      "--schedule",
      "cosine",
      "--augment",
      "default",
      "--threads",
      "1",
      "--workers",
      "1",
      "--seed",
      "4",
      "--checkpoint-every",
      "4",
      "--log-every",
      "0",
      "--out",
      out};
}

// Killed (SIGKILL, from inside, at an exact moment: HOTLOOP_INJECT_KILL) in
// the middle of a step, while a checkpoint is being written, just after the
// last checkpoint, and during the final evaluation, then resumed with
// --resume auto: each ends where the uninterrupted run ends, bit for bit,
// with the same evaluation, a metrics file that has each step once, and
// summary figures that are not zero, naming those from before the kill.
TEST(TrainCli, AKillAtAnyMomentResumesToTheUninterruptedRunsResult) {
  test::TempDir dir;
  const auto full = dir.path() / "full";
  const std::string log = (dir.path() / "log").string();
  ASSERT_EQ(run_to_end(kill_args(full.string()), log), 0) << test::slurp(log);
  const auto want = summary(full);
  ASSERT_FALSE(want["val_loss"].is_null());

  for (const std::string kill :
       {"step:6", "checkpoint:8", "final-checkpoint", "final-evaluation"}) {
    SCOPED_TRACE(kill);
    const auto run = dir.path() / kill.substr(0, kill.find(':'));
    {
      test::ScopedEnv inject("HOTLOOP_INJECT_KILL", kill);
      EXPECT_EQ(run_to_end(kill_args(run.string()), log), 128 + SIGKILL)
          << test::slurp(log);
    }
    EXPECT_FALSE(std::filesystem::exists(run / "summary.json"));
    auto args = kill_args(run.string());
    args.insert(args.end(), {"--resume", "auto"});
    ASSERT_EQ(run_to_end(args, log), 0) << test::slurp(log);
    const std::string out = test::slurp(log);
    const auto got = summary(run);
    EXPECT_EQ(got["steps"], 12);
    EXPECT_EQ(got["val_loss"], want["val_loss"]) << out;
    EXPECT_EQ(got["val_accuracy"], want["val_accuracy"]);
    EXPECT_EQ(got["val_confusion"], want["val_confusion"]);
    EXPECT_EQ(got["train_loss"], want["train_loss"]);
    EXPECT_GT(got["images_per_s"].get<double>(), 0);
    EXPECT_GT(got["step_time_ms"]["median"].get<double>(), 0);
    EXPECT_GE(got["resumed_at"].get<int>(), 4);
    // The weights of the last checkpoint, tensor by tensor.
    const auto mine =
        train::load_checkpoint(
            (run / "checkpoints" / "step-00000012.safetensors").string())
            .model;
    const auto theirs =
        train::load_checkpoint(
            (full / "checkpoints" / "step-00000012.safetensors").string())
            .model;
    ASSERT_EQ(mine.size(), theirs.size());
    for (std::size_t i = 0; i < mine.size(); ++i) {
      EXPECT_TRUE(at::equal(mine[i].second, theirs[i].second)) << mine[i].first;
    }
    // Each step's line once, in order, and the one evaluation.
    std::int64_t last = 0;
    int evaluations = 0;
    std::ifstream metrics(run / "metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("loss")) {
        EXPECT_EQ(j["step"].get<std::int64_t>(), last + 1);
        last = j["step"].get<std::int64_t>();
      }
      evaluations += j.contains("val_loss") ? 1 : 0;
    }
    EXPECT_EQ(last, 12);
    EXPECT_EQ(evaluations, 1);
    const auto before = got["from_before_resume"];
    if (kill == "final-checkpoint") {
      // No step left to run: the rates and the evaluation are the earlier
      // part's, and say so.
      EXPECT_EQ(got["resumed_at"], 12);
      for (const char* figure :
           {"images_per_s", "val_loss", "train_loss", "step_time_ms"}) {
        EXPECT_NE(std::find(before.begin(), before.end(), figure), before.end())
            << figure << ": " << before.dump();
      }
      EXPECT_NE(out.find("from the part before it"), std::string::npos) << out;
    } else {
      EXPECT_EQ(
          std::find(before.begin(), before.end(), "images_per_s"), before.end())
          << before.dump();
    }
    if (kill == "checkpoint:8") {
      // The half-written checkpoint is cleaned up, and the run resumed from
      // the one before it.
      EXPECT_EQ(got["resumed_at"], 4);
      EXPECT_NE(out.find("an unfinished checkpoint"), std::string::npos) << out;
    }
  }
}

// The defaults train: the command a new user types, at a small batch. The
// defaults before the recipes (SGD at 0.1 with momentum, cosine, no warm-up,
// crop and flip) end at chance there, and the diagnosis says so.
TEST(TrainCli, TheDefaultsLearnAtBatch32AndTheOldOnesAreDiagnosedNotLearning) {
  test::TempDir dir;
  const std::string log = (dir.path() / "log").string();
  // The command the issue reported, plus `extra`.
  auto train = [&](const std::filesystem::path& out,
                   const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        HOTLOOP_TEST_BINARY,
        "train",
        "--model",
        "cnn-small",
        "--steps",
        "400",
        "--batch",
        "32",
        "--seed",
        "3",
        "--out",
        out.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_to_end(args, log);
  };
  const auto run = dir.path() / "run";
  ASSERT_EQ(train(run, {}), 0) << test::slurp(log);
  const auto s = summary(run);
  EXPECT_GE(s["val_accuracy"].get<double>(), 0.80) << s.dump();
  EXPECT_NE(s["diagnosis"], "not-learning") << s["telemetry"].dump();
  EXPECT_FALSE(s["telemetry"]["verdict_windows"].contains("not-learning"))
      << s["telemetry"].dump();
  const auto config = nlohmann::json::parse(test::slurp(run / "config.json"));
  EXPECT_EQ(config["sources"]["optimizer"], "recipe");
  EXPECT_EQ(config["sources"]["batch"], "flag");

  const auto old = dir.path() / "old";
  ASSERT_EQ(
      train(
          old,
          {"--optimizer",
           "sgd",
           "--lr",
           "0.1",
           "--momentum",
           "0.9",
           "--nesterov=false",
           "--weight-decay",
           "0",
           "--schedule",
           "cosine",
           "--augment",
           "default"}),
      0)
      << test::slurp(log);
  // Whether SGD at lr 0.1 recovers later differs between CPUs (an Intel
  // Xeon's kernels get it to ~28% by step 400, an AMD EPYC's not at all), so
  // what is asserted is the stall itself: windows past the warm-up diagnosed
  // not-learning, said in the log, and a far worse end than the defaults'.
  const auto o = summary(old);
  EXPECT_GE(o["telemetry"]["verdict_windows"].value("not-learning", 0), 1)
      << o["telemetry"].dump();
  EXPECT_LT(
      o["val_accuracy"].get<double>(), s["val_accuracy"].get<double>() - 0.2)
      << o.dump();
  EXPECT_NE(test::slurp(log).find("diagnosis: not-learning"), std::string::npos)
      << test::slurp(log);
}

// Where each value came from: the command line, the config file (unless a
// flag overrides it), the model's recipe, or the default.
TEST(TrainCli, TheResolvedConfigSaysWhereEachValueCameFrom) {
  test::TempDir dir;
  const auto config =
      dir.write("run.toml", "steps = 2\nlr = 0.01\nbatch = 64\nthreads = 1\n");
  const std::string log = (dir.path() / "log").string();
  const auto run = dir.path() / "run";
  ASSERT_EQ(
      run_to_end(
          {HOTLOOP_TEST_BINARY,
           "train",
           "--config",
           config.string(),
           "--data",
           "synthetic:128x1x28x28",
           "--model",
           "cnn-small",
           "--batch",
           "32",
           "--out",
           run.string()},
          log),
      0)
      << test::slurp(log);
  const auto c = nlohmann::json::parse(test::slurp(run / "config.json"));
  const auto& src = c["sources"];
  EXPECT_EQ(src["model"], "flag");
  EXPECT_EQ(src["batch"], "flag"); // in the file too: the flag won
  EXPECT_EQ(src["steps"], "config file");
  EXPECT_EQ(src["lr"], "config file");
  EXPECT_EQ(src["optimizer"], "recipe");
  EXPECT_EQ(src["schedule"], "recipe");
  EXPECT_EQ(src["seed"], "default");
  EXPECT_EQ(c["options"]["batch"], 32);
  EXPECT_EQ(c["options"]["lr"], 0.01); // the file's, not the recipe's
  EXPECT_EQ(c["options"]["optimizer"], "adamw");
  const std::string said = test::slurp(log);
  const auto recipe = said.find("recipe for cnn-small: ");
  ASSERT_NE(recipe, std::string::npos) << said;
  EXPECT_NE(said.find("optimizer=adamw", recipe), std::string::npos) << said;
  // The callbacks that observed the run are listed with their settings.
  EXPECT_EQ(c["callbacks"][0]["name"], "telemetry");
  EXPECT_EQ(c["callbacks"][0]["config"]["interval_s"], 1.0);
}

TEST(TrainCli, SigtermFinishesTheStepCheckpointsAndExitsZeroSayingHowToResume) {
  test::TempDir dir;
  const auto run = dir.path() / "run";
  const std::string log = (dir.path() / "log").string();
  const pid_t pid = test::spawn_logged(train_args(run.string()), log);
  ASSERT_TRUE(wait_for_lines(run / "metrics.jsonl", 3));
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 0) << test::slurp(log);
  EXPECT_NE(test::slurp(log).find("--resume auto"), std::string::npos)
      << test::slurp(log);
  EXPECT_TRUE(summary(run)["stopped_early"].get<bool>());
  EXPECT_FALSE(summary(run)["last_checkpoint"].get<std::string>().empty());
}

TEST(TrainCli, ConfigFileKeysWorkFlagsOverrideThemAndBadKeysExitTwo) {
  test::TempDir dir;
  const auto config = dir.write(
      "run.toml",
      "data = \"synthetic:256x1x8x8\"\nmodel = \"mlp\"\nsteps = 2\nbatch = 32\nmicro-batch = 8\n");
  const std::string log = (dir.path() / "log").string();
  const auto out = (dir.path() / "run").string();
  ASSERT_EQ(
      run_to_end(
          {HOTLOOP_TEST_BINARY,
           "train",
           "--config",
           config.string(),
           "--steps",
           "3",
           "--out",
           out,
           "--threads",
           "1"},
          log),
      0)
      << test::slurp(log);
  const auto s = summary(out);
  EXPECT_EQ(s["steps"], 3); // the flag won
  EXPECT_EQ(s["accum_steps"], 4); // from the file

  const auto bad_key = dir.write("bad.toml", "modle = \"mlp\"\n");
  EXPECT_EQ(
      run_to_end(
          {HOTLOOP_TEST_BINARY, "train", "--config", bad_key.string()}, log),
      2);
  EXPECT_NE(test::slurp(log).find("modle"), std::string::npos)
      << test::slurp(log);
  const auto bad_type = dir.write("type.toml", "steps = \"many\"\n");
  EXPECT_EQ(
      run_to_end(
          {HOTLOOP_TEST_BINARY, "train", "--config", bad_type.string()}, log),
      2);
  EXPECT_NE(test::slurp(log).find("steps"), std::string::npos)
      << test::slurp(log);
  // A syntax error names the file, line and column; a missing file and a
  // value that is not a scalar name the file and what is wrong. All exit 2
  // before any work.
  const auto syntax =
      dir.write("syntax.toml", "model = \"mlp\"\nsteps = = 3\n");
  EXPECT_EQ(
      run_to_end(
          {HOTLOOP_TEST_BINARY, "train", "--config", syntax.string()}, log),
      2);
  EXPECT_NE(test::slurp(log).find(syntax.string() + ":2:"), std::string::npos)
      << test::slurp(log);
  const std::string missing = (dir.path() / "nowhere.toml").string();
  EXPECT_EQ(
      run_to_end({HOTLOOP_TEST_BINARY, "train", "--config", missing}, log), 2);
  EXPECT_NE(
      test::slurp(log).find("cannot read the config file " + missing),
      std::string::npos)
      << test::slurp(log);
  const auto table =
      dir.write("list.toml", "model = [\"mlp\", \"cnn-small\"]\n");
  EXPECT_EQ(
      run_to_end(
          {HOTLOOP_TEST_BINARY, "train", "--config", table.string()}, log),
      2);
  EXPECT_NE(
      test::slurp(log).find(
          "key 'model' has type array; it must be a string, number or boolean"),
      std::string::npos)
      << test::slurp(log);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "runs"));
  EXPECT_EQ(
      run_to_end(
          {HOTLOOP_TEST_BINARY,
           "train",
           "--data",
           "synthetic:64x1x8x8",
           "--batch",
           "30",
           "--micro-batch",
           "8"},
          log),
      2);
  EXPECT_NE(test::slurp(log).find("not divisible"), std::string::npos)
      << test::slurp(log);
}

// toml++ 3.3 reaches undefined behaviour (an assertion where assertions are
// on) on some text that is not TOML: apps/hotloop/toml_file.h refuses it
// first by TOML's own rules, naming the line, and lets every valid form
// through (fuzz/toml_config_fuzzer.cpp found these).
TEST(TrainCli, ConfigTextTomlPlusPlusCannotReadSafelyIsRefusedByLine) {
  test::TempDir dir;
  const std::string log = (dir.path() / "log").string();
  auto exit_and_log = [&](const std::string& name, const std::string& text) {
    const auto file = dir.write(name, text);
    const int rc = run_to_end(
        {HOTLOOP_TEST_BINARY, "train", "--config", file.string()}, log);
    return std::make_pair(rc, test::slurp(log));
  };
  struct Refused {
    const char* file;
    std::string text;
    const char* error;
  };
  const Refused refused[] = {
      {"header.toml",
       "lr = 1\n[\nsteps = 2\n",
       ":2: a table header must start"},
      {"array.toml", "lr = 1\n[[{a = 1}]]\n", ":2: a table header must start"},
      {"ascii.toml",
       "lr = \xcd\x9d-42\n",
       ":1: a character past ASCII outside"},
      {"quote.toml",
       "lr = 3e3'''\xef\xbb\xb8\n",
       ":1: a quote or bracket where none can start"},
      {"nul.toml", std::string("lr = 1\0\n", 8), ":1: a control character"},
      {"key.toml",
       "lr = 1\n\"\"\"k\"\"\" = 1\n",
       ":2: a key cannot be a multi-line"},
      {"bracket.toml",
       "a = 0_T['\xd0\x86'\n",
       ":1: a quote or bracket where none can start"},
      {"number.toml",
       "l = +0.\"\xd0\x93\"\n",
       ":1: a quote or bracket where none can start"},
      {"equals.toml",
       "-=-=\"\"\"\"\"\xef\xb3\xbf\n",
       ":1: a second '=' on a line"},
      {"escape.toml",
       "name = \"\"\"a\\\xef\xbb\xbb\"\"\"\n",
       ":1: a character past ASCII after a backslash"},
  };
  for (const Refused& r : refused) {
    const auto [rc, out] = exit_and_log(r.file, r.text);
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find(std::string(r.file) + r.error), std::string::npos)
        << out;
  }
  // Valid TOML with the forms the check must read past (quotes in comments
  // and strings, a line-ending backslash, two quotes closing a string, a
  // line in a string that starts with '['): the first error is the unknown
  // key, after the whole file was read.
  const auto [rc, out] = exit_and_log(
      "valid.toml",
      "# a comment's ''' and \"\"\" and \xc3\xa9\n"
      "modle = \"\"\"two \"quotes\" and \xc3\xa9\n"
      "[not a header \\\n"
      "   x \xc3\xbc\"\"\"\"\"  # ''' \n"
      "lr = 'it\"s'\n");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("unknown key 'modle'"), std::string::npos) << out;
}

TEST(TrainCli, CudaGraphsFlagsAreCheckedBeforeAnyWork) {
  test::TempDir dir;
  const std::string log = (dir.path() / "log").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--cuda-graphs", "maybe"},
       "--cuda-graphs maybe: expected auto, on or off"},
      {{"--cuda-graphs", "on", "--device", "cpu"}, "needs a CUDA device"},
      {{"--readback-every", "-2"}, "readback-every"}};
  for (const auto& [flags, message] : bad) {
    std::vector<std::string> args = {
        HOTLOOP_TEST_BINARY, "train", "--data", "synthetic:64x1x8x8"};
    args.insert(args.end(), flags.begin(), flags.end());
    EXPECT_EQ(run_to_end(args, log), 2) << flags[0];
    EXPECT_NE(test::slurp(log).find(message), std::string::npos)
        << test::slurp(log);
  }
}

// --cpu-conv: a bad value is bad usage naming the flag; `gemm` (every
// layer through im2col + GEMM) and `onednn` (none) both train resnet18-small
// on 16 px images, and the choice is written to the resolved configuration.
TEST(TrainCli, CpuConvFlagIsCheckedTrainsAndIsRecorded) {
  test::TempDir dir;
  const std::string log = (dir.path() / "log").string();
  EXPECT_EQ(
      run_to_end(
          {HOTLOOP_TEST_BINARY,
           "train",
           "--data",
           "synthetic:64x1x8x8",
           "--cpu-conv",
           "winograd"},
          log),
      2);
  EXPECT_NE(
      test::slurp(log).find(
          "--cpu-conv winograd: expected auto, onednn or gemm"),
      std::string::npos)
      << test::slurp(log);
  for (const std::string mode : {"gemm", "onednn"}) {
    const auto out = (dir.path() / mode).string();
    ASSERT_EQ(
        run_to_end(
            {HOTLOOP_TEST_BINARY,
             "train",
             "--data",
             "synthetic:32x1x16x16",
             "--model",
             "resnet18-small",
             "--batch",
             "8",
             "--steps",
             "2",
             "--threads",
             "1",
             "--no-eval",
             "--cpu-conv",
             mode,
             "--out",
             out},
            log),
        0)
        << test::slurp(log);
    const auto config = nlohmann::json::parse(
        test::slurp(std::filesystem::path(out) / "config.json"));
    EXPECT_EQ(config["options"]["cpu-conv"], mode);
    EXPECT_EQ(summary(out)["steps"], 2);
  }
}

} // namespace hotloop
