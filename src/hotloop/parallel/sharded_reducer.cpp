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
#include <c10/core/DeviceGuard.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>
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
  std::vector<Shard> shards; // per bucket: views into flat_params (stage 3
                             // units: tensors of their own)
  std::vector<int> group_of; // per bucket: its optimizer group
  std::vector<at::Tensor> flat_grads; // stage 1: whole; stage 2: the shard
  std::vector<at::Tensor> sending; // stage 2: whole, while reduce-scattered
  std::vector<std::function<void()>> wait; // per bucket, set once started
  // Stage 3: per bucket, its unit (-1: kept whole) and whether its flat
  // parameters hold memory now; per unit, its buckets.
  std::vector<int> unit_of;
  std::vector<char> whole;
  std::vector<std::vector<std::size_t>> unit_buckets;
  std::vector<std::function<void()>> pending; // per unit: a gather to wait
  // Stage 3 in a compute type: per bucket, whether its unit is gathered in
  // it, and while kept whole its fp32 flat parameters; per parameter of
  // such a bucket, its view into the compute buffer and its gradient
  // summed in fp32 over the micro-batches.
  std::vector<char> lowered;
  std::vector<at::Tensor> master;
  std::vector<at::Tensor> compute_views;
  std::vector<at::Tensor> accumulated;
  bool armed = false;
  bool keep_whole = false;
  std::uint64_t units_whole_bytes = 0; // now, outside keep_whole
  std::uint64_t peak_units = 0;

  std::uint64_t flat_bytes(std::size_t i) const {
    return static_cast<std::uint64_t>(layouts[i].padded) *
        flat_params[i].element_size();
  }

  // Bucket i's flat parameters lose their memory (the views keep their
  // shape and the storage object, which autograd's saved tensors hold)...
  void free_flat(std::size_t i) {
    c10::StorageImpl* s = flat_params[i].storage().unsafeGetStorageImpl();
    s->set_data_ptr_noswap(c10::DataPtr(nullptr, flat_params[i].device()));
    s->set_nbytes(0);
    whole[i] = 0;
  }
  // ... and get it back, holding whatever was there.
  void allocate_flat(std::size_t i) {
    // On the buffer's own device (CUDA's allocator takes the current one).
    const c10::DeviceGuard on(flat_params[i].device());
    c10::StorageImpl* s = flat_params[i].storage().unsafeGetStorageImpl();
    const std::size_t n = flat_bytes(i);
    s->set_data_ptr_noswap(s->allocator()->allocate(n));
    s->set_nbytes(n);
    whole[i] = 1;
  }

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

  // Kept whole, a lowered bucket's parameters view fp32 flat parameters
  // of their own (the master weights, as a checkpoint holds them).
  void allocate_master(std::size_t i) {
    const Bucket& b = buckets->buckets()[i];
    master[i] = at::empty({layouts[i].padded}, shards[i].tensor.options());
    for (std::size_t j = 0; j < b.members.size(); ++j) {
      at::Tensor p = buckets->params()[b.members[j]];
      p.set_data(laid_out_as(master[i], b.offsets[j], p));
    }
    whole[i] = 1;
  }

  // Back to the compute type, `written`: the master weights were changed
  // (a checkpoint loaded), so the shard is taken from them.
  void drop_master(std::size_t i, bool written) {
    const Bucket& b = buckets->buckets()[i];
    if (written) {
      shards[i].tensor.copy_(
          master[i].narrow(0, layouts[i].begin(rank), layouts[i].shard));
    }
    for (std::size_t member : b.members) {
      buckets->params()[member].set_data(compute_views[member]);
    }
    master[i] = at::Tensor();
    whole[i] = 0;
  }

  // Bucket i, whole, freed again (the master weights dropped where they
  // are the parameters); `written`: its shard taken from them first.
  void unwhole(std::size_t i, bool written) {
    if (master[i].defined()) {
      drop_master(i, written);
      return;
    }
    if (written) {
      shards[i].tensor.copy_(
          flat_params[i].narrow(0, layouts[i].begin(rank), layouts[i].shard));
    }
    free_flat(i);
  }

  // What bucket i's gather sends: its shard, or (into flat parameters in
  // the compute type) a copy of it in that type, made before any of a
  // unit's collectives starts.
  at::Tensor gather_source(std::size_t i) const {
    return lowered[i] != 0 && !master[i].defined()
        ? shards[i].tensor.to(options.compute_dtype)
        : shards[i].tensor;
  }

  // Starts gathering `source` (gather_source(i)) into bucket i's whole
  // parameters: the master ones where they are, else the flat ones.
  std::function<void()> start_bucket_gather(std::size_t i, at::Tensor source) {
    const at::Tensor& into = master[i].defined() ? master[i] : flat_params[i];
    auto wait = group->start_allgather(source, into, kGather);
    return [wait = std::move(wait), source = std::move(source)] { wait(); };
  }

  // Starts the gathers of `buckets` (their whole parameters allocated):
  // what each sends made first, so that an allocation that fails starts
  // no collective.
  std::vector<std::function<void()>> start_gathers(
      const std::vector<std::size_t>& buckets) {
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> sources;
    for (std::size_t i : buckets) {
      sources.push_back(gather_source(i));
    }
    std::vector<std::function<void()>> waits;
    for (std::size_t k = 0; k < buckets.size(); ++k) {
      waits.push_back(start_bucket_gather(buckets[k], std::move(sources[k])));
    }
    return waits;
  }

  // Starts gathering unit u's parameters (their memory allocated now).
  void start_gather(std::size_t unit) {
    if (pending[unit]) {
      return;
    }
    // Every buffer first (an allocation that fails starts no collective),
    // then the gathers.
    std::vector<std::size_t> gathered;
    for (std::size_t i : unit_buckets[unit]) {
      if (whole[i]) {
        continue;
      }
      if (keep_whole && lowered[i] != 0) {
        allocate_master(i);
      } else {
        allocate_flat(i);
        units_whole_bytes += keep_whole ? 0 : flat_bytes(i);
      }
      gathered.push_back(i);
    }
    std::vector<std::function<void()>> waits = start_gathers(gathered);
    peak_units = std::max(peak_units, units_whole_bytes);
    if (!waits.empty()) {
      pending[unit] = [waits = std::move(waits)] {
        for (const auto& w : waits) {
          w();
        }
      };
    }
  }

  // Unit u's parameters whole: gathered now, or the prefetch waited for.
  void gather(std::size_t unit) {
    start_gather(unit);
    finish_gather(unit);
  }

  void finish_gather(std::size_t unit) {
    if (pending[unit]) {
      auto wait = std::move(pending[unit]);
      pending[unit] = nullptr;
      wait();
    }
  }

  void release(std::size_t unit) {
    finish_gather(unit); // no collective may write into freed memory
    for (std::size_t i : unit_buckets[unit]) {
      if (whole[i]) {
        free_flat(i);
        units_whole_bytes -= flat_bytes(i);
      }
    }
  }

  void release_all() {
    if (keep_whole) {
      return;
    }
    for (std::size_t u = 0; u < unit_buckets.size(); ++u) {
      release(u);
    }
  }

  // A lowered parameter's gradient, each micro-batch's added into an fp32
  // sum as backward makes it (the last one's reduced as it is when it is
  // the only one).
  void on_accumulated(std::size_t k) {
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

  void start(std::size_t i) {
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
  m.armed = false;
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
  m.buckets->reset();
  m.armed = false;
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

bool ShardedReducer::survives_oom() const {
  return impl_->unit_buckets.empty();
}

std::size_t ShardedReducer::unit_count() const {
  return impl_->unit_buckets.size();
}

void ShardedReducer::gather_unit(std::size_t unit) {
  if (unit < impl_->unit_buckets.size()) {
    impl_->gather(unit);
  }
}

void ShardedReducer::prefetch_unit(std::size_t unit) {
  if (unit < impl_->unit_buckets.size()) {
    impl_->start_gather(unit);
  }
}

void ShardedReducer::release_unit(std::size_t unit) {
  if (unit < impl_->unit_buckets.size() && !impl_->keep_whole) {
    impl_->release(unit);
  }
}

void ShardedReducer::set_whole(bool whole, bool written) {
  Impl& m = *impl_;
  if (whole) {
    m.release_all(); // counted as units whole no more
    m.keep_whole = true;
    for (std::size_t u = 0; u < m.unit_buckets.size(); ++u) {
      m.gather(u);
    }
    return;
  }
  m.keep_whole = false;
  for (std::size_t u = 0; u < m.unit_buckets.size(); ++u) {
    m.finish_gather(u);
  }
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < m.flat_params.size(); ++i) {
    if (m.unit_of[i] < 0 || !m.whole[i]) {
      continue;
    }
    m.unwhole(i, written);
  }
}

bool ShardedReducer::try_whole(const std::function<void()>& allocated) {
  Impl& m = *impl_;
  m.release_all();
  std::vector<std::size_t> buffers;
  bool fits = true;
  try {
    for (const auto& unit : m.unit_buckets) {
      for (std::size_t i : unit) {
        if (m.lowered[i] != 0) {
          m.allocate_master(i); // the fp32 weights, as set_whole's
        } else {
          m.allocate_flat(i);
        }
        buffers.push_back(i);
      }
    }
    if (allocated) {
      allocated();
    }
  } catch (const c10::OutOfMemoryError&) {
    fits = false;
  }
  const std::vector<double> short_of = m.group->allreduce_sum(
      {fits ? 0.0 : 1.0}, "the whole model after training");
  if (short_of.front() > 0) {
    for (std::size_t i : buffers) {
      m.unwhole(i, /*written=*/false);
    }
    return false;
  }
  m.keep_whole = true;
  for (auto& wait : m.start_gathers(buffers)) {
    wait();
  }
  return true;
}

void ShardedReducer::each_unit_whole(
    const std::function<void(std::size_t, const std::vector<at::Tensor>&)>&
        visit,
    bool written) {
  Impl& m = *impl_;
  at::NoGradGuard no_grad;
  for (std::size_t u = 0; u < m.unit_buckets.size(); ++u) {
    m.finish_gather(u);
    std::vector<std::size_t> gathered;
    std::uint64_t bytes = 0;
    for (std::size_t i : m.unit_buckets[u]) {
      if (!m.whole[i]) {
        if (m.lowered[i] != 0) {
          m.allocate_master(i);
          bytes += m.master[i].nbytes();
        } else {
          m.allocate_flat(i);
          bytes += m.flat_bytes(i);
        }
        gathered.push_back(i);
      }
    }
    m.units_whole_bytes += bytes;
    m.peak_units = std::max(m.peak_units, m.units_whole_bytes);
    std::vector<std::function<void()>> waits = m.start_gathers(gathered);
    for (auto& w : waits) {
      w();
    }
    std::vector<at::Tensor> params;
    for (std::size_t i : m.unit_buckets[u]) {
      for (std::size_t member : m.buckets->buckets()[i].members) {
        params.push_back(m.buckets->params()[member]);
      }
    }
    try {
      visit(u, params);
    } catch (...) {
      // Freed again, its shards as they were (whatever the visit wrote).
      for (std::size_t i : gathered) {
        m.unwhole(i, /*written=*/false);
      }
      m.units_whole_bytes -= bytes;
      throw;
    }
    for (std::size_t i : gathered) {
      m.unwhole(i, written);
    }
    m.units_whole_bytes -= bytes;
  }
}

int ShardedReducer::unit_of(std::size_t bucket) const {
  return impl_->unit_of.at(bucket);
}

std::vector<at::Tensor> ShardedReducer::unit_params() const {
  const Impl& m = *impl_;
  std::vector<at::Tensor> out;
  for (const auto& unit : m.unit_buckets) {
    for (std::size_t i : unit) {
      for (std::size_t member : m.buckets->buckets()[i].members) {
        out.push_back(m.buckets->params()[member]);
      }
    }
  }
  return out;
}

std::size_t ShardedReducer::bucket_count() const {
  return impl_->shards.size();
}

std::size_t ShardedReducer::started_during_backward() const {
  return impl_->buckets->started_during_backward();
}

} // namespace hotloop::parallel
