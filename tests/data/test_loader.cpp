#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/zeros.h>
#include <torch/cuda.h>

#include "hotloop/cuda/transfer.h"
#include "hotloop/data/loader.h"
#include "hotloop/data/sources/synthetic.h"
#include "hotloop/errors.h"
#include "support/index_dataset.h"

namespace hotloop::data {

using test::IndexDataset;

namespace {

LoaderOptions plain(std::size_t batch) {
  LoaderOptions o;
  o.batch_size = batch;
  o.workers = 2;
  o.prefetch_batches = 2;
  o.augment = Augment::None;
  o.shuffle = false;
  o.drop_last = false;
  o.resident = Resident::Off; // the threaded path; resident tests ask for it
  return o;
}

// Labels of every batch of one epoch, in order.
std::vector<std::int64_t> epoch_labels(Loader& loader) {
  std::vector<std::int64_t> out;
  while (auto b = loader.next()) {
    const auto l = b->labels.contiguous();
    out.insert(
        out.end(),
        l.data_ptr<std::int64_t>(),
        l.data_ptr<std::int64_t>() + l.numel());
  }
  return out;
}

} // namespace

TEST(Loader, DeliversBatchesInOrderNormalizedWithTheirLabels) {
  auto ds = std::make_shared<IndexDataset>(25, ImageShape{1, 4, 4});
  Loader loader(ds, plain(10));
  EXPECT_EQ(loader.batches_per_epoch(), 3u);
  for (std::size_t b = 0; b < 3; ++b) {
    auto batch = loader.next();
    ASSERT_TRUE(batch.has_value());
    EXPECT_EQ(batch->index, b);
    const std::int64_t n = b < 2 ? 10 : 5;
    ASSERT_EQ(batch->images.sizes(), (std::vector<std::int64_t>{n, 1, 4, 4}));
    EXPECT_EQ(batch->images.scalar_type(), at::kFloat);
    for (std::int64_t k = 0; k < n; ++k) {
      const std::int64_t i = static_cast<std::int64_t>(b) * 10 + k;
      EXPECT_EQ(batch->labels[k].item<std::int64_t>(), i);
      // Fashion-MNIST's normalization for one channel; float32 arithmetic:
      // within 1e-5.
      const float expected =
          (static_cast<float>(i) / 255.0f - 0.2860f) / 0.3530f;
      EXPECT_NEAR(batch->images[k][0][1][2].item<float>(), expected, 1e-5);
    }
  }
  EXPECT_FALSE(loader.next().has_value());
  EXPECT_EQ(loader.stats().samples, 25u);
}

TEST(Loader, ShuffledEpochsAreReproducibleAndCoverEverySampleOnce) {
  auto ds = std::make_shared<IndexDataset>(97, ImageShape{1, 2, 2});
  LoaderOptions o = plain(8);
  o.shuffle = true;
  o.seed = 5;
  Loader a(ds, o);
  Loader b(ds, o);
  const auto a0 = epoch_labels(a);
  EXPECT_EQ(a0, epoch_labels(b));
  EXPECT_EQ(std::set<std::int64_t>(a0.begin(), a0.end()).size(), 97u);
  EXPECT_EQ(a0.size(), 97u);
  a.start_epoch(1);
  const auto a1 = epoch_labels(a);
  EXPECT_NE(a0, a1);
  EXPECT_EQ(std::set<std::int64_t>(a1.begin(), a1.end()).size(), 97u);
}

TEST(Loader, TwoRanksTogetherReadWhatOneRankReads) {
  auto ds = std::make_shared<IndexDataset>(64, ImageShape{1, 2, 2});
  LoaderOptions o = plain(4);
  o.shuffle = true;
  o.drop_last = true;
  o.world_size = 2;
  std::multiset<std::int64_t> both;
  for (int rank = 0; rank < 2; ++rank) {
    o.rank = rank;
    Loader l(ds, o);
    for (auto v : epoch_labels(l)) {
      both.insert(v);
    }
  }
  EXPECT_EQ(both.size(), 64u);
  EXPECT_EQ(std::set<std::int64_t>(both.begin(), both.end()).size(), 64u);
}

TEST(Loader, ResumeFromASavedPositionGivesTheRemainingBatches) {
  auto ds = std::make_shared<IndexDataset>(60, ImageShape{1, 2, 2});
  LoaderOptions o = plain(6);
  o.shuffle = true;
  o.augment = Augment::Default;
  Loader full(ds, o);
  full.start_epoch(3);
  std::vector<at::Tensor> expected;
  while (auto b = full.next()) {
    expected.push_back(b->images);
  }
  Loader first(ds, o);
  first.start_epoch(3);
  first.next();
  first.next();
  const auto [epoch, batch] = first.position();
  EXPECT_EQ(epoch, 3u);
  EXPECT_EQ(batch, 2u);
  Loader resumed(ds, o);
  resumed.start_epoch(epoch, batch);
  for (std::size_t i = batch; i < expected.size(); ++i) {
    auto b = resumed.next();
    ASSERT_TRUE(b.has_value());
    EXPECT_TRUE(b->images.equal(expected[i]))
        << "batch " << i << " (augmentation included) differs";
  }
  EXPECT_FALSE(resumed.next().has_value());
}

TEST(Loader, ThePoolDoesNotGrowAcrossEpochs) {
  auto ds = std::make_shared<IndexDataset>(40, ImageShape{1, 2, 2});
  Loader loader(ds, plain(4));
  const std::size_t pool = loader.stats().buffers_allocated;
  EXPECT_EQ(pool, 2u + 2u + 1u); // prefetch + workers + the one being delivered
  for (std::size_t e = 0; e < 5; ++e) {
    loader.start_epoch(e);
    EXPECT_EQ(epoch_labels(loader).size(), 40u);
  }
  loader.start_epoch(5);
  loader.next(); // restart mid-epoch: batches in flight are dropped, not leaked
  loader.start_epoch(6);
  EXPECT_EQ(epoch_labels(loader).size(), 40u);
  EXPECT_EQ(loader.stats().buffers_allocated, pool);
}

TEST(Loader, BadSamplesAreSkippedAndCountedOrStopTheRun) {
  auto ds = std::make_shared<IndexDataset>(
      20, ImageShape{1, 2, 2}, std::set<std::size_t>{3, 17});
  Loader skip(ds, plain(10));
  const auto labels = epoch_labels(skip);
  EXPECT_EQ(labels.size(), 18u);
  EXPECT_EQ(std::count(labels.begin(), labels.end(), 3), 0);
  EXPECT_EQ(skip.stats().bad_samples, 2u);
  LoaderOptions o = plain(10);
  o.on_bad_sample = BadSamplePolicy::Fail;
  Loader fail(ds, o);
  try {
    fail.next();
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("/data/item3.jpg"), std::string::npos)
        << e.what();
  }
}

