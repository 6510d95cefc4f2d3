// cuda_info.h's memory helpers, each called first thing in its process (ctest
// runs every test in a process of its own): LibTorch's caching allocator
// throws "Invalid device argument 0: did you call init?" when nothing has
// initialized CUDA yet, which is how `tune batch --device cuda` used to end
// at its first call. Without a GPU the helpers answer zeros; on a GPU they
// answer the device's figures.
#include <gtest/gtest.h>

#include <ATen/ops/empty.h>
#include <torch/cuda.h>

#include "hotloop/cuda/cuda_info.h"

namespace hotloop::cuda {
namespace {

bool have_gpu() {
  return torch::cuda::is_available();
}

TEST(CudaMemoryHelpers, MemoryStatsIsTheFirstCall) {
  const MemoryStats m = memory_stats(0);
  if (!have_gpu()) {
    EXPECT_EQ(m.allocated, 0u);
    EXPECT_EQ(m.reserved, 0u);
    return;
  }
  const at::Tensor t = at::empty(
      {1 << 20}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  EXPECT_GE(memory_stats(0).allocated, 4u << 20);
}

TEST(CudaMemoryHelpers, ResetPeakMemoryIsTheFirstCall) {
  EXPECT_NO_THROW(reset_peak_memory(0));
  if (have_gpu()) {
    EXPECT_EQ(memory_stats(0).peak_allocated, 0u);
  }
}

TEST(CudaMemoryHelpers, SetMemoryFractionIsTheFirstCall) {
  EXPECT_NO_THROW(set_memory_fraction(0, 0.5));
}

TEST(CudaMemoryHelpers, EmptyCacheIsTheFirstCall) {
  EXPECT_NO_THROW(empty_cache());
}

TEST(CudaMemoryHelpers, AllocatorLayoutIsTheFirstCall) {
  const AllocatorLayout l = allocator_layout(0);
  if (!have_gpu()) {
    EXPECT_EQ(l.segments, 0u);
  }
}

TEST(CudaMemoryHelpers, DeviceMemoryIsTheFirstCall) {
  const DeviceMemory d = device_memory(0);
  if (have_gpu()) {
    EXPECT_GT(d.total, 0u);
    EXPECT_LE(d.free, d.total);
  } else {
    EXPECT_EQ(d.total, 0u);
  }
}

TEST(CudaMemoryHelpers, RngStateIsTheFirstCall) {
  const std::vector<std::uint8_t> state = rng_state(0);
  if (have_gpu()) {
    EXPECT_FALSE(state.empty());
    EXPECT_NO_THROW(set_rng_state(0, state));
  } else {
    EXPECT_TRUE(state.empty());
  }
}

TEST(CudaMemoryHelpers, SetRngStateIsTheFirstCall) {
  if (have_gpu()) {
    GTEST_SKIP() << "needs a state read first (RngStateIsTheFirstCall)";
  }
  EXPECT_NO_THROW(set_rng_state(0, {1, 2, 3}));
}

} // namespace
} // namespace hotloop::cuda
