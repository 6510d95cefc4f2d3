#pragma once
// NCCL's c10d backend (src/hotloop/cuda/nccl_backend.cpp, the only place that
// includes NCCL's headers); without CUDA, an EnvError.

#include <chrono>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
class Store;
} // namespace c10d

namespace hotloop::cuda {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(
    const c10::intrusive_ptr<c10d::Store>& store,
    int rank,
    int size,
    std::chrono::milliseconds timeout);

} // namespace hotloop::cuda
