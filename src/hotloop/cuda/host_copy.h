#pragma once
// A device tensor copied to pinned host memory without waiting for it: the
// copy is queued on the current stream behind the work that produces the
// values, and ready() asks whether it has landed. The training loop reads its
// losses this way, so the host never stalls the GPU's queue. A CPU tensor is
// copied at once (and is ready at once).

#include <memory>

#include <ATen/core/Tensor.h>

namespace hotloop::cuda {

class HostCopy {
 public:
  explicit HostCopy(const at::Tensor& source);
  ~HostCopy();
  HostCopy(HostCopy&&) noexcept;
  HostCopy& operator=(HostCopy&&) noexcept;

  bool ready() const;
  // Blocks until the copy has landed; the host tensor.
  const at::Tensor& wait();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hotloop::cuda
