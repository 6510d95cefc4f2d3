#pragma once
// Facts for doctor tests: NVML facts come from the fake NVML library and a
// scenario file (the real loader and probe run); the framework and host facts
// are built here, since a CI machine has no GPU for CUDA to use.

#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "hotloop/env/doctor.h"
#include "support/scoped_env.h"
#include "test_paths.h"

namespace hotloop::test {

inline std::string scenario_path(const std::string& name) {
  return fmt::format("{}/{}.json", HOTLOOP_TEST_SCENARIOS, name);
}

// NVML facts as the real probe reads them from the fake library in `scenario`.
inline env::NvmlFacts nvml_facts(
    const std::string& scenario,
    const std::string& library = HOTLOOP_TEST_FAKE_NVML) {
  ScopedEnv env("FAKE_NVML_SCENARIO", scenario_path(scenario));
  return env::probe_nvml(library);
}

// LibTorch 2.11 + CUDA 13.0 with one usable H200, as on the project's GPU
// machine.
inline env::TorchFacts gpu_torch_facts() {
  env::TorchFacts t;
  t.libtorch_version = "2.11.0";
  t.built.compiled_with_cuda = true;
  t.built.runtime_version = 13000;
  t.built.cudnn_built = "9.19.0";
  t.built.nccl_built = "2.28.9";
  t.cuda_arch_list = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120";
  t.cudnn.version = "9.19.0";
  t.nccl.version = "2.28.9";
  t.cuda.available = true;
  t.cuda.device_count = 1;
  t.cuda.devices.push_back(
      {0,
       "NVIDIA H200",
       "GPU-6b3c1a52-0f1e-4c7a-9d2b-1f0e2d3c4b5a",
       9,
       0,
       150754820096ULL});
  t.kernel_probe_errors.push_back("");
  return t;
}

// The same LibTorch where CUDA cannot use any device.
inline env::TorchFacts no_cuda_torch_facts(
    const std::string& error = "No CUDA GPUs are available") {
  env::TorchFacts t = gpu_torch_facts();
  t.cuda = {};
  t.cuda.error = error;
  t.kernel_probe_errors.clear();
  return t;
}

// A host with nothing to complain about.
inline env::HostFacts healthy_host() {
  env::HostFacts h;
  h.cpu_model = "Test CPU";
  h.logical_cpus = h.usable_cpus = 32;
  h.physical_cores = 16;
  h.torch_intra_op_threads = 16;
  h.memory_total_bytes = env::Probed<std::uint64_t>::of(512ULL << 30);
  h.memory_available_bytes = env::Probed<std::uint64_t>::of(480ULL << 30);
  h.shm_total_bytes = env::Probed<std::uint64_t>::of(64ULL << 30);
  h.shm_free_bytes = env::Probed<std::uint64_t>::of(64ULL << 30);
  h.memlock_limit_bytes =
      env::Probed<std::uint64_t>::of(std::numeric_limits<std::uint64_t>::max());
  h.cpu_governors = env::Probed<std::vector<std::string>>::of({"performance"});
  h.run_dir = "runs";
  h.run_dir_free_bytes = env::Probed<std::uint64_t>::of(500ULL << 30);
  return h;
}

inline env::DoctorFacts facts(
    const std::string& scenario,
    env::TorchFacts torch = gpu_torch_facts()) {
  env::DoctorFacts f;
  f.nvml = nvml_facts(scenario);
  f.torch = std::move(torch);
  f.host = healthy_host();
  f.self_pid = 1;
  return f;
}

// The check `id` of `r`, copied (a reference into a temporary report would
// dangle).
inline env::Check check(const env::Report& r, const std::string& id) {
  for (const auto& c : r.checks) {
    if (c.id == id) {
      return c;
    }
  }
  throw std::out_of_range("no check " + id);
}

} // namespace hotloop::test
