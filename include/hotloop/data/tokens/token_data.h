#pragma once
// Token data for language models: a sequence of token ids in one or more
// shards, read in windows of context + 1 tokens (the inputs and, shifted by
// one, the targets).
// - Token files, memory-mapped: llm.c's .bin shards (a header of 256 int32:
//   magic 20240520, version 1 = uint16 tokens, the token count; then the
//   tokens; magic 20240801 version 7 = uint32 tokens, llm.c's Llama 3
//   shards, for vocabularies past 65536) and nanoGPT's headerless uint16
//   train.bin / val.bin.
// - Text, as byte-level tokens (vocabulary 256): a file, a folder of files, or
//   the built-in corpus `fortunes` (Debian's fortunes package).
// - Token ids in memory (text tokenized with a model folder's tokenizer,
//   instruction data: data/instructions.h), where some tokens may be context
//   only: their targets are kNoTarget, which the loss ignores.
// Every shard is checked when it is opened: a bad header or a truncated file
// is a DataError naming the file and the byte offset.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hotloop/data/dataset.h"
#include "hotloop/data/tokens/packing.h"
#include "hotloop/data/tokens/token_sequence.h"

namespace hotloop::data {

// The target of a token that is context only (a prompt's): torch's default
// ignore_index, which model/loss.cpp's losses skip.
inline constexpr std::int64_t kNoTarget = -100;

class TokenDataset final : public Dataset {
 public:
  // Where the built-in corpus comes from.
  static constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

  struct Shard {
    std::string name; // the file, for messages
    const void* tokens = nullptr; // uint16 ids, or uint32 (token_bytes 4)
    std::uint64_t count = 0;
    std::uint64_t header_bytes = 0; // before the first token (llm.c: 1024)
    std::uint32_t token_bytes = 2; // 2, or 4 for llm.c's uint32 shards
    std::uint32_t max_token = 0;
    // TokenSequence::trained (count entries), or null: every token is.
    const std::uint8_t* trained = nullptr;
    // TokenSequence::example_starts; empty: the shard is one text.
    std::span<const std::uint64_t> example_starts;
    std::shared_ptr<const void> storage; // the mapping or the owned tokens
    std::uint32_t token(std::uint64_t i) const {
      return token_bytes == 2 ? static_cast<const std::uint16_t*>(tokens)[i]
                              : static_cast<const std::uint32_t*>(tokens)[i];
    }
  };

  // Token files (llm.c or headerless). Throws DataError naming the file.
  static std::unique_ptr<TokenDataset> open_files(
      const std::vector<std::string>& paths,
      std::string what);
  // Texts as bytes: (name, text) pairs, one shard each.
  static std::unique_ptr<TokenDataset> from_text(
      const std::vector<std::pair<std::string, std::string>>& texts,
      std::string what);
  // Token ids in memory, one shard each (sequences of fewer than 2 tokens
  // are left out). `byte_level`: the ids are bytes (bits per byte apply).
  // DataError when none is left.
  static std::unique_ptr<TokenDataset> from_ids(
      std::vector<TokenSequence> sequences,
      std::string what,
      bool byte_level = false);

  // Items are tokens: size() counts them, get(i) is token i (label = its id,
  // image = the id as a 0-dim int64 tensor). Training reads windows.
  std::size_t size() const override {
    return static_cast<std::size_t>(total_);
  }
  Sample get(std::size_t index) const override;
  const std::vector<std::string>& class_names() const override;
  std::optional<ImageShape> shape() const override {
    return std::nullopt;
  }
  std::string describe() const override;

