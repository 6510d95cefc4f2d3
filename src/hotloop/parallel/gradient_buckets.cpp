#include "hotloop/parallel/gradient_buckets.h"

#include <algorithm>

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace hotloop::parallel {

struct GradientBuckets::Impl {
  std::vector<at::Tensor> params;
  BucketOptions options;
  std::function<void(std::size_t)> start;
  std::function<void(std::size_t)> accumulated;
  std::vector<Bucket> buckets;
  std::vector<std::size_t> bucket_of;
  std::vector<std::size_t> pending; // per bucket: members not final yet
  std::vector<char> ready;
  bool armed = false;
  std::size_t next = 0; // the first bucket not started
  std::size_t overlapped = 0;
  std::size_t last_overlapped = 0;

  // Reverse order: the last layers' gradients come first in backward. Each
  // kind of parameter (partition, dtype, device) fills its own open bucket;
  // a bucket closes when full or at the end, and buckets are ordered by
  // when they closed: roughly when backward completes them.
  void plan(const std::vector<int>& partition) {
    struct Open {
      std::size_t bucket;
      std::size_t bytes = 0;
    };
    std::vector<Open> open;
    std::vector<std::size_t> closed_at;
    std::size_t clock = 0;
    for (std::size_t k = params.size(); k-- > 0; ++clock) {
      const at::Tensor& p = params[k];
      const int part = partition.empty() ? 0 : partition[k];
      auto it = std::find_if(open.begin(), open.end(), [&](const Open& o) {
        return joins(buckets[o.bucket], p, part);
      });
      if (it != open.end() && it->bytes >= options.bucket_bytes) {
        open.erase(it);
        it = open.end();
      }
      if (it == open.end()) {
        buckets.emplace_back();
        buckets.back().partition = part;
        closed_at.push_back(0);
        open.push_back({buckets.size() - 1});
        it = open.end() - 1;
      }
      Bucket& b = buckets[it->bucket];
      b.members.push_back(k);
      b.offsets.push_back(b.numel);
      b.numel += p.numel();
      it->bytes += p.nbytes();
      closed_at[it->bucket] = clock;
    }
    std::vector<std::size_t> order(buckets.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      order[i] = i;
    }
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) {
      return closed_at[a] < closed_at[b];
    });
    std::vector<Bucket> sorted;
    for (std::size_t i : order) {
      sorted.push_back(std::move(buckets[i]));
    }
    buckets = std::move(sorted);
    bucket_of.resize(params.size());
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      for (std::size_t k : buckets[b].members) {
        bucket_of[k] = b;
      }
    }
  }

  bool joins(const Bucket& b, const at::Tensor& p, int part) const {
    const at::Tensor& first = params[b.members.front()];
    return b.partition == part && first.dtype() == p.dtype() &&
        first.device() == p.device();
  }

  bool hooked() const {
    return options.overlap || accumulated;
  }

  // Starts the buckets that are complete, in bucket order only.
  void start_ready() {
    while (next < buckets.size() && pending[next] == 0) {
      start(next);
      ++next;
      ++overlapped;
    }
  }

  void on_ready(std::size_t i) {
    if (!armed || ready[i] != 0) {
      return;
    }
    ready[i] = 1;
    if (--pending[bucket_of[i]] == 0) {
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
      if (impl_->accumulated) {
        impl_->accumulated(index_);
      }
      if (impl_->options.overlap) {
        impl_->on_ready(index_);
      }
    }

   private:
    Impl* impl_;
    std::size_t index_;
  };
};

GradientBuckets::GradientBuckets(
    std::vector<at::Tensor> params,
    const std::vector<int>& partition,
    const BucketOptions& options,
    std::function<void(std::size_t)> start,
    std::function<void(std::size_t)> accumulated)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.params = std::move(params);
  m.options = options;
  m.start = std::move(start);
  m.accumulated = std::move(accumulated);
  m.plan(partition);
  reset();
  if (m.hooked()) {
    for (std::size_t k = 0; k < m.params.size(); ++k) {
      torch::autograd::impl::set_post_acc_grad_hooks(
          m.params[k], std::make_unique<Impl::ReadyHook>(&m, k));
    }
  }
}

GradientBuckets::~GradientBuckets() {
  if (impl_->hooked()) {
    for (const auto& p : impl_->params) {
      torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
    }
  }
}

void GradientBuckets::arm() {
  impl_->armed = true;
}

void GradientBuckets::launch_rest() {
  Impl& m = *impl_;
  m.armed = false;
  m.last_overlapped = m.overlapped;
  for (; m.next < m.buckets.size(); ++m.next) {
    m.start(m.next);
  }
}

void GradientBuckets::reset() {
  Impl& m = *impl_;
  m.armed = false;
  m.next = 0;
  m.overlapped = 0;
  std::fill(m.ready.begin(), m.ready.end(), 0);
  m.ready.resize(m.params.size(), 0);
  m.pending.resize(m.buckets.size());
  for (std::size_t b = 0; b < m.buckets.size(); ++b) {
    m.pending[b] = m.buckets[b].members.size();
  }
}

const std::vector<at::Tensor>& GradientBuckets::params() const {
  return impl_->params;
}

const std::vector<Bucket>& GradientBuckets::buckets() const {
  return impl_->buckets;
}

std::size_t GradientBuckets::started_during_backward() const {
  return impl_->last_overlapped;
}

} // namespace hotloop::parallel
