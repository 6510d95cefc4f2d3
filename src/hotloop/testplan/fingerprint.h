#pragma once
// The environment a benchmark ran in, so that results compare like with
// like: hotloop's build and git commit, LibTorch, CUDA, cuDNN and NCCL
// versions, the driver and GPUs (NVML), the CPU, and the command line.

#include <string>

#include <nlohmann/json.hpp>

namespace hotloop::testplan {

// Never throws: a fact that cannot be read is left out or null.
nlohmann::json environment_fingerprint(
    const std::string& command_line,
    const std::string& nvml_library);

// "NVIDIA H200 (driver 580.95), LibTorch 2.11.0, CUDA 13.0" or "no GPU; ...".
std::string describe_environment(const nlohmann::json& fingerprint);

} // namespace hotloop::testplan
