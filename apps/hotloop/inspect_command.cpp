// `hotloop inspect model FILE`: can hotloop train this exported model on this
// data, and if not, what to change in the export.

#include <fmt/format.h>

#include "cli_common.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/data/tokens/token_data.h"
#include "hotloop/errors.h"
#include "hotloop/testplan/inspect_model.h"
#include "train_setup.h"

namespace hotloop::cli {

namespace {

struct InspectFlags {
  std::string file;
  std::string data = "fashion-mnist";
  std::int64_t size = 0;
  std::int64_t in_channels = 0;
  std::int64_t num_classes = 0;
  std::int64_t context = 0;
  std::string head;
  std::string device = "auto";
  bool json = false;
  bool no_color = false;
};

int inspect(const InspectFlags& f) {
  if (f.device != "auto" && f.device != "cpu" &&
      !f.device.starts_with("cuda")) {
    throw UsageError(
        fmt::format("--device {}: expected auto, cpu or cuda", f.device));
  }
  testplan::InspectOptions o;
  o.model.path = f.file;
  o.model.head = f.head;
  const std::shared_ptr<const data::Dataset> dataset =
      open_train_data(f.data, 0);
  if (const auto* tokens =
          dynamic_cast<const data::TokenDataset*>(dataset.get())) {
    if (f.context <= 0) {
      throw UsageError(fmt::format(
          "--data {} is token data: give --context, the sequence length the model takes",
          f.data));
    }
    o.model.context = f.context;
    o.model.vocab = tokens->max_token() + 1;
  } else {
    const auto shape = dataset->shape();
    o.model.in_channels =
        f.in_channels > 0 ? f.in_channels : (shape ? shape->channels : 3);
    o.model.image_size = f.size > 0 ? f.size : (shape ? shape->height : 224);
    o.model.num_classes = f.num_classes > 0
        ? f.num_classes
        : static_cast<std::int64_t>(dataset->num_classes());
  }
  o.cuda = f.device != "cpu" && (f.device != "auto" || cuda::state().available);
  const testplan::InspectReport r = testplan::inspect_model(o);
  if (f.json) {
    fmt::print("{}\n", r.to_json().dump(2));
  } else {
    fmt::print("{}", testplan::render(r, !f.no_color && stdout_wants_color()));
  }
  return r.trainable_model() ? 0 : 1;
}

} // namespace

void add_inspect_command(CLI::App& app, Action& action) {
  CLI::App* inspect_cmd = app.add_subcommand(
      "inspect", "Check what hotloop is given before it trains");
  inspect_cmd->require_subcommand(1);
  auto f = std::make_shared<InspectFlags>();
  CLI::App* cmd = inspect_cmd->add_subcommand(
      "model",
      "Can hotloop train this model exported from Python (TorchScript)? Verdicts with fixes");
  cmd->add_option(
         "FILE", f->file, "The exported module (torch.jit.script/trace + save)")
      ->required();
  cmd->add_option(
      "--data",
      f->data,
      "The data it will train on: its input shape and class count (as for train)");
  cmd->add_option("--size", f->size, "Input height and width; 0: the data's");
  cmd->add_option(
      "--in-channels", f->in_channels, "Input channels; 0: the data's");
  cmd->add_option("--num-classes", f->num_classes, "Classes; 0: the data's");
  cmd->add_option(
      "--context",
      f->context,
      "Token data: the sequence length the model takes");
  cmd->add_option(
      "--head",
      f->head,
      "The classifier head's module name; default: the module owning the last 2-D weight");
  cmd->add_option(
      "--device",
      f->device,
      "auto (cuda when there is a GPU), cpu or cuda: cuda also checks the CUDA graph capture");
  add_json_flag(cmd, f->json);
  add_no_color_flag(cmd, f->no_color);
  cmd->footer(
      "Exit code: 0 when hotloop can train it (warnings allowed), 1 when a check FAILs, 2 for bad usage.\n"
      "Example: hotloop inspect model mobilenet_v3_small.pt --data fashion-mnist");
  cmd->callback([f, &action] { action = [f] { return inspect(*f); }; });
}

} // namespace hotloop::cli
