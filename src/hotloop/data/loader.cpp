#include "hotloop/data/loader.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <ATen/ops/empty.h>
#include <c10/util/StringUtil.h>
#include <fmt/format.h>

#include "hotloop/core/cpus.h"
#include "hotloop/cuda/transfer.h"
#include "hotloop/data/augment.h"
#include "hotloop/data/decode/crop_decode.h"
#include "hotloop/data/device_augment.h"
#include "hotloop/data/gpu_decode.h"
#include "hotloop/data/loader_mode.h"
#include "hotloop/data/normalize.h"
#include "hotloop/data/resident.h"
#include "hotloop/data/sampler.h"
#include "hotloop/data/sources/encoded_images.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

// An epoch without a single batch is a configuration error, not an empty run.
void require_a_batch(
    const Sampler& sampler,
    std::size_t samples,
    const LoaderOptions& o) {
  if (sampler.batches_per_epoch() == 0) {
    throw UsageError(
        fmt::format(
            "{} samples make no full batch of {} x {} rank(s)",
            samples,
            o.batch_size,
            o.world_size),
        "lower --batch, or use more data");
  }
}

// One reusable batch buffer: images (B, C, H, W), uint8 pinned for a GPU or
// on the CPU the normalized batch itself, and int64 labels (B,).
struct Buffer {
  at::Tensor images;
  at::Tensor labels;
  std::function<void()>
      reusable; // wait for the previous copy out of it, if any
};

// A batch built by a worker, waiting to be delivered.
struct Ready {
  std::size_t buffer = 0;
  std::size_t count = 0; // valid samples
  std::vector<std::string> bad; // messages of skipped samples
  std::exception_ptr error; // with BadSamplePolicy::Fail
  std::vector<std::uint64_t>
      seeds; // of the valid samples, for on-device augmentation
  std::vector<GpuJob> gpu; // --decode-device gpu: rows the device decodes
};

} // namespace

struct Loader::Impl {
  std::shared_ptr<const Dataset> dataset;
  LoaderOptions options;
  Sampler sampler;
  std::unique_ptr<cuda::Transfer> transfer;
  cuda::BatchFormat format; // what next() delivers
  // On the CPU: each sample normalized into the batch by its thread.
  std::optional<SampleNormalizer> normalizer;
  AugmentSpec augment; // what the decode threads do
  // --augment-device gpu: the train transform applied to whole batches on the
  // device after the copy (device_augment.h); `augment` then only stages.
  bool augment_on_device = false;
  AugmentSpec device_augment;
  at::Tensor zero_pixel; // (1, C, 1, 1): a black pixel, normalized
  std::int64_t channels = 0;
  // The data set's encoded files, when the threads decode them themselves
  // (crop_decode.h: only what the crop needs); null: Dataset::get().
  const EncodedImages* encoded = nullptr;
  // --decode-device gpu: the JPEGs' decode on the device (gpu_decode.h).
  std::unique_ptr<GpuDecodeStage> gpu_decode;

  mutable std::mutex mu;
  std::condition_variable work_cv; // workers wait for a job and a free buffer
  std::condition_variable ready_cv; // next() waits for its batch
  std::vector<Buffer> buffers;
  std::vector<std::size_t> free_buffers;
  std::map<std::size_t, Ready> ready;
  std::size_t generation =
      0; // bumped by start_epoch: work from an older epoch is dropped
  std::size_t epoch = 0;
  std::size_t next_job = 0;
  std::size_t next_deliver = 0;
  std::size_t end = 0;
  bool stop = false;
  LoaderStats stats;
  double last_wait = 0;
  std::set<std::string> logged_bad;
  std::vector<std::thread> workers;
  std::unique_ptr<ResidentBatches> resident;

  Impl(std::shared_ptr<const Dataset> ds, LoaderOptions o)
      : dataset(std::move(ds)),
        options(std::move(o)),
        sampler(
            dataset->size(),
            SamplerOptions{
                options.batch_size,
                options.world_size,
                options.rank,
                options.shuffle,
                options.drop_last,
                options.seed}) {}

  // Why the loader feeds as it does (loader_mode.h).
  std::string mode_reason;

