#include "hotloop/data/resident.h"

#include <atomic>
#include <mutex>
#include <thread>

#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/tensor.h>
#include <fmt/format.h>

#include "hotloop/cuda/transfer.h"
#include "hotloop/data/device_augment.h"
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
      cuda::normalization(options_.mean, options_.std, options_.device);
  std::tie(host_scale_, host_shift_) =
      cuda::normalization_factors(options_.mean, options_.std);
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
  const bool cpu = !options_.device.is_cuda();
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
    if (cpu) {
      host_params_ = std::move(params);
    }
  } else {
    host_params_.clear();
  }
  if (cpu) {
    host_rows_ = std::move(rows);
  }
}

Batch ResidentBatches::cpu_batch(
    std::int64_t begin,
    std::int64_t count,
    std::size_t b) const {
  const std::int64_t c = images_.size(1), h = images_.size(2),
                     w = images_.size(3);
  at::Tensor images = at::empty({count, c, h, w}, at::kFloat);
  at::Tensor labels = at::empty({count}, at::kLong);
  const std::uint8_t* src = images_.data_ptr<std::uint8_t>();
  const std::int64_t* all_labels = labels_.data_ptr<std::int64_t>();
  float* out = images.data_ptr<float>();
  std::int64_t* label_out = labels.data_ptr<std::int64_t>();
  const bool augment = !host_params_.empty();
  // Per sample, straight from the resident bytes into normalized floats: the
  // same pixels as index_select + pad_crop_flip (zero padding) and the same
  // two rounded float operations as the normalization on a device.
  at::parallel_for(0, count, 16, [&](std::int64_t k0, std::int64_t k1) {
    for (std::int64_t k = k0; k < k1; ++k) {
      const std::int64_t row = host_rows_[static_cast<std::size_t>(begin + k)];
      label_out[k] = all_labels[row];
      std::int64_t dy = 0, dx = 0;
      bool flip = false;
      if (augment) {
        const std::size_t p = static_cast<std::size_t>(3 * (begin + k));
        dy = host_params_[p];
        dx = host_params_[p + 1];
        flip = host_params_[p + 2] != 0;
      }
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const std::uint8_t* plane = src + (row * c + ch) * h * w;
        float* o = out + (k * c + ch) * h * w;
        const float sc = host_scale_[static_cast<std::size_t>(ch)];
        const float sh = host_shift_[static_cast<std::size_t>(ch)];
        for (std::int64_t y = 0; y < h; ++y) {
          const std::int64_t sy = y + dy;
          const bool row_in = sy >= 0 && sy < h;
          for (std::int64_t x = 0; x < w; ++x) {
            const std::int64_t sx = (flip ? w - 1 - x : x) + dx;
            const float v = row_in && sx >= 0 && sx < w
                ? static_cast<float>(plane[sy * w + sx])
                : 0.0f;
            const float scaled = v * sc;
            o[y * w + x] = scaled - sh;
          }
        }
      }
    }
  });
  return Batch{images, labels, epoch_, b, 0};
}

Batch ResidentBatches::batch(std::size_t b, const Sampler& sampler) const {
  const std::int64_t begin = batch_offsets_.at(b);
  const std::int64_t count = batch_offsets_.at(b + 1) - begin;
  if (!options_.device.is_cuda()) {
    return cpu_batch(begin, count, b);
  }
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