namespace {

// IndexDataset whose sample 5 has a label past the class count and sample 6
// three channels where the data set has one.
class MislabelledDataset final : public Dataset {
 public:
  MislabelledDataset() : inner_(20, ImageShape{1, 2, 2}) {}
  std::size_t size() const override {
    return inner_.size();
  }
  Sample get(std::size_t i) const override {
    Sample s = inner_.get(i);
    if (i == 5) {
      s.label = 99;
    }
    if (i == 6) {
      s.image = at::zeros({3, 2, 2}, at::kByte);
    }
    return s;
  }
  const std::vector<std::string>& class_names() const override {
    return inner_.class_names();
  }
  std::optional<ImageShape> shape() const override {
    return inner_.shape();
  }
  std::string describe() const override {
    return "mislabelled set";
  }

 private:
  IndexDataset inner_;
};

} // namespace

TEST(Loader, ALabelOutOfRangeOrAWrongChannelCountIsABadSample) {
  auto ds = std::make_shared<MislabelledDataset>();
  Loader skip(ds, plain(10));
  const auto labels = epoch_labels(skip);
  EXPECT_EQ(labels.size(), 18u);
  EXPECT_EQ(std::count(labels.begin(), labels.end(), 99), 0);
  EXPECT_EQ(std::count(labels.begin(), labels.end(), 6), 0);
  EXPECT_EQ(skip.stats().bad_samples, 2u);
  LoaderOptions o = plain(10);
  o.on_bad_sample = BadSamplePolicy::Fail;
  Loader fail(ds, o);
  try {
    fail.next();
    FAIL() << "a label of 99 in 20 classes was delivered";
  } catch (const DataError& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "sample 5 of mislabelled set: label 99 outside 0..19"),
        std::string::npos)
        << e.what();
  }
  auto wrong_shape = std::make_shared<MislabelledDataset>();
  LoaderOptions one = plain(1);
  one.on_bad_sample = BadSamplePolicy::Fail;
  Loader shape(wrong_shape, one);
  shape.start_epoch(0, 6); // sample 6 alone
  try {
    shape.next();
    FAIL() << "a 3-channel image in a 1-channel set was delivered";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(
        what.find("sample 6 of mislabelled set: image of shape [3, 2, 2]"),
        std::string::npos)
        << what;
  }
}

