// doctor's host verdicts.
#include <gtest/gtest.h>

#include "support/doctor_fixtures.h"

namespace hotloop::env {

using test::check;
using test::facts;
using test::healthy_host;

namespace {

Report with_host(
    const HostFacts& h,
    const std::string& scenario = "healthy",
    TorchFacts torch = test::gpu_torch_facts()) {
  DoctorFacts f = facts(scenario, std::move(torch));
  f.host = h;
  return evaluate(f, {});
}

} // namespace

TEST(DoctorHost, OneIntraOpThreadOnAMultiCoreMachineWarnsWithTheFix) {
  HostFacts h = healthy_host();
  h.logical_cpus = h.usable_cpus = 2;
  h.physical_cores = 2;
  h.torch_intra_op_threads = 1;
  const Check& c = check(with_host(h), "host.cpu");
  EXPECT_EQ(c.status, Status::Warn);
  EXPECT_NE(c.summary.find("1 intra-op thread"), std::string::npos)
      << c.summary;
  EXPECT_NE(c.fix.find("OMP_NUM_THREADS=2"), std::string::npos) << c.fix;
}

TEST(DoctorHost, ThreadsEqualToPhysicalCoresPassEvenWithHyperthreads) {
  HostFacts h = healthy_host(); // 32 logical, 16 cores, 16 threads
  EXPECT_EQ(check(with_host(h), "host.cpu").status, Status::Pass);
}

TEST(DoctorHost, AffinityLimitsTheCoresThatCount) {
  HostFacts h = healthy_host();
  h.usable_cpus = 4; // e.g. taskset or a cgroup cpuset
  h.torch_intra_op_threads = 4;
  EXPECT_EQ(check(with_host(h), "host.cpu").status, Status::Pass);
}

TEST(DoctorHost, SmallShmWarnsAboutContainers) {
  HostFacts h = healthy_host();
  h.shm_total_bytes = Probed<std::uint64_t>::of(64ULL << 20);
  const Check& c = check(with_host(h), "host.shm");
  EXPECT_EQ(c.status, Status::Warn);
  EXPECT_NE(c.fix.find("--shm-size"), std::string::npos);
}

TEST(DoctorHost, LowMemlockWarnsOnlyWithAGpu) {
  HostFacts h = healthy_host();
  h.memlock_limit_bytes = Probed<std::uint64_t>::of(8ULL << 20);
  EXPECT_EQ(check(with_host(h), "host.memlock").status, Status::Warn);
  const Check& cpu_only = check(
      with_host(h, "no_gpu", test::no_cuda_torch_facts()), "host.memlock");
  EXPECT_EQ(cpu_only.status, Status::Pass);
  EXPECT_NE(
      cpu_only.summary.find("matters only with a GPU"), std::string::npos);
}

TEST(DoctorHost, PowersaveGovernorWarnsAndMissingGovernorSkips) {
  HostFacts h = healthy_host();
  h.cpu_governors =
      Probed<std::vector<std::string>>::of({"performance", "powersave"});
  const Check& c = check(with_host(h), "host.governor");
  EXPECT_EQ(c.status, Status::Warn);
  EXPECT_NE(
      c.fix.find("cpupower frequency-set -g performance"), std::string::npos);
  h.cpu_governors = Probed<std::vector<std::string>>::missing("no cpufreq");
  EXPECT_EQ(check(with_host(h), "host.governor").status, Status::Skip);
}

TEST(DoctorHost, DiskNearlyFullWarnsThenFails) {
  HostFacts h = healthy_host();
  h.run_dir_free_bytes = Probed<std::uint64_t>::of(5ULL << 30);
  EXPECT_EQ(check(with_host(h), "host.disk").status, Status::Warn);
  h.run_dir_free_bytes = Probed<std::uint64_t>::of(500ULL << 20);
  const Report r = with_host(h);
  EXPECT_EQ(check(r, "host.disk").status, Status::Fail);
  EXPECT_EQ(exit_code(r), 1);
}

TEST(DoctorHost, HostMemoryBelowGpuMemoryWarns) {
  HostFacts h = healthy_host();
  h.memory_total_bytes =
      Probed<std::uint64_t>::of(64ULL << 30); // the H200 has 140 GiB
  h.memory_available_bytes = Probed<std::uint64_t>::of(60ULL << 30);
  const Check& c = check(with_host(h), "host.memory");
  EXPECT_EQ(c.status, Status::Warn);
  EXPECT_NE(c.summary.find("less than the GPUs'"), std::string::npos)
      << c.summary;
}

TEST(DoctorHost, CpuOnlyMachineWithHostWarningsIsStillCpuOnlyAndExitsZero) {
  HostFacts h = healthy_host();
  h.shm_total_bytes = Probed<std::uint64_t>::of(64ULL << 20);
  DoctorFacts f = facts("no_gpu", test::no_cuda_torch_facts());
  f.host = h;
  const Report r = evaluate(f, {});
  EXPECT_EQ(r.verdict, Verdict::CpuOnly);
  EXPECT_EQ(exit_code(r), 0);
}

} // namespace hotloop::env
