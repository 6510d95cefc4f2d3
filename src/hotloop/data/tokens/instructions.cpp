#include "hotloop/data/tokens/instructions.h"

#include <algorithm>
#include <array>
#include <cctype>
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

// The files and lines of one split.
struct Line {
  std::shared_ptr<const std::string> file;
  std::size_t number = 0; // 1-based
  std::string text;
};

// No example is this long; a file whose "line" is (not JSON Lines, or
// hostile) is refused before it is read into memory whole.
constexpr std::size_t kMaxLineBytes = std::size_t{64} << 20;

// std::getline with that bound: false at the end of the file.
bool next_line(
    std::istream& in,
    std::string& line,
    const std::string& file,
    std::size_t number) {
  line.clear();
  std::streambuf& buffer = *in.rdbuf();
  const auto eof = std::char_traits<char>::eof();
  for (auto c = buffer.sbumpc(); c != eof; c = buffer.sbumpc()) {
    if (c == '\n') {
      return true;
    }
    if (line.size() == kMaxLineBytes) {
      throw DataError(
          fmt::format(
              "{}:{}: a line of more than {} MiB",
              file,
              number,
              kMaxLineBytes >> 20),
          "instruction data is JSON Lines, one example a line: is this such a file?");
    }
    line.push_back(static_cast<char>(c));
  }
  return !line.empty();
}

std::vector<Line> read_lines(const std::vector<std::string>& files) {
  std::vector<Line> out;
  for (const std::string& f : files) {
    const auto name = std::make_shared<const std::string>(f);
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      throw DataError(fmt::format("instruct: cannot read {}", f));
    }
    std::string line;
    std::size_t n = 0;
    while (next_line(in, line, f, n + 1)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) {
        continue;
      }
      out.push_back({name, n, std::move(line)});
    }
  }
  return out;
}

// The split a file's name says: a word of it ("train", "val"/"valid"/
// "validation"/"dev", "test"), words being runs of letters; nullopt for
// none; DataError for two.
std::optional<Split> split_named(const std::string& file) {
  const std::string stem = fs::path(file).stem().string();
  std::optional<Split> found;
  std::size_t i = 0;
  while (i < stem.size()) {
    std::size_t j = i;
    while (j < stem.size() &&
           std::isalpha(static_cast<unsigned char>(stem[j]))) {
      ++j;
    }
    std::string word = stem.substr(i, j - i);
    for (char& ch : word) {
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    std::optional<Split> s;
    if (word == "train") {
      s = Split::Train;
    } else if (
        word == "val" || word == "valid" || word == "validation" ||
        word == "dev") {
      s = Split::Val;
    } else if (word == "test") {
      s = Split::Test;
    }
    if (s && found && *s != *found) {
      throw DataError(
          fmt::format("instruct: {} names two splits", file),
          "rename it: one of train, val or test in the name");
    }
    found = s ? s : found;
    i = j == i ? i + 1 : j;
  }
  return found;
}

std::vector<std::string> jsonl_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".jsonl") {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The last tenth of `lines` (Val) or the rest (Train); DataError for Val
// below 10 examples.
std::vector<Line> held_out(
    std::vector<Line> lines,
    Split split,
    const std::string& path) {
  if (split == Split::Test) {
    throw NoSuchSplit(fmt::format("instruct:{}: no test split", path));
  }
  const std::size_t val = lines.size() / 10;
  if (split == Split::Val && val == 0) {
    throw NoSuchSplit(
        fmt::format(
            "instruct:{}: {} examples, no val split (the last 10% is val from 10 examples on)",
            path,
            lines.size()),
        "put a val file beside it (the name with 'train' as 'val'), or train without evaluation (--no-eval)");
  }
  const std::size_t cut = lines.size() - val;
  if (split == Split::Train) {
    lines.resize(cut);
    return lines;
  }
  return {
      std::make_move_iterator(lines.begin() + static_cast<long>(cut)),
      std::make_move_iterator(lines.end())};
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

std::unique_ptr<TokenDataset> open_instructions(
    const std::string& path,
    Split split,
    const std::string& folder,
    std::optional<ChatTemplate> chat_template) {
  if (folder.empty()) {
    throw UsageError(
        fmt::format(
            "--data instruct:{}: instruction data is tokenized with the model folder's tokenizer, and the model has no folder",
            path),
        "fine-tune a Hugging Face folder: train --init DIR (or --model hf:DIR)");
  }
  std::error_code ec;
  std::vector<Line> lines;
  if (fs::is_directory(path, ec)) {
    const std::vector<std::string> all = jsonl_in(path);
    if (all.empty()) {
      throw DataError(fmt::format("instruct:{}: no *.jsonl files", path));
    }
    std::array<std::vector<std::string>, 3> by_name;
    std::vector<std::string> unnamed;
    for (const auto& f : all) {
      const std::optional<Split> s = split_named(f);
      (s ? by_name[static_cast<std::size_t>(*s)] : unnamed).push_back(f);
    }
    const bool some_named =
        std::any_of(by_name.begin(), by_name.end(), [](const auto& v) {
          return !v.empty();
        });
    if (!some_named) {
      lines = held_out(read_lines(all), split, path);
    } else if (!unnamed.empty()) {
      throw DataError(
          fmt::format(
              "instruct:{}: {} is in no split while other files are (train, val, test in their names)",
              path,
              unnamed.front()),
          "name it for its split, or move it out of the folder");
    } else {
      const auto& files = by_name[static_cast<std::size_t>(split)];
      if (files.empty()) {
        throw NoSuchSplit(fmt::format(
            "instruct:{}: no {} files (*.jsonl with '{}' in the name)",
            path,
            to_string(split),
            to_string(split)));
      }
      lines = read_lines(files);
    }
  } else if (fs::is_regular_file(path, ec)) {
    const std::string val = val_counterpart(path);
    if (!val.empty() && fs::is_regular_file(val, ec)) {
      if (split == Split::Test) {
        throw NoSuchSplit(fmt::format("instruct:{}: no test split", path));
      }
      lines = read_lines({split == Split::Train ? path : val});
    } else {
      lines = held_out(read_lines({path}), split, path);
    }
  } else {
    throw DataError(
        fmt::format("instruct:{}: no such file or folder", path),
        "give a .jsonl file or a folder of them");
  }
  if (lines.empty()) {
    throw DataError(fmt::format(
        "instruct:{}: no examples in the {} split", path, to_string(split)));
  }
  InstructionEncoder encoder(folder, chat_template);
  TokenSequence all;
  all.name = fmt::format("instruct:{} {}", path, to_string(split));
  for (const Line& l : lines) {
    TokenSequence one;
    try {
      one = encoder.encode(l.text);
    } catch (const DataError& e) {
      throw DataError(
          fmt::format("{}:{}: {}", *l.file, l.number, e.what()), e.hint());
    }
    all.example_starts.push_back(all.ids.size());
    all.ids.insert(all.ids.end(), one.ids.begin(), one.ids.end());
    all.trained.insert(
        all.trained.end(), one.trained.begin(), one.trained.end());
  }
  const std::string what = fmt::format(
      "instruct:{} {} ({} examples, {} template)",
      path,
      to_string(split),
      lines.size(),
      to_string(encoder.chat_template()));
  std::vector<TokenSequence> one;
  one.push_back(std::move(all));
  auto data = TokenDataset::from_ids(std::move(one), what);
  data->set_tokenizer_vocabulary(encoder.tokenizer().vocab_size());
  return data;
}

} // namespace hotloop::data