TEST(Loader, ABatchWhoseEverySampleIsBadStopsEvenWhenSkipping) {
  std::set<std::size_t> bad;
  for (std::size_t i = 10; i < 20; ++i) {
    bad.insert(i);
  }
  auto ds = std::make_shared<IndexDataset>(20, ImageShape{1, 2, 2}, bad);
  Loader loader(ds, plain(10));
  ASSERT_TRUE(loader.next().has_value()); // samples 0..9
  try {
    loader.next();
    FAIL() << "an empty batch was delivered";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(
        what.find(
            "every sample of batch 1 of epoch 0 is bad (all 10; the first: /data/item1"),
        std::string::npos)
        << what;
    EXPECT_NE(e.hint().find("--on-bad-sample"), std::string::npos);
  }
}

TEST(Loader, PhotosAreResizedToTheRequestedSize) {
  SyntheticOptions so;
  so.count = 8;
  so.shape = {3, 60, 90};
  auto ds = std::make_shared<Synthetic>(so);
  LoaderOptions o = plain(4);
  o.augment = Augment::Default;
  o.size = 32;
  Loader loader(ds, o);
  auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->images.sizes(), (std::vector<std::int64_t>{4, 3, 32, 32}));
}

TEST(Loader, BadOptionsAreUsageErrors) {
  auto ds = std::make_shared<IndexDataset>(10, ImageShape{1, 2, 2});
  LoaderOptions o = plain(0);
  EXPECT_THROW(Loader(ds, o), UsageError);
  o = plain(16);
  o.drop_last = true;
  EXPECT_THROW(Loader(ds, o), UsageError); // 10 samples, no full batch of 16
  o = plain(2);
  o.mean = {0.5f, 0.5f};
  o.std = {0.5f, 0.5f};
  EXPECT_THROW(Loader(ds, o), UsageError); // 2 means for 1 channel
  if (!torch::cuda::is_available()) {
    o = plain(2);
    o.device = c10::Device(c10::kCUDA, 0);
    EXPECT_THROW(Loader(ds, o), EnvError);
  }
}

TEST(Loader, ResidentBatchesEqualThreadedBatchesAugmentationIncluded) {
  SyntheticOptions so;
  so.count = 70;
  so.shape = {1, 12, 12};
  auto ds = std::make_shared<Synthetic>(so);
  LoaderOptions o = plain(16);
  o.shuffle = true;
  o.augment = Augment::Default; // pad 4, random crop, flip
  o.seed = 9;
  Loader threaded(ds, o);
  o.resident = Resident::On;
  Loader resident(ds, o);
  EXPECT_FALSE(threaded.resident());
  EXPECT_TRUE(resident.resident());
  for (std::size_t epoch = 0; epoch < 2; ++epoch) {
    threaded.start_epoch(epoch);
    resident.start_epoch(epoch);
    std::size_t batches = 0;
    while (auto t = threaded.next()) {
      auto r = resident.next();
      ASSERT_TRUE(r.has_value());
      EXPECT_TRUE(r->labels.equal(t->labels));
      EXPECT_TRUE(r->images.equal(t->images))
          << "epoch " << epoch << " batch " << t->index;
      ++batches;
    }
    EXPECT_FALSE(resident.next().has_value());
    EXPECT_EQ(batches, 5u);
  }
}

