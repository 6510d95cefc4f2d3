#pragma once
// The language models' projections: a weight and an optional bias, in
// nn.Linear's layout (out, in) or GPT-2's Conv1D layout (in, out), and an
// optional LoRA adapter (hotloop/model/lm/lora.h) beside the frozen weight.

#include <cstdint>
#include <memory>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace hotloop::model::lm {

enum class WeightLayout { OutIn, InOut };

class ProjectionImpl : public torch::nn::Module {
 public:
  ProjectionImpl(
      std::int64_t in,
      std::int64_t out,
      bool bias,
      WeightLayout layout);

  at::Tensor forward(const at::Tensor& x);

  std::int64_t in_features() const {
    return in_;
  }
  std::int64_t out_features() const {
    return out_;
  }
  WeightLayout layout() const {
    return layout_;
  }

  // The adapter: lora_A (rank, in) and lora_B (out, rank), as submodules
  // "lora_A" and "lora_B" holding "weight".
  void add_lora(std::int64_t rank, double scale, double dropout);
  bool has_lora() const {
    return lora_a_.defined();
  }
  const at::Tensor& lora_a() const {
    return lora_a_;
  }
  const at::Tensor& lora_b() const {
    return lora_b_;
  }
  // W += scale B A (in float32, stored in W's dtype); the adapter removed.
  void merge_lora();

  at::Tensor weight;
  at::Tensor bias; // undefined without one

 private:
  std::int64_t in_;
  std::int64_t out_;
  WeightLayout layout_;
  at::Tensor lora_a_;
  at::Tensor lora_b_;
  double scale_ = 0;
  double dropout_ = 0;
};
TORCH_MODULE(Projection);

} // namespace hotloop::model::lm
