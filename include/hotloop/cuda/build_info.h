#pragma once
// What this hotloop binary is and what it was built against.

#include <optional>
#include <string>

namespace hotloop {

struct BuildInfo {
  std::string hotloop_version; // e.g. "0.1.0"
  std::string
      git_commit; // short hash, "-dirty" when built from a modified tree
  std::string libtorch_version; // TORCH_VERSION of the headers built against
  bool libtorch_has_cuda = false; // LibTorch's CUDA library is linked in
  std::optional<std::string>
      cuda_runtime_version; // "13.0": the CUDA runtime LibTorch was built with
  std::optional<std::string>
      cudnn_version; // "9.19.0": the cuDNN LibTorch was built with
  std::optional<std::string>
      nccl_version; // "2.28.9": the NCCL LibTorch loads (needs no GPU)
  std::string cuda_arch_list; // "sm_75 sm_80 ...": LibTorch's compiled CUDA
                              // architectures, "" if unknown
};

// Gathers the facts above. Never throws: a fact that cannot be read stays
// empty.
BuildInfo build_info();

// Multi-line human-readable form, as `hotloop --version` prints it.
std::string format_build_info(const BuildInfo& info);

} // namespace hotloop
