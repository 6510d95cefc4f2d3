#pragma once
// `hotloop bench data`: the loader alone (decode + augment + batch + copy), or
// the decoder alone (--decode-only: every image decoded whole at full size,
// the ceiling of a full-decode loader), for a fixed time. Speed is measured
// here, never in unit tests.

#include <string>

#include <nlohmann/json.hpp>

#include "hotloop/data/dataset.h"
#include "hotloop/data/loader.h"

namespace hotloop::testplan {

struct DataBenchOptions {
  std::string spec; // --data
  data::Split split = data::Split::Train;
  data::LoaderOptions loader;
  double seconds = 10;
  bool decode_only = false; // read + decode with the same thread count, no
                            // augmentation or batching
};

struct DataBenchResult {
  std::string source;
  std::string mode; // "threaded", "threaded, augmented on the device",
                    // "threaded, JPEGs decoded on the device",
                    // "resident" or "decode-only"
  std::string decode; // --decode: auto, region or full (decode-only: full)
  unsigned int workers = 0;
  std::size_t images = 0;
  double seconds = 0;
  double images_per_s = 0;
  double mb_per_s = 0; // decoded pixels delivered (uint8), 1 MB = 1e6 bytes
  double setup_seconds = 0; // opening the data set (and the resident load)
  double wait_fraction = 0; // share of the time next() waited for a batch
  std::size_t bad_samples = 0;
  std::string feed; // the loader's feed_reason()
  // --decode-device gpu: files nvJPEG decoded, and those it sent back to the
  // CPU.
  std::size_t gpu_decoded = 0;
  std::size_t gpu_fallbacks = 0;
};

DataBenchResult bench_data(const DataBenchOptions& options);
nlohmann::json to_json(const DataBenchResult& r);

} // namespace hotloop::testplan
