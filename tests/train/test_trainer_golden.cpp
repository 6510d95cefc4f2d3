// The trainer's behaviour pinned bit for bit: for fixed seeds, the losses,
// gradient norms, loss scales and final weights of six runs, recorded once
// (HOTLOOP_GOLDEN_RECORD=1 rewrites tests/train/golden/trainer.json) and
// compared exactly afterwards. Written before the trainer was split into its
// parts (issue 19): the split, and any later change meant to be a pure
// refactoring, must leave every number here unchanged on the CPU.
//
// Floating-point results depend on the CPU (oneDNN and MKL pick their kernels
// by its vendor and vector unit), so the comparison runs only on the CPU
// model the file was recorded on, with the capability ATen reports there;
// elsewhere it is skipped, saying so.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <ATen/Version.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/model/weights.h"
#include "hotloop/train/checkpoint_file.h"
#include "hotloop/train/trainer.h"
#include "support/cli_process.h"
#include "support/scoped_env.h"
#include "support/temp_dir.h"
#include "support/train_fixtures.h"
#include "test_paths.h"

namespace hotloop::train {
namespace {

namespace fs = std::filesystem;
using test::make;
using test::synthetic;

const fs::path kGoldenFile =
    fs::path(HOTLOOP_TEST_SOURCE_DIR) / "train" / "golden" / "trainer.json";

// The CPU's model name (/proc/cpuinfo), e.g. "AMD EPYC".
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("model name")) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown";
}

bool recording() {
  const char* v = std::getenv("HOTLOOP_GOLDEN_RECORD");
  return v != nullptr && std::string(v) == "1";
}

// FNV-1a over the tensor's bytes in its contiguous (row-major) layout: equal
// hashes mean equal bits, whatever memory format training left it in.
std::string bits_of(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kCPU).contiguous();
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  const std::size_t n = c.numel() * c.element_size();
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) {
    h = (h ^ p[i]) * 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

nlohmann::json weights_of(const model::StateDict& state) {
  nlohmann::json w = nlohmann::json::object();
  for (const auto& [name, t] : state) {
    w[name] = bits_of(t);
  }
  return w;
}

// The per-step figures of a run directory's metrics.jsonl, in step order.
nlohmann::json steps_of(const fs::path& run) {
  nlohmann::json out = {
      {"losses", nlohmann::json::array()},
      {"grad_norms", nlohmann::json::array()},
      {"loss_scales", nlohmann::json::array()},
      {"skipped", nlohmann::json::array()}};
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) {
      out["losses"].push_back(j["loss"]);
      out["grad_norms"].push_back(j.value("grad_norm", -1.0));
      out["loss_scales"].push_back(j.value("loss_scale", 0.0));
      out["skipped"].push_back(j.value("skipped", false));
    } else if (j.contains("val_loss")) {
      out["val_loss"] = j["val_loss"];
      out["val_accuracy"] = j["val_accuracy"];
    } else if (j.value("event", "") == "oom_recovery") {
      out["oom_recovery_at"].push_back(j["step"]);
    }
  }
  return out;
}

// cnn-small (BatchNorm, dropout: buffers and the generator matter) on
// synthetic 28x28 images with crop/flip augmentation, AdamW under a cosine
// schedule, clipping on so that every step reports its gradient norm.
TrainerOptions golden_options(const fs::path& out) {
  TrainerOptions o;
  o.model.name = "cnn-small";
  o.model.image.in_channels = 1;
  o.model.image.size = 28;
  o.model.image.num_classes = 10;
  o.batch = 32;
  o.steps = 8;
  o.device = "cpu";
  o.threads = 1;
  o.seed = 5;
  o.out_dir = out.string();
  o.optimizer.kind = OptimizerKind::AdamW;
  o.optimizer.weight_decay = 0.01;
  o.schedule.kind = ScheduleKind::Cosine;
  o.schedule.lr = 2e-3;
  o.clip_grad_norm = 5.0;
  o.loader.workers = 1;
  o.loader.resident = data::Resident::Off;
  o.loader.augment = data::Augment::Default;
  return o;
}

