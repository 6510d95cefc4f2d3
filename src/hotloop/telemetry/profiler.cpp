#include "hotloop/telemetry/profiler.h"

#include <cstdlib>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include "hotloop/errors.h"

namespace hotloop::telemetry {

namespace {

namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

ProfilerConfig config(const RecordingOptions& o) {
  return ProfilerConfig(
      ProfilerState::KINETO,
      /*report_input_shapes=*/o.shapes,
      /*profile_memory=*/false,
      /*with_stack=*/false,
      /*with_flops=*/o.shapes,
      /*with_modules=*/false);
}

std::set<ActivityType> activities(const RecordingOptions& o) {
  std::set<ActivityType> a{ActivityType::CPU};
  if (o.cuda) {
    a.insert(ActivityType::CUDA);
  }
  return a;
}

// The operators whose FLOPs are matrix products: aten::mm, addmm, bmm,
// baddbmm, and the convolutions (aten::conv2d, ...). The profiler credits
// elementwise aten::add and aten::mul with FLOPs too; those are left out.
bool matmul_or_conv(const std::string& name) {
  return name.starts_with("aten::") &&
      (name.ends_with("mm") || name.starts_with("aten::conv"));
}

} // namespace

bool profiler_on() {
  return kineto::profilerEnabled();
}

ProfileRecording::ProfileRecording(const RecordingOptions& options) {
  if (profiler_on()) {
    throw EnvError(
        "the profiler is already recording in this process",
        "one recording at a time: stop the other first");
  }
  if (!options.cuda) {
    // Kineto looks for GPUs on its first use and logs "gpuGetDeviceCount
    // failed" as an ERROR on a machine without one: not this recording's
    // concern. A level the user set stays.
    ::setenv("KINETO_LOG_LEVEL", "5", /*overwrite=*/0);
  }
  const ProfilerConfig c = config(options);
  kineto::prepareProfiler(c, activities(options));
  kineto::enableProfiler(c, activities(options));
  on_ = true;
}

ProfileRecording::~ProfileRecording() {
  if (on_) {
    try {
      kineto::disableProfiler();
    } catch (...) {
      // Nothing to report from a destructor: the events are dropped.
    }
  }
}

ProfileSummary ProfileRecording::stop(const std::string& trace_path) {
  on_ = false;
  const std::unique_ptr<kineto::ProfilerResult> result =
      kineto::disableProfiler();
  ProfileSummary s;
  if (result == nullptr) {
    return s;
  }
  for (const kineto::KinetoEvent& e : result->events()) {
    ++s.events;
    if (matmul_or_conv(e.name())) {
      s.matmul_flops += static_cast<double>(e.flops());
    }
  }
  if (!trace_path.empty()) {
    std::error_code ec;
    const auto parent = std::filesystem::path(trace_path).parent_path();
    if (!parent.empty()) {
      std::filesystem::create_directories(parent, ec);
    }
    result->save(trace_path);
    s.trace_bytes = std::filesystem::file_size(trace_path, ec);
    if (ec) {
      throw DataError(fmt::format(
          "the profiler's trace was not written to {}: {}",
          trace_path,
          ec.message()));
    }
    s.trace_path = trace_path;
  }
  return s;
}

double profiled_flops(const std::function<void()>& work) {
  ProfileRecording recording;
  work();
  return recording.stop().matmul_flops;
}

} // namespace hotloop::telemetry
