#include "hotloop/data/tokens/token_data.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <ATen/ops/scalar_tensor.h>
#include <fmt/format.h>

#include "hotloop/data/tokens/tokenizer.h"
#include "hotloop/errors.h"

namespace hotloop::data {

namespace fs = std::filesystem;

namespace {

constexpr std::int32_t kLlmcMagic = 20240520; // version 1: uint16 tokens
constexpr std::int32_t kLlmcWideMagic = 20240801; // version 7: uint32 (Llama 3)
constexpr std::uint64_t kLlmcHeaderBytes = 256 * sizeof(std::int32_t);
constexpr std::int64_t kGpt2Vocabulary = 50257;

struct Mapping {
  void* addr = nullptr;
  std::size_t length = 0;
  ~Mapping() {
    if (addr != nullptr) {
      ::munmap(addr, length);
    }
  }
};

std::shared_ptr<Mapping> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw DataError(fmt::format(
        "cannot open token file {}: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw DataError(
        fmt::format("cannot stat token file {}: {}", path, std::strerror(e)));
  }
  auto m = std::make_shared<Mapping>();
  m->length = static_cast<std::size_t>(st.st_size);
  if (m->length > 0) {
    m->addr = ::mmap(nullptr, m->length, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m->addr == MAP_FAILED) {
      m->addr = nullptr;
      const int e = errno;
      ::close(fd);
      throw DataError(
          fmt::format("cannot map token file {}: {}", path, std::strerror(e)));
    }
  }
  ::close(fd);
  return m;
}

// A shard's windows of l + 1 tokens, every l: whole ones; with trained
// flags, the last partial one too (padded, its padding never a target), so
// that no example's answer is left out.
std::uint64_t windows_in(const TokenDataset::Shard& s, std::uint64_t l) {
  return s.trained == nullptr ? (s.count - 1) / l : (s.count - 1 + l - 1) / l;
}

std::uint32_t max_of(const TokenDataset::Shard& s) {
  std::uint32_t m = 0;
  for (std::uint64_t i = 0; i < s.count; ++i) {
    m = std::max(m, s.token(i));
  }
  return m;
}

TokenDataset::Shard open_shard(const std::string& path) {
  const std::shared_ptr<Mapping> m = map_file(path);
  const auto* bytes = static_cast<const unsigned char*>(m->addr);
  const std::uint64_t size = m->length;
  TokenDataset::Shard s;
  s.name = path;
  s.storage = m;
  std::int32_t header[3] = {0, 0, 0};
  if (size >= sizeof(header)) {
    std::memcpy(header, bytes, sizeof(header));
  }
  if (header[0] == kLlmcMagic || header[0] == kLlmcWideMagic) {
    if (size < kLlmcHeaderBytes) {
      throw DataError(
          fmt::format(
              "{}: truncated llm.c header: {} bytes, the header alone is {}",
              path,
              size,
              kLlmcHeaderBytes),
          "the file was cut short: write it again");
    }
    const bool wide = header[0] == kLlmcWideMagic;
    if (header[1] != (wide ? 7 : 1)) {
      throw DataError(
          fmt::format(
              "{}: llm.c header version {} at byte 4 (magic {}); hotloop reads magic {} version 1 (uint16 tokens) and magic {} version 7 (uint32)",
              path,
              header[1],
              header[0],
              kLlmcMagic,
              kLlmcWideMagic),
          "re-pack the data (hotloop pack --text writes them)");
    }
    s.token_bytes = wide ? 4 : 2;
    if (header[2] < 0) {
      throw DataError(
          fmt::format(
              "{}: the header's token count at byte 8 is negative ({})",
              path,
              header[2]),
          "the header is damaged or from another tool: write the file again (hotloop pack --text writes llm.c shards)");
    }
    const auto count = static_cast<std::uint64_t>(header[2]);
    const std::uint64_t expected = kLlmcHeaderBytes + s.token_bytes * count;
    if (size != expected) {
      throw DataError(
          fmt::format(
              "{}: the header (byte 8) says {} tokens, {} bytes in all, but the file has {} bytes{}",
              path,
              count,
              expected,
              size,
              size < expected ? fmt::format(
                                    " (truncated: it ends in token {})",
                                    (size - kLlmcHeaderBytes) / s.token_bytes)
                              : std::string()),
          "the file was cut short or written by another tool: write it again");
    }
    s.header_bytes = kLlmcHeaderBytes;
    s.count = count;
  } else {
    if (size == 0 || size % 2 != 0) {
      throw DataError(
          fmt::format(
              "{}: {} bytes is not a whole number of uint16 tokens, and the file has no llm.c header (magic {} at byte 0)",
              path,
              size,
              kLlmcMagic),
          "the file was cut short or is not a token file: nanoGPT's train.bin/val.bin and llm.c's .bin shards are read");
    }
    s.count = size / 2;
  }
  if (s.count < 2) {
    throw DataError(
        fmt::format(
            "{}: {} token(s): a window needs at least 2 (an input and the token after it)",
            path,
            s.count),
        "leave the file out, or pack more text into it");
  }
  s.tokens = bytes + s.header_bytes;
  s.max_token = max_of(s);
  return s;
}

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> out;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (std::size_t i = 0; i < g.gl_pathc; ++i) {
      out.emplace_back(g.gl_pathv[i]);
    }
  }
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

