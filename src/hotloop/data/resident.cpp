#include "hotloop/data/resident.h"

#include <atomic>
#include <mutex>
#include <thread>

#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/tensor.h>
#include <fmt/format.h>

#include "hotloop/data/device_augment.h"
#include "hotloop/data/transfer.h"
#include "hotloop/errors.h"

namespace hotloop::data {

ResidentBatches::ResidentBatches(
    const Dataset& dataset,
    const LoaderOptions& options,
    const AugmentSpec& augment,
    std::int64_t channels,
    unsigned int threads)
    : options_(options), augment_(augment) {
  const std::size_t n = dataset.size();
  const std::int64_t h = augment.out_h, w = augment.out_w;
  at::Tensor host =
      at::empty({static_cast<std::int64_t>(n), channels, h, w}, at::kByte);
  std::vector<std::int64_t> labels(n, -1);
  std::vector<char> ok(n, 0);
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex mu;
  const auto work = [&] {
    AugmentSpec copy = augment_;
    copy.mode = AugmentSpec::Mode::None; // stored as decoded (resized if
                                         // needed); augmented per batch
    for (std::size_t i = next++; i < n; i = next++) {
      try {
        const Sample s = dataset.get(i);
        if (s.image.dim() != 3 || s.image.size(0) != channels) {
          throw DataError(fmt::format(
              "sample {} of {}: {} channels, expected {}",
              i,
              dataset.describe(),
              s.image.size(0),
              channels));
        }
        augment_into(
            s.image.contiguous(),
            host[static_cast<std::int64_t>(i)].data_ptr<std::uint8_t>(),
            copy,
            0);
        labels[i] = s.label;
        ok[i] = 1;
      } catch (const DataError& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (options_.on_bad_sample == BadSamplePolicy::Fail && !failure) {
          failure = std::current_exception();
        } else {
          fmt::print(
              stderr,
              "hotloop: warning: skipping a bad sample: {}\n",
              e.what());
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned int t = 0; t < std::max(1u, threads); ++t) {
    pool.emplace_back(work);
  }
  for (auto& t : pool) {
    t.join();
  }
  if (failure) {
    std::rethrow_exception(failure);
  }
  std::vector<std::int64_t> keep;
  for (std::size_t i = 0; i < n; ++i) {
    if (ok[i] != 0) {
      keep.push_back(static_cast<std::int64_t>(i));
      dataset_index_.push_back(i);
    }
  }
  bad_ = n - keep.size();
  const at::Tensor keep_t = at::tensor(keep, at::kLong);
  images_ =
      (bad_ > 0 ? host.index_select(0, keep_t) : host).to(options_.device);
  labels_ =
      at::tensor(labels, at::kLong).index_select(0, keep_t).to(options_.device);
  std::tie(scale_, shift_) =
      normalization(options_.mean, options_.std, options_.device);
}

std::size_t ResidentBatches::rows() const {
  return dataset_index_.size();
}

std::size_t ResidentBatches::bytes() const {
  return static_cast<std::size_t>(images_.numel());
}

void ResidentBatches::start_epoch(std::size_t epoch, const Sampler& sampler) {
  epoch_ = epoch;
  std::vector<std::int64_t> rows;
  batch_offsets_.clear();
  for (std::size_t b = 0; b < sampler.batches_per_epoch(); ++b) {
    batch_offsets_.push_back(static_cast<std::int64_t>(rows.size()));
    for (const std::size_t r : sampler.batch(b)) {
      rows.push_back(static_cast<std::int64_t>(r));
    }
  }
  batch_offsets_.push_back(static_cast<std::int64_t>(rows.size()));
  epoch_rows_ = at::tensor(rows, at::kLong).to(options_.device);
  if (augment_.mode == AugmentSpec::Mode::Train && augment_.small_images) {
    std::vector<std::int64_t> params(rows.size() * 3);
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const std::size_t index =
          dataset_index_[static_cast<std::size_t>(rows[k])];
      const SmallImageParams p = small_image_params(
          sample_seed(options_.seed, epoch, index),
          augment_.padding,
          augment_.flip);
      params[3 * k] = p.dy;
      params[3 * k + 1] = p.dx;
      params[3 * k + 2] = p.flip ? 1 : 0;
    }
    epoch_params_ = at::tensor(params, at::kLong)
                        .view({static_cast<std::int64_t>(rows.size()), 3})
                        .to(options_.device);
  }
}

Batch ResidentBatches::batch(std::size_t b, const Sampler& sampler) const {
  const std::int64_t begin = batch_offsets_.at(b);
  const std::int64_t count = batch_offsets_.at(b + 1) - begin;
  const at::Tensor rows = epoch_rows_.narrow(0, begin, count);
  at::Tensor x = images_.index_select(0, rows); // (B, C, H, W) uint8
  if (augment_.mode == AugmentSpec::Mode::Train && augment_.small_images) {
    x = pad_crop_flip(
        x, epoch_params_.narrow(0, begin, count), augment_.padding, {});
  }
  at::Tensor images = x.to(at::kFloat).mul_(scale_).sub_(shift_);
  return Batch{
      images.contiguous(), labels_.index_select(0, rows), epoch_, b, 0};
}

} // namespace hotloop::data
