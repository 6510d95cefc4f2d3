#include "hotloop/cuda/cuda_graph.h"

#include <optional>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "hotloop/errors.h"

namespace hotloop::cuda {

struct Graph::Impl {
  c10::DeviceIndex device = 0;
  at::cuda::CUDAGraph graph;
  bool captured = false;
};

Graph::Graph(int device) : impl_(std::make_unique<Impl>()) {
  impl_->device = static_cast<c10::DeviceIndex>(device);
}

Graph::~Graph() = default;

void Graph::capture(const std::function<void()>& body) {
  const c10::cuda::CUDAGuard guard(impl_->device);
  if (c10::cuda::getCurrentCUDAStream(impl_->device) ==
      c10::cuda::getDefaultCUDAStream(impl_->device)) {
    throw Error("CUDA graph capture needs a non-default stream (StreamScope)");
  }
  // Thread-local mode: the loader's threads may allocate pinned memory
  // while this thread captures; only this thread's unsafe calls are errors.
  impl_->graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
  try {
    body();
  } catch (...) {
    // End the capture so that the stream is usable again; its own error
    // (the capture was invalidated) says less than the one thrown inside.
    try {
      impl_->graph.capture_end();
    } catch (...) {
    }
    impl_->graph.reset();
    throw;
  }
  impl_->graph.capture_end(); // instantiates
  impl_->captured = true;
}

void Graph::replay() {
  if (!impl_->captured) {
    throw Error("CUDA graph replay before a successful capture");
  }
  const c10::cuda::CUDAGuard guard(impl_->device);
  impl_->graph.replay();
}

struct StreamScope::Impl {
  std::optional<c10::cuda::CUDAStreamGuard> guard;
};

StreamScope::StreamScope(int device) : impl_(std::make_unique<Impl>()) {
  const auto index = static_cast<c10::DeviceIndex>(device);
  {
    const c10::cuda::CUDAGuard on_device(index);
    c10::cuda::device_synchronize();
  }
  impl_->guard.emplace(
      c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index));
}

StreamScope::~StreamScope() {
  // What ran on the side stream is done before the previous stream (and
  // whatever the caller does next on it) takes over.
  try {
    impl_->guard->current_stream().synchronize();
  } catch (...) {
  }
}

} // namespace hotloop::cuda
