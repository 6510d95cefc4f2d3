#include "hotloop/env/torch_probe.h"

#include <cstdlib>
#include <filesystem>

#include "hotloop/cuda/build_info.h"

namespace hotloop::env {

TorchFacts probe_torch(const TorchProbeOptions& options) {
  TorchFacts t;
  const BuildInfo info = build_info();
  t.libtorch_version = info.libtorch_version;
  t.cuda_arch_list = info.cuda_arch_list;
  t.built = cuda::library_versions();
  t.cudnn = cuda::runtime_cudnn();
  t.nccl = cuda::runtime_nccl();
  t.cuda = cuda::state();
  if (options.run_kernel_probe) {
    for (const auto& device : t.cuda.devices) {
      t.kernel_probe_errors.push_back(cuda::kernel_probe(device.index));
    }
  }
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    t.cuda_visible_devices = visible;
  }
  for (const char* node : {"nvidiactl", "nvidia-uvm"}) {
    std::error_code ec;
    if (!std::filesystem::exists(
            std::filesystem::path(options.dev_dir) / node, ec)) {
      t.missing_device_nodes.push_back(options.dev_dir + "/" + node);
    }
  }
  return t;
}

} // namespace hotloop::env
