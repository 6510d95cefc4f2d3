#include "hotloop/train/sharded_state.h"

#include <map>

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/zeros.h>
#include <fmt/format.h>

#include "hotloop/errors.h"
#include "hotloop/parallel/process_group.h"
#include "hotloop/parallel/sharded_reducer.h"

namespace hotloop::train {

namespace {

constexpr const char* kKinds[] = {"momentum", "exp_avg", "exp_avg_sq"};

// `t` in `p`'s memory order as one flat run of elements.
at::Tensor flat_as(const at::Tensor& t, const at::Tensor& p) {
  at::Tensor laid = at::empty_strided(p.sizes(), p.strides(), t.options());
  laid.copy_(t);
  return laid.as_strided({laid.numel()}, {1});
}

} // namespace

ShardedOptimizerState::ShardedOptimizerState(
    const parallel::ShardedReducer& reducer,
    std::vector<ParamGroup> whole,
    std::shared_ptr<parallel::ProcessGroup> group)
    : reducer_(&reducer), whole_(std::move(whole)), group_(std::move(group)) {
  std::vector<std::size_t> seen(whole_.size() + 1, 0);
  for (const parallel::Bucket& b : reducer_->buckets()) {
    const auto g = static_cast<std::size_t>(b.partition);
    shard_index_.push_back(seen[g]++);
    std::vector<std::size_t> index;
    for (std::size_t m : b.members) {
      const at::Tensor& p = reducer_->params()[m];
      std::size_t i = 0;
      if (g < whole_.size()) {
        const auto& params = whole_[g].params;
        while (i < params.size() &&
               params[i].unsafeGetTensorImpl() != p.unsafeGetTensorImpl()) {
          ++i;
        }
      }
      index.push_back(i);
    }
    whole_index_.push_back(std::move(index));
  }
}

bool ShardedOptimizerState::updated(std::size_t bucket) const {
  return static_cast<std::size_t>(reducer_->buckets()[bucket].partition) <
      whole_.size();
}

std::string ShardedOptimizerState::shard_name(
    std::size_t bucket,
    const char* kind) const {
  const auto g =
      static_cast<std::size_t>(reducer_->buckets()[bucket].partition);
  return fmt::format("{}.{}.{}", whole_[g].name, shard_index_[bucket], kind);
}

std::string ShardedOptimizerState::member_name(
    std::size_t bucket,
    std::size_t j,
    const char* kind) const {
  const auto g =
      static_cast<std::size_t>(reducer_->buckets()[bucket].partition);
  return fmt::format("{}.{}.{}", whole_[g].name, whole_index_[bucket][j], kind);
}

NamedTensors ShardedOptimizerState::gather(const Optimizer& shards, bool keep)
    const {
  std::map<std::string, at::Tensor> mine;
  std::map<std::string, at::Tensor> gathered;
  NamedTensors out;
  for (auto& [name, t] : shards.state()) {
    if (name == "steps") {
      out.emplace_back(name, t);
    } else {
      mine.emplace(name, t);
    }
  }
  // Bucket by bucket, in the same order on every rank.
  for (std::size_t b = 0; b < reducer_->buckets().size(); ++b) {
    if (!updated(b)) {
      continue;
    }
    const parallel::Bucket& bucket = reducer_->buckets()[b];
    const parallel::ShardLayout& l = reducer_->layout(b);
    for (const char* kind : kKinds) {
      const auto it = mine.find(shard_name(b, kind));
      if (it == mine.end()) {
        continue; // this optimizer keeps no such state (alike on every rank)
      }
      // On the parameters' device (an offloaded state is in host memory,
      // which NCCL cannot gather).
      const at::Tensor& first = reducer_->params()[bucket.members.front()];
      const at::Tensor shard = it->second.to(first.device());
      at::Tensor full = at::empty({l.padded}, shard.options());
      group_->start_allgather(shard, full, "optimizer state gather")();
      if (!keep) {
        continue;
      }
      for (std::size_t j = 0; j < bucket.members.size(); ++j) {
        const at::Tensor& p = reducer_->params()[bucket.members[j]];
        gathered.emplace(
            member_name(b, j, kind),
            parallel::laid_out_as(full, bucket.offsets[j], p).contiguous());
      }
    }
  }
  // In the whole optimizer's order: group by group, kind by kind.
  for (const ParamGroup& g : whole_) {
    for (const char* kind : kKinds) {
      for (std::size_t i = 0; i < g.params.size(); ++i) {
        const auto it = gathered.find(fmt::format("{}.{}.{}", g.name, i, kind));
        if (it != gathered.end()) {
          out.emplace_back(it->first, it->second);
        }
      }
    }
  }
  return out;
}

void ShardedOptimizerState::scatter(
    const NamedTensors& whole,
    Optimizer& shards) const {
  std::map<std::string, at::Tensor> named(whole.begin(), whole.end());
  NamedTensors out;
  if (const auto it = named.find("steps"); it != named.end()) {
    out.emplace_back("steps", it->second);
  }
  const int rank = reducer_->rank();
  for (std::size_t b = 0; b < reducer_->buckets().size(); ++b) {
    if (!updated(b)) {
      continue;
    }
    const parallel::Bucket& bucket = reducer_->buckets()[b];
    const parallel::ShardLayout& l = reducer_->layout(b);
    for (const char* kind : kKinds) {
      std::vector<std::int64_t> numels;
      std::size_t present = 0;
      for (std::size_t j = 0; j < bucket.members.size(); ++j) {
        numels.push_back(reducer_->params()[bucket.members[j]].numel());
        present += named.count(member_name(b, j, kind));
      }
      if (present == 0) {
        continue;
      }
      if (present != bucket.members.size()) {
        throw DataError(
            fmt::format(
                "optimizer state {}: {} of the {} parameters of its bucket have it",
                shard_name(b, kind),
                present,
                bucket.members.size()),
            "the checkpoint was written with another model or optimizer");
      }
      const at::Tensor& first = reducer_->params()[bucket.members.front()];
      at::Tensor shard = at::zeros({l.shard}, first.options());
      for (const auto& piece : l.pieces(bucket.offsets, numels, rank)) {
        const at::Tensor& p = reducer_->params()[bucket.members[piece.member]];
        const at::Tensor& w = named.at(member_name(b, piece.member, kind));
        if (w.sizes() != p.sizes()) {
          throw DataError(fmt::format(
              "optimizer state {}: shape differs from the parameter's",
              member_name(b, piece.member, kind)));
        }
        shard.narrow(0, piece.at, piece.count)
            .copy_(flat_as(w.to(p.device()), p)
                       .narrow(0, piece.from, piece.count));
      }
      out.emplace_back(shard_name(b, kind), shard);
    }
  }
  shards.load_state(out);
}

} // namespace hotloop::train
