#include "hotloop/train/resolve_run.h"

#include <algorithm>
#include <filesystem>

#include "hotloop/model/lm/hf_checkpoint.h"
#include "hotloop/model/model_kind.h"
#include "hotloop/train/model_for_data.h"

namespace hotloop::train {

namespace {

// The options the user set: the recipe leaves these alone.
std::set<std::string> given_options(const RunOptions& run) {
  std::set<std::string> out;
  for (const auto& [name, source] : run.sources) {
    if (run.given(name)) {
      out.insert(name);
    }
  }
  return out;
}

} // namespace

ResolvedRun resolve_run(RunOptions& run, const ResolveContext& context) {
  TrainerOptions& o = run.trainer;
  ResolvedRun out;
  // Absolute: config.json names the base for a LoRA run's predict and
  // generate, and resume compares it.
  if (!o.init.empty()) {
    o.init = std::filesystem::absolute(o.init).lexically_normal().string();
  }
  // --init of a Hugging Face folder without --model: the folder's model.
  if (!run.given("model") && model::is_hf_folder(o.init)) {
    // Absolute: the run's config.json names it for export and generate.
    o.model.name =
        "hf:" + std::filesystem::absolute(o.init).lexically_normal().string();
  }
  // The built-in corpus for the named sizes (their vocabulary grows to the
  // data's); a folder's model needs data in its own tokens.
  out.model = model::model_kind(o.model.name);
  const model::ModelKind& kind = out.model;
  if (kind.language_model() && !kind.hf_folder() && !run.given("data")) {
    run.data = "text:fortunes";
  }
  out.train = context.open_train(run.data, kind.folder());
  const std::set<std::string> given = given_options(run);
  const std::optional<OptimizerKind> chosen = given.contains("optimizer")
      ? std::optional(o.optimizer.kind)
      : std::nullopt;
  // The recipe before the batch is known: the finder trains with its
  // optimizer (whose state takes memory).
  RecipeFor what{
      .model = o.model.name,
      .batch = run.batch_auto ? 64 : o.batch,
      .optimizer = chosen,
      .pretrained = !o.init.empty(),
      .lora = o.model.lora.enabled(),
      .gpu_precision = context.gpu_precision(o.device)};
  apply_recipe(recipe_for(what), o, given);
  if (run.batch_auto) {
    // Until the finder decides: one sample a rank (a placeholder of 1 was
    // refused under data parallelism as not divisible by the ranks).
    o.batch = std::max(1, o.world_size);
  }
  if (run.micro_batch_auto) {
    o.micro_batch = 0;
  }
  fit_model_to_data(
      o,
      kind,
      *out.train,
      DataFit{o.model.image.in_channels, o.model.image.num_classes});
  o.validate();

  BatchFinderOptions finder = context.finder;
  finder.trainer = o;
  const BatchRequest request{
      run.batch_auto ? std::nullopt : std::optional(o.batch),
      run.micro_batch_auto ? std::nullopt : std::optional(o.micro_batch)};
  if ((run.batch_auto || run.micro_batch_auto) && context.on_finder_start) {
    context.on_finder_start(finder);
  }
  ResolvedBatch batch = resolve_batch(
      request,
      finder,
      model_factory(o),
      out.train,
      context.group,
      context.on_trial);
  o.batch = batch.batch;
  o.micro_batch = batch.micro_batch;
  run.batch_auto = false;
  run.micro_batch_auto = false;
  out.found = std::move(batch.found);
  out.notes = std::move(batch.notes);

  // The recipe at the batch the run trains with (SGD's learning rate
  // follows it).
  what.batch = o.batch;
  out.recipe = recipe_for(what);
  for (const std::string& key : apply_recipe(out.recipe, o, given)) {
    run.sources[key] = kFromRecipe;
  }
  if (o.out_dir.empty()) {
    o.out_dir = default_run_dir();
  }
  o.validate();
  run.callbacks.validate();
  return out;
}

} // namespace hotloop::train
