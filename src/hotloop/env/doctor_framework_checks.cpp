// doctor's checks of the framework, the driver, and whether CUDA and NVML
// agree.
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/env/doctor_checks.h"

namespace hotloop::env::checks {
namespace {

// The oldest Linux driver that runs each CUDA major version's runtime (NVIDIA's
// CUDA release notes, "CUDA Toolkit and Minimum Required Driver Version").
// Within a major version, minor-version compatibility lets that driver run any
// newer minor runtime.
const char* minimum_driver_for(int cuda_major) {
  switch (cuda_major) {
    case 11:
      return "450.80.02";
    case 12:
      return "525.60.13";
    case 13:
      return "580.65.06";
    default:
      return nullptr;
  }
}

Check libtorch(const TorchFacts& t) {
  Check c{"framework.libtorch", Status::Pass, {}, {}, {}};
  c.facts = {
      {"libtorch_version", t.libtorch_version},
      {"compiled_with_cuda", t.built.compiled_with_cuda},
      {"cuda_arch_list", t.cuda_arch_list}};
  if (t.built.runtime_version) {
    c.facts["cuda_runtime"] = cuda_version_string(*t.built.runtime_version);
  }
  if (t.built.cudnn_built) {
    c.facts["cudnn_built"] = *t.built.cudnn_built;
  }
  if (t.built.nccl_built) {
    c.facts["nccl_built"] = *t.built.nccl_built;
  }
  if (!t.built.compiled_with_cuda) {
    c.summary = fmt::format("LibTorch {} (CPU only)", t.libtorch_version);
    return c;
  }
  c.summary = fmt::format(
      "LibTorch {} built with CUDA {}; kernels for {}",
      t.libtorch_version,
      t.built.runtime_version ? cuda_version_string(*t.built.runtime_version)
                              : "?",
      t.cuda_arch_list.empty() ? "unknown architectures" : t.cuda_arch_list);
  return c;
}

Check driver(const NvmlFacts& n) {
  Check c{"nvml.driver", Status::Pass, {}, {}, {}};
  c.facts = {{"library", n.library_path}};
  if (!n.loaded) {
    c.facts["error"] = n.load_error;
    if (!n.library_found) {
      c.status = Status::Skip;
      c.summary = "no NVIDIA driver: " + n.load_error;
    } else {
      // The driver's library is there but does not work: the driver needs
      // fixing before anything else.
      c.status = Status::Fail;
      c.summary = "the NVIDIA driver is installed but NVML does not start: " +
          n.load_error;
      c.fix = n.load_hint;
    }
    return c;
  }
  c.facts["driver_version"] = fact(n.driver_version);
  c.facts["cuda_driver_version"] = n.cuda_driver_version.has_value()
      ? nlohmann::json(cuda_version_string(*n.cuda_driver_version))
      : fact(n.cuda_driver_version);
  c.facts["gpu_count"] = fact(n.gpu_count);
  c.summary = fmt::format(
      "driver {} (supports CUDA {}), {} GPU(s)",
      n.driver_version.value.value_or("unknown"),
      n.cuda_driver_version.has_value()
          ? cuda_version_string(*n.cuda_driver_version)
          : "unknown",
      n.gpu_count.has_value() ? std::to_string(*n.gpu_count) : "unknown");
  if (!n.gpu_count.has_value()) {
    c.status = Status::Fail;
    c.summary += ": " + n.gpu_count.missing_reason;
    c.fix =
        "NVML cannot count the GPUs: check `nvidia-smi` and dmesg for NVRM errors";
  }
  return c;
}

Check driver_compat(const NvmlFacts& n, const TorchFacts& t) {
  Check c{"cuda.driver_compat", Status::Pass, {}, {}, {}};
  if (!t.built.runtime_version) {
    c.status = Status::Skip;
    c.summary = "LibTorch has no CUDA runtime to compare";
    return c;
  }
  if (!n.loaded || !n.cuda_driver_version.has_value()) {
    c.status = Status::Skip;
    c.summary = n.loaded ? "the driver's CUDA version is unknown: " +
            n.cuda_driver_version.missing_reason
                         : "no NVIDIA driver";
    return c;
  }
  const int driver = *n.cuda_driver_version;
  const int runtime = *t.built.runtime_version;
  const int runtime_major = runtime / 1000;
  const char* min_driver = minimum_driver_for(runtime_major);
  c.facts = {
      {"driver_version", n.driver_version.value.value_or("unknown")},
      {"driver_cuda", cuda_version_string(driver)},
      {"libtorch_cuda_runtime", cuda_version_string(runtime)}};
  if (min_driver != nullptr) {
    c.facts["minimum_driver"] = min_driver;
  }
  if (driver / 1000 < runtime_major) {
    c.status = Status::Fail;
    c.summary = fmt::format(
        "driver {} supports CUDA {}, older than the CUDA {} runtime LibTorch uses",
        n.driver_version.value.value_or("?"),
        cuda_version_string(driver),
        cuda_version_string(runtime));
    c.fix = min_driver != nullptr
        ? fmt::format(
              "install NVIDIA driver {} or newer, or use a LibTorch built for CUDA {}.x",
              min_driver,
              driver / 1000)
        : fmt::format(
              "install a driver that supports CUDA {}",
              cuda_version_string(runtime));
  } else if (driver < runtime) {
    c.status = Status::Warn;
    c.summary = fmt::format(
        "driver supports CUDA {}, LibTorch uses CUDA {}: runs through minor-version "
        "compatibility, but PTX newer than the driver cannot be JIT-compiled",
        cuda_version_string(driver),
        cuda_version_string(runtime));
    c.fix = fmt::format(
        "update the NVIDIA driver to one that supports CUDA {}",
        cuda_version_string(runtime));
  } else {
    c.summary = fmt::format(
        "driver supports CUDA {}, LibTorch uses CUDA {}",
        cuda_version_string(driver),
        cuda_version_string(runtime));
  }
  return c;
}

bool hides_all_gpus(const std::optional<std::string>& visible) {
  if (!visible) {
    return false;
  }
  const std::string& v = *visible;
  return v.empty() || v == "-1" || v == "none" || v == "NoDevFiles";
}

// Why CUDA cannot use a GPU that NVML sees, most specific cause first.
std::string likely_causes(const DoctorFacts& f) {
  const TorchFacts& t = f.torch;
  std::vector<std::string> causes;
  if (!t.built.compiled_with_cuda) {
    causes.push_back(
        "LibTorch is a CPU-only build: install a CUDA build (PyPI's torch==2.11.0 for Linux x86_64 "
        "is built with CUDA 13.0)");
  }
  if (hides_all_gpus(t.cuda_visible_devices)) {
    causes.push_back(fmt::format(
        "CUDA_VISIBLE_DEVICES='{}' hides every GPU: unset it or list GPU indices/UUIDs",
        *t.cuda_visible_devices));
  } else if (t.cuda_visible_devices) {
    causes.push_back(fmt::format(
        "check CUDA_VISIBLE_DEVICES='{}' names existing GPUs",
        *t.cuda_visible_devices));
  }
  if (f.nvml.cuda_driver_version.has_value() && t.built.runtime_version &&
      *f.nvml.cuda_driver_version / 1000 < *t.built.runtime_version / 1000) {
    causes.push_back(
        "the driver is too old for LibTorch's CUDA runtime (see cuda.driver_compat)");
  }
  for (const auto& node : t.missing_device_nodes) {
    causes.push_back(
        node == "/dev/nvidia-uvm" || node.ends_with("/nvidia-uvm")
            ? std::string(
                  "/dev/nvidia-uvm is missing: load the module with `sudo modprobe nvidia-uvm` "
                  "(or `nvidia-modprobe -u -c=0`)")
            : fmt::format(
                  "{} is missing: in a container, start it with --gpus all (NVIDIA Container "
                  "Toolkit)",
                  node));
  }
  for (const auto& g : f.nvml.gpus) {
    if (g.mig_enabled.value.value_or(false)) {
      causes.push_back(fmt::format(
          "MIG is on for GPU {}: create GPU and compute instances "
          "(`nvidia-smi mig -cgi ... -C`) and select one by its MIG UUID",
          g.index));
    }
  }
  if (causes.empty()) {
    causes.push_back(
        "check `dmesg | grep -i nvrm` for driver errors; in a container, start it with --gpus all");
  }
  return fmt::format("{}", fmt::join(causes, "; "));
}

Check availability(const DoctorFacts& f) {
  const TorchFacts& t = f.torch;
  const NvmlFacts& n = f.nvml;
  Check c{"cuda.available", Status::Pass, {}, {}, {}};
  const unsigned int nvml_count = n.gpu_count.value.value_or(0);
  c.facts = {
      {"cuda_available", t.cuda.available},
      {"cuda_device_count", t.cuda.device_count},
      {"nvml_gpu_count", nvml_count},
      {"cuda_visible_devices",
       t.cuda_visible_devices ? nlohmann::json(*t.cuda_visible_devices)
                              : nlohmann::json()}};
  if (!t.cuda.error.empty()) {
    c.facts["cuda_error"] = t.cuda.error;
  }
  if (nvml_count > 0 && !t.cuda.available) {
    c.status = Status::Fail;
    c.summary = fmt::format(
        "NVML sees {} GPU(s) but CUDA can use none{}: training would silently run on the CPU",
        nvml_count,
        t.cuda.error.empty() ? "" : " (" + t.cuda.error + ")");
    c.fix = likely_causes(f);
  } else if (!t.cuda.available) {
    c.status = Status::Skip;
    c.summary = "no GPU: CUDA is not available, training runs on the CPU";
  } else if (!n.loaded) {
    c.status = Status::Warn;
    c.summary = fmt::format(
        "CUDA uses {} device(s) but NVML is missing: no GPU telemetry",
        t.cuda.device_count);
    c.fix =
        "make libnvidia-ml.so.1 visible (containers: NVIDIA_DRIVER_CAPABILITIES=compute,utility), or set "
        "HOTLOOP_NVML_LIB";
  } else if (
      static_cast<unsigned int>(t.cuda.device_count) < nvml_count &&
      !t.cuda_visible_devices) {
    c.status = Status::Warn;
    c.summary = fmt::format(
        "CUDA uses {} of the {} GPUs NVML sees",
        t.cuda.device_count,
        nvml_count);
    c.fix = likely_causes(f);
  } else {
    c.summary = fmt::format(
        "CUDA uses {} device(s){}",
        t.cuda.device_count,
        t.cuda_visible_devices
            ? " (CUDA_VISIBLE_DEVICES=" + *t.cuda_visible_devices + ")"
            : "");
  }
  return c;
}

Check kernels(const TorchFacts& t) {
  Check c{"cuda.kernel", Status::Pass, {}, {}, {}};
  if (!t.cuda.available || t.kernel_probe_errors.empty()) {
    c.status = Status::Skip;
    c.summary = t.cuda.available ? "kernel probe not run"
                                 : "no CUDA device to run a kernel on";
    return c;
  }
  std::vector<std::string> failures;
  c.facts = nlohmann::json::array();
  for (std::size_t i = 0; i < t.kernel_probe_errors.size(); ++i) {
    const std::string& err = t.kernel_probe_errors[i];
    c.facts.push_back({{"device", i}, {"ok", err.empty()}, {"error", err}});
    if (!err.empty()) {
      failures.push_back(fmt::format("cuda:{}: {}", i, err));
    }
  }
  if (failures.empty()) {
    c.summary = fmt::format(
        "a kernel ran and gave the right result on {} device(s)",
        t.kernel_probe_errors.size());
    return c;
  }
  c.status = Status::Fail;
  c.summary = fmt::format("{}", fmt::join(failures, "; "));
  const bool no_image =
      std::any_of(failures.begin(), failures.end(), [](const std::string& s) {
        return s.find("no kernel image") != std::string::npos;
      });
  c.fix = no_image
      ? "LibTorch has no code for this GPU's architecture: install a build whose architecture list "
        "includes it (see gpuN.arch)"
      : "check `dmesg | grep -i xid` for GPU errors; reset or reboot if the GPU is in a bad state";
  return c;
}

Check library(
    const char* id,
    const char* what,
    const cuda::Loaded& loaded,
    bool gpu,
    Status missing_status,
    const char* fix) {
  Check c{id, Status::Pass, {}, {}, {}};
  if (loaded.version) {
    c.facts = {{"version", *loaded.version}};
    c.summary = fmt::format("{} {} loads", what, *loaded.version);
    return c;
  }
  c.facts = {{"error", loaded.error}};
  c.summary = fmt::format("{} does not load: {}", what, loaded.error);
  c.status = gpu ? missing_status : Status::Skip;
  if (gpu) {
    c.fix = fix;
  }
  return c;
}

} // namespace

bool nvml_sees_gpu(const NvmlFacts& nvml) {
  return nvml.loaded && nvml.gpu_count.value.value_or(0) > 0;
}

void framework_and_driver(const DoctorFacts& f, std::vector<Check>& out) {
  const bool gpu = nvml_sees_gpu(f.nvml) || f.torch.cuda.available;
  out.push_back(libtorch(f.torch));
  out.push_back(driver(f.nvml));
  out.push_back(driver_compat(f.nvml, f.torch));
  out.push_back(availability(f));
  out.push_back(kernels(f.torch));
  if (f.torch.built.compiled_with_cuda) {
    out.push_back(library(
        "cuda.cudnn",
        "cuDNN",
        f.torch.cudnn,
        gpu,
        Status::Fail,
        "convolutions need cuDNN: reinstall torch (its nvidia-cudnn wheel) or put libcudnn.so.9 on "
        "the library path"));
    out.push_back(library(
        "cuda.nccl",
        "NCCL",
        f.torch.nccl,
        gpu,
        Status::Warn,
        "multi-GPU training needs NCCL: reinstall torch (its nvidia-nccl wheel) or put "
        "libnccl.so.2 on the library path"));
  }
}

} // namespace hotloop::env::checks
