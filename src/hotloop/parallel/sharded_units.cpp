#include "hotloop/parallel/sharded_reducer_impl.h"

#include <algorithm>
#include <exception>
#include <utility>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "hotloop/core/first_line.h"
#include "hotloop/errors.h"
#include "hotloop/parallel/process_group.h"

namespace hotloop::parallel {

namespace {

bool out_of_memory(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const c10::OutOfMemoryError&) {
    return true;
  } catch (...) {
    return false;
  }
}

} // namespace

void ShardedReducer::Impl::free_flat(std::size_t i) {
  c10::StorageImpl* s = flat_params[i].storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(c10::DataPtr(nullptr, flat_params[i].device()));
  s->set_nbytes(0);
  whole[i] = 0;
}

void ShardedReducer::Impl::allocate_flat(std::size_t i) {
  // On the buffer's own device (CUDA's allocator takes the current one).
  const c10::DeviceGuard on(flat_params[i].device());
  c10::StorageImpl* s = flat_params[i].storage().unsafeGetStorageImpl();
  const std::size_t n = flat_bytes(i);
  s->set_data_ptr_noswap(s->allocator()->allocate(n));
  s->set_nbytes(n);
  whole[i] = 1;
}

void ShardedReducer::Impl::allocate_master(std::size_t i) {
  const Bucket& b = buckets->buckets()[i];
  master[i] = at::empty({layouts[i].padded}, shards[i].tensor.options());
  for (std::size_t j = 0; j < b.members.size(); ++j) {
    at::Tensor p = buckets->params()[b.members[j]];
    p.set_data(laid_out_as(master[i], b.offsets[j], p));
  }
  whole[i] = 1;
}

