// GpuTimer's events on a GPU: cudaEvent_t on the device's current stream.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

#include "hotloop/cuda/gpu_timer.h"

namespace hotloop::cuda {

namespace {

class CudaEvents final : public EventApi {
 public:
  explicit CudaEvents(int device)
      : device_(static_cast<c10::DeviceIndex>(device)) {}

  Event create() override {
    const c10::cuda::CUDAGuard guard(device_);
    cudaEvent_t e = nullptr;
    C10_CUDA_CHECK(cudaEventCreate(&e));
    return e;
  }
  void record(Event e) override {
    const c10::cuda::CUDAGuard guard(device_);
    C10_CUDA_CHECK(cudaEventRecord(
        cast(e), at::cuda::getCurrentCUDAStream(device_).stream()));
  }
  bool done(Event e) override {
    const c10::cuda::CUDAGuard guard(device_);
    const cudaError_t rc = cudaEventQuery(cast(e));
    if (rc == cudaErrorNotReady) {
      (void)cudaGetLastError(); // not ready is not an error
      return false;
    }
    C10_CUDA_CHECK(rc);
    return true;
  }
  void wait(Event e) override {
    const c10::cuda::CUDAGuard guard(device_);
    C10_CUDA_CHECK(cudaEventSynchronize(cast(e)));
  }
  double elapsed_ms(Event from, Event to) override {
    const c10::cuda::CUDAGuard guard(device_);
    float ms = 0;
    C10_CUDA_CHECK(cudaEventElapsedTime(&ms, cast(from), cast(to)));
    return ms;
  }
  void destroy(Event e) noexcept override {
    const c10::cuda::CUDAGuard guard(device_);
    (void)cudaEventDestroy(cast(e));
  }

 private:
  static cudaEvent_t cast(Event e) {
    return static_cast<cudaEvent_t>(e);
  }
  c10::DeviceIndex device_;
};

} // namespace

std::unique_ptr<EventApi> cuda_events(int device) {
  return std::make_unique<CudaEvents>(device);
}

} // namespace hotloop::cuda
