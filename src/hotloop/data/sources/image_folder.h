#pragma once
// `folder:DIR`: DIR/{train,val,test}/<class>/*.{jpg,jpeg,png}, the layout the
// source documents recommend. Classes are the train split's class folders
// sorted by name (so every split numbers them the same way); files are sorted
// too, so item i is the same file on every machine.

#include <string>

#include "hotloop/data/dataset.h"
#include "hotloop/data/sources/encoded_images.h"

namespace hotloop::data {

class ImageFolder final : public Dataset, public EncodedImages {
 public:
  // Scans the split. Throws DataError before any decoding for: a missing or
  // unreadable folder, no class folders, a class folder without images (in
  // train), a class in val/test that train lacks, or a split without images.
  ImageFolder(
      const std::string& root,
      Split split,
      DecodeOptions decode = {}); // what get() decodes to, and its limit

  std::size_t size() const override;
  Sample get(std::size_t index)
      const override; // reads and decodes; DataError naming the file if bad
  const std::vector<std::string>& class_names() const override;
  std::optional<ImageShape> shape()
      const override; // nullopt: photos differ in size
  std::string describe() const override;
  EncodedSample encoded(std::size_t index) const override; // reads, no decode
  DecodeOptions decode_options() const override {
    return decode_;
  }

  const std::string& path(std::size_t index) const {
    return files_.at(index).path;
  }
  // The label of item `index` without decoding its image.
  std::int64_t get_label(std::size_t index) const {
    return files_.at(index).label;
  }

 private:
  struct File {
    std::string path;
    std::int64_t label;
  };
  std::string root_;
  Split split_;
  DecodeOptions decode_;
  std::vector<std::string> classes_;
  std::vector<File> files_;
};

// True for .jpg, .jpeg and .png in any letter case.
bool has_image_extension(const std::string& filename);

} // namespace hotloop::data
