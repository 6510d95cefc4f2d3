#include "hotloop/telemetry/gpm.h"

#include <utility>

#include <fmt/format.h>

#include "hotloop/env/nvml_library.h"

namespace hotloop::telemetry {

namespace {

nlohmann::json or_null(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

} // namespace

nlohmann::json to_json(const GpmMetrics& m) {
  return {
      {"sm_active_percent", or_null(m.sm_active_percent)},
      {"sm_occupancy_percent", or_null(m.sm_occupancy_percent)},
      {"tensor_active_percent", or_null(m.tensor_active_percent)},
      {"hmma_active_percent", or_null(m.hmma_active_percent)},
      {"dram_bw_percent", or_null(m.dram_bw_percent)},
      {"pcie_tx_mib_s", or_null(m.pcie_tx_mib_s)},
      {"pcie_rx_mib_s", or_null(m.pcie_rx_mib_s)},
      {"nvlink_tx_mib_s", or_null(m.nvlink_tx_mib_s)},
      {"nvlink_rx_mib_s", or_null(m.nvlink_rx_mib_s)}};
}

GpmSampler::GpmSampler(const nvml::Library& lib) : lib_(lib) {}

GpmSampler::~GpmSampler() {
  const auto& fn = lib_.fn();
  for (auto& [index, d] : devices_) {
    for (nvml::GpmSample s : {d.previous, d.current}) {
      if (s != nullptr) {
        nvml::call(fn.gpm_sample_free, s);
      }
    }
  }
}

std::string GpmSampler::skip_reason(unsigned int index) const {
  const auto it = devices_.find(index);
  return it == devices_.end() ? std::string() : it->second.skip;
}

std::optional<GpmMetrics> GpmSampler::read(unsigned int index, nvml::Device d) {
  const auto& fn = lib_.fn();
  DeviceState& st = devices_[index];
  if (!st.checked) {
    st.checked = true;
    if (fn.gpm_query_device_support == nullptr ||
        fn.gpm_sample_get == nullptr || fn.gpm_metrics_get == nullptr ||
        fn.gpm_sample_alloc == nullptr || fn.gpm_sample_free == nullptr) {
      st.skip =
          "the driver's NVML has no GPM functions (a driver for CUDA 12 or later has them)";
      return std::nullopt;
    }
    nvml::GpmSupport support{nvml::kGpmSupportVersion, 0};
    const nvml::Return rc = fn.gpm_query_device_support(d, &support);
    if (rc != nvml::kSuccess) {
      st.skip = fmt::format(
          "nvmlGpmQueryDeviceSupport failed: {}", lib_.error_string(rc));
      return std::nullopt;
    }
    if (support.isSupportedDevice == 0) {
      st.skip = "this GPU has no GPM counters (Hopper or later has them)";
      return std::nullopt;
    }
    if (fn.gpm_sample_alloc(&st.previous) != nvml::kSuccess ||
        fn.gpm_sample_alloc(&st.current) != nvml::kSuccess) {
      st.skip = "nvmlGpmSampleAlloc failed";
      return std::nullopt;
    }
  }
  if (!st.skip.empty()) {
    return std::nullopt;
  }
  const nvml::Return got = fn.gpm_sample_get(d, st.current);
  if (got == nvml::kErrorNotSupported || got == nvml::kErrorNoPermission) {
    // For good, not a missed sample: a GPU in MIG mode reads GPM per GPU
    // instance only (nvmlGpmMigSampleGet), and a container may be denied
    // the counters. Say so once instead of missing every sample.
    unsigned int mig = 0;
    unsigned int pending = 0;
    const bool in_mig = fn.device_get_mig_mode != nullptr &&
        fn.device_get_mig_mode(d, &mig, &pending) == nvml::kSuccess && mig != 0;
    st.skip = in_mig
        ? "the GPU is in MIG mode: its GPM counters are read per GPU instance, which hotloop does not do (nvmlGpmSampleGet: " +
            lib_.error_string(got) + ")"
        : "nvmlGpmSampleGet: " + lib_.error_string(got) +
            " (GPM is supported by the device but not readable here)";
    return std::nullopt;
  }
  if (got != nvml::kSuccess) {
    return std::nullopt; // a missed sample: try again next time
  }
  std::optional<GpmMetrics> out;
  if (st.have_previous) {
    nvml::GpmMetricsGet get{};
    get.version = nvml::kGpmMetricsGetVersion;
    const unsigned int ids[] = {
        nvml::kGpmSmUtil,
        nvml::kGpmSmOccupancy,
        nvml::kGpmAnyTensorUtil,
        nvml::kGpmHmmaTensorUtil,
        nvml::kGpmDramBwUtil,
        nvml::kGpmPcieTxPerSec,
        nvml::kGpmPcieRxPerSec,
        nvml::kGpmNvlinkTotalTxPerSec,
        nvml::kGpmNvlinkTotalRxPerSec};
    get.numMetrics = std::size(ids);
    get.sample1 = st.previous;
    get.sample2 = st.current;
    for (unsigned int i = 0; i < get.numMetrics; ++i) {
      get.metrics[i].metricId = ids[i];
    }
    if (fn.gpm_metrics_get(&get) == nvml::kSuccess) {
      GpmMetrics m;
      std::optional<double>* fields[] = {
          &m.sm_active_percent,
          &m.sm_occupancy_percent,
          &m.tensor_active_percent,
          &m.hmma_active_percent,
          &m.dram_bw_percent,
          &m.pcie_tx_mib_s,
          &m.pcie_rx_mib_s,
          &m.nvlink_tx_mib_s,
          &m.nvlink_rx_mib_s};
      for (unsigned int i = 0; i < get.numMetrics; ++i) {
        if (get.metrics[i].nvmlReturn == nvml::kSuccess) {
          *fields[i] = get.metrics[i].value;
        }
      }
      out = m;
    }
  }
  std::swap(st.previous, st.current);
  st.have_previous = true;
  return out;
}

} // namespace hotloop::telemetry