  void worker_loop();
  void start_resident(unsigned int workers);
  void stage_for_device_augment();
  void allocate_buffers(unsigned int workers);
  at::Tensor new_images_buffer() const;
  std::size_t take_free_buffer();
  // Each skipped sample's message, once: on stderr and in the stats.
  void note_bad(const std::vector<std::string>& messages);
  // Builds a batch into `buffer`; `job_epoch` was read with the job, under the
  // lock. `scratch` holds one sample's bytes on their way to the normalizer.
  void fill(
      std::size_t buffer,
      std::size_t job_epoch,
      const std::vector<std::size_t>& indices,
      std::vector<std::uint8_t>& scratch,
      Ready& out);
};

void Loader::Impl::fill(
    std::size_t buffer,
    std::size_t job_epoch,
    const std::vector<std::size_t>& indices,
    std::vector<std::uint8_t>& scratch,
    Ready& out) {
  Buffer& buf = buffers[buffer];
  const std::size_t slot_bytes =
      static_cast<std::size_t>(channels * augment.out_h * augment.out_w);
  std::uint8_t* images = nullptr;
  if (normalizer) {
    scratch.resize(slot_bytes);
  } else {
    images = buf.images.data_ptr<std::uint8_t>();
  }
  auto* labels = buf.labels.data_ptr<std::int64_t>();
  // Only used with `encoded`, whose channels are the loader's
  // (region_decode): its images, to its limit.
  const SampleTransform transform{
      encoded != nullptr ? encoded->decode_options() : DecodeOptions{},
      augment,
      options.decode};
  const auto check_label = [&](std::size_t index, std::int64_t label) {
    if (label < 0 ||
        static_cast<std::size_t>(label) >= dataset->num_classes()) {
      throw DataError(fmt::format(
          "sample {} of {}: label {} outside 0..{}",
          index,
          dataset->describe(),
          label,
          dataset->num_classes() - 1));
    }
  };
  for (const std::size_t index : indices) {
    try {
      const std::uint64_t seed = sample_seed(options.seed, job_epoch, index);
      std::uint8_t* slot =
          normalizer ? scratch.data() : images + out.count * slot_bytes;
      std::int64_t label = 0;
      if (encoded != nullptr) {
        EncodedSample e = encoded->encoded(index);
        check_label(index, e.label);
        label = e.label;
        const auto row = static_cast<std::int64_t>(out.count);
        if (!gpu_decode || !gpu_decode->take(e, seed, row, out.gpu)) {
          decode_augment_into(e.bytes, e.name, transform, seed, slot);
        }
      } else {
        const Sample s = dataset->get(index);
        if (s.image.dim() != 3 || s.image.size(0) != channels ||
            s.image.scalar_type() != at::kByte) {
          throw DataError(fmt::format(
              "sample {} of {}: image of shape {} and type {}, expected ({}, H, W) uint8",
              index,
              dataset->describe(),
              c10::str(s.image.sizes()),
              c10::toString(s.image.scalar_type()),
              channels));
        }
        check_label(index, s.label);
        augment_into(s.image, slot, augment, seed);
        label = s.label;
      }
      if (normalizer) {
        normalizer->write(
            slot, buf.images, static_cast<std::int64_t>(out.count));
      }
      labels[out.count] = label;
      out.seeds.push_back(seed);
      ++out.count;
    } catch (const DataError& e) {
      if (options.on_bad_sample == BadSamplePolicy::Fail) {
        out.error = std::current_exception();
        return;
      }
      out.bad.emplace_back(e.what());
    }
  }
}

void Loader::Impl::worker_loop() {
  std::vector<std::uint8_t> scratch;
  for (;;) {
    std::size_t b = 0;
    std::size_t gen = 0;
    std::size_t job_epoch = 0;
    std::size_t buffer = 0;
    std::vector<std::size_t> indices;
    {
      std::unique_lock<std::mutex> lock(mu);
      work_cv.wait(lock, [&] {
        return stop ||
            (next_job < end &&
             next_job < next_deliver + options.prefetch_batches &&
             !free_buffers.empty());
      });
      if (stop) {
        return;
      }
      b = next_job++;
      gen = generation;
      job_epoch = epoch;
      buffer = take_free_buffer();
      indices = sampler.batch(b);
    }
    Buffer& buf = buffers[buffer];
    if (buf.reusable) {
      buf.reusable(); // the GPU copy out of this buffer has finished
      buf.reusable = nullptr;
    }
    if (normalizer && buf.images.storage().use_count() > 1) {
      buf.images = new_images_buffer(); // the caller holds the old batch
    }
    Ready r;
    r.buffer = buffer;
    const auto t0 = std::chrono::steady_clock::now();
    fill(buffer, job_epoch, indices, scratch, r);
    const double busy =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    {
      std::lock_guard<std::mutex> lock(mu);
      stats.decode_seconds += busy;
      stats.decoded_samples += indices.size();
      if (gen != generation) {
        free_buffers.push_back(
            buffer); // a new epoch started meanwhile: drop this batch
        work_cv.notify_one();
        continue;
      }
      ready.emplace(b, std::move(r));
    }
    ready_cv.notify_all();
  }
}

