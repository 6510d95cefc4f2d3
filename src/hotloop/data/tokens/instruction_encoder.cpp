#include "hotloop/data/tokens/instruction_encoder.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/core/json_depth.h"
#include "hotloop/data/tokens/chat_template.h"
#include "hotloop/errors.h"

namespace hotloop::data {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// An example as text, with the byte ranges whose tokens are trained.
struct Rendered {
  std::string text;
  std::vector<std::pair<std::size_t, std::size_t>> trained;

  void add(std::string_view s, bool train) {
    if (train && !s.empty()) {
      trained.emplace_back(text.size(), text.size() + s.size());
    }
    text += s;
  }
};

struct Message {
  std::string role;
  std::string content;
  bool trained = false;
};

json read_json_or_null(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    return nullptr;
  }
  std::ifstream in(file, std::ios::binary);
  const std::string text(std::istreambuf_iterator<char>(in), {});
  check_json_depth(text, file.string());
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw DataError(fmt::format("{}: {}", file.string(), e.what()));
  }
}

// tokenizer_config.json's eos_token: "text" or {"content": "text"}.
std::string eos_token_text(const json& config) {
  if (!config.is_object() || !config.contains("eos_token")) {
    return {};
  }
  const json& e = config["eos_token"];
  if (e.is_string()) {
    return e.get<std::string>();
  }
  if (e.is_object() && e.contains("content") && e["content"].is_string()) {
    return e["content"].get<std::string>();
  }
  return {};
}

std::vector<Message> read_messages(const json& list, const char* key) {
  if (!list.is_array() || list.empty()) {
    throw DataError(fmt::format("\"{}\" is not a list of messages", key));
  }
  std::vector<Message> out;
  for (const json& m : list) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
        !m.contains("content") || !m["content"].is_string()) {
      throw DataError(fmt::format(
          "a message of \"{}\" is not {{\"role\": text, \"content\": text}}: {}",
          key,
          m.dump().substr(0, 120)));
    }
    Message msg{m["role"], m["content"], false};
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant") {
      throw DataError(
          fmt::format(
              "role \"{}\" (system, user or assistant)",
              msg.role.substr(0, 40)),
          "hotloop's chat templates know these three roles");
    }
    out.push_back(std::move(msg));
  }
  return out;
}

std::string capitalized(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') {
    s[0] = static_cast<char>(s[0] - 'a' + 'A');
  }
  return s;
}

// `r` as tokens after `prefix`: a token with a byte in a trained part is
// trained (as transformers' assistant mask marks every token with a
// character of the answer: the space that GPT-2-style pieces carry in front
// of a word is the header's).
TokenSequence tokens_of(
    Tokenizer& tokenizer,
    const Rendered& r,
    const std::vector<std::int32_t>& prefix) {
  const std::vector<std::int32_t> ids = tokenizer.encode(r.text);
  TokenSequence out;
  out.ids.reserve(prefix.size() + ids.size());
  out.trained.reserve(prefix.size() + ids.size());
  for (const std::int32_t id : prefix) {
    out.ids.push_back(static_cast<std::uint32_t>(id));
    out.trained.push_back(0);
  }
  std::size_t at = 0;
  auto span = r.trained.begin();
  for (const std::int32_t id : ids) {
    const std::size_t end = at + tokenizer.decode(id).size();
    while (span != r.trained.end() && span->second <= at) {
      ++span;
    }
    const bool trained = span != r.trained.end() && span->first < end;
    out.ids.push_back(static_cast<std::uint32_t>(id));
    out.trained.push_back(trained ? 1 : 0);
    at = end;
  }
  if (at != r.text.size()) {
    throw DataError(fmt::format(
        "its tokens cover {} bytes of its {}-byte text (a tokenizer whose tokens are not byte-level)",
        at,
        r.text.size()));
  }
  return out;
}

// A line in the conversational forms ({"messages"}, or lists of messages as
// prompt and completion): those the folder's template renders.
bool conversational(const json& j) {
  return j.contains("messages") ||
      (j.contains("prompt") && j["prompt"].is_array());
}

