#include "hotloop/data/sources/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>

#include "hotloop/data/decode/image_decode.h"
#include "hotloop/data/decode/image_tensor.h"
#include "hotloop/data/file_io.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

namespace fs = std::filesystem;

// Sorted names of the sub-folders of `dir`. Throws DataError when `dir` cannot
// be listed.
std::vector<std::string> subfolders(const fs::path& dir) {
  std::error_code ec;
  std::vector<std::string> out;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    throw DataError(
        fmt::format(
            "{}: cannot read the folder: {}", dir.string(), ec.message()),
        "check the path and its permissions (folder:DIR expects DIR/{train,val,test}/<class>/)");
  }
  for (const auto& entry : it) {
    if (entry.is_directory(ec) &&
        entry.path().filename().string().front() != '.') {
      out.push_back(entry.path().filename().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Sorted image files directly in `dir`.
std::vector<std::string> images_in(const fs::path& dir) {
  std::error_code ec;
  std::vector<std::string> out;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    throw DataError(fmt::format(
        "{}: cannot read the folder: {}", dir.string(), ec.message()));
  }
  for (const auto& entry : it) {
    if (entry.is_regular_file(ec) &&
        has_image_extension(entry.path().filename().string())) {
      out.push_back(entry.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

bool has_image_extension(const std::string& filename) {
  const auto dot = filename.rfind('.');
  if (dot == std::string::npos) {
    return false;
  }
  std::string ext = filename.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) {
    return std::tolower(c);
  });
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

ImageFolder::ImageFolder(
    const std::string& root,
    Split split,
    DecodeOptions decode)
    : root_(root), split_(split), decode_(decode) {
  const fs::path train_dir = fs::path(root) / "train";
  const fs::path split_dir = fs::path(root) / to_string(split);
  std::error_code ec;
  if (!fs::is_directory(split_dir, ec)) {
    throw DataError(
        fmt::format(
            "folder:{}: no {} folder ({})",
            root,
            to_string(split),
            split_dir.string()),
        "the layout is DIR/{train,val,test}/<class>/<image>.{jpg,png}");
  }
  // Class numbering comes from train, so that label k means the same class in
  // every split.
  classes_ =
      subfolders(fs::is_directory(train_dir, ec) ? train_dir : split_dir);
  if (classes_.empty()) {
    throw DataError(
        fmt::format(
            "folder:{}: no class folders in {}", root, split_dir.string()),
        "put each class's images in its own folder: DIR/train/<class>/<image>.jpg");
  }
  for (const auto& cls : subfolders(split_dir)) {
    if (!std::binary_search(classes_.begin(), classes_.end(), cls)) {
      throw DataError(
          fmt::format(
              "folder:{}: class '{}' is in {} but not in train",
              root,
              cls,
              to_string(split)),
          "every split must use the train split's classes");
    }
  }
  for (std::size_t label = 0; label < classes_.size(); ++label) {
    const fs::path class_dir = split_dir / classes_[label];
    if (!fs::is_directory(class_dir, ec)) {
      continue; // a val/test split may lack a class
    }
    const auto files = images_in(class_dir);
    if (files.empty() && split == Split::Train) {
      throw DataError(
          fmt::format(
              "folder:{}: class '{}' has no .jpg, .jpeg or .png images ({})",
              root,
              classes_[label],
              class_dir.string()),
          "add images or remove the empty class folder");
    }
    for (const auto& f : files) {
      files_.push_back({f, static_cast<std::int64_t>(label)});
    }
  }
  if (files_.empty()) {
    throw DataError(
        fmt::format("folder:{}: no images in {}", root, split_dir.string()));
  }
}

std::size_t ImageFolder::size() const {
  return files_.size();
}

EncodedSample ImageFolder::encoded(std::size_t index) const {
  const File& f = files_.at(index);
  return {read_file(f.path), f.path, f.label};
}

Sample ImageFolder::get(std::size_t index) const {
  const EncodedSample e = encoded(index);
  return {to_chw_tensor(decode_image(e.bytes, e.name, decode_)), e.label};
}

const std::vector<std::string>& ImageFolder::class_names() const {
  return classes_;
}

std::optional<ImageShape> ImageFolder::shape() const {
  return std::nullopt;
}

std::string ImageFolder::describe() const {
  return fmt::format(
      "folder {} ({} images, {} classes) from {}",
      to_string(split_),
      size(),
      classes_.size(),
      root_);
}

} // namespace hotloop::data
