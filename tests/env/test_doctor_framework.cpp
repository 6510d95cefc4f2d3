// doctor's verdicts on the driver, CUDA and LibTorch, one scenario each.
#include <gtest/gtest.h>

#include "hotloop/env/doctor_checks.h"
#include "support/doctor_fixtures.h"

namespace hotloop::env {

using test::check;
using test::facts;
using test::gpu_torch_facts;
using test::no_cuda_torch_facts;

TEST(DoctorFramework, HealthyGpuMachinePassesEveryCheck) {
  const Report r = evaluate(facts("healthy"), {});
  for (const auto& c : r.checks) {
    EXPECT_EQ(c.status, Status::Pass) << c.id << ": " << c.summary;
  }
  EXPECT_EQ(r.verdict, Verdict::Pass);
  EXPECT_EQ(exit_code(r), 0);
  EXPECT_NE(
      check(r, "nvml.driver").summary.find("580.159.04"), std::string::npos);
  EXPECT_NE(
      check(r, "cuda.driver_compat").summary.find("CUDA 13.0"),
      std::string::npos);
}

TEST(
    DoctorFramework,
    DriverTooOldForLibTorchsCudaFailsNamingBothVersionsAndTheMinimumDriver) {
  const Report r = evaluate(facts("old_driver"), {});
  const Check& c = check(r, "cuda.driver_compat");
  EXPECT_EQ(c.status, Status::Fail);
  EXPECT_NE(c.summary.find("535.104.05"), std::string::npos) << c.summary;
  EXPECT_NE(c.summary.find("12.2"), std::string::npos) << c.summary;
  EXPECT_NE(c.summary.find("13.0"), std::string::npos) << c.summary;
  EXPECT_NE(c.fix.find("580.65.06"), std::string::npos) << c.fix;
  EXPECT_EQ(c.facts["minimum_driver"], "580.65.06");
  EXPECT_EQ(r.verdict, Verdict::Fail);
  EXPECT_EQ(exit_code(r), 1);
}

TEST(DoctorFramework, OlderMinorVersionOfTheSameMajorWarns) {
  DoctorFacts f = facts("healthy");
  f.torch.built.runtime_version =
      13020; // a LibTorch built with CUDA 13.2 on a 13.0 driver
  const Check& c = check(evaluate(f, {}), "cuda.driver_compat");
  EXPECT_EQ(c.status, Status::Warn);
  EXPECT_NE(c.summary.find("minor-version compatibility"), std::string::npos);
}

TEST(DoctorFramework, NvmlSeesAGpuThatCudaCannotUseFailsWithLikelyCauses) {
  test::ScopedEnv visible("CUDA_VISIBLE_DEVICES", std::nullopt);
  DoctorFacts f = facts(
      "healthy", no_cuda_torch_facts("CUDA driver initialization failed"));
  f.torch.missing_device_nodes = {"/dev/nvidia-uvm"};
  const Report r = evaluate(f, {});
  const Check& c = check(r, "cuda.available");
  EXPECT_EQ(c.status, Status::Fail);
  EXPECT_NE(c.summary.find("NVML sees 1 GPU"), std::string::npos) << c.summary;
  EXPECT_NE(
      c.summary.find("CUDA driver initialization failed"), std::string::npos)
      << c.summary;
  EXPECT_NE(c.fix.find("modprobe nvidia-uvm"), std::string::npos) << c.fix;
  EXPECT_EQ(r.verdict, Verdict::Fail);
  EXPECT_EQ(exit_code(r), 1);
}

TEST(DoctorFramework, CudaVisibleDevicesHidingEveryGpuIsNamedAsTheCause) {
  DoctorFacts f = facts("healthy", no_cuda_torch_facts());
  f.torch.cuda_visible_devices = "";
  const Check& c = check(evaluate(f, {}), "cuda.available");
  EXPECT_EQ(c.status, Status::Fail);
  EXPECT_NE(c.fix.find("CUDA_VISIBLE_DEVICES=''"), std::string::npos) << c.fix;
}

TEST(DoctorFramework, CpuOnlyLibTorchOnAGpuMachineSaysToInstallACudaBuild) {
  TorchFacts t = no_cuda_torch_facts("LibTorch was built without CUDA");
  t.built = {};
  const Check& c = check(evaluate(facts("healthy", t), {}), "cuda.available");
  EXPECT_EQ(c.status, Status::Fail);
  EXPECT_NE(c.fix.find("CPU-only build"), std::string::npos) << c.fix;
}

TEST(DoctorFramework, NoDriverAtAllIsACpuOnlyVerdictWithExitCodeZero) {
  DoctorFacts f = facts("healthy", no_cuda_torch_facts());
  f.nvml = probe_nvml("/nonexistent/libnvidia-ml.so.1");
  const Report r = evaluate(f, {});
  EXPECT_EQ(check(r, "nvml.driver").status, Status::Skip);
  EXPECT_EQ(check(r, "cuda.available").status, Status::Skip);
  EXPECT_EQ(check(r, "cuda.driver_compat").status, Status::Skip);
  EXPECT_EQ(check(r, "cuda.kernel").status, Status::Skip);
  EXPECT_EQ(
      check(r, "cuda.cudnn").status, Status::Pass); // cuDNN loads without a GPU
  EXPECT_EQ(r.verdict, Verdict::CpuOnly);
  EXPECT_EQ(exit_code(r), 0);
  for (const auto& c : r.checks) {
    EXPECT_EQ(c.id.rfind("gpu", 0), std::string::npos)
        << "no GPU checks without a GPU: " << c.id;
  }
}

TEST(DoctorFramework, DriverInstalledButNotLoadedFails) {
  DoctorFacts f = facts("driver_not_loaded", no_cuda_torch_facts());
  const Report r = evaluate(f, {});
  const Check& c = check(r, "nvml.driver");
  EXPECT_EQ(c.status, Status::Fail);
  EXPECT_NE(c.summary.find("Driver Not Loaded"), std::string::npos)
      << c.summary;
  EXPECT_NE(c.fix.find("lsmod"), std::string::npos) << c.fix;
  EXPECT_EQ(r.verdict, Verdict::Fail);
}

TEST(DoctorFramework, DriverWithoutGpusIsCpuOnly) {
  const Report r = evaluate(facts("no_gpu", no_cuda_torch_facts()), {});
  EXPECT_EQ(check(r, "nvml.driver").status, Status::Pass);
  EXPECT_EQ(r.verdict, Verdict::CpuOnly);
}

TEST(DoctorFramework, AKernelThatDoesNotRunFailsAndPointsAtTheArchitecture) {
  TorchFacts t = gpu_torch_facts();
  t.kernel_probe_errors = {
      "CUDA error: no kernel image is available for execution on the device"};
  const Check& c = check(evaluate(facts("healthy", t), {}), "cuda.kernel");
  EXPECT_EQ(c.status, Status::Fail);
  EXPECT_NE(c.fix.find("architecture"), std::string::npos);
}

TEST(DoctorFramework, MissingCudnnFailsAndMissingNcclWarnsOnAGpuMachine) {
  TorchFacts t = gpu_torch_facts();
  t.cudnn = {std::nullopt, "libcudnn.so.9: cannot open shared object file"};
  t.nccl = {std::nullopt, "libnccl.so.2: cannot open shared object file"};
  const Report r = evaluate(facts("healthy", t), {});
  EXPECT_EQ(check(r, "cuda.cudnn").status, Status::Fail);
  EXPECT_EQ(check(r, "cuda.nccl").status, Status::Warn);
}

TEST(DoctorFramework, CudaWorkingWithoutNvmlWarnsAboutTelemetry) {
  DoctorFacts f = facts("healthy");
  f.nvml = probe_nvml("/nonexistent/libnvidia-ml.so.1");
  const Report r = evaluate(f, {});
  EXPECT_EQ(check(r, "cuda.available").status, Status::Warn);
  EXPECT_EQ(r.verdict, Verdict::Warn);
}

TEST(MatchingArch, MachineCodeRunsOnTheSameMajorWithAnEqualOrHigherMinor) {
  using checks::matching_arch;
  const std::string list = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120";
  EXPECT_EQ(matching_arch(list, 9, 0), "sm_90");
  EXPECT_EQ(matching_arch(list, 8, 9), "sm_80"); // an Ada GPU runs Ampere code
  EXPECT_EQ(matching_arch(list, 12, 1), "sm_120");
  EXPECT_EQ(
      matching_arch(list, 7, 0),
      std::nullopt); // Volta: dropped from CUDA 13 builds
  EXPECT_EQ(matching_arch("sm_90a", 9, 0), "sm_90a");
  EXPECT_EQ(
      matching_arch("sm_90a", 10, 0),
      std::nullopt); // arch-specific code runs on its own chip only
  EXPECT_EQ(
      matching_arch("sm_80 compute_80", 9, 0),
      "compute_80"); // PTX, JIT-compiled
  EXPECT_EQ(matching_arch("", 9, 0), std::nullopt);
}

TEST(DoctorFramework, GpuOutsideLibTorchsArchitecturesFails) {
  TorchFacts t = gpu_torch_facts();
  t.cuda_arch_list = "sm_80 sm_86";
  const Check& c = check(evaluate(facts("healthy", t), {}), "gpu0.arch");
  EXPECT_EQ(c.status, Status::Fail);
  EXPECT_NE(c.summary.find("9.0"), std::string::npos);
  EXPECT_NE(c.fix.find("sm_90"), std::string::npos);
}

} // namespace hotloop::env
