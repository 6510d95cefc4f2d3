#pragma once
// A data set whose item i is an image filled with i % 256 and labelled i (so
// every class is one sample): tests can tell exactly which samples a batch
// holds. Items in `bad` throw DataError.

#include <set>
#include <string>
#include <thread>

#include <ATen/ops/full.h>
#include <fmt/format.h>

#include "hotloop/data/dataset.h"
#include "hotloop/errors.h"

namespace hotloop::test {

class IndexDataset final : public data::Dataset {
 public:
  IndexDataset(
      std::size_t n,
      data::ImageShape shape,
      std::set<std::size_t> bad = {})
      : n_(n), shape_(shape), bad_(std::move(bad)) {
    for (std::size_t i = 0; i < n; ++i) {
      names_.push_back(fmt::format("c{}", i));
    }
  }
  std::size_t size() const override {
    return n_;
  }
  data::Sample get(std::size_t i) const override {
    if (bad_.count(i) > 0) {
      throw DataError(fmt::format("/data/item{}.jpg: corrupt JPEG data", i));
    }
    return {
        at::full(
            {shape_.channels, shape_.height, shape_.width},
            static_cast<std::int64_t>(i % 256),
            at::kByte),
        static_cast<std::int64_t>(i)};
  }
  const std::vector<std::string>& class_names() const override {
    return names_;
  }
  std::optional<data::ImageShape> shape() const override {
    return shape_;
  }
  std::string describe() const override {
    return "index dataset";
  }

 private:
  std::size_t n_;
  data::ImageShape shape_;
  std::set<std::size_t> bad_;
  std::vector<std::string> names_;
};

} // namespace hotloop::test
