#include "hotloop/train/host_memory.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

namespace hotloop::train {

namespace {

// LibTorch's CPU allocator with every allocation's size added while it
// lives.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(std::size_t n) override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    auto* held = new Held{std::move(inner), n, this};
    const std::uint64_t now = allocated_.fetch_add(n) + n;
    std::uint64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return {data, held, &CountingAllocator::release, c10::Device(c10::kCPU)};
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

 private:
  struct Held {
    c10::DataPtr inner;
    std::size_t bytes;
    CountingAllocator* owner;
  };
  static void release(void* p) {
    auto* held = static_cast<Held*>(p);
    held->owner->allocated_.fetch_sub(held->bytes);
    delete held; // frees `inner` through the base allocator
  }

  c10::Allocator* base_;
  std::atomic<std::uint64_t> allocated_{0};
  std::atomic<std::uint64_t> peak_{0};
};

// The process's one counter: c10's allocator registry is process-wide.
CountingAllocator* counter(bool install) {
  static std::once_flag once;
  static CountingAllocator* installed = nullptr;
  if (install) {
    std::call_once(once, [] {
      // Never freed: tensors allocated through it may outlive everything.
      installed = new CountingAllocator(c10::GetCPUAllocator());
      c10::SetCPUAllocator(installed, /*priority=*/100);
    });
  }
  return installed;
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
