#include <gtest/gtest.h>

#include "hotloop/data/data_spec.h"
#include "hotloop/data/sources/image_folder.h"
#include "hotloop/errors.h"
#include "support/image_files.h"
#include "support/temp_dir.h"

namespace hotloop::data {

using test::flat_image;
using test::TempDir;

namespace {

void add_jpeg(
    const TempDir& dir,
    const std::string& rel,
    std::vector<std::uint8_t> color = {128, 64, 32}) {
  test::write_bytes(
      dir.path() / rel, test::jpeg_bytes(flat_image(12, 10, color), 12, 10, 3));
}

void add_png(const TempDir& dir, const std::string& rel) {
  test::write_bytes(
      dir.path() / rel,
      test::png_bytes(flat_image(6, 9, {1, 2, 3, 255}), 6, 9, 4));
}

std::string open_error(const TempDir& dir, Split split = Split::Train) {
  try {
    ImageFolder ds(dir.path().string(), split);
    return {};
  } catch (const DataError& e) {
    return e.what();
  }
}

} // namespace

TEST(ImageFolder, ClassesAreSortedFolderNamesAndEverySplitUsesTrainsNumbering) {
  TempDir dir;
  add_jpeg(dir, "train/shoes/b.jpg");
  add_jpeg(dir, "train/shoes/a.JPEG");
  add_png(dir, "train/bags/x.png");
  add_jpeg(dir, "train/watches/w.jpg");
  test::write_bytes(
      dir.path() / "train/bags/notes.txt", {'h', 'i'}); // not an image: ignored
  add_jpeg(dir, "val/watches/v.jpg");
  const ImageFolder train(dir.path().string(), Split::Train);
  EXPECT_EQ(
      train.class_names(),
      (std::vector<std::string>{"bags", "shoes", "watches"}));
  ASSERT_EQ(train.size(), 4u);
  EXPECT_EQ(train.get(0).label, 0); // bags/x.png
  EXPECT_EQ(train.get(0).image.sizes(), (std::vector<std::int64_t>{3, 6, 9}));
  EXPECT_EQ(train.get(1).label, 1); // shoes/a.JPEG, then shoes/b.jpg
  EXPECT_NE(train.path(1).find("a.JPEG"), std::string::npos);
  EXPECT_EQ(train.get(3).image.sizes(), (std::vector<std::int64_t>{3, 12, 10}));
  const ImageFolder val(dir.path().string(), Split::Val);
  ASSERT_EQ(val.size(), 1u);
  EXPECT_EQ(val.get(0).label, 2); // "watches" is class 2 in train
  EXPECT_EQ(
      open_dataset(
          parse_data_spec("folder:" + dir.path().string()), Split::Train)
          ->size(),
      4u);
}

TEST(ImageFolder, LayoutProblemsAreErrorsBeforeAnyDecoding) {
  TempDir empty;
  EXPECT_NE(open_error(empty).find("no train folder"), std::string::npos);
  TempDir no_classes;
  std::filesystem::create_directories(no_classes.path() / "train");
  EXPECT_NE(open_error(no_classes).find("no class folders"), std::string::npos);
  TempDir empty_class;
  add_jpeg(empty_class, "train/coats/c.jpg");
  std::filesystem::create_directories(empty_class.path() / "train/hats");
  EXPECT_NE(
      open_error(empty_class).find("class 'hats' has no .jpg"),
      std::string::npos);
  TempDir extra_class;
  add_jpeg(extra_class, "train/coats/c.jpg");
  add_jpeg(extra_class, "test/scarves/s.jpg");
  EXPECT_NE(
      open_error(extra_class, Split::Test)
          .find("class 'scarves' is in test but not in train"),
      std::string::npos);
}

TEST(ImageFolder, ACorruptImageIsADataErrorNamingItsPath) {
  TempDir dir;
  add_jpeg(dir, "train/a/good.jpg");
  test::write_bytes(
      dir.path() / "train/a/zbad.jpg", {0xFF, 0xD8, 0xFF, 0x00, 0x01});
  const ImageFolder ds(dir.path().string(), Split::Train);
  try {
    ds.get(1);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("zbad.jpg"), std::string::npos)
        << e.what();
  }
}

TEST(ImageFolder, ImageExtensions) {
  EXPECT_TRUE(has_image_extension("a.jpg"));
  EXPECT_TRUE(has_image_extension("a.JPeG"));
  EXPECT_TRUE(has_image_extension("a.png"));
  EXPECT_FALSE(has_image_extension("a.gif"));
  EXPECT_FALSE(has_image_extension("jpg"));
}

} // namespace hotloop::data
