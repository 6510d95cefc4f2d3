#include "hotloop/data/tokens/pack_text.h"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <span>

#include <fmt/format.h>

#include "hotloop/core/atomic_file.h"
#include "hotloop/core/progress.h"
#include "hotloop/data/file_io.h"
#include "hotloop/data/tokens/token_data.h"
#include "hotloop/data/tokens/tokenizer.h"
#include "hotloop/errors.h"

namespace hotloop::data {

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> list_inputs(const std::vector<std::string>& inputs) {
  std::vector<fs::path> files;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<fs::path> here;
      for (const auto& e : fs::recursive_directory_iterator(in, ec)) {
        if (e.is_regular_file() && !e.is_symlink()) {
          here.push_back(e.path()); // a link's target is there already
        }
      }
      std::sort(here.begin(), here.end());
      files.insert(files.end(), here.begin(), here.end());
    } else if (fs::is_regular_file(in, ec)) {
      files.emplace_back(in);
    } else {
      throw DataError(fmt::format("--text {}: no such file or folder", in));
    }
  }
  if (files.empty()) {
    throw UsageError("pack --text: no text files in the inputs");
  }
  return files;
}

// Buffers one split's tokens and writes a shard each shard_tokens: llm.c's
// uint16 format (magic 20240520, version 1), or with `wide` its uint32 one
// (magic 20240801, version 7: llm.c's Llama 3 shards).
class ShardWriter {
 public:
  ShardWriter(
      std::string out,
      std::string split,
      std::uint64_t shard_tokens,
      bool wide)
      : out_(std::move(out)),
        split_(std::move(split)),
        shard_tokens_(shard_tokens),
        wide_(wide) {}

  void add(const std::vector<std::int32_t>& ids) {
    for (const std::int32_t id : ids) {
      tokens_.push_back(static_cast<std::uint32_t>(id));
      if (tokens_.size() == shard_tokens_) {
        flush();
      }
    }
  }
  void flush() {
    if (tokens_.empty()) {
      return;
    }
    std::int32_t header[256] = {};
    header[0] = wide_ ? 20240801 : 20240520;
    header[1] = wide_ ? 7 : 1;
    header[2] = static_cast<std::int32_t>(tokens_.size());
    std::vector<std::uint16_t> narrow;
    if (!wide_) {
      narrow.assign(tokens_.begin(), tokens_.end());
    }
    const std::string path =
        (fs::path(out_) / fmt::format("text_{}_{:06}.bin", split_, index_++))
            .string();
    write_file_atomic(
        path,
        {std::span(
             reinterpret_cast<const std::uint8_t*>(header), sizeof(header)),
         wide_ ? std::span(
                     reinterpret_cast<const std::uint8_t*>(tokens_.data()),
                     tokens_.size() * sizeof(std::uint32_t))
               : std::span(
                     reinterpret_cast<const std::uint8_t*>(narrow.data()),
                     narrow.size() * sizeof(std::uint16_t))});
    total_ += tokens_.size();
    tokens_.clear();
    shards_.push_back(path);
  }
  std::uint64_t total() const {
    return total_;
  }
  const std::vector<std::string>& shards() const {
    return shards_;
  }

 private:
  std::string out_;
  std::string split_;
  std::uint64_t shard_tokens_;
  bool wide_;
  std::vector<std::uint32_t> tokens_;
  std::uint64_t total_ = 0;
  int index_ = 0;
  std::vector<std::string> shards_;
};

} // namespace

PackTextResult pack_text(const PackTextOptions& o) {
  if (o.shard_tokens < 2 || o.shard_tokens > 0x7fffffff) {
    throw UsageError(
        fmt::format(
            "--shard-tokens {}: expected 2 to 2^31 - 1 (the header's count is an int32)",
            o.shard_tokens),
        "leave it out for llm.c's 100000000 tokens per shard");
  }
  const auto start = std::chrono::steady_clock::now();
  Tokenizer tokenizer = Tokenizer::parse(o.tokenizer);
  const std::vector<fs::path> files = list_inputs(o.inputs);
  std::uint64_t total_bytes = 0;
  for (const auto& f : files) {
    std::error_code ec;
    total_bytes += fs::file_size(f, ec);
  }
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) {
    throw DataError(fmt::format("cannot create {}: {}", o.out, ec.message()));
  }
  PackTextResult r;
  r.vocab = tokenizer.vocab_size();
  if (tokenizer.byte_level() && Tokenizer::dir_beside(o.out)) {
    // Its shards would be read with that vocabulary and decoded with it.
    throw UsageError(
        fmt::format(
            "--to {}: it holds a BPE tokenizer (vocab.json, merges.txt) from an earlier pack, but these tokens are bytes",
            o.out),
        "pack into an empty folder, or give the same --tokenizer bpe:DIR");
  }
  if (!tokenizer.byte_level()) {
    for (const fs::path from : tokenizer.files()) {
      const fs::path to = fs::path(o.out) / from.filename();
      if (!fs::equivalent(from, to, ec)) {
        ec.clear();
        fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
      } else {
        ec.clear();
      }
      if (ec) {
        throw DataError(fmt::format(
            "cannot copy {} to {}: {}", from.string(), o.out, ec.message()));
      }
    }
  }

  // Ids past uint16 (Llama 3's, Qwen2's vocabularies) go in uint32 shards.
  const bool wide = tokenizer.vocab_size() > 65536;
  ShardWriter train(o.out, "train", o.shard_tokens, wide);
  ShardWriter val(o.out, "val", o.shard_tokens, wide);
  Progress progress("pack text", total_bytes, o.progress);
  for (const auto& f : files) {
    const std::vector<std::uint8_t> bytes = read_file(f.string());
    const std::string_view text(
        reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const std::size_t cut = train_share(text);
    train.add(tokenizer.encode(text.substr(0, cut)));
    val.add(tokenizer.encode(text.substr(cut)));
    r.bytes += bytes.size();
    r.files += 1;
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    progress.update(
        r.bytes,
        fmt::format(
            "{:.1f} MB/s",
            s > 0 ? static_cast<double>(r.bytes) / s / 1e6 : 0.0));
  }
  train.flush();
  val.flush();
  r.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  progress.finish(fmt::format(
      "{:.1f} MB/s",
      r.seconds > 0 ? static_cast<double>(r.bytes) / r.seconds / 1e6 : 0.0));
  r.train_tokens = train.total();
  r.val_tokens = val.total();
  r.shards = train.shards();
  r.shards.insert(r.shards.end(), val.shards().begin(), val.shards().end());
  return r;
}

} // namespace hotloop::data
