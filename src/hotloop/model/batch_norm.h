#pragma once
// The models' BatchNorm2d: LibTorch's (same parameters, buffers and names,
// so torchvision weights load as before) plus an optional synchronized mode
// for data parallelism (`--sync-batchnorm`): in training, the batch
// statistics are computed over every rank's part of the global batch, as
// PyTorch's SyncBatchNorm does, so N ranks normalize exactly as one rank
// with the whole batch would.
//
// Synchronized forward: per channel, this rank's sum and sum of squares
// (in fp32, shifted by the running mean, which every rank holds identically,
// to keep E[x^2] - E[x]^2 accurate) and its element count are summed over
// ranks with one all-reduce; the mean and biased variance normalize, the
// unbiased variance updates running_var. The all-reduce is an autograd
// function whose backward all-reduces the incoming gradient, so the
// gradient of every rank's loss reaches every rank's activations. Eval mode,
// and no sync function, are LibTorch's batch_norm.

#include <functional>

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/batchnorm.h>

namespace hotloop::model {

// Sums a tensor over the job's ranks in place (parallel::ProcessGroup's).
using AllReduceSum = std::function<void(at::Tensor&)>;

class BatchNorm2dImpl : public torch::nn::BatchNorm2dImpl {
 public:
  using torch::nn::BatchNorm2dImpl::BatchNorm2dImpl;
  // Hides the base's (non-virtual) forward; the models call this one.
  at::Tensor forward(const at::Tensor& input);
  // Synchronizes the statistics over ranks from now on (null: local).
  void set_sync(AllReduceSum sum) {
    sync_ = std::move(sum);
  }
  bool synchronized() const {
    return static_cast<bool>(sync_);
  }

 private:
  at::Tensor synchronized_forward(const at::Tensor& input);
  AllReduceSum sync_;
};

class BatchNorm2d : public torch::nn::ModuleHolder<BatchNorm2dImpl> {
 public:
  using torch::nn::ModuleHolder<BatchNorm2dImpl>::ModuleHolder;
};

// Makes every BatchNorm2d of `module` synchronized through `sum`; returns
// how many there were.
int synchronize_batch_norm(torch::nn::Module& module, const AllReduceSum& sum);

} // namespace hotloop::model
