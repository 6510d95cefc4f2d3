// `hotloop generate`: text from a language model (lm_options.h says how its
// size is found).

#include <algorithm>
#include <optional>

#include <ATen/Context.h>
#include <fmt/format.h>

#include "cli_common.h"
#include "hotloop/data/tokens/instructions.h"
#include "hotloop/errors.h"
#include "hotloop/model/fine_tune.h"
#include "hotloop/model/lm/generate.h"
#include "hotloop/model/lm/language_model.h"
#include "lm_options.h"
#include "option_sources.h"

namespace hotloop::cli {

namespace {

struct GenerateFlags {
  model::ModelOptions model;
  std::string weights;
  std::string prompt = "\n";
  std::string device = "cpu";
  std::string precision = "auto";
  std::string tokenizer; // empty: the run's, else bytes
  model::GenerateOptions generate;
  bool no_cache = false;
  bool chat = false;
  std::string chat_template = "auto";
  bool ignore_eos = false;
};

// The folder's chat template and EOS (data/instructions.h), or why there is
// none (a tokenizer without a folder, a folder without an EOS).
struct ChatFormat {
  std::optional<data::InstructionEncoder> encoder;
  std::string why_not;
};
ChatFormat chat_format_of(
    const data::Tokenizer& tokenizer,
    const std::string& chat_template) {
  if (tokenizer.dir().empty()) {
    return {
        std::nullopt,
        fmt::format("the tokenizer ({}) has no folder", tokenizer.spec())};
  }
  try {
    return {
        data::InstructionEncoder(
            tokenizer,
            tokenizer.dir(),
            data::parse_chat_template(chat_template)),
        {}};
  } catch (const DataError& e) {
    return {std::nullopt, e.what()};
  }
}

int generate(const GenerateFlags& f, const CLI::App& cmd) {
  const model::ModelOptions options =
      resolve_lm(f.model, f.weights, given_options(cmd));
  const c10::Device device(f.device);
  if (device.is_cuda() && !at::hasCUDA()) {
    throw EnvError(
        "--device cuda: CUDA is not available here", "run `hotloop doctor`");
  }
  const train::InferencePrecision precision =
      inference_precision_of(f.precision, f.weights, device);
  auto lm = load_lm(options, f.weights);
  lm->to(device);
  // The prompt's tokens in; each new token's bytes out as it comes.
  data::Tokenizer tokenizer =
      resolve_tokenizer(f.tokenizer, f.weights, options);
  // As transformers does: the tokenizer's special prefix (Llama 3's
  // <|begin_of_text|>) first, and the end at its EOS; --chat: the prompt as
  // a user message in the chat template, the end at the answer's end.
  ChatFormat chat = chat_format_of(tokenizer, f.chat_template);
  std::optional<data::InstructionEncoder>& format = chat.encoder;
  if (f.chat && !format) {
    throw UsageError(
        fmt::format("--chat: {}", chat.why_not),
        "use a Hugging Face model folder's tokenizer (with an eos_token), or leave out --chat");
  }
  std::vector<std::int32_t> ids = tokenizer.special_prefix();
  if (f.chat) {
    ids = format->chat_prompt(f.prompt);
  } else {
    const std::vector<std::int32_t> text = tokenizer.encode(f.prompt);
    ids.insert(ids.end(), text.begin(), text.end());
  }
  const std::vector<std::int64_t> prompt(ids.begin(), ids.end());
  model::GenerateOptions g = f.generate;
  g.use_cache = !f.no_cache;
  if (format && !f.ignore_eos) {
    for (const std::int32_t id : format->end_tokens()) {
      g.stop.push_back(id);
    }
  }
  if (!f.chat) {
    std::fwrite(f.prompt.data(), 1, f.prompt.size(), stdout);
  }
  const train::AutocastScope autocast(precision.precision, device);
  model::generate(*lm, prompt, g, [&](std::int64_t t) {
    if (std::find(g.stop.begin(), g.stop.end(), t) != g.stop.end()) {
      return; // the end, not printed
    }
    const std::string bytes = tokenizer.decode(t);
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
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
      "Sample text from a language model (GPT, Llama family), with a KV cache");
  cmd->add_option(
         "--weights",
         f->weights,
         "A checkpoint (RUN/checkpoints/step-N.safetensors), a .safetensors/torch.save file, or a Hugging Face model folder")
      ->required();
  add_lm_flags(cmd, f->model);
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
  cmd->add_option(
      "--tokenizer",
      f->tokenizer,
      "bytes, bpe:DIR (DIR/vocab.json + DIR/merges.txt) or hf:DIR (DIR/tokenizer.json); default: a Hugging Face folder's tokenizer.json, the run's tokenizer/ (from BPE-packed token data), else bytes");
  cmd->add_option("--device", f->device, "cpu or cuda[:N]")
      ->capture_default_str();
  add_inference_precision_flag(cmd, f->precision);
  cmd->add_flag(
      "--chat",
      f->chat,
      "The prompt as a user message in the chat template, with its generation prompt (the folder's own Jinja template, else ChatML, Llama 3 or plain, as for instruct: data); prints only the answer, which ends at <|im_end|>, <|eot_id|> or EOS");
  cmd->add_option(
         "--chat-template",
         f->chat_template,
         std::string("--chat's template: ") + data::kChatTemplateNames)
      ->check(CLI::IsMember({"auto", "folder", "chatml", "llama3", "plain"}))
      ->capture_default_str();
  cmd->add_flag(
      "--ignore-eos",
      f->ignore_eos,
      "Keep sampling past the end-of-sequence tokens (default: a tokenizer folder's EOS and its configs' eos_token_id end the text)");
  cmd->add_flag(
      "--no-cache",
      f->no_cache,
      "Run the whole window for every token (no KV cache; the same tokens, slower)");
  cmd->footer(
      "Examples:\n  hotloop generate --weights runs/a/checkpoints/step-00000282.safetensors --prompt 'The computer'\n  hotloop generate --weights runs/lora/adapter --chat --prompt 'What is the capital of Peru?'");
  cmd->callback(
      [f, cmd, &action] { action = [f, cmd] { return generate(*f, *cmd); }; });
}

} // namespace hotloop::cli
