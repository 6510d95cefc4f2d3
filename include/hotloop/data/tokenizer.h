#pragma once
// Text <-> token ids for language models.
// - bytes: each byte is a token (vocabulary 256); what `text:` data and
//   `pack --text` use by default.
// - bpe:DIR: GPT-2's byte-level BPE from DIR/vocab.json + DIR/merges.txt (the
//   files next to a GPT-2 checkpoint, or what Hugging Face `tokenizers`'
//   ByteLevelBPETokenizer.save_model writes). Text is cut by GPT-2's
//   pre-tokenizer pattern, each piece's bytes are mapped to GPT-2's printable
//   stand-ins and merged by merges.txt's ranks (lowest first). Any bytes
//   encode (invalid UTF-8 too) and decode back unchanged. No special tokens
//   are parsed from the text.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hotloop::data {

class BpeVocabulary; // src/hotloop/data/tokens/bpe.cpp

class Tokenizer {
 public:
  static Tokenizer bytes();
  // Throws DataError naming the file (and line) when DIR's files are missing
  // or malformed.
  static Tokenizer bpe(const std::string& dir);
  // "bytes" or "bpe:DIR"; UsageError for anything else.
  static Tokenizer parse(const std::string& spec);
  // The folder of the tokenizer beside token files (`pack --tokenizer bpe:`
  // copies vocab.json and merges.txt next to its shards): `path` when it is a
  // folder, else its folder (a file or a glob); nullopt when it has none.
  // Nothing is read: bpe(*dir) loads it.
  static std::optional<std::string> dir_beside(const std::string& path);

  // Token ids of `text`. Not thread-safe: it caches pieces it has encoded.
  std::vector<std::int32_t> encode(std::string_view text);
  // Token `id`'s bytes (empty for an id outside the vocabulary).
  std::string decode(std::int64_t id) const;
  std::string decode(const std::vector<std::int64_t>& ids) const;
  // The largest id + 1.
  std::int64_t vocab_size() const;
  bool byte_level() const {
    return vocabulary_ == nullptr;
  }
  // "bytes" or "bpe:DIR" (what parse() takes).
  std::string spec() const;
  // bpe: the folder of vocab.json and merges.txt; bytes: empty.
  std::string dir() const;

 private:
  std::shared_ptr<BpeVocabulary> vocabulary_; // null: bytes
};

} // namespace hotloop::data
