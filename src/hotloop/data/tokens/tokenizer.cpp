#include "hotloop/data/tokenizer.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/data/file_io.h"
#include "hotloop/data/tokens/pretokenize.h"
#include "hotloop/errors.h"

namespace hotloop::data {

namespace fs = std::filesystem;

namespace {

// GPT-2's bytes_to_unicode: the printable bytes stand for themselves, the
// others (controls, space, 0x7F-0xA0, 0xAD) for U+0100 onwards in order, so
// that every byte is a visible character in vocab.json and merges.txt.
std::array<char32_t, 256> byte_stand_ins() {
  std::array<char32_t, 256> s{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable =
        (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    s[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return s;
}

std::string utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
      static_cast<std::uint32_t>(b);
}

} // namespace

// vocab.json's ids, merges.txt's ranks, and a cache of encoded pieces.
class BpeVocabulary {
 public:
  explicit BpeVocabulary(const std::string& dir) : dir_(dir) {
    const fs::path vocab_path = fs::path(dir) / "vocab.json";
    const fs::path merges_path = fs::path(dir) / "merges.txt";
    for (const fs::path& p : {vocab_path, merges_path}) {
      if (!fs::is_regular_file(p)) {
        throw DataError(
            fmt::format(
                "bpe:{}: no {} (a byte-level BPE tokenizer is vocab.json + merges.txt)",
                dir,
                p.filename().string()),
            "give the folder of a GPT-2 checkpoint's tokenizer files, or what tokenizers' ByteLevelBPETokenizer.save_model(DIR) writes");
      }
    }
    read_vocab(vocab_path.string());
    read_merges(merges_path.string());
  }

  const std::string& dir() const {
    return dir_;
  }
  std::int64_t size() const {
    return static_cast<std::int64_t>(bytes_of_.size());
  }
  const std::string& bytes_of(std::int64_t id) const {
    static const std::string kNone;
    return id >= 0 && id < size() ? bytes_of_[id] : kNone;
  }

  void encode(std::string_view text, std::vector<std::int32_t>& out) {
    if (cache_.size() > kCacheEntries) {
      cache_.clear();
    }
    gpt2_pretokenize(text, [&](std::string_view piece) {
      auto [it, added] = cache_.try_emplace(std::string(piece));
      if (added) {
        it->second = merge(piece);
      }
      out.insert(out.end(), it->second.begin(), it->second.end());
    });
  }

 private:
  static constexpr std::size_t kCacheEntries = 1 << 20;
  struct Merge {
    std::int32_t rank;
    std::int32_t merged;
  };

  void read_vocab(const std::string& path) {
    const std::vector<std::uint8_t> raw = read_file(path);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(raw.begin(), raw.end());
    } catch (const nlohmann::json::exception& e) {
      throw DataError(fmt::format("{}: not valid JSON: {}", path, e.what()));
    }
    if (!j.is_object() || j.empty()) {
      throw DataError(fmt::format(
          "{}: expected an object of token -> id (GPT-2's vocab.json)", path));
    }
    std::int64_t largest = -1;
    for (const auto& [token, id] : j.items()) {
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
          id.get<std::int64_t>() >= std::numeric_limits<std::int32_t>::max()) {
        throw DataError(fmt::format(
            "{}: token {:?} has id {}, expected a non-negative integer",
            path,
            token,
            id.dump()));
      }
      largest = std::max(largest, id.get<std::int64_t>());
    }
    // Back from the stand-ins to bytes.
    const std::array<char32_t, 256> stand_in = byte_stand_ins();
    std::unordered_map<std::string, std::uint8_t> byte_of;
    for (int b = 0; b < 256; ++b) {
      byte_of.emplace(utf8(stand_in[b]), static_cast<std::uint8_t>(b));
    }
    bytes_of_.assign(static_cast<std::size_t>(largest + 1), std::string());
    for (const auto& [token, id] : j.items()) {
      const auto i = id.get<std::int32_t>();
      ids_.emplace(token, i);
      // Each character a byte's stand-in; anything else (a special token
      // such as <|endoftext|> is all stand-ins too) is kept as it is.
      std::string bytes;
      for (std::size_t k = 0; k < token.size();) {
        const auto c = static_cast<unsigned char>(token[k]);
        const std::size_t len = c < 0x80 ? 1
            : (c & 0xE0) == 0xC0         ? 2
            : (c & 0xF0) == 0xE0         ? 3
                                         : 4;
        const auto b = byte_of.find(token.substr(k, len));
        if (b == byte_of.end()) {
          bytes = token;
          break;
        }
        bytes += static_cast<char>(b->second);
        k += len;
      }
      bytes_of_[i] = std::move(bytes);
    }
    for (int b = 0; b < 256; ++b) {
      const auto it = ids_.find(utf8(stand_in[b]));
      if (it == ids_.end()) {
        throw DataError(
            fmt::format(
                "{}: no token for byte 0x{:02x} ({:?}): not a byte-level BPE vocabulary",
                path,
                b,
                utf8(stand_in[b])),
            "byte-level BPE (GPT-2's) has all 256 byte tokens; train with tokenizers' ByteLevelBPETokenizer");
      }
      byte_token_[b] = it->second;
    }
  }

