// ZeRO's pieces with two Gloo ranks (threads of this process, the real
// TCPStore and Gloo over loopback): the shard layout's arithmetic, the
// sharded reducer's shard of the mean gradient at stages 1 and 2 (overlapped
// with backward or after it, with accumulation), the parameters as views of
// the flat buffers and the all-gather after the update, the agreement on a
// non-finite gradient, and the bytes each rank holds.
#include <gtest/gtest.h>

#include <limits>
#include <stdexcept>

#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include "hotloop/parallel/process_group.h"
#include "hotloop/parallel/shard_layout.h"
#include "hotloop/parallel/sharded_reducer.h"
#include "support/free_port.h"
#include "support/loopback_group.h"
#include "support/rank_gradients.h"

namespace hotloop::parallel {
namespace {

template <typename F>
void two_ranks(F body) {
  test::two_loopback_ranks(test::free_port(), body);
}

// make_params' 43 elements: with 64-byte buckets, {params[2], params[1]}
// (33 elements, a shard of 17 with 1 of padding) and {params[0]} (10,
// shards of 5).
using test::loss_for;
using test::make_params;
using test::rank_grads;

// Each bucket's mean gradient, flat in bucket order and padded.
std::vector<at::Tensor> whole_means() {
  return {
      at::cat(
          {at::full({3}, 0.5f),
           at::arange(30, at::kFloat) * 1.5,
           at::zeros({1})}),
      at::arange(10, at::kFloat) * 1.5};
}

ShardOptions options(int stage, bool overlap) {
  ShardOptions o;
  o.stage = stage;
  o.buckets.bucket_bytes = 64;
  o.buckets.overlap = overlap;
  return o;
}

void expect_shards_of_the_mean(const ShardedReducer& reducer, int r) {
  const std::vector<at::Tensor> means = whole_means();
  ASSERT_EQ(reducer.shards().size(), means.size());
  for (std::size_t b = 0; b < means.size(); ++b) {
    const ShardLayout& l = reducer.layout(b);
    const at::Tensor want = means[b].narrow(0, l.begin(r), l.shard);
    const at::Tensor got = reducer.shards()[b].tensor.grad();
    ASSERT_TRUE(got.defined());
    EXPECT_TRUE(at::equal(got, want)) << "bucket " << b << " rank " << r;
  }
  // The parameters' own gradients are freed once copied.
  for (const at::Tensor& p : reducer.params()) {
    EXPECT_FALSE(p.grad().defined());
  }
}

} // namespace

TEST(ShardLayout, PadsToAMultipleOfTheRanksAndCutsMembersAtShardEdges) {
  const ShardLayout l = ShardLayout::of(43, 4);
  EXPECT_EQ(l.shard, 11);
  EXPECT_EQ(l.padded, 44);
  const std::vector<std::int64_t> offsets = {0, 10, 40};
  const std::vector<std::int64_t> numels = {10, 30, 3};
  const auto first = l.pieces(offsets, numels, 0);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].member, 0u);
  EXPECT_EQ(first[0].count, 10);
  EXPECT_EQ(first[1].member, 1u);
  EXPECT_EQ(first[1].from, 0);
  EXPECT_EQ(first[1].count, 1);
  EXPECT_EQ(first[1].at, 10);
  const auto last = l.pieces(offsets, numels, 3); // [33, 44): 1 of padding
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0].member, 1u);
  EXPECT_EQ(last[0].from, 23);
  EXPECT_EQ(last[0].count, 7);
  EXPECT_EQ(last[1].member, 2u);
  EXPECT_EQ(last[1].at, 7);
  EXPECT_EQ(last[1].count, 3);
  // Every element is in exactly one rank's shard.
  std::int64_t covered = 0;
  for (int r = 0; r < 4; ++r) {
    for (const auto& p : l.pieces(offsets, numels, r)) {
      covered += p.count;
      EXPECT_LE(p.at + p.count, l.shard);
    }
  }
  EXPECT_EQ(covered, 43);
  EXPECT_EQ(ShardLayout::of(8, 4).padded, 8); // no padding when it divides
}

