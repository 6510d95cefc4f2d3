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
// - hf:DIR: Hugging Face's tokenizer.json (DIR/tokenizer.json, or the file
//   itself): byte-level BPE as Llama 3, Qwen2, SmolLM2 and GPT-2 have it.
//   Its pre-tokenizer (Llama 3's, Qwen2's or GPT-2's pattern, or SmolLM2's
//   Digits before GPT-2's; another is refused), its ignore_merges, and its
//   added tokens: their text in the input becomes their id (special tokens
//   too), as tokenizers' encode does without add_special_tokens. An NFC
//   normalizer (Qwen2's) is not applied: text that NFC would change is refused
//   with a DataError naming the byte. SentencePiece-style tokenizers (byte
//   fallback, Unigram) are refused.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hotloop::data {

// Token ids a vocabulary file may hold: past every released model's (the
// largest vocabulary is Gemma's 262,144), and a table of them is 2^24
// entries, where an id of 2^31 in a hostile file would ask for 64 GiB.
inline constexpr std::int64_t kMaxTokenId = (std::int64_t{1} << 24) - 1;

class BpeVocabulary; // src/hotloop/data/tokens/bpe.cpp

class Tokenizer {
 public:
  static Tokenizer bytes();
  // Throws DataError naming the file (and line) when DIR's files are missing
  // or malformed.
  static Tokenizer bpe(const std::string& dir);
  // DIR/tokenizer.json, or `path` when it is the file.
  static Tokenizer hf(const std::string& path);
  // The tokenizer in `dir`: its tokenizer.json when it has one, else its
  // vocab.json + merges.txt.
  static Tokenizer in_dir(const std::string& dir);
  // "bytes", "bpe:DIR" or "hf:DIR"; UsageError for anything else.
  static Tokenizer parse(const std::string& spec);
  // The folder of the tokenizer beside token files (`pack --tokenizer`
  // copies its files next to its shards): `path` when it is a folder, else
  // its folder (a file or a glob); nullopt when it has none. Nothing is
  // read: in_dir(*dir) loads it.
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
  // "bytes", "bpe:DIR" or "hf:FILE" (what parse() takes).
  std::string spec() const;
  // The folder of its files; bytes: empty.
  std::string dir() const;
  // Its files' paths: vocab.json and merges.txt, or tokenizer.json; bytes:
  // none.
  std::vector<std::string> files() const;
  // The ids tokenizers' encode with add_special_tokens puts before a text:
  // tokenizer.json's TemplateProcessing post-processor (Llama 3's
  // <|begin_of_text|>); none for Qwen2's, GPT-2's and bytes.
  std::vector<std::int32_t> special_prefix() const;
  // An added token's id (e.g. "<|end_of_text|>"); nullopt when it has none.
  std::optional<std::int32_t> added_token(std::string_view text) const;
  // The added token that ends a text: <|endoftext|> (GPT-2, Qwen2),
  // <|end_of_text|> (Llama 3) or </s> (Llama 2, Mistral), the first it has.
  std::optional<std::int32_t> end_of_text() const;

 private:
  std::shared_ptr<BpeVocabulary> vocabulary_; // null: bytes
};

} // namespace hotloop::data
