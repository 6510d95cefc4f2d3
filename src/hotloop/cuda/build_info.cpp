#include "hotloop/cuda/build_info.h"

#include <fmt/format.h>
#include <torch/version.h>

#include "hotloop/cuda/cuda_info.h"
#include "hotloop_config.h" // generated at configure time: HOTLOOP_VERSION, HOTLOOP_TORCH_CUDA_ARCH_LIST
#include "hotloop_git.h" // generated each build: HOTLOOP_GIT_COMMIT

namespace hotloop {

BuildInfo build_info() {
  BuildInfo info;
  info.hotloop_version = HOTLOOP_VERSION;
  info.git_commit = HOTLOOP_GIT_COMMIT;
  info.libtorch_version = TORCH_VERSION;
  const cuda::LibraryVersions cuda = cuda::library_versions();
  info.libtorch_has_cuda = cuda.compiled_with_cuda;
  if (cuda.runtime_version) {
    info.cuda_runtime_version = fmt::format(
        "{}.{}",
        *cuda.runtime_version / 1000,
        (*cuda.runtime_version % 1000) / 10);
  }
  info.cudnn_version = cuda.cudnn_built;
  info.nccl_version = cuda.nccl_built;
  info.cuda_arch_list = HOTLOOP_TORCH_CUDA_ARCH_LIST;
  return info;
}

std::string format_build_info(const BuildInfo& info) {
  const auto or_none = [](const std::optional<std::string>& v) {
    return v ? *v : std::string("none");
  };
  return fmt::format(
      "hotloop {} (commit {})\n"
      "LibTorch {}{}\n"
      "CUDA runtime {}, cuDNN {}, NCCL {}\n"
      "CUDA architectures: {}\n",
      info.hotloop_version,
      info.git_commit,
      info.libtorch_version,
      info.libtorch_has_cuda ? " with CUDA" : " (CPU only)",
      or_none(info.cuda_runtime_version),
      or_none(info.cudnn_version),
      or_none(info.nccl_version),
      info.cuda_arch_list.empty() ? "unknown" : info.cuda_arch_list);
}

} // namespace hotloop
