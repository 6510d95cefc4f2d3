#include "hotloop/cuda/cuda_graph.h"

#include <optional>

#include <ATen/core/CachingHostAllocator.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "hotloop/errors.h"

namespace hotloop::cuda {

namespace {

// LibTorch's CUDAGraph, plus what it does not do after a failed capture
// (ATen/cuda/CUDAGraph.cpp, 2.11): capture_end() throws at
// cudaStreamEndCapture before it calls endAllocateToPool, and reset() calls
// releasePool only when capture_end() succeeded. Left so, the caching
// allocator stays in capture mode for the rest of the process: it parks
// every block freed with stream uses (the loader's record_stream'd batches)
// until no capture is underway, which is never, and emptyCache() hits its
// assertion that no capture is underway. The RNG too: capture_begin()
// registers the default CUDA generator and calls capture_prologue() on its
// state, which sets `capturing_`; only capture_epilogue(), reached after a
// successful cudaStreamEndCapture, clears it, and neither reset() nor the
// destructor's unregister_graph() does. Left set, the first eager dropout
// after the fallback throws "Offset increment outside graph capture
// encountered unexpectedly" (CUDAGeneratorState::increase). abandon() ends
// what the failed capture left open. The members it reads are CUDAGraph's
// protected state.
class OwnedGraph final : public at::cuda::CUDAGraph {
 public:
  // After capture_begin() was called and then it, the body or capture_end()
  // threw: takes the generators out of capture mode, ends the stream's
  // capture if still open (discarding its graph), stops allocating to the
  // capture's pool, resets the graph and releases the pool, so its memory
  // goes back to the cache once its tensors are freed. Never throws.
  void abandon() noexcept {
    // First, whatever else failed: capture_begin() runs the prologue before
    // its own checks and before the capture starts.
    end_generator_capture();
    if (capture_dev_ == UNDEFINED_DEVICE) {
      return; // capture_begin() threw before it started anything
    }
    const c10::cuda::CUDAGuard guard(capture_dev_);
    quietly([&] {
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(capture_stream_.stream(), &status) ==
              cudaSuccess &&
          status != cudaStreamCaptureStatusNone) {
        cudaGraph_t partial = nullptr;
        // Invalidated captures end with an error and no graph: expected.
        (void)cudaStreamEndCapture(capture_stream_.stream(), &partial);
        if (partial != nullptr) {
          (void)cudaGraphDestroy(partial);
        }
      }
      (void)cudaGetLastError(); // the capture's error is not the next call's
    });
    // capture_end() calls endAllocateToPool right after cudaStreamEndCapture
    // returns a graph: without one, the pool is still being allocated to.
    if (graph_ == nullptr) {
      quietly([&] {
        c10::cuda::CUDACachingAllocator::endAllocateToPool(
            capture_dev_, mempool_id_);
      });
      quietly([&] {
        at::getHostAllocator(at::kCUDA)->end_allocate_to_pool(mempool_id_);
      });
    } else if (!has_graph_ && !capture_ended_) {
      (void)cudaGraphDestroy(graph_); // ended, failed before instantiating
      graph_ = nullptr;
    }
    const bool release = !capture_ended_; // else reset() releases the pool
    quietly([&] { reset(); });
    if (release) {
      quietly([&] {
        c10::cuda::CUDACachingAllocator::releasePool(capture_dev_, mempool_id_);
      });
      quietly(
          [&] { at::getHostAllocator(at::kCUDA)->release_pool(mempool_id_); });
    }
  }

 private:
  // What capture_epilogue() does to each registered generator state's mode
  // (its returned offset only matters to replays, and there are none): the
  // next eager RNG op draws from the generator's ordinary offset again.
  void end_generator_capture() noexcept {
    for (auto& [state, wholegraph_increment] : captured_generator_states_) {
      state->capturing_ = false;
    }
  }

  // Best effort, each step on its own: the run goes on eagerly either way.
  template <typename F>
  static void quietly(F&& f) noexcept {
    try {
      f();
    } catch (...) {
    }
  }
};

} // namespace

struct Graph::Impl {
  c10::DeviceIndex device = 0;
  std::optional<OwnedGraph> graph;
  bool captured = false;
};

Graph::Graph(int device) : impl_(std::make_unique<Impl>()) {
  impl_->device = static_cast<c10::DeviceIndex>(device);
}

Graph::~Graph() = default;

void Graph::capture(const std::function<void()>& body) {
  if (impl_->graph) {
    throw Error("a CUDA graph is captured once; make another Graph");
  }
  const c10::cuda::CUDAGuard guard(impl_->device);
  if (c10::cuda::getCurrentCUDAStream(impl_->device) ==
      c10::cuda::getDefaultCUDAStream(impl_->device)) {
    throw Error("CUDA graph capture needs a non-default stream (StreamScope)");
  }
  // As torch.cuda.graph does: let the pending work finish and hand the
  // cached blocks back to the driver, so that the capture's private pool can
  // take the memory the warm-up's activations and gradients held (it cannot
  // reuse blocks of the ordinary pool).
  c10::cuda::device_synchronize();
  c10::cuda::CUDACachingAllocator::emptyCache();
  impl_->graph.emplace();
  try {
    // A pool of our own: its id is what abandon() ends and releases.
    // Thread-local mode: the loader's threads may allocate pinned memory
    // while this thread captures; only this thread's unsafe calls are
    // errors.
    impl_->graph->capture_begin(
        at::cuda::graph_pool_handle(), cudaStreamCaptureModeThreadLocal);
    body();
    impl_->graph->capture_end(); // instantiates
  } catch (...) {
    impl_->graph->abandon();
    throw;
  }
  impl_->captured = true;
}

void Graph::replay() {
  if (!impl_->captured) {
    throw Error("CUDA graph replay before a successful capture");
  }
  const c10::cuda::CUDAGuard guard(impl_->device);
  impl_->graph->replay();
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
