#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <ATen/TensorOperators.h>
#include <ATen/ops/from_blob.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/data/augment.h"
#include "hotloop/data/decode/image_decode.h"
#include "hotloop/data/sources/pack.h"
#include "hotloop/data/sources/tar.h"
#include "hotloop/data/sources/webdataset.h"
#include "hotloop/errors.h"
#include "support/cli_process.h"
#include "support/image_files.h"
#include "support/temp_dir.h"

namespace hotloop::data {

using test::flat_image;
using test::TempDir;

namespace {

std::vector<std::uint8_t> text(const std::string& s) {
  return {s.begin(), s.end()};
}

std::vector<std::uint8_t> jpeg(std::uint8_t v) {
  return test::jpeg_bytes(flat_image(8, 8, {v, v, v}), 8, 8, 3);
}

std::string open_error(const std::string& spec) {
  try {
    WebDataset ds(spec, Split::Train);
    return {};
  } catch (const DataError& e) {
    return e.what();
  }
}

} // namespace

TEST(WebDataset, SplitsMemberNamesAsWebdatasetDoes) {
  EXPECT_EQ(
      split_member_name("x12.jpg"),
      std::make_pair(std::string("x12"), std::string("jpg")));
  EXPECT_EQ(
      split_member_name("a.b/x12.seg.png"),
      std::make_pair(std::string("a.b/x12"), std::string("seg.png")));
  EXPECT_EQ(
      split_member_name("noext"),
      std::make_pair(std::string("noext"), std::string("")));
}

TEST(WebDataset, GroupsMembersByKeyAcrossShardsAndReadsLabels) {
  TempDir dir;
  {
    TarWriter a((dir.path() / "train-000000.tar").string());
    a.add("k0.jpg", jpeg(10));
    a.add("k0.cls", text("1\n"));
    a.add("k0.json", text("{}")); // other members are ignored
    a.add("k1.cls", text("0"));
    a.add("k1.png", test::png_bytes(flat_image(4, 5, {1, 2, 3}), 4, 5, 3));
  }
  {
    TarWriter b((dir.path() / "train-000001.tar").string());
    b.add("k2.jpeg", jpeg(200));
    b.add("k2.cls", text("2"));
  }
  const WebDataset ds(dir.path().string(), Split::Train);
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds.shards().size(), 2u);
  EXPECT_EQ(ds.get(0).label, 1);
  EXPECT_EQ(ds.get(1).label, 0);
  EXPECT_EQ(ds.get(1).image.sizes(), (std::vector<std::int64_t>{3, 4, 5}));
  EXPECT_EQ(ds.get(2).label, 2);
  EXPECT_EQ(
      ds.class_names(),
      (std::vector<std::string>{"class0", "class1", "class2"}));
  EXPECT_NE(ds.sample_name(2).find("train-000001.tar:k2"), std::string::npos);
  // A glob picks shards too.
  EXPECT_EQ(
      WebDataset((dir.path() / "train-*1.tar").string(), Split::Train).size(),
      1u);
}

TEST(WebDataset, SamplesWithoutImageOrLabelOrWithABadLabelAreErrors) {
  TempDir dir;
  const auto shard =
      [&](const std::string& name,
          const std::vector<std::pair<std::string, std::string>>& members) {
        const auto folder = dir.path() / name;
        std::filesystem::create_directories(folder);
        TarWriter w((folder / "train-000000.tar").string());
        for (const auto& [member, value] : members) {
          w.add(member, member.ends_with(".jpg") ? jpeg(5) : text(value));
        }
        w.close();
        return folder.string();
      };
  EXPECT_NE(
      open_error(shard("nolabel", {{"a.jpg", ""}}))
          .find("sample 'a' has no .cls"),
      std::string::npos);
  EXPECT_NE(
      open_error(shard("noimage", {{"a.cls", "1"}}))
          .find("sample 'a' has no .jpg"),
      std::string::npos);
  EXPECT_NE(
      open_error(shard("badlabel", {{"a.jpg", ""}, {"a.cls", "cat"}}))
          .find(".cls is 'cat'"),
      std::string::npos);
  // A label past any data set is refused before a name is made for every
  // class below it (with no index.json, "class0" .. "classN").
  EXPECT_NE(
      open_error(shard("hugelabel", {{"a.jpg", ""}, {"a.cls", "2000000"}}))
          .find("class 2000000 is past the 1048576 classes"),
      std::string::npos);
  EXPECT_NE(
      open_error(
          shard("longlabel", {{"a.jpg", ""}, {"a.cls", std::string(40, '1')}}))
          .find(".cls holds more than 32 bytes"),
      std::string::npos);
  EXPECT_NE(
      open_error((dir.path() / "none").string()).find("no shards match"),
      std::string::npos);
}

