#pragma once
// The loader that keeps the GPU fed:
//   decode threads -> each builds a whole batch straight into a buffer from a
//   reused pool (pinned host memory when the batch goes to a GPU) -> a bounded
//   set of ready batches (prefetch) -> delivered in order: on a GPU, copied
//   as uint8 with non_blocking on a separate CUDA stream that the compute
//   stream waits on, then normalized there; on the CPU, the threads have
//   already written each sample normalized, in the batch's dtype and layout.
// The order is a function of (seed, epoch); with several ranks each rank reads
// its share of every global batch. The position (epoch, batch) can be saved and
// restored for an exact resume.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "hotloop/core/named.h"
#include "hotloop/data/dataset.h"
#include "hotloop/data/image_limit.h"
#include "hotloop/data/tokens/packing.h"

namespace hotloop::data {

enum class BadSamplePolicy { Skip, Fail };
enum class Augment { Default, None };
// Resident: decode the whole data set once onto the device and build batches
// there (see resident.h). Auto picks it on a GPU for fixed-shape data sets up
// to 1 GiB whose augmentation can run there.
enum class Resident { Auto, On, Off };
inline constexpr Named<BadSamplePolicy> kBadSampleNames[] = {
    {BadSamplePolicy::Skip, "skip"},
    {BadSamplePolicy::Fail, "fail"}};
inline constexpr Named<Augment> kAugmentNames[] = {
    {Augment::Default, "default"},
    {Augment::None, "none"}};
inline constexpr Named<Resident> kResidentNames[] = {
    {Resident::Auto, "auto"},
    {Resident::On, "on"},
    {Resident::Off, "off"}};
// How the decode threads decode a JPEG whose transform is a crop and resize
// (data/decode/crop_decode.h). Full: the whole image at full size, then crop
// and resize. Region: only the crop's rectangle (on the iMCU grid), at full
// size: the same pixels as Full. Auto: the crop's rectangle at the smallest DCT
// scale (1/8, 2/8, 4/8 or 8/8) that keeps it at least the output size. PNG
// always decodes in full.
enum class Decode { Auto, Region, Full };
inline constexpr Named<Decode> kDecodeNames[] = {
    {Decode::Auto, "auto"},
    {Decode::Region, "region"},
    {Decode::Full, "full"}};
// Where augmentation runs (LoaderOptions::augment_on_device).
inline constexpr Named<bool> kAugmentDeviceNames[] = {
    {false, "cpu"},
    {true, "gpu"}};

struct LoaderOptions {
  std::size_t batch_size = 64; // per rank
  unsigned int workers = 0; // decode threads; 0: the usable CPUs
  std::size_t prefetch_batches = 4; // ready batches held ahead of the trainer
  bool shuffle = true;
  bool drop_last = true;
  bool train = true; // training augmentation (else the eval transform)
  Augment augment = Augment::Default;
  // Train augmentation on the batch's device, for the whole batch after the
  // copy (--augment-device gpu), instead of per sample in the decode threads.
  // The threads then only decode and stage (photos: the shorter side resized to
  // size/0.875, center-cropped square). Resident mode augments on the device
  // anyway.
  bool augment_on_device = false;
  Decode decode = Decode::Auto; // JPEG photos: what the threads decode
  // --decode-device gpu: folders' and shards' baseline JPEGs decoded by
  // nvJPEG on the batch's (CUDA) device, their crops resized there
  // (data/gpu_decode.h); other files stay with the threads.
  bool decode_on_device = false;
  std::uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  std::int64_t size =
      0; // output height and width; 0: the data set's native size, else 224
  int channels = 0; // 0: the data set's
  BadSamplePolicy on_bad_sample = BadSamplePolicy::Skip;
  // Skipped samples are warned about on stderr, each once (the Python
  // package turns this off: its stats() names them).
  bool warn_bad_samples = true;
  Resident resident = Resident::Auto;
  c10::Device device = c10::Device(c10::kCPU);
  std::vector<float> mean; // per channel; empty: Fashion-MNIST's for 1 channel,
                           // ImageNet's for 3
  std::vector<float> std;
  // false: image batches stay uint8 (B, C, H, W), as decoded and augmented,
  // for a caller that normalizes itself (not with resident mode or
  // augment_on_device, whose device work produces floats).
  bool normalize = true;
  // Normalized images' element type (at::kFloat or at::kBFloat16) and
  // layout (NCHW, or channels-last) as delivered. On the CPU the decode
  // threads write each sample so into the batch (data/normalize.h); on a GPU
  // the uint8 batch crosses and is converted there.
  at::ScalarType dtype = at::kFloat;
  bool channels_last = false;
  // Token data (data/token_data.h): tokens per sample (the model's context;
  // each sample reads one more for the targets), and at most this many
  // samples per epoch, evenly spaced (evaluation; 0: all).
  std::int64_t context = 0;
  std::size_t max_samples = 0;
  // Data made of examples (instruction data): how they become rows.
  Packing packing = Packing::BestFit;
  // Other token data: "off", or documents cut at an end-of-text token
  // ("eos": the data's; or an id) within each window (data/tokens/packing.h).
  std::string document_mask = "off";
  // Instruction data's chat template: auto, folder, chatml, llama3 or plain
  // (data/tokens/instructions.h). Read when the data is opened.
  std::string chat_template = "auto";
  // Folders and shards: images whose header claims more pixels are bad
  // samples, refused before they are allocated (data/image_limit.h). Read
  // when the data is opened.
  std::int64_t max_image_pixels = kDefaultMaxImagePixels;
};

struct Batch {
  // Images: (B, C, H, W) normalized, in LoaderOptions::dtype and layout, and
  // (B,) int64 labels.
  // Tokens: (B, T) int64 inputs and (B, T) int64 targets (the next tokens).
  // On the loader's device.
  at::Tensor images;
  at::Tensor labels;
  std::size_t epoch = 0;
  std::size_t index = 0; // batch index within the epoch
  std::size_t bad_samples =
      0; // skipped in this batch (B is smaller by as many)
  // The labels trained on (not kNoTarget), counted on the host as the batch
  // was made; -1: every label is one. The step divides its loss by these
  // (train/eager_step.h).
  std::int64_t trained_targets = -1;
  std::int64_t targets() const {
    return trained_targets >= 0 ? trained_targets : labels.numel();
  }
  // Rows packed with several examples (data/tokens/packing.h, best-fit):
  // (B, T) int64 each token's position in its example; (N + 1) int32 where
  // each of the rows' N sequences starts in the B x T tokens, then B x T;
  // the longest sequence. Undefined / 0 otherwise.
  at::Tensor positions = {};
  at::Tensor sequence_starts = {};
  std::int64_t longest_sequence = 0;
};

struct LoaderStats {
  std::size_t batches = 0;
  std::size_t samples = 0;
  std::size_t bad_samples =
      0; // skipped so far (each logged once, with its name)
  // The first kMaxBadSampleNames skipped, each once: what was wrong and where.
  std::vector<std::string> bad_sample_names;
  static constexpr std::size_t kMaxBadSampleNames = 100;
  double wait_seconds =
      0; // time next() spent waiting for a batch (the trainer's "data wait")
  std::size_t buffers_allocated =
      0; // batch buffers in the pool; constant across epochs
  // The decode threads' busy time (summed over threads) and the samples they
  // built in it (batches dropped by a new epoch included): samples per
  // thread-second, the decode rate. 0 for resident and token data.
  double decode_seconds = 0;
  std::size_t decoded_samples = 0;
  // --decode-device gpu: files nvJPEG decoded, and those it refused or failed
  // (then decoded on the CPU).
  std::size_t gpu_decoded = 0;
  std::size_t gpu_fallbacks = 0;
};

// Where a training step takes its batches from: the Loader, or one batch
// over and over (smoke's ladder, tests).
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next batch, or nullopt when there is none (the epoch ended).
  virtual std::optional<Batch> next() = 0;
  // Seconds the latest next() waited for its batch.
  virtual double last_wait_seconds() const = 0;
  // Whether batches come as packed rows (Batch::positions): their
  // sequences differ from batch to batch.
  virtual bool packed_rows() const {
    return false;
  }
};

