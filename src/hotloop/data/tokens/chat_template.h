#pragma once
// A model folder's own chat template (its Jinja text) run on a conversation,
// with the parts of the rendered text that are trained:
// - where the template has {% generation %} blocks, what they write
//   (transformers' assistant masks, TRL's assistant_only_loss), in a
//   prompt-completion example those after the prompt;
// - else for a prompt-completion example, everything after the prompt
//   rendered with its generation prompt (TRL's completion mask);
// - else each assistant message's turn: from the end of the conversation
//   before it rendered with a generation prompt (where that starts the
//   whole; else from its content, found in the whole) as far as the whole
//   agrees with the turn rendered as the last message, from the front or
//   from the back, whichever is longer. For most templates that is the text
//   between the conversation before it with a generation prompt and the
//   conversation through it; Qwen3 writes an empty thinking block only in
//   the last turns, Phi-4-mini an EOS only at the very end.
//
// The template sees what transformers gives it: messages, add_generation_
// prompt, tools (where the example has them), the tokenizer's special tokens
// by name (bos_token, eos_token, ...), and the globals of jinja/builtins.h.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hotloop/data/tokens/jinja/render.h"

namespace hotloop::data {

class FolderTemplate {
 public:
  // The folder's template: chat_template.jinja (where transformers 5's
  // save_pretrained writes it), else tokenizer_config.json's chat_template
  // (the text, or the one named "default" of a list); nullptr when it has
  // none. DataError naming the file for one that does
  // not parse or uses a construct the interpreter lacks.
  static std::shared_ptr<const FolderTemplate> in_folder(
      const std::string& folder);

  struct Example {
    std::string text;
    std::vector<std::pair<std::size_t, std::size_t>> trained; // byte ranges
  };
  // `messages` rendered, trained as above: `completion_from` is the first
  // message of a prompt-completion example's completion (npos: a
  // conversation, its assistant messages trained). TemplateError for what
  // the template refuses (raise_exception) or fails on.
  Example render_example(
      const jinja::List& messages,
      std::size_t completion_from,
      const jinja::Value& tools) const;
  // `messages` and the generation prompt: what `generate --chat` continues.
  std::string prompt(const jinja::List& messages) const;
  // Where the text came from ("DIR/tokenizer_config.json's chat_template").
  const std::string& origin() const {
    return origin_;
  }

 private:
  FolderTemplate(
      std::string_view source,
      std::string origin,
      jinja::Dict tokens);
  std::string render(
      const jinja::List& messages,
      bool generation_prompt,
      const jinja::Value& tools,
      std::vector<std::pair<std::size_t, std::size_t>>* generation =
          nullptr) const;

  jinja::Template template_;
  std::string origin_;
  jinja::Dict tokens_; // bos_token, eos_token, ...
};

} // namespace hotloop::data
