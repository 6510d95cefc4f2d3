// cuda_info.h for a LibTorch built without CUDA: every answer is "no CUDA".
#include "hotloop/cuda/cuda_info.h"

namespace hotloop::cuda {

LibraryVersions library_versions() {
  return {};
}

Loaded runtime_cudnn() {
  return {std::nullopt, "LibTorch was built without CUDA"};
}

Loaded runtime_nccl() {
  return {std::nullopt, "LibTorch was built without CUDA"};
}

State state() {
  State s;
  s.error =
      "LibTorch was built without CUDA: install a CUDA build of torch/LibTorch";
  return s;
}

int compute_capability(int device) {
  return 0;
}

std::string kernel_probe(int device) {
  return "LibTorch was built without CUDA";
}

MemoryStats memory_stats(int device) {
  return {};
}

void reset_peak_memory(int device) {}

AllocatorLayout allocator_layout(int device) {
  return {};
}

DeviceMemory device_memory(int device) {
  return {};
}

void set_current_device(int device) {}

void empty_cache() {}

void set_memory_fraction(int device, double fraction) {}

std::vector<std::uint8_t> rng_state(int device) {
  return {};
}

void set_rng_state(int device, const std::vector<std::uint8_t>& state) {}

struct SyncWatch::Impl {};
SyncWatch::SyncWatch(std::function<void(const std::string&)> /*on_sync*/) {}
SyncWatch::~SyncWatch() = default;

SyncErrors::SyncErrors() {}
SyncErrors::~SyncErrors() = default;

} // namespace hotloop::cuda