TEST(ShardedReducer, EachStageLeavesThisRanksShardOfTheMeanGradient) {
  for (int stage : {1, 2}) {
    for (bool overlap : {true, false}) {
      two_ranks([&](int r, std::shared_ptr<ProcessGroup> g) {
        std::vector<at::Tensor> params = make_params();
        ShardedReducer reducer(g, params, {}, options(stage, overlap));
        ASSERT_EQ(reducer.bucket_count(), 2u);
        for (int step = 0; step < 2; ++step) {
          reducer.arm();
          loss_for(params, rank_grads(r), 1.0).backward();
          reducer.launch_rest(/*failed=*/false);
          EXPECT_EQ(reducer.started_during_backward(), overlap ? 2u : 0u);
          reducer.finish();
          expect_shards_of_the_mean(reducer, r);
        }
      });
    }
  }
}

TEST(ShardedReducer, AccumulatesLocallyAndReducesOnlyTheArmedBackward) {
  two_ranks([](int r, std::shared_ptr<ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    ShardedReducer reducer(g, params, {}, options(2, true));
    loss_for(params, rank_grads(r), 0.5).backward();
    EXPECT_TRUE(params[0].grad().defined()); // kept for the next micro-batch
    reducer.arm();
    loss_for(params, rank_grads(r), 0.5).backward();
    reducer.launch_rest(/*failed=*/false);
    reducer.finish();
    expect_shards_of_the_mean(reducer, r);
  });
}

TEST(ShardedReducer, TheUpdatedShardsAreGatheredIntoEveryRanksParameters) {
  two_ranks([](int r, std::shared_ptr<ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    ShardedReducer reducer(g, params, {}, options(1, true));
    {
      at::NoGradGuard no_grad;
      for (const auto& s : reducer.shards()) {
        s.tensor.fill_(static_cast<float>(r + 1)); // this rank's "update"
      }
    }
    reducer.after_update();
    // Bucket 0 (shards of 17): params[2] and params[1]'s first 14 elements
    // are rank 0's, the rest rank 1's; bucket 1: params[0] half and half.
    EXPECT_TRUE(at::equal(params[2], at::full({3}, 1.0f)));
    const at::Tensor p1 = params[1].reshape({30});
    EXPECT_TRUE(at::equal(p1.narrow(0, 0, 14), at::full({14}, 1.0f)));
    EXPECT_TRUE(at::equal(p1.narrow(0, 14, 16), at::full({16}, 2.0f)));
    EXPECT_TRUE(at::equal(params[0].narrow(0, 0, 5), at::full({5}, 1.0f)));
    EXPECT_TRUE(at::equal(params[0].narrow(0, 5, 5), at::full({5}, 2.0f)));
  });
}

TEST(ShardedReducer, ParametersKeepTheirValuesAndLayoutAsViewsOfTheBuffers) {
  two_ranks([](int, std::shared_ptr<ProcessGroup> g) {
    at::Tensor conv = (at::arange(24, at::kFloat).reshape({2, 3, 2, 2}) * 0.1)
                          .contiguous(at::MemoryFormat::ChannelsLast)
                          .requires_grad_();
    at::Tensor bias = at::full({3}, 0.5f).requires_grad_();
    const at::Tensor conv_before = conv.detach().clone();
    const auto strides = conv.strides().vec();
    ShardedReducer reducer(g, {conv, bias}, {}, options(2, false));
    EXPECT_TRUE(at::equal(conv, conv_before));
    EXPECT_EQ(conv.strides().vec(), strides);
    // The gradient of a channels-last weight lands in the shard in the
    // weight's own memory order.
    reducer.arm();
    (conv * conv_before).sum().backward();
    reducer.launch_rest(/*failed=*/false);
    reducer.finish();
    const ShardLayout& l = reducer.layout(0);
    // Both ranks' shards together: the weight's values in memory order.
    at::Tensor gathered = at::zeros({l.padded});
    g->start_allgather(
        reducer.shards()[0].tensor.grad().clone(), gathered, "t")();
    const at::Tensor memory_order =
        conv_before.as_strided({conv_before.numel()}, {1});
    // bucket 0 holds bias then conv (reverse registration order)
    EXPECT_TRUE(at::allclose(gathered.narrow(0, 3, 24), memory_order));
  });
}

