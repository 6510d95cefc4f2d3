#include <gtest/gtest.h>

#include <limits>

#include "hotloop/env/host_probe.h"
#include "support/temp_dir.h"

namespace hotloop::env {

using test::TempDir;

namespace {

// Two packages of two cores, each core with two hyperthreads: 8 logical CPUs, 4
// cores.
std::string cpuinfo_2x2x2() {
  std::string out;
  int cpu = 0;
  for (int package = 0; package < 2; ++package) {
    for (int thread = 0; thread < 2; ++thread) {
      for (int core = 0; core < 2; ++core) {
        out += "processor\t: " + std::to_string(cpu++) +
            "\nmodel name\t: Test Xeon 9000\nphysical id\t: " +
            std::to_string(package) + "\ncore id\t\t: " + std::to_string(core) +
            "\n\n";
      }
    }
  }
  return out;
}

} // namespace

TEST(HostProbe, ReadsCpusCoresAndMemoryFromProc) {
  TempDir dir;
  dir.write("proc/cpuinfo", cpuinfo_2x2x2());
  dir.write(
      "proc/meminfo",
      "MemTotal:       263840568 kB\nMemFree:  1 kB\nMemAvailable:   250000000 kB\n");
  dir.write("sys/cpu0/cpufreq/scaling_governor", "powersave\n");
  dir.write("sys/cpu1/cpufreq/scaling_governor", "performance\n");
  dir.write("sys/cpufreq/ignored", "x\n"); // not a cpuN folder
  HostProbeOptions o;
  o.proc_dir = (dir.path() / "proc").string();
  o.sys_cpu_dir = (dir.path() / "sys").string();
  o.run_dir = (dir.path() / "runs" / "not-yet")
                  .string(); // measured at its nearest existing ancestor
  const HostFacts h = probe_host(o);
  EXPECT_EQ(h.cpu_model, "Test Xeon 9000");
  EXPECT_EQ(h.logical_cpus, 8u);
  EXPECT_EQ(h.physical_cores, 4u);
  EXPECT_GE(h.usable_cpus, 1u);
  EXPECT_GE(h.torch_intra_op_threads, 1);
  EXPECT_EQ(*h.memory_total_bytes, 263840568ULL * 1024);
  EXPECT_EQ(*h.memory_available_bytes, 250000000ULL * 1024);
  EXPECT_EQ(
      *h.cpu_governors, (std::vector<std::string>{"performance", "powersave"}));
  EXPECT_TRUE(h.run_dir_free_bytes.has_value());
}

TEST(HostProbe, MissingFilesBecomeMissingFactsNotErrors) {
  TempDir dir;
  HostProbeOptions o;
  o.proc_dir = (dir.path() / "proc").string();
  o.sys_cpu_dir = (dir.path() / "sys").string();
  o.shm_dir = (dir.path() / "no-shm").string();
  const HostFacts h = probe_host(o);
  EXPECT_EQ(h.cpu_model, "");
  EXPECT_FALSE(h.memory_total_bytes.has_value());
  EXPECT_FALSE(h.cpu_governors.has_value());
  EXPECT_FALSE(h.shm_total_bytes.has_value());
}

TEST(HostProbe, ReadsThisMachine) {
  const HostFacts h = probe_host(HostProbeOptions{});
  EXPECT_GE(h.logical_cpus, 1u);
  ASSERT_TRUE(h.memory_total_bytes.has_value());
  EXPECT_GT(*h.memory_total_bytes, 0u);
  ASSERT_TRUE(h.memlock_limit_bytes.has_value());
}

} // namespace hotloop::env
