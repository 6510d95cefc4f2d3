// `hotloop predict`: a model in eval mode on one input tensor, logits out.
// Users check an export with it; the parity tests compare it with PyTorch.

#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <torch/nn/module.h>

#include "cli_common.h"
#include "hotloop/errors.h"
#include "hotloop/model/model.h"
#include "hotloop/model/weights.h"

namespace hotloop::cli {

namespace {

struct PredictFlags {
  model::ModelOptions model;
  std::string weights;
  std::string input;
  std::string output;
  std::string device = "cpu";
  std::int64_t num_classes = 0; // 0: from the weight file's head
  std::int64_t in_channels = 0; // 0: from the input
};

int predict(const PredictFlags& f) {
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
  options.in_channels = f.in_channels > 0 ? f.in_channels : images.size(1);
  options.image_size = images.size(2);
  options.num_classes = f.num_classes;
  if (options.num_classes == 0) {
    for (const auto& [name, t] : weights) {
      if (name == "fc.weight" && t.dim() == 2) {
        options.num_classes = t.size(0);
      }
    }
    if (options.num_classes == 0) {
      throw UsageError(
          fmt::format(
              "{} has no fc.weight to take the class count from", f.weights),
          "pass --num-classes");
    }
  }
  const c10::Device device(f.device);
  if (device.is_cuda() && !at::hasCUDA()) {
    throw EnvError(
        "--device cuda: CUDA is not available here", "run `hotloop doctor`");
  }
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
  flags->model.name.clear(); // required: no default shown
  CLI::App* cmd = app.add_subcommand(
      "predict",
      "Run a model in eval mode on the tensor in a .safetensors file and write its logits");
  cmd->add_option(
         "--model",
         flags->model.name,
         "Model: mlp, cnn-small, resnet18|34|50[-small]")
      ->required();
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
      "Classes; 0: the rows of the file's fc.weight");
  cmd->add_option(
      "--in-channels", flags->in_channels, "Input channels; 0: the input's C");
  cmd->add_option("--device", flags->device, "cpu or cuda[:N]");
  cmd->footer(
      "Example: hotloop predict --model resnet18 --weights resnet18.pt --input x.safetensors --output logits.safetensors");
  cmd->callback(
      [flags, &action] { action = [flags] { return predict(*flags); }; });
}

} // namespace hotloop::cli