  void read_merges(const std::string& path) {
    std::ifstream in(path);
    if (!in) {
      throw DataError(fmt::format("cannot read {}", path));
    }
    std::string line;
    std::int32_t rank = 0;
    for (std::size_t n = 1; std::getline(in, line); ++n) {
      if (!line.empty() && line.back() == '\r') {
        line.pop_back();
      }
      if (line.empty() || (n == 1 && line.starts_with("#version"))) {
        continue;
      }
      const std::size_t space = line.find(' ');
      if (space == std::string::npos || space == 0 ||
          space + 1 == line.size() ||
          line.find(' ', space + 1) != std::string::npos) {
        throw DataError(fmt::format(
            "{} line {}: expected two tokens separated by one space, got {:?}",
            path,
            n,
            line));
      }
      const std::string a = line.substr(0, space);
      const std::string b = line.substr(space + 1);
      const auto ia = ids_.find(a);
      const auto ib = ids_.find(b);
      const auto im = ids_.find(a + b);
      if (ia == ids_.end() || ib == ids_.end() || im == ids_.end()) {
        const std::string& missing = ia == ids_.end() ? a
            : ib == ids_.end()                        ? b
                                                      : a + b;
        throw DataError(
            fmt::format(
                "{} line {}: merge {:?} needs token {:?}, which vocab.json lacks",
                path,
                n,
                line,
                missing),
            "vocab.json and merges.txt must come from the same tokenizer");
      }
      // A pair listed twice keeps its first (lowest) rank.
      merges_.emplace(
          pair_key(ia->second, ib->second), Merge{rank, im->second});
      ++rank;
    }
  }

  // One piece's tokens: its bytes' tokens, then the lowest-ranked adjacent
  // pair merged everywhere (left to right) until no pair has a rank.
  std::vector<std::int32_t> merge(std::string_view piece) const {
    std::vector<std::int32_t> s;
    s.reserve(piece.size());
    for (const char c : piece) {
      s.push_back(byte_token_[static_cast<unsigned char>(c)]);
    }
    while (s.size() > 1) {
      const Merge* best = nullptr;
      std::uint64_t best_key = 0;
      for (std::size_t i = 0; i + 1 < s.size(); ++i) {
        const std::uint64_t key = pair_key(s[i], s[i + 1]);
        const auto it = merges_.find(key);
        if (it != merges_.end() &&
            (best == nullptr || it->second.rank < best->rank)) {
          best = &it->second;
          best_key = key;
        }
      }
      if (best == nullptr) {
        break;
      }
      std::size_t w = 0;
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && pair_key(s[i], s[i + 1]) == best_key) {
          s[w++] = best->merged;
          ++i;
        } else {
          s[w++] = s[i];
        }
      }
      s.resize(w);
    }
    return s;
  }

  std::string dir_;
  std::unordered_map<std::string, std::int32_t> ids_;
  std::vector<std::string> bytes_of_; // id -> its bytes
  std::array<std::int32_t, 256> byte_token_{};
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::unordered_map<std::string, std::vector<std::int32_t>> cache_;
};

Tokenizer Tokenizer::bytes() {
  return Tokenizer();
}

Tokenizer Tokenizer::bpe(const std::string& dir) {
  Tokenizer t;
  t.vocabulary_ = std::make_shared<BpeVocabulary>(dir);
  return t;
}

Tokenizer Tokenizer::parse(const std::string& spec) {
  if (spec == "bytes") {
    return bytes();
  }
  if (spec.starts_with("bpe:") && spec.size() > 4) {
    return bpe(spec.substr(4));
  }
  throw UsageError(
      fmt::format("--tokenizer {}: expected bytes or bpe:DIR", spec),
      "bpe:DIR reads DIR/vocab.json and DIR/merges.txt (GPT-2's byte-level BPE)");
}

std::optional<std::string> Tokenizer::dir_beside(const std::string& path) {
  std::error_code ec;
  const fs::path dir = fs::is_directory(path, ec)
      ? fs::path(path)
      : fs::path(path).parent_path();
  if (fs::is_regular_file(fs::path(dir) / "vocab.json", ec) &&
      fs::is_regular_file(fs::path(dir) / "merges.txt", ec)) {
    return dir.string();
  }
  return std::nullopt;
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) {
  std::vector<std::int32_t> ids;
  if (vocabulary_ == nullptr) {
    ids.assign(
        reinterpret_cast<const unsigned char*>(text.data()),
        reinterpret_cast<const unsigned char*>(text.data()) + text.size());
    return ids;
  }
  ids.reserve(text.size() / 3);
  vocabulary_->encode(text, ids);
  return ids;
}

std::string Tokenizer::decode(std::int64_t id) const {
  if (vocabulary_ == nullptr) {
    return id >= 0 && id < 256 ? std::string(1, static_cast<char>(id))
                               : std::string();
  }
  return vocabulary_->bytes_of(id);
}

std::string Tokenizer::decode(const std::vector<std::int64_t>& ids) const {
  std::string s;
  for (const std::int64_t id : ids) {
    s += decode(id);
  }
  return s;
}

std::int64_t Tokenizer::vocab_size() const {
  return vocabulary_ == nullptr ? 256 : vocabulary_->size();
}

std::string Tokenizer::spec() const {
  return vocabulary_ == nullptr ? "bytes" : "bpe:" + vocabulary_->dir();
}

std::string Tokenizer::dir() const {
  return vocabulary_ == nullptr ? std::string() : vocabulary_->dir();
}

} // namespace hotloop::data
