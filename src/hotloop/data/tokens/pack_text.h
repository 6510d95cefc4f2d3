#pragma once
// `hotloop pack --text`: text files -> llm.c token shards (a 256 x int32
// header: magic 20240520, version 1, the token count; then uint16 tokens),
// OUT/text_train_000000.bin ... and OUT/text_val_000000.bin, which
// `--data tokens:OUT` reads. Each file's last tenth (from a line start) is
// held out for validation, as `--data text:` does. Tokens are bytes
// (vocabulary 256) or, with a BPE tokenizer, its ids; then its vocab.json and
// merges.txt are copied into OUT too, so that the folder says its own
// vocabulary and `hotloop generate` can decode a model trained on it.

#include <cstdint>
#include <string>
#include <vector>

namespace hotloop::data {

struct PackTextOptions {
  std::vector<std::string> inputs; // files or folders (their files, sorted)
  std::string out; // created
  std::string tokenizer = "bytes"; // or bpe:DIR (data::Tokenizer::parse)
  std::uint64_t shard_tokens = 100'000'000; // llm.c's shard size
  bool progress = true; // a bar with MB/s on standard error
};

struct PackTextResult {
  std::size_t files = 0;
  std::uint64_t bytes = 0; // text read
  std::uint64_t train_tokens = 0;
  std::uint64_t val_tokens = 0;
  std::vector<std::string> shards; // paths, train then val
  std::int64_t vocab = 256; // the tokenizer's
  double seconds = 0;
};

// Throws UsageError for no inputs or a bad tokenizer spec, DataError for an
// unreadable file, a tokenizer whose ids do not fit uint16 or an output that
// cannot be written.
PackTextResult pack_text(const PackTextOptions& options);

} // namespace hotloop::data