TEST(Loader, ResidentModeSkipsBadSamplesAtLoadOrFails) {
  auto ds = std::make_shared<IndexDataset>(
      20, ImageShape{1, 2, 2}, std::set<std::size_t>{3, 17});
  LoaderOptions o = plain(10);
  o.resident = Resident::On;
  Loader skip(ds, o);
  EXPECT_EQ(skip.stats().bad_samples, 2u);
  const auto labels = epoch_labels(skip);
  EXPECT_EQ(labels.size(), 18u);
  EXPECT_EQ(std::count(labels.begin(), labels.end(), 17), 0);
  o.on_bad_sample = BadSamplePolicy::Fail;
  EXPECT_THROW(Loader(ds, o), DataError);
}

TEST(Loader, ResidentModeIsRefusedWhereTheDeviceCannotAugment) {
  SyntheticOptions so;
  so.count = 4;
  so.shape = {3, 100, 100};
  auto ds = std::make_shared<Synthetic>(so);
  LoaderOptions o = plain(2);
  o.augment = Augment::Default;
  o.size = 32; // resized crops: CPU only
  o.resident = Resident::On;
  EXPECT_THROW(Loader(ds, o), UsageError);
  o.resident = Resident::Auto;
  EXPECT_FALSE(Loader(ds, o).resident());
  SyntheticOptions small;
  small.count = 8;
  small.shape = {1, 8, 8};
  EXPECT_FALSE(Loader(std::make_shared<Synthetic>(small), o).resident())
      << "Auto picks resident on a GPU only";
}

TEST(Loader, TheThreadsNormalizeToTheUint8BatchsValuesBitForBitInEveryFormat) {
  // The reference: the loader's uint8 batch normalized as the GPU does it
  // (cuda::normalization: x * scale - shift, two float32 operations), then
  // .to(dtype) and the layout. The decode threads write each sample so
  // themselves: equal bit for bit, in the layout asked for. 30 x 30: a
  // plane of 900 values, which the vector kernels' 16 at a time leave a
  // scalar tail of.
  SyntheticOptions so;
  so.count = 24;
  so.shape = {3, 40, 56};
  so.seed = 5;
  auto ds = std::make_shared<Synthetic>(so);
  LoaderOptions o = plain(8);
  o.augment = Augment::Default;
  o.size = 30;
  o.shuffle = true;
  o.normalize = false;
  std::vector<at::Tensor> bytes;
  {
    Loader loader(ds, o);
    while (auto b = loader.next()) {
      bytes.push_back(b->images);
    }
  }
  ASSERT_EQ(bytes.size(), 3u);
  const auto [scale, shift] = cuda::normalization(
      {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, c10::kCPU);
  o.normalize = true;
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const bool channels_last : {false, true}) {
      o.dtype = dtype;
      o.channels_last = channels_last;
      Loader loader(ds, o);
      for (std::size_t i = 0; i < bytes.size(); ++i) {
        auto b = loader.next();
        ASSERT_TRUE(b.has_value());
        const at::Tensor expected =
            bytes[i].to(at::kFloat).mul(scale).sub(shift).to(dtype);
        EXPECT_EQ(b->images.scalar_type(), dtype);
        EXPECT_TRUE(b->images.is_contiguous(
            channels_last ? at::MemoryFormat::ChannelsLast
                          : at::MemoryFormat::Contiguous))
            << "channels_last " << channels_last;
        EXPECT_TRUE(b->images.equal(expected))
            << c10::toString(dtype) << " channels_last " << channels_last
            << " batch " << i;
      }
    }
  }
  o.dtype = at::kHalf;
  EXPECT_THROW(Loader(ds, o), UsageError);
  o.dtype = at::kFloat;
  for (const float bad : {0.0f, -0.2f, std::nanf("")}) {
    o.mean = {0.5f, 0.5f, 0.5f};
    o.std = {0.25f, bad, 0.25f};
    EXPECT_THROW(Loader(ds, o), UsageError) << "std " << bad;
  }
}

TEST(Loader, ABatchTheCallerHoldsIsNeverRefilled) {
  // The CPU batch is its buffer's memory, and the pool (here 5 buffers)
  // cycles through 20 batches: a buffer whose batch is still held gets new
  // memory instead of being written over.
  auto ds = std::make_shared<IndexDataset>(200, ImageShape{1, 4, 4});
  Loader loader(ds, plain(10));
  std::vector<at::Tensor> held, copies;
  while (auto b = loader.next()) {
    held.push_back(b->images);
    copies.push_back(b->images.clone());
  }
  ASSERT_EQ(held.size(), 20u);
  for (std::size_t i = 0; i < held.size(); ++i) {
    EXPECT_TRUE(held[i].equal(copies[i])) << "batch " << i;
  }
}

