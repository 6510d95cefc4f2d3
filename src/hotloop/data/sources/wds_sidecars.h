#pragma once
// The small files that come with WebDataset shards' images: a sample's .cls
// member (its class number) and the shards' index.json (the class names
// `hotloop pack` writes). No LibTorch here, so the fuzz target builds
// without it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hotloop::data {

// Past any real data set (ImageNet-21k has 21,841 classes): a label from a
// .cls member, or a list of names, of more is refused before a name is made
// for every class up to it.
inline constexpr std::int64_t kMaxClasses = std::int64_t{1} << 20;
// A .cls member longer than this is refused before it is read.
inline constexpr std::size_t kMaxClassTextBytes = 32;

// A .cls member's text: a class number below kMaxClasses, trailing
// whitespace allowed. DataError naming `shard` and the sample's `key`.
std::int64_t parse_class_label(
    std::span<const std::uint8_t> text,
    const std::string& shard,
    const std::string& key);

struct ShardIndex {
  std::vector<std::string> classes;
  // The longer side `hotloop pack --max-side` resized larger images to; 0:
  // none were resized (or the index does not say).
  std::int64_t max_side = 0;
  // Whether `hotloop pack` wrote its JPEGs with a restart marker per row.
  bool restart_markers = false;
};

// index.json's text: its "classes", a list of at most kMaxClasses names, and
// its "max_side" where it has one (a whole number, 0 or more). DataError
// naming `file`.
ShardIndex parse_shard_index(std::string_view text, const std::string& file);

} // namespace hotloop::data
