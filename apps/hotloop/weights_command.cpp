// `hotloop weights show|convert|export-hf|merge-lora|consolidate`: look
// inside a weight file, convert between safetensors and torch.save() zip
// files, write a language model as a Hugging Face folder, with its LoRA
// adapters merged, and put a sharded checkpoint back into one file.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>

#include "cli_common.h"
#include "hotloop/core/units.h"
#include "hotloop/model/fine_tune.h"
#include "hotloop/model/lm/hf_checkpoint.h"
#include "hotloop/model/lm/language_model.h"
#include "hotloop/model/lm/lora.h"
#include "hotloop/model/model_kind.h"
#include "hotloop/model/weights.h"
#include "hotloop/train/checkpoint_shards.h"
#include "hotloop/train/run_folder.h"
#include "lm_options.h"
#include "option_sources.h"

namespace hotloop::cli {

namespace {

struct ExportHf {
  model::ModelOptions model;
  std::string in;
  std::string out;
};

// What export-hf and merge-lora do with the loaded model: `in` is read as
// `options`, the folder to write is `out`.
using LmWrite = std::function<int(
    const ExportHf& paths,
    const model::ModelOptions& options,
    model::LanguageModel& lm)>;

// A `weights NAME IN OUT` subcommand on a language model: IN (described by
// `in_help`) is loaded with the language-model flags (lm_options.h) and
// handed to `write`.
void add_lm_writer(
    CLI::App* cmd,
    Action& action,
    const std::string& name,
    const std::string& help,
    const std::string& in_help,
    LmWrite write) {
  auto f = std::make_shared<ExportHf>();
  CLI::App* sub = cmd->add_subcommand(name, help);
  sub->add_option("IN", f->in, in_help)->required();
  sub->add_option("OUT", f->out, "The folder to write")->required();
  add_lm_flags(sub, f->model);
  sub->callback([f, sub, write, &action] {
    action = [f, sub, write] {
      const model::ModelOptions options =
          resolve_lm(f->model, f->in, given_options(*sub));
      const auto lm = load_lm(options, f->in);
      return write(*f, options, *lm);
    };
  });
}

// `weights show FILE`: each tensor's name, dtype and shape.
void add_show(CLI::App* cmd, Action& action) {
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
}

// `weights convert IN OUT`: safetensors <-> torch.save() zip.
void add_convert(CLI::App* cmd, Action& action) {
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
}

// `weights export-hf IN OUT`: a language model as a Hugging Face folder.
void add_export_hf(CLI::App* cmd, Action& action) {
  add_lm_writer(
      cmd,
      action,
      "export-hf",
      "Write a language model's weights as a Hugging Face folder: model.safetensors + config.json (GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM or MistralForCausalLM: from_pretrained loads it)",
      "A language model's checkpoint or weight file",
      [](const ExportHf& hf,
         const model::ModelOptions& options,
         model::LanguageModel& lm) {
        if (!model::lora_state(lm).empty()) {
          throw UsageError(
              fmt::format("{} holds LoRA adapters", hf.in),
              fmt::format(
                  "write the merged model with `hotloop weights merge-lora {} {}`",
                  hf.in,
                  hf.out));
        }
        const std::string weights = model::write_hf_folder(hf.out, lm);
        fmt::print(
            "{} ({}) -> {}, {}/config.json\n",
            hf.in,
            options.name,
            weights,
            hf.out);
        return 0;
      });
}

// `weights merge-lora IN OUT`: adapters merged into their base, as a Hugging
// Face folder with the base's tokenizer.
void add_merge_lora(CLI::App* cmd, Action& action) {
  add_lm_writer(
      cmd,
      action,
      "merge-lora",
      "Merge LoRA adapters into their base (W + alpha/r BA) and write a Hugging Face folder: a PEFT adapter folder (its base from adapter_config.json, or --model hf:DIR) or a LoRA run's RUN/model.safetensors",
      "A PEFT adapter folder (RUN/adapter) or a LoRA run's weight file",
      [](const ExportHf& merge,
         const model::ModelOptions& options,
         model::LanguageModel& lm) {
        const std::size_t merged = model::merge_lora(lm);
        if (merged == 0) {
          throw UsageError(
              fmt::format("{} holds no LoRA adapters", merge.in),
              fmt::format(
                  "`hotloop weights export-hf {} {}` writes a model without adapters",
                  merge.in,
                  merge.out));
        }
        const std::string weights = model::write_hf_folder(merge.out, lm);
        // The base's tokenizer goes with it: the folder is then whole.
        const std::string base = model::model_kind(options.name).folder();
        std::vector<std::string> copied;
        for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
          const std::filesystem::path from = std::filesystem::path(base) / name;
          std::error_code ec;
          if (!base.empty() && std::filesystem::is_regular_file(from, ec)) {
            std::filesystem::copy_file(
                from,
                std::filesystem::path(merge.out) / name,
                std::filesystem::copy_options::overwrite_existing);
            copied.push_back(name);
          }
        }
        fmt::print(
            "{}: {} projection(s) merged -> {}, {}/config.json{}\n",
            merge.in,
            merged,
            weights,
            merge.out,
            copied.empty()
                ? std::string()
                : fmt::format(", {} from the base", fmt::join(copied, ", ")));
        return 0;
      });
}

// A checkpoint file, or a run folder's newest checkpoint that loads.
std::string checkpoint_of(const std::string& in) {
  if (!std::filesystem::is_directory(in)) {
    return in;
  }
  const std::string dir = train::RunFolder(in).checkpoints();
  const auto found = train::newest_valid_checkpoint(
      dir,
      [](const std::string& w) { fmt::print(stderr, "warning: {}\n", w); });
  if (!found) {
    throw UsageError(
        fmt::format("{} holds no checkpoint that loads", dir),
        "name a checkpoint file (RUN/checkpoints/step-N.safetensors)");
  }
  return found->first;
}

// `weights consolidate IN OUT`: a checkpoint whose optimizer state is in
// per-rank shard files (--shard) as one file, or its language model as a
// Hugging Face folder.
void add_consolidate(CLI::App* cmd, Action& action) {
  auto f = std::make_shared<ExportHf>();
  CLI::App* sub = cmd->add_subcommand(
      "consolidate",
      "Put a checkpoint back into one file: a sharded run's (--shard: the optimizer state in one file per rank) as a whole checkpoint, which resumes at any number of ranks sharded or not, loads with --init and needs no shard files; OUT a folder: the language model as a Hugging Face folder");
  sub->add_option(
         "IN",
         f->in,
         "A checkpoint (RUN/checkpoints/step-N.safetensors) or a run folder (its newest checkpoint)")
      ->required();
  sub->add_option(
         "OUT",
         f->out,
         "OUT.safetensors: the whole checkpoint (written atomically); else the folder for a Hugging Face model")
      ->required();
  sub->callback([f, &action] {
    action = [f] {
      const std::string in = checkpoint_of(f->in);
      if (!f->out.ends_with(".safetensors")) {
        const model::ModelOptions options =
            resolve_lm(model::ModelOptions{}, in, {});
        const auto lm = load_lm(options, in);
        const std::string weights = model::write_hf_folder(f->out, *lm);
        fmt::print(
            "{} ({}) -> {}, {}/config.json\n",
            in,
            options.name,
            weights,
            f->out);
        return 0;
      }
      const train::Checkpoint c = train::load_whole_checkpoint(in);
      train::write_checkpoint(f->out, c);
      std::size_t bytes = 0;
      for (const auto& [name, t] : c.optimizer) {
        bytes += t.nbytes();
      }
      fmt::print(
          "{} (step {}) -> {}: the model and the whole optimizer state ({} optimizer tensors, {})\n",
          in,
          c.meta.at("step").get<std::int64_t>(),
          f->out,
          c.optimizer.size(),
          format_bytes(bytes));
      return 0;
    };
  });
}

} // namespace

void add_weights_command(CLI::App& app, Action& action) {
  CLI::App* cmd = app.add_subcommand(
      "weights",
      "Inspect or convert weight files (.safetensors, torch.save() .pt/.pth)");
  cmd->require_subcommand(1);

  add_show(cmd, action);
  add_convert(cmd, action);
  add_export_hf(cmd, action);
  add_merge_lora(cmd, action);
  add_consolidate(cmd, action);
}

} // namespace hotloop::cli
