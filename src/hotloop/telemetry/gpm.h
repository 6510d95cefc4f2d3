#pragma once
// NVML's GPM counters (Hopper and later): what the SMs and tensor cores did,
// not only whether a kernel ran. Each read takes a new sample of the device's
// counters and returns the metrics between it and the previous one, so the
// first read of a device has none. No profiling lock is taken (unlike Nsight
// or DCGM's profiling module). A device or driver without GPM is skipped with
// the reason.

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "hotloop/env/nvml_api.h"

namespace hotloop::nvml {
class Library;
}

namespace hotloop::telemetry {

struct GpmMetrics {
  std::optional<double> sm_active_percent; // SMs busy
  std::optional<double> sm_occupancy_percent; // warps active vs the maximum
  std::optional<double> tensor_active_percent; // any tensor pipe
  std::optional<double> hmma_active_percent; // half-precision MMA
  std::optional<double> dram_bw_percent; // DRAM bandwidth used
  std::optional<double> pcie_tx_mib_s;
  std::optional<double> pcie_rx_mib_s;
  std::optional<double> nvlink_tx_mib_s;
  std::optional<double> nvlink_rx_mib_s;
};

nlohmann::json to_json(const GpmMetrics& m);

class GpmSampler {
 public:
  explicit GpmSampler(const nvml::Library& lib);
  ~GpmSampler(); // frees the samples
  GpmSampler(const GpmSampler&) = delete;
  GpmSampler& operator=(const GpmSampler&) = delete;

  // The metrics since the previous read of device `index` (handle `d`);
  // nullopt on the first read, or when the device or driver has no GPM
  // (skip_reason says why).
  std::optional<GpmMetrics> read(unsigned int index, nvml::Device d);
  // "" while GPM works on the device (or it was never read).
  std::string skip_reason(unsigned int index) const;

 private:
  struct DeviceState {
    bool checked = false;
    std::string skip; // "": supported
    nvml::GpmSample previous = nullptr;
    nvml::GpmSample current = nullptr;
    bool have_previous = false;
  };
  const nvml::Library& lib_;
  std::map<unsigned int, DeviceState> devices_;
};

} // namespace hotloop::telemetry
