#include "hotloop/parallel/gradient_reducer.h"

#include <algorithm>

#include <ATen/ops/empty.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "hotloop/parallel/process_group.h"

namespace hotloop::parallel {

namespace {

constexpr const char* kPhase = "gradient all-reduce";

} // namespace

struct GradientReducer::Impl {
  struct Bucket {
    std::vector<std::size_t> members; // indices into params
    std::vector<std::int64_t> offsets; // of each member in flat
    std::int64_t numel = 0;
    at::Tensor flat;
    std::size_t pending = 0; // members whose gradient is not final yet
    std::function<void()> wait; // set once started
  };

  std::shared_ptr<ProcessGroup> group;
  ReducerOptions options;
  std::vector<at::Tensor> params;
  std::vector<std::size_t> bucket_of;
  std::vector<char> ready;
  std::vector<Bucket> buckets;
  bool armed = false;
  std::size_t next = 0; // the first bucket not started
  std::size_t overlapped = 0;
  std::size_t last_overlapped = 0;

  void reset() {
    armed = false;
    next = 0;
    overlapped = 0;
    std::fill(ready.begin(), ready.end(), 0);
    for (auto& b : buckets) {
      b.pending = b.members.size();
      b.wait = nullptr;
    }
  }

  void start(Bucket& b) {
    if (!b.flat.defined()) {
      const at::Tensor& first = params[b.members.front()];
      b.flat = at::empty({b.numel}, first.options());
    }
    for (std::size_t j = 0; j < b.members.size(); ++j) {
      const at::Tensor& p = params[b.members[j]];
      at::Tensor slot = b.flat.narrow(0, b.offsets[j], p.numel());
      const at::Tensor& g = p.grad();
      if (g.defined()) {
        slot.view(p.sizes()).copy_(g);
      } else {
        slot.zero_(); // no gradient here (the step is discarded, or unused)
      }
    }
    b.wait = group->start_allreduce_sum(b.flat, kPhase);
  }

  // Starts the buckets that are complete, in bucket order only.
  void start_ready() {
    while (next < buckets.size() && buckets[next].pending == 0) {
      start(buckets[next]);
      ++next;
      ++overlapped;
    }
  }

  void on_ready(std::size_t i) {
    if (!armed || ready[i] != 0) {
      return;
    }
    ready[i] = 1;
    if (--buckets[bucket_of[i]].pending == 0) {
      start_ready();
    }
  }

  // Runs after AccumulateGrad has added this backward's gradient into
  // param.grad(), on the autograd engine's thread for the parameter's
  // device (backward() returns only after it).
  class ReadyHook : public torch::autograd::PostAccumulateGradHook {
   public:
    ReadyHook(Impl* impl, std::size_t index) : impl_(impl), index_(index) {}
    void operator()(const torch::autograd::Variable& /*param*/) override {
      impl_->on_ready(index_);
    }

   private:
    Impl* impl_;
    std::size_t index_;
  };
};

GradientReducer::GradientReducer(
    std::shared_ptr<ProcessGroup> group,
    const std::vector<at::Tensor>& params,
    const ReducerOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.group = std::move(group);
  m.options = options;
  for (const auto& p : params) {
    if (p.requires_grad()) {
      m.params.push_back(p);
    }
  }
  m.bucket_of.resize(m.params.size());
  m.ready.assign(m.params.size(), 0);
  // Reverse order: the last layers' gradients come first in backward.
  std::size_t bytes = 0;
  for (std::size_t k = m.params.size(); k-- > 0;) {
    const at::Tensor& p = m.params[k];
    if (m.buckets.empty() || bytes >= m.options.bucket_bytes ||
        m.params[m.buckets.back().members.front()].options().dtype() !=
            p.options().dtype() ||
        m.params[m.buckets.back().members.front()].device() != p.device()) {
      m.buckets.emplace_back();
      bytes = 0;
    }
    Impl::Bucket& b = m.buckets.back();
    b.members.push_back(k);
    b.offsets.push_back(b.numel);
    b.numel += p.numel();
    bytes += p.nbytes();
    m.bucket_of[k] = m.buckets.size() - 1;
  }
  m.reset();
  if (m.options.overlap) {
    for (std::size_t k = 0; k < m.params.size(); ++k) {
      torch::autograd::impl::set_post_acc_grad_hooks(
          m.params[k], std::make_unique<Impl::ReadyHook>(&m, k));
    }
  }
}

GradientReducer::~GradientReducer() {
  if (impl_->options.overlap) {
    for (const auto& p : impl_->params) {
      torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
    }
  }
}

void GradientReducer::arm() {
  impl_->armed = true;
}

void GradientReducer::launch_rest() {
  Impl& m = *impl_;
  m.armed = false;
  m.last_overlapped = m.overlapped;
  for (; m.next < m.buckets.size(); ++m.next) {
    m.start(m.buckets[m.next]);
  }
}

void GradientReducer::finish() {
  Impl& m = *impl_;
  const double scale = 1.0 / m.group->size();
  for (auto& b : m.buckets) {
    b.wait();
    b.flat.mul_(scale);
    for (std::size_t j = 0; j < b.members.size(); ++j) {
      const at::Tensor& p = m.params[b.members[j]];
      at::Tensor g = p.grad();
      if (g.defined()) {
        g.copy_(b.flat.narrow(0, b.offsets[j], p.numel()).view(p.sizes()));
      }
    }
  }
  m.reset();
}

void GradientReducer::discard() {
  Impl& m = *impl_;
  for (auto& b : m.buckets) {
    if (b.wait) {
      b.wait();
    }
  }
  m.reset();
}

std::size_t GradientReducer::bucket_count() const {
  return impl_->buckets.size();
}

std::size_t GradientReducer::started_during_backward() const {
  return impl_->last_overlapped;
}

} // namespace hotloop::parallel
