#pragma once
// Reads and decodes every sample of a data set, in parallel, and reports what
// it found: counts per class, image sizes, and every sample that cannot be read
// (with its name and the reason).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/data/dataset.h"
#include "hotloop/data/loader.h"

namespace hotloop::data {

struct DataCheckOptions {
  unsigned int threads = 0; // 0: the usable CPUs
  bool progress = true;
  // Auto or Region: each JPEG of a folder or shard also goes through the
  // loader's crop decode (the train crop of epoch 0, seed 0, to size x size)
  // and is compared with a full decode given the same crop and resize
  // (crop_decode.h): how faithful the fast path is on this data.
  Decode decode = Decode::Full;
  std::int64_t size = 224;
};

// The crop decode against the full decode, over the images compared.
struct DecodeComparison {
  std::size_t images = 0;
  std::size_t regions = 0; // decoded as a region (not whole)
  std::size_t scaled = 0; // at a reduced DCT scale
  double psnr_min = 0; // dB; 100 stands for identical
  double psnr_median = 0;
};

struct BadSample {
  std::size_t index = 0;
  std::string error; // names the file or shard:key
};

struct DataCheckReport {
  std::string source; // Dataset::describe()
  std::vector<std::string> classes;
  std::vector<std::size_t> per_class;
  std::size_t samples = 0;
  std::vector<BadSample> bad; // sorted by index
  ImageShape min_shape{}; // smallest height and width seen (channels of the
                          // first image)
  ImageShape max_shape{};
  double seconds = 0;
  std::optional<DecodeComparison> decode; // with options.decode != Full
};

DataCheckReport check_dataset(
    const Dataset& dataset,
    const DataCheckOptions& options);
nlohmann::json to_json(const DataCheckReport& report);

} // namespace hotloop::data
