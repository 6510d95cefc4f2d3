#include "hotloop/parallel/sharded_reducer.h"

#include <limits>

#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/errors.h"
#include "hotloop/parallel/process_group.h"

namespace hotloop::parallel {

namespace {

constexpr const char* kReduce = "gradient reduce-scatter";
constexpr const char* kAllReduce = "gradient all-reduce";
constexpr const char* kGather = "parameter all-gather";

} // namespace

at::Tensor laid_out_as(
    const at::Tensor& flat,
    std::int64_t offset,
    const at::Tensor& p) {
  return flat.as_strided(
      p.sizes(), p.strides(), flat.storage_offset() + offset);
}

struct ShardedReducer::Impl {
  std::shared_ptr<ProcessGroup> group;
  ShardOptions options;
  int rank = 0;
  int ranks = 1;
  std::unique_ptr<GradientBuckets> buckets;
  std::vector<ShardLayout> layouts; // per bucket
  std::vector<at::Tensor> flat_params; // per bucket: the parameters' storage
  std::vector<Shard> shards; // per bucket: views into flat_params
  std::vector<at::Tensor> flat_grads; // stage 1: whole; stage 2: the shard
  std::vector<at::Tensor> sending; // stage 2: whole, while reduce-scattered
  std::vector<std::function<void()>> wait; // per bucket, set once started

  // Moves bucket i's parameters into one flat buffer they then view.
  void flatten(std::size_t i) {
    const Bucket& b = buckets->buckets()[i];
    const std::vector<at::Tensor>& params = buckets->params();
    const at::Tensor& first = params[b.members.front()];
    layouts.push_back(ShardLayout::of(b.numel, ranks));
    const ShardLayout& l = layouts.back();
    at::Tensor flat = at::zeros({l.padded}, first.options());
    at::NoGradGuard no_grad;
    for (std::size_t j = 0; j < b.members.size(); ++j) {
      at::Tensor p = params[b.members[j]];
      laid_out_as(flat, b.offsets[j], p).copy_(p);
      p.set_(
          flat.storage(),
          flat.storage_offset() + b.offsets[j],
          p.sizes(),
          p.strides());
    }
    shards.push_back({flat.narrow(0, l.begin(rank), l.shard), b.partition});
    flat_params.push_back(std::move(flat));
  }

  // The bucket's gradients, in the parameters' memory order, into `into`
  // (padding zero); the parameters' own gradients freed.
  void gather_gradients(std::size_t i, at::Tensor& into) {
    const Bucket& b = buckets->buckets()[i];
    const std::vector<at::Tensor>& params = buckets->params();
    const ShardLayout& l = layouts[i];
    if (l.padded > l.numel) {
      into.narrow(0, l.numel, l.padded - l.numel).zero_();
    }
    for (std::size_t j = 0; j < b.members.size(); ++j) {
      at::Tensor p = params[b.members[j]];
      at::Tensor slot = laid_out_as(into, b.offsets[j], p);
      const at::Tensor& g = p.grad();
      if (g.defined()) {
        slot.copy_(g);
        p.mutable_grad().reset();
      } else {
        slot.zero_(); // no gradient here (the step is discarded, or unused)
      }
    }
  }

  void start(std::size_t i) {
    const ShardLayout& l = layouts[i];
    const at::TensorOptions o = flat_params[i].options();
    if (options.stage == 1) {
      if (!flat_grads[i].defined()) {
        flat_grads[i] = at::empty({l.padded}, o);
      }
      gather_gradients(i, flat_grads[i]);
      wait[i] = group->start_allreduce_sum(flat_grads[i], kAllReduce);
      return;
    }
    if (!flat_grads[i].defined()) {
      flat_grads[i] = at::empty({l.shard}, o);
    }
    sending[i] = at::empty({l.padded}, o);
    gather_gradients(i, sending[i]);
    wait[i] =
        group->start_reduce_scatter_sum(sending[i], flat_grads[i], kReduce);
  }

  void wait_all() {
    for (std::size_t i = 0; i < wait.size(); ++i) {
      if (wait[i]) {
        wait[i]();
        wait[i] = nullptr;
      }
      sending[i] = at::Tensor();
    }
  }

  // The shard's part of bucket i's summed gradients.
  at::Tensor shard_gradient(std::size_t i) const {
    return options.stage == 1
        ? flat_grads[i].narrow(0, layouts[i].begin(rank), layouts[i].shard)
        : flat_grads[i];
  }

