#pragma once
// `hotloop smoke`: the source documents' ladder, "one batch on the CPU, one
// batch on CUDA, then scale", as rungs that stop at the first failure and
// say what to fix:
//   gpu              the GPU is visible and usable (doctor's NVML and
//                    compatibility checks, and a kernel on the device)
//   cpu-step         one batch: forward, backward, optimizer step on the CPU
//   cuda-step        the same batch and weights on CUDA
//   on-gpu           parameters, buffers, gradients and the batch are on the
//                    GPU, and the GPU's allocated memory rose
//   cpu-vs-gpu       the CPU's and the GPU's losses on the same batch and
//                    weights agree (eval mode, fp32, TF32 off: 1e-3 relative)
//   overfit          one batch, up to a few dozen steps: the loss falls 10x
//                    (it stops as soon as it has)
//   mixed-precision  one step in bf16 (fp16 with loss scaling where bf16 is
//                    not supported): finite loss and gradients, and the loss
//                    within 5e-2 relative of fp32's
// GPU rungs are SKIP (with the reason) without a GPU; overfit and
// mixed-precision then run on the CPU (bf16).

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/env/doctor.h"

namespace hotloop::testplan {

struct SmokeOptions {
  std::string device = "auto"; // auto | cpu | cuda
  std::string model = "resnet18-small";
  std::string data = "fashion-mnist";
  std::int64_t batch = 32;
  int overfit_steps = 40;
  double overfit_factor = 10; // the loss must fall at least this much
  std::uint64_t seed = 0;
  env::DoctorOptions doctor;
  // Tests: this rung FAILs as if its check had (HOTLOOP_SMOKE_INJECT).
  std::string inject_failure;
};

struct Rung {
  std::string id;
  std::string title;
  env::Status status = env::Status::Skip;
  std::string detail; // what was measured, or why it was skipped
  std::string fix; // for FAIL
  double seconds = 0;
};

struct SmokeReport {
  std::vector<Rung> rungs; // in ladder order; after a FAIL: "not run"
  bool failed() const;
};

// The rung ids in ladder order.
const std::vector<std::string>& smoke_rung_ids();

// Runs the ladder. `progress` (may be null) gets each rung as it ends.
// Throws UsageError for an unknown model, data spec or injected rung.
SmokeReport run_smoke(
    const SmokeOptions& options,
    const std::function<void(const Rung&)>& progress = nullptr);

nlohmann::json to_json(const SmokeReport& report);
std::string to_text(const Rung& rung, bool color);
int exit_code(const SmokeReport& report); // 1 when a rung FAILed, else 0

} // namespace hotloop::testplan
