#include "hotloop/parallel/sharded_reducer.h"

#include <algorithm>
#include <limits>
#include <utility>

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
#include "hotloop/parallel/sharded_reducer_impl.h"

namespace hotloop::parallel {

namespace {

constexpr const char* kReduce = "gradient reduce-scatter";
constexpr const char* kAllReduce = "gradient all-reduce";

} // namespace

at::Tensor laid_out_as(
    const at::Tensor& flat,
    std::int64_t offset,
    const at::Tensor& p) {
  return flat.as_strided(
      p.sizes(), p.strides(), flat.storage_offset() + offset);
}

void ShardedReducer::Impl::flatten(std::size_t i) {
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
  at::Tensor shard = flat.narrow(0, l.begin(rank), l.shard);
  const bool unit = unit_of[i] >= 0;
  shards.push_back({unit ? shard.clone() : shard, group_of[i]});
  if (lowered[i] != 0) {
    // The parameters now view a buffer in the compute type, which the
    // gathers fill before each use (the shard holds the values).
    flat = at::zeros({l.padded}, flat.options().dtype(options.compute_dtype));
    for (std::size_t j = 0; j < b.members.size(); ++j) {
      at::Tensor p = params[b.members[j]];
      at::Tensor view = laid_out_as(flat, b.offsets[j], p);
      p.set_data(view);
      compute_views[b.members[j]] = std::move(view);
    }
  }
  flat_params.push_back(std::move(flat));
  whole.push_back(1);
  if (unit) {
    free_flat(i);
  }
}

void ShardedReducer::Impl::gather_gradients(std::size_t i, at::Tensor& into) {
  const Bucket& b = buckets->buckets()[i];
  const std::vector<at::Tensor>& params = buckets->params();
  const ShardLayout& l = layouts[i];
  if (l.padded > l.numel) {
    into.narrow(0, l.numel, l.padded - l.numel).zero_();
  }
  for (std::size_t j = 0; j < b.members.size(); ++j) {
    at::Tensor p = params[b.members[j]];
    at::Tensor slot = laid_out_as(into, b.offsets[j], p);
    at::Tensor g = p.grad();
    at::Tensor& sum = accumulated[b.members[j]];
    if (sum.defined()) {
      if (g.defined()) {
        sum.add_(g);
      }
      g = std::exchange(sum, at::Tensor());
    }
    if (g.defined()) {
      slot.copy_(g);
      p.mutable_grad().reset();
    } else {
      slot.zero_(); // no gradient here (the step is discarded, or unused)
    }
  }
}

void ShardedReducer::Impl::on_accumulated(std::size_t k) {
  if (!compute_views[k].defined()) {
    return;
  }
  at::Tensor p = buckets->params()[k];
  const at::Tensor& g = p.grad();
  if (!g.defined() || (armed && !accumulated[k].defined())) {
    return;
  }
  at::NoGradGuard no_grad;
  if (accumulated[k].defined()) {
    accumulated[k].add_(g);
  } else {
    accumulated[k] = g.to(at::kFloat);
  }
  p.mutable_grad().reset();
}

void ShardedReducer::Impl::start(std::size_t i) {
  const ShardLayout& l = layouts[i];
  // The reduction in the shard's type (fp32 when computed in bf16).
  const at::TensorOptions o = shards[i].tensor.options();
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
  if (failed) {
    // Thrown away by every rank: zeros, one buffer read by every such
    // collective, and no wait (see launch_rest); the gradients stay where
    // they are until discard().
    if (!zeros.defined() || zeros.numel() < l.padded ||
        zeros.dtype() != o.dtype() || zeros.device() != o.device()) {
      zeros = at::zeros({l.padded}, o);
    }
    sending[i] = zeros.narrow(0, 0, l.padded);
  } else {
    while (options.reduces_in_flight > 0 &&
           reducing.size() >= options.reduces_in_flight) {
      retire_oldest();
    }
    sending[i] = at::empty({l.padded}, o);
    gather_gradients(i, sending[i]);
  }
  wait[i] = group->start_reduce_scatter_sum(sending[i], flat_grads[i], kReduce);
  if (!failed) {
    reducing.push_back(i); // started: retire_oldest may wait for it
    reducing_bytes += sending[i].nbytes();
    peak_reducing = std::max(peak_reducing, reducing_bytes);
  }
}

void ShardedReducer::Impl::retire_oldest() {
  const std::size_t j = reducing.front();
  reducing.pop_front();
  wait[j]();
  wait[j] = nullptr;
  reducing_bytes -= sending[j].nbytes();
  sending[j] = at::Tensor();
}

void ShardedReducer::Impl::wait_all() {
  for (std::size_t i = 0; i < wait.size(); ++i) {
    if (wait[i]) {
      wait[i]();
      wait[i] = nullptr;
    }
    sending[i] = at::Tensor();
  }
  reducing.clear();
  reducing_bytes = 0;
}

at::Tensor ShardedReducer::Impl::shard_gradient(std::size_t i) const {
  return options.stage == 1
      ? flat_grads[i].narrow(0, layouts[i].begin(rank), layouts[i].shard)
      : flat_grads[i];
}

void ShardedReducer::Impl::agree_on_non_finite(
    const std::vector<at::Tensor>& grads) {
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

ShardedReducer::ShardedReducer(
    std::shared_ptr<ProcessGroup> group,
    const std::vector<at::Tensor>& params,
    const std::vector<int>& partition,
    const ShardOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  if (options.stage < 1 || options.stage > 3) {
    throw Error(
        fmt::format("sharded reducer: stage {} (1, 2 or 3)", options.stage));
  }
  if (!options.units.empty() && options.units.size() != params.size()) {
    throw Error(fmt::format(
        "sharded reducer: {} units for {} parameters",
        options.units.size(),
        params.size()));
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
  // Stage 3: a bucket never mixes units either (nor a unit with what stays
  // whole), nor, in a compute type, a unit's matrices (gathered in it) with
  // its vectors (norms' weights, biases: kept fp32, as autocast computes
  // with them): the buckets are planned over (unit, lowered, group).
  const bool units = options.stage == 3 && !options.units.empty();
  const bool lowering = units &&
      options.compute_dtype != c10::ScalarType::Undefined &&
      options.compute_dtype != at::kFloat;
  const int groups = partition.empty()
      ? 1
      : 1 + *std::max_element(partition.begin(), partition.end());
  std::vector<int> key(params.size(), 0);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const bool lowered = lowering && options.units[i] >= 0 &&
        params[i].scalar_type() == at::kFloat && params[i].dim() >= 2;
    key[i] =
        ((units ? options.units[i] + 1 : 0) * 2 + (lowered ? 1 : 0)) * groups +
        (partition.empty() ? 0 : partition[i]);
  }
  std::function<void(std::size_t)> accumulated;
  if (lowering) {
    accumulated = [&m](std::size_t k) { m.on_accumulated(k); };
  }
  m.buckets = std::make_unique<GradientBuckets>(
      params,
      key,
      options.buckets,
      [&m](std::size_t i) { m.start(i); },
      std::move(accumulated));
  m.compute_views.resize(params.size());
  m.accumulated.resize(params.size());
  const std::size_t n = m.buckets->buckets().size();
  for (std::size_t i = 0; i < n; ++i) {
    const int k = m.buckets->buckets()[i].partition;
    m.group_of.push_back(k % groups);
    m.lowered.push_back(static_cast<char>((k / groups) % 2));
    m.unit_of.push_back(k / groups / 2 - 1);
    if (m.unit_of.back() >= 0) {
      const auto u = static_cast<std::size_t>(m.unit_of.back());
      m.unit_buckets.resize(std::max(m.unit_buckets.size(), u + 1));
      m.unit_buckets[u].push_back(i);
    }
  }
  m.pending.resize(m.unit_buckets.size());
  if (!m.unit_buckets.empty()) {
    m.unit_group = m.group->sibling("unit-gathers");
  }
  m.master.resize(n);
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
  const Impl& m = *impl_;
  for (std::size_t i = 0; i < m.flat_params.size(); ++i) {
    if (m.unit_of[i] >= 0) {
      b.parameters += m.shards[i].tensor.nbytes();
    } else {
      b.parameters += m.flat_bytes(i);
    }
  }
  for (const auto& unit : m.unit_buckets) {
    std::uint64_t bytes = 0;
    for (std::size_t i : unit) {
      bytes += m.flat_bytes(i);
    }
    b.largest_unit = std::max(b.largest_unit, bytes);
  }
  b.peak_units = m.peak_units;
  if (m.options.stage >= 2) {
    for (std::size_t i = 0; i < m.layouts.size(); ++i) {
      b.largest_bucket = std::max<std::uint64_t>(
          b.largest_bucket,
          static_cast<std::uint64_t>(m.layouts[i].padded) *
              m.shards[i].tensor.element_size());
    }
  }
  b.peak_reducing = m.peak_reducing;
  for (const auto& t : impl_->flat_grads) {
    if (t.defined()) {
      b.gradients += t.nbytes();
    }
  }
  return b;
}

void ShardedReducer::arm() {
  impl_->armed = true;
  impl_->buckets->arm();
}

void ShardedReducer::begin_step(std::size_t micro_batches) {
  impl_->micro_batches = micro_batches;
  impl_->started_units.clear();
}

void ShardedReducer::launch_rest(bool failed) {
  Impl& m = *impl_;
  // A failed rank's buckets first, none waited for: another rank may be
  // waiting for one of them (its next bucket's bound) before it makes the
  // gathers this rank's catch-up waits for.
  m.failed = failed;
  try {
    m.buckets->launch_rest();
  } catch (...) {
    m.failed = false;
    throw;
  }
  m.failed = false;
  m.catch_up(); // stage 3: the unit gathers an OOM skipped
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
  m.armed = false;
  m.micro_batches = 0;
  m.release_all(); // the units backward gathered last
}

void ShardedReducer::discard() {
  Impl& m = *impl_;
  m.wait_all();
  for (const auto& p : m.buckets->params()) {
    p.mutable_grad().reset();
  }
  for (auto& sum : m.accumulated) {
    sum = at::Tensor();
  }
  m.zeros = at::Tensor();
  m.buckets->reset();
  m.armed = false;
  m.micro_batches = 0;
  m.release_all();
}

void ShardedReducer::after_update() {
  Impl& m = *impl_;
  const bool gloo = m.group->options().backend == Backend::Gloo;
  std::vector<std::function<void()>> waits;
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < m.shards.size(); ++i) {
    if (m.unit_of[i] >= 0) {
      // Stage 3: a unit's flat parameters are gathered from its updated
      // shard when it next runs; kept whole, they are gathered now.
      if (m.whole[i]) {
        waits.push_back(m.start_bucket_gather(i, m.gather_source(i)));
      }
      continue;
    }
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
