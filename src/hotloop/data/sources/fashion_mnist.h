#pragma once
// Fashion-MNIST (and any IDX image/label pair of the same layout): the
// project's built-in data set. The whole split is read, validated and held in
// memory at open (47 MB for train), so a bad file fails before the first step
// and get() is a view into one tensor.

#include <string>

#include "hotloop/data/dataset.h"

namespace hotloop::data {

class FashionMnist final : public Dataset {
 public:
  static constexpr const char* kDefaultDir =
      "/usr/share/datasets/fashion-mnist";

  // Reads `dir`/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (Val reads
  // the t10k files: the data set has no separate validation split). Throws
  // DataError naming the file and the problem: a missing file, a bad magic
  // number, wrong dimensions, truncated data, image and label counts that
  // differ, or a label outside 0..9.
  FashionMnist(const std::string& dir, Split split);

  std::size_t size() const override;
  Sample get(std::size_t index) const override;
  const std::vector<std::string>& class_names() const override;
  std::optional<ImageShape> shape() const override;
  std::string describe() const override;

  const at::Tensor& images() const { // (N, 1, 28, 28) uint8, contiguous
    return images_;
  }
  const at::Tensor& labels() const { // (N,) int64
    return labels_;
  }

 private:
  std::string dir_;
  Split split_;
  at::Tensor images_;
  at::Tensor labels_;
};

} // namespace hotloop::data