TEST(ShardedReducer, ANonFiniteGradientOnOneRankIsNonFiniteOnEveryRank) {
  two_ranks([](int r, std::shared_ptr<ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    ShardOptions o = options(2, true);
    o.agree_on_non_finite = true;
    ShardedReducer reducer(g, params, {}, o);
    std::vector<at::Tensor> grads = rank_grads(r);
    if (r == 1) {
      // Element 9 of bucket 1 (shards of 5): in rank 1's shard only.
      grads[0].narrow(0, 9, 1).fill_(std::numeric_limits<float>::infinity());
    }
    reducer.arm();
    loss_for(params, grads, 1.0).backward();
    reducer.launch_rest(/*failed=*/false);
    reducer.finish();
    for (const auto& s : reducer.shards()) {
      EXPECT_TRUE(at::isnan(s.tensor.grad()).all().item<bool>());
    }
  });
}

TEST(ShardedReducer, EachRankHoldsWholeParametersAndItsShareOfGradients) {
  for (int stage : {1, 2}) {
    two_ranks([&](int r, std::shared_ptr<ProcessGroup> g) {
      std::vector<at::Tensor> params = make_params();
      ShardedReducer reducer(g, params, {}, options(stage, true));
      reducer.arm();
      loss_for(params, rank_grads(r), 1.0).backward();
      reducer.launch_rest(/*failed=*/false);
      reducer.finish();
      const ShardedBytes b = reducer.bytes();
      EXPECT_EQ(b.parameters, (34u + 10u) * 4u); // whole, with padding
      EXPECT_EQ(b.gradients, (stage == 1 ? 34u + 10u : 17u + 5u) * 4u);
    });
  }
}

// One bucket a parameter (4-byte buckets): {params[2]} (3 elements, padded
// to 4), {params[1]} (30), {params[0]} (10), started in that order. At
// most `bound` of their whole gradient buffers are alive at once, the mean
// unchanged; 0: all of them until finish().
TEST(ShardedReducer, AtMostTheBoundOfWholeGradientBuffersAreReducedAtOnce) {
  const std::vector<at::Tensor> means = {
      at::cat({at::full({3}, 0.5f), at::zeros({1})}),
      at::arange(30, at::kFloat) * 1.5,
      at::arange(10, at::kFloat) * 1.5};
  for (const std::size_t bound : {0u, 1u, 2u}) {
    two_ranks([&](int r, std::shared_ptr<ProcessGroup> g) {
      std::vector<at::Tensor> params = make_params();
      ShardOptions o = options(2, true);
      o.buckets.bucket_bytes = 4;
      o.reduces_in_flight = bound;
      ShardedReducer reducer(g, params, {}, o);
      ASSERT_EQ(reducer.bucket_count(), 3u);
      reducer.arm();
      loss_for(params, rank_grads(r), 1.0).backward();
      reducer.launch_rest(/*failed=*/false);
      reducer.finish();
      for (std::size_t b = 0; b < means.size(); ++b) {
        const ShardLayout& l = reducer.layout(b);
        EXPECT_TRUE(at::equal(
            reducer.shards()[b].tensor.grad(),
            means[b].narrow(0, l.begin(r), l.shard)))
            << "bucket " << b << " bound " << bound;
      }
      const ShardedBytes bytes = reducer.bytes();
      EXPECT_EQ(bytes.largest_bucket, 30u * 4u);
      EXPECT_EQ(
          bytes.peak_reducing,
          bound == 0       ? (4u + 30u + 10u) * 4u
              : bound == 1 ? 30u * 4u
                           : (30u + 10u) * 4u)
          << "bound " << bound;
    });
  }
}

// A rank that ran out of memory before its backward starts every bucket
// from zeros without waiting for any, while the other waits for each
// before its next (a bound of 1): both get through and discard, their
// parameters as they were.
TEST(ShardedReducer, AFailedRankStartsItsBucketsWithoutWaitingAndAllDiscard) {
  two_ranks([](int r, std::shared_ptr<ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    ShardOptions o = options(2, true);
    o.buckets.bucket_bytes = 4;
    o.reduces_in_flight = 1;
    ShardedReducer reducer(g, params, {}, o);
    reducer.arm();
    if (r == 0) {
      loss_for(params, rank_grads(r), 1.0).backward();
    }
    reducer.launch_rest(/*failed=*/r == 1);
    reducer.discard();
    for (const at::Tensor& p : reducer.params()) {
      EXPECT_FALSE(p.grad().defined());
      EXPECT_EQ(p.abs().sum().item<float>(), 0.0f);
    }
    // The failed rank sent one buffer of zeros, no bucket's own.
    EXPECT_EQ(reducer.bytes().peak_reducing, r == 1 ? 0u : 30u * 4u);
  });
}

