// `hotloop plan`: before a job starts, what each rank will hold (parameters,
// gradients, optimizer state, activations) for a number of ranks, a ZeRO
// stage, an offload and a micro-batch; whether that fits the memory each
// rank has, and the cheapest configuration that does. The model state is
// counted from the model built; the activations are measured: a few steps
// at two small micro-batches on this device, extrapolated.

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_common.h"
#include "hotloop/core/units.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/errors.h"
#include "hotloop/model/shard_units.h"
#include "hotloop/train/batch_finder.h"
#include "hotloop/train/device.h"
#include "hotloop/train/host_memory.h"
#include "hotloop/train/memory_plan.h"
#include "hotloop/train/precision.h"
#include "hotloop/train/resolve_run.h"
#include "option_sources.h"
#include "run_option_flags.h"
#include "train_setup.h"

namespace hotloop::cli {

namespace {

struct PlanFlags {
  train::RunOptions run;
  int ranks = 1;
  std::string memory; // empty: this device's
  std::vector<std::int64_t> measure_at = {2, 4};
  bool json = false;
};

// The device memory one rank may use: --memory, else a GPU's total within
// --memory-fraction, else the host's memory shared by the ranks.
std::uint64_t rank_budget(const PlanFlags& f, const train::TrainerOptions& o) {
  if (!f.memory.empty()) {
    return parse_bytes(f.memory, "memory");
  }
  const c10::Device device = train::resolve_device(o.device);
  if (device.is_cuda()) {
    const double total = static_cast<double>(
        cuda::device_memory(std::max<int>(0, device.index())).total);
    return static_cast<std::uint64_t>(
        o.memory_fraction > 0 ? o.memory_fraction * total : total);
  }
  const auto host = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) *
      static_cast<std::uint64_t>(sysconf(_SC_PAGE_SIZE));
  return host / static_cast<std::uint64_t>(f.ranks);
}

// The micro-batch asked for: --micro-batch, else each rank's share of
// --batch.
std::int64_t asked_micro_batch(const PlanFlags& f, const CLI::App& cmd) {
  const train::TrainerOptions& o = f.run.trainer;
  if (o.micro_batch > 0) {
    return o.micro_batch;
  }
  if (cmd.count("--batch") > 0 && o.batch >= f.ranks) {
    return o.batch / f.ranks;
  }
  throw UsageError(
      "plan: which micro-batch each rank's step holds is not given",
      "give --micro-batch N (or --batch, the global batch, shared by --ranks)");
}

// Activations at micro-batch b: a trial's peak above the model state it
// holds in one process.
train::ActivationFit measure_activations(
    const PlanFlags& f,
    const train::TrainerOptions& o,
    const train::ResolvedRun& resolved,
    const train::ModelState& state,
    const std::function<void(const std::string&)>& progress) {
  train::BatchFinderOptions finder;
  finder.trainer = o;
  finder.trainer.shard = 0;
  finder.trainer.offload = "none";
  finder.trial_steps = 3;
  const std::uint64_t held =
      state.weight_bytes + state.gradient_bytes + state.optimizer_bytes;
  std::vector<std::uint64_t> bytes;
  for (const std::int64_t b : f.measure_at) {
    const train::BatchTrial t = train::run_batch_trial(
        b, train::model_factory(o), resolved.train, finder);
    if (!t.ok) {
      throw Error(
          fmt::format(
              "plan: one step at micro-batch {} does not fit this device ({})",
              b,
              t.note.empty() ? std::string("out of memory") : t.note),
          "measure at smaller micro-batches (--measure-at), or on a device with more memory");
    }
    bytes.push_back(
        t.peak_allocated_bytes > held ? t.peak_allocated_bytes - held : 0);
    progress(fmt::format(
        "measured: micro-batch {}: peak {} ({} above the model state) in {:.1f} s",
        b,
        format_bytes(t.peak_allocated_bytes),
        format_bytes(bytes.back()),
        t.seconds));
  }
  return {f.measure_at[0], f.measure_at[1], bytes[0], bytes[1]};
}

// Stage 3's units of `model` (its blocks): their trainable parameters, and
// the two largest whole as a run gathers them (`compute`: mixed precision's
// type, which their matrices are gathered in).
train::UnitSizes unit_sizes(
    const model::Model& model,
    c10::ScalarType compute) {
  train::UnitSizes out;
  const auto* units = dynamic_cast<const model::ShardUnits*>(&model);
  if (units == nullptr) {
    return out;
  }
  std::vector<std::uint64_t> sizes;
  out.count = units->shard_units().size();
  for (const auto& unit : units->shard_units()) {
    std::uint64_t bytes = 0;
    std::uint64_t whole = 0;
    for (const at::Tensor& p : unit->parameters()) {
      if (!p.requires_grad()) {
        continue;
      }
      bytes += p.nbytes();
      const bool lowered = compute != c10::ScalarType::Undefined &&
          p.scalar_type() == at::kFloat && p.dim() >= 2;
      whole += lowered
          ? static_cast<std::uint64_t>(p.numel()) * c10::elementSize(compute)
          : p.nbytes();
    }
    sizes.push_back(whole);
    out.bytes += bytes;
  }
  std::sort(sizes.rbegin(), sizes.rend());
  for (std::size_t i = 0; i < std::min<std::size_t>(2, sizes.size()); ++i) {
    out.largest_two += sizes[i];
  }
  return out;
}

// Stages 2-3: the reduce-scatters' whole buffers a rank holds at once, at
// most (sharded_reducer.h): --reduces-in-flight buckets, each at most
// --bucket-mb plus the largest trainable parameter's fp32 gradient (0: no
// bound).
train::ReduceSizes reduce_sizes(
    const model::Model& model,
    const train::TrainerOptions& o) {
  std::uint64_t largest = 0;
  for (const at::Tensor& p : model.parameters()) {
    if (p.requires_grad()) {
      largest = std::max<std::uint64_t>(largest, 4 * p.numel());
    }
  }
  const auto bucket = static_cast<std::uint64_t>(o.bucket_mb * 1024 * 1024);
  return {static_cast<std::uint64_t>(o.reduces_in_flight) * (bucket + largest)};
}

std::string row(const train::PlanCandidate& c, const std::string& mark) {
  const train::RankMemory& m = c.memory;
  return fmt::format(
      "{:<80} {:>10} {:>10} {:>10} {:>11} {:>10}  {}{}\n",
      c.config.flags(),
      format_bytes(m.parameters),
      format_bytes(m.gradients),
      format_bytes(m.optimizer),
      format_bytes(m.activations),
      format_bytes(m.device()),
      c.fits ? "fits" : "does not fit",
      mark);
}

// What a plan found: the figures it used and the candidates in order.
struct PlanFound {
  std::string model;
  std::uint64_t budget = 0;
  train::ModelState state;
  train::ActivationFit fit;
  std::optional<train::ActivationFit> checkpointed;
  std::vector<train::PlanCandidate> candidates;
  // The first that fits; candidates.end() when none does.
  std::vector<train::PlanCandidate>::const_iterator cheapest() const {
    return std::find_if(
        candidates.begin(), candidates.end(), [](auto& c) { return c.fits; });
  }
};

void print_plan_json(const PlanFlags& f, const PlanFound& p) {
  nlohmann::json j = {
      {"model", p.model},
      {"ranks", f.ranks},
      {"budget_bytes", p.budget},
      {"state", p.state.to_json()},
      {"activations",
       {{"measured_at", f.measure_at},
        {"bytes", {p.fit.bytes1, p.fit.bytes2}},
        {"extrapolated", true}}},
      {"candidates", nlohmann::json::array()}};
  if (p.checkpointed) {
    j["activations"]["checkpointed_bytes"] = {
        p.checkpointed->bytes1, p.checkpointed->bytes2};
  }
  for (const auto& c : p.candidates) {
    j["candidates"].push_back(
        {{"flags", c.config.flags()},
         {"shard", c.config.shard},
         {"offload", c.config.offload},
         {"activation_checkpointing", c.config.checkpointing},
         {"micro_batch", c.config.micro_batch},
         {"memory", c.memory.to_json()},
         {"fits", c.fits}});
  }
  j["fits"] = p.candidates.front().fits;
  const auto cheapest = p.cheapest();
  j["cheapest"] = cheapest == p.candidates.end()
      ? nlohmann::json()
      : nlohmann::json(cheapest->config.flags());
  fmt::print("{}\n", j.dump(2));
}

void print_plan_table(const PlanFound& p) {
  fmt::print(
      "activations: measured at micro-batches {} and {} ({} and {}{}), extrapolated on a straight line;\n"
      "  the training step's: the evaluation (its own batch, without gradients) is not in these figures\n"
      "memory per rank: {} (--memory)\n\n",
      p.fit.batch1,
      p.fit.batch2,
      format_bytes(p.fit.bytes1),
      format_bytes(p.fit.bytes2),
      p.checkpointed ? fmt::format(
                           "; with activation checkpointing {} and {}",
                           format_bytes(p.checkpointed->bytes1),
                           format_bytes(p.checkpointed->bytes2))
                     : std::string(),
      format_bytes(p.budget));
  fmt::print(
      "{:<80} {:>10} {:>10} {:>10} {:>11} {:>10}\n",
      "per rank",
      "parameters",
      "gradients",
      "optimizer",
      "activations",
      "total");
  const auto cheapest = p.cheapest();
  for (const auto& c : p.candidates) {
    fmt::print(
        "{}",
        row(c,
            &c == &p.candidates.front() ? "  (asked)"
                : cheapest != p.candidates.end() && &c == &*cheapest
                ? "  <- the cheapest that fits"
                : ""));
  }
  if (cheapest == p.candidates.end()) {
    fmt::print(
        "\nnothing here fits: more ranks, activation checkpointing (--activation-checkpointing), or a smaller model\n");
  } else if (cheapest != p.candidates.begin()) {
    fmt::print("\ntrain with: {}\n", cheapest->config.flags());
  }
}

// The configuration asked for: the job's shape and the step's options.
train::PlanConfig asked_config(const PlanFlags& f, const CLI::App& cmd) {
  if (f.ranks < 1) {
    throw UsageError("ranks: must be at least 1");
  }
  if (f.measure_at.size() != 2 || f.measure_at[0] < 1 ||
      f.measure_at[1] <= f.measure_at[0]) {
    throw UsageError(
        "measure-at: two micro-batches, the smaller first (e.g. 1,2)");
  }
  train::PlanConfig asked;
  asked.ranks = f.ranks;
  asked.shard = f.run.trainer.shard;
  asked.offload = f.run.trainer.offload == "optimizer";
  asked.micro_batch = asked_micro_batch(f, cmd);
  asked.checkpointing =
      f.run.trainer.activation_checkpointing != model::Checkpointing::None;
  return asked;
}

int run_plan(PlanFlags& f, const CLI::App& cmd) {
  record_sources(cmd, "", f.run);
  const train::PlanConfig asked = asked_config(f, cmd);
  // On the CPU the activations are counted by the host allocator.
  train::count_host_memory();
  // The run resolved as `hotloop train` would (the recipe's optimizer, the
  // model fitted to the data) at the trial's batch.
  f.run.trainer.batch = 1;
  f.run.trainer.micro_batch = 0;
  std::FILE* out = f.json ? stderr : stdout;
  const train::ResolveContext context = resolve_context(f.run, nullptr, out);
  const train::ResolvedRun resolved = train::resolve_run(f.run, context);
  const train::TrainerOptions& o = f.run.trainer;
  PlanFound p;
  p.model = o.model.name;
  train::UnitSizes units;
  train::ReduceSizes reduce;
  {
    // Released before the trials, whose peak it would add to.
    const auto built = train::model_factory(o)();
    p.state = train::model_state(*built, o);
    units = unit_sizes(*built, train::compute_dtype(o.precision));
    reduce = reduce_sizes(*built, o);
  }
  const std::string optimizer =
      o.optimizer.kind == train::OptimizerKind::AdamW ? "AdamW" : "SGD";
  auto progress = [out](const std::string& line) {
    fmt::print(out, "{}\n", line);
    std::fflush(out);
  };
  progress(fmt::format(
      "plan: {} ({}), {}, {} rank(s)",
      o.model.name,
      p.state.describe(optimizer),
      train::to_string(o.precision),
      f.ranks));
  p.fit = measure_activations(f, o, resolved, p.state, progress);
  // A model with units (blocks) can recompute them: its activations with
  // that, for the candidates that do.
  if (units.count > 0 && !asked.checkpointing) {
    train::TrainerOptions with = o;
    with.activation_checkpointing = model::Checkpointing::Stages;
    progress("measuring again with --activation-checkpointing stages");
    try {
      p.checkpointed =
          measure_activations(f, with, resolved, p.state, progress);
    } catch (const UsageError& e) {
      progress(fmt::format(
          "activation checkpointing is not a candidate: {}", e.what()));
    }
  }
  p.budget = rank_budget(f, o);
  p.candidates = train::plan_candidates(
      p.state,
      asked,
      p.fit,
      p.budget,
      units,
      p.checkpointed ? &*p.checkpointed : nullptr,
      reduce);
  if (f.json) {
    print_plan_json(f, p);
  } else {
    print_plan_table(p);
  }
  return p.cheapest() == p.candidates.end() ? 1 : 0;
}

} // namespace