jinja::List template_messages(
    const nlohmann::ordered_json& list,
    const char* key) {
  if (!list.is_array() || list.empty()) {
    throw DataError(fmt::format("\"{}\" is not a list of messages", key));
  }
  jinja::List out;
  for (const auto& m : list) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      throw DataError(fmt::format(
          "a message of \"{}\" is not {{\"role\": text, ...}}: {}",
          key,
          m.dump().substr(0, 120)));
    }
    out.push_back(jinja::from_json(m));
  }
  return out;
}

// A conversational line rendered by the folder's template, with what it
// trains (data/tokens/chat_template.h).
Rendered in_template(const FolderTemplate& t, std::string_view line) {
  const auto j = nlohmann::ordered_json::parse(line);
  jinja::List messages;
  std::size_t completion_from = std::string::npos;
  if (j.contains("messages")) {
    messages = template_messages(j["messages"], "messages");
    if (std::none_of(
            messages.begin(), messages.end(), [](const jinja::Value& m) {
              const jinja::Value* role = m.find("role");
              return role->as_string() == "assistant";
            })) {
      throw DataError(
          "no assistant message: nothing to train",
          "a conversation ends with the assistant's answer");
    }
  } else {
    if (!j.contains("completion") || !j["completion"].is_array()) {
      throw DataError(
          "\"prompt\" and \"completion\" are not both text or both lists of messages");
    }
    messages = template_messages(j["prompt"], "prompt");
    completion_from = messages.size();
    for (jinja::Value& m : template_messages(j["completion"], "completion")) {
      messages.push_back(std::move(m));
    }
  }
  const jinja::Value tools =
      j.contains("tools") ? jinja::from_json(j["tools"]) : jinja::Value();
  try {
    FolderTemplate::Example e =
        t.render_example(messages, completion_from, tools);
    return {std::move(e.text), std::move(e.trained)};
  } catch (const jinja::TemplateRaised& e) {
    throw DataError(
        fmt::format(
            "the chat template ({}) refuses it: {}", t.origin(), e.what()),
        "write the conversation as the template expects (roles, their order), or pass --chat-template chatml, llama3 or plain");
  } catch (const jinja::TemplateError& e) {
    throw DataError(fmt::format("{}: {}", t.origin(), e.what()), e.hint());
  }
}

} // namespace

const char* to_string(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::Folder:
      return "the folder's";
    case ChatTemplate::ChatMl:
      return "ChatML";
    case ChatTemplate::Llama3:
      return "Llama 3";
    case ChatTemplate::Plain:
      return "plain";
  }
  return "?";
}

std::optional<ChatTemplate> parse_chat_template(const std::string& name) {
  if (name == "auto") {
    return std::nullopt;
  }
  if (name == "folder") {
    return ChatTemplate::Folder;
  }
  if (name == "chatml") {
    return ChatTemplate::ChatMl;
  }
  if (name == "llama3") {
    return ChatTemplate::Llama3;
  }
  if (name == "plain") {
    return ChatTemplate::Plain;
  }
  throw UsageError(fmt::format(
      "--chat-template {:?}: not a chat template ({})",
      name,
      kChatTemplateNames));
}

namespace {

Tokenizer folder_tokenizer(const std::string& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec) || !Tokenizer::dir_beside(folder)) {
    throw DataError(
        fmt::format(
            "{}: no tokenizer (tokenizer.json, or vocab.json + merges.txt)",
            folder),
        "instruction data is tokenized with the model folder's tokenizer");
  }
  return Tokenizer::in_dir(folder);
}

} // namespace

InstructionEncoder::InstructionEncoder(
    const std::string& folder,
    std::optional<ChatTemplate> choice)
    : InstructionEncoder(folder_tokenizer(folder), folder, choice) {}