void ShardedReducer::Impl::drop_master(std::size_t i, bool written) {
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

void ShardedReducer::Impl::unwhole(std::size_t i, bool written) {
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

at::Tensor ShardedReducer::Impl::gather_source(std::size_t i) const {
  return lowered[i] != 0 && !master[i].defined()
      ? shards[i].tensor.to(options.compute_dtype)
      : shards[i].tensor;
}

std::function<void()> ShardedReducer::Impl::start_bucket_gather(
    std::size_t i,
    at::Tensor source) {
  const at::Tensor& into = master[i].defined() ? master[i] : flat_params[i];
  auto wait = (unit_group ? *unit_group : *group)
                  .start_allgather(source, into, kGather);
  return [wait = std::move(wait), source = std::move(source)] { wait(); };
}

std::vector<std::function<void()>> ShardedReducer::Impl::start_gathers(
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

void ShardedReducer::Impl::start_gather(std::size_t unit) {
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
  if (!waits.empty() && micro_batches > 0) {
    started_units.push_back(unit);
  }
  if (!waits.empty()) {
    pending[unit] = [waits = std::move(waits)] {
      for (const auto& w : waits) {
        w();
      }
    };
  }
}

void ShardedReducer::Impl::gather(std::size_t unit) {
  start_gather(unit);
  finish_gather(unit);
}

void ShardedReducer::Impl::finish_gather(std::size_t unit) {
  if (pending[unit]) {
    auto wait = std::move(pending[unit]);
    pending[unit] = nullptr;
    wait();
  }
}

void ShardedReducer::Impl::release(std::size_t unit) {
  finish_gather(unit); // no collective may write into freed memory
  for (std::size_t i : unit_buckets[unit]) {
    if (whole[i]) {
      free_flat(i);
      units_whole_bytes -= flat_bytes(i);
    }
  }
}

void ShardedReducer::Impl::release_all() {
  if (keep_whole) {
    return;
  }
  for (std::size_t u = 0; u < unit_buckets.size(); ++u) {
    release(u);
  }
}

std::vector<std::size_t> ShardedReducer::Impl::step_schedule() const {
  std::vector<std::size_t> forward;
  for (std::size_t u = 0; u < unit_buckets.size(); ++u) {
    if (!unit_buckets[u].empty()) {
      forward.push_back(u);
    }
  }
  std::vector<std::size_t> step;
  for (std::size_t k = 0; k < micro_batches; ++k) {
    step.insert(step.end(), forward.begin(), forward.end());
    step.insert(step.end(), forward.rbegin(), forward.rend());
  }
  return step;
}

void ShardedReducer::Impl::catch_up() {
  if (micro_batches == 0 || keep_whole || unit_buckets.empty()) {
    return;
  }
  const std::vector<std::size_t> step = step_schedule();
  const std::size_t made = started_units.size();
  if (made > step.size() ||
      !std::equal(started_units.begin(), started_units.end(), step.begin())) {
    throw Error(fmt::format(
        "rank {}: stage 3 gathered the model's units in an order the step does not plan ({} gathers for {} planned; a model that runs a unit twice, or skips one, cannot be sharded so)",
        rank,
        made,
        step.size()));
  }
  release_all(); // each unit's started gather waited for first
  try {
    for (std::size_t k = made; k < step.size(); ++k) {
      gather(step[k]);
      release(step[k]);
    }
  } catch (const c10::OutOfMemoryError& e) {
    throw Error(
        fmt::format(
            "rank {}: out of memory again while making the rest of the step's parameter gathers after an out-of-memory: {}",
            rank,
            first_line(e.what())),
        "lower --batch or --micro-batch, or turn on --activation-checkpointing");
  }
}

std::exception_ptr ShardedReducer::Impl::allocate_whole(
    const std::vector<std::size_t>& wanted,
    std::vector<std::size_t>& done) {
  try {
    for (std::size_t i : wanted) {
      if (lowered[i] != 0) {
        allocate_master(i); // the fp32 weights, as a checkpoint holds them
      } else {
        allocate_flat(i);
      }
      done.push_back(i);
    }
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

bool ShardedReducer::Impl::all_allocated(
    const std::exception_ptr& failed,
    const char* what) {
  const std::vector<double> short_of =
      group->allreduce_sum({failed ? 1.0 : 0.0}, what);
  return short_of.front() == 0;
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
  std::vector<std::size_t> all;
  for (const auto& unit : m.unit_buckets) {
    all.insert(all.end(), unit.begin(), unit.end());
  }
  std::vector<std::size_t> buffers;
  std::exception_ptr failed = m.allocate_whole(all, buffers);
  if (!failed && allocated) {
    try {
      allocated();
    } catch (...) {
      failed = std::current_exception();
    }
  }
  if (!m.all_allocated(failed, "the whole model after training")) {
    for (std::size_t i : buffers) {
      m.unwhole(i, /*written=*/false);
    }
    if (failed && !out_of_memory(failed)) {
      std::rethrow_exception(failed); // this rank's error, not a shortage
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
    std::vector<std::size_t> wanted;
    for (std::size_t i : m.unit_buckets[u]) {
      if (!m.whole[i]) {
        wanted.push_back(i);
      }
    }
    std::vector<std::size_t> gathered;
    const std::exception_ptr failed = m.allocate_whole(wanted, gathered);
    if (!m.all_allocated(failed, "a unit whole")) {
      for (std::size_t i : gathered) {
        m.unwhole(i, /*written=*/false);
      }
      if (failed) {
        std::rethrow_exception(failed);
      }
      throw Error(fmt::format(
          "another rank could not hold unit {} of the model whole (out of memory)",
          u));
    }
    std::uint64_t bytes = 0;
    for (std::size_t i : gathered) {
      bytes += m.master[i].defined() ? m.master[i].nbytes() : m.flat_bytes(i);
    }
    m.units_whole_bytes += bytes;
    m.peak_units = std::max(m.peak_units, m.units_whole_bytes);
    for (auto& w : m.start_gathers(gathered)) {
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

} // namespace hotloop::parallel