TEST(Loader, CudaBatchesMatchCpuBatches) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device";
  }
  auto ds = std::make_shared<IndexDataset>(50, ImageShape{3, 8, 8});
  LoaderOptions o = plain(16);
  o.shuffle = true;
  o.augment = Augment::Default;
  Loader cpu(ds, o);
  o.device = c10::Device(c10::kCUDA, 0);
  Loader gpu(ds, o);
  o.resident = Resident::On;
  Loader gpu_resident(ds, o);
  while (auto c = cpu.next()) {
    auto r = gpu_resident.next();
    ASSERT_TRUE(r.has_value());
    EXPECT_TRUE(r->images.is_cuda());
    EXPECT_TRUE(at::allclose(r->images.cpu(), c->images, 1e-6, 1e-6));
    auto g = gpu.next();
    ASSERT_TRUE(g.has_value());
    EXPECT_TRUE(g->images.is_cuda());
    EXPECT_TRUE(g->labels.is_cuda());
    EXPECT_TRUE(at::allclose(g->images.cpu(), c->images, 1e-6, 1e-6));
    EXPECT_TRUE(g->labels.cpu().equal(c->labels));
  }
}

} // namespace hotloop::data

namespace hotloop::data {

namespace {

std::vector<at::Tensor> epoch_images(
    const std::shared_ptr<const Dataset>& ds,
    LoaderOptions o,
    std::size_t epoch) {
  Loader loader(ds, o);
  loader.start_epoch(epoch);
  std::vector<at::Tensor> out;
  while (auto b = loader.next()) {
    out.push_back(b->images);
  }
  return out;
}

std::shared_ptr<const Dataset> noise(std::size_t n, ImageShape shape) {
  SyntheticOptions s;
  s.count = n;
  s.shape = shape;
  s.seed = 11;
  return std::make_shared<Synthetic>(s);
}

} // namespace

TEST(DeviceAugment, SmallImagesGetTheSamePadCropFlipAsTheDecodeThreads) {
  const auto ds = noise(48, {1, 28, 28});
  LoaderOptions o = plain(16);
  o.augment = Augment::Default;
  o.shuffle = true;
  o.seed = 3;
  const auto threads = epoch_images(ds, o, 1);
  o.augment_on_device = true;
  const auto device = epoch_images(ds, o, 1);
  ASSERT_EQ(threads.size(), device.size());
  for (std::size_t b = 0; b < threads.size(); ++b) {
    // Pad, crop and flip only move values: exactly equal.
    EXPECT_TRUE(at::equal(threads[b], device[b])) << "batch " << b;
  }
}

TEST(DeviceAugment, PhotosAreCroppedFromTheStagedImageDeterministically) {
  const auto ds = noise(24, {3, 96, 80});
  LoaderOptions o = plain(8);
  o.augment = Augment::Default;
  o.size = 48;
  o.augment_on_device = true;
  const auto first = epoch_images(ds, o, 0);
  const auto again = epoch_images(ds, o, 0);
  const auto next_epoch = epoch_images(ds, o, 1);
  ASSERT_EQ(first.size(), 3u);
  for (std::size_t b = 0; b < first.size(); ++b) {
    EXPECT_EQ(first[b].sizes(), (std::vector<std::int64_t>{8, 3, 48, 48}));
    EXPECT_TRUE(at::equal(first[b], again[b]))
        << "same seed and epoch, same crops";
    EXPECT_FALSE(at::equal(first[b], next_epoch[b]))
        << "another epoch, other crops";
    // Bilinear samples stay within the normalized range of uint8 pixels
    // (ImageNet's mean and std: (0 - 0.485) / 0.229 .. (1 - 0.406) / 0.225).
    EXPECT_GE(first[b].min().item<float>(), -2.2f);
    EXPECT_LE(first[b].max().item<float>(), 2.7f);
  }
}

} // namespace hotloop::data