namespace {

// What the decode threads do to each image: the output size (the options', or
// the data set's), the mode, and whether the images are small enough for the
// random-crop-with-padding transform.
AugmentSpec augment_spec(
    const LoaderOptions& o,
    const std::optional<ImageShape>& shape) {
  AugmentSpec a;
  a.out_h = o.size > 0 ? o.size : (shape ? shape->height : 224);
  a.out_w = o.size > 0 ? o.size : (shape ? shape->width : 224);
  a.small_images = shape && shape->height <= 64 && shape->width <= 64 &&
      shape->height == a.out_h && shape->width == a.out_w;
  a.mode = o.augment == Augment::None ? AugmentSpec::Mode::None
      : o.train                       ? AugmentSpec::Mode::Train
                                      : AugmentSpec::Mode::Eval;
  return a;
}

LoaderConditions conditions_of(
    const Dataset& dataset,
    const LoaderOptions& o,
    const AugmentSpec& augment,
    std::int64_t channels) {
  const std::optional<ImageShape> shape = dataset.shape();
  const bool same_size =
      shape && shape->height == augment.out_h && shape->width == augment.out_w;
  const auto* encoded = dynamic_cast<const EncodedImages*>(&dataset);
  LoaderConditions c;
  c.cuda_device = o.device.is_cuda();
  c.normalize = o.normalize;
  c.resident = o.resident;
  c.augment_on_device = o.augment_on_device;
  c.train_augment = augment.mode == AugmentSpec::Mode::Train;
  c.device_can_augment = augment.small_images ||
      augment.mode == AugmentSpec::Mode::None ||
      (augment.mode == AugmentSpec::Mode::Eval && same_size);
  c.shape = shape;
  c.decoded_bytes = static_cast<std::uint64_t>(dataset.size()) *
      static_cast<std::uint64_t>(channels * augment.out_h * augment.out_w);
  c.encoded_files =
      encoded != nullptr && encoded->decode_options().channels == channels;
  c.decode = o.decode;
  c.decode_on_device = o.decode_on_device;
  c.fake_gpu_decode = o.decode_on_device && fake_gpu_decode();
  return c;
}

} // namespace

Loader::Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options) {
  if (!dataset) {
    throw UsageError("the loader needs a data set");
  }
  if (options.prefetch_batches == 0) {
    throw UsageError("prefetch must be at least 1 batch");
  }
  impl_ = std::make_unique<Impl>(std::move(dataset), std::move(options));
  Impl& m = *impl_;
  LoaderOptions& o = m.options;
  const std::optional<ImageShape> shape = m.dataset->shape();
  m.channels = o.channels > 0 ? o.channels : (shape ? shape->channels : 3);
  m.augment = augment_spec(o, shape);
  m.format = batch_format(o, m.channels);
  const LoaderMode mode =
      choose_loader_mode(conditions_of(*m.dataset, o, m.augment, m.channels));
  m.mode_reason = mode.reason;
  cuda::BatchFormat crossing = m.format;
  crossing.normalize = crossing.normalize && !mode.gpu_decode;
  m.transfer = o.device.is_cuda() ? cuda::make_cuda_transfer(o.device, crossing)
                                  : cuda::make_cpu_transfer();
  const unsigned int workers = o.workers > 0 ? o.workers : usable_cpus();
  if (mode.resident) {
    m.start_resident(workers);
  } else {
    if (mode.device_augment) {
      m.stage_for_device_augment();
    }
    if (mode.region_decode || mode.gpu_decode) {
      m.encoded = dynamic_cast<const EncodedImages*>(m.dataset.get());
    }
    if (mode.gpu_decode) {
      m.gpu_decode = std::make_unique<GpuDecodeStage>(
          open_gpu_decoder(o.device, static_cast<int>(m.channels)),
          SampleTransform{m.encoded->decode_options(), m.augment, o.decode},
          m.format,
          o.batch_size);
      m.mode_reason += fmt::format(" with {}", m.gpu_decode->description());
    }
    if (!o.device.is_cuda() && o.normalize && !mode.gpu_decode) {
      cuda::BatchFormat written = m.format;
      if (mode.device_augment) { // augmented as float32 NCHW, then formatted
        written.dtype = at::kFloat;
        written.channels_last = false;
      }
      m.normalizer.emplace(written);
    }
    m.allocate_buffers(workers);
  }
  start_epoch(0);
  require_a_batch(
      m.sampler, m.resident ? m.resident->rows() : m.dataset->size(), o);
  for (unsigned int w = 0; !m.resident && w < workers; ++w) {
    m.workers.emplace_back([&m] { m.worker_loop(); });
  }
}

