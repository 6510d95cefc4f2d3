#include "hotloop/train/recovery.h"

#include <filesystem>
#include <fstream>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/_foreach_copy.h>
#include <fmt/format.h>

#include "hotloop/cuda/cuda_info.h"
#include "hotloop/errors.h"
#include "hotloop/train/oom.h"
#include "hotloop/train/optimizer.h"
#include "hotloop/train/options.h"
#include "hotloop/train/rng_state.h"

namespace hotloop::train {

void OomRecovery::save(const RunState& s) {
  if (!enabled_) {
    return;
  }
  // Gradients need no copy: they are None between steps.
  at::NoGradGuard no_grad;
  if (buffers_.empty()) {
    for (const auto& b : s.model->buffers()) {
      if (b.defined()) {
        buffers_.push_back(b);
        saved_buffers_.push_back(b.clone());
      }
    }
  } else {
    at::_foreach_copy_(saved_buffers_, buffers_);
  }
  saved_rng_ = rng_state(s.device);
}

OomRecovery::Plan OomRecovery::shrink(
    const RunState& s,
    const std::string& error) {
  const TrainerOptions& o = *s.options;
  s.optimizer->zero_grad();
  if (enabled_) {
    at::NoGradGuard no_grad;
    if (!buffers_.empty()) {
      at::_foreach_copy_(buffers_, saved_buffers_);
    }
    set_rng_state(saved_rng_, s.device);
  }
  const std::int64_t per_rank = o.batch / s.world_size;
  const std::int64_t smaller =
      enabled_ ? smaller_micro_batch(per_rank, s.micro_batch) : 0;
  nlohmann::json report = memory_report(s.device);
  report["step"] = s.step + 1;
  report["micro_batch"] = s.micro_batch;
  report["accum_steps"] = s.accum_steps;
  report["error"] = error;
  report["action"] = smaller > 0
      ? nlohmann::json(
            {{"micro_batch", smaller}, {"accum_steps", per_rank / smaller}})
      : nlohmann::json("stop");
  if (s.device.is_cuda()) {
    cuda::empty_cache();
  }
  // Each rank reports its own device (rank 0: oom_report.jsonl).
  Plan plan;
  if (!s.run_dir.empty()) {
    plan.report_path =
        (std::filesystem::path(s.run_dir) /
         (s.rank == 0 ? std::string("oom_report.jsonl")
                      : fmt::format("oom_report-rank{}.jsonl", s.rank)))
            .string();
    std::ofstream(plan.report_path, std::ios::app) << report.dump() << '\n';
  }
  if (smaller == 0) {
    throw OutOfMemoryError(
        fmt::format(
            "step {}: out of memory at micro-batch {}{} ({}); {}{}",
            s.step + 1,
            s.micro_batch,
            enabled_ ? "" : " with OOM recovery off",
            error,
            describe_memory(report),
            plan.report_path.empty() ? std::string()
                                     : "; memory report: " + plan.report_path),
        fmt::format(
            "{}options that need less memory: --precision bf16 (or fp16 on CUDA), --activation-checkpointing stages, a smaller --size or model; on a shared GPU, stop the other processes",
            enabled_
                ? ""
                : "--oom-recovery true halves the micro-batch and keeps the effective batch; "));
  }
  plan.micro_batch = smaller;
  plan.accum_steps = per_rank / smaller;
  plan.message = fmt::format(
      "step {}: {} at micro-batch {}; redoing the step as {} x {} (batch {} unchanged){}",
      s.step + 1,
      error,
      s.micro_batch,
      plan.accum_steps,
      smaller,
      o.batch,
      plan.report_path.empty() ? std::string()
                               : "; report: " + plan.report_path);
  ++recoveries_;
  return plan;
}

} // namespace hotloop::train
