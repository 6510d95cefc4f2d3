#include "hotloop/cuda/nccl_backend.h"

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace hotloop::cuda {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(
    const c10::intrusive_ptr<c10d::Store>& store,
    int rank,
    int size,
    std::chrono::milliseconds timeout) {
  auto o = c10d::ProcessGroupNCCL::Options::create();
  o->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, o);
}

} // namespace hotloop::cuda