TEST(WebDataset, ClassNamesComeFromIndexJson) {
  TempDir dir;
  {
    TarWriter w((dir.path() / "train-000000.tar").string());
    w.add("a.jpg", jpeg(1));
    w.add("a.cls", text("1"));
  }
  std::ofstream(dir.path() / "index.json")
      << R"({"classes": ["bags", "shoes"]})";
  EXPECT_EQ(
      WebDataset(dir.path().string(), Split::Train).class_names(),
      (std::vector<std::string>{"bags", "shoes"}));
  std::ofstream(dir.path() / "index.json") << R"({"classes": ["only"]})";
  EXPECT_NE(
      open_error(dir.path().string()).find("label 1 is out of range"),
      std::string::npos);
  std::ofstream(dir.path() / "index.json")
      << R"({"classes": ["bags", "shoes"], "max_side": -3})";
  EXPECT_NE(
      open_error(dir.path().string()).find("max_side -3 is not a side"),
      std::string::npos);
}

TEST(Pack, ShuffledOrderIsADeterministicPermutation) {
  const auto a = shuffled_order(1000, 42);
  EXPECT_EQ(a, shuffled_order(1000, 42));
  EXPECT_NE(a, shuffled_order(1000, 43));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    ASSERT_EQ(sorted[i], i);
  }
}

TEST(Pack, FoldersBecomeShardsThatReadBackWithTheSameLabelsAndVerify) {
  TempDir dir;
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 10; ++i) {
      test::write_bytes(
          dir.path() / fmt::format("photos/train/c{}/{}.jpg", c, i),
          jpeg(static_cast<std::uint8_t>(c * 80)));
    }
  }
  test::write_bytes(dir.path() / "photos/val/c1/v.jpg", jpeg(80));
  PackOptions o;
  o.from = "folder:" + (dir.path() / "photos").string();
  o.out = (dir.path() / "shards").string();
  o.shard_bytes = 4096; // forces several shards
  o.verify = true;
  o.progress = false;
  const PackResult r = pack(o);
  ASSERT_EQ(r.splits.size(), 2u);
  EXPECT_EQ(r.splits[0].samples, 30u);
  EXPECT_GT(r.splits[0].shards.size(), 2u);
  EXPECT_EQ(r.verified, 31u);
  EXPECT_TRUE(r.bad_samples.empty());
  const WebDataset train(o.out, Split::Train);
  EXPECT_EQ(train.class_names(), (std::vector<std::string>{"c0", "c1", "c2"}));
  for (std::size_t i = 0; i < train.size(); ++i) {
    const Sample s = train.get(i);
    // Each class has its own gray level: the label must match the pixels.
    EXPECT_NEAR(
        s.image.to(at::kFloat).mean().item<float>(), s.label * 80.0f, 3.0f)
        << i;
  }
  EXPECT_EQ(WebDataset(o.out, Split::Val).get(0).label, 1);
}

TEST(Pack, VerifyNamesTheSourceFileOfABadSample) {
  TempDir dir;
  test::write_bytes(dir.path() / "photos/train/a/good.jpg", jpeg(1));
  test::write_bytes(
      dir.path() / "photos/train/a/bad.jpg", {0xFF, 0xD8, 0xFF, 0x00});
  PackOptions o;
  o.from = "folder:" + (dir.path() / "photos").string();
  o.out = (dir.path() / "shards").string();
  o.verify = true;
  o.progress = false;
  const PackResult r = pack(o);
  ASSERT_EQ(r.bad_samples.size(), 1u);
  EXPECT_NE(r.bad_samples[0].find("bad.jpg"), std::string::npos)
      << r.bad_samples[0];
}

