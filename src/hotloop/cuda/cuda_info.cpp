#include "hotloop/cuda/cuda_info.h"

#include "hotloop/core/first_line.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <fmt/format.h>
#include <torch/csrc/cuda/nccl.h>
#include <torch/cuda.h>

namespace hotloop::cuda {
namespace {

std::string uuid_string(const cudaUUID_t& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  return fmt::format(
      "GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-"
      "{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
      b[0],
      b[1],
      b[2],
      b[3],
      b[4],
      b[5],
      b[6],
      b[7],
      b[8],
      b[9],
      b[10],
      b[11],
      b[12],
      b[13],
      b[14],
      b[15]);
}

// Whether CUDA has a device, with LibTorch's CUDA state initialized (the
// caching allocator's per-device tables, the generators): what Python's
// torch.cuda memory functions do first with _lazy_init(). LibTorch's
// allocator entry points do not initialize it themselves: called first in a
// process, getDeviceStats, resetPeakStats and setMemoryFraction throw
// "Invalid device argument 0: did you call init?". False (and nothing
// initialized) without a usable device.
bool cuda_ready() {
  if (!torch::cuda::is_available()) {
    return false;
  }
  at::globalContext().lazyInitDevice(c10::kCUDA);
  return true;
}

std::string cudnn_string(long v) {
  // cuDNN 9 encodes 90190 for 9.19.0 (major*10000 + minor*100 + patch).
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

} // namespace

LibraryVersions library_versions() {
  LibraryVersions v;
  v.compiled_with_cuda = true;
  try {
    const auto& hooks = at::detail::getCUDAHooks();
    v.runtime_version = static_cast<int>(hooks.versionCUDART());
    if (hooks.hasCuDNN()) {
      v.cudnn_built = cudnn_string(hooks.versionCuDNN());
    }
  } catch (const c10::Error&) {
    // A CPU-only LibTorch behind a CUDA build of hotloop: leave the versions
    // empty.
  }
  const std::uint64_t nccl =
      torch::cuda::nccl::version(); // major << 32 | minor << 16 | patch
  v.nccl_built =
      fmt::format("{}.{}.{}", nccl >> 32, (nccl >> 16) & 0xffff, nccl & 0xffff);
  return v;
}

Loaded runtime_cudnn() {
  try {
    return {cudnn_string(at::detail::getCUDAHooks().versionRuntimeCuDNN()), {}};
  } catch (const c10::Error& e) {
    return {std::nullopt, first_line(e.what())};
  }
}

Loaded runtime_nccl() {
  // LibTorch's CUDA library depends on libnccl, so it is normally loaded
  // already; look it up by soname.
  void* h = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) {
    h = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  }
  if (h == nullptr) {
    const char* why = ::dlerror();
    return {std::nullopt, why != nullptr ? why : "libnccl.so.2 not found"};
  }
  using GetVersion = int (*)(int*);
  auto get_version = reinterpret_cast<GetVersion>(::dlsym(h, "ncclGetVersion"));
  int code = 0;
  Loaded out;
  if (get_version == nullptr || get_version(&code) != 0) {
    out.error = "ncclGetVersion failed";
  } else {
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
    out.version =
        fmt::format("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100);
  }
  ::dlclose(h);
  return out;
}

State state() {
  State s;
  s.available = torch::cuda::is_available();
  if (!s.available) {
    try {
      c10::cuda::device_count_ensure_non_zero();
    } catch (const c10::Error& e) {
      s.error = first_line(e.what());
    }
    return s;
  }
  s.device_count = static_cast<int>(torch::cuda::device_count());
  for (int i = 0; i < s.device_count; ++i) {
    try {
      const cudaDeviceProp* p = at::cuda::getDeviceProperties(i);
      s.devices.push_back(
          {i,
           p->name,
           uuid_string(p->uuid),
           p->major,
           p->minor,
           p->totalGlobalMem});
    } catch (const c10::Error& e) {
      s.error = fmt::format(
          "cannot read the properties of CUDA device {}: {}",
          i,
          first_line(e.what()));
    }
  }
  return s;
}

int compute_capability(int device) {
  try {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(device);
    return 10 * p->major + p->minor;
  } catch (const c10::Error&) {
    return 0;
  }
}

std::string kernel_probe(int device) {
  try {
    const auto opts = at::TensorOptions().device(
        at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
    const float sum = (at::ones({4096}, opts) * 2.0f).sum().item<float>();
    if (sum != 8192.0f) {
      return fmt::format(
          "wrong result from a kernel on cuda:{}: sum {} instead of 8192",
          device,
          sum);
    }
    return {};
  } catch (const c10::Error& e) {
    return first_line(e.what());
  }
}

MemoryStats memory_stats(int device) {
  if (!cuda_ready()) {
    return {};
  }
  using c10::CachingAllocator::StatType;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(
      static_cast<c10::DeviceIndex>(device));
  const auto all = static_cast<std::size_t>(StatType::AGGREGATE);
  MemoryStats m;
  m.allocated = static_cast<std::uint64_t>(stats.allocated_bytes[all].current);
  m.peak_allocated =
      static_cast<std::uint64_t>(stats.allocated_bytes[all].peak);
  m.reserved = static_cast<std::uint64_t>(stats.reserved_bytes[all].current);
  m.peak_reserved = static_cast<std::uint64_t>(stats.reserved_bytes[all].peak);
  m.alloc_retries = stats.num_alloc_retries;
  m.ooms = stats.num_ooms;
  return m;
}

AllocatorLayout allocator_layout(int device) {
  if (!cuda_ready()) {
    return {};
  }
  const auto snap = c10::cuda::CUDACachingAllocator::snapshot({0, 0}, false);
  AllocatorLayout l;
  for (const auto& seg : snap.segments) {
    if (seg.device != device) {
      continue;
    }
    ++l.segments;
    for (const auto& block : seg.blocks) {
      if (!block.allocated) {
        l.free_in_cache += block.size;
        l.largest_free_block =
            std::max<std::uint64_t>(l.largest_free_block, block.size);
      }
    }
  }
  return l;
}

DeviceMemory device_memory(int device) {
  if (!cuda_ready()) {
    return {};
  }
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  std::size_t free = 0;
  std::size_t total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  return {free, total};
}

void set_current_device(int device) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
}

void empty_cache() {
  if (!cuda_ready()) {
    return;
  }
  c10::cuda::CUDACachingAllocator::emptyCache();
}

void set_memory_fraction(int device, double fraction) {
  if (!cuda_ready()) {
    return;
  }
  c10::cuda::CUDACachingAllocator::setMemoryFraction(
      fraction, static_cast<c10::DeviceIndex>(device));
}

void reset_peak_memory(int device) {
  if (!cuda_ready()) {
    return;
  }
  c10::cuda::CUDACachingAllocator::resetPeakStats(
      static_cast<c10::DeviceIndex>(device));
}

std::vector<std::uint8_t> rng_state(int device) {
  if (!cuda_ready()) {
    return {};
  }
  auto gen = at::cuda::detail::getDefaultCUDAGenerator(
      static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  const auto state = gen.get_state();
  const auto* p = state.data_ptr<std::uint8_t>();
  return {p, p + state.numel()};
}

void set_rng_state(int device, const std::vector<std::uint8_t>& bytes) {
  if (!cuda_ready()) {
    return;
  }
  auto gen = at::cuda::detail::getDefaultCUDAGenerator(
      static_cast<c10::DeviceIndex>(device));
  at::Tensor state =
      at::empty({static_cast<std::int64_t>(bytes.size())}, at::kByte);
  std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

namespace {

// Passes sync-debug warnings to the watch and every other warning on.
class SyncWarnings final : public c10::WarningHandler {
 public:
  SyncWarnings(
      c10::WarningHandler* next,
      std::function<void(const std::string&)> on_sync)
      : next_(next), on_sync_(std::move(on_sync)) {}
  void process(const c10::Warning& w) override {
    if (w.msg().find("synchronizing CUDA operation") != std::string::npos) {
      on_sync_(w.msg());
    } else if (next_ != nullptr) {
      next_->process(w);
    }
  }

 private:
  c10::WarningHandler* next_;
  std::function<void(const std::string&)> on_sync_;
};

} // namespace

struct SyncWatch::Impl {
  c10::cuda::SyncDebugMode before = c10::cuda::SyncDebugMode::L_DISABLED;
  c10::WarningHandler* previous = nullptr;
  std::unique_ptr<SyncWarnings> handler;
};

SyncWatch::SyncWatch(std::function<void(const std::string&)> on_sync)
    : impl_(std::make_unique<Impl>()) {
  if (!torch::cuda::is_available()) {
    return;
  }
  impl_->previous = c10::WarningUtils::get_warning_handler();
  impl_->handler =
      std::make_unique<SyncWarnings>(impl_->previous, std::move(on_sync));
  c10::WarningUtils::set_warning_handler(impl_->handler.get());
  impl_->before = c10::cuda::warning_state().get_sync_debug_mode();
  c10::cuda::warning_state().set_sync_debug_mode(
      c10::cuda::SyncDebugMode::L_WARN);
}

SyncWatch::~SyncWatch() {
  if (impl_->handler) {
    c10::cuda::warning_state().set_sync_debug_mode(impl_->before);
    c10::WarningUtils::set_warning_handler(impl_->previous);
  }
}

SyncErrors::SyncErrors() {
  if (!torch::cuda::is_available()) {
    return;
  }
  before_ = static_cast<int>(c10::cuda::warning_state().get_sync_debug_mode());
  c10::cuda::warning_state().set_sync_debug_mode(
      c10::cuda::SyncDebugMode::L_ERROR);
  set_ = true;
}

SyncErrors::~SyncErrors() {
  if (set_) {
    c10::cuda::warning_state().set_sync_debug_mode(
        static_cast<c10::cuda::SyncDebugMode>(before_));
  }
}

} // namespace hotloop::cuda
