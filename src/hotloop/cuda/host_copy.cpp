#include "hotloop/cuda/host_copy.h"

#include <optional>

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace hotloop::cuda {

struct HostCopy::Impl {
  at::Tensor host;
  std::optional<at::cuda::CUDAEvent> landed; // none: a CPU source
};

HostCopy::HostCopy(const at::Tensor& source) : impl_(std::make_unique<Impl>()) {
  if (!source.is_cuda()) {
    impl_->host = source.clone();
    return;
  }
  const c10::cuda::CUDAGuard guard(source.device());
  impl_->host = at::empty(
      source.sizes(), source.options().device(c10::kCPU).pinned_memory(true));
  impl_->host.copy_(source, /*non_blocking=*/true);
  impl_->landed.emplace();
  impl_->landed->record(c10::cuda::getCurrentCUDAStream(source.get_device()));
}

HostCopy::~HostCopy() = default;
HostCopy::HostCopy(HostCopy&&) noexcept = default;
HostCopy& HostCopy::operator=(HostCopy&&) noexcept = default;

bool HostCopy::ready() const {
  return !impl_->landed || impl_->landed->query();
}

const at::Tensor& HostCopy::wait() {
  if (impl_->landed) {
    impl_->landed->synchronize();
  }
  return impl_->host;
}

} // namespace hotloop::cuda
