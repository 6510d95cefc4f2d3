#pragma once
// How a Loader feeds its batches, chosen from the data set, the options and
// the device before anything is allocated: a pure policy, tested on its own
// (tests/data/test_loader_mode.cpp), with the reason for its choice. The
// three choices, in order:
// - Resident or threads: resident mode decodes the whole set once onto the
//   device and gathers batches there (resident.h). --resident on asks for it;
//   auto picks it only on a GPU, for normalized, fixed-shape data whose
//   augmentation the device can do and whose decoded bytes fit in 1 GiB. On
//   the CPU the threads' per-sample loops beat batched gathers (hotloop bench
//   data on Fashion-MNIST, 2 cores: 278k images/s threaded vs 135k resident).
// - Device augmentation (--augment-device gpu, training only): the threads
//   stage each image at a fixed size and the device draws the random crops
//   and flips (device_augment.h).
// - GPU decode (--decode-device gpu): encoded files' JPEGs decoded by nvJPEG
//   on the device (gpu_decode.h); never resident, and not with device
//   augmentation, which would crop the crops again.
// - Region decode: for encoded files (folders, shards) whose decode gives the
//   loader's channels, the threads decode only what each crop needs
//   (crop_decode.h); Decode::Full decodes the whole image as Dataset::get().

#include <cstdint>
#include <optional>
#include <string>

#include "hotloop/data/loader.h"

namespace hotloop::data {

struct LoaderConditions {
  bool cuda_device = false;
  bool normalize = true;
  Resident resident = Resident::Auto;
  bool augment_on_device = false; // --augment-device gpu
  bool train_augment = false; // the training transform runs (not eval/none)
  bool device_can_augment = false; // the transform is one the device does
  std::optional<ImageShape> shape; // the data set's, when every image has it
  std::uint64_t decoded_bytes = 0; // the whole set at the output size
  bool encoded_files = false; // the set's files, decodable at its channels
  Decode decode = Decode::Auto;
  bool decode_on_device = false; // --decode-device gpu
  bool fake_gpu_decode = false; // HOTLOOP_FAKE_GPU_DECODE=1 (gpu_decode.h)
};

struct LoaderMode {
  bool resident = false;
  bool device_augment = false;
  bool region_decode = false;
  bool gpu_decode = false; // the JPEGs decoded on the device (gpu_decode.h)
  std::string reason; // why resident mode, or why not, in a log's words
};

// The largest decoded set auto's resident mode copies onto a GPU.
constexpr std::uint64_t kResidentAutoBytes = 1ULL << 30;

// UsageError for a combination that cannot run: uint8 batches from resident
// mode or device augmentation, --resident on for data whose transform needs
// the CPU, --decode-device gpu off a GPU, for data that is not encoded files,
// with resident mode or with device augmentation.
LoaderMode choose_loader_mode(const LoaderConditions& c);

} // namespace hotloop::data