TEST(Pack, PackedSizeKeepsTheAspectWithTheLongerSideAtTheMax) {
  EXPECT_EQ(packed_size(300, 400, 128).height, 96);
  EXPECT_EQ(packed_size(300, 400, 128).width, 128);
  EXPECT_EQ(packed_size(400, 100, 128).height, 128);
  EXPECT_EQ(packed_size(400, 100, 128).width, 32);
  EXPECT_EQ(packed_size(50, 60, 128).width, 60); // not larger: kept
  EXPECT_EQ(packed_size(1000, 1, 10).width, 1); // never below a pixel
  EXPECT_EQ(packed_size(300, 400, 0).width, 400); // 0: no resize
}

// --max-side: a packed shard holds each larger image resized to the max side
// and decodes to the loader's resize of the original within JPEG's loss
// (PSNR >= 30 dB at quality 95); a smaller image keeps its bytes (with
// restart markers off; see the next test for them).
TEST(Pack, MaxSideResizesLargerImagesAndKeepsSmallerOnesByteForByte) {
  TempDir dir;
  const auto big_px = test::textured_image(300, 400, 3, 5);
  const auto big = test::jpeg_file(big_px, 300, 400, 3);
  const auto tall =
      test::png_bytes(test::textured_image(400, 100, 3, 6), 400, 100, 3);
  const auto small =
      test::jpeg_file(test::textured_image(50, 60, 3, 7), 50, 60, 3);
  test::write_bytes(dir.path() / "photos/train/a/big.jpg", big);
  test::write_bytes(dir.path() / "photos/train/a/tall.png", tall);
  test::write_bytes(dir.path() / "photos/train/b/small.jpg", small);
  PackOptions o;
  o.from = "folder:" + (dir.path() / "photos").string();
  o.out = (dir.path() / "shards").string();
  o.progress = false;
  o.image = {128, 95, false};
  o.threads = 2;
  const PackResult r = pack(o);
  EXPECT_EQ(r.splits[0].resized, 2u);
  const WebDataset train(o.out, Split::Train);
  ASSERT_EQ(train.size(), 3u);
  for (std::size_t i = 0; i < train.size(); ++i) {
    const std::string& source = r.splits[0].sources[i];
    const at::Tensor image = train.get(i).image;
    if (source.ends_with("small.jpg")) {
      EXPECT_EQ(train.encoded(i).bytes, small);
    } else if (source.ends_with("tall.png")) {
      EXPECT_EQ(image.sizes(), (std::vector<std::int64_t>{3, 128, 32}));
    } else {
      ASSERT_EQ(image.sizes(), (std::vector<std::int64_t>{3, 96, 128}));
      const DecodedImage original = decode_image(big, "big.jpg");
      std::vector<std::uint8_t> expected(3 * 96 * 128);
      resize_box_into(
          {original.pixels.data(), 300, 400, 3, 400 * 3},
          CropBox{0, 0, 400, 300, false},
          expected.data(),
          {96, 128});
      const at::Tensor want =
          at::from_blob(expected.data(), {3, 96, 128}, at::kByte)
              .to(at::kFloat);
      const double mse =
          (image.to(at::kFloat) - want).pow(2).mean().item<double>();
      EXPECT_GE(10 * std::log10(255.0 * 255.0 / mse), 30.0);
    }
  }
  const auto index =
      nlohmann::json::parse(test::slurp(dir.path() / "shards/index.json"));
  EXPECT_EQ(index["max_side"], 128);
  EXPECT_NE(train.describe().find("packed at max side 128"), std::string::npos)
      << train.describe(); // a run says how its data was packed
  EXPECT_EQ(index["splits"]["train"]["resized"], 2);
  o.image.max_side = -1;
  EXPECT_THROW(pack(o), UsageError);
}