  // Byte-level text (bits per byte apply).
  bool byte_level() const {
    return byte_level_;
  }
  // The largest token id in the data.
  std::int64_t max_token() const;
  // The vocabulary a model for this data needs by default: the tokenizer's
  // when its folder has one (vocab.json + merges.txt, as `pack --tokenizer`
  // leaves them), else 256 for bytes and for ids below 256, GPT-2's 50257
  // for ids below it, else max_token() + 1.
  std::int64_t vocabulary_hint() const;
  void set_tokenizer_vocabulary(std::int64_t vocab) {
    tokenizer_vocabulary_ = vocab;
  }
  // The files of the tokenizer beside token files (as `pack --tokenizer`
  // leaves them), which a run keeps in RUN/tokenizer/ (train/run_folder.h);
  // empty when the ids come with none.
  const std::vector<std::string>& tokenizer_files() const {
    return tokenizer_files_;
  }
  void set_tokenizer_files(std::vector<std::string> files) {
    tokenizer_files_ = std::move(files);
  }
  // Throws DataError naming the first token >= `vocab` (file and offset).
  void check_vocabulary(std::int64_t vocab) const;
  // The token that ends a text (what --document-mask eos cuts at): its
  // tokenizer's, when the data comes with one that has such a token; else
  // GPT-2's <|endoftext|> (50256) for ids of GPT-2's vocabulary, which llm.c's
  // and nanoGPT's shards put between documents; else none.
  std::optional<std::int64_t> end_of_text() const;
  void set_end_of_text(std::optional<std::int64_t> id) {
    end_of_text_ = id;
  }

  // Windows of `length` + 1 tokens starting every `length` tokens within a
  // shard (a window never spans two shards). A shard with trained flags
  // also has its last partial window, padded with token 0 whose targets
  // are kNoTarget.
  std::uint64_t windows(std::int64_t length) const;
  // Window `w`'s tokens into out[0 .. length]; with `targets`, the targets
  // of out[0 .. length - 1] into targets[0 .. length - 1]: the next token,
  // or kNoTarget where it is context only.
  void read_window(
      std::uint64_t w,
      std::int64_t length,
      std::int64_t* out,
      std::int64_t* targets = nullptr) const;
  // Whether some tokens are context only (their targets kNoTarget).
  bool has_context_only_tokens() const;
  // Whether the data is made of examples (TokenSequence::example_starts),
  // and each example's tokens (data/tokens/packing.h packs them).
  bool has_examples() const;
  std::vector<TokenSpan> examples() const;
  // The windows (as windows() counts them) with at least one trained
  // target: a batch of windows without any would have no loss.
  std::vector<std::uint64_t> trained_windows(std::int64_t length) const;
  const std::vector<Shard>& shards() const {
    return shards_;
  }

 private:
  TokenDataset(std::vector<Shard> shards, std::string what, bool byte_level);
  std::vector<Shard> shards_;
  std::string what_;
  bool byte_level_ = false;
  std::int64_t tokenizer_vocabulary_ = 0; // 0: none known
  std::vector<std::string> tokenizer_files_;
  std::optional<std::int64_t> end_of_text_;
  std::uint64_t total_ = 0;
};

// `tokens:PATH` -> the files of `split`: a folder's *.bin files whose names
// contain "train" (or "val"; with neither, all of them are train), a file or a
// glob (its "val" counterpart: "train" replaced by "val" in the name).
// Throws DataError when there are none.
std::vector<std::string> token_files(const std::string& path, Split split);

// A train file's val counterpart: the path with the last "train" in its name
// as "val"; empty when the name has none.
std::string val_counterpart(const std::string& path);

// Where a text's training part ends: 90% of its bytes, moved on to the next
// line's start (the rest is its validation part).
std::size_t train_share(std::string_view text);

// `text:fortunes|FILE|DIR` -> the texts of `split`: each file's first 90%
// (cut at a line end) is train, the rest val. As bytes, or, when
// `tokenizer_folder` (the model's Hugging Face folder) has a tokenizer,
// encoded with it (data/tokenizer.h), one shard per file.
std::unique_ptr<TokenDataset> open_text(
    const std::string& path,
    Split split,
    const std::string& tokenizer_folder = {});

} // namespace hotloop::data
