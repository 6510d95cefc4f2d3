#include "hotloop/data/tokens/instructions.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::data {

namespace fs = std::filesystem;

namespace {

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

} // namespace

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
