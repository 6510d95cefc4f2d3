#pragma once
// One instruction example (a JSON line of `instruct:` data,
// data/tokens/instructions.h) as tokens, with the tokens it trains.
//
// A line is one of
//   {"prompt": "...", "completion": "..."}
//       [prefix] prompt completion EOS; trained: the completion and EOS.
//   {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}]}
//       the chat template; trained: each assistant message and its end.
//   {"prompt": [messages], "completion": [messages]} (TRL's conversational
//   prompt-completion)
//       the chat template; trained: the completion's messages and their ends.
// "tools" (a list) goes to the folder's template; other keys are ignored.
//
// The chat template (--chat-template, parse_chat_template):
//   the folder's (auto's choice where the folder has one): its Jinja
//       chat_template (chat_template.jinja, else tokenizer_config.json's) run
//       as transformers runs it (data/tokens/chat_template.h); trained: what
//       its {% generation %} blocks write, else each assistant message's
//       turn, or a completion's all after the prompt (as TRL trains). The
//       template puts the tokenizer's prefix (bos_token) in itself.
//   else the built-in one the tokenizer's added tokens choose:
//   ChatML (<|im_start|>, <|im_end|>: Qwen2)
//       <|im_start|>{role}\n{content}<|im_end|>\n
//   Llama 3 (<|start_header_id|>, <|end_header_id|>, <|eot_id|>)
//       <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
//   plain (any other)
//       {Role}: {content}\n, an assistant's content followed by EOS instead
//       of the newline (System:, User:, Assistant:).
// A built-in's trained part of a message is its content and the end marker
// after it (<|im_end|>, <|eot_id|>, EOS), not its header; the built-ins add
// no default system message, tools or dates and know three roles.
//
// Each example is rendered to text as above and encoded whole (the text of
// special tokens becomes their id, as tokenizers' encode does), then, with
// a built-in template, [prefix] is put before it: the tokenizer's special
// prefix (Llama 3's
// <|begin_of_text|>; data/tokenizer.h). A token is trained when its first
// byte is in a trained part. EOS is tokenizer_config.json's eos_token, else
// config.json's eos_token_id.
//
// Packing: the examples become rows as the loader's --packing says
// (data/tokens/packing.h); each example's start is kept.
//
//
// Errors: a DataError for a line that is not JSON, lacks the keys, has a
// wrong type, an unknown role, an empty completion or no assistant message,
// or text the tokenizer refuses. No LibTorch here, so the fuzz targets build
// without it.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hotloop/data/tokens/token_sequence.h"
#include "hotloop/data/tokens/tokenizer.h"
#include "hotloop/errors.h"

namespace hotloop::data {

class FolderTemplate; // data/tokens/chat_template.h

enum class ChatTemplate { Folder, ChatMl, Llama3, Plain };
const char* to_string(ChatTemplate t);
// --chat-template: auto (nullopt: the folder's where it has one, else the
// built-in its added tokens choose), folder, chatml, llama3 or plain.
// UsageError for another name.
inline constexpr const char* kChatTemplateNames =
    "auto, folder, chatml, llama3 or plain";
std::optional<ChatTemplate> parse_chat_template(const std::string& name);

// How examples become tokens: a folder's tokenizer, its prefix, its EOS and
// the chat template its added tokens choose. `hotloop generate --chat` asks
// it for a prompt in the same template.
class InstructionEncoder {
 public:
  // DataError when the folder has no tokenizer or no EOS, or `choice` is
  // folder and it has no template (or one that does not parse).
  explicit InstructionEncoder(
      const std::string& folder,
      std::optional<ChatTemplate> choice = std::nullopt);
  // `tokenizer`, already loaded, with `folder`'s tokenizer_config.json and
  // config.json for the EOS. DataError when there is no EOS.
  InstructionEncoder(
      Tokenizer tokenizer,
      const std::string& folder,
      std::optional<ChatTemplate> choice = std::nullopt);
  // One example (one JSON line). DataError saying what is wrong (the caller
  // names the file and line).
  TokenSequence encode(std::string_view line);
  // A chat prompt: [prefix] `user` as a user message, then the assistant's
  // header (the folder's template: its generation prompt), after which the
  // model answers.
  std::vector<std::int32_t> chat_prompt(std::string_view user);
  // The token that ends an answer: <|im_end|> (ChatML), <|eot_id|> (Llama
  // 3), EOS (plain).
  std::int32_t answer_end() const;
  // Every token that ends a text: EOS, config.json's and
  // generation_config.json's eos_token_id (one or a list), the answer's end.
  std::vector<std::int32_t> end_tokens() const;
  ChatTemplate chat_template() const {
    return template_;
  }
  std::int32_t eos() const {
    return eos_;
  }
  Tokenizer& tokenizer() {
    return tokenizer_;
  }

 private:
  Tokenizer tokenizer_;
  std::vector<std::int32_t> prefix_;
  std::int32_t eos_ = 0;
  std::vector<std::int32_t> ends_; // EOS and the configs' eos_token_ids
  std::string eos_text_;
  ChatTemplate template_ = ChatTemplate::Plain;
  std::int32_t answer_end_ = 0;
  std::shared_ptr<const FolderTemplate> folder_template_;
};

} // namespace hotloop::data
