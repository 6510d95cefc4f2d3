#include "hotloop/data/tokens/token_loader.h"

#include <algorithm>
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

// Data made of examples, packed best-fit or one a row: the rows with a
// trained target. Empty for wrap and for data without examples.
std::vector<PackedRow> pack_examples(
    const TokenDataset& data,
    const LoaderOptions& o) {
  if (o.packing == Packing::Wrap || !data.has_examples()) {
    return {};
  }
  const std::vector<TokenSpan> spans =
      fit_to_context(data.examples(), o.context);
  std::vector<PackedRow> rows = o.packing == Packing::BestFit
      ? pack_best_fit(spans, o.context)
      : pack_one_per_row(spans);
  std::erase_if(
      rows, [&](const PackedRow& r) { return !has_trained_target(data, r); });
  return rows;
}

// --document-mask for data without examples: the token documents end
// with; -1 when off (data made of examples is packed instead).
std::int64_t document_end(const TokenDataset& data, const LoaderOptions& o) {
  const DocumentMask mask = parse_document_mask(o.document_mask);
  if (!mask.on || data.has_examples()) {
    return -1;
  }
  if (mask.end >= 0) {
    return mask.end;
  }
  if (const auto eos = data.end_of_text()) {
    return *eos;
  }
  throw UsageError(
      fmt::format(
          "--document-mask eos: {} has no end-of-text token (no tokenizer that has one, and not GPT-2's vocabulary)",
          data.describe()),
      "name the token that ends a document: --document-mask ID");
}

at::Tensor host_buffer(
    std::vector<std::int64_t> shape,
    bool pinned,
    at::ScalarType dtype = at::kLong) {
  return at::empty(
      shape, at::TensorOptions().dtype(dtype).pinned_memory(pinned));
}

} // namespace

TokenLoader::TokenLoader(
    std::shared_ptr<const TokenDataset> data,
    LoaderOptions options)
    : data_(std::move(data)),
      options_(std::move(options)),
      masked_((check_context(options_), data_->has_context_only_tokens())),
      rows_(pack_examples(*data_, options_)),
      document_end_(document_end(*data_, options_)),
      trained_(
          masked_ && rows_.empty() ? data_->trained_windows(options_.context)
                                   : std::vector<std::uint64_t>()),
      windows_(
          !rows_.empty() ? rows_.size()
              : masked_  ? trained_.size()
                         : data_->windows(options_.context)),
      samples_(
          options_.max_samples > 0 && options_.max_samples < windows_
              ? options_.max_samples
              : static_cast<std::size_t>(windows_)),
      sampler_(samples_, sampler_options(options_)) {
  if (sampler_.batches_per_epoch() == 0) {
    throw UsageError(
        fmt::format(
            "{} has {} {} of {} tokens{}: fewer than one batch of {} x {} rank(s)",
            data_->describe(),
            windows_,
            rows_.empty() ? "windows" : "packed rows",
            options_.context + (rows_.empty() ? 1 : 0),
            masked_ ? " with a trained target" : "",
            options_.batch_size,
            options_.world_size),
        "use a smaller --batch or --context, or more data");
  }
}

std::string TokenLoader::packing_line() const {
  if (document_end_ >= 0) {
    return fmt::format(
        "document mask: each window of {} tokens cut into documents after token {}",
        options_.context + 1,
        document_end_);
  }
  if (!data_->has_examples()) {
    return {};
  }
  const std::size_t examples = data_->examples().size();
  if (rows_.empty()) {
    return fmt::format(
        "packing: {}, {} examples as one stream in {} windows of {} tokens (examples see the ones before them in a window)",
        name_of<Packing>(kPackingNames, options_.packing),
        examples,
        windows_,
        options_.context + 1);
  }
  std::uint64_t tokens = 0;
  std::size_t spans = 0;
  for (const PackedRow& r : rows_) {
    spans += r.size();
    for (const TokenSpan& s : r) {
      tokens += s.count;
    }
  }
  const double room =
      static_cast<double>(rows_.size()) * static_cast<double>(options_.context);
  return fmt::format(
      "packing: {}, {} examples{} in {} rows of {} tokens, {:.1f}% padding",
      name_of<Packing>(kPackingNames, options_.packing),
      examples,
      spans > examples
          ? fmt::format(" and pieces of long ones ({} in all)", spans)
          : std::string(),
      rows_.size(),
      options_.context,
      100.0 * (1.0 - static_cast<double>(tokens) / room));
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
  return masked_ && rows_.empty() ? trained_[w] : w;
}

