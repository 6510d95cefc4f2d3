// cuda_graph.h for a LibTorch built without CUDA: no graphs to capture.
#include "hotloop/cuda/cuda_graph.h"

#include "hotloop/errors.h"

namespace hotloop::cuda {

struct Graph::Impl {};

Graph::Graph(int /*device*/) {
  throw EnvError(
      "CUDA graphs need a LibTorch built with CUDA",
      "install the CUDA build of torch (scripts/setup does)");
}
Graph::~Graph() = default;
void Graph::capture(const std::function<void()>& /*body*/) {}
void Graph::replay() {}

struct StreamScope::Impl {};
StreamScope::StreamScope(int /*device*/) {}
StreamScope::~StreamScope() = default;

} // namespace hotloop::cuda
