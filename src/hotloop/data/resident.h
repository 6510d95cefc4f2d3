#pragma once
// Resident mode: a data set that fits is decoded once into one (N, C, H, W)
// uint8 tensor on the training device (47 MB for Fashion-MNIST). Each epoch
// uploads its order and every sample's augmentation choices once; each batch is
// then an index_select, the pad-crop-flip as gathers, and the normalization,
// all on the device, with no per-step host work. The augmentation choices are
// those of the threaded path (small_image_params), so both give the same
// batches for the same seed.

#include <memory>

#include "hotloop/data/augment.h"
#include "hotloop/data/dataset.h"
#include "hotloop/data/loader.h"
#include "hotloop/data/sampler.h"

namespace hotloop::data {

class ResidentBatches {
 public:
  // Decodes every sample with `threads` threads (bad ones skipped and counted,
  // or DataError with Fail).
  ResidentBatches(
      const Dataset& dataset,
      const LoaderOptions& options,
      const AugmentSpec& augment,
      std::int64_t channels,
      unsigned int threads);

  void start_epoch(std::size_t epoch, const Sampler& sampler);
  // Batch `b` of the epoch (after start_epoch), on the device.
  Batch batch(std::size_t b, const Sampler& sampler) const;

  std::size_t rows()
      const; // samples held (the data set's size less the bad ones)
  std::size_t bad_samples() const {
    return bad_;
  }
  std::size_t bytes() const;

 private:
  LoaderOptions options_;
  AugmentSpec augment_;
  at::Tensor images_; // (M, C, H, W) uint8 on the device
  at::Tensor labels_; // (M,) int64 on the device
  std::vector<std::size_t> dataset_index_; // row -> index in the data set
  at::Tensor scale_, shift_; // normalization, (1, C, 1, 1)
  std::size_t epoch_ = 0;
  at::Tensor epoch_rows_; // this rank's rows for the epoch, batch after batch,
                          // on the device
  at::Tensor epoch_params_; // (M, 3) int64 per row: dy, dx, flip
  std::vector<std::int64_t>
      batch_offsets_; // start of each batch in epoch_rows_
  // On the CPU the same, in host vectors: batch() then fuses the gather, the
  // pad-crop-flip and the normalization into one pass per sample.
  std::vector<std::int64_t> host_rows_;
  std::vector<std::int64_t> host_params_; // 3 per row: dy, dx, flip
  std::vector<float> host_scale_, host_shift_;
  std::size_t bad_ = 0;

  Batch cpu_batch(std::int64_t begin, std::int64_t count, std::size_t b) const;
};

} // namespace hotloop::data
