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

} // namespace

LoaderMode choose_loader_mode(const LoaderConditions& c) {
  if (!c.normalize && (c.augment_on_device || c.resident == Resident::On)) {
    throw UsageError(
        "uint8 batches (no normalization) cannot come from resident mode or --augment-device gpu, whose device work makes float batches",
        "normalize, or use the CPU's augmentation and resident off");
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
  return mode;
}

} // namespace hotloop::data
