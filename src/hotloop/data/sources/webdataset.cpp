#include "hotloop/data/sources/webdataset.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "hotloop/data/decode/image_decode.h"
#include "hotloop/data/decode/image_tensor.h"
#include "hotloop/data/file_io.h"
#include "hotloop/data/sources/tar.h"
#include "hotloop/data/sources/wds_sidecars.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

namespace fs = std::filesystem;

bool is_image_ext(const std::string& ext) {
  std::string e = ext;
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) {
    return std::tolower(c);
  });
  return e == "jpg" || e == "jpeg" || e == "png";
}

// index.json in `dir` (class names, how pack resized), or an empty one.
ShardIndex read_shard_index(const fs::path& dir) {
  std::ifstream in(dir / "index.json", std::ios::binary);
  if (!in) {
    return {};
  }
  const std::string text(std::istreambuf_iterator<char>(in), {});
  return parse_shard_index(text, (dir / "index.json").string());
}

} // namespace

std::pair<std::string, std::string> split_member_name(
    const std::string& member) {
  const auto slash = member.rfind('/');
  const auto dot = member.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) {
    return {member, ""};
  }
  return {member.substr(0, dot), member.substr(dot + 1)};
}

std::vector<std::string> find_shards(
    const std::string& path_or_glob,
    Split split) {
  std::error_code ec;
  const std::string pattern = fs::is_directory(path_or_glob, ec)
      ? (fs::path(path_or_glob) / fmt::format("{}-*.tar", to_string(split)))
            .string()
      : path_or_glob;
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0) {
    out.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  }
  ::globfree(&g);
  if (out.empty()) {
    throw DataError(
        fmt::format("wds:{}: no shards match {}", path_or_glob, pattern),
        "write shards with `hotloop pack --from folder:DIR --to OUT`, then use --data wds:OUT");
  }
  std::sort(out.begin(), out.end());
  return out;
}

WebDataset::WebDataset(
    const std::string& path_or_glob,
    Split split,
    DecodeOptions decode)
    : source_(path_or_glob),
      split_(split),
      decode_(decode),
      shards_(find_shards(path_or_glob, split)) {
  std::int64_t max_label = -1;
  for (std::uint32_t s = 0; s < shards_.size(); ++s) {
    const std::string& shard = shards_[s];
    const auto members = list_tar_file(shard);
    std::size_t i = 0;
    while (i < members.size()) {
      const std::string key = split_member_name(members[i].name).first;
      const TarMember* image = nullptr;
      const TarMember* cls = nullptr;
      for (; i < members.size() &&
           split_member_name(members[i].name).first == key;
           ++i) {
        const std::string ext = split_member_name(members[i].name).second;
        if (is_image_ext(ext)) {
          image = &members[i];
        } else if (ext == "cls") {
          cls = &members[i];
        }
      }
      if (image == nullptr || cls == nullptr) {
        throw DataError(
            fmt::format(
                "{}: sample '{}' has no {}",
                shard,
                key,
                image == nullptr ? ".jpg/.png image" : ".cls label"),
            "every sample needs <key>.jpg (or .png) and <key>.cls with its class number");
      }
      // A byte past the longest label is enough to refuse a long one.
      const std::int64_t label = parse_class_label(
          read_file_range(
              shard,
              cls->offset,
              std::min<std::uint64_t>(cls->size, kMaxClassTextBytes + 1)),
          shard,
          key);
      max_label = std::max(max_label, label);
      items_.push_back({s, image->offset, image->size, label, key});
    }
  }
  if (items_.empty()) {
    throw DataError(
        fmt::format("wds:{}: the shards hold no samples", path_or_glob));
  }
  ShardIndex index = read_shard_index(fs::path(shards_.front()).parent_path());
  classes_ = std::move(index.classes);
  packed_max_side_ = index.max_side;
  packed_restart_markers_ = index.restart_markers;
  if (classes_.empty()) {
    for (std::int64_t c = 0; c <= max_label; ++c) {
      classes_.push_back(fmt::format("class{}", c));
    }
  } else if (max_label >= static_cast<std::int64_t>(classes_.size())) {
    throw DataError(fmt::format(
        "wds:{}: label {} is out of range: index.json names {} classes",
        path_or_glob,
        max_label,
        classes_.size()));
  }
}

std::size_t WebDataset::size() const {
  return items_.size();
}

std::string WebDataset::sample_name(std::size_t index) const {
  const Item& it = items_.at(index);
  return fmt::format("{}:{}", shards_[it.shard], it.key);
}

EncodedSample WebDataset::encoded(std::size_t index) const {
  const Item& it = items_.at(index);
  return {
      read_file_range(shards_[it.shard], it.offset, it.size),
      sample_name(index),
      it.label};
}

Sample WebDataset::get(std::size_t index) const {
  const EncodedSample e = encoded(index);
  return {to_chw_tensor(decode_image(e.bytes, e.name, decode_)), e.label};
}

const std::vector<std::string>& WebDataset::class_names() const {
  return classes_;
}

std::optional<ImageShape> WebDataset::shape() const {
  return std::nullopt;
}

std::string WebDataset::packed_description() const {
  std::string d = packed_max_side_ > 0
      ? fmt::format(", packed at max side {}", packed_max_side_)
      : std::string();
  if (packed_restart_markers_) {
    d += packed_max_side_ > 0 ? " with" : ", packed with";
    d += " restart markers per row";
  }
  return d;
}

std::string WebDataset::describe() const {
  return fmt::format(
      "wds {} ({} samples in {} shards, {} classes{}) from {}",
      to_string(split_),
      size(),
      shards_.size(),
      classes_.size(),
      packed_description(),
      source_);
}

} // namespace hotloop::data