  // A non-finite gradient on any rank makes every rank's non-finite.
  void agree_on_non_finite(const std::vector<at::Tensor>& grads) {
    std::vector<at::Tensor> bad;
    for (const auto& g : grads) {
      bad.push_back(at::isfinite(g).logical_not().any());
    }
    at::Tensor count = at::stack(bad).sum().to(at::kFloat).reshape({1});
    group->allreduce_sum_(count, "non-finite gradient agreement");
    const at::Tensor poison = at::where(
        count > 0,
        at::scalar_tensor(
            std::numeric_limits<float>::quiet_NaN(), count.options()),
        at::scalar_tensor(0.0, count.options()));
    for (const auto& g : grads) {
      g.add_(poison);
    }
  }
};

ShardedReducer::ShardedReducer(
    std::shared_ptr<ProcessGroup> group,
    const std::vector<at::Tensor>& params,
    const std::vector<int>& partition,
    const ShardOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  if (options.stage < 1 || options.stage > 2) {
    throw Error(
        fmt::format("sharded reducer: stage {} (1 or 2)", options.stage));
  }
  for (const auto& p : params) {
    if (!p.is_non_overlapping_and_dense()) {
      throw Error(
          fmt::format(
              "--shard: a parameter of shape {} is not dense in memory, so it cannot live in a flat buffer",
              fmt::join(p.sizes(), "x")),
          "make the model's parameters contiguous (or channels-last) tensors");
    }
  }
  m.group = std::move(group);
  m.options = options;
  m.rank = m.group->rank();
  m.ranks = m.group->size();
  m.buckets = std::make_unique<GradientBuckets>(
      params, partition, options.buckets, [&m](std::size_t i) { m.start(i); });
  const std::size_t n = m.buckets->buckets().size();
  for (std::size_t i = 0; i < n; ++i) {
    m.flatten(i);
  }
  m.flat_grads.resize(n);
  m.sending.resize(n);
  m.wait.resize(n);
}

ShardedReducer::~ShardedReducer() = default;

const std::vector<ShardedReducer::Shard>& ShardedReducer::shards() const {
  return impl_->shards;
}

const std::vector<Bucket>& ShardedReducer::buckets() const {
  return impl_->buckets->buckets();
}

const std::vector<at::Tensor>& ShardedReducer::params() const {
  return impl_->buckets->params();
}

const ShardLayout& ShardedReducer::layout(std::size_t bucket) const {
  return impl_->layouts.at(bucket);
}

int ShardedReducer::stage() const {
  return impl_->options.stage;
}

int ShardedReducer::rank() const {
  return impl_->rank;
}

ShardedBytes ShardedReducer::bytes() const {
  ShardedBytes b;
  for (const auto& t : impl_->flat_params) {
    b.parameters += t.nbytes();
  }
  for (const auto& t : impl_->flat_grads) {
    if (t.defined()) {
      b.gradients += t.nbytes();
    }
  }
  return b;
}

void ShardedReducer::arm() {
  impl_->buckets->arm();
}

void ShardedReducer::launch_rest() {
  impl_->buckets->launch_rest();
}

void ShardedReducer::finish() {
  Impl& m = *impl_;
  m.wait_all();
  const double scale = 1.0 / m.ranks;
  std::vector<at::Tensor> grads;
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < m.shards.size(); ++i) {
    at::Tensor g = m.shard_gradient(i);
    g.mul_(scale);
    m.shards[i].tensor.mutable_grad() = g;
    grads.push_back(g);
  }
  if (m.options.agree_on_non_finite && !grads.empty()) {
    m.agree_on_non_finite(grads);
  }
  m.buckets->reset();
}

void ShardedReducer::discard() {
  Impl& m = *impl_;
  m.wait_all();
  for (const auto& p : m.buckets->params()) {
    p.mutable_grad().reset();
  }
  m.buckets->reset();
}

void ShardedReducer::after_update() {
  Impl& m = *impl_;
  const bool gloo = m.group->options().backend == Backend::Gloo;
  std::vector<std::function<void()>> waits;
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < m.shards.size(); ++i) {
    // NCCL gathers in place (the input is the output's own part); Gloo is
    // given a copy of it, as its in-place behaviour is not documented.
    const at::Tensor& shard = m.shards[i].tensor;
    waits.push_back(m.group->start_allgather(
        gloo ? shard.clone() : shard, m.flat_params[i], kGather));
  }
  for (auto& w : waits) {
    w();
  }
}

std::size_t ShardedReducer::bucket_count() const {
  return impl_->shards.size();
}

std::size_t ShardedReducer::started_during_backward() const {
  return impl_->buckets->started_during_backward();
}

} // namespace hotloop::parallel
