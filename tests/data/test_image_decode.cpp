#include <gtest/gtest.h>

#include "hotloop/data/decode/image_decode.h"
#include "hotloop/data/decode/image_tensor.h"
#include "hotloop/data/decode/jpeg_region.h"
#include "hotloop/errors.h"
#include "support/image_files.h"

namespace hotloop::data {

using test::flat_image;
using test::jpeg_bytes;
using test::png_bytes;

namespace {

std::string decode_error(
    const std::vector<std::uint8_t>& bytes,
    DecodeOptions o = {}) {
  try {
    decode_image(bytes, "/photos/train/cat/1.jpg", o);
    return {};
  } catch (const DataError& e) {
    return e.what();
  }
}

} // namespace

TEST(ImageDecode, SniffsByMagicBytes) {
  EXPECT_EQ(
      sniff_image_format(jpeg_bytes(flat_image(4, 4, {1, 2, 3}), 4, 4, 3)),
      ImageFormat::Jpeg);
  EXPECT_EQ(
      sniff_image_format(png_bytes(flat_image(4, 4, {1, 2, 3}), 4, 4, 3)),
      ImageFormat::Png);
  EXPECT_EQ(
      sniff_image_format(std::vector<std::uint8_t>{'G', 'I', 'F', '8'}),
      ImageFormat::Unknown);
}

TEST(ImageDecode, JpegRgbDecodesToChwWithinJpegError) {
  const auto bytes = jpeg_bytes(flat_image(16, 24, {200, 100, 50}), 16, 24, 3);
  const DecodedImage img = decode_image(bytes, "x.jpg");
  EXPECT_EQ(img.height, 16);
  EXPECT_EQ(img.width, 24);
  const at::Tensor t = to_chw_tensor(img);
  EXPECT_EQ(t.sizes(), (std::vector<std::int64_t>{3, 16, 24}));
  // Quality 95 on a flat color: every pixel within 3 levels (JPEG is lossy).
  EXPECT_NEAR(t[0].to(at::kFloat).mean().item<float>(), 200, 3);
  EXPECT_NEAR(t[1].to(at::kFloat).mean().item<float>(), 100, 3);
  EXPECT_NEAR(t[2].to(at::kFloat).mean().item<float>(), 50, 3);
}

TEST(ImageDecode, GrayJpegBecomesThreeEqualChannelsAndRgbCanBecomeGray) {
  const auto gray = jpeg_bytes(flat_image(8, 8, {90}), 8, 8, 1);
  const at::Tensor t = to_chw_tensor(decode_image(gray, "g.jpg"));
  EXPECT_EQ(t.size(0), 3);
  EXPECT_TRUE(t[0].equal(t[1]) && t[1].equal(t[2]));
  DecodeOptions one;
  one.channels = 1;
  EXPECT_EQ(
      decode_image(
          jpeg_bytes(flat_image(8, 8, {10, 200, 30}), 8, 8, 3), "c.jpg", one)
          .channels,
      1);
}

TEST(ImageDecode, PngIsLosslessAndDropsAlphaKeepingColors) {
  std::vector<std::uint8_t> rgba =
      flat_image(5, 7, {10, 20, 30, 0}); // fully transparent
  rgba[4 * 3 + 3] = 255;
  const DecodedImage img = decode_image(png_bytes(rgba, 5, 7, 4), "a.png");
  ASSERT_EQ(img.channels, 3);
  EXPECT_EQ(img.pixels[0], 10);
  EXPECT_EQ(img.pixels[1], 20);
  EXPECT_EQ(img.pixels[2], 30); // not composited onto a background
  const DecodedImage gray =
      decode_image(png_bytes(flat_image(3, 3, {77}), 3, 3, 1), "g.png");
  EXPECT_EQ(gray.pixels, std::vector<std::uint8_t>(27, 77));
  const DecodedImage ga =
      decode_image(png_bytes(flat_image(3, 3, {66, 128}), 3, 3, 2), "ga.png");
  EXPECT_EQ(ga.pixels, std::vector<std::uint8_t>(27, 66));
}

TEST(ImageDecode, BadFilesAreDataErrorsNamingTheFile) {
  EXPECT_NE(
      decode_error({}).find("/photos/train/cat/1.jpg: empty file"),
      std::string::npos);
  EXPECT_NE(
      decode_error({'G', 'I', 'F', '8', '9', 'a'}).find("unsupported format"),
      std::string::npos);
  std::vector<std::uint8_t> noise(64 * 64 * 3);
  for (std::size_t i = 0; i < noise.size(); ++i) {
    noise[i] = static_cast<std::uint8_t>(i * 2654435761u >> 13);
  }
  auto jpeg = jpeg_bytes(noise, 64, 64, 3);
  jpeg.resize(jpeg.size() * 3 / 4); // cut inside the compressed scan
  EXPECT_NE(decode_error(jpeg).find("corrupt JPEG"), std::string::npos)
      << decode_error(jpeg);
  auto cut_header = jpeg_bytes(noise, 64, 64, 3);
  cut_header.resize(100); // cut before the frame header
  EXPECT_NE(
      decode_error(cut_header).find("not a valid JPEG"), std::string::npos)
      << decode_error(cut_header);
  std::vector<std::uint8_t> header_only = {0xFF, 0xD8, 0xFF, 0xE0, 0, 0};
  EXPECT_NE(decode_error(header_only).find("JPEG"), std::string::npos);
  auto png = png_bytes(flat_image(64, 64, {1, 2, 3}), 64, 64, 3);
  png.resize(png.size() / 2);
  EXPECT_NE(decode_error(png).find("PNG"), std::string::npos)
      << decode_error(png);
}

// A damaged JPEG does not break the next, good one decoded on the same
// thread (TurboJPEG's handle is made anew after a failure): every kind of
// damage, each followed by a good file.
TEST(ImageDecode, AGoodJpegAfterADamagedOneOnTheSameThreadDecodes) {
  const auto px = flat_image(16, 16, {100, 120, 90});
  const auto good = jpeg_bytes(px, 16, 16, 3);
  auto cut_header = good;
  cut_header.resize(good.size() * 2 / 3);
  auto cut_scan = jpeg_bytes(flat_image(64, 64, {7, 200, 9}), 64, 64, 3);
  cut_scan.resize(cut_scan.size() * 3 / 4);
  std::vector<std::uint8_t> header_only = {0xFF, 0xD8, 0xFF, 0xE0, 0, 0};
  for (const auto* bad : {&cut_header, &cut_scan, &header_only}) {
    EXPECT_FALSE(decode_error(*bad).empty());
    const DecodedImage img = decode_image(good, "good.jpg", {});
    EXPECT_EQ(img.width, 16);
    EXPECT_EQ(img.height, 16);
  }
}

// A JPEG may leave out its Huffman tables (Motion-JPEG frames do; the
// decoder then uses the standard ones). A decoder that keeps a previous
// file's tables would use those instead: every file decodes as on a fresh
// decoder, whole (TurboJPEG) and as a region (libjpeg), whatever the same
// thread decoded before.
TEST(ImageDecode, AFileWithoutTablesNeverUsesThePreviousFilesTables) {
  const auto px = test::textured_image(48, 64, 3, 2);
  // The standard tables, then every DHT segment cut out.
  const auto standard = test::jpeg_file(px, 48, 64, 3);
  std::vector<std::uint8_t> tableless(standard.begin(), standard.begin() + 2);
  for (std::size_t i = 2; i + 3 < standard.size();) {
    const std::size_t length =
        static_cast<std::size_t>(standard[i + 2]) << 8 | standard[i + 3];
    const bool scan = standard[i + 1] == 0xDA;
    if (standard[i + 1] != 0xC4 || scan) {
      tableless.insert(
          tableless.end(),
          standard.begin() + static_cast<long>(i),
          scan ? standard.end()
               : standard.begin() + static_cast<long>(i + 2 + length));
    }
    if (scan) {
      break;
    }
    i += 2 + length;
  }
  ASSERT_LT(tableless.size(), standard.size());
  const DecodedImage fresh = decode_image(tableless, "frame.jpg", {});
  EXPECT_EQ(fresh.pixels, decode_image(standard, "standard.jpg", {}).pixels);
  // Tables fitted to another image, decoded first on this thread.
  test::JpegWriteOptions fitted;
  fitted.optimize_coding = true;
  const auto other =
      test::jpeg_file(test::textured_image(48, 64, 3, 9), 48, 64, 3, fitted);
  decode_image(other, "other.jpg", {});
  EXPECT_EQ(decode_image(tableless, "frame.jpg", {}).pixels, fresh.pixels);
  std::vector<std::uint8_t> buffer;
  const auto region = [&](const std::vector<std::uint8_t>& bytes) {
    const JpegRegion r = decode_jpeg_region(
        bytes,
        "r.jpg",
        [](const JpegInfo&) {
          return JpegRegionRequest{8, {}, 3};
        },
        buffer,
        std::int64_t{1} << 20);
    return std::vector<std::uint8_t>(
        r.pixels, r.pixels + r.row_bytes * static_cast<std::size_t>(r.rect.h));
  };
  region(other);
  EXPECT_EQ(region(tableless), fresh.pixels);
}

TEST(ImageDecode, OversizedImagesAreRefusedBeforeAllocating) {
  DecodeOptions small;
  small.max_pixels = 100;
  EXPECT_NE(
      decode_error(jpeg_bytes(flat_image(16, 16, {1, 2, 3}), 16, 16, 3), small)
          .find("more than the 100"),
      std::string::npos);
  EXPECT_NE(
      decode_error(png_bytes(flat_image(16, 16, {1, 2, 3}), 16, 16, 3), small)
          .find("more than the 100"),
      std::string::npos);
}

} // namespace hotloop::data
