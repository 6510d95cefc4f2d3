#pragma once
// doctor's checks, by area. Internal to src/hotloop/env: doctor.cpp calls them
// in order.

#include <optional>
#include <vector>

#include "hotloop/env/doctor.h"

namespace hotloop::env {

// JSON forms of the structured facts (found by nlohmann::json through
// argument-dependent lookup).
inline void to_json(nlohmann::json& j, const PcieLink& l) {
  j = {
      {"generation", l.generation},
      {"max_generation", l.max_generation},
      {"width", l.width},
      {"max_width", l.max_width}};
}
inline void to_json(nlohmann::json& j, const GpuProcess& p) {
  j = {{"pid", p.pid}, {"name", p.name}, {"used_bytes", p.used_bytes}};
}

} // namespace hotloop::env

namespace hotloop::env::checks {

// The framework (LibTorch and its CUDA libraries), the driver, and whether CUDA
// agrees with NVML.
void framework_and_driver(const DoctorFacts& facts, std::vector<Check>& out);

// One group of checks per GPU NVML sees.
void gpus(
    const DoctorFacts& facts,
    const DoctorThresholds& thresholds,
    std::vector<Check>& out);

// The host: CPUs vs threads, memory, /dev/shm, locked memory, governor, disk.
void host(
    const DoctorFacts& facts,
    const DoctorThresholds& thresholds,
    std::vector<Check>& out);

// Helpers shared by the check files.
template <typename T>
nlohmann::json fact(const Probed<T>& p) {
  if (p.has_value()) {
    return nlohmann::json(*p);
  }
  return nlohmann::json{{"skipped", p.missing_reason}};
}

// True when NVML sees at least one GPU (so a GPU problem is a problem, not a
// CPU-only machine).
bool nvml_sees_gpu(const NvmlFacts& nvml);

// "sm_86" etc. of `arch_list` that can run code on compute capability (major,
// minor); nullopt when the list says nothing usable ("" list: unknown).
std::optional<std::string> matching_arch(
    const std::string& arch_list,
    int major,
    int minor);

} // namespace hotloop::env::checks
