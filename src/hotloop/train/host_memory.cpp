#include "hotloop/train/host_memory.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

namespace hotloop::train {

namespace {

// LibTorch's CPU allocator with every allocation's size added while it
// lives. Its pointers stay "simple" (the data is its own context, freed by
// raw_deleter()), as LibTorch's raw_allocate() requires (oneDNN's
// convolutions use it): the sizes are kept beside them.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base)
      : base_(base), base_delete_(base->raw_deleter()) {}

  c10::DataPtr allocate(std::size_t n) override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    if (data == nullptr || base_delete_ == nullptr ||
        inner.get_context() != data) {
      return inner; // not one of the base's simple pointers: not counted
    }
    inner.release_context();
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      sizes_[data] = n;
    }
    const std::uint64_t now = allocated_.fetch_add(n) + n;
    std::uint64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return {data, data, &CountingAllocator::release, c10::Device(c10::kCPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &CountingAllocator::release;
  }

  void copy_data(void* dest, const void* src, std::size_t count)
      const override {
    std::memcpy(dest, src, count);
  }

  HostMemoryStats stats() const {
    return {allocated_.load(), peak_.load()};
  }
  void reset_peak() {
    peak_.store(allocated_.load());
  }

  static CountingAllocator* installed; // set once, by counter()

 private:
  static void release(void* data) {
    CountingAllocator* self = installed;
    std::size_t n = 0;
    {
      const std::lock_guard<std::mutex> lock(self->mutex_);
      const auto it = self->sizes_.find(data);
      if (it != self->sizes_.end()) {
        n = it->second;
        self->sizes_.erase(it);
      }
    }
    self->allocated_.fetch_sub(n);
    self->base_delete_(data);
  }

  c10::Allocator* base_;
  c10::DeleterFnPtr base_delete_;
  std::mutex mutex_;
  std::unordered_map<void*, std::size_t> sizes_;
  std::atomic<std::uint64_t> allocated_{0};
  std::atomic<std::uint64_t> peak_{0};
};

CountingAllocator* CountingAllocator::installed = nullptr;

// The process's one counter: c10's allocator registry is process-wide.
CountingAllocator* counter(bool install) {
  static std::once_flag once;
  if (install) {
    std::call_once(once, [] {
      // Never freed: tensors allocated through it may outlive everything.
      CountingAllocator::installed =
          new CountingAllocator(c10::GetCPUAllocator());
      c10::SetCPUAllocator(CountingAllocator::installed, /*priority=*/100);
    });
  }
  return CountingAllocator::installed;
}

} // namespace

void count_host_memory() {
  counter(true);
}

bool host_memory_counted() {
  return counter(false) != nullptr;
}

void count_host_memory_if_asked() {
  const char* v = std::getenv("HOTLOOP_COUNT_HOST_MEMORY");
  if (v != nullptr && std::string_view(v) == "1") {
    count_host_memory();
  }
}

HostMemoryStats host_memory_stats() {
  const CountingAllocator* c = counter(false);
  return c == nullptr ? HostMemoryStats{} : c->stats();
}

void reset_host_memory_peak() {
  if (CountingAllocator* c = counter(false)) {
    c->reset_peak();
  }
}

} // namespace hotloop::train