void Loader::Impl::start_resident(unsigned int workers) {
  resident = std::make_unique<ResidentBatches>(
      *dataset, options, augment, channels, workers);
  sampler = Sampler(resident->rows(), sampler.options());
  stats.bad_samples = resident->bad_samples();
}

// The threads stage each image at a fixed size (small images as they are;
// photos with the shorter side resized to out/0.875 and center-cropped
// square); the device makes the random choices.
void Loader::Impl::stage_for_device_augment() {
  augment_on_device = true;
  device_augment = augment;
  augment.mode = AugmentSpec::Mode::Eval;
  if (!augment.small_images) {
    augment.out_h = augment.out_w =
        staging_size(std::max(device_augment.out_h, device_augment.out_w));
    augment.eval_crop = 1.0;
  }
  const auto [scale, shift] =
      cuda::normalization(options.mean, options.std, options.device);
  zero_pixel = -shift;
}

// Each worker fills one buffer, `prefetch` wait ready, one is being
// delivered: images at the threads' output size, uint8 pinned for a GPU or
// the normalized batch on the CPU.
void Loader::Impl::allocate_buffers(unsigned int workers) {
  const std::size_t pool = options.prefetch_batches + workers + 1;
  const auto label_opts = at::TensorOptions().dtype(at::kLong).pinned_memory(
      transfer->wants_pinned_buffers());
  const auto b = static_cast<std::int64_t>(options.batch_size);
  for (std::size_t i = 0; i < pool; ++i) {
    buffers.push_back({new_images_buffer(), at::empty({b}, label_opts), {}});
    free_buffers.push_back(i);
  }
  stats.buffers_allocated = pool;
}

// The free buffer returned longest ago whose batch nobody holds any more,
// else the one returned longest ago (which then gets new memory). A CPU
// batch is its buffer's memory, and the buffer just returned is the batch
// the caller is most likely still using. Under the lock.
std::size_t Loader::Impl::take_free_buffer() {
  auto pick = free_buffers.begin();
  if (normalizer) {
    const auto unheld = std::find_if(
        free_buffers.begin(), free_buffers.end(), [&](std::size_t b) {
          return buffers[b].images.storage().use_count() == 1;
        });
    pick = unheld != free_buffers.end() ? unheld : pick;
  }
  const std::size_t buffer = *pick;
  free_buffers.erase(pick);
  return buffer;
}

void Loader::Impl::note_bad(const std::vector<std::string>& messages) {
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& message : messages) {
    if (logged_bad.insert(message).second) {
      if (options.warn_bad_samples) {
        fmt::print(
            stderr, "hotloop: warning: skipping a bad sample: {}\n", message);
      }
      if (stats.bad_sample_names.size() < LoaderStats::kMaxBadSampleNames) {
        stats.bad_sample_names.push_back(message);
      }
    }
  }
}

at::Tensor Loader::Impl::new_images_buffer() const {
  const auto b = static_cast<std::int64_t>(options.batch_size);
  if (normalizer) {
    return normalizer->empty_batch(b, channels, augment.out_h, augment.out_w);
  }
  return at::empty(
      {b, channels, augment.out_h, augment.out_w},
      at::TensorOptions().dtype(at::kByte).pinned_memory(
          transfer->wants_pinned_buffers()));
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->work_cv.notify_all();
  impl_->ready_cv.notify_all();
  for (auto& t : impl_->workers) {
    t.join();
  }
  for (auto& buf : impl_->buffers) {
    if (buf.reusable) {
      try {
        buf.reusable(); // no copy may still read a buffer we free
      } catch (...) {
        // A CUDA error already reported elsewhere (a poisoned context): a
        // destructor cannot throw it again.
      }
    }
  }
}

