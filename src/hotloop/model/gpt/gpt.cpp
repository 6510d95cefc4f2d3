#include "hotloop/model/gpt/gpt.h"

#include <algorithm>
#include <cmath>

#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/zeros.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>

#include "hotloop/errors.h"
#include "hotloop/model/activation_checkpoint.h"
#include "hotloop/model/lm/attention_cache.h"
#include "hotloop/model/lm/document_attention.h"
#include "hotloop/model/lm/projection.h"

namespace hotloop::model {

namespace {

// Hugging Face's Conv1D: y = x W + b with W stored (in, out).
lm::Projection conv1d(std::int64_t in, std::int64_t out, double init_std) {
  lm::Projection p(in, out, true, lm::WeightLayout::InOut);
  at::NoGradGuard no_grad;
  p->weight.normal_(0, init_std);
  return p;
}

class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(const GptConfig& c, double proj_std)
      : heads_(c.heads),
        c_attn(register_module("c_attn", conv1d(c.width, 3 * c.width, 0.02))),
        c_proj(register_module("c_proj", conv1d(c.width, c.width, proj_std))) {}

  // x: (B, T, C). With a cache: x continues the cached positions; else
  // attention follows `plan`.
  at::Tensor forward(
      const at::Tensor& x,
      const lm::AttentionPlan& plan,
      KvCache* cache,
      std::size_t layer) {
    const std::int64_t b = x.size(0);
    const std::int64_t t = x.size(1);
    const std::int64_t c = x.size(2);
    const std::int64_t d = c / heads_;
    const std::vector<at::Tensor> qkv = c_attn(x).split(c, 2);
    auto heads = [&](const at::Tensor& y) {
      return y.view({b, t, heads_, d}).transpose(1, 2);
    };
    const at::Tensor q = heads(qkv[0]);
    const at::Tensor k = heads(qkv[1]);
    const at::Tensor v = heads(qkv[2]);
    at::Tensor y;
    if (cache != nullptr) {
      const lm::AttentionInputs in = lm::with_cache(cache, layer, k, v);
      y = at::scaled_dot_product_attention(
          q, in.keys, in.values, in.mask, 0.0, in.causal);
    } else {
      y = lm::attend(q, k, v, plan);
    }
    return c_proj(y.transpose(1, 2).contiguous().view({b, t, c}));
  }

 private:
  std::int64_t heads_;

 public:
  lm::Projection c_attn;
  lm::Projection c_proj;
};
TORCH_MODULE(Attention);

class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(const GptConfig& c, double proj_std)
      : c_fc(register_module("c_fc", conv1d(c.width, 4 * c.width, 0.02))),
        c_proj(
            register_module("c_proj", conv1d(4 * c.width, c.width, proj_std))) {
  }
  at::Tensor forward(const at::Tensor& x) {
    return c_proj(at::gelu(c_fc(x), "tanh"));
  }
  lm::Projection c_fc;
  lm::Projection c_proj;
};
TORCH_MODULE(Mlp);

torch::nn::LayerNorm layer_norm(std::int64_t width) {
  return torch::nn::LayerNorm(
      torch::nn::LayerNormOptions({width}).eps(1e-5).elementwise_affine(true));
}

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const GptConfig& c, double proj_std)
      : ln_1(register_module("ln_1", layer_norm(c.width))),
        attn(register_module("attn", Attention(c, proj_std))),
        ln_2(register_module("ln_2", layer_norm(c.width))),
        mlp(register_module("mlp", Mlp(c, proj_std))) {}

  at::Tensor forward(
      const at::Tensor& x,
      const lm::AttentionPlan& plan,
      KvCache* cache = nullptr,
      std::size_t layer = 0) {
    const at::Tensor h = x + attn->forward(ln_1(x), plan, cache, layer);
    return h + mlp(ln_2(h));
  }
  // For activation checkpointing: the block as a segment.
  static at::Tensor segment(
      torch::nn::Module& m,
      const at::Tensor& x,
      const SegmentSide& side) {
    std::size_t tensor = 0;
    std::size_t integer = 0;
    return static_cast<BlockImpl&>(m).forward(
        x, lm::AttentionPlan::from(side, tensor, integer));
  }

  torch::nn::LayerNorm ln_1;
  Attention attn;
  torch::nn::LayerNorm ln_2;
  Mlp mlp;
};
TORCH_MODULE(Block);

} // namespace