TEST(ShardedReducer, BucketsNeverMixTheOptimizersGroups) {
  two_ranks([](int, std::shared_ptr<ProcessGroup> g) {
    // Groups interleaved as a GPT's decayed weights and exempt biases are:
    // one bucket per group, not one per run of them.
    std::vector<at::Tensor> params = make_params();
    params.push_back(at::zeros({4}).requires_grad_());
    ShardOptions o = options(1, true);
    o.buckets.bucket_bytes = 1 << 20; // one bucket, were it not for groups
    ShardedReducer reducer(g, params, {0, 1, 0, 1}, o);
    ASSERT_EQ(reducer.bucket_count(), 2u);
    // Backward's order: params[3] comes first; group 1's bucket gets its
    // last member (params[1]) before group 0's (params[0]).
    EXPECT_EQ(reducer.shards()[0].partition, 1);
    EXPECT_EQ(reducer.buckets()[0].members, (std::vector<std::size_t>{3, 1}));
    EXPECT_EQ(reducer.shards()[1].partition, 0);
    EXPECT_EQ(reducer.buckets()[1].members, (std::vector<std::size_t>{2, 0}));
  });
}

// Stage 3: two units and a parameter outside them. The units' parameters
// hold no memory until gathered, come back with their values, are freed
// again after the step; the shard's gradient is the mean's; the updated
// shards reach the parameters when next gathered; parameters written while
// whole become the shards.
TEST(ShardedReducer, Stage3GathersEachUnitOnlyWhileItIsUsed) {
  two_ranks([](int r, std::shared_ptr<ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    {
      at::NoGradGuard no_grad;
      params[0].copy_(at::arange(10, at::kFloat));
      params[1].copy_(at::arange(30, at::kFloat).reshape({5, 6}) * 0.5);
      params[2].fill_(0.25f);
    }
    const std::vector<at::Tensor> before = {
        params[0].detach().clone(),
        params[1].detach().clone(),
        params[2].detach().clone()};
    ShardOptions o = options(3, true);
    o.buckets.bucket_bytes = 1u << 20;
    o.units = {0, 1, -1};
    ShardedReducer reducer(g, params, {}, o);
    ASSERT_EQ(reducer.unit_count(), 2u);
    EXPECT_EQ(params[0].storage().nbytes(), 0u);
    EXPECT_EQ(params[1].storage().nbytes(), 0u);
    EXPECT_TRUE(at::equal(params[2], before[2])); // outside: whole
    reducer.gather_unit(1);
    EXPECT_TRUE(at::equal(params[1], before[1]));
    reducer.release_unit(1);
    EXPECT_EQ(params[1].storage().nbytes(), 0u);
    // Prefetched: released before anyone waited (the gather is waited for
    // first), and prefetched again then gathered.
    reducer.prefetch_unit(1);
    reducer.release_unit(1);
    EXPECT_EQ(params[1].storage().nbytes(), 0u);
    reducer.prefetch_unit(1);
    reducer.gather_unit(1);
    EXPECT_TRUE(at::equal(params[1], before[1]));
    reducer.release_unit(1);

    // A step with both units whole: the mean gradient's shard; freed after.
    reducer.gather_unit(0);
    reducer.gather_unit(1);
    reducer.arm();
    test::loss_for(params, rank_grads(r), 1.0).backward();
    reducer.launch_rest(/*failed=*/false);
    reducer.finish();
    EXPECT_EQ(params[0].storage().nbytes(), 0u);
    const ShardedBytes bytes = reducer.bytes();
    EXPECT_EQ(bytes.largest_unit, 30u * 4);
    EXPECT_EQ(bytes.peak_units, (30u + 10u) * 4);
    for (std::size_t b = 0; b < reducer.buckets().size(); ++b) {
      const Bucket& bucket = reducer.buckets()[b];
      ASSERT_EQ(bucket.members.size(), 1u); // a unit never shares a bucket
      const std::size_t i = bucket.members.front();
      const ShardLayout& l = reducer.layout(b);
      const at::Tensor mean =
          (rank_grads(0)[i] + rank_grads(1)[i]).reshape({-1}) * 0.5;
      const std::int64_t n = std::min(l.shard, mean.numel() - l.begin(r));
      EXPECT_TRUE(at::equal(
          reducer.shards()[b].tensor.grad().narrow(0, 0, n),
          mean.narrow(0, l.begin(r), n)))
          << "bucket " << b;
    }

    // Each rank's "update" reaches every rank's parameters.
    {
      at::NoGradGuard no_grad;
      for (const auto& s : reducer.shards()) {
        s.tensor.fill_(static_cast<float>(r + 1));
      }
    }
    reducer.after_update();
    reducer.set_whole(true);
    EXPECT_TRUE(at::equal(params[0].narrow(0, 0, 5), at::full({5}, 1.0f)));
    EXPECT_TRUE(at::equal(params[0].narrow(0, 5, 5), at::full({5}, 2.0f)));
    EXPECT_TRUE(at::equal(params[2].narrow(0, 0, 2), at::full({2}, 1.0f)));
    reducer.release_unit(0); // kept whole: nothing happens
    EXPECT_EQ(params[0].storage().nbytes(), 10u * 4);
    // Written while whole (a checkpoint loaded): the shards follow.
    {
      at::NoGradGuard no_grad;
      params[0].fill_(7.0f);
    }
    reducer.set_whole(false, /*written=*/true);
    EXPECT_EQ(params[0].storage().nbytes(), 0u);
    reducer.gather_unit(0);
    EXPECT_TRUE(at::equal(params[0], at::full({10}, 7.0f)));
  });
}

