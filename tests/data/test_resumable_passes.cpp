// Passes over a loader's epochs and the resumable position
// (data/resumable_passes.h): what Python's `for batch in loader` and its
// state_dict() rest on.
#include <gtest/gtest.h>

#include <memory>

#include "hotloop/data/data_spec.h"
#include "hotloop/data/resumable_passes.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

ResumablePasses passes(std::uint64_t seed = 3, std::size_t batch = 4) {
  LoaderOptions o;
  o.batch_size = batch;
  o.seed = seed;
  o.workers = 1;
  o.augment = Augment::None;
  std::shared_ptr<const Dataset> d =
      open_dataset(parse_data_spec("synthetic:24x1x4x4"), Split::Train, seed);
  return ResumablePasses(make_loader(d, o), o);
}

TEST(ResumablePasses, ALoadedPositionGivesTheSameNextBatches) {
  ResumablePasses a = passes();
  a.start();
  (void)a.next();
  (void)a.next();
  const PassPosition at = a.position();
  EXPECT_EQ(at.epoch, 0u);
  EXPECT_EQ(at.next_batch, 2u);
  const Batch third = *a.next();
  ResumablePasses b = passes();
  b.load(at);
  b.set_epoch(0); // the loop's set_epoch of the saved epoch keeps it
  b.start();
  EXPECT_TRUE(b.next()->images.equal(third.images));
}

TEST(ResumablePasses, APassLeftEarlyIsFollowedByTheNextEpoch) {
  ResumablePasses a = passes();
  a.start();
  (void)a.next();
  a.start(); // the loop broke out, and a new pass begins
  EXPECT_EQ(a.position().epoch, 1u);
  for (std::size_t i = 0; i < a.batches_per_epoch(); ++i) {
    ASSERT_TRUE(a.next());
  }
  EXPECT_EQ(a.position().epoch, 2u) << "after the last batch: the next epoch";
  EXPECT_FALSE(a.next());
}

TEST(ResumablePasses, APositionOfOtherOptionsIsRefused) {
  ResumablePasses a = passes(3, 4);
  const PassPosition p = a.position();
  ResumablePasses other_seed = passes(4, 4);
  EXPECT_THROW(other_seed.load(p), UsageError);
  PassPosition past = p;
  past.next_batch = a.batches_per_epoch() + 1;
  EXPECT_THROW(a.load(past), UsageError);
}

} // namespace
} // namespace hotloop::data
