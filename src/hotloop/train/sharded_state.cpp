#include "hotloop/train/sharded_state.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <unordered_set>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/zeros.h>
#include <fmt/format.h>

#include "hotloop/errors.h"
#include "hotloop/parallel/process_group.h"
#include "hotloop/parallel/sharded_reducer.h"
#include "hotloop/train/checkpoint_shards.h"

namespace hotloop::train {

namespace {

constexpr const char* kKinds[] = {"momentum", "exp_avg", "exp_avg_sq"};

// `t` in `p`'s memory order as one flat run of elements.
at::Tensor flat_as(const at::Tensor& t, const at::Tensor& p) {
  at::Tensor laid = at::empty_strided(p.sizes(), p.strides(), t.options());
  laid.copy_(t);
  return laid.as_strided({laid.numel()}, {1});
}

// The index's tensors by name.
std::map<std::string, const ShardedTensor*> by_name(const ShardIndex& index) {
  std::map<std::string, const ShardedTensor*> out;
  for (const ShardedTensor& t : index.tensors) {
    out.emplace(t.name, &t);
  }
  return out;
}

} // namespace

ShardedOptimizerState::ShardedOptimizerState(
    const parallel::ShardedReducer& reducer,
    std::vector<ParamGroup> whole,
    std::shared_ptr<parallel::ProcessGroup> group,
    std::vector<std::string> names)
    : reducer_(&reducer),
      whole_(std::move(whole)),
      group_(std::move(group)),
      names_(std::move(names)) {
  for (const at::Tensor& p : reducer_->unit_params()) {
    in_units_.insert(p.unsafeGetTensorImpl());
  }
  std::vector<std::size_t> seen(whole_.size() + 1, 0);
  for (std::size_t bi = 0; bi < reducer_->buckets().size(); ++bi) {
    const parallel::Bucket& b = reducer_->buckets()[bi];
    const auto g = static_cast<std::size_t>(reducer_->shards()[bi].partition);
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

bool ShardedOptimizerState::shards_model() const {
  return !names_.empty() && reducer_->unit_count() > 0;
}

std::vector<std::int64_t> ShardedOptimizerState::numels(
    std::size_t bucket) const {
  std::vector<std::int64_t> out;
  for (std::size_t m : reducer_->buckets()[bucket].members) {
    out.push_back(reducer_->params()[m].numel());
  }
  return out;
}

bool ShardedOptimizerState::updated(std::size_t bucket) const {
  return static_cast<std::size_t>(reducer_->shards()[bucket].partition) <
      whole_.size();
}

std::string ShardedOptimizerState::shard_name(
    std::size_t bucket,
    const char* kind) const {
  const auto g = static_cast<std::size_t>(reducer_->shards()[bucket].partition);
  return fmt::format("{}.{}.{}", whole_[g].name, shard_index_[bucket], kind);
}

std::string ShardedOptimizerState::member_name(
    std::size_t bucket,
    std::size_t j,
    const char* kind) const {
  const auto g = static_cast<std::size_t>(reducer_->shards()[bucket].partition);
  return fmt::format("{}.{}.{}", whole_[g].name, whole_index_[bucket][j], kind);
}

template <typename F>
void ShardedOptimizerState::for_each_piece(
    const std::set<std::string>& kinds,
    int rank,
    F&& f) const {
  for (std::size_t b = 0; b < reducer_->buckets().size(); ++b) {
    if (!updated(b)) {
      continue;
    }
    const parallel::Bucket& bucket = reducer_->buckets()[b];
    for (const char* kind : kKinds) {
      if (!kinds.contains(shard_name(b, kind))) {
        continue; // this optimizer keeps no such state (alike on every rank)
      }
      for (const auto& piece :
           reducer_->layout(b).pieces(bucket.offsets, numels(b), rank)) {
        f(b, kind, piece);
      }
    }
  }
}

ShardIndex ShardedOptimizerState::index(const Optimizer& shards) const {
  std::set<std::string> kinds;
  for (const auto& [name, t] : shards.state()) {
    kinds.insert(name);
  }
  std::map<std::string, ShardedTensor> tensors;
  for (int r = 0; r < group_->size(); ++r) {
    for_each_piece(kinds, r, [&](std::size_t b, const char* kind, auto piece) {
      const at::Tensor& p =
          reducer_->params()[reducer_->buckets()[b].members[piece.member]];
      ShardedTensor& t = tensors[member_name(b, piece.member, kind)];
      t.shape = p.sizes().vec();
      t.strides = p.strides().vec();
      t.pieces.push_back({r, piece.from, piece.count});
    });
  }
  // In the whole optimizer's order: group by group, kind by kind.
  ShardIndex index;
  index.ranks = group_->size();
  for (const ParamGroup& g : whole_) {
    for (const char* kind : kKinds) {
      for (std::size_t i = 0; i < g.params.size(); ++i) {
        const std::string name = fmt::format("{}.{}.{}", g.name, i, kind);
        if (const auto it = tensors.find(name); it != tensors.end()) {
          it->second.name = name;
          index.tensors.push_back(std::move(it->second));
        }
      }
    }
  }
  return index;
}

NamedTensors ShardedOptimizerState::pieces(const Optimizer& shards) const {
  const NamedTensors state = shards.state();
  const std::map<std::string, at::Tensor> mine(state.begin(), state.end());
  std::set<std::string> kinds;
  for (const auto& [name, t] : state) {
    kinds.insert(name);
  }
  NamedTensors out;
  for_each_piece(
      kinds,
      reducer_->rank(),
      [&](std::size_t b, const char* kind, auto piece) {
        out.emplace_back(
            member_name(b, piece.member, kind),
            mine.at(shard_name(b, kind)).narrow(0, piece.at, piece.count));
      });
  return out;
}

ShardIndex ShardedOptimizerState::model_index() const {
  ShardIndex index;
  index.ranks = group_->size();
  std::map<std::string, std::size_t> at;
  for (std::size_t b = 0; b < reducer_->buckets().size(); ++b) {
    if (reducer_->unit_of(b) < 0) {
      continue;
    }
    const parallel::Bucket& bucket = reducer_->buckets()[b];
    for (int r = 0; r < index.ranks; ++r) {
      for (const auto& piece :
           reducer_->layout(b).pieces(bucket.offsets, numels(b), r)) {
        const std::size_t m = bucket.members[piece.member];
        const std::string name = kModelPieces + names_[m];
        auto [it, fresh] = at.emplace(name, index.tensors.size());
        if (fresh) {
          const at::Tensor& p = reducer_->params()[m];
          index.tensors.push_back(
              {name, p.sizes().vec(), p.strides().vec(), {}});
        }
        index.tensors[it->second].pieces.push_back(
            {r, piece.from, piece.count});
      }
    }
  }
  return index;
}

NamedTensors ShardedOptimizerState::model_pieces() const {
  NamedTensors out;
  for (std::size_t b = 0; b < reducer_->buckets().size(); ++b) {
    if (reducer_->unit_of(b) < 0) {
      continue;
    }
    const parallel::Bucket& bucket = reducer_->buckets()[b];
    const at::Tensor& shard = reducer_->shards()[b].tensor; // fp32 master
    for (const auto& piece : reducer_->layout(b).pieces(
             bucket.offsets, numels(b), reducer_->rank())) {
      out.emplace_back(
          kModelPieces + names_[bucket.members[piece.member]],
          shard.detach().narrow(0, piece.at, piece.count));
    }
  }
  return out;
}

ShardedOptimizerState::Saved ShardedOptimizerState::save(
    const std::string& dir,
    std::int64_t step,
    const Optimizer& shards) const {
  Saved saved{index(shards), std::nullopt};
  if (shards_model()) {
    saved.model = model_index();
  }
  // One id a save, rank 0's: each file carries it, so a file of another
  // save (or run) is told apart from this one's.
  std::int64_t id = 0;
  if (reducer_->rank() == 0) {
    std::random_device device;
    id = static_cast<std::int64_t>(
        ((static_cast<std::uint64_t>(device()) << 32) | device()) >> 1);
  }
  saved.optimizer.id =
      fmt::format("{:016x}", group_->allreduce_max(id, "checkpoint shard id"));
  if (saved.model) {
    saved.model->id = saved.optimizer.id;
  }
  // Every rank writes its file, then all learn whether every rank did.
  std::exception_ptr failed;
  try {
    NamedTensors mine = pieces(shards);
    if (saved.model) {
      const NamedTensors weights = model_pieces();
      mine.insert(mine.end(), weights.begin(), weights.end());
    }
    create_checkpoint_dir(dir);
    write_shard_file(dir, step, saved.optimizer, reducer_->rank(), mine);
  } catch (...) { // any failure: the others must not wait for this rank
    failed = std::current_exception();
  }
  std::vector<double> failures(static_cast<std::size_t>(group_->size()));
  failures[static_cast<std::size_t>(reducer_->rank())] = failed ? 1 : 0;
  failures = group_->allreduce_sum(failures, "checkpoint shards written");
  if (failed) {
    std::rethrow_exception(failed);
  }
  for (std::size_t r = 0; r < failures.size(); ++r) {
    if (failures[r] > 0) {
      throw DataError(
          fmt::format(
              "the checkpoint of step {}: rank {} could not write its shard file {} (its own error says why)",
              step,
              r,
              shard_file_path(
                  dir, step, static_cast<int>(r), saved.optimizer.ranks)),
          "free space in or fix the permissions of " + dir);
    }
  }
  return saved;
}

template <typename Name>
bool ShardedOptimizerState::plan_copies(
    std::size_t bucket,
    Name&& name_of,
    const std::map<std::string, const ShardedTensor*>& saved,
    const at::Tensor& shard,
    std::vector<Copy>& copies) const {
  const parallel::Bucket& b = reducer_->buckets()[bucket];
  for (const auto& piece : reducer_->layout(bucket).pieces(
           b.offsets, numels(bucket), reducer_->rank())) {
    const std::string name = name_of(piece.member);
    const ShardedTensor& t = *saved.at(name);
    const at::Tensor& p = reducer_->params()[b.members[piece.member]];
    if (t.shape != p.sizes().vec() || t.strides != p.strides().vec()) {
      return false;
    }
    for (const ShardPiece& s : t.pieces) {
      const std::int64_t lo = std::max(s.from, piece.from);
      const std::int64_t hi =
          std::min(s.from + s.count, piece.from + piece.count);
      if (lo < hi) {
        copies.push_back(
            {s.rank,
             name,
             lo - s.from,
             shard.narrow(0, piece.at + (lo - piece.from), hi - lo)});
      }
    }
  }
  return true;
}

void ShardedOptimizerState::read_copies(
    const std::string& dir,
    std::int64_t step,
    const ShardIndex& index,
    const std::vector<Copy>& copies) {
  at::NoGradGuard no_grad;
  for (int r = 0; r < index.ranks; ++r) {
    if (std::none_of(copies.begin(), copies.end(), [r](const Copy& c) {
          return c.rank == r;
        })) {
      continue;
    }
    const NamedTensors file = read_shard_file(dir, step, index, r);
    const std::map<std::string, at::Tensor> pieces(file.begin(), file.end());
    for (const Copy& c : copies) {
      if (c.rank != r) {
        continue;
      }
      const auto it = pieces.find(c.name);
      if (it == pieces.end() || c.from + c.to.numel() > it->second.numel()) {
        throw DataError(
            fmt::format(
                "{}: its piece of {} is not the one the index names",
                shard_file_path(dir, step, r, index.ranks),
                c.name),
            kRestoreShardsHint);
      }
      at::Tensor(c.to).copy_(it->second.narrow(0, c.from, c.to.numel()));
    }
  }
}

void ShardedOptimizerState::load(
    const std::string& dir,
    std::int64_t step,
    const ShardIndex& index,
    const NamedTensors& head,
    Optimizer& shards) const {
  const auto saved = by_name(index);
  std::vector<Copy> copies;
  NamedTensors out;
  for (const auto& [name, t] : head) {
    if (name == "steps") {
      out.emplace_back(name, t);
    }
  }
  for (std::size_t b = 0; b < reducer_->buckets().size(); ++b) {
    if (!updated(b)) {
      continue;
    }
    const parallel::Bucket& bucket = reducer_->buckets()[b];
    for (const char* kind : kKinds) {
      std::size_t present = 0;
      for (std::size_t j = 0; j < bucket.members.size(); ++j) {
        present += saved.count(member_name(b, j, kind));
      }
      if (present == 0) {
        continue;
      }
      check_complete(b, kind, present);
      // In the shard's type: the parameters may be compute copies (bf16
      // at stage 3), the state is the fp32 master's.
      at::Tensor shard = at::zeros(
          {reducer_->layout(b).shard}, reducer_->shards()[b].tensor.options());
      const auto name_of = [&](std::size_t j) {
        return member_name(b, j, kind);
      };
      if (!plan_copies(b, name_of, saved, shard, copies)) {
        // Saved in another shape or memory layout: from the whole state,
        // which scatter lays out as the parameter is now.
        NamedTensors whole = head;
        const auto all = whole_tensors(dir, step, index);
        whole.insert(whole.end(), all.begin(), all.end());
        scatter(whole, shards);
        return;
      }
      out.emplace_back(shard_name(b, kind), shard);
    }
  }
  read_copies(dir, step, index, copies);
  shards.load_state(out);
}

bool ShardedOptimizerState::in_unit(const at::Tensor& t) const {
  return in_units_.contains(t.unsafeGetTensorImpl());
}

bool ShardedOptimizerState::can_cut_model(const ShardIndex& index) const {
  if (!shards_model()) {
    return false;
  }
  const auto saved = by_name(index);
  std::size_t mine = 0;
  for (std::size_t b = 0; b < reducer_->buckets().size(); ++b) {
    if (reducer_->unit_of(b) < 0) {
      continue;
    }
    for (std::size_t m : reducer_->buckets()[b].members) {
      const auto it = saved.find(kModelPieces + names_[m]);
      const at::Tensor& p = reducer_->params()[m];
      if (it == saved.end() || it->second->shape != p.sizes().vec() ||
          it->second->strides != p.strides().vec()) {
        return false;
      }
      ++mine;
    }
  }
  return mine == saved.size();
}

void ShardedOptimizerState::cut_model(
    const std::string& dir,
    std::int64_t step,
    const ShardIndex& index) const {
  const auto saved = by_name(index);
  std::vector<Copy> copies;
  for (std::size_t b = 0; b < reducer_->buckets().size(); ++b) {
    if (reducer_->unit_of(b) < 0) {
      continue;
    }
    const parallel::Bucket& bucket = reducer_->buckets()[b];
    const auto name_of = [&](std::size_t j) {
      return kModelPieces + names_[bucket.members[j]];
    };
    // The fp32 master itself: the unit is gathered from it at its next use.
    plan_copies(b, name_of, saved, reducer_->shards()[b].tensor, copies);
  }
  read_copies(dir, step, index, copies);
}

void ShardedOptimizerState::check_complete(
    std::size_t bucket,
    const char* kind,
    std::size_t present) const {
  const std::size_t members = reducer_->buckets()[bucket].members.size();
  if (present != members) {
    throw DataError(
        fmt::format(
            "optimizer state {}: {} of the {} parameters of its bucket have it",
            shard_name(bucket, kind),
            present,
            members),
        "the checkpoint was written with another model or optimizer");
  }
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
      check_complete(b, kind, present);
      at::Tensor shard =
          at::zeros({l.shard}, reducer_->shards()[b].tensor.options());
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
