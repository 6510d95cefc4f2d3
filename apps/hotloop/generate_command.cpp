// `hotloop generate`: text from a trained GPT. The model's size comes from
// the run's config.json next to the weights (RUN/config.json for
// RUN/checkpoints/step-N.safetensors) unless flags say otherwise.

#include <filesystem>
#include <fstream>
#include <set>

#include <ATen/Context.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "hotloop/errors.h"
#include "hotloop/model/fine_tune.h"
#include "hotloop/model/generate.h"
#include "hotloop/model/gpt.h"
#include "option_sources.h"

namespace hotloop::cli {

namespace {

namespace fs = std::filesystem;

struct GenerateFlags {
  model::ModelOptions model;
  std::string weights;
  std::string prompt = "\n";
  std::string device = "cpu";
  model::GenerateOptions generate;
  bool no_cache = false;
};

// The run's config.json for a weight file in RUN/ or RUN/checkpoints/.
std::optional<nlohmann::json> run_config(const std::string& weights) {
  const fs::path dir = fs::path(weights).parent_path();
  for (const fs::path& p :
       {dir / "config.json", dir.parent_path() / "config.json"}) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) {
      std::ifstream in(p);
      nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
      if (!j.is_discarded() && j.contains("model")) {
        return j["model"];
      }
    }
  }
  return std::nullopt;
}

// Flags first, then the run's config.json, then the named size.
model::ModelOptions resolve_model(
    const GenerateFlags& f,
    const std::set<std::string>& given) {
  model::ModelOptions m = f.model;
  const std::optional<nlohmann::json> saved = run_config(f.weights);
  if (saved) {
    if (!given.contains("model")) {
      m.name = saved->value("name", m.name);
    }
    for (auto [key, field] :
         {std::pair{"layers", &m.layers},
          {"heads", &m.heads},
          {"width", &m.width},
          {"context", &m.context},
          {"vocab", &m.vocab}}) {
      if (!given.contains(key)) {
        *field = saved->value(key, *field);
      }
    }
  }
  if (m.name.empty()) {
    throw UsageError(
        fmt::format(
            "--weights {}: no config.json beside it says which model it is",
            f.weights),
        "pass --model (and --layers/--heads/--width/--context/--vocab if not the named size)");
  }
  if (!model::is_gpt(m.name)) {
    throw UsageError(
        fmt::format("--model {}: generate needs a language model", m.name),
        fmt::format(
            "one of the GPT sizes ({}) trained with hotloop train",
            fmt::join(model::gpt_names(), ", ")));
  }
  return m;
}

int generate(const GenerateFlags& f, const CLI::App& cmd) {
  const model::ModelOptions options = resolve_model(f, given_options(cmd));
  const c10::Device device(f.device);
  if (device.is_cuda() && !at::hasCUDA()) {
    throw EnvError(
        "--device cuda: CUDA is not available here", "run `hotloop doctor`");
  }
  auto gpt = std::make_shared<model::Gpt>(model::gpt_config(options));
  model::load_initial_weights(*gpt, {f.weights, true});
  gpt->to(device);
  // Byte-level tokens: the prompt's bytes in, bytes out.
  const std::vector<std::int64_t> prompt(
      reinterpret_cast<const unsigned char*>(f.prompt.data()),
      reinterpret_cast<const unsigned char*>(f.prompt.data()) +
          f.prompt.size());
  model::GenerateOptions g = f.generate;
  g.use_cache = !f.no_cache;
  std::fwrite(f.prompt.data(), 1, f.prompt.size(), stdout);
  model::generate(*gpt, prompt, g, [](std::int64_t t) {
    std::fputc(static_cast<int>(t & 0xff), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  return 0;
}

} // namespace

void add_generate_command(CLI::App& app, Action& action) {
  auto f = std::make_shared<GenerateFlags>();
  f->model.name.clear();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Sample text from a trained GPT (byte-level tokens), with a KV cache");
  cmd->add_option(
         "--weights",
         f->weights,
         "A checkpoint (RUN/checkpoints/step-N.safetensors) or a .safetensors/torch.save file")
      ->required();
  cmd->add_option(
      "--model",
      f->model.name,
      "GPT size (gpt-nano, gpt-mini, gpt2, gpt2-medium); default: the run's config.json");
  cmd->add_option(
      "--layers", f->model.layers, "Default: the run's or the size's");
  cmd->add_option(
      "--heads", f->model.heads, "Default: the run's or the size's");
  cmd->add_option(
      "--width", f->model.width, "Default: the run's or the size's");
  cmd->add_option(
      "--context", f->model.context, "Default: the run's or the size's");
  cmd->add_option(
      "--vocab", f->model.vocab, "Default: the run's or the size's");
  cmd->add_option("--prompt", f->prompt, "The text to continue")
      ->capture_default_str();
  cmd->add_option("--tokens", f->generate.tokens, "New tokens to sample")
      ->capture_default_str();
  cmd->add_option(
         "--temperature",
         f->generate.temperature,
         "Softmax temperature; 0: always the most likely token")
      ->capture_default_str();
  cmd->add_option(
         "--top-k",
         f->generate.top_k,
         "Sample among the k most likely tokens; 0: all")
      ->capture_default_str();
  cmd->add_option("--seed", f->generate.seed, "Sampling seed")
      ->capture_default_str();
  cmd->add_option("--device", f->device, "cpu or cuda[:N]")
      ->capture_default_str();
  cmd->add_flag(
      "--no-cache",
      f->no_cache,
      "Run the whole window for every token (no KV cache; the same tokens, slower)");
  cmd->footer(
      "Example: hotloop generate --weights runs/a/checkpoints/step-00000282.safetensors --prompt 'The computer'");
  cmd->callback(
      [f, cmd, &action] { action = [f, cmd] { return generate(*f, *cmd); }; });
}

} // namespace hotloop::cli