InstructionEncoder::InstructionEncoder(
    Tokenizer tokenizer,
    const std::string& folder,
    std::optional<ChatTemplate> choice)
    : tokenizer_(std::move(tokenizer)), prefix_(tokenizer_.special_prefix()) {
  const fs::path dir(folder);
  const json config = read_json_or_null(dir / "config.json");
  eos_text_ = eos_token_text(read_json_or_null(dir / "tokenizer_config.json"));
  if (!eos_text_.empty()) {
    const auto id = tokenizer_.added_token(eos_text_);
    if (!id) {
      throw DataError(fmt::format(
          "{}: eos_token {:?} is not one of the tokenizer's added tokens",
          (dir / "tokenizer_config.json").string(),
          eos_text_));
    }
    eos_ = *id;
  } else {
    const json id =
        config.is_object() ? config.value("eos_token_id", json()) : json();
    const json first = id.is_array() && !id.empty() ? id[0] : id;
    if (!first.is_number_integer()) {
      throw DataError(
          fmt::format(
              "{}: no end-of-sequence token (tokenizer_config.json's eos_token or config.json's eos_token_id)",
              folder),
          "instruction data ends each answer with it: add eos_token to tokenizer_config.json");
    }
    eos_ = first.get<std::int32_t>();
    eos_text_ = tokenizer_.decode(eos_);
  }
  if (tokenizer_.encode(eos_text_) != std::vector<std::int32_t>{eos_}) {
    throw DataError(fmt::format(
        "{}: the end-of-sequence token {} ({:?}) does not encode to itself (not an added token)",
        folder,
        eos_,
        eos_text_));
  }
  // What else ends a text: config.json's and generation_config.json's
  // eos_token_id (Llama 3 Instruct lists <|end_of_text|>, <|eom_id|> and
  // <|eot_id|>), as transformers' generate stops at each.
  ends_ = {eos_};
  for (const json& c :
       {config, read_json_or_null(dir / "generation_config.json")}) {
    const json ids = c.is_object() ? c.value("eos_token_id", json()) : json();
    for (const json& id : ids.is_array() ? ids : json::array({ids})) {
      if (id.is_number_integer() && id.get<std::int64_t>() >= 0 &&
          id.get<std::int64_t>() < tokenizer_.vocab_size() &&
          std::find(ends_.begin(), ends_.end(), id.get<std::int32_t>()) ==
              ends_.end()) {
        ends_.push_back(id.get<std::int32_t>());
      }
    }
  }
  auto has = [&](std::initializer_list<const char*> tokens) {
    return std::all_of(tokens.begin(), tokens.end(), [&](const char* t) {
      return tokenizer_.added_token(t).has_value();
    });
  };
  // The built-in the added tokens choose, and the token that ends an answer.
  answer_end_ = eos_;
  if (has({"<|im_start|>", "<|im_end|>"})) {
    template_ = ChatTemplate::ChatMl;
    answer_end_ = *tokenizer_.added_token("<|im_end|>");
  } else if (has({"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"})) {
    template_ = ChatTemplate::Llama3;
    answer_end_ = *tokenizer_.added_token("<|eot_id|>");
  }
  if (!choice || *choice == ChatTemplate::Folder) {
    folder_template_ = FolderTemplate::in_folder(folder);
    if (folder_template_) {
      template_ = ChatTemplate::Folder;
    } else if (choice) {
      throw DataError(
          fmt::format(
              "{}: no chat template (tokenizer_config.json's chat_template, chat_template.jinja)",
              folder),
          "leave out --chat-template folder, or name a built-in: chatml, llama3 or plain");
    }
  } else if (*choice != template_ && *choice != ChatTemplate::Plain) {
    throw DataError(
        fmt::format(
            "--chat-template {}: the tokenizer of {} lacks its added tokens ({})",
            to_string(*choice),
            folder,
            *choice == ChatTemplate::ChatMl
                ? "<|im_start|>, <|im_end|>"
                : "<|start_header_id|>, <|end_header_id|>, <|eot_id|>"),
        "pass --chat-template plain, or leave it out");
  } else {
    template_ = *choice;
    answer_end_ = template_ == ChatTemplate::Plain ? eos_ : answer_end_;
  }
}

std::int32_t InstructionEncoder::answer_end() const {
  return answer_end_;
}

