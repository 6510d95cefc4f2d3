#pragma once
// `wds:DIR` or `wds:GLOB`: WebDataset tar shards. A sample is the run of
// consecutive members that share a key (the member path up to the first dot of
// its file name): `<key>.jpg|jpeg|png` holds the image and
// `<key>.cls` the label as decimal text, as Python's `webdataset` writes them.
// `DIR` means `DIR/<split>-*.tar`. Class names come from `index.json` beside
// the shards (hotloop pack writes it), else they are "class0", "class1", ... up
// to the largest label.

#include <string>

#include "hotloop/data/dataset.h"
#include "hotloop/data/sources/encoded_images.h"

namespace hotloop::data {

class WebDataset final : public Dataset, public EncodedImages {
 public:
  // Lists every shard's members and reads every label. Throws DataError for no
  // matching shards, a damaged or truncated shard, a sample without an image or
  // a label, or a label that is not a number.
  WebDataset(
      const std::string& path_or_glob,
      Split split,
      DecodeOptions decode = {}); // what get() decodes to, and its limit

  std::size_t size() const override;
  Sample get(std::size_t index) const override; // reads and decodes one image
  const std::vector<std::string>& class_names() const override;
  std::optional<ImageShape> shape() const override;
  std::string describe() const override;
  EncodedSample encoded(std::size_t index) const override; // reads, no decode
  DecodeOptions decode_options() const override {
    return decode_;
  }

  const std::vector<std::string>& shards() const {
    return shards_;
  }
  // "shard.tar:key", for messages about one sample.
  std::string sample_name(std::size_t index) const;

 private:
  struct Item {
    std::uint32_t shard;
    std::uint64_t offset;
    std::uint64_t size;
    std::int64_t label;
    std::string key;
  };
  std::string source_;
  Split split_;
  DecodeOptions decode_;
  std::vector<std::string> shards_;
  std::vector<Item> items_;
  std::vector<std::string> classes_;
  std::int64_t packed_max_side_ = 0; // index.json's: pack --max-side
  bool packed_restart_markers_ = false; // and pack --restart-markers
  // ", packed at max side N with restart markers per row" as it applies.
  std::string packed_description() const;
};

// The shard files of `path_or_glob` for `split`, sorted. A directory means
// DIR/<split>-*.tar.
std::vector<std::string> find_shards(
    const std::string& path_or_glob,
    Split split);

// (key, extension) of a member path: "a/b/x12.seg.png" -> ("a/b/x12",
// "seg.png"), as webdataset splits it.
std::pair<std::string, std::string> split_member_name(
    const std::string& member);

} // namespace hotloop::data