void Loader::start_epoch(std::size_t epoch, std::size_t start_batch) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    ++m.generation;
    for (auto& [index, r] : m.ready) {
      m.free_buffers.push_back(r.buffer);
    }
    m.ready.clear();
    m.epoch = epoch;
    m.sampler.set_epoch(epoch);
    m.end = m.sampler.batches_per_epoch();
    m.next_job = m.next_deliver = std::min(start_batch, m.end);
    if (m.resident) {
      m.resident->start_epoch(epoch, m.sampler);
    }
  }
  m.work_cv.notify_all();
}

std::optional<Batch> Loader::next() {
  Impl& m = *impl_;
  if (m.resident) {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.next_deliver >= m.end) {
      return std::nullopt;
    }
    Batch b = m.resident->batch(m.next_deliver++, m.sampler);
    b.images = cuda::in_format(b.images, m.format);
    m.last_wait = 0;
    ++m.stats.batches;
    m.stats.samples += static_cast<std::size_t>(b.labels.size(0));
    return b;
  }
  Ready r;
  std::size_t index = 0;
  {
    std::unique_lock<std::mutex> lock(m.mu);
    if (m.next_deliver >= m.end) {
      return std::nullopt;
    }
    index = m.next_deliver;
    const auto t0 = std::chrono::steady_clock::now();
    m.ready_cv.wait(lock, [&] { return m.stop || m.ready.count(index) > 0; });
    m.last_wait =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    m.stats.wait_seconds += m.last_wait;
    if (m.stop) {
      return std::nullopt;
    }
    r = std::move(m.ready.at(index));
    m.ready.erase(index);
    ++m.next_deliver;
  }
  m.work_cv.notify_all(); // a prefetch slot opened
  const auto give_back = [&](std::function<void()> reusable) {
    {
      std::lock_guard<std::mutex> lock(m.mu);
      m.buffers[r.buffer].reusable = std::move(reusable);
      m.free_buffers.push_back(r.buffer);
    }
    m.work_cv.notify_all();
  };
  if (r.error) {
    give_back(nullptr);
    std::rethrow_exception(r.error);
  }
  m.note_bad(r.bad);
  const auto count = static_cast<std::int64_t>(r.count);
  cuda::Delivered d = m.transfer->deliver(
      m.buffers[r.buffer].images.narrow(0, 0, count),
      m.buffers[r.buffer].labels.narrow(0, 0, count));
  give_back(std::move(d.buffer_reusable));
  if (m.gpu_decode) {
    std::vector<std::string> bad;
    m.gpu_decode->finish(
        r.gpu,
        d.images,
        d.labels,
        bad,
        m.options.on_bad_sample == BadSamplePolicy::Fail);
    m.note_bad(bad);
    r.count -= bad.size();
    r.bad.insert(r.bad.end(), bad.begin(), bad.end());
  }
  if (r.count == 0 && !r.bad.empty()) {
    // Nothing to train on: a whole batch of bad samples is broken data, not
    // a few bad files, and an empty batch has no loss.
    throw DataError(
        fmt::format(
            "every sample of batch {} of epoch {} is bad (all {}; the first: {})",
            index,
            m.epoch,
            r.bad.size(),
            r.bad.front()),
        "check the data set's files there (--on-bad-sample skip skips a few bad samples, not whole batches)");
  }
  if (m.augment_on_device) {
    d.images = augment_batch(d.images, r.seeds, m.device_augment, m.zero_pixel);
  }
  if (m.format.normalize) { // as it is where the threads normalized
    d.images = cuda::in_format(d.images, m.format);
  }
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.gpu_decode) {
    const GpuDecodeCounts c = m.gpu_decode->counts();
    m.stats.gpu_decoded = c.gpu;
    m.stats.gpu_fallbacks = c.fallback;
  }
  ++m.stats.batches;
  m.stats.samples += r.count;
  m.stats.bad_samples += r.bad.size();
  return Batch{
      std::move(d.images), std::move(d.labels), m.epoch, index, r.bad.size()};
}

std::size_t Loader::batches_per_epoch() const {
  return impl_->sampler.batches_per_epoch();
}

std::pair<std::size_t, std::size_t> Loader::position() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return {impl_->epoch, impl_->next_deliver};
}

LoaderStats Loader::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

const std::string& Loader::feed_reason() const {
  return impl_->mode_reason;
}

bool Loader::resident() const {
  return impl_->resident != nullptr;
}

double Loader::last_wait_seconds() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->last_wait;
}

const LoaderOptions& Loader::options() const {
  return impl_->options;
}

} // namespace hotloop::data
