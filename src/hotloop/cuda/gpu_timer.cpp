#include "hotloop/cuda/gpu_timer.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

namespace hotloop::cuda {

namespace {

// One step's events and the label of the interval each one closes.
struct Marks {
  std::vector<cudaEvent_t> events; // grows, reused across steps
  std::vector<std::size_t> labels; // labels[i]: interval (i-1, i)
  std::size_t used = 0;
};

} // namespace

struct GpuTimer::Impl {
  int device = 0;
  std::size_t labels = 0;
  Marks sets[2];
  int current = 0;
  bool previous_valid = false;

  void record(Marks& m, std::size_t label) {
    if (m.used == m.events.size()) {
      cudaEvent_t e = nullptr;
      cudaEventCreate(&e);
      m.events.push_back(e);
      m.labels.push_back(0);
    }
    m.labels[m.used] = label;
    cudaEventRecord(
        m.events[m.used],
        at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device))
            .stream());
    ++m.used;
  }
};

GpuTimer::GpuTimer(int device, std::size_t labels)
    : impl_(std::make_unique<Impl>()) {
  impl_->device = device;
  impl_->labels = labels;
}

GpuTimer::~GpuTimer() {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(impl_->device));
  for (auto& set : impl_->sets) {
    for (auto e : set.events) {
      cudaEventDestroy(e);
    }
  }
}

void GpuTimer::begin() {
  Marks& m = impl_->sets[impl_->current];
  m.used = 0;
  impl_->record(m, 0);
}

void GpuTimer::mark(std::size_t label) {
  impl_->record(impl_->sets[impl_->current], label);
}

std::optional<std::vector<double>> GpuTimer::end() {
  std::optional<std::vector<double>> out;
  Marks& prev = impl_->sets[1 - impl_->current];
  if (impl_->previous_valid && prev.used >= 2 &&
      cudaEventQuery(prev.events[prev.used - 1]) == cudaSuccess) {
    std::vector<double> ms(impl_->labels, 0.0);
    for (std::size_t i = 1; i < prev.used; ++i) {
      float t = 0;
      if (cudaEventElapsedTime(&t, prev.events[i - 1], prev.events[i]) ==
              cudaSuccess &&
          prev.labels[i] < ms.size()) {
        ms[prev.labels[i]] += t;
      }
    }
    out = std::move(ms);
  }
  impl_->previous_valid = true;
  impl_->current = 1 - impl_->current;
  return out;
}

} // namespace hotloop::cuda
