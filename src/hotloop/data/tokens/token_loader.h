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

#include <memory>

#include "hotloop/data/loader.h"
#include "hotloop/data/sampler.h"
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
  // The data set's window of sampler index i (evenly spaced when the epoch
  // is capped by max_samples).
  std::uint64_t window(std::size_t i) const;

 private:
  std::shared_ptr<const TokenDataset> data_;
  LoaderOptions options_;
  bool masked_ = false; // some tokens are context only
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