std::optional<Batch> TokenLoader::next() {
  if (next_ >= sampler_.batches_per_epoch()) {
    return std::nullopt;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::size_t> items = sampler_.batch(next_);
  Batch batch = rows_.empty() ? read_windows(items) : read_rows(items);
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

Batch TokenLoader::read_windows(const std::vector<std::size_t>& items) {
  const std::int64_t t = options_.context;
  const auto b = static_cast<std::int64_t>(items.size());
  const bool gpu = options_.device.is_cuda();
  const at::Tensor host = host_buffer({b, t + 1}, gpu);
  auto* out = host.data_ptr<std::int64_t>();
  // Context-only tokens and document ends: the targets come apart,
  // kNoTarget where ignored.
  const bool documents = document_end_ >= 0;
  const bool masked = masked_ || documents;
  const at::Tensor host_targets =
      masked ? host_buffer({b, t}, gpu) : at::Tensor();
  const at::Tensor positions =
      documents ? host_buffer({b, t}, gpu) : at::Tensor();
  std::vector<std::int32_t> lengths;
  for (std::int64_t i = 0; i < b; ++i) {
    std::int64_t* targets =
        masked ? host_targets.data_ptr<std::int64_t>() + i * t : nullptr;
    data_->read_window(
        window(items[static_cast<std::size_t>(i)]),
        t,
        out + i * (t + 1),
        targets);
    if (documents) {
      cut_at_document_ends(
          out + i * (t + 1),
          t,
          document_end_,
          targets,
          positions.data_ptr<std::int64_t>() + i * t,
          lengths);
    }
  }
  const std::int64_t trained = masked
      ? trained_targets(host_targets.data_ptr<std::int64_t>(), b * t)
      : -1;
  const at::Tensor on_device = to_device(host);
  Batch batch;
  batch.images = on_device.narrow(1, 0, t).contiguous();
  batch.labels =
      masked ? to_device(host_targets) : on_device.narrow(1, 1, t).contiguous();
  batch.trained_targets = trained;
  if (documents) {
    set_sequences(batch, positions, lengths);
  }
  return batch;
}

Batch TokenLoader::read_rows(const std::vector<std::size_t>& items) {
  const std::int64_t t = options_.context;
  const auto b = static_cast<std::int64_t>(items.size());
  const bool gpu = options_.device.is_cuda();
  const at::Tensor inputs = host_buffer({b, t}, gpu);
  const at::Tensor targets = host_buffer({b, t}, gpu);
  const at::Tensor positions = host_buffer({b, t}, gpu);
  std::vector<std::int32_t> lengths;
  Batch batch;
  batch.trained_targets = 0;
  for (std::int64_t i = 0; i < b; ++i) {
    batch.trained_targets += read_packed_row(
        *data_,
        rows_[window(items[static_cast<std::size_t>(i)])],
        t,
        inputs.data_ptr<std::int64_t>() + i * t,
        targets.data_ptr<std::int64_t>() + i * t,
        positions.data_ptr<std::int64_t>() + i * t,
        lengths);
  }
  batch.images = to_device(inputs);
  batch.labels = to_device(targets);
  if (packed_rows()) {
    set_sequences(batch, positions, lengths);
  }
  return batch;
}

at::Tensor TokenLoader::to_device(const at::Tensor& host) const {
  return options_.device.is_cuda()
      ? host.to(options_.device, /*non_blocking=*/true)
      : host;
}

void TokenLoader::set_sequences(
    Batch& batch,
    const at::Tensor& positions,
    const std::vector<std::int32_t>& lengths) const {
  // Where each sequence starts in the rows read one after another (flash
  // attention's cu_seqlens), and the longest.
  const at::Tensor starts = host_buffer(
      {static_cast<std::int64_t>(lengths.size()) + 1},
      options_.device.is_cuda(),
      at::kInt);
  auto* s = starts.data_ptr<std::int32_t>();
  s[0] = 0;
  for (std::size_t k = 0; k < lengths.size(); ++k) {
    s[k + 1] = s[k] + lengths[k];
  }
  batch.positions = to_device(positions);
  batch.sequence_starts = to_device(starts);
  batch.longest_sequence = *std::max_element(lengths.begin(), lengths.end());
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
