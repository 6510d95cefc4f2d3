#pragma once
// `hotloop pack`: image folders -> shuffled WebDataset shards per split, plus
// index.json (counts, shards, class names, what was resized). JPEGs are
// rewritten losslessly with a restart marker per row of blocks (unless
// restart markers are off: then their bytes are copied as they are), other
// files copied; with a max side, images larger than it are resized and
// re-encoded (pack_image.h); each sample is
// `<key>.<ext>` + `<key>.cls`, readable by Python's webdataset and by
// `wds:OUT`.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hotloop/data/sources/pack_image.h"

namespace hotloop::data {

struct PackOptions {
  std::string from; // a --data spec; only folder:DIR can be packed
  std::string out; // output folder (created)
  std::uint64_t shard_bytes = 256ULL
      << 20; // a shard is closed before it would grow past this
  std::uint64_t seed = 0; // shuffle order
  bool verify = false; // re-read every shard and decode every image afterwards
  bool progress = true; // progress bar on standard error
  PackImageOptions image; // --max-side, --quality, --restart-markers
  unsigned int threads = 0; // resizing threads; 0: the usable CPUs
};

struct PackedSplit {
  std::string split;
  std::size_t samples = 0;
  std::uint64_t bytes = 0;
  std::size_t resized = 0; // images resized to the max side
  std::size_t remarked = 0; // JPEGs kept at their size, losslessly rewritten
  std::vector<std::string> shards; // file names inside `out`
  std::vector<std::string>
      sources; // source file of each sample, by its position (its key)
};

struct PackResult {
  std::vector<std::string> classes;
  std::vector<PackedSplit> splits;
  std::size_t verified = 0; // samples decoded by --verify
  std::vector<std::string> bad_samples; // "shard:key: error", from --verify
};

// Throws UsageError for a source that is not folder:DIR, DataError for
// unreadable input or output.
PackResult pack(const PackOptions& options);

// The order of `n` items for `seed`: a Fisher-Yates shuffle on SplitMix64, the
// same on every platform.
std::vector<std::size_t> shuffled_order(std::size_t n, std::uint64_t seed);

} // namespace hotloop::data
