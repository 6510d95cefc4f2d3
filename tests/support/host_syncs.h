#pragma once
// Counts the host's waits for the device while it lives: on a GPU, every
// synchronizing CUDA call LibTorch makes on this thread (its sync-debug
// mode: .item(), nonzero, pageable copies, stream synchronizations); on the
// CPU, the operations that would be one there: a device value read on the
// host (aten::_local_scalar_dense, behind .item() and bool()) and nonzero
// (its size is data). A CPU copy to the host cannot be told from any other
// copy, so the CPU count misses .cpu()/.to(kCPU) reads; the GPU run counts
// them. One counter at a time (LibTorch's op callbacks are plain function
// pointers: the live counter is found through a static).

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/record_function.h>
#include <c10/core/Device.h>

#include "hotloop/cuda/cuda_info.h"

namespace hotloop::test {

class HostSyncCounter {
 public:
  explicit HostSyncCounter(const c10::Device& device)
      : watch_([this](const std::string& what) { add(what); }) {
    live() = this;
    if (!device.is_cuda()) {
      handle_ = at::addGlobalCallback(
          at::RecordFunctionCallback(&HostSyncCounter::on_op)
              .scopes({at::RecordScope::FUNCTION}));
    }
  }
  ~HostSyncCounter() {
    if (handle_ != 0) {
      at::removeCallback(handle_);
    }
    live() = nullptr;
  }
  HostSyncCounter(const HostSyncCounter&) = delete;
  HostSyncCounter& operator=(const HostSyncCounter&) = delete;

  std::int64_t count() const {
    return count_.load();
  }
  // What synchronized, in order (the op's or LibTorch's words).
  std::vector<std::string> what() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return what_;
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    count_ = 0;
    what_.clear();
  }

 private:
  static HostSyncCounter*& live() {
    static HostSyncCounter* counter = nullptr;
    return counter;
  }
  static std::unique_ptr<at::ObserverContext> on_op(
      const at::RecordFunction& fn) {
    const char* name = fn.name();
    if (live() != nullptr && name != nullptr &&
        (std::strcmp(name, "aten::_local_scalar_dense") == 0 ||
         std::strcmp(name, "aten::nonzero") == 0)) {
      live()->add(name);
    }
    return nullptr;
  }
  void add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
    what_.push_back(what);
  }

  cuda::SyncWatch watch_;
  at::CallbackHandle handle_ = 0;
  std::atomic<std::int64_t> count_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> what_;
};

} // namespace hotloop::test
