// doctor on the machine the tests run on, with the real NVML and the real CUDA:
// on the development and CI machines (no GPU) this is the CPU-only path; on a
// GPU machine (scripts/gpu-check) it checks that the real driver, CUDA and
// LibTorch agree.
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include "support/doctor_fixtures.h"

namespace hotloop::env {

using test::check;

namespace {

DoctorOptions real_machine() {
  DoctorOptions o;
  o.nvml_library = "libnvidia-ml.so.1"; // ignore HOTLOOP_NVML_LIB: this test is
                                        // about the real driver
  return o;
}

} // namespace

TEST(DoctorThisMachine, CollectsFactsAndGivesAVerdictWithoutThrowing) {
  const Report r = evaluate(collect(real_machine()), {});
  EXPECT_FALSE(r.checks.empty());
  EXPECT_EQ(check(r, "framework.libtorch").status, Status::Pass);
  if (!torch::cuda::is_available() &&
      check(r, "nvml.driver").status == Status::Skip) {
    EXPECT_EQ(
        r.verdict, Verdict::CpuOnly); // no driver, no GPU: CPU-only, exit 0
    EXPECT_EQ(exit_code(r), 0);
  }
}

TEST(DoctorThisMachine, RealGpuIsSeenByNvmlAndCudaAndRunsAKernel) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  const DoctorFacts f = collect(real_machine());
  const Report r = evaluate(f, {});
  for (const char* id :
       {"nvml.driver",
        "cuda.driver_compat",
        "cuda.available",
        "cuda.kernel",
        "cuda.cudnn",
        "gpu0.inventory",
        "gpu0.arch"}) {
    EXPECT_EQ(check(r, id).status, Status::Pass)
        << id << ": " << check(r, id).summary;
  }
  EXPECT_NE(r.verdict, Verdict::Fail) << to_text(r, false);
  // CUDA's device UUIDs, formatted as NVML formats them, name GPUs NVML sees.
  ASSERT_FALSE(f.torch.cuda.devices.empty());
  for (const auto& d : f.torch.cuda.devices) {
    bool found = false;
    for (const auto& g : f.nvml.gpus) {
      found |= g.uuid.has_value() && *g.uuid == d.uuid;
    }
    EXPECT_TRUE(found) << "CUDA device " << d.index << " has UUID " << d.uuid
                       << " that NVML does not list";
  }
}

} // namespace hotloop::env
