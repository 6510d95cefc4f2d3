#include <gtest/gtest.h>

#include <set>

#include "hotloop/data/sampler.h"
#include "hotloop/errors.h"

namespace hotloop::data {

namespace {

std::vector<std::size_t> epoch_indices(const Sampler& s) {
  std::vector<std::size_t> all;
  for (std::size_t b = 0; b < s.batches_per_epoch(); ++b) {
    const auto batch = s.batch(b);
    all.insert(all.end(), batch.begin(), batch.end());
  }
  return all;
}

} // namespace

TEST(Sampler, OrderIsAFunctionOfSeedAndEpoch) {
  Sampler a(100, {10, 1, 0, true, true, 7});
  Sampler b(100, {10, 1, 0, true, true, 7});
  EXPECT_EQ(epoch_indices(a), epoch_indices(b));
  const auto epoch0 = epoch_indices(a);
  a.set_epoch(1);
  EXPECT_NE(epoch_indices(a), epoch0);
  a.set_epoch(0);
  EXPECT_EQ(epoch_indices(a), epoch0);
  Sampler other_seed(100, {10, 1, 0, true, true, 8});
  EXPECT_NE(epoch_indices(other_seed), epoch0);
  Sampler ordered(25, {10, 1, 0, false, false, 0});
  EXPECT_EQ(ordered.batch(2), (std::vector<std::size_t>{20, 21, 22, 23, 24}));
}

TEST(Sampler, RanksSplitEveryGlobalBatchAndTogetherSeeEachSampleOnce) {
  for (const bool drop_last : {true, false}) {
    const std::size_t n = 50;
    std::multiset<std::size_t> seen;
    std::vector<std::size_t> counts;
    for (int rank = 0; rank < 3; ++rank) {
      Sampler s(n, {4, 3, rank, true, drop_last, 1});
      s.set_epoch(2);
      counts.push_back(s.batches_per_epoch());
      for (const auto i : epoch_indices(s)) {
        seen.insert(i);
      }
    }
    // One rank with batch 12 would see the same samples.
    Sampler single(n, {12, 1, 0, true, drop_last, 1});
    single.set_epoch(2);
    const auto one_rank = epoch_indices(single);
    EXPECT_EQ(
        seen, std::multiset<std::size_t>(one_rank.begin(), one_rank.end()))
        << "drop_last=" << drop_last;
    EXPECT_EQ(
        std::set<std::size_t>(seen.begin(), seen.end()).size(), seen.size())
        << "a sample appeared twice";
    if (drop_last) {
      EXPECT_EQ(seen.size(), 48u); // 4 global batches of 12
      EXPECT_EQ(
          counts,
          (std::vector<std::size_t>{4, 4, 4})); // equal batch counts per rank
    } else {
      EXPECT_EQ(seen.size(), 50u); // every sample exactly once
    }
  }
}

TEST(Sampler, BadRankOrBatchIsAUsageError) {
  EXPECT_THROW(Sampler(10, {4, 2, 2, true, true, 0}), UsageError);
  EXPECT_THROW(Sampler(10, {0, 1, 0, true, true, 0}), UsageError);
}

} // namespace hotloop::data
