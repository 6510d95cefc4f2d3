#pragma once
// Reads and decodes every sample of a data set, in parallel, and reports what
// it found: counts per class, image sizes, and every sample that cannot be read
// (with its name and the reason).

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/data/dataset.h"

namespace hotloop::data {

struct DataCheckOptions {
  unsigned int threads = 0; // 0: the usable CPUs
  bool progress = true;
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
};

DataCheckReport check_dataset(
    const Dataset& dataset,
    const DataCheckOptions& options);
nlohmann::json to_json(const DataCheckReport& report);

} // namespace hotloop::data
