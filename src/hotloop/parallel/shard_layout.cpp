#include "hotloop/parallel/shard_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::parallel {

ShardLayout ShardLayout::of(std::int64_t numel, int ranks) {
  if (ranks < 1 || numel < 0) {
    throw Error(
        fmt::format("shard layout: {} elements over {} ranks", numel, ranks));
  }
  ShardLayout l;
  l.numel = numel;
  l.ranks = ranks;
  l.shard = (numel + ranks - 1) / ranks;
  l.padded = l.shard * ranks;
  return l;
}

std::vector<ShardLayout::Piece> ShardLayout::pieces(
    const std::vector<std::int64_t>& offsets,
    const std::vector<std::int64_t>& numels,
    int rank) const {
  const std::int64_t lo = begin(rank);
  const std::int64_t hi = lo + shard;
  std::vector<Piece> out;
  for (std::size_t m = 0; m < offsets.size(); ++m) {
    const std::int64_t a = std::max(lo, offsets[m]);
    const std::int64_t b = std::min(hi, offsets[m] + numels[m]);
    if (a < b) {
      out.push_back({m, a - offsets[m], b - a, a - lo});
    }
  }
  return out;
}

} // namespace hotloop::parallel
