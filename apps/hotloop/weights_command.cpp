// `hotloop weights show|convert`: look inside a weight file, or convert
// between safetensors and torch.save() zip files.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>

#include "cli_common.h"
#include "hotloop/core/units.h"
#include "hotloop/model/fine_tune.h"
#include "hotloop/model/hf_checkpoint.h"
#include "hotloop/model/language_model.h"
#include "hotloop/model/weights.h"
#include "lm_options.h"
#include "option_sources.h"

namespace hotloop::cli {

void add_weights_command(CLI::App& app, Action& action) {
  CLI::App* cmd = app.add_subcommand(
      "weights",
      "Inspect or convert weight files (.safetensors, torch.save() .pt/.pth)");
  cmd->require_subcommand(1);

  auto show_path = std::make_shared<std::string>();
  CLI::App* show = cmd->add_subcommand(
      "show", "List a weight file's tensors: name, dtype, shape");
  show->add_option("FILE", *show_path, "The weight file")->required();
  show->callback([show_path, &action] {
    action = [show_path] {
      const model::StateDict w = model::read_weights(*show_path);
      std::int64_t elements = 0;
      std::size_t bytes = 0;
      for (const auto& [name, t] : w) {
        fmt::print(
            "{:<48} {:<9} [{}]\n",
            name,
            c10::toString(t.scalar_type()),
            fmt::join(t.sizes(), ", "));
        elements += t.numel();
        bytes += t.nbytes();
      }
      fmt::print(
          "{} tensors, {} elements, {}\n",
          w.size(),
          elements,
          format_bytes(bytes));
      return 0;
    };
  });

  struct Convert {
    std::string in;
    std::string out;
  };
  auto conv = std::make_shared<Convert>();
  CLI::App* convert = cmd->add_subcommand(
      "convert",
      "Rewrite a weight file in the format OUT's name says: .safetensors, or .pt/.pth (torch.load reads it)");
  convert->add_option("IN", conv->in, "The weight file to read")->required();
  convert->add_option("OUT", conv->out, "The file to write (atomically)")
      ->required();
  convert->callback([conv, &action] {
    action = [conv] {
      const model::StateDict w = model::read_weights(conv->in);
      model::write_weights(conv->out, w);
      fmt::print("{}: {} tensors -> {}\n", conv->in, w.size(), conv->out);
      return 0;
    };
  });

  struct ExportHf {
    model::ModelOptions model;
    std::string in;
    std::string out;
  };
  auto hf = std::make_shared<ExportHf>();
  CLI::App* export_hf = cmd->add_subcommand(
      "export-hf",
      "Write a language model's weights as a Hugging Face folder: model.safetensors + config.json (GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM or MistralForCausalLM: from_pretrained loads it)");
  export_hf
      ->add_option("IN", hf->in, "A language model's checkpoint or weight file")
      ->required();
  export_hf->add_option("OUT", hf->out, "The folder to write")->required();
  add_lm_flags(export_hf, hf->model);
  export_hf->callback([hf, export_hf, &action] {
    action = [hf, export_hf] {
      const model::ModelOptions options =
          resolve_lm(hf->model, hf->in, given_options(*export_hf));
      auto lm = model::make_language_model(options);
      model::load_initial_weights(*lm, {hf->in, true});
      const std::string weights = model::write_hf_folder(hf->out, *lm);
      fmt::print(
          "{} ({}) -> {}, {}/config.json\n",
          hf->in,
          options.name,
          weights,
          hf->out);
      return 0;
    };
  });
}

} // namespace hotloop::cli
