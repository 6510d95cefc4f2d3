#include "hotloop/data/sources/fashion_mnist.h"

#include <cstring>
#include <filesystem>

#include <ATen/ops/empty.h>
#include <ATen/ops/max.h>
#include <fmt/format.h>

#include "hotloop/data/sources/idx.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> kNames = {
      "T-shirt/top",
      "Trouser",
      "Pullover",
      "Dress",
      "Coat",
      "Sandal",
      "Shirt",
      "Sneaker",
      "Bag",
      "Ankle boot"};
  return kNames;
}

// `dir`/`stem`.gz, else `dir`/`stem`.
std::string find_file(const std::string& dir, const std::string& stem) {
  for (const std::string& name : {stem + ".gz", stem}) {
    const fs::path p = fs::path(dir) / name;
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) {
      return p.string();
    }
  }
  throw DataError(
      fmt::format("fashion-mnist: no {0}.gz or {0} in {1}", stem, dir),
      dir == FashionMnist::kDefaultDir
          ? "install the data set: apt-get install dataset-fashion-mnist"
          : "point the spec at the folder holding the IDX files: --data fashion-mnist:DIR");
}

// The file's data bytes copied into a uint8 tensor of the IDX dimensions.
at::Tensor read_idx_tensor(
    const std::string& path,
    std::size_t expected_ndims) {
  const std::vector<std::uint8_t> bytes = read_file_maybe_gzip(path);
  const IdxHeader h = parse_idx(bytes, path);
  if (h.dims.size() != expected_ndims) {
    throw DataError(fmt::format(
        "{}: {} dimensions, expected {} ({})",
        path,
        h.dims.size(),
        expected_ndims,
        expected_ndims == 3 ? "images: count, rows, columns"
                            : "labels: count"));
  }
  std::vector<std::int64_t> sizes(h.dims.begin(), h.dims.end());
  at::Tensor t = at::empty(sizes, at::kByte);
  std::memcpy(
      t.data_ptr<std::uint8_t>(),
      bytes.data() + h.data_offset,
      h.element_count);
  return t;
}

} // namespace

FashionMnist::FashionMnist(const std::string& dir, Split split)
    : dir_(dir), split_(split) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  at::Tensor images = read_idx_tensor(images_path, 3);
  at::Tensor labels = read_idx_tensor(labels_path, 1);
  if (images.size(1) != 28 || images.size(2) != 28) {
    throw DataError(fmt::format(
        "{}: images are {}x{}, Fashion-MNIST's are 28x28",
        images_path,
        images.size(1),
        images.size(2)));
  }
  if (images.size(0) != labels.size(0)) {
    throw DataError(
        fmt::format(
            "{} has {} images but {} has {} labels",
            images_path,
            images.size(0),
            labels_path,
            labels.size(0)),
        "the two files come from different splits or versions: use the matching pair");
  }
  const auto max_label = at::max(labels).item<std::uint8_t>();
  if (max_label >= fashion_mnist_classes().size()) {
    throw DataError(fmt::format(
        "{}: label {} is out of range: Fashion-MNIST has {} classes (0..9)",
        labels_path,
        max_label,
        fashion_mnist_classes().size()));
  }
  images_ = images.unsqueeze(1).contiguous(); // (N, 1, 28, 28)
  labels_ = labels.to(at::kLong);
}

std::size_t FashionMnist::size() const {
  return static_cast<std::size_t>(images_.size(0));
}

Sample FashionMnist::get(std::size_t index) const {
  if (index >= size()) {
    throw std::out_of_range(
        fmt::format("fashion-mnist: index {} of {}", index, size()));
  }
  const auto i = static_cast<std::int64_t>(index);
  return {images_[i], labels_.data_ptr<std::int64_t>()[i]};
}

const std::vector<std::string>& FashionMnist::class_names() const {
  return fashion_mnist_classes();
}

std::optional<ImageShape> FashionMnist::shape() const {
  return ImageShape{1, 28, 28};
}

std::string FashionMnist::describe() const {
  return fmt::format(
      "fashion-mnist {} ({} images, 1x28x28, 10 classes) from {}",
      to_string(split_),
      size(),
      dir_);
}

} // namespace hotloop::data
