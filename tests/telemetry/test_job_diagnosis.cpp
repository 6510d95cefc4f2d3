// Each verdict `hotloop watch` gives from outside a job, from the window it
// names, and their order. diagnose_job() is pure: no process or GPU needed.
#include <gtest/gtest.h>

#include "hotloop/env/nvml_api.h"
#include "hotloop/telemetry/job_diagnosis.h"

namespace hotloop::telemetry {
namespace {

// 10 s of a job whose kernels keep GPU 0 busy 95% of the time, its main
// process at 40% of a core, two loader workers at 30%, the machine calm.
JobWindowInput busy_job() {
  JobWindowInput w;
  w.from_s = 0;
  w.to_s = 10;
  w.samples = 10;
  w.nvml = true;
  w.gpus_on_machine = 1;
  w.holds_gpu = true;
  GpuWindow g;
  g.samples = 10;
  g.util_mean = 96;
  g.sm_clock_mean = 1980;
  g.sm_clock_max = 1980;
  g.memory_total = 140ull << 30;
  g.memory_used_last = 20ull << 30;
  w.gpu = g;
  w.job_sm_mean = 95;
  w.others_sm_mean = 0;
  w.job_memory = 20ull << 30;
  w.memory_history = {20ull << 30};
  w.main_pid = 100;
  w.main_name = "python";
  w.main_cpu_mean = 40;
  w.main_runnable_mean = 42;
  w.helpers = {
      {101, "pt_data_worker", 30, 31}, {102, "pt_data_worker", 30, 31}};
  w.host_cpu_mean = 20;
  w.host_cores = 16;
  return w;
}

std::string verdict(const JobWindowInput& w) {
  return diagnose_job(w).primary().verdict;
}

TEST(JobDiagnosis, HealthyWhenTheJobsKernelsKeepTheGpuBusy) {
  const auto d = diagnose_job(busy_job());
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.primary().verdict, "healthy");
  EXPECT_NE(
      d.primary().evidence.find("the job's kernels ran 95%"),
      std::string::npos);
}

TEST(JobDiagnosis, CpuOnlyNamesWhyForEachCause) {
  auto w = busy_job();
  w.holds_gpu = false;
  EXPECT_EQ(verdict(w), "cpu-only");
  EXPECT_NE(
      diagnose_job(w).primary().evidence.find(
          "holds memory on none of the 1 GPU"),
      std::string::npos);
  w.cuda_hidden = true;
  EXPECT_NE(
      diagnose_job(w).primary().fix.find("CUDA_VISIBLE_DEVICES"),
      std::string::npos);
  w.nvml = false;
  w.nvml_error = "cannot load NVML";
  EXPECT_NE(
      diagnose_job(w).primary().evidence.find("no NVIDIA driver"),
      std::string::npos);
}

TEST(JobDiagnosis, InputBoundWhenTheGpuIdlesAndWorkersAreSaturated) {
  auto w = busy_job();
  w.job_sm_mean = 30;
  w.helpers[0].cpu_mean = 97;
  const auto d = diagnose_job(w);
  EXPECT_EQ(d.primary().verdict, "input-bound");
  EXPECT_NE(d.primary().evidence.find("1 of its 2 helper"), std::string::npos);
  EXPECT_NE(d.primary().evidence.find("pid 101"), std::string::npos);
  // The workers are the limit, not the GPU: no under-used beside it.
  for (const auto& f : d.findings) {
    EXPECT_NE(f.verdict, "under-used");
  }
}

TEST(JobDiagnosis, AWorkerWaitingForACoreIsSaturatedToo) {
  // On a crowded machine a worker gets 50% of a core but is runnable 98%
  // of the time: it wants a whole core.
  auto w = busy_job();
  w.job_sm_mean = 30;
  w.helpers[0].cpu_mean = 50;
  w.helpers[0].runnable_mean = 98;
  EXPECT_EQ(verdict(w), "input-bound");
  EXPECT_NE(
      diagnose_job(w).primary().evidence.find("runnable 98%"),
      std::string::npos);
  w.helpers[0].runnable_mean = 60;
  EXPECT_NE(verdict(w), "input-bound");
}

TEST(
    JobDiagnosis,
    OnTheCpuAWaitingMainProcessAndSaturatedWorkersAreInputBoundToo) {
  auto w = busy_job();
  w.holds_gpu = false;
  w.main_cpu_mean = 20;
  w.main_runnable_mean = 22;
  w.helpers[0].cpu_mean = 95;
  auto d = diagnose_job(w);
  ASSERT_EQ(d.findings.size(), 2u);
  EXPECT_EQ(d.findings[0].verdict, "cpu-only");
  EXPECT_EQ(d.findings[1].verdict, "input-bound");
  EXPECT_NE(d.findings[1].evidence.find("on the CPU"), std::string::npos);
  // A main process busy with its own math is not waiting for the loader.
  w.main_cpu_mean = 150;
  w.main_runnable_mean = 95;
  d = diagnose_job(w);
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.primary().verdict, "cpu-only");
}

TEST(JobDiagnosis, InputBoundOnIoWaitWithoutSaturatedWorkers) {
  auto w = busy_job();
  w.job_sm_mean = 30;
  w.host_iowait_mean = 35;
  w.read_bytes_per_s = 400e6;
  const auto d = diagnose_job(w);
  EXPECT_EQ(d.primary().verdict, "input-bound");
  EXPECT_NE(d.primary().evidence.find("waited on I/O 35%"), std::string::npos);
  EXPECT_NE(d.primary().fix.find("disk"), std::string::npos);
}