// By default every JPEG is written with a restart marker per MCU row: kept
// ones losslessly (the same pixels, progressive ones made baseline, their
// EXIF kept), resized ones as they are encoded; PNGs keep their bytes. The
// index and a run's description say so.
TEST(Pack, JpegsAreWrittenWithARestartMarkerPerRowAndTheSamePixels) {
  TempDir dir;
  const auto px = test::textured_image(150, 200, 3, 9);
  const auto plain = test::jpeg_file(px, 150, 200, 3);
  test::JpegWriteOptions p;
  p.progressive = true;
  const auto progressive = test::jpeg_file(px, 150, 200, 3, p);
  const auto png = test::png_bytes(px, 150, 200, 3);
  const auto big =
      test::jpeg_file(test::textured_image(300, 400, 3, 5), 300, 400, 3);
  // An EXIF segment right after the start of the image.
  const std::vector<std::uint8_t> exif = {
      0xFF, 0xE1, 0x00, 0x0C, 'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42};
  std::vector<std::uint8_t> with_exif(plain.begin(), plain.begin() + 2);
  with_exif.insert(with_exif.end(), exif.begin(), exif.end());
  with_exif.insert(with_exif.end(), plain.begin() + 2, plain.end());
  test::write_bytes(dir.path() / "photos/train/a/plain.jpg", with_exif);
  test::write_bytes(dir.path() / "photos/train/a/progressive.jpg", progressive);
  test::write_bytes(dir.path() / "photos/train/b/flat.png", png);
  test::write_bytes(dir.path() / "photos/train/b/big.jpg", big);
  PackOptions o;
  o.from = "folder:" + (dir.path() / "photos").string();
  o.out = (dir.path() / "shards").string();
  o.progress = false;
  o.image.max_side = 256;
  const PackResult r = pack(o);
  EXPECT_EQ(r.splits[0].resized, 1u);
  EXPECT_EQ(r.splits[0].remarked, 2u);
  const WebDataset train(o.out, Split::Train);
  // The header's segments up to the first scan: whether one has `marker`.
  const auto has = [](const std::vector<std::uint8_t>& b, std::uint8_t marker) {
    for (std::size_t i = 2; i + 3 < b.size() && b[i] == 0xFF;
         i += 2 + (static_cast<std::size_t>(b[i + 2]) << 8 | b[i + 3])) {
      if (b[i + 1] == marker) {
        return true;
      }
      if (b[i + 1] == 0xDA) {
        break;
      }
    }
    return false;
  };
  for (std::size_t i = 0; i < train.size(); ++i) {
    const std::string& source = r.splits[0].sources[i];
    SCOPED_TRACE(source);
    const std::vector<std::uint8_t> bytes = train.encoded(i).bytes;
    if (source.ends_with(".png")) {
      EXPECT_EQ(bytes, png);
      continue;
    }
    EXPECT_TRUE(has(bytes, 0xDD)) << "a restart interval (DRI)";
    EXPECT_TRUE(has(bytes, 0xC0)) << "baseline";
    EXPECT_FALSE(has(bytes, 0xC2)) << "not progressive";
    if (!source.ends_with("big.jpg")) {
      const auto& original =
          source.ends_with("plain.jpg") ? with_exif : progressive;
      EXPECT_EQ(
          decode_image(bytes, "packed").pixels,
          decode_image(original, "original").pixels)
          << "lossless";
    }
    if (source.ends_with("plain.jpg")) {
      EXPECT_NE(
          std::search(bytes.begin(), bytes.end(), exif.begin() + 4, exif.end()),
          bytes.end())
          << "the EXIF segment is kept";
    }
  }
  const auto index =
      nlohmann::json::parse(test::slurp(dir.path() / "shards/index.json"));
  EXPECT_EQ(index["restart_markers"], true);
  EXPECT_EQ(index["splits"]["train"]["remarked"], 2);
  EXPECT_NE(
      train.describe().find(
          "packed at max side 256 with restart markers per row"),
      std::string::npos)
      << train.describe();
  // Off: every kept file byte for byte.
  o.image.restart_markers = false;
  o.image.max_side = 0;
  o.out = (dir.path() / "copied").string();
  EXPECT_EQ(pack(o).splits[0].remarked, 0u);
  const WebDataset copied(o.out, Split::Train);
  for (std::size_t i = 0; i < copied.size(); ++i) {
    EXPECT_FALSE(has(copied.encoded(i).bytes, 0xDD));
    EXPECT_TRUE(
        copied.encoded(i).bytes == with_exif ||
        copied.encoded(i).bytes == progressive ||
        copied.encoded(i).bytes == png || copied.encoded(i).bytes == big);
  }
}

TEST(Pack, OnlyFoldersCanBePacked) {
  PackOptions o;
  o.from = "synthetic:10";
  o.out = "/tmp/never";
  EXPECT_THROW(pack(o), UsageError);
}

} // namespace hotloop::data
