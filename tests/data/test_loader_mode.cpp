// How a Loader feeds its batches (loader_mode.h): resident or decode threads,
// device augmentation, region decode, and the refusals, each with its reason.
#include <gtest/gtest.h>

#include <string>

#include "hotloop/data/loader_mode.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

// Fashion-MNIST on a GPU: 60,000 28x28 gray images, the small-image transform.
LoaderConditions small_images_on_a_gpu() {
  LoaderConditions c;
  c.cuda_device = true;
  c.train_augment = true;
  c.device_can_augment = true;
  c.shape = ImageShape{1, 28, 28};
  c.decoded_bytes = 60000ULL * 28 * 28;
  return c;
}

// An image folder of photos: sizes differ, resized crops, files to decode.
LoaderConditions photos_on_a_gpu() {
  LoaderConditions c;
  c.cuda_device = true;
  c.train_augment = true;
  c.encoded_files = true;
  return c;
}

TEST(LoaderMode, AutoGoesResidentForSmallFixedSizeDataOnAGpu) {
  const LoaderMode m = choose_loader_mode(small_images_on_a_gpu());
  EXPECT_TRUE(m.resident);
  EXPECT_FALSE(m.device_augment);
  EXPECT_EQ(m.reason, "resident: the decoded set (44.9 MiB) fits on the GPU");
}

TEST(LoaderMode, AutoKeepsTheThreadsOnTheCpu) {
  LoaderConditions c = small_images_on_a_gpu();
  c.cuda_device = false;
  const LoaderMode m = choose_loader_mode(c);
  EXPECT_FALSE(m.resident);
  EXPECT_EQ(
      m.reason, "decode threads: the CPU: the decode threads are faster there");
}

TEST(LoaderMode, AutoKeepsTheThreadsForEachThingResidentCannotDo) {
  LoaderConditions c = small_images_on_a_gpu();
  c.decoded_bytes = kResidentAutoBytes;
  EXPECT_TRUE(choose_loader_mode(c).resident) << "exactly the limit fits";
  c.decoded_bytes = kResidentAutoBytes + 1;
  EXPECT_EQ(
      choose_loader_mode(c).reason,
      "decode threads: the decoded set (1.0 GiB) is over 1.0 GiB");
  c = small_images_on_a_gpu();
  c.shape.reset();
  EXPECT_EQ(
      choose_loader_mode(c).reason,
      "decode threads: the images differ in size");
  c = small_images_on_a_gpu();
  c.device_can_augment = false;
  EXPECT_EQ(
      choose_loader_mode(c).reason,
      "decode threads: the transform resizes crops, which the device does not");
  c = small_images_on_a_gpu();
  c.normalize = false;
  EXPECT_EQ(
      choose_loader_mode(c).reason,
      "decode threads: uint8 batches: resident mode makes float batches");
}

TEST(LoaderMode, OnAndOffAreObeyed) {
  LoaderConditions c = small_images_on_a_gpu();
  c.resident = Resident::Off;
  EXPECT_FALSE(choose_loader_mode(c).resident);
  EXPECT_EQ(choose_loader_mode(c).reason, "decode threads: --resident off");
  c = small_images_on_a_gpu();
  c.cuda_device = false;
  c.resident = Resident::On;
  EXPECT_TRUE(choose_loader_mode(c).resident) << "on: even on the CPU";
}

TEST(LoaderMode, ResidentOnForPhotosIsRefusedWithTheFix) {
  LoaderConditions c = photos_on_a_gpu();
  c.resident = Resident::On;
  try {
    choose_loader_mode(c);
    FAIL() << "resident on for resized crops was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("resized crops"), std::string::npos);
    EXPECT_EQ(e.hint(), "use --resident off (or auto)");
  }
}

TEST(LoaderMode, Uint8BatchesRefuseDeviceWork) {
  LoaderConditions c = photos_on_a_gpu();
  c.normalize = false;
  c.augment_on_device = true;
  EXPECT_THROW(choose_loader_mode(c), UsageError);
  c.augment_on_device = false;
  EXPECT_FALSE(choose_loader_mode(c).resident);
}

TEST(LoaderMode, PhotosDecodeTheirCropRegionAndAugmentOnTheDeviceWhenAsked) {
  LoaderConditions c = photos_on_a_gpu();
  LoaderMode m = choose_loader_mode(c);
  EXPECT_TRUE(m.region_decode);
  EXPECT_FALSE(m.device_augment) << "device augmentation is asked for";
  c.augment_on_device = true;
  EXPECT_TRUE(choose_loader_mode(c).device_augment);
  c.train_augment = false;
  EXPECT_FALSE(choose_loader_mode(c).device_augment)
      << "evaluation has no random crops to draw";
  c = photos_on_a_gpu();
  c.decode = Decode::Full;
  EXPECT_FALSE(choose_loader_mode(c).region_decode);
  c.decode = Decode::Region;
  c.encoded_files = false;
  EXPECT_FALSE(choose_loader_mode(c).region_decode)
      << "decoded images (or a channel conversion) go through Dataset::get()";
}

} // namespace
} // namespace hotloop::data
