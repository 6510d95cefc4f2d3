#include "hotloop/cuda/nccl_backend.h"

#include <cstdlib>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace hotloop::cuda {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(
    const c10::intrusive_ptr<c10d::Store>& store,
    int rank,
    int size,
    std::chrono::milliseconds timeout) {
  // On a failed or timed-out collective, NCCL's watchdog aborts the
  // communicator and leaves the process up (CleanUpOnly): the error then
  // surfaces at the host's next timed wait, which names the ranks that
  // stopped, instead of the watchdog taking the process down first with its
  // own message (2.11's default, SkipCleanUp). A user's own setting stands
  // (either name ProcessGroupNCCL reads). Read once, by the constructor
  // below.
  if (std::getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING") == nullptr &&
      std::getenv("NCCL_ASYNC_ERROR_HANDLING") == nullptr) {
    setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2", /*overwrite=*/0);
  }
  auto o = c10d::ProcessGroupNCCL::Options::create();
  o->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, o);
}

} // namespace hotloop::cuda