// A source that reads the data in epochs: what the trainer drives.
class EpochLoader : public BatchSource {
 public:
  // Begins `epoch` at batch `start_batch` (a resumed run passes its saved
  // position).
  virtual void start_epoch(std::size_t epoch, std::size_t start_batch = 0) = 0;
  virtual std::size_t batches_per_epoch() const = 0;
  // Where a checkpoint should record the position: (epoch, next batch index).
  virtual std::pair<std::size_t, std::size_t> position() const = 0;
  virtual LoaderStats stats() const = 0;
  // One line on how examples became rows ("packing: best-fit, ..."), for
  // the run's log; empty where the data has no examples.
  virtual std::string packing_line() const {
    return {};
  }
};

// The loader for `dataset`: a TokenLoader (data/token_loader.h) for token
// data, else a Loader.
std::unique_ptr<EpochLoader> make_loader(
    std::shared_ptr<const Dataset> dataset,
    LoaderOptions options);

class Loader final : public EpochLoader {
 public:
  // Starts the decode threads. Throws UsageError for bad options (batch 0, rank
  // out of range, fewer samples than one batch), EnvError for a CUDA device
  // without CUDA.
  Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options);
  ~Loader(); // stops and joins the threads
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Begins `epoch` at batch `start_batch` (a resumed run passes its saved
  // position).
  void start_epoch(std::size_t epoch, std::size_t start_batch = 0) override;
  // The next batch of the epoch, in order, or nullopt at its end. With
  // on_bad_sample=Fail, throws the DataError of the first bad sample (naming
  // it).
  std::optional<Batch> next() override;

  std::size_t batches_per_epoch() const override;
  std::pair<std::size_t, std::size_t> position() const override;
  LoaderStats stats() const override;
  double last_wait_seconds() const override; // of the latest next()
  bool resident()
      const; // batches come from the resident copy, not the decode threads
  // Why it feeds as it does, e.g. "decode threads: the images differ in
  // size" (the choice and its rules: src/hotloop/data/loader_mode.h).
  const std::string& feed_reason() const;
  const LoaderOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hotloop::data