void add_plan_command(CLI::App& app, Action& action) {
  auto f = std::make_shared<PlanFlags>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "What each rank holds (parameters, gradients, optimizer state, activations) for a number of ranks, ZeRO stage, offload and micro-batch; whether it fits, and the cheapest configuration that does");
  // A step's options, and the job's shape.
  std::vector<std::string> flags = step_option_names();
  flags.insert(flags.end(), {"batch", "micro-batch", "shard", "offload"});
  add_run_flags(cmd, f->run, flags);
  cmd->add_option("--ranks", f->ranks, "The job's number of ranks")
      ->capture_default_str();
  cmd->add_option(
         "--memory",
         f->memory,
         "Device memory each rank may use (\"80GiB\"); default: this GPU's total (within --memory-fraction), on the CPU the host's memory shared by the ranks")
      ->capture_default_str();
  cmd->add_option(
         "--measure-at",
         f->measure_at,
         "The two micro-batches whose steps are measured (one process, 3 steps each) for the activations")
      ->delimiter(',')
      ->capture_default_str();
  add_json_flag(
      cmd,
      f->json,
      "one JSON object (state, activations, candidates, cheapest); progress goes to stderr");
  cmd->footer(
      "Examples:\n"
      "  hotloop plan --model llama-nano --data text:corpus --ranks 8 --micro-batch 4 --memory 80GiB\n"
      "  hotloop plan --model resnet50 --data synthetic:512x3x224x224 --ranks 2 --shard 2 --micro-batch 64 --device cuda\n"
      "Exit code: 0 when a configuration fits, 1 when none does.");
  cmd->callback(
      [f, cmd, &action] { action = [f, cmd] { return run_plan(*f, *cmd); }; });
}

} // namespace hotloop::cli