nlohmann::json run_case(
    TrainerOptions o,
    bool with_val,
    const std::atomic<bool>* stop = nullptr) {
  const auto train = synthetic("synthetic:384x1x28x28");
  const auto val =
      with_val ? synthetic("synthetic:96x1x28x28", data::Split::Val) : nullptr;
  auto m = make(o);
  Trainer(m, train, val, o).fit(stop);
  nlohmann::json j = steps_of(o.out_dir);
  j["weights"] = weights_of(model::state_dict(*m));
  return j;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Every case, run now.
nlohmann::json run_all(const fs::path& dir) {
  nlohmann::json cases;
  cases["eager"] = run_case(golden_options(dir / "eager"), true);

  TrainerOptions accum = golden_options(dir / "accum");
  accum.micro_batch = 8; // 4 micro-batches per step
  cases["accumulation_4"] = run_case(accum, false);

  {
    // 32 -> 16 at the first step: the step is redone as 2 x 16.
    test::ScopedEnv inject("HOTLOOP_INJECT_OOM_ABOVE", "16");
    cases["oom_recovery"] = run_case(golden_options(dir / "oom"), false);
  }
  {
    // The loss scaler's path: steps 2 and 3 overflow, are skipped, and halve
    // the scale each time.
    TrainerOptions scaled = golden_options(dir / "scaled");
    scaled.loss_scaling = LossScaling::On;
    test::ScopedEnv inject("HOTLOOP_INJECT_OVERFLOW_STEPS", "2,3");
    cases["loss_scaler_overflow"] = run_case(scaled, false);
  }
  {
    // Stopped after its first step (the flag is up before it starts), then
    // resumed from that checkpoint to the end.
    TrainerOptions resume = golden_options(dir / "resume");
    std::atomic<bool> stop{true};
    run_case(resume, true, &stop);
    resume.resume = "auto";
    cases["resume_mid_run"] = run_case(resume, true);
  }
  {
    // Two Gloo ranks as separate processes (hotloop launch), every option
    // given on the command line.
    const fs::path out = dir / "ranks";
    const std::string log = (dir / "ranks.log").string();
    const std::vector<std::string> args = {
        HOTLOOP_TEST_BINARY,
        "launch",
        "--nproc",
        "2",
        "--master-port",
        std::to_string(free_port()),
        "--",
        "train",
        "--model",
        "cnn-small",
        "--data",
        "synthetic:384x1x28x28",
        "--steps",
        "6",
        "--batch",
        "32",
        "--optimizer",
        "adamw",
        "--lr",
        "2e-3",
        "--schedule",
        "cosine",
        "--weight-decay",
        "0.01",
        "--warmup-steps",
        "0",
        "--momentum",
        "0.9",
        "--label-smoothing",
        "0",
        "--clip-grad-norm",
        "5",
        "--augment",
        "default",
        "--threads",
        "1",
        "--workers",
        "1",
        "--resident",
        "off",
        "--device",
        "cpu",
        "--seed",
        "5",
        "--log-every",
        "0",
        "--checkpoint-every",
        "6",
        "--no-eval",
        "--out",
        out.string()};
    const pid_t pid = test::spawn_logged(args, log);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << test::slurp(log);
    nlohmann::json j = steps_of(out);
    const auto checkpoints = list_checkpoints((out / "checkpoints").string());
    if (!checkpoints.empty()) {
      j["weights"] = weights_of(load_checkpoint(checkpoints.front()).model);
    }
    cases["gloo_2_ranks"] = j;
  }
  return cases;
}

} // namespace

TEST(TrainerGolden, LossesGradNormsAndWeightsAreBitIdenticalToTheRecording) {
  const std::string capability = at::get_cpu_capability();
  if (!recording()) {
    ASSERT_TRUE(fs::exists(kGoldenFile))
        << kGoldenFile << " is missing: record it with HOTLOOP_GOLDEN_RECORD=1";
  }
  nlohmann::json want;
  if (!recording()) {
    std::ifstream in(kGoldenFile);
    want = nlohmann::json::parse(in);
    if (want["cpu_capability"] != capability || want["cpu"] != cpu_model()) {
      GTEST_SKIP() << "recorded on " << want["cpu"] << " ("
                   << want["cpu_capability"] << "), this is " << cpu_model()
                   << " (" << capability << "): its kernels round differently";
    }
  }
  test::TempDir dir;
  const nlohmann::json got = run_all(dir.path());
  if (recording()) {
    fs::create_directories(kGoldenFile.parent_path());
    std::ofstream(kGoldenFile)
        << nlohmann::
               json{{"cpu", cpu_model()}, {"cpu_capability", capability}, {"cases", got}}
                   .dump(1)
        << '\n';
    GTEST_SKIP() << "recorded " << kGoldenFile;
  }
  for (const auto& [name, expected] : want["cases"].items()) {
    ASSERT_TRUE(got.contains(name)) << name;
    const auto& actual = got[name];
    for (const char* key :
         {"losses", "grad_norms", "loss_scales", "skipped", "val_loss"}) {
      EXPECT_EQ(
          actual.value(key, nlohmann::json()),
          expected.value(key, nlohmann::json()))
          << name << ": " << key;
    }
    EXPECT_EQ(
        actual.value("oom_recovery_at", nlohmann::json()),
        expected.value("oom_recovery_at", nlohmann::json()))
        << name;
    ASSERT_TRUE(actual.contains("weights")) << name;
    for (const auto& [tensor, bits] : expected["weights"].items()) {
      EXPECT_EQ(actual["weights"].value(tensor, ""), bits)
          << name << ": " << tensor;
    }
    EXPECT_EQ(actual["weights"].size(), expected["weights"].size()) << name;
  }
  // The cases themselves show what they claim: the overflow steps were
  // skipped at falling scales, and the OOM recovery happened.
  const auto& scaled = got["loss_scaler_overflow"];
  EXPECT_EQ(scaled["skipped"][1], true);
  EXPECT_EQ(scaled["skipped"][2], true);
  EXPECT_EQ(scaled["skipped"][3], false);
  EXPECT_LT(
      scaled["loss_scales"][2].get<double>(),
      scaled["loss_scales"][0].get<double>());
  EXPECT_EQ(got["oom_recovery"]["oom_recovery_at"].size(), 1u);
  EXPECT_EQ(got["gloo_2_ranks"]["losses"].size(), 6u);
}

} // namespace hotloop::train