// "transformer": the embeddings, the blocks and the final norm.
struct Gpt::Parts : public torch::nn::Module {
  explicit Parts(const GptConfig& c)
      : wte(register_module(
            "wte",
            torch::nn::Embedding(c.padded_vocab(), c.width))),
        wpe(register_module("wpe", torch::nn::Embedding(c.context, c.width))),
        h(register_module("h", torch::nn::ModuleList())),
        ln_f(register_module("ln_f", layer_norm(c.width))) {
    // GPT-2's initialization (nanoGPT): N(0, 0.02), the residual projections
    // scaled by 1/sqrt(2 * layers).
    const double proj_std =
        0.02 / std::sqrt(2.0 * static_cast<double>(c.layers));
    for (std::int64_t i = 0; i < c.layers; ++i) {
      h->push_back(Block(c, proj_std));
    }
    at::NoGradGuard no_grad;
    wte->weight.normal_(0, 0.02);
    wpe->weight.normal_(0, 0.02);
  }
  torch::nn::Embedding wte;
  torch::nn::Embedding wpe;
  torch::nn::ModuleList h;
  torch::nn::LayerNorm ln_f;
};

Gpt::Gpt(GptConfig config)
    : config_(config), parts_(std::make_shared<Parts>(config_)) {
  config_.validate();
  register_module("transformer", parts_);
}

KvCache Gpt::new_cache(std::int64_t batch) const {
  return lm::empty_cache(
      config_.layers,
      batch,
      config_.heads,
      config_.context,
      config_.width / config_.heads,
      parts_->wte->weight.device());
}

at::Tensor Gpt::hidden_states(
    const at::Tensor& tokens,
    const PackedRows& rows) {
  lm::check_tokens(tokens, config_.context, "GPT");
  lm::check_rows(rows, tokens, "GPT");
  const at::Tensor pos = rows.empty()
      ? at::arange(
            tokens.size(1),
            at::TensorOptions().dtype(at::kLong).device(tokens.device()))
      : rows.positions;
  at::Tensor x = parts_->wte(tokens) + parts_->wpe(pos);
  const lm::AttentionPlan plan =
      lm::plan_attention(rows, x, config_.width / config_.heads);
  const bool recompute = checkpoint_blocks_ && at::GradMode::is_enabled();
  SegmentSide side;
  if (recompute) {
    plan.add_to(side);
  }
  std::size_t unit = 0;
  for (const auto& m : *parts_->h) {
    x = run_unit(unit++, [&] {
      return recompute ? checkpoint(*m, &BlockImpl::segment, x, side)
                       : static_cast<BlockImpl&>(*m).forward(x, plan);
    });
  }
  return parts_->ln_f(x);
}

at::Tensor Gpt::output_weight() const {
  return parts_->wte->weight;
}

at::Tensor Gpt::forward(const at::Tensor& tokens, KvCache& cache) {
  lm::check_cache(cache, tokens, config_.layers, config_.context, "GPT");
  const std::int64_t t = tokens.size(1);
  const std::int64_t start = cache.length;
  const at::Tensor pos = at::arange(
      start,
      start + t,
      at::TensorOptions().dtype(at::kLong).device(tokens.device()));
  at::Tensor x = parts_->wte(tokens) + parts_->wpe(pos);
  std::size_t layer = 0;
  for (const auto& m : *parts_->h) {
    x = static_cast<BlockImpl&>(*m).forward(x, {}, &cache, layer++);
  }
  cache.length += t;
  return at::linear(parts_->ln_f(x), output_weight());
}

std::vector<std::shared_ptr<torch::nn::Module>> Gpt::shard_units() const {
  return parts_->h->children();
}

void Gpt::set_checkpointing(Checkpointing mode) {
  checkpoint_blocks_ = mode != Checkpointing::None;
}

bool Gpt::decays(const std::string& name, const at::Tensor& p) const {
  // Matrices only (nanoGPT): not biases, norms or the position embedding.
  return p.dim() >= 2 && name != "transformer.wpe.weight";
}

void Gpt::adapt_weights(
    std::vector<std::pair<std::string, at::Tensor>>& weights) const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto& [name, t] : weights) {
    if (name == "lm_head.weight" || name.ends_with(".attn.bias") ||
        name.ends_with(".attn.masked_bias")) {
      continue; // tied to wte; causal-mask buffers
    }
    if (name == "transformer.wte.weight" && t.dim() == 2 &&
        t.size(0) == config_.vocab && config_.padded_vocab() > config_.vocab) {
      t = at::cat(
          {t,
           at::zeros(
               {config_.padded_vocab() - config_.vocab, t.size(1)},
               t.options())});
    }
    out.emplace_back(name, t);
  }
  weights = std::move(out);
}

double Gpt::training_flops_per_sample() const {
  return config_.training_flops_per_token() *
      static_cast<double>(config_.context);
}

} // namespace hotloop::model
