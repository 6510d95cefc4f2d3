#pragma once
// The dataset interface every data source implements: a size, and item i ->
// (image, label), with class names. C++ users implement it for their own data;
// hotloop's formats are opened by open_dataset() from a `--data` spec.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace hotloop::data {

struct Sample {
  at::Tensor image; // (C, H, W), uint8
  std::int64_t label = 0; // in [0, num_classes)
};

struct ImageShape {
  std::int64_t channels = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
  bool operator==(const ImageShape&) const = default;
};

enum class Split { Train, Val, Test };
const char* to_string(Split split); // "train", "val", "test"
Split parse_split(
    const std::string& name); // the inverse; UsageError for anything else

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::size_t size() const = 0;
  // Item `index` (< size()). Called concurrently from decode threads:
  // implementations are thread-safe. Throws DataError for an item that cannot
  // be read (a corrupt file), naming it.
  virtual Sample get(std::size_t index) const = 0;
  virtual const std::vector<std::string>& class_names() const = 0;
  // The shape every item has, when they all have one (before resizing), else
  // nullopt.
  virtual std::optional<ImageShape> shape() const = 0;
  // One line for logs: what it is, how many items, where from.
  virtual std::string describe() const = 0;

  std::size_t num_classes() const {
    return class_names().size();
  }
};

} // namespace hotloop::data
