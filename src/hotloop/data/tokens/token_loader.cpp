#include "hotloop/data/tokens/token_loader.h"

#include <chrono>

#include <ATen/ops/empty.h>
#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::data {

namespace {

SamplerOptions sampler_options(const LoaderOptions& o) {
  SamplerOptions s;
  s.batch_size = o.batch_size;
  s.world_size = o.world_size;
  s.rank = o.rank;
  s.shuffle = o.shuffle;
  s.drop_last = o.drop_last;
  s.seed = o.seed;
  return s;
}

// The targets in `targets[0 .. n)` that are trained (not kNoTarget).
std::int64_t trained_targets(const std::int64_t* targets, std::int64_t n) {
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    count += targets[i] != kNoTarget ? 1 : 0;
  }
  return count;
}

void check_context(const LoaderOptions& o) {
  if (o.context < 1) {
    throw UsageError(
        "token data needs the model's context (tokens per sample)");
  }
}

} // namespace

TokenLoader::TokenLoader(
    std::shared_ptr<const TokenDataset> data,
    LoaderOptions options)
    : data_(std::move(data)),
      options_(std::move(options)),
      masked_((check_context(options_), data_->has_context_only_tokens())),
      trained_(
          masked_ ? data_->trained_windows(options_.context)
                  : std::vector<std::uint64_t>()),
      windows_(masked_ ? trained_.size() : data_->windows(options_.context)),
      samples_(
          options_.max_samples > 0 && options_.max_samples < windows_
              ? options_.max_samples
              : static_cast<std::size_t>(windows_)),
      sampler_(samples_, sampler_options(options_)) {
  if (sampler_.batches_per_epoch() == 0) {
    throw UsageError(
        fmt::format(
            "{} has {} windows of {} tokens{}: fewer than one batch of {} x {} rank(s)",
            data_->describe(),
            windows_,
            options_.context + 1,
            masked_ ? " with a trained target" : "",
            options_.batch_size,
            options_.world_size),
        "use a smaller --batch or --context, or more data");
  }
}

std::size_t TokenLoader::batches_per_epoch() const {
  return sampler_.batches_per_epoch();
}

void TokenLoader::start_epoch(std::size_t epoch, std::size_t start_batch) {
  sampler_.set_epoch(epoch);
  epoch_ = epoch;
  next_ = start_batch;
}

std::uint64_t TokenLoader::window(std::size_t i) const {
  const std::uint64_t w = samples_ == windows_
      ? i
      : static_cast<std::uint64_t>(i) * windows_ / samples_;
  return masked_ ? trained_[w] : w;
}

std::optional<Batch> TokenLoader::next() {
  if (next_ >= sampler_.batches_per_epoch()) {
    return std::nullopt;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::size_t> items = sampler_.batch(next_);
  const std::int64_t t = options_.context;
  const auto b = static_cast<std::int64_t>(items.size());
  const bool gpu = options_.device.is_cuda();
  const at::Tensor host = at::empty(
      {b, t + 1}, at::TensorOptions().dtype(at::kLong).pinned_memory(gpu));
  auto* out = host.data_ptr<std::int64_t>();
  // Context-only tokens: the targets come apart, kNoTarget where ignored.
  const bool masked = masked_;
  const at::Tensor host_targets = masked
      ? at::empty(
            {b, t}, at::TensorOptions().dtype(at::kLong).pinned_memory(gpu))
      : at::Tensor();
  for (std::int64_t i = 0; i < b; ++i) {
    data_->read_window(
        window(items[static_cast<std::size_t>(i)]),
        t,
        out + i * (t + 1),
        masked ? host_targets.data_ptr<std::int64_t>() + i * t : nullptr);
  }
  const std::int64_t trained = masked
      ? trained_targets(host_targets.data_ptr<std::int64_t>(), b * t)
      : -1;
  const at::Tensor on_device =
      gpu ? host.to(options_.device, /*non_blocking=*/true) : host;
  Batch batch;
  batch.images = on_device.narrow(1, 0, t).contiguous();
  batch.labels = !masked ? on_device.narrow(1, 1, t).contiguous()
      : gpu              ? host_targets.to(options_.device, true)
                         : host_targets;
  batch.trained_targets = trained;
  batch.epoch = epoch_;
  batch.index = next_++;
  last_wait_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  stats_.batches += 1;
  stats_.samples += items.size();
  stats_.wait_seconds += last_wait_;
  return batch;
}

std::unique_ptr<EpochLoader> make_loader(
    std::shared_ptr<const Dataset> dataset,
    LoaderOptions options) {
  if (auto tokens = std::dynamic_pointer_cast<const TokenDataset>(dataset)) {
    return std::make_unique<TokenLoader>(std::move(tokens), std::move(options));
  }
  return std::make_unique<Loader>(std::move(dataset), std::move(options));
}

} // namespace hotloop::data