// The end of training, and the block-at-a-time reads: try_whole makes every
// unit whole where both ranks can hold it; where one cannot, both free
// every buffer and keep their shards (a rank whose error is not a
// shortage throws it). A visit that throws leaves its unit freed and its
// shards as they were, even when it wrote the parameters.
TEST(ShardedReducer, Stage3IsMadeWholeOnlyWhereEveryRankCanHoldIt) {
  two_ranks([](int r, std::shared_ptr<ProcessGroup> g) {
    std::vector<at::Tensor> params = make_params();
    {
      at::NoGradGuard no_grad;
      params[0].copy_(at::arange(10, at::kFloat));
      params[1].copy_(at::arange(30, at::kFloat).reshape({5, 6}) * 0.5);
    }
    const at::Tensor first = params[0].detach().clone();
    const at::Tensor second = params[1].detach().clone();
    ShardOptions o = options(3, true);
    o.buckets.bucket_bytes = 1u << 20;
    o.units = {0, 1, -1};
    ShardedReducer reducer(g, params, {}, o);
    std::vector<at::Tensor> shards;
    for (const auto& s : reducer.shards()) {
      shards.push_back(s.tensor.detach().clone());
    }
    auto shards_kept = [&] {
      for (std::size_t b = 0; b < shards.size(); ++b) {
        EXPECT_TRUE(at::equal(reducer.shards()[b].tensor, shards[b])) << b;
      }
    };

    EXPECT_FALSE(reducer.try_whole([r] {
      TORCH_CHECK_WITH(OutOfMemoryError, r != 1, "rank 1 is short");
    }));
    EXPECT_EQ(params[0].storage().nbytes(), 0u);
    EXPECT_EQ(params[1].storage().nbytes(), 0u);
    shards_kept();
    // Another error on rank 1 is its own to throw; rank 0 stays sharded.
    if (r == 1) {
      EXPECT_THROW(
          reducer.try_whole([] { throw std::runtime_error("not memory"); }),
          std::runtime_error);
    } else {
      EXPECT_FALSE(reducer.try_whole());
    }
    EXPECT_EQ(params[0].storage().nbytes(), 0u);

    EXPECT_THROW(
        reducer.each_unit_whole(
            [](std::size_t, const std::vector<at::Tensor>& whole) {
              at::Tensor(whole.front()).fill_(9.0f);
              throw std::runtime_error("the visit failed");
            },
            /*written=*/true),
        std::runtime_error);
    EXPECT_EQ(params[0].storage().nbytes(), 0u);
    shards_kept();

    EXPECT_TRUE(reducer.try_whole());
    EXPECT_TRUE(at::equal(params[0], first));
    EXPECT_TRUE(at::equal(params[1], second));
    reducer.release_unit(0); // whole from here on
    EXPECT_EQ(params[0].storage().nbytes(), 10u * 4);
  });
}

} // namespace hotloop::parallel
