#pragma once
// LibTorch's Kineto profiler from C++ (torch/csrc/autograd/profiler_kineto.h):
// a recording of what ran between start and stop, CPU operators (and CUDA
// kernels on a GPU) with their input shapes and FLOPs, saved as a Chrome trace
// (JSON) that Perfetto and TensorBoard's profiler open. One recording at a
// time per process (the profiler's own rule).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace hotloop::telemetry {

struct RecordingOptions {
  bool cuda = false; // CUDA kernels and memcpys too
  bool shapes = true; // input shapes (and the FLOPs that need them)
};

struct ProfileSummary {
  std::uint64_t events = 0;
  // FLOPs the profiler credits to matrix products and convolutions
  // (aten::mm, addmm, bmm, baddbmm, conv2d, ...; not elementwise ops).
  double matmul_flops = 0;
  std::string trace_path; // "" when not saved
  std::uint64_t trace_bytes = 0;
};

class ProfileRecording {
 public:
  // Starts recording on this thread. Throws EnvError when a recording is
  // already on (this process's or a caller's).
  explicit ProfileRecording(const RecordingOptions& options = {});
  // Stops recording (its events are dropped) when stop() was not called.
  ~ProfileRecording();
  ProfileRecording(const ProfileRecording&) = delete;
  ProfileRecording& operator=(const ProfileRecording&) = delete;

  // Stops recording; saves the Chrome trace to `trace_path` unless it is
  // empty. Throws DataError when the trace cannot be written.
  ProfileSummary stop(const std::string& trace_path = "");

 private:
  bool on_ = false;
};

// Whether the profiler is recording now (a run without --profile: never).
bool profiler_on();

// The matmul and convolution FLOPs of one call of `work`, as the profiler
// counts them (CPU).
double profiled_flops(const std::function<void()>& work);

} // namespace hotloop::telemetry
