#pragma once
// CUDA graphs for the training step: one captured sequence of kernels that a
// single launch replays, so the host's per-kernel launch cost goes away. The
// caller keeps every tensor the graph reads and writes alive and at the same
// address (static inputs, parameters, gradients, optimizer state). Without a
// CUDA LibTorch (cuda_graph_cpu.cpp), constructing a Graph throws EnvError
// and StreamScope does nothing.

#include <functional>
#include <memory>

namespace hotloop::cuda {

class Graph {
 public:
  explicit Graph(int device);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Records the kernels `body` launches on the current stream (which must
  // not be the default stream: see StreamScope) without running them. First
  // waits for the device and empties the allocator's cache (as
  // torch.cuda.graph does), so the capture can take the memory the warm-up
  // left cached. Memory allocated inside comes from the graph's private pool
  // and stays reserved for its replays. Throws what CUDA or `body` threw (an
  // operation that cannot be captured: a synchronization, a host read of a
  // device value, a CPU tensor op in the middle); the capture is then ended
  // and discarded, and the allocator left as it was before it (no longer
  // allocating to the pool, the pool released). Once per Graph.
  void capture(const std::function<void()>& body);
  // Runs the captured kernels again on the current stream.
  void replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Makes a stream from LibTorch's pool the current stream of `device` until
// destruction (capture cannot use the legacy default stream; warming up on
// the stream that captures lets the allocator and the libraries' handles
// settle there first). Waits for the device's pending work on entry, and for
// the side stream's on exit.
class StreamScope {
 public:
  explicit StreamScope(int device);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hotloop::cuda
