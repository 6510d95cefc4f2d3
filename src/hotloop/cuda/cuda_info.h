#pragma once
// What LibTorch's CUDA side says: versions it was built with and loads, the
// devices CUDA can use, and whether a kernel really runs on each. The only
// hotloop sources that include CUDA headers are in this folder; without a CUDA
// LibTorch, cuda_info_cpu.cpp answers "no CUDA" instead.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hotloop::cuda {

struct LibraryVersions {
  bool compiled_with_cuda = false; // LibTorch's CUDA library is linked in
  std::optional<int> runtime_version; // CUDA runtime LibTorch was built with,
                                      // 1000*major + 10*minor
  std::optional<std::string>
      cudnn_built; // cuDNN LibTorch was built with, "9.19.0"
  std::optional<std::string>
      nccl_built; // NCCL LibTorch was built with, "2.28.9"
};

// Compile-time facts of the LibTorch in use; needs no GPU and never throws.
LibraryVersions library_versions();

// The cuDNN library actually loaded at run time ("9.19.0"), or the reason it
// cannot be.
struct Loaded {
  std::optional<std::string> version;
  std::string error;
};
Loaded runtime_cudnn();
// The NCCL library actually loaded at run time (ncclGetVersion), or the reason
// it cannot be.
Loaded runtime_nccl();

struct Device {
  int index = 0; // CUDA's index, after CUDA_VISIBLE_DEVICES
  std::string name;
  std::string
      uuid; // "GPU-...", NVML's form, to match CUDA's devices with NVML's
  int major = 0;
  int minor = 0;
  std::uint64_t total_memory_bytes = 0;
};

struct State {
  bool available = false; // torch::cuda::is_available()
  int device_count = 0;
  std::string error; // CUDA's own reason when no device can be used
  std::vector<Device> devices;
};

// Asks CUDA (through LibTorch) which devices it can use. Never throws.
State state();

// `device`'s compute capability as 10 x major + minor (90 for an H100), from
// CUDA's cached properties; 0 without CUDA or for a device it cannot read.
int compute_capability(int device);

// Runs a small elementwise kernel and a reduction on `device` and checks the
// result. Returns "" on success, else the error (e.g. "no kernel image is
// available for execution on the device").
std::string kernel_probe(int device);

// The memory helpers below (memory_stats to set_rng_state) can each be the
// first CUDA call of a process: they initialize LibTorch's CUDA state first
// (its allocator's per-device tables, the generators), as Python's
// torch.cuda functions do. Without a usable device they answer zeros, empty
// or nothing, and never throw for that reason.
//
// The caching allocator's view of `device`: what tensors hold (allocated) and
// what it has taken from the driver (reserved), now and at the peak since the
// last reset. Zeros without CUDA.
struct MemoryStats {
  std::uint64_t allocated = 0;
  std::uint64_t reserved = 0;
  std::uint64_t peak_allocated = 0;
  std::uint64_t peak_reserved = 0;
  // cudaMalloc failed and the allocator freed its cache to retry: a sign of
  // memory pressure (each retry costs a synchronization).
  std::int64_t alloc_retries = 0;
  std::int64_t ooms = 0; // allocations that failed after the retry
};
MemoryStats memory_stats(int device);
void reset_peak_memory(int device);

// How the reserved memory is laid out (walks the allocator's segments: call
// it on OOM, not every step). Zeros without CUDA.
struct AllocatorLayout {
  std::uint64_t segments = 0; // blocks taken from the driver (cudaMalloc)
  std::uint64_t largest_free_block =
      0; // the biggest cached block no tensor uses
  std::uint64_t free_in_cache = 0; // reserved but unused, all blocks
};
AllocatorLayout allocator_layout(int device);

// What the driver says of the whole device (cudaMemGetInfo): zeros without
// CUDA.
struct DeviceMemory {
  std::uint64_t free = 0;
  std::uint64_t total = 0;
};
DeviceMemory device_memory(int device);

// Makes `device` this thread's current CUDA device (each rank of a job on its
// local rank's GPU: collectives and .cuda() use it).
void set_current_device(int device);

// Returns the allocator's unused cached blocks to the driver.
void empty_cache();
// Caps this process's allocations on `device` at `fraction` of its memory
// (an allocation beyond it raises OutOfMemoryError).
void set_memory_fraction(int device, double fraction);

// LibTorch's sync-debug mode (torch.cuda.set_sync_debug_mode("warn")) while
// it lives: each synchronizing CUDA call LibTorch makes on this thread (a
// copy from or to pageable memory, .item(), nonzero, a stream or device
// synchronization) calls `on_sync` with LibTorch's warning. The tests count
// a step's synchronizations with it. Nothing happens without CUDA.
class SyncWatch {
 public:
  explicit SyncWatch(std::function<void(const std::string&)> on_sync);
  ~SyncWatch();
  SyncWatch(const SyncWatch&) = delete;
  SyncWatch& operator=(const SyncWatch&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// LibTorch's sync-debug mode at "error" for the whole process while it lives
// (torch.cuda.set_sync_debug_mode("error")): a synchronizing CUDA call on any
// thread throws c10::Error there (on autograd's device threads, through
// backward to its caller). SyncWatch counts through a warning handler, which
// c10 keeps per thread: autograd replays its device threads' warnings on the
// thread that called backward (GraphTask's warning handler), so those are
// counted, but a sync on another thread (a loader's, autograd's post-
// processing) would not be. The GPU tests of "no host sync" run under both.
// Nothing happens without CUDA. Not with a SyncWatch alive (each sets the
// one mode).
class SyncErrors {
 public:
  SyncErrors();
  ~SyncErrors();
  SyncErrors(const SyncErrors&) = delete;
  SyncErrors& operator=(const SyncErrors&) = delete;

 private:
  int before_ = 0;
  bool set_ = false;
};

// Seeds and reads the CUDA generators (for checkpoints): empty without CUDA.
std::vector<std::uint8_t> rng_state(int device);
void set_rng_state(int device, const std::vector<std::uint8_t>& state);

} // namespace hotloop::cuda
