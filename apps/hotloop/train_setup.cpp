#include "train_setup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/core/units.h"
#include "hotloop/data/data_spec.h"
#include "hotloop/data/eval_split.h"
#include "hotloop/errors.h"

namespace hotloop::cli {

namespace {

// --data's form, reading a tokenizer and chat template from the model's
// folder (hf:DIR), with the loader's image limit.
data::DataSpec data_spec(
    const std::string& spec_text,
    const std::string& model_folder,
    const data::LoaderOptions& loader) {
  data::DataSpec spec = data::parse_data_spec(spec_text);
  spec.tokenizer_folder = model_folder;
  spec.chat_template = loader.chat_template;
  spec.max_image_pixels = loader.max_image_pixels;
  return spec;
}

} // namespace

std::shared_ptr<const data::Dataset> open_train_data(
    const std::string& spec_text,
    std::uint64_t seed,
    const std::string& model_folder,
    const data::LoaderOptions& loader) {
  return data::open_dataset(
      data_spec(spec_text, model_folder, loader), data::Split::Train, seed);
}

std::shared_ptr<const data::Dataset> open_val_data(
    const std::string& spec_text,
    std::uint64_t seed,
    const std::string& model_folder,
    const data::LoaderOptions& loader) {
  return data::open_eval_split(
      data_spec(spec_text, model_folder, loader), seed);
}

namespace {

void announce(const train::BatchFinderOptions& finder, std::FILE* progress) {
  const train::TrainerOptions& o = finder.trainer;
  fmt::print(
      progress,
      "batch finder: {} ({}) on device {}, {} steps per trial, up to {}\n",
      o.model.name,
      train::to_string(o.precision),
      o.device,
      finder.trial_steps,
      finder.max_batch);
  std::fflush(progress);
}

train::TrialCallback print_trials(std::FILE* progress) {
  return [progress](const train::BatchTrial& t) {
    fmt::print(
        progress,
        "  batch {:>5}: {}\n",
        t.size,
        t.ok ? fmt::format(
                   "ok   {:>16}{}  ({:.1f} s)",
                   t.rate(),
                   t.peak_reserved_bytes > 0 ? "  peak reserved " +
                           format_bytes(t.peak_reserved_bytes)
                                             : std::string(),
                   t.seconds)
             : fmt::format("out of memory  ({:.1f} s)", t.seconds));
    std::fflush(progress);
  };
}

} // namespace

train::ResolveContext resolve_context(
    const train::RunOptions& run,
    std::shared_ptr<parallel::ProcessGroup> group,
    std::FILE* progress) {
  train::ResolveContext c;
  const std::uint64_t seed = run.trainer.seed;
  c.open_train = [seed, loader = run.trainer.loader](
                     const std::string& spec, const std::string& folder) {
    return open_train_data(spec, seed, folder, loader);
  };
  c.group = std::move(group);
  if (progress != nullptr) {
    c.on_finder_start = [progress](const train::BatchFinderOptions& f) {
      announce(f, progress);
    };
    c.on_trial = print_trials(progress);
  }
  return c;
}

std::string batch_finder_table(const train::BatchFinderResult& r) {
  std::string out = fmt::format(
      "{:>7}  {:<6}  {:>16}  {:>15}  {:>15}\n",
      "batch",
      "result",
      "speed",
      "peak allocated",
      "peak reserved");
  for (const auto& t : r.trials) {
    out += fmt::format(
        "{:>7}  {:<6}  {:>16}  {:>15}  {:>15}\n",
        t.size,
        t.ok ? "ok" : "OOM",
        t.ok ? t.rate() : std::string("-"),
        r.memory_budget_bytes > 0 ? format_bytes(t.peak_allocated_bytes)
                                  : std::string("-"),
        r.memory_budget_bytes > 0 ? format_bytes(t.peak_reserved_bytes)
                                  : std::string("-"));
  }
  out += fmt::format(
      "model state: {}\ndevice: {}\nmax batch: {}{}\nrecommended: {} ({})\n",
      r.state.describe(r.optimizer),
      r.device,
      r.max_batch,
      r.reached_ceiling ? " (the ceiling: no size ran out of memory)" : "",
      r.recommended,
      r.reason);
  return out;
}

} // namespace hotloop::cli
