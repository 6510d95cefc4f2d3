// libFuzzer target for WebDataset's sidecar files
// (data/sources/wds_sidecars.h): the same bytes as a sample's .cls member and
// as the shards' index.json. Each must give a label below kMaxClasses, a list
// of at most kMaxClasses names, or a DataError; never a crash, a stack
// overflow or a huge allocation. Built and run by fuzz/run, seeded with
// fuzz/seeds/wds_sidecars.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "hotloop/data/sources/wds_sidecars.h"
#include "hotloop/errors.h"

extern "C" int LLVMFuzzerTestOneInput(
    const std::uint8_t* data,
    std::size_t size) {
  using namespace hotloop::data;
  try {
    const std::int64_t label = parse_class_label(
        std::span<const std::uint8_t>(data, size), "fuzz.tar", "key");
    if (label < 0 || label >= kMaxClasses || size > kMaxClassTextBytes) {
      __builtin_trap();
    }
  } catch (const hotloop::DataError&) {
  }
  try {
    const ShardIndex index = parse_shard_index(
        std::string_view(reinterpret_cast<const char*>(data), size),
        "index.json");
    if (static_cast<std::int64_t>(index.classes.size()) > kMaxClasses ||
        index.max_side < 0) {
      __builtin_trap();
    }
  } catch (const hotloop::DataError&) {
  }
  return 0;
}
