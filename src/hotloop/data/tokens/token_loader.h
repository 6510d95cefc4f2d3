#pragma once
// The loader for token data: each sample is a window of context + 1 tokens
// (data/token_data.h), read straight from the memory-mapped shards into the
// batch (pinned host memory when it goes to a GPU, then a non_blocking copy).
// The windows' order is the Sampler's: a function of (seed, epoch), each
// rank its own part of every global batch, so N ranks together read what one
// would and no window twice; the position (epoch, batch) resumes exactly.
// Reading a batch is a memory copy of B x (context + 1) tokens: no threads.
// Data with context-only tokens (instruction data's prompts) gives their
// targets as kNoTarget, and only windows with a trained target are read.
// Data made of examples (instruction data) is read in rows packed as
// LoaderOptions::packing says (data/tokens/packing.h): best-fit rows carry
// each token's position in its example and where the examples start.

#include <memory>

#include "hotloop/data/loader.h"
#include "hotloop/data/sampler.h"
#include "hotloop/data/tokens/packing.h"
#include "hotloop/data/tokens/token_data.h"

namespace hotloop::data {

class TokenLoader final : public EpochLoader {
 public:
  // Throws UsageError for options that do not fit (no context, fewer windows
  // than one batch).
  TokenLoader(std::shared_ptr<const TokenDataset> data, LoaderOptions options);

  void start_epoch(std::size_t epoch, std::size_t start_batch = 0) override;
  std::optional<Batch> next() override;
  double last_wait_seconds() const override {
    return last_wait_;
  }
  std::size_t batches_per_epoch() const override;
  std::pair<std::size_t, std::size_t> position() const override {
    return {epoch_, next_};
  }
  LoaderStats stats() const override {
    return stats_;
  }
  // The data set's window (or packed row) of sampler index i (evenly spaced
  // when the epoch is capped by max_samples).
  std::uint64_t window(std::size_t i) const;
  // Whether batches carry sequences (positions): best-fit rows of data made
  // of examples, or windows cut at document ends (--document-mask).
  bool packed_rows() const override {
    return (!rows_.empty() && options_.packing == Packing::BestFit) ||
        document_end_ >= 0;
  }
  // "packing: best-fit, 40 examples and pieces of long ones (44 in all) in
  // 26 rows of 48 tokens, 6.8% padding", or the document mask's line; empty
  // for other data.
  std::string packing_line() const override;

 private:
  Batch read_windows(const std::vector<std::size_t>& items);
  Batch read_rows(const std::vector<std::size_t>& items);
  at::Tensor to_device(const at::Tensor& host) const;
  // The batch's positions and its sequences' starts and longest.
  void set_sequences(
      Batch& batch,
      const at::Tensor& positions,
      const std::vector<std::int32_t>& lengths) const;

  std::shared_ptr<const TokenDataset> data_;
  LoaderOptions options_;
  bool masked_ = false; // some tokens are context only
  // Data made of examples, packed best-fit or one a row: the rows read
  // (those with a trained target), instead of windows.
  std::vector<PackedRow> rows_;
  // --document-mask's end token; -1: off.
  std::int64_t document_end_ = -1;
  // With masked_, the windows read: those with a trained target.
  std::vector<std::uint64_t> trained_;
  std::uint64_t windows_ = 0;
  std::size_t samples_ = 0; // per epoch, before the rank split
  Sampler sampler_;
  std::size_t epoch_ = 0;
  std::size_t next_ = 0;
  double last_wait_ = 0;
  LoaderStats stats_;
};

} // namespace hotloop::data
