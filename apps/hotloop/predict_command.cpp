// `hotloop predict`: a model in eval mode on one input tensor, logits out.
// Users check an export with it; the parity tests compare it with PyTorch.

#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <torch/nn/module.h>

#include "cli_common.h"
#include "hotloop/errors.h"
#include "hotloop/model/family.h"
#include "hotloop/model/fine_tune.h"
#include "hotloop/model/lm/hf_checkpoint.h"
#include "hotloop/model/lm/language_model.h"
#include "hotloop/model/model.h"
#include "hotloop/model/model_kind.h"
#include "hotloop/model/script/exported.h"
#include "hotloop/model/weights.h"
#include "lm_options.h"
#include "option_sources.h"

namespace hotloop::cli {

namespace {

struct PredictFlags {
  model::ModelOptions model;
  std::string weights;
  std::string input;
  std::string output;
  std::string device = "cpu";
  std::string precision = "auto"; // language models
  std::int64_t num_classes = 0; // 0: from the weight file's head
  std::int64_t in_channels = 0; // 0: from the input
};

c10::Device device_of(const std::string& text) {
  const c10::Device device(text);
  if (device.is_cuda() && !at::hasCUDA()) {
    throw EnvError(
        "--device cuda: CUDA is not available here", "run `hotloop doctor`");
  }
  return device;
}

// A language model: (B, T) token ids -> (B, T, vocabulary) logits.
int predict_lm(const PredictFlags& f, const CLI::App& cmd) {
  const model::StateDict inputs = model::read_weights(f.input);
  if (inputs.size() != 1 || inputs.front().second.dim() != 2 ||
      at::isFloatingType(inputs.front().second.scalar_type())) {
    throw UsageError(fmt::format(
        "--input {}: a language model needs exactly one integer tensor of token ids, (B, T)",
        f.input));
  }
  const model::ModelOptions options =
      resolve_lm(f.model, f.weights, given_options(cmd));
  const c10::Device device = device_of(f.device);
  auto lm = load_lm(options, f.weights);
  // Checked here, on the host: an id past the embedding is a device-side
  // assert on a GPU.
  const at::Tensor ids = inputs.front().second;
  if (ids.numel() > 0 &&
      (ids.min().item<std::int64_t>() < 0 ||
       ids.max().item<std::int64_t>() >= lm->vocab())) {
    throw UsageError(
        fmt::format(
            "--input {}: token ids {}..{} are outside the model's vocabulary of {}",
            f.input,
            ids.min().item<std::int64_t>(),
            ids.max().item<std::int64_t>(),
            lm->vocab()),
        "tokenize the input with the model's tokenizer");
  }
  const train::InferencePrecision precision =
      inference_precision_of(f.precision, f.weights, device);
  lm->to(device);
  lm->eval();
  at::NoGradGuard no_grad;
  at::Tensor logits;
  {
    const train::AutocastScope autocast(precision.precision, device);
    logits = lm->forward(inputs.front().second.to(device, at::kLong))
                 .narrow(2, 0, lm->vocab())
                 .to(at::kCPU, at::kFloat);
  }
  model::write_weights(f.output, {{"logits", logits}});
  fmt::print(
      "{}: logits {}x{}x{} from {} ({} on {}, {}: {}) -> {}\n",
      f.input,
      logits.size(0),
      logits.size(1),
      logits.size(2),
      f.weights,
      options.name,
      device.str(),
      train::to_string(precision.precision),
      precision.why,
      f.output);
  return 0;
}

int predict(const PredictFlags& f, const CLI::App& cmd) {
  const model::ModelKind kind = model::model_kind(f.model.name);
  if (f.model.name.empty() || kind.language_model() ||
      model::is_hf_folder(f.weights)) {
    // No --model: a Hugging Face folder's or a language model run's
    // config.json says which.
    return predict_lm(f, cmd);
  }
  const model::StateDict inputs = model::read_weights(f.input);
  if (inputs.size() != 1) {
    throw UsageError(fmt::format(
        "--input {}: holds {} tensors; predict needs exactly one, (B, C, H, W)",
        f.input,
        inputs.size()));
  }
  const at::Tensor images = inputs.front().second;
  if (images.dim() != 4) {
    throw UsageError(fmt::format(
        "--input {}: tensor '{}' has {} dimensions; predict needs (B, C, H, W)",
        f.input,
        inputs.front().first,
        images.dim()));
  }
  const model::StateDict weights = model::read_weights(f.weights);
  model::ModelOptions options = f.model;
  options.image.in_channels =
      f.in_channels > 0 ? f.in_channels : images.size(1);
  options.image.size = images.size(2);
  options.image.num_classes = f.num_classes;
  // An exported model's head may have been replaced for the data's classes:
  // the weights say how many.
  std::string head = "fc";
  if (kind.exported()) {
    model::ExportedOptions e;
    e.path = model::exported_path(options.name);
    e.head = options.exported.head;
    head = model::load_exported_model(e)->head_name();
  }
  if (options.image.num_classes == 0) {
    for (const auto& [name, t] : weights) {
      if (name == head + ".weight" && t.dim() == 2) {
        options.image.num_classes = t.size(0);
      }
    }
    if (options.image.num_classes == 0) {
      throw UsageError(
          fmt::format(
              "{} has no {}.weight to take the class count from",
              f.weights,
              head),
          "pass --num-classes");
    }
  }
  const c10::Device device = device_of(f.device);
  auto net = model::make_model(options);
  model::LoadOptions load;
  load.source = f.weights;
  model::load_state_dict(*net, weights, load);
  net->to(device);
  net->eval();
  at::NoGradGuard no_grad;
  const at::Tensor logits =
      net->forward(images.to(device, at::kFloat)).to(at::kCPU);
  model::write_weights(f.output, {{"logits", logits}});
  fmt::print(
      "{}: logits {}x{} from {} ({} on {}) -> {}\n",
      f.input,
      logits.size(0),
      logits.size(1),
      f.weights,
      options.name,
      device.str(),
      f.output);
  return 0;
}

} // namespace

void add_predict_command(CLI::App& app, Action& action) {
  auto flags = std::make_shared<PredictFlags>();
  flags->model.name.clear(); // no default shown: a GPT run needs none
  CLI::App* cmd = app.add_subcommand(
      "predict",
      "Run a model in eval mode on the tensor in a .safetensors file and write its logits");
  cmd->add_option(
      "--model",
      flags->model.name,
      model::model_help() +
          ". Image models map (B, C, H, W) to (B, K) logits (a torchscript:FILE with the weights its run wrote, RUN/model.safetensors), language models token ids to (B, T, V). Default: --weights' own config.json when it is a Hugging Face folder, else the run's beside it");
  cmd->add_option(
         "--weights",
         flags->weights,
         "Weights: .safetensors or a torch.save(state_dict) file")
      ->required();
  cmd->add_option(
         "--input",
         flags->input,
         "A .safetensors file holding one float tensor (B, C, H, W), normalized as in training")
      ->required();
  cmd->add_option(
         "--output",
         flags->output,
         "Where the logits go (.safetensors, tensor 'logits', (B, K))")
      ->required();
  cmd->add_option(
      "--num-classes",
      flags->num_classes,
      "Classes; 0: the rows of the file's head weight (fc.weight)");
  cmd->add_option(
      "--in-channels", flags->in_channels, "Input channels; 0: the input's C");
  cmd->add_option("--device", flags->device, "cpu or cuda[:N]");
  cmd->add_option(
      "--head",
      flags->model.exported.head,
      "torchscript: the head's module name, as in training; default: the module owning the last 2-D weight");
  add_lm_flags(cmd, flags->model, false);
  add_inference_precision_flag(cmd, flags->precision);
  cmd->footer(
      "Example: hotloop predict --model resnet18 --weights resnet18.pt --input x.safetensors --output logits.safetensors");
  cmd->callback([flags, cmd, &action] {
    action = [flags, cmd] { return predict(*flags, *cmd); };
  });
}

} // namespace hotloop::cli
