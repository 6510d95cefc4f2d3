#include "hotloop/parallel/gradient_reducer.h"

#include <ATen/ops/empty.h>

#include "hotloop/parallel/process_group.h"

namespace hotloop::parallel {

namespace {

constexpr const char* kPhase = "gradient all-reduce";

std::vector<at::Tensor> with_gradients(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) {
    if (p.requires_grad()) {
      out.push_back(p);
    }
  }
  return out;
}

} // namespace

struct GradientReducer::Impl {
  std::shared_ptr<ProcessGroup> group;
  std::vector<at::Tensor> flat; // per bucket
  std::vector<std::function<void()>> wait; // per bucket, set once started
  std::unique_ptr<GradientBuckets> buckets;

  void start(std::size_t i) {
    const Bucket& b = buckets->buckets()[i];
    const std::vector<at::Tensor>& params = buckets->params();
    if (!flat[i].defined()) {
      flat[i] = at::empty({b.numel}, params[b.members.front()].options());
    }
    for (std::size_t j = 0; j < b.members.size(); ++j) {
      const at::Tensor& p = params[b.members[j]];
      at::Tensor slot = flat[i].narrow(0, b.offsets[j], p.numel());
      const at::Tensor& g = p.grad();
      if (g.defined()) {
        slot.view(p.sizes()).copy_(g);
      } else {
        slot.zero_(); // no gradient here (the step is discarded, or unused)
      }
    }
    wait[i] = group->start_allreduce_sum(flat[i], kPhase);
  }
};

GradientReducer::GradientReducer(
    std::shared_ptr<ProcessGroup> group,
    const std::vector<at::Tensor>& params,
    const ReducerOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.group = std::move(group);
  m.buckets = std::make_unique<GradientBuckets>(
      with_gradients(params), std::vector<int>{}, options, [&m](std::size_t i) {
        m.start(i);
      });
  m.flat.resize(m.buckets->buckets().size());
  m.wait.resize(m.buckets->buckets().size());
}

GradientReducer::~GradientReducer() = default;

void GradientReducer::arm() {
  impl_->buckets->arm();
}

void GradientReducer::launch_rest(bool /*failed*/) {
  impl_->buckets->launch_rest();
}

void GradientReducer::finish() {
  Impl& m = *impl_;
  const double scale = 1.0 / m.group->size();
  const std::vector<at::Tensor>& params = m.buckets->params();
  for (std::size_t i = 0; i < m.flat.size(); ++i) {
    const Bucket& b = m.buckets->buckets()[i];
    m.wait[i]();
    m.wait[i] = nullptr;
    m.flat[i].mul_(scale);
    for (std::size_t j = 0; j < b.members.size(); ++j) {
      const at::Tensor& p = params[b.members[j]];
      at::Tensor g = p.grad();
      if (g.defined()) {
        g.copy_(m.flat[i].narrow(0, b.offsets[j], p.numel()).view(p.sizes()));
      }
    }
  }
  m.buckets->reset();
}

void GradientReducer::discard() {
  Impl& m = *impl_;
  for (auto& w : m.wait) {
    if (w) {
      w();
      w = nullptr;
    }
  }
  m.buckets->reset();
}

std::size_t GradientReducer::bucket_count() const {
  return impl_->flat.size();
}

std::size_t GradientReducer::started_during_backward() const {
  return impl_->buckets->started_during_backward();
}

} // namespace hotloop::parallel
