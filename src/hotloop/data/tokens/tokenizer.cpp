#include "hotloop/data/tokens/tokenizer.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/core/json_depth.h"
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

// Which pattern cuts text into pieces before the merges.
// Gpt2Digits: tokenizers' Digits (individual_digits) then GPT-2's ByteLevel
// (SmolLM2's); Gpt2DigitRuns: Digits with runs kept together.
enum class PreTokenizer { Gpt2, Gpt2Digits, Gpt2DigitRuns, Llama3, Qwen2 };

// The Split patterns of Llama 3's and Qwen2's tokenizer.json, as written there.
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The ids of the vocabulary (vocab.json, or tokenizer.json's model.vocab),
// the merges' ranks, the added tokens, and a cache of encoded pieces.
class BpeVocabulary {
 public:
  // tokenizer.json (Hugging Face tokenizers' file): `file` is its path.
  BpeVocabulary(const std::string& dir, const std::string& file)
      : dir_(dir), file_(file) {
    try {
      read_tokenizer_json(file);
    } catch (const nlohmann::json::exception& e) {
      // A field of another type than tokenizers writes.
      throw DataError(fmt::format("{}: {}", file, e.what()));
    }
  }

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
  std::optional<std::int32_t> added_token(std::string_view text) const {
    for (const auto& [content, id] : added_) {
      if (content == text) {
        return id;
      }
    }
    return std::nullopt;
  }
  // An added token, else a vocabulary entry written as `text` (GPT-2's
  // vocab.json holds <|endoftext|> as an entry).
  std::optional<std::int32_t> token_id(std::string_view text) const {
    if (const auto added = added_token(text)) {
      return added;
    }
    const auto it = ids_.find(std::string(text));
    return it != ids_.end() ? std::optional<std::int32_t>(it->second)
                            : std::nullopt;
  }
  const std::vector<std::int32_t>& special_prefix() const {
    return prefix_;
  }
  // tokenizer.json's path; empty for vocab.json + merges.txt.
  const std::string& file() const {
    return file_;
  }
  std::int64_t size() const {
    return static_cast<std::int64_t>(bytes_of_.size());
  }
  const std::string& bytes_of(std::int64_t id) const {
    static const std::string kNone;
    return id >= 0 && id < size() ? bytes_of_[id] : kNone;
  }

  // Added tokens (special ones too) where their text occurs, the rest cut
  // into pieces and merged.
  void encode(std::string_view text, std::vector<std::int32_t>& out) {
    if (cache_.size() > kCacheEntries) {
      cache_.clear();
    }
    // Each added token's next occurrence at or after `pos`.
    std::vector<std::size_t> next;
    next.reserve(added_.size());
    for (const auto& [content, id] : added_) {
      next.push_back(text.find(content));
    }
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t at = std::string_view::npos;
      std::size_t which = 0;
      for (std::size_t t = 0; t < added_.size(); ++t) {
        if (next[t] != std::string_view::npos && next[t] < pos) {
          next[t] = text.find(added_[t].first, pos);
        }
        // The earliest; at one place the longest (added_ is longest first).
        if (next[t] < at) {
          at = next[t];
          which = t;
        }
      }
      encode_plain(text.substr(pos, std::min(at, text.size()) - pos), pos, out);
      if (at == std::string_view::npos) {
        break;
      }
      out.push_back(added_[which].second);
      pos = at + added_[which].first.size();
    }
  }

 private:
  static constexpr std::size_t kCacheEntries = 1 << 20;
  struct Merge {
    std::int32_t rank;
    std::int32_t merged;
  };

  // `text` starts at byte `offset` of what encode() was given.
  void encode_plain(
      std::string_view text,
      std::size_t offset,
      std::vector<std::int32_t>& out) {
    if (text.empty()) {
      return;
    }
    check_normalized(text, offset);
    const auto each = [&](std::string_view piece) {
      auto [it, added] = cache_.try_emplace(std::string(piece));
      if (added) {
        it->second = merge(piece);
      }
      out.insert(out.end(), it->second.begin(), it->second.end());
    };
    switch (pre_tokenizer_) {
      case PreTokenizer::Gpt2:
        gpt2_pretokenize(text, each);
        break;
      case PreTokenizer::Gpt2Digits:
      case PreTokenizer::Gpt2DigitRuns:
        digits_gpt2_pretokenize(
            text, pre_tokenizer_ == PreTokenizer::Gpt2Digits, each);
        break;
      case PreTokenizer::Llama3:
        llama3_pretokenize(text, 3, each);
        break;
      case PreTokenizer::Qwen2:
        llama3_pretokenize(text, 1, each);
        break;
    }
  }

  // An NFC normalizer: hotloop does not normalize, so text that NFC could
  // change is refused rather than encoded to other ids than tokenizers'.
  void check_normalized(std::string_view text, std::size_t offset) const {
    if (!nfc_) {
      return;
    }
    if (const auto at = first_not_nfc(text)) {
      throw DataError(
          fmt::format(
              "{}: the tokenizer normalizes text to NFC, and the text has a character NFC may change at byte {} (U+{:04X}); hotloop does not normalize",
              file_,
              offset + at->first,
              static_cast<std::uint32_t>(at->second)),
          "normalize the text first (Python: unicodedata.normalize(\"NFC\", text))");
    }
  }

  static nlohmann::json read_json(const std::string& path) {
    const std::vector<std::uint8_t> raw = read_file(path);
    return parse_json(
        std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()),
        path);
  }

  void read_vocab(const std::string& path) {
    take_vocab(read_json(path), path);
  }

  void take_vocab(const nlohmann::json& j, const std::string& path) {
    if (!j.is_object() || j.empty()) {
      throw DataError(fmt::format(
          "{}: expected an object of token -> id (GPT-2's vocab.json)", path));
    }
    std::int64_t largest = -1;
    for (const auto& [token, id] : j.items()) {
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
          id.get<std::int64_t>() > kMaxTokenId) {
        throw DataError(fmt::format(
            "{}: token {:?} has id {}, expected an integer from 0 to {}",
            path,
            token,
            id.dump(),
            kMaxTokenId));
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
      add_merge(
          line.substr(0, space),
          line.substr(space + 1),
          rank++,
          fmt::format("{} line {}", path, n));
    }
  }

  // Merge `a` + `b` at `rank`; `where` names it in errors.
  void add_merge(
      const std::string& a,
      const std::string& b,
      std::int32_t rank,
      const std::string& where) {
    const auto ia = ids_.find(a);
    const auto ib = ids_.find(b);
    const auto im = ids_.find(a + b);
    if (ia == ids_.end() || ib == ids_.end() || im == ids_.end()) {
      const std::string& missing = ia == ids_.end() ? a
          : ib == ids_.end()                        ? b
                                                    : a + b;
      throw DataError(
          fmt::format(
              "{}: merge {:?} needs token {:?}, which the vocabulary lacks",
              where,
              a + " " + b,
              missing),
          "the vocabulary and the merges must come from the same tokenizer");
    }
    // A pair listed twice keeps its first (lowest) rank.
    merges_.emplace(pair_key(ia->second, ib->second), Merge{rank, im->second});
  }

  [[noreturn]] void refuse(const std::string& what) const {
    throw DataError(
        fmt::format(
            "{}: {}: hotloop does not read this tokenizer", file_, what),
        "hotloop reads byte-level BPE tokenizers as Llama 3, Qwen2 and GPT-2 have them; SentencePiece-style ones (Llama 2, Mistral v0.1) are not supported");
  }

  // The pre-tokenizer: GPT-2's ByteLevel regex, or a Split by Llama 3's or
  // Qwen2's pattern followed by a ByteLevel without its own regex.
  PreTokenizer read_pre_tokenizer(const nlohmann::json& p) const {
    auto byte_level = [&](const nlohmann::json& b, bool regex) {
      return b.is_object() && b.value("type", "") == "ByteLevel" &&
          !b.value("add_prefix_space", false) &&
          b.value("use_regex", true) == regex;
    };
    if (byte_level(p, true)) {
      return PreTokenizer::Gpt2;
    }
    if (p.is_object() && p.value("type", "") == "Sequence" &&
        p.contains("pretokenizers") && p["pretokenizers"].is_array() &&
        p["pretokenizers"].size() == 2) {
      const nlohmann::json& split = p["pretokenizers"][0];
      // SmolLM2's: Digits, then GPT-2's ByteLevel with its regex.
      if (split.value("type", "") == "Digits" &&
          byte_level(p["pretokenizers"][1], true)) {
        return split.value("individual_digits", false)
            ? PreTokenizer::Gpt2Digits
            : PreTokenizer::Gpt2DigitRuns;
      }
      if (split.value("type", "") == "Split" &&
          split.value("behavior", "") == "Isolated" &&
          !split.value("invert", false) && split.contains("pattern") &&
          split["pattern"].is_object() && split["pattern"].contains("Regex") &&
          split["pattern"]["Regex"].is_string() &&
          byte_level(p["pretokenizers"][1], false)) {
        const std::string pattern = split["pattern"]["Regex"];
        if (pattern == kLlama3Pattern) {
          return PreTokenizer::Llama3;
        }
        if (pattern == kQwen2Pattern) {
          return PreTokenizer::Qwen2;
        }
        refuse(fmt::format("the split pattern {:?}", pattern));
      }
    }
    refuse(fmt::format("the pre-tokenizer {}", p.dump().substr(0, 200)));
  }

  void read_tokenizer_json(const std::string& path) {
    const nlohmann::json j = read_json(path);
    if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
      throw DataError(fmt::format(
          "{}: no \"model\" object (not a Hugging Face tokenizer.json)", path));
    }
    const nlohmann::json& model = j["model"];
    const std::string type = model.value("type", "");
    if (type != "BPE") {
      refuse(fmt::format("model type {:?}", type));
    }
    if (model.value("byte_fallback", false)) {
      refuse("byte_fallback BPE (SentencePiece's)");
    }
    for (const char* key :
         {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (model.contains(key) && model[key].is_string() &&
          !model[key].get<std::string>().empty()) {
        refuse(fmt::format("a {}", key));
      }
    }
    ignore_merges_ = model.value("ignore_merges", false);
    const nlohmann::json normalizer = j.value("normalizer", nlohmann::json());
    if (!normalizer.is_null()) {
      if (normalizer.value("type", "") != "NFC") {
        refuse(
            fmt::format("the normalizer {}", normalizer.dump().substr(0, 200)));
      }
      nfc_ = true;
    }
    pre_tokenizer_ =
        read_pre_tokenizer(j.value("pre_tokenizer", nlohmann::json()));
    if (!model.contains("vocab") || !model.contains("merges") ||
        !model["merges"].is_array()) {
      throw DataError(fmt::format(
          "{}: the BPE model has no \"vocab\" object or \"merges\" list",
          path));
    }
    take_vocab(model["vocab"], path + " (model.vocab)");
    std::int32_t rank = 0;
    for (const nlohmann::json& m : model["merges"]) {
      const std::string where = fmt::format("{} merge {}", path, rank);
      std::string a;
      std::string b;
      if (m.is_string()) { // "a b"
        const std::string line = m;
        const std::size_t space = line.find(' ');
        if (space == std::string::npos) {
          throw DataError(
              fmt::format("{}: {:?} is not two tokens", where, line));
        }
        a = line.substr(0, space);
        b = line.substr(space + 1);
      } else if (
          m.is_array() && m.size() == 2 && m[0].is_string() &&
          m[1].is_string()) {
        a = m[0];
        b = m[1];
      } else {
        throw DataError(
            fmt::format("{}: {} is not a pair of tokens", where, m.dump()));
      }
      add_merge(a, b, rank++, where);
    }
    for (const nlohmann::json& t :
         j.value("added_tokens", nlohmann::json::array())) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
          !t.contains("content") || !t["content"].is_string() ||
          t["id"].get<std::int64_t>() < 0 ||
          t["id"].get<std::int64_t>() > kMaxTokenId) {
        throw DataError(fmt::format(
            "{}: added token {} has no integer id from 0 to {} and text",
            path,
            t.dump().substr(0, 200),
            kMaxTokenId));
      }
      const auto id = t["id"].get<std::int32_t>();
      const std::string content = t["content"];
      if (content.empty()) {
        continue;
      }
      added_.emplace_back(content, id);
      if (static_cast<std::size_t>(id) >= bytes_of_.size()) {
        bytes_of_.resize(static_cast<std::size_t>(id) + 1);
      }
      bytes_of_[static_cast<std::size_t>(id)] = content;
    }
    std::stable_sort(
        added_.begin(), added_.end(), [](const auto& x, const auto& y) {
          return x.first.size() > y.first.size();
        });
    for (std::size_t id = 0; id < bytes_of_.size(); ++id) {
      if (!bytes_of_[id].empty()) {
        id_of_bytes_.emplace(bytes_of_[id], static_cast<std::int32_t>(id));
      }
    }
    read_post_processor(j.value("post_processor", nlohmann::json()));
  }

  // The special tokens a TemplateProcessing post-processor puts before a
  // single text (Llama 3's <|begin_of_text|>), alone or in a Sequence.
  void read_post_processor(const nlohmann::json& p) {
    if (!p.is_object()) {
      return;
    }
    if (p.value("type", "") == "Sequence") {
      for (const nlohmann::json& q :
           p.value("processors", nlohmann::json::array())) {
        read_post_processor(q);
      }
      return;
    }
    if (p.value("type", "") != "TemplateProcessing") {
      return;
    }
    const nlohmann::json specials =
        p.value("special_tokens", nlohmann::json::object());
    for (const nlohmann::json& piece :
         p.value("single", nlohmann::json::array())) {
      if (piece.contains("Sequence")) {
        break;
      }
      const std::string id =
          piece.value("SpecialToken", nlohmann::json::object())
              .value("id", std::string());
      const auto it = specials.find(id);
      if (it == specials.end()) {
        throw DataError(fmt::format(
            "{}: the post-processor's template names {:?}, which is not in its special_tokens",
            file_,
            id));
      }
      for (const nlohmann::json& x :
           it->value("ids", nlohmann::json::array())) {
        prefix_.push_back(x.get<std::int32_t>());
      }
    }
  }

  // One piece's tokens: its bytes' tokens, then the lowest-ranked adjacent
  // pair merged everywhere (left to right) until no pair has a rank.
  std::vector<std::int32_t> merge(std::string_view piece) const {
    if (ignore_merges_) {
      // A piece that is a token of its own is that token (Llama 3's
      // "ignore_merges").
      if (const auto it = id_of_bytes_.find(std::string(piece));
          it != id_of_bytes_.end()) {
        return {it->second};
      }
    }
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
  std::string file_; // tokenizer.json, or empty
  PreTokenizer pre_tokenizer_ = PreTokenizer::Gpt2;
  bool nfc_ = false;
  bool ignore_merges_ = false;
  std::unordered_map<std::string, std::int32_t> id_of_bytes_; // ignore_merges
  // Added tokens' text and id, the longest first.
  std::vector<std::pair<std::string, std::int32_t>> added_;
  std::vector<std::int32_t> prefix_; // the post-processor's, before a text
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

Tokenizer Tokenizer::hf(const std::string& path) {
  std::error_code ec;
  const fs::path file = fs::is_directory(path, ec)
      ? fs::path(path) / "tokenizer.json"
      : fs::path(path);
  if (!fs::is_regular_file(file, ec)) {
    throw DataError(
        fmt::format("hf:{}: no {}", path, file.string()),
        "give a Hugging Face model folder (its tokenizer.json) or the file itself");
  }
  Tokenizer t;
  t.vocabulary_ = std::make_shared<BpeVocabulary>(
      file.parent_path().string(), file.string());
  return t;
}

Tokenizer Tokenizer::in_dir(const std::string& dir) {
  std::error_code ec;
  if (fs::is_regular_file(fs::path(dir) / "tokenizer.json", ec)) {
    return hf(dir);
  }
  return bpe(dir);
}

Tokenizer Tokenizer::parse(const std::string& spec) {
  if (spec == "bytes") {
    return bytes();
  }
  if (spec.starts_with("bpe:") && spec.size() > 4) {
    return bpe(spec.substr(4));
  }
  if (spec.starts_with("hf:") && spec.size() > 3) {
    return hf(spec.substr(3));
  }
  throw UsageError(
      fmt::format("--tokenizer {}: expected bytes, bpe:DIR or hf:DIR", spec),
      "bpe:DIR reads DIR/vocab.json and DIR/merges.txt (GPT-2's byte-level BPE); hf:DIR reads DIR/tokenizer.json (Llama 3, Qwen2)");
}

std::optional<std::string> Tokenizer::dir_beside(const std::string& path) {
  std::error_code ec;
  const fs::path dir = fs::is_directory(path, ec)
      ? fs::path(path)
      : fs::path(path).parent_path();
  if (fs::is_regular_file(fs::path(dir) / "tokenizer.json", ec) ||
      (fs::is_regular_file(fs::path(dir) / "vocab.json", ec) &&
       fs::is_regular_file(fs::path(dir) / "merges.txt", ec))) {
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
  if (vocabulary_ == nullptr) {
    return "bytes";
  }
  return vocabulary_->file().empty() ? "bpe:" + vocabulary_->dir()
                                     : "hf:" + vocabulary_->file();
}

std::vector<std::string> Tokenizer::files() const {
  if (vocabulary_ == nullptr) {
    return {};
  }
  if (!vocabulary_->file().empty()) {
    return {vocabulary_->file()};
  }
  const fs::path dir = vocabulary_->dir();
  return {(dir / "vocab.json").string(), (dir / "merges.txt").string()};
}

std::optional<std::int32_t> Tokenizer::added_token(
    std::string_view text) const {
  return vocabulary_ == nullptr ? std::nullopt : vocabulary_->added_token(text);
}

std::optional<std::int32_t> Tokenizer::end_of_text() const {
  if (vocabulary_ == nullptr) {
    return std::nullopt;
  }
  for (const char* text : {"<|endoftext|>", "<|end_of_text|>", "</s>"}) {
    if (const auto id = vocabulary_->token_id(text)) {
      return id;
    }
  }
  return std::nullopt;
}

std::vector<std::int32_t> Tokenizer::special_prefix() const {
  return vocabulary_ == nullptr ? std::vector<std::int32_t>()
                                : vocabulary_->special_prefix();
}

std::string Tokenizer::dir() const {
  return vocabulary_ == nullptr ? std::string() : vocabulary_->dir();
}

} // namespace hotloop::data
