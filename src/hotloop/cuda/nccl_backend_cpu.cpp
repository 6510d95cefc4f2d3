// nccl_backend.h where NCCL is not there (a CPU-only LibTorch, or no NCCL
// headers at build time): NCCL cannot be used.
#include "hotloop/cuda/nccl_backend.h"

#include "hotloop/errors.h"

namespace hotloop::cuda {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(
    const c10::intrusive_ptr<c10d::Store>& store,
    int rank,
    int size,
    std::chrono::milliseconds timeout) {
  throw EnvError(
      "this hotloop was built without NCCL",
      "use --dist-backend gloo, or build against a CUDA LibTorch with NCCL's headers");
}

} // namespace hotloop::cuda
