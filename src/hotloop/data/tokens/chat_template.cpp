#include "hotloop/data/tokens/chat_template.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/core/json_depth.h"
#include "hotloop/errors.h"

namespace hotloop::data {

namespace fs = std::filesystem;
using jinja::List;
using jinja::Value;

namespace {

std::optional<std::string> read_text(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    return std::nullopt;
  }
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// tokenizer_config.json's chat_template: the text, or the "default" of a
// list of {"name", "template"}.
std::string template_in(const nlohmann::json& config) {
  const nlohmann::json t = config.value("chat_template", nlohmann::json());
  if (t.is_string()) {
    return t.get<std::string>();
  }
  if (t.is_array()) {
    for (const auto& named : t) {
      if (named.is_object() && named.value("name", "") == "default" &&
          named.contains("template") && named["template"].is_string()) {
        return named["template"].get<std::string>();
      }
    }
  }
  return {};
}

// The special tokens by name, as transformers gives them to a template.
jinja::Dict special_tokens(const nlohmann::json& config) {
  jinja::Dict out;
  for (const auto& [key, v] : config.items()) {
    if (key.size() < 6 || key.compare(key.size() - 6, 6, "_token") != 0) {
      continue;
    }
    if (v.is_string()) {
      out.emplace_back(key, v.get<std::string>());
    } else if (
        v.is_object() && v.contains("content") && v["content"].is_string()) {
      out.emplace_back(key, v["content"].get<std::string>());
    }
  }
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Where an assistant turn starts in the whole conversation `whole`, and
// the turn as it renders when last (`alone`): after the conversation before
// it with a generation prompt where that starts the whole, else at its
// content found from `cursor`. npos when neither.
std::pair<std::size_t, std::string_view> turn_start(
    const std::string& whole,
    const std::string& before,
    const std::string& turn,
    const Value& message,
    std::size_t cursor) {
  if (starts_with(whole, before) && before.size() >= cursor &&
      starts_with(turn, before)) {
    return {before.size(), std::string_view(turn).substr(before.size())};
  }
  const Value* content = message.find("content");
  if (content == nullptr || !content->is_string() ||
      content->as_string().empty()) {
    return {std::string::npos, {}};
  }
  const std::string& text = content->as_string();
  const std::size_t in_turn = turn.rfind(text);
  const std::size_t at = whole.find(text, cursor);
  if (in_turn == std::string::npos || at == std::string::npos) {
    return {std::string::npos, {}};
  }
  return {at, std::string_view(turn).substr(in_turn)};
}

// How much of `rest` (the whole conversation from a turn's start) is the
// turn: as far as it agrees with the turn rendered last, from the front
// or from the back, whichever is longer (Qwen3 writes an empty thinking
// block only in the last turns, Phi-4-mini an EOS only at the very end).
std::size_t shared_length(std::string_view rest, std::string_view alone) {
  std::size_t front = 0;
  while (front < rest.size() && front < alone.size() &&
         rest[front] == alone[front]) {
    ++front;
  }
  for (std::size_t drop = 0; drop < alone.size(); ++drop) {
    const std::string_view end = alone.substr(drop);
    if (end.size() <= front) {
      break;
    }
    if (rest.substr(0, end.size()) == end) {
      return end.size();
    }
  }
  return front;
}

} // namespace

std::shared_ptr<const FolderTemplate> FolderTemplate::in_folder(
    const std::string& folder) {
  const fs::path dir(folder);
  nlohmann::json config = nlohmann::json::object();
  if (const auto text = read_text(dir / "tokenizer_config.json")) {
    check_json_depth(*text, (dir / "tokenizer_config.json").string());
    config = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!config.is_object()) {
      throw DataError(fmt::format(
          "{}: not a JSON object", (dir / "tokenizer_config.json").string()));
    }
  }
  std::string source;
  std::string origin;
  if (const auto file = read_text(dir / "chat_template.jinja")) {
    source = *file;
    origin = (dir / "chat_template.jinja").string();
  } else {
    source = template_in(config);
    origin = (dir / "tokenizer_config.json").string() + "'s chat_template";
  }
  if (source.empty()) {
    return nullptr;
  }
  try {
    return std::shared_ptr<const FolderTemplate>(
        new FolderTemplate(source, origin, special_tokens(config)));
  } catch (const jinja::TemplateError& e) {
    throw DataError(
        fmt::format("{}: {}", origin, e.what()),
        "pass --chat-template chatml, llama3 or plain to use a built-in template instead");
  }
}

FolderTemplate::FolderTemplate(
    std::string_view source,
    std::string origin,
    jinja::Dict tokens)
    : template_(source),
      origin_(std::move(origin)),
      tokens_(std::move(tokens)) {}

std::string FolderTemplate::render(
    const List& messages,
    bool generation_prompt,
    const Value& tools,
    std::vector<std::pair<std::size_t, std::size_t>>* generation) const {
  jinja::Dict variables = tokens_;
  variables.emplace_back("messages", messages);
  variables.emplace_back("add_generation_prompt", generation_prompt);
  if (!tools.is_undefined()) {
    variables.emplace_back("tools", tools);
  }
  jinja::RenderOutput out = template_.render(variables);
  if (generation != nullptr) {
    *generation = std::move(out.generation);
  }
  return std::move(out.text);
}

std::string FolderTemplate::prompt(const List& messages) const {
  return render(messages, true, Value());
}

FolderTemplate::Example FolderTemplate::render_example(
    const List& messages,
    std::size_t completion_from,
    const Value& tools) const {
  Example out;
  out.text = render(messages, false, tools, &out.trained);
  const auto upto = [&](std::size_t n) {
    return List(messages.begin(), messages.begin() + static_cast<long>(n));
  };
  if (completion_from != std::string::npos) {
    // TRL's completion mask: what follows the prompt's own rendering; with
    // generation blocks, what they wrote there.
    const std::string prompt = render(upto(completion_from), true, tools);
    if (!starts_with(out.text, prompt)) {
      throw jinja::TemplateError(
          "the conversation does not start with its prompt as the template renders it alone, so the completion cannot be told apart",
          "write the example as {\"messages\": [...]}");
    }
    if (!template_.has_generation()) {
      out.trained = {{prompt.size(), out.text.size()}};
      return out;
    }
    std::erase_if(out.trained, [&](const auto& span) {
      return span.first < prompt.size();
    });
    return out;
  }
  if (template_.has_generation()) {
    return out; // what the generation blocks wrote
  }
  std::size_t cursor = 0;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const Value* role = messages[i].find("role");
    if (role == nullptr || !role->is_string() ||
        role->as_string() != "assistant") {
      continue;
    }
    const std::string before = render(upto(i), true, tools);
    const std::string turn = render(upto(i + 1), false, tools);
    const auto [start, alone] =
        turn_start(out.text, before, turn, messages[i], cursor);
    if (start == std::string::npos) {
      throw jinja::TemplateError(
          fmt::format(
              "the template renders the conversation before assistant message {} unlike its start in the whole, and its answer is not found there",
              i + 1),
          "add {% generation %} blocks to the template to say what is trained, or pass --chat-template chatml, llama3 or plain");
    }
    const std::size_t end =
        start + shared_length(std::string_view(out.text).substr(start), alone);
    out.trained.emplace_back(start, end);
    cursor = end;
  }
  return out;
}

} // namespace hotloop::data
