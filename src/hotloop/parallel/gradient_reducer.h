#pragma once
// Averages whole gradients over the ranks of a data-parallel job (plain data
// parallel: every rank keeps the whole model, its gradients and its
// optimizer state), overlapping the communication with backward the way
// PyTorch's DDP reducer does (gradient_buckets.h): a bucket whose gradients
// are final is copied into its flat buffer and its all-reduce started at
// once. The step protocol is gradient_sync.h's.

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/parallel/gradient_buckets.h"
#include "hotloop/parallel/gradient_sync.h"

namespace hotloop::parallel {

class ProcessGroup;

using ReducerOptions = BucketOptions;

class GradientReducer : public GradientSync {
 public:
  // `params`: the parameters that get gradients, in registration order.
  GradientReducer(
      std::shared_ptr<ProcessGroup> group,
      const std::vector<at::Tensor>& params,
      const ReducerOptions& options);
  ~GradientReducer() override;
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  void arm() override;
  void launch_rest(bool failed) override;
  void finish() override;
  void discard() override;

  std::size_t bucket_count() const override;
  std::size_t started_during_backward() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hotloop::parallel
