#pragma once
// What the framework side says: the LibTorch in use, the CUDA libraries it
// loads, the devices CUDA can use, and whether a kernel actually runs on each
// of them.

#include <optional>
#include <string>
#include <vector>

#include "hotloop/cuda/cuda_info.h"

namespace hotloop::env {

struct TorchFacts {
  std::string libtorch_version;
  cuda::LibraryVersions built; // what LibTorch was compiled with
  std::string cuda_arch_list; // "sm_75 sm_80 ..."; "" when unknown
  cuda::Loaded cudnn; // what loads at run time
  cuda::Loaded nccl;
  cuda::State cuda;
  std::vector<std::string>
      kernel_probe_errors; // per CUDA device; "" = the kernel ran and was right
  std::optional<std::string> cuda_visible_devices; // the variable, when set
  std::vector<std::string>
      missing_device_nodes; // of /dev/nvidiactl, /dev/nvidia-uvm
};

struct TorchProbeOptions {
  bool run_kernel_probe = true; // launch a small kernel on each CUDA device
  std::string dev_dir = "/dev";
};

TorchFacts probe_torch(const TorchProbeOptions& options);

} // namespace hotloop::env
