#include "hotloop/testplan/fingerprint.h"

#include <unistd.h>

#include <chrono>
#include <ctime>

#include <fmt/format.h>

#include "hotloop/core/cpus.h"
#include "hotloop/cuda/build_info.h"
#include "hotloop/env/gpu_probe.h"
#include "hotloop/env/host_probe.h"

namespace hotloop::testplan {

nlohmann::json environment_fingerprint(
    const std::string& command_line,
    const std::string& nvml_library) {
  const BuildInfo b = build_info();
  nlohmann::json j;
  j["hotloop_version"] = b.hotloop_version;
  j["git_commit"] = b.git_commit;
  j["libtorch"] = b.libtorch_version;
  j["cuda_runtime"] = b.cuda_runtime_version.value_or("");
  j["cudnn"] = b.cudnn_version.value_or("");
  j["nccl"] = b.nccl_version.value_or("");
  j["command_line"] = command_line;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  j["host"] = host;
  const env::HostFacts h = env::probe_host({});
  j["cpu"] = h.cpu_model;
  j["cpus"] = usable_cpus();
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  j["date"] = when;
  const env::NvmlFacts n = env::probe_nvml(nvml_library);
  j["driver"] = n.driver_version.has_value() ? *n.driver_version.value : "";
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : n.gpus) {
    gpus.push_back(
        {{"index", g.index},
         {"name", g.name.has_value() ? *g.name.value : ""},
         {"memory_total_bytes",
          g.memory_total_bytes.has_value() ? *g.memory_total_bytes.value : 0}});
  }
  j["gpus"] = gpus;
  return j;
}

std::string describe_environment(const nlohmann::json& f) {
  std::string gpu = "no GPU";
  if (f.contains("gpus") && !f["gpus"].empty()) {
    gpu = fmt::format(
        "{} x {} (driver {})",
        f["gpus"].size(),
        f["gpus"][0].value("name", "?"),
        f.value("driver", "?"));
  }
  return fmt::format(
      "{}; {} ({} CPUs); LibTorch {}{}; hotloop {} ({})",
      gpu,
      f.value("cpu", "?"),
      f.value("cpus", 0),
      f.value("libtorch", "?"),
      f.value("cuda_runtime", "").empty()
          ? std::string()
          : ", CUDA " + f.value("cuda_runtime", ""),
      f.value("hotloop_version", "?"),
      f.value("git_commit", "?"));
}

} // namespace hotloop::testplan