// "train" -> "val" in the file name part of `path`.
std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw DataError(fmt::format("cannot read {}", path.string()));
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

TokenDataset::TokenDataset(
    std::vector<Shard> shards,
    std::string what,
    bool byte_level)
    : shards_(std::move(shards)),
      what_(std::move(what)),
      byte_level_(byte_level) {
  for (const Shard& s : shards_) {
    total_ += s.count;
  }
}

std::unique_ptr<TokenDataset> TokenDataset::open_files(
    const std::vector<std::string>& paths,
    std::string what) {
  std::vector<Shard> shards;
  for (const std::string& p : paths) {
    shards.push_back(open_shard(p));
  }
  return std::unique_ptr<TokenDataset>(
      new TokenDataset(std::move(shards), std::move(what), false));
}

std::unique_ptr<TokenDataset> TokenDataset::from_text(
    const std::vector<std::pair<std::string, std::string>>& texts,
    std::string what) {
  std::vector<Shard> shards;
  for (const auto& [name, text] : texts) {
    if (text.size() < 2) {
      continue;
    }
    auto tokens =
        std::make_shared<std::vector<std::uint16_t>>(text.begin(), text.end());
    for (auto& t : *tokens) {
      t = static_cast<unsigned char>(static_cast<char>(t));
    }
    Shard s;
    s.name = name;
    s.tokens = tokens->data();
    s.count = tokens->size();
    s.max_token = max_of(s);
    s.storage = tokens;
    shards.push_back(std::move(s));
  }
  if (shards.empty()) {
    throw DataError(fmt::format("{}: no text (every file is empty)", what));
  }
  return std::unique_ptr<TokenDataset>(
      new TokenDataset(std::move(shards), std::move(what), true));
}

std::unique_ptr<TokenDataset> TokenDataset::from_ids(
    std::vector<TokenSequence> sequences,
    std::string what,
    bool byte_level) {
  std::vector<Shard> shards;
  for (TokenSequence& seq : sequences) {
    if (seq.ids.size() < 2) {
      continue;
    }
    if (!seq.trained.empty() && seq.trained.size() != seq.ids.size()) {
      throw Error(fmt::format(
          "{}: {} tokens but {} trained flags",
          seq.name,
          seq.ids.size(),
          seq.trained.size()));
    }
    auto held = std::make_shared<TokenSequence>(std::move(seq));
    Shard s;
    s.name = held->name;
    s.tokens = held->ids.data();
    s.token_bytes = 4;
    s.count = held->ids.size();
    s.max_token = max_of(s);
    s.trained = held->trained.empty() ? nullptr : held->trained.data();
    s.example_starts = held->example_starts;
    s.storage = held;
    shards.push_back(std::move(s));
  }
  if (shards.empty()) {
    throw DataError(fmt::format("{}: no tokens", what));
  }
  return std::unique_ptr<TokenDataset>(
      new TokenDataset(std::move(shards), std::move(what), byte_level));
}

bool TokenDataset::has_examples() const {
  return std::any_of(shards_.begin(), shards_.end(), [](const Shard& s) {
    return !s.example_starts.empty();
  });
}

std::vector<TokenSpan> TokenDataset::examples() const {
  std::vector<TokenSpan> out;
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    const Shard& s = shards_[i];
    const auto shard = static_cast<std::uint32_t>(i);
    if (s.example_starts.empty()) {
      out.push_back({shard, 0, s.count});
      continue;
    }
    for (std::size_t e = 0; e < s.example_starts.size(); ++e) {
      const std::uint64_t first = s.example_starts[e];
      const std::uint64_t end =
          e + 1 < s.example_starts.size() ? s.example_starts[e + 1] : s.count;
      out.push_back({shard, first, end - first});
    }
  }
  return out;
}

bool TokenDataset::has_context_only_tokens() const {
  return std::any_of(shards_.begin(), shards_.end(), [](const Shard& s) {
    return s.trained != nullptr;
  });
}

