#include "hotloop/data/loader_mode.h"

#include <fmt/format.h>

#include "hotloop/core/units.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

// Why auto leaves resident mode off, or "" when it takes it.
std::string why_not_resident(const LoaderConditions& c) {
  if (!c.cuda_device) {
    return "the CPU: the decode threads are faster there";
  }
  if (c.decode_on_device) {
    return "--decode-device gpu decodes each batch's files there";
  }
  if (!c.normalize) {
    return "uint8 batches: resident mode makes float batches";
  }
  if (!c.shape) {
    return "the images differ in size";
  }
  if (!c.device_can_augment) {
    return "the transform resizes crops, which the device does not";
  }
  if (c.decoded_bytes > kResidentAutoBytes) {
    return fmt::format(
        "the decoded set ({}) is over {}",
        format_bytes(c.decoded_bytes),
        format_bytes(kResidentAutoBytes));
  }
  return "";
}

void check_gpu_decode(const LoaderConditions& c) {
  if (!c.cuda_device && !c.fake_gpu_decode) {
    throw UsageError(
        "--decode-device gpu needs a CUDA device",
        "use --decode-device cpu (the decode threads) on the CPU");
  }
  if (!c.encoded_files) {
    throw UsageError(
        "--decode-device gpu decodes image files (folders, shards); this data set has none at the loader's channels",
        "use --decode-device cpu");
  }
  if (c.resident == Resident::On) {
    throw UsageError(
        "--decode-device gpu decodes each batch's files; --resident on decodes the set once",
        "choose one of them");
  }
  if (c.augment_on_device) {
    throw UsageError(
        "--decode-device gpu already crops and resizes on the GPU; --augment-device gpu would crop the crops",
        "drop --augment-device gpu");
  }
}

} // namespace

LoaderMode choose_loader_mode(const LoaderConditions& c) {
  if (!c.normalize && (c.augment_on_device || c.resident == Resident::On)) {
    throw UsageError(
        "uint8 batches (no normalization) cannot come from resident mode or --augment-device gpu, whose device work makes float batches",
        "normalize, or use the CPU's augmentation and resident off");
  }
  if (c.decode_on_device) {
    check_gpu_decode(c);
  }
  LoaderMode mode;
  if (c.resident == Resident::On) {
    if (!c.device_can_augment) {
      throw UsageError(
          "resident mode runs the small-image augmentation on the device; this data set needs resized crops on the CPU",
          "use --resident off (or auto)");
    }
    mode.resident = true;
    mode.reason = "resident: --resident on";
    return mode;
  }
  if (c.resident == Resident::Auto) {
    const std::string why_not = why_not_resident(c);
    if (why_not.empty()) {
      mode.resident = true;
      mode.reason = fmt::format(
          "resident: the decoded set ({}) fits on the GPU",
          format_bytes(c.decoded_bytes));
      return mode;
    }
    mode.reason = "decode threads: " + why_not;
  } else {
    mode.reason = "decode threads: --resident off";
  }
  mode.device_augment = c.augment_on_device && c.train_augment;
  mode.region_decode = c.encoded_files && c.decode != Decode::Full;
  mode.gpu_decode = c.decode_on_device;
  if (mode.gpu_decode) {
    mode.reason += "; JPEGs decoded on the GPU (--decode-device gpu)";
  }
  return mode;
}

} // namespace hotloop::data
