#include "hotloop/data/sources/synthetic.h"

#include <cstring>

#include <ATen/ops/empty.h>
#include <fmt/format.h>

#include "hotloop/core/random.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {} // namespace

Synthetic::Synthetic(SyntheticOptions options) : options_(options) {
  const ImageShape& s = options_.shape;
  if (options_.count == 0 || s.channels <= 0 || s.height <= 0 || s.width <= 0 ||
      options_.num_classes == 0) {
    throw UsageError(
        fmt::format(
            "synthetic data needs a positive count, shape and class count (got {} items of "
            "{}x{}x{}, {} classes)",
            options_.count,
            s.channels,
            s.height,
            s.width,
            options_.num_classes),
        "write it as synthetic:N or synthetic:NxCxHxW, e.g. synthetic:10000x3x224x224");
  }
  for (std::size_t c = 0; c < options_.num_classes; ++c) {
    class_names_.push_back(fmt::format("class{}", c));
  }
}

std::size_t Synthetic::size() const {
  return options_.count;
}

Sample Synthetic::get(std::size_t index) const {
  if (index >= size()) {
    throw std::out_of_range(
        fmt::format("synthetic: index {} of {}", index, size()));
  }
  const ImageShape& s = options_.shape;
  at::Tensor image = at::empty({s.channels, s.height, s.width}, at::kByte);
  auto* out = image.data_ptr<std::uint8_t>();
  const auto n = static_cast<std::size_t>(image.numel());
  std::uint64_t state = options_.seed * 0x2545F4914F6CDD1DULL + index;
  const auto label =
      static_cast<std::int64_t>(splitmix64(state) % options_.num_classes);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t r = splitmix64(state);
    std::memcpy(out + i, &r, 8);
  }
  if (i < n) {
    const std::uint64_t r = splitmix64(state);
    std::memcpy(out + i, &r, n - i);
  }
  return {image, label};
}

const std::vector<std::string>& Synthetic::class_names() const {
  return class_names_;
}

std::optional<ImageShape> Synthetic::shape() const {
  return options_.shape;
}

std::string Synthetic::describe() const {
  const ImageShape& s = options_.shape;
  return fmt::format(
      "synthetic ({} random images, {}x{}x{}, {} classes, seed {})",
      options_.count,
      s.channels,
      s.height,
      s.width,
      options_.num_classes,
      options_.seed);
}

} // namespace hotloop::data