std::vector<std::uint64_t> TokenDataset::trained_windows(
    std::int64_t length) const {
  std::vector<std::uint64_t> out;
  const auto l = static_cast<std::uint64_t>(length);
  std::uint64_t w = 0;
  for (const Shard& s : shards_) {
    const std::uint64_t here = windows_in(s, l);
    for (std::uint64_t i = 0; i < here; ++i, ++w) {
      // Window i's targets are tokens i*l + 1 .. i*l + l (the shard's end).
      const std::uint8_t* t = s.trained;
      if (t == nullptr ||
          std::any_of(
              t + i * l + 1,
              t + std::min(i * l + l + 1, s.count),
              [](std::uint8_t x) { return x != 0; })) {
        out.push_back(w);
      }
    }
  }
  return out;
}

Sample TokenDataset::get(std::size_t index) const {
  std::uint64_t i = index;
  for (const Shard& s : shards_) {
    if (i < s.count) {
      const std::int64_t id = s.token(i);
      return {at::scalar_tensor(id, at::kLong), id};
    }
    i -= s.count;
  }
  throw DataError(
      fmt::format("{}: token {} is past the end ({})", what_, index, total_));
}

const std::vector<std::string>& TokenDataset::class_names() const {
  static const std::vector<std::string> none;
  return none;
}

std::string TokenDataset::describe() const {
  return fmt::format(
      "{}: {} tokens in {} shard(s){}",
      what_,
      total_,
      shards_.size(),
      byte_level_ ? " (bytes, vocabulary 256)"
                  : fmt::format(" (largest id {})", max_token()));
}

std::int64_t TokenDataset::max_token() const {
  std::uint32_t m = 0;
  for (const Shard& s : shards_) {
    m = std::max(m, s.max_token);
  }
  return m;
}

std::int64_t TokenDataset::vocabulary_hint() const {
  const std::int64_t m = max_token();
  if (tokenizer_vocabulary_ > 0) {
    return std::max(tokenizer_vocabulary_, m + 1);
  }
  if (byte_level_ || m < 256) {
    return 256;
  }
  return m < kGpt2Vocabulary ? kGpt2Vocabulary : m + 1;
}

std::optional<std::int64_t> TokenDataset::end_of_text() const {
  if (end_of_text_) {
    return end_of_text_;
  }
  if (tokenizer_files_.empty() && vocabulary_hint() == kGpt2Vocabulary) {
    return kGpt2Vocabulary - 1;
  }
  return std::nullopt;
}

void TokenDataset::check_vocabulary(std::int64_t vocab) const {
  for (const Shard& s : shards_) {
    if (s.max_token < vocab) {
      continue;
    }
    std::uint64_t i = 0;
    while (s.token(i) < vocab) {
      ++i;
    }
    throw DataError(
        fmt::format(
            "{}: token id {} at token {} (byte {}) is outside the model's vocabulary of {}",
            s.name,
            s.token(i),
            i,
            s.header_bytes + s.token_bytes * i,
            vocab),
        fmt::format(
            "train with --vocab {} or more (the data's largest id is {}), or tokenize the data with the model's tokenizer",
            max_token() + 1,
            max_token()));
  }
}

std::uint64_t TokenDataset::windows(std::int64_t length) const {
  std::uint64_t n = 0;
  const auto l = static_cast<std::uint64_t>(length);
  for (const Shard& s : shards_) {
    n += windows_in(s, l);
  }
  return n;
}

void TokenDataset::read_window(
    std::uint64_t w,
    std::int64_t length,
    std::int64_t* out,
    std::int64_t* targets) const {
  const auto l = static_cast<std::uint64_t>(length);
  for (const Shard& s : shards_) {
    const std::uint64_t here = windows_in(s, l);
    if (w < here) {
      const std::uint64_t first = w * l;
      // The last window of a shard with trained flags may be short: its
      // padding is token 0, never a target.
      const std::uint64_t n = std::min(l + 1, s.count - first);
      if (s.token_bytes == 2) {
        const auto* t = static_cast<const std::uint16_t*>(s.tokens) + first;
        std::copy(t, t + n, out);
      } else {
        const auto* t = static_cast<const std::uint32_t*>(s.tokens) + first;
        std::copy(t, t + n, out);
      }
      std::fill(out + n, out + l + 1, 0);
      if (targets != nullptr) {
        for (std::uint64_t i = 0; i < l; ++i) {
          const std::uint64_t at = first + i + 1;
          targets[i] =
              at < s.count && (s.trained == nullptr || s.trained[at] != 0)
              ? out[i + 1]
              : kNoTarget;
        }
      }
      return;
    }
    w -= here;
  }
  throw DataError(fmt::format("{}: window {} is past the end", what_, w));
}

std::string val_counterpart(const std::string& path) {
  const fs::path p(path);
  std::string name = p.filename().string();
  const std::size_t at = name.rfind("train");
  if (at == std::string::npos) {
    return {};
  }
  name.replace(at, 5, "val");
  return (p.parent_path() / name).string();
}

