#include "hotloop/train/checkpointer.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>
#include <vector>

#include <ATen/ops/empty.h>
#include <fmt/format.h>
#include <torch/nn/module.h>

#include "hotloop/cuda/build_info.h"
#include "hotloop/errors.h"
#include "hotloop/model/weights.h"
#include "hotloop/train/checkpoint_shards.h"
#include "hotloop/train/optimizer.h"
#include "hotloop/train/option_table.h"
#include "hotloop/train/options.h"
#include "hotloop/train/rng_state.h"
#include "hotloop/train/run_folder.h"

namespace hotloop::train {

namespace fs = std::filesystem;

// What defines the training: the options the table marks kept_on_resume
// (option_table.cpp) and two facts derived from the options and the data,
// the model as built and the number of ranks; a checkpoint resumes exactly
// only under the same ones. The rest may change on resume: the run's length
// (--steps, --epochs: a longer run continues), the micro-batch and the
// number of ranks (the position is converted through the global samples
// done), the ZeRO stage (the checkpoint's optimizer state is whole), and
// what only changes speed or output
// (threads, workers, CUDA graphs, readback, logging, checkpoints).
std::vector<std::string> differing_options(
    const nlohmann::json& saved,
    const TrainerOptions& options) {
  const nlohmann::json now = options.to_json();
  std::vector<std::string> out;
  auto compare = [&](const std::string& name,
                     const nlohmann::json& a,
                     const nlohmann::json& b) {
    if (a != b) {
      out.push_back(fmt::format(
          "{}: {} in the checkpoint, {} now", name, a.dump(), b.dump()));
    }
  };
  const nlohmann::json& was = saved.at("options");
  const TrainerOptions defaults;
  for (const TrainerOption& option : trainer_options()) {
    if (option.must_match) {
      compare(
          option.name,
          was.contains(option.name) ? was[option.name] : option.get(defaults),
          now["options"][option.name]);
    }
  }
  // The number of ranks may change: --batch is the global batch, and the
  // data's order does not depend on how many ranks share it out.
  compare("model", saved.value("model", nlohmann::json()), now["model"]);
  if (options.model.lora.enabled()) {
    // The checkpoint holds the adapters; the base they adapt is --init's.
    compare(
        "init", was.value("init", nlohmann::json("")), now["options"]["init"]);
  }
  return out;
}

namespace {

model::StateDict trainable_only(
    const torch::nn::Module& module,
    const model::StateDict& all) {
  std::set<std::string> trainable;
  for (const auto& p : module.named_parameters()) {
    if (p.value().requires_grad()) {
      trainable.insert(p.key());
    }
  }
  model::StateDict out;
  for (const auto& [name, t] : all) {
    if (trainable.contains(name)) {
      out.emplace_back(name, t);
    }
  }
  return out;
}

// The module's own weights with a checkpoint's (its trainable part) laid
// over them; a name the module lacks is left in, for the strict load to
// name.
model::StateDict over_model(
    const torch::nn::Module& module,
    const model::StateDict& saved) {
  model::StateDict out = model::state_dict(module);
  for (const auto& [name, t] : saved) {
    auto it = std::find_if(
        out.begin(), out.end(), [&](const auto& e) { return e.first == name; });
    if (it == out.end()) {
      out.emplace_back(name, t);
    } else {
      it->second = t;
    }
  }
  return out;
}

} // namespace

Checkpointer::Checkpointer(
    const RunState& s,
    const FaultInjection& faults,
    std::shared_ptr<const ShardedOptimizerState> sharded)
    : dir_(
          s.run_dir.empty() ? std::string()
                            : RunFolder(s.run_dir).checkpoints()),
      saves_(!s.run_dir.empty() && s.options->keep_checkpoints > 0),
      writes_(saves_ && s.rank == 0),
      faults_(&faults),
      sharded_(std::move(sharded)) {}

std::string Checkpointer::save(
    const RunState& s,
    const PrecisionMode& precision,
    const nlohmann::json& progress,
    const nlohmann::json& last_eval) const {
  auto kill = [this, &s] { faults_->kill_at(KillPoint::Checkpoint, s.step); };
  // Sharded: every rank writes its part of the optimizer state (stage 3:
  // and of the units' weights) into its own file first; the checkpoint,
  // which indexes them, comes last.
  std::optional<ShardedOptimizerState::Saved> shards;
  if (sharded_ && saves_) {
    shards = sharded_->save(dir_, s.step, *s.optimizer);
  }
  if (!writes_) {
    return {};
  }
  Checkpoint c;
  c.meta = {
      {"step", s.step},
      {"epoch", s.epoch},
      {"next_batch", s.next_batch},
      {"micro_batch", s.micro_batch},
      {"total_steps", s.total_steps},
      {"hotloop", build_info().hotloop_version},
      {"config", s.options->to_json()},
      {"progress", progress},
      {"last_eval", last_eval}};
  c.model = model::state_dict(*s.model);
  if (s.options->model.lora.enabled()) {
    // Only what trains: the frozen base is --init's (or the seed's), rebuilt
    // the same way on resume.
    c.model = trainable_only(*s.model, c.model);
  }
  if (shards) {
    c.meta[kShardIndexKey] = shards->optimizer.to_json();
    for (auto& [name, t] : s.optimizer->state()) {
      if (name == "steps") {
        c.optimizer.emplace_back(name, t);
      }
    }
  } else {
    c.optimizer = s.optimizer->state();
  }
  if (shards && shards->model) {
    // Stage 3: the units' weights are in the shard files, the rest here.
    ShardIndex& index = *shards->model;
    model::StateDict rest;
    for (auto& [name, t] : c.model) {
      index.order.push_back(name);
      if (!sharded_->in_unit(t)) {
        rest.emplace_back(name, t);
      }
    }
    c.model = std::move(rest);
    c.meta[kModelShardIndexKey] = index.to_json();
  }
  c.scaler = precision.state();
  c.rng = rng_state(s.device);
  return save_checkpoint(dir_, s.step, c, s.options->keep_checkpoints, kill);
}

void Checkpointer::load_optimizer(
    const std::string& path,
    const Checkpoint& c,
    const RunState& s) const {
  if (!c.meta.contains(kShardIndexKey)) {
    if (sharded_) {
      sharded_->scatter(c.optimizer, *s.optimizer);
    } else {
      s.optimizer->load_state(c.optimizer);
    }
    return;
  }
  const ShardIndex index = ShardIndex::from_json(c.meta[kShardIndexKey], path);
  const std::string dir = fs::path(path).parent_path().string();
  const auto step = c.meta.at("step").get<std::int64_t>();
  if (sharded_) {
    sharded_->load(dir, step, index, c.optimizer, *s.optimizer);
    return;
  }
  model::StateDict whole = c.optimizer;
  const model::StateDict pieces = whole_tensors(dir, step, index);
  whole.insert(whole.end(), pieces.begin(), pieces.end());
  s.optimizer->load_state(whole);
}

void Checkpointer::load_model_weights(
    const std::string& path,
    const Checkpoint& c,
    const RunState& s,
    const ModelLoader& load_model) const {
  model::LoadOptions lo;
  lo.source = path;
  model::StateDict weights = c.model;
  const std::string dir = fs::path(path).parent_path().string();
  const auto step = c.meta.at("step").get<std::int64_t>();
  std::optional<ShardIndex> cut; // stage 3 from stage 3
  if (c.meta.contains(kModelShardIndexKey)) {
    ShardIndex index = ShardIndex::from_json(c.meta[kModelShardIndexKey], path);
    if (sharded_ && sharded_->can_cut_model(index)) {
      // The names and shapes checked against stand-ins without memory.
      const std::string prefix = kModelPieces;
      for (const ShardedTensor& t : index.tensors) {
        weights.emplace_back(
            t.name.substr(prefix.size()),
            at::empty(t.shape, at::TensorOptions().device(at::kMeta)));
      }
      cut = std::move(index);
    } else {
      weights = whole_model(dir, step, index, c.model);
    }
  }
  if (s.options->model.lora.enabled()) {
    weights = over_model(*s.model, weights);
  }
  if (cut) {
    // The rest loaded; the units' shards cut from the shard files.
    lo.defer = [this](const at::Tensor& t) { return sharded_->in_unit(t); };
    model::load_state_dict(*s.model, weights, lo);
    sharded_->cut_model(dir, step, *cut);
  } else if (load_model) {
    load_model(weights, lo);
  } else {
    model::load_state_dict(*s.model, weights, lo);
  }
}

std::optional<Resumed> Checkpointer::resume(
    const RunState& s,
    PrecisionMode& precision,
    const std::function<void(const std::string&)>& log,
    const ModelLoader& load_model) const {
  const std::string& resume = s.options->resume;
  if (s.run_dir.empty()) {
    if (!resume.empty()) {
      throw UsageError(
          "resume: a run without a run directory has no checkpoints to resume from",
          "give --out the run's directory");
    }
    return std::nullopt;
  }
  if (resume.empty()) {
    if (!list_checkpoints(dir_).empty()) {
      throw UsageError(
          fmt::format("{} already holds a run's checkpoints", s.run_dir),
          "continue it with --resume auto, or choose another --out");
    }
    return std::nullopt;
  }
  // A run killed while writing a checkpoint leaves its temporary file.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(".step-") &&
        name.find(".safetensors.") != std::string::npos) {
      fs::remove(e.path(), ec);
      log(fmt::format(
          "removed {}: an unfinished checkpoint (the run was stopped while writing it)",
          e.path().string()));
    }
  }
  if (writes_) {
    remove_orphan_shards(
        dir_, std::numeric_limits<std::int64_t>::max(), 0, log);
  }
  std::optional<std::pair<std::string, Checkpoint>> found;
  if (resume == "auto") {
    found = newest_valid_checkpoint(
        dir_, [&log](const std::string& w) { log("warning: " + w); });
    if (!found) {
      log(fmt::format(
          "resume auto: no checkpoint in {}; starting fresh", dir_));
      return std::nullopt;
    }
  } else {
    found.emplace(resume, load_checkpoint(resume));
  }
  const auto& [path, c] = *found;
  if (c.meta.contains("config") && !c.meta["config"].contains("options")) {
    throw UsageError(
        fmt::format(
            "cannot resume {}: it was written by hotloop {}, whose checkpoints record the options in an older layout",
            path,
            c.meta.value("hotloop", std::string("?"))),
        "finish the run with that hotloop, or start a new run (another --out) from its weights with --init " +
            path);
  }
  if (c.meta.contains("config")) {
    const auto diff = differing_options(c.meta["config"], *s.options);
    if (!diff.empty()) {
      std::string list;
      for (const auto& d : diff) {
        list += "\n  " + d;
      }
      throw UsageError(
          fmt::format(
              "cannot resume {} exactly: the run's options differ from the checkpoint's:{}",
              path,
              list),
          "resume with the options the run started with (its config.json), or start a new run (another --out) from its weights with --init " +
              path);
    }
  }
  load_model_weights(path, c, s, load_model);
  load_optimizer(path, c, s);
  precision.load_state(c.scaler);
  set_rng_state(c.rng, s.device);

  Resumed r;
  r.path = path;
  r.step = c.meta.at("step").get<std::int64_t>();
  r.epoch = c.meta.at("epoch").get<std::size_t>();
  // The position counts batches of the checkpoint's micro-batch, which OOM
  // recovery (or the user) may have changed since: convert it through
  // samples. A checkpoint is taken between steps, so both divide it.
  const auto saved_micro =
      c.meta.value("micro_batch", static_cast<std::size_t>(s.micro_batch));
  const nlohmann::json config =
      c.meta.value("config", nlohmann::json::object());
  const auto saved_world =
      config.value("world_size", static_cast<std::size_t>(s.world_size));
  const auto world = static_cast<std::size_t>(s.world_size);
  r.next_batch = c.meta.at("next_batch").get<std::size_t>() * saved_micro *
      saved_world / (static_cast<std::size_t>(s.micro_batch) * world);
  if (saved_world != world) {
    log(fmt::format(
        "resume: the checkpoint was written by {} rank(s), this run has {}: the same global batch of {} and data order, each rank's share cut anew{}",
        saved_world,
        world,
        s.options->batch,
        sharded_ ? " (the optimizer state too)" : ""));
  }
  r.progress = c.meta.value("progress", nlohmann::json::object());
  r.last_eval = c.meta.value("last_eval", nlohmann::json());
  return r;
}

} // namespace hotloop::train
