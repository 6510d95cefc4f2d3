#pragma once
// `synthetic:N[xCxHxW]`: random uint8 images and labels, generated per item
// from (seed, index), so get() needs no storage, is thread-safe and gives the
// same item every time. For measuring the throughput ceiling of everything
// after the data source.

#include <cstdint>

#include "hotloop/data/dataset.h"

namespace hotloop::data {

struct SyntheticOptions {
  std::size_t count = 0;
  ImageShape shape{3, 224, 224};
  std::size_t num_classes = 10;
  std::uint64_t seed = 0;
};

class Synthetic final : public Dataset {
 public:
  explicit Synthetic(SyntheticOptions options); // throws UsageError for a zero
                                                // count, size or class count

  std::size_t size() const override;
  Sample get(std::size_t index) const override;
  const std::vector<std::string>& class_names() const override;
  std::optional<ImageShape> shape() const override;
  std::string describe() const override;

 private:
  SyntheticOptions options_;
  std::vector<std::string> class_names_; // "class0", "class1", ...
};

} // namespace hotloop::data
