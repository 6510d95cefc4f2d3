#pragma once
// How one flat bucket of parameters is cut into the ranks' shards (ZeRO):
// the bucket's elements padded with zeros to a multiple of the number of
// ranks, rank r owning elements [r x shard, (r + 1) x shard). Pure
// arithmetic, shared by the sharded reducer (which cuts) and the checkpoint
// (which puts the shards back together and cuts them again for another
// number of ranks).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hotloop::parallel {

struct ShardLayout {
  std::int64_t numel = 0; // the bucket's own elements
  std::int64_t padded = 0; // numel rounded up to a multiple of ranks
  std::int64_t shard = 0; // padded / ranks: each rank's elements
  int ranks = 1;

  static ShardLayout of(std::int64_t numel, int ranks);

  std::int64_t begin(int rank) const {
    return shard * rank;
  }

  // A member's elements [from, from + count) lie in a rank's shard at
  // [at, at + count).
  struct Piece {
    std::size_t member = 0;
    std::int64_t from = 0;
    std::int64_t count = 0;
    std::int64_t at = 0;
  };
  // The members' parts inside `rank`'s shard, in order; the members lie at
  // `offsets` in the bucket with `numels` elements each. The shard's
  // elements no piece covers are padding.
  std::vector<Piece> pieces(
      const std::vector<std::int64_t>& offsets,
      const std::vector<std::int64_t>& numels,
      int rank) const;
};

} // namespace hotloop::parallel
