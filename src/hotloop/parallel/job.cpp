#include "hotloop/parallel/job.h"

#include <ATen/Context.h>
#include <fmt/format.h>

#include <algorithm>

#include "hotloop/core/cpus.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/errors.h"

namespace hotloop::parallel {

Job join_job(const JobOptions& o, std::string device, int threads) {
  Job job;
  job.env = read_dist_env();
  job.device = std::move(device);
  job.threads = threads;
  if (!job.env.launched()) {
    return job;
  }
  if (job.device == "auto" || job.device == "cuda") {
    job.device =
        at::hasCUDA() ? fmt::format("cuda:{}", job.env.local_rank) : "cpu";
  }
  job.backend = o.backend == "auto"
      ? (job.device.starts_with("cuda") ? "nccl" : "gloo")
      : o.backend;
  GroupOptions go;
  if (job.backend == "gloo") {
    go.backend = Backend::Gloo;
  } else if (job.backend == "nccl") {
    go.backend = Backend::Nccl;
  } else {
    throw UsageError(fmt::format(
        "--dist-backend {}: expected one of auto, gloo, nccl", o.backend));
  }
  if (!(o.timeout_s > 0)) {
    throw UsageError("--dist-timeout: must be positive (seconds)");
  }
  go.timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000));
  if (job.device.starts_with("cuda:")) {
    cuda::set_current_device(std::stoi(job.device.substr(5)));
  }
  job.group = ProcessGroup::create(job.env, go);
  if (job.threads == 0) {
    job.threads =
        std::max(1, static_cast<int>(usable_cpus()) / job.env.local_world_size);
  }
  return job;
}

} // namespace hotloop::parallel
