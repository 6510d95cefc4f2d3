#include "hotloop/train/rng_state.h"

#include <cstring>
#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>

#include "hotloop/cuda/cuda_info.h"

namespace hotloop::train {

model::StateDict rng_state(const c10::Device& device) {
  model::StateDict out;
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    out.emplace_back("cpu", gen.get_state());
  }
  if (device.is_cuda()) {
    const auto bytes = cuda::rng_state(device.index());
    at::Tensor t =
        at::empty({static_cast<std::int64_t>(bytes.size())}, at::kByte);
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    out.emplace_back("cuda", t);
  }
  return out;
}

void set_rng_state(const model::StateDict& state, const c10::Device& device) {
  for (const auto& [name, t] : state) {
    if (name == "cpu") {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(t);
    } else if (name == "cuda" && device.is_cuda()) {
      const auto* p = t.data_ptr<std::uint8_t>();
      cuda::set_rng_state(device.index(), {p, p + t.numel()});
    }
  }
}

} // namespace hotloop::train
