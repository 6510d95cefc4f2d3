// host_copy.h for a LibTorch built without CUDA: every tensor is on the host.
#include "hotloop/cuda/host_copy.h"

namespace hotloop::cuda {

struct HostCopy::Impl {
  at::Tensor host;
};

HostCopy::HostCopy(const at::Tensor& source) : impl_(std::make_unique<Impl>()) {
  impl_->host = source.clone();
}
HostCopy::~HostCopy() = default;
HostCopy::HostCopy(HostCopy&&) noexcept = default;
HostCopy& HostCopy::operator=(HostCopy&&) noexcept = default;

bool HostCopy::ready() const {
  return true;
}

const at::Tensor& HostCopy::wait() {
  return impl_->host;
}

} // namespace hotloop::cuda