std::vector<std::int32_t> InstructionEncoder::end_tokens() const {
  std::vector<std::int32_t> out = ends_;
  if (std::find(out.begin(), out.end(), answer_end()) == out.end()) {
    out.push_back(answer_end());
  }
  return out;
}

std::vector<std::int32_t> InstructionEncoder::chat_prompt(
    std::string_view user) {
  std::string text;
  switch (template_) {
    case ChatTemplate::Folder:
      return tokenizer_.encode(folder_template_->prompt({jinja::Value(
          jinja::Dict{{"role", "user"}, {"content", std::string(user)}})}));
    case ChatTemplate::ChatMl:
      text = fmt::format(
          "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n", user);
      break;
    case ChatTemplate::Llama3:
      text = fmt::format(
          "<|start_header_id|>user<|end_header_id|>\n\n{}<|eot_id|>"
          "<|start_header_id|>assistant<|end_header_id|>\n\n",
          user);
      break;
    case ChatTemplate::Plain:
      text = fmt::format("User: {}\nAssistant:", user);
      break;
  }
  std::vector<std::int32_t> ids = prefix_;
  const std::vector<std::int32_t> rest = tokenizer_.encode(text);
  ids.insert(ids.end(), rest.begin(), rest.end());
  return ids;
}

TokenSequence InstructionEncoder::encode(std::string_view line) {
  json j;
  check_json_depth(line, "");
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    throw DataError(fmt::format("not JSON: {}", e.what()));
  }
  if (!j.is_object()) {
    throw DataError("not a JSON object");
  }
  if (folder_template_ && conversational(j)) {
    return tokens_of(tokenizer_, in_template(*folder_template_, line), {});
  }
  Rendered r;
  std::vector<Message> messages;
  if (j.contains("messages")) {
    messages = read_messages(j["messages"], "messages");
    for (Message& m : messages) {
      m.trained = m.role == "assistant";
    }
    if (std::none_of(messages.begin(), messages.end(), [](const Message& m) {
          return m.trained;
        })) {
      throw DataError(
          "no assistant message: nothing to train",
          "a conversation ends with the assistant's answer");
    }
  } else if (j.contains("prompt") && j.contains("completion")) {
    const json& p = j["prompt"];
    const json& c = j["completion"];
    if (p.is_string() && c.is_string()) {
      if (c.get_ref<const std::string&>().empty()) {
        throw DataError("empty completion: nothing to train");
      }
      r.add(p.get_ref<const std::string&>(), false);
      r.add(c.get_ref<const std::string&>(), true);
      r.add(eos_text_, true);
    } else if (p.is_array() && c.is_array()) {
      messages = read_messages(p, "prompt");
      std::vector<Message> answer = read_messages(c, "completion");
      for (Message& m : answer) {
        m.trained = true;
        messages.push_back(std::move(m));
      }
    } else {
      throw DataError(
          "\"prompt\" and \"completion\" are not both text or both lists of messages");
    }
  } else {
    throw DataError(
        "no \"prompt\" and \"completion\", nor \"messages\"",
        "a line is {\"prompt\": ..., \"completion\": ...} or {\"messages\": [{\"role\": ..., \"content\": ...}]}");
  }
  for (const Message& m : messages) {
    switch (template_) {
      case ChatTemplate::Folder: // rendered above
      case ChatTemplate::ChatMl:
        r.add("<|im_start|>" + m.role + "\n", false);
        r.add(m.content, m.trained);
        r.add("<|im_end|>", m.trained);
        r.add("\n", false);
        break;
      case ChatTemplate::Llama3:
        r.add("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n", false);
        r.add(m.content, m.trained);
        r.add("<|eot_id|>", m.trained);
        break;
      case ChatTemplate::Plain:
        r.add(capitalized(m.role) + ": ", false);
        r.add(m.content, m.trained);
        r.add(m.role == "assistant" ? eos_text_ : "\n", m.trained);
        break;
    }
  }
  return tokens_of(tokenizer_, r, prefix_);
}

} // namespace hotloop::data
