// Telling this process from the others NVML lists on its GPU. Outside a
// container NVML's pids are this process's; inside one with its own PID
// namespace they are the host's, so a run matched by pid would list itself
// as "another process" on its own GPU: there it is matched by the memory it
// holds, and when that cannot tell, nothing is blamed.
#include <gtest/gtest.h>

#include "hotloop/env/own_process.h"
#include "hotloop/telemetry/sampler.h"

namespace hotloop::env {
namespace {

constexpr std::uint64_t GiB = 1ULL << 30;

std::vector<unsigned int> pids(const std::vector<GpuProcess>& v) {
  std::vector<unsigned int> out;
  for (const auto& p : v) {
    out.push_back(p.pid);
  }
  return out;
}

ProcessIdentity in_container(std::uint64_t reserved) {
  ProcessIdentity me;
  me.pid = 7; // the container's number for this process
  me.host_pids = false;
  me.on_this_gpu = true;
  me.reserved_bytes = reserved;
  return me;
}

TEST(OwnProcess, WithTheHostsPidsThisProcessIsLeftOutByPid) {
  ProcessIdentity me;
  me.pid = 4242;
  me.on_this_gpu = true;
  const OtherProcesses o = other_processes(
      {{4242, "hotloop", 20 * GiB}, {5151, "python3", 8 * GiB}}, me);
  EXPECT_EQ(pids(o.processes), (std::vector<unsigned int>{5151}));
  EXPECT_EQ(o.unknown, "");
}

TEST(OwnProcess, InAContainerTheOnlyProcessOnTheRunsGpuIsTheRun) {
  const OtherProcesses o =
      other_processes({{91234, "", 20 * GiB}}, in_container(19 * GiB));
  EXPECT_TRUE(o.processes.empty());
  EXPECT_EQ(o.unknown, "");
}

TEST(OwnProcess, InAContainerTheRunIsTheProcessHoldingItsMemory) {
  // Reserved 19 GiB: NVML's 19.5 GiB (the context on top) is this run.
  const OtherProcesses o = other_processes(
      {{91234, "", 8 * GiB}, {91300, "", 19 * GiB + GiB / 2}},
      in_container(19 * GiB));
  EXPECT_EQ(pids(o.processes), (std::vector<unsigned int>{91234}));
  EXPECT_EQ(o.unknown, "");
}

TEST(OwnProcess, InAContainerTwoLikelyMatchesMeanCannotTellNotBlame) {
  const OtherProcesses o = other_processes(
      {{91234, "", 19 * GiB + GiB / 4}, {91300, "", 19 * GiB + GiB / 2}},
      in_container(19 * GiB));
  EXPECT_TRUE(o.processes.empty());
  EXPECT_NE(o.unknown.find("PID namespace"), std::string::npos) << o.unknown;
  // Without memory figures (NVML may not attribute memory in a container).
  const OtherProcesses none =
      other_processes({{1, "", 0}, {2, "", 0}}, in_container(19 * GiB));
  EXPECT_TRUE(none.processes.empty());
  EXPECT_FALSE(none.unknown.empty());
}

TEST(OwnProcess, AProcessNotOnTheGpuSeesEveryListedProcessAsAnother) {
  // doctor lists processes before it touches the GPU; in a container a
  // host pid that happens to equal its own is still another process.
  ProcessIdentity me = in_container(0);
  me.on_this_gpu = false;
  const OtherProcesses o =
      other_processes({{7, "", GiB}, {91234, "", 2 * GiB}}, me);
  EXPECT_EQ(pids(o.processes), (std::vector<unsigned int>{7, 91234}));
}

TEST(OwnProcess, TheSamplersWindowNamesNoOtherProcessWhenItCannotTell) {
  telemetry::Sample s;
  telemetry::GpuSample g;
  g.uuid = "GPU-1";
  g.processes = std::vector<GpuProcess>{
      {91234, "", 19 * GiB + GiB / 4}, {91300, "", 19 * GiB + GiB / 2}};
  s.gpus.push_back(g);
  telemetry::Window container;
  telemetry::accumulate(container, s, "GPU-1", in_container(19 * GiB));
  ASSERT_TRUE(container.gpu);
  EXPECT_TRUE(container.gpu->other_processes.empty());
  EXPECT_FALSE(container.gpu->processes_unknown.empty());

  ProcessIdentity host;
  host.pid = 91300;
  host.on_this_gpu = true;
  telemetry::Window plain;
  telemetry::accumulate(plain, s, "GPU-1", host);
  EXPECT_EQ(
      pids(plain.gpu->other_processes), (std::vector<unsigned int>{91234}));
}

} // namespace
} // namespace hotloop::env