std::vector<std::string> token_files(const std::string& path, Split split) {
  std::error_code ec;
  std::vector<std::string> files;
  if (fs::is_directory(path, ec)) {
    const std::vector<std::string> all =
        glob_files((fs::path(path) / "*.bin").string());
    auto named = [&](const char* part) {
      std::vector<std::string> out;
      for (const auto& f : all) {
        if (fs::path(f).filename().string().find(part) != std::string::npos) {
          out.push_back(f);
        }
      }
      return out;
    };
    const std::vector<std::string> train = named("train");
    const std::vector<std::string> val = named("val");
    if (split == Split::Train) {
      files = train.empty() && val.empty() ? all : train;
    } else if (split == Split::Val) {
      files = val;
    }
    if (files.empty()) {
      throw DataError(
          fmt::format(
              "tokens:{}: no {} shards (*.bin{})",
              path,
              to_string(split),
              split == Split::Train ? "" : " with 'val' in the name"),
          "llm.c names them *_train_*.bin / *_val_*.bin, nanoGPT train.bin / val.bin");
    }
    return files;
  }
  if (split == Split::Test) {
    throw DataError(fmt::format("tokens:{}: no test split", path));
  }
  const std::vector<std::string> train =
      fs::exists(path, ec) ? std::vector<std::string>{path} : glob_files(path);
  if (train.empty()) {
    throw DataError(
        fmt::format("tokens:{}: no such file, folder or matching files", path),
        "give a token file, a folder of .bin shards or a glob");
  }
  if (split == Split::Train) {
    return train;
  }
  for (const auto& f : train) {
    const std::string v = val_counterpart(f);
    if (!v.empty() && fs::exists(v, ec)) {
      files.push_back(v);
    }
  }
  if (files.empty()) {
    throw DataError(
        fmt::format(
            "tokens:{}: no val counterpart (the name with 'train' as 'val')",
            path),
        "put the val split beside it (llm.c: *_val_*.bin, nanoGPT: val.bin), or train without evaluation (--no-eval)");
  }
  return files;
}

std::size_t train_share(std::string_view text) {
  const std::size_t line = text.find('\n', text.size() * 9 / 10);
  return line == std::string_view::npos ? text.size() : line + 1;
}

std::unique_ptr<TokenDataset> open_text(
    const std::string& path,
    Split split,
    const std::string& tokenizer_folder) {
  const bool fortunes = path == "fortunes";
  const fs::path root =
      fortunes ? fs::path(TokenDataset::kFortunesDir) : fs::path(path);
  std::error_code ec;
  std::vector<fs::path> files;
  if (fs::is_directory(root, ec)) {
    for (const auto& e : fs::directory_iterator(root, ec)) {
      if (e.is_symlink() || !e.is_regular_file() ||
          (fortunes && e.path().extension() == ".dat")) {
        continue;
      }
      files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(root, ec)) {
    files.push_back(root);
  }
  if (files.empty()) {
    throw DataError(
        fmt::format(
            "text:{}: {} has no text files",
            path,
            fs::exists(root, ec) ? root.string()
                                 : root.string() + " does not exist and"),
        fortunes
            ? std::string(
                  "install Debian's fortunes package (scripts/setup does): apt-get install fortunes")
            : std::string("give a text file or a folder of them"));
  }
  if (split == Split::Test) {
    throw DataError(fmt::format("text:{}: no test split", path));
  }
  std::vector<std::pair<std::string, std::string>> texts;
  for (const auto& f : files) {
    const std::string text = read_text(f);
    const std::size_t cut = train_share(text);
    texts.emplace_back(
        f.string(),
        split == Split::Train ? text.substr(0, cut) : text.substr(cut));
  }
  const std::string what = fmt::format(
      "text:{} {} ({} file(s))", path, to_string(split), files.size());
  // The model's own tokens when its folder has a tokenizer; else bytes (a
  // model of a byte vocabulary).
  if (tokenizer_folder.empty() || !fs::is_directory(tokenizer_folder, ec) ||
      !Tokenizer::dir_beside(tokenizer_folder)) {
    return TokenDataset::from_text(texts, what);
  }
  Tokenizer tokenizer = Tokenizer::in_dir(tokenizer_folder);
  std::vector<TokenSequence> sequences;
  for (const auto& [name, text] : texts) {
    TokenSequence s;
    s.name = name;
    try {
      for (const std::int32_t id : tokenizer.encode(text)) {
        s.ids.push_back(static_cast<std::uint32_t>(id));
      }
    } catch (const DataError& e) {
      throw DataError(fmt::format("{}: {}", name, e.what()), e.hint());
    }
    sequences.push_back(std::move(s));
  }
  auto data = TokenDataset::from_ids(
      std::move(sequences), fmt::format("{}, {}", what, tokenizer.spec()));
  data->set_tokenizer_vocabulary(tokenizer.vocab_size());
  data->set_end_of_text(tokenizer.end_of_text());
  return data;
}

} // namespace hotloop::data