TEST(JobDiagnosis, HostBoundWhenTheMainThreadIsSaturated) {
  auto w = busy_job();
  w.job_sm_mean = 25;
  w.main_cpu_mean = 180; // intra-op threads: not the measure
  w.main_runnable_mean = 99;
  EXPECT_EQ(verdict(w), "host-bound");
  // A busy process whose main thread idles is not host-bound.
  w.main_runnable_mean = 30;
  EXPECT_EQ(verdict(w), "under-used");
}

TEST(JobDiagnosis, UnderUsedWhenNothingOnTheHostIsTheLimit) {
  auto w = busy_job();
  w.job_sm_mean = 35;
  const auto d = diagnose_job(w);
  EXPECT_EQ(d.primary().verdict, "under-used");
  EXPECT_NE(d.primary().fix.find("larger batch"), std::string::npos);
}

// The thresholds at their edges: a job's SM share of 80% is busy, 79.9% is
// not; 95% of the GPU's memory (133 of 140 GiB, exact) is near full, 132 GiB
// is not; a helper at 80% of a core is saturated (the job input-bound),
// 79.9% is not; the machine's I/O wait counts from 10%.
TEST(JobDiagnosis, EachThresholdAtItsEdge) {
  auto w = busy_job();
  w.job_sm_mean = 80;
  EXPECT_EQ(verdict(w), "healthy");
  w.job_sm_mean = 79.9;
  EXPECT_EQ(verdict(w), "under-used");

  w = busy_job();
  w.gpu->memory_used_last = 133ull << 30;
  EXPECT_EQ(verdict(w), "memory-near-full");
  w.gpu->memory_used_last = 132ull << 30;
  EXPECT_EQ(verdict(w), "healthy");

  w = busy_job();
  w.job_sm_mean = 30;
  w.helpers = {{101, "pt_data_worker", 80, 0}};
  EXPECT_EQ(verdict(w), "input-bound");
  w.helpers = {{101, "pt_data_worker", 79.9, 0}};
  EXPECT_EQ(verdict(w), "under-used");

  w = busy_job(); // I/O wait of 10% is waiting on disk, 9.9% is not
  w.job_sm_mean = 30;
  w.host_iowait_mean = 10;
  EXPECT_EQ(verdict(w), "input-bound");
  w.host_iowait_mean = 9.9;
  EXPECT_EQ(verdict(w), "under-used");
}

TEST(JobDiagnosis, TheWholeGpusUtilizationStandsInWithoutPerProcessShares) {
  auto w = busy_job();
  w.job_sm_mean.reset();
  w.gpu->util_mean = 30;
  EXPECT_EQ(verdict(w), "under-used");
  EXPECT_NE(
      diagnose_job(w).primary().evidence.find("the GPU was busy 30%"),
      std::string::npos);
}

TEST(JobDiagnosis, MemoryNearFullAndGrowing) {
  auto w = busy_job();
  w.gpu->memory_used_last = 137ull << 30;
  EXPECT_EQ(verdict(w), "memory-near-full");
  w = busy_job();
  w.memory_history = {10ull << 30, 11ull << 30, 12ull << 30, 13ull << 30};
  EXPECT_EQ(verdict(w), "memory-growing");
  w.memory_history = {10ull << 30, 11ull << 30, 11ull << 30, 13ull << 30};
  EXPECT_EQ(verdict(w), "healthy");
}

TEST(JobDiagnosis, SharesThrottlingAndOtherProcessesWithTrainingRuns) {
  auto w = busy_job();
  w.gpu->slowing_mask = nvml::kThrottleHwThermalSlowdown;
  w.gpu->slowed_samples = 8;
  w.gpu->sm_clock_mean = 1400;
  EXPECT_EQ(verdict(w), "throttled-thermal");
  w = busy_job();
  w.gpu->other_processes = {{4242, "other_train", 8ull << 30}};
  w.others_sm_mean = 20;
  const auto d = diagnose_job(w);
  EXPECT_EQ(d.primary().verdict, "other-process");
  EXPECT_NE(
      d.primary().evidence.find("other_train (pid 4242"), std::string::npos);
  EXPECT_NE(d.primary().evidence.find("ran 20%"), std::string::npos);
}

TEST(JobDiagnosis, PcieNarrowedByWidthAlwaysByGenerationOnlyWhenBusy) {
  auto w = busy_job();
  w.pcie_gen = 5;
  w.pcie_max_gen = 5;
  w.pcie_width = 8;
  w.pcie_max_width = 16;
  EXPECT_EQ(verdict(w), "pcie-narrowed");
  w.pcie_width = 16;
  w.pcie_gen = 1; // a busy GPU at gen 1
  EXPECT_EQ(verdict(w), "pcie-narrowed");
  w.job_sm_mean = 10; // idle links drop their generation to save power
  w.main_runnable_mean = 99;
  EXPECT_EQ(verdict(w), "host-bound");
  for (const auto& f : diagnose_job(w).findings) {
    EXPECT_NE(f.verdict, "pcie-narrowed");
  }
}

TEST(JobDiagnosis, TheMostCostlyComesFirst) {
  auto w = busy_job();
  w.job_sm_mean = 20;
  w.helpers[0].cpu_mean = 99;
  w.gpu->other_processes = {{4242, "other", 1ull << 30}};
  w.gpu->memory_used_last = 139ull << 30;
  const auto d = diagnose_job(w);
  ASSERT_GE(d.findings.size(), 3u);
  EXPECT_EQ(d.findings[0].verdict, "memory-near-full");
  EXPECT_EQ(d.findings[1].verdict, "input-bound");
  EXPECT_EQ(d.findings[2].verdict, "other-process");
}

} // namespace
} // namespace hotloop::telemetry
