// --decode-device gpu on a machine without one (data/gpu_decode.h): which
// files go to the GPU and how they are batched (gpu_decode_plan.h), and the
// whole path through the libjpeg stand-in for nvJPEG (HOTLOOP_FAKE_GPU_DECODE):
// the rows it writes against the decode threads', the CPU fallback for what
// nvJPEG refuses or fails, a bad file skipped by name, and the loader's rules.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/zeros.h>

#include "hotloop/data/augment.h"
#include "hotloop/data/decode/crop_decode.h"
#include "hotloop/data/decode/jpeg_region.h"
#include "hotloop/data/gpu_decode.h"
#include "hotloop/data/gpu_decode_plan.h"
#include "hotloop/data/loader.h"
#include "hotloop/data/loader_mode.h"
#include "hotloop/data/sources/image_folder.h"
#include "hotloop/errors.h"
#include "support/image_files.h"
#include "support/scoped_env.h"
#include "support/temp_dir.h"

namespace hotloop::data {
namespace {

std::vector<std::uint8_t> photo(
    int h,
    int w,
    std::uint32_t seed,
    const test::JpegWriteOptions& o = {}) {
  return test::jpeg_file(test::textured_image(h, w, 3, seed), h, w, 3, o);
}

JpegInfo info_of(const std::vector<std::uint8_t>& bytes) {
  return read_jpeg_info(bytes, "test.jpg", std::int64_t{1} << 30);
}

SampleTransform train_transform(std::int64_t size) {
  SampleTransform t;
  t.spec.mode = AugmentSpec::Mode::Train;
  t.spec.out_h = t.spec.out_w = size;
  t.mode = Decode::Region;
  return t;
}

cuda::BatchFormat uint8_format() {
  cuda::BatchFormat f;
  f.normalize = false;
  return f;
}

TEST(GpuDecodePlan, BaselineJpegsGoToTheGpuAndTheRestStayOnTheCpu) {
  test::JpegWriteOptions progressive;
  progressive.progressive = true;
  test::JpegWriteOptions full_chroma;
  full_chroma.subsample_420 = false;
  EXPECT_TRUE(route_jpeg(info_of(photo(64, 96, 1))).gpu);
  EXPECT_TRUE(route_jpeg(info_of(photo(64, 96, 1, full_chroma))).gpu);
  const auto gray =
      test::jpeg_file(test::textured_image(64, 96, 1, 2), 64, 96, 1);
  EXPECT_TRUE(route_jpeg(info_of(gray)).gpu);
  const GpuRoute p = route_jpeg(info_of(photo(64, 96, 1, progressive)));
  EXPECT_FALSE(p.gpu);
  EXPECT_EQ(p.why_cpu, "progressive JPEG");
  test::JpegWriteOptions cmyk;
  cmyk.cmyk = true;
  const auto c =
      test::jpeg_file(test::textured_image(64, 96, 4, 3), 64, 96, 4, cmyk);
  EXPECT_EQ(route_jpeg(info_of(c)).why_cpu, "CMYK or YCCK JPEG");
  // What a header can say that nvJPEG's batched hardware decoder refuses.
  JpegInfo i = info_of(photo(64, 96, 1));
  EXPECT_EQ(i.subsampling_x, 2);
  EXPECT_EQ(i.subsampling_y, 2);
  i.subsampling_x = 4;
  i.subsampling_y = 1;
  EXPECT_EQ(route_jpeg(i).why_cpu, "JPEG with 4x1 chroma subsampling");
  i = info_of(photo(64, 96, 1));
  i.arithmetic = true;
  EXPECT_EQ(route_jpeg(i).why_cpu, "arithmetic-coded JPEG");
  i = info_of(photo(64, 96, 1));
  i.precision = 12;
  EXPECT_EQ(route_jpeg(i).why_cpu, "12-bit JPEG");
}

TEST(GpuDecodePlan, BatchesAreConsecutiveAndAtMostTheMaximum) {
  using Batches = std::vector<std::pair<std::size_t, std::size_t>>;
  EXPECT_EQ(gpu_batches(10, 4), (Batches{{0, 4}, {4, 8}, {8, 10}}));
  EXPECT_EQ(gpu_batches(8, 8), (Batches{{0, 8}}));
  EXPECT_EQ(gpu_batches(0, 8), Batches{});
  EXPECT_EQ(gpu_batches(2, 0), (Batches{{0, 1}, {1, 2}}));
}

TEST(GpuDecodePlan, TheRegionHoldsTheCropAndItsFilterSupportInsideTheImage) {
  const JpegInfo info = info_of(photo(300, 400, 4));
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    const CropBox box = photo_crop(seed, 300, 400, true);
    const PixelRect r = gpu_region(info, box, {64, 64});
    EXPECT_GE(r.x, 0);
    EXPECT_GE(r.y, 0);
    EXPECT_LE(r.x + r.w, 400);
    EXPECT_LE(r.y + r.h, 300);
    EXPECT_LE(r.x, box.x0);
    EXPECT_LE(r.y, box.y0);
    EXPECT_GE(r.x + r.w, std::min(400.0, box.x0 + box.w));
    EXPECT_GE(r.y + r.h, std::min(300.0, box.y0 + box.h));
  }
}

// One batch through the stage: rows 0..n-1 from `files`, uint8.
struct StageRun {
  at::Tensor images;
  at::Tensor labels;
  std::vector<std::string> bad;
  std::size_t taken = 0;
  GpuDecodeCounts counts;
};

StageRun run_stage(
    GpuDecodeStage& stage,
    const std::vector<std::vector<std::uint8_t>>& files,
    std::int64_t size,
    std::uint64_t seed,
    bool fail_on_bad = false) {
  StageRun r;
  const auto n = static_cast<std::int64_t>(files.size());
  r.images = at::zeros({n, 3, size, size}, at::kByte);
  r.labels = at::arange(n);
  std::vector<GpuJob> jobs;
  for (std::int64_t i = 0; i < n; ++i) {
    EncodedSample s{files[i], "file" + std::to_string(i) + ".jpg", i};
    r.taken += stage.take(s, seed + i, i, jobs) ? 1 : 0;
  }
  stage.finish(jobs, r.images, r.labels, r.bad, fail_on_bad);
  r.counts = stage.counts();
  return r;
}

// The threads' row for the same file and seed.
at::Tensor cpu_row(
    const std::vector<std::uint8_t>& file,
    const SampleTransform& t,
    std::uint64_t seed) {
  at::Tensor row = at::empty({3, t.spec.out_h, t.spec.out_w}, at::kByte);
  decode_augment_into(file, "cpu.jpg", t, seed, row.data_ptr<std::uint8_t>());
  return row;
}

// The GPU's rows against the threads' for the same crops and decoded pixels:
// its box is rounded to whole pixels and its resize is ATen's antialiased
// bilinear in float, so the rows differ by a few levels at most and by a
// small fraction of one on average (measured: 0.02-0.06 mean, 4 max), with
// either backend's output (regions or whole images).
TEST(GpuDecodeStage, TheRowsItWritesAreTheThreadsWithinAFewLevels) {
  std::vector<std::vector<std::uint8_t>> files;
  for (int i = 0; i < 6; ++i) {
    files.push_back(photo(240 + 16 * i, 320, 10 + i));
  }
  const SampleTransform t = train_transform(64);
  for (const bool regions : {true, false}) {
    SCOPED_TRACE(regions ? "hardware backend" : "hybrid backend");
    GpuDecodeStage stage(make_fake_nvjpeg(3, regions), t, uint8_format(), 4);
    const StageRun r = run_stage(stage, files, 64, 100);
    EXPECT_EQ(r.taken, files.size());
    EXPECT_EQ(r.counts.gpu, files.size());
    EXPECT_EQ(r.counts.fallback, 0U);
    for (std::size_t i = 0; i < files.size(); ++i) {
      const at::Tensor diff =
          (r.images[static_cast<std::int64_t>(i)].to(at::kFloat) -
           cpu_row(files[i], t, 100 + i).to(at::kFloat))
              .abs();
      EXPECT_LE(diff.mean().item<double>(), 0.25) << "file " << i;
      EXPECT_LE(diff.max().item<double>(), 8) << "file " << i;
    }
  }
}

TEST(GpuDecodeStage, ProgressiveFilesAndPngsStayWithTheThreads) {
  test::JpegWriteOptions progressive;
  progressive.progressive = true;
  GpuDecodeStage stage(
      make_fake_nvjpeg(3), train_transform(32), uint8_format(), 8);
  std::vector<GpuJob> jobs;
  EncodedSample p{photo(64, 64, 1, progressive), "p.jpg", 0};
  EncodedSample png{
      test::png_bytes(test::textured_image(40, 40, 3, 2), 40, 40, 3),
      "x.png",
      0};
  EncodedSample baseline{photo(64, 64, 3), "b.jpg", 0};
  EXPECT_FALSE(stage.take(p, 1, 0, jobs));
  EXPECT_FALSE(stage.take(png, 1, 1, jobs));
  EXPECT_FALSE(p.bytes.empty()); // still the thread's to decode
  EXPECT_TRUE(stage.take(baseline, 1, 2, jobs));
  ASSERT_EQ(jobs.size(), 1U);
  EXPECT_EQ(jobs[0].slot, 2);
  EXPECT_EQ(jobs[0].sample.name, "b.jpg");
  EXPECT_EQ(stage.counts().cpu, 2U);
}

// What nvJPEG refuses at run time is the threads' decode, byte for byte.
TEST(GpuDecodeStage, FilesTheDecoderRefusesAreDecodedOnTheCpu) {
  std::vector<std::vector<std::uint8_t>> files;
  for (int i = 0; i < 4; ++i) {
    files.push_back(photo(200, 300 + 8 * i, 20 + i));
  }
  const SampleTransform t = train_transform(48);
  GpuDecodeStage stage(
      make_fake_nvjpeg(
          3, true, [](const cuda::GpuJpeg& g) { return g.width == 308; }),
      t,
      uint8_format(),
      8);
  const StageRun r = run_stage(stage, files, 48, 7);
  EXPECT_EQ(r.counts.gpu, 3U);
  EXPECT_EQ(r.counts.fallback, 1U);
  EXPECT_TRUE(r.images[1].equal(cpu_row(files[1], t, 8)));
}

// A file whose header is sound but whose scan is not: nvJPEG fails its batch,
// the CPU decodes the batch's files again, and the bad one is skipped by name
// (its row and label dropped), or fails the run.
TEST(GpuDecodeStage, AFileBadInItsScanIsSkippedByNameAndTheRestKept) {
  std::vector<std::vector<std::uint8_t>> files;
  for (int i = 0; i < 4; ++i) {
    files.push_back(photo(120, 160, 30 + i));
  }
  auto& bad = files[2];
  for (std::size_t k = bad.size() / 2; k < bad.size() / 2 + 64; ++k) {
    bad[k] = 0xFF; // markers inside the scan
  }
  bad[bad.size() / 2 + 64] = 0xD0;
  const SampleTransform t = train_transform(32);
  GpuDecodeStage stage(make_fake_nvjpeg(3), t, uint8_format(), 8);
  const StageRun r = run_stage(stage, files, 32, 1);
  ASSERT_EQ(r.bad.size(), 1U);
  EXPECT_NE(r.bad[0].find("file2.jpg"), std::string::npos) << r.bad[0];
  ASSERT_EQ(r.images.size(0), 3);
  EXPECT_EQ(r.labels.size(0), 3);
  EXPECT_EQ(r.labels[2].item<std::int64_t>(), 3);
  EXPECT_TRUE(r.images[2].equal(cpu_row(files[3], t, 4)));
  GpuDecodeStage failing(make_fake_nvjpeg(3), t, uint8_format(), 8);
  EXPECT_THROW(run_stage(failing, files, 32, 1, true), DataError);
}

TEST(GpuDecodeMode, TheLoaderRefusesWhatCannotRunAndNeverGoesResident) {
  LoaderConditions c;
  c.cuda_device = true;
  c.decode_on_device = true;
  c.encoded_files = true;
  c.shape = ImageShape{3, 32, 32};
  c.device_can_augment = true;
  const LoaderMode m = choose_loader_mode(c);
  EXPECT_TRUE(m.gpu_decode);
  EXPECT_FALSE(m.resident);
  EXPECT_NE(m.reason.find("--decode-device gpu"), std::string::npos);
  auto bad = [&](auto change) {
    LoaderConditions b = c;
    change(b);
    EXPECT_THROW(choose_loader_mode(b), UsageError);
  };
  bad([](LoaderConditions& b) { b.cuda_device = false; });
  bad([](LoaderConditions& b) { b.encoded_files = false; });
  bad([](LoaderConditions& b) { b.resident = Resident::On; });
  bad([](LoaderConditions& b) { b.augment_on_device = true; });
  LoaderConditions fake = c;
  fake.cuda_device = false;
  fake.fake_gpu_decode = true;
  EXPECT_TRUE(choose_loader_mode(fake).gpu_decode);
}

// The loader end to end with the stand-in: the same labels as the threads'
// batch, images within the stage's tolerance (normalized), every JPEG through
// the GPU path but the progressive one; without the seam, the CPU refuses it.
TEST(GpuDecodeLoader, TheBatchMatchesTheThreadsAndCountsWhatWentWhere) {
  test::TempDir dir;
  test::JpegWriteOptions progressive;
  progressive.progressive = true;
  for (int i = 0; i < 8; ++i) {
    test::write_bytes(
        dir.path() / "train" / (i % 2 ? "b" : "a") /
            (std::to_string(i) + ".jpg"),
        i == 5 ? photo(200, 260, 50 + i, progressive)
               : photo(200, 260, 50 + i));
  }
  const auto folder =
      std::make_shared<ImageFolder>(dir.path().string(), Split::Train);
  const auto loader_options = [](bool gpu) {
    LoaderOptions o;
    o.batch_size = 8;
    o.workers = 2;
    o.shuffle = false;
    o.seed = 3;
    o.size = 64;
    o.decode = Decode::Region;
    o.decode_on_device = gpu;
    return o;
  };
  EXPECT_THROW(Loader(folder, loader_options(true)), UsageError);
  const test::ScopedEnv fake("HOTLOOP_FAKE_GPU_DECODE", "1");
  Loader threads(folder, loader_options(false));
  Loader gpu(folder, loader_options(true));
  const Batch a = *threads.next();
  const Batch b = *gpu.next();
  EXPECT_TRUE(a.labels.equal(b.labels));
  EXPECT_EQ(b.images.scalar_type(), at::kFloat);
  const double level = 1.0 / 255 / 0.224; // a byte's level, normalized
  EXPECT_LE((a.images - b.images).abs().mean().item<double>(), 0.25 * level);
  EXPECT_LE((a.images - b.images).abs().max().item<double>(), 8 * level);
  EXPECT_EQ(gpu.stats().gpu_decoded, 7U);
  EXPECT_EQ(gpu.stats().gpu_fallbacks, 0U);
  EXPECT_NE(gpu.feed_reason().find("stand-in"), std::string::npos);
}

} // namespace
} // namespace hotloop::data
