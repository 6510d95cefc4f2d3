#include "hotloop/model/llama/llama.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <tuple>

#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/outer.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/rms_norm.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/where.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>

#include "hotloop/errors.h"
#include "hotloop/model/activation_checkpoint.h"
#include "hotloop/model/lm/attention_cache.h"
#include "hotloop/model/lm/document_attention.h"
#include "hotloop/model/lm/grouped_attention.h"
#include "hotloop/model/lm/projection.h"

namespace hotloop::model {

namespace {

lm::Projection linear(std::int64_t in, std::int64_t out, bool bias) {
  return lm::Projection(in, out, bias, lm::WeightLayout::OutIn);
}

// The inverse frequencies of RoPE's rotations, as Hugging Face computes them
// (float32, the same operations): theta^(-2i/d), then the config's scaling.
at::Tensor inverse_frequencies(const LlamaConfig& c) {
  const std::int64_t d = c.head_dim();
  const at::Tensor exponents =
      at::arange(0, d, 2, at::kLong).to(at::kFloat) / static_cast<double>(d);
  at::Tensor inv = at::reciprocal(at::pow(c.rope.theta, exponents));
  const RopeOptions& r = c.rope;
  if (r.type == RopeType::Linear) {
    inv = inv / r.factor;
  } else if (r.type == RopeType::Llama3) {
    const double old_context = static_cast<double>(r.original_context);
    const double low_wavelen = old_context / r.low_freq_factor;
    const double high_wavelen = old_context / r.high_freq_factor;
    const at::Tensor wavelen = 2 * std::numbers::pi / inv;
    at::Tensor scaled = at::where(wavelen > low_wavelen, inv / r.factor, inv);
    const at::Tensor smooth = (old_context / wavelen - r.low_freq_factor) /
        (r.high_freq_factor - r.low_freq_factor);
    const at::Tensor smoothed =
        (1 - smooth) * scaled / r.factor + smooth * scaled;
    const at::Tensor medium =
        (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
    inv = at::where(medium, smoothed, scaled);
  }
  return inv;
}

// "[first, middle, last]": x's halves swapped, the second negated.
at::Tensor rotate_half(const at::Tensor& x) {
  const std::int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(std::int64_t width, double eps) : eps_(eps) {
    weight = register_parameter("weight", at::ones({width}));
  }
  at::Tensor forward(const at::Tensor& x) {
    return at::rms_norm(x, {x.size(-1)}, weight, eps_);
  }
  at::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

} // namespace

namespace lm {

// cos and sin of every position's rotation angles up to the context, in
// float32 on the device they were last asked for.
struct RopeTable {
  explicit RopeTable(const LlamaConfig& c)
      : context(c.context), inv_freq(inverse_frequencies(c)) {}

  // Positions start .. start + length: (length, head_dim) each.
  std::pair<at::Tensor, at::Tensor> at_positions(
      std::int64_t start,
      std::int64_t length,
      const at::Tensor& like) {
    ensure_on(like);
    return {
        cos.narrow(0, start, length).to(like.scalar_type()),
        sin.narrow(0, start, length).to(like.scalar_type())};
  }
  // Each token's position of `positions` (B, T): (B, 1, T, head_dim) each,
  // to broadcast over the heads.
  std::pair<at::Tensor, at::Tensor> at_positions(
      const at::Tensor& positions,
      const at::Tensor& like) {
    ensure_on(like);
    auto gather = [&](const at::Tensor& table) {
      return table.index_select(0, positions.reshape({-1}))
          .view({positions.size(0), 1, positions.size(1), table.size(1)})
          .to(like.scalar_type());
    };
    return {gather(cos), gather(sin)};
  }

  std::int64_t context;
  at::Tensor inv_freq;
  at::Tensor cos;
  at::Tensor sin;

 private:
  void ensure_on(const at::Tensor& like) {
    if (!cos.defined() || cos.device() != like.device()) {
      const at::Tensor positions = at::arange(context, at::kFloat);
      const at::Tensor angles = at::outer(positions, inv_freq);
      const at::Tensor both = at::cat({angles, angles}, -1);
      cos = both.cos().to(like.device());
      sin = both.sin().to(like.device());
    }
  }
};

// What every block of one forward shares: the rotations at the tokens'
// positions and how attention keeps to each sequence.
struct BlockInputs {
  at::Tensor cos;
  at::Tensor sin;
  AttentionPlan attention;

  // As a checkpointed block keeps them for its recompute.
  SegmentSide side() const {
    SegmentSide s;
    s.tensors = {cos, sin};
    attention.add_to(s);
    return s;
  }
  static BlockInputs from(const SegmentSide& s) {
    std::size_t tensor = 2;
    std::size_t integer = 0;
    return {
        s.tensors.at(0),
        s.tensors.at(1),
        AttentionPlan::from(s, tensor, integer)};
  }
};

} // namespace lm

namespace {

class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(const LlamaConfig& c)
      : heads_(c.heads),
        kv_heads_(c.kv_heads),
        d_(c.head_dim()),
        q_proj(register_module(
            "q_proj",
            linear(c.width, c.heads * c.head_dim(), c.qkv_bias))),
        k_proj(register_module(
            "k_proj",
            linear(c.width, c.kv_heads * c.head_dim(), c.qkv_bias))),
        v_proj(register_module(
            "v_proj",
            linear(c.width, c.kv_heads * c.head_dim(), c.qkv_bias))),
        o_proj(register_module(
            "o_proj",
            linear(c.heads * c.head_dim(), c.width, c.o_bias))) {}

  // x: (B, T, C), rotated by `in`'s cos and sin. With a cache: x continues
  // the cached positions; else attention follows `in`'s plan.
  at::Tensor forward(
      const at::Tensor& x,
      const lm::BlockInputs& in,
      KvCache* cache,
      std::size_t layer) {
    const std::int64_t b = x.size(0);
    const std::int64_t t = x.size(1);
    auto heads = [&](const at::Tensor& y, std::int64_t n) {
      return y.view({b, t, n, d_}).transpose(1, 2);
    };
    auto rotate = [&](const at::Tensor& y) {
      return y * in.cos + rotate_half(y) * in.sin;
    };
    const at::Tensor q = rotate(heads(q_proj(x), heads_));
    const at::Tensor k = rotate(heads(k_proj(x), kv_heads_));
    const at::Tensor v = heads(v_proj(x), kv_heads_);
    at::Tensor y;
    if (cache != nullptr) {
      const lm::AttentionInputs c = lm::with_cache(cache, layer, k, v);
      y = lm::grouped_attention(q, c.keys, c.values, c.mask, c.causal);
    } else {
      y = lm::attend(q, k, v, in.attention);
    }
    return o_proj(y.transpose(1, 2).reshape({b, t, heads_ * d_}));
  }

 private:
  std::int64_t heads_;
  std::int64_t kv_heads_;
  std::int64_t d_;

 public:
  lm::Projection q_proj;
  lm::Projection k_proj;
  lm::Projection v_proj;
  lm::Projection o_proj;
};
TORCH_MODULE(Attention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const LlamaConfig& c)
      : gate_proj(register_module(
            "gate_proj",
            linear(c.width, c.intermediate, c.mlp_bias))),
        up_proj(register_module(
            "up_proj",
            linear(c.width, c.intermediate, c.mlp_bias))),
        down_proj(register_module(
            "down_proj",
            linear(c.intermediate, c.width, c.mlp_bias))) {}
  at::Tensor forward(const at::Tensor& x) {
    return down_proj(at::silu(gate_proj(x)) * up_proj(x));
  }
  lm::Projection gate_proj;
  lm::Projection up_proj;
  lm::Projection down_proj;
};
TORCH_MODULE(Mlp);

} // namespace

namespace lm {

class LlamaBlockImpl : public torch::nn::Module {
 public:
  explicit LlamaBlockImpl(const LlamaConfig& c)
      : input_layernorm(
            register_module("input_layernorm", RmsNorm(c.width, c.rms_eps))),
        self_attn(register_module("self_attn", Attention(c))),
        post_attention_layernorm(register_module(
            "post_attention_layernorm",
            RmsNorm(c.width, c.rms_eps))),
        mlp(register_module("mlp", Mlp(c))) {}

  at::Tensor forward(
      const at::Tensor& x,
      const BlockInputs& in,
      KvCache* cache = nullptr,
      std::size_t layer = 0) {
    const at::Tensor h =
        x + self_attn->forward(input_layernorm(x), in, cache, layer);
    return h + mlp(post_attention_layernorm(h));
  }
  // For activation checkpointing: the block as a segment.
  static at::Tensor segment(
      torch::nn::Module& m,
      const at::Tensor& x,
      const SegmentSide& side) {
    return static_cast<LlamaBlockImpl&>(m).forward(x, BlockInputs::from(side));
  }

  RmsNorm input_layernorm;
  Attention self_attn;
  RmsNorm post_attention_layernorm;
  Mlp mlp;
};
TORCH_MODULE(LlamaBlock);

} // namespace lm

// "model": the embedding, the blocks and the final norm.
struct Llama::Parts : public torch::nn::Module {
  explicit Parts(const LlamaConfig& c)
      : embed_tokens(register_module(
            "embed_tokens",
            torch::nn::Embedding(c.vocab, c.width))),
        layers(register_module("layers", torch::nn::ModuleList())),
        norm(register_module("norm", RmsNorm(c.width, c.rms_eps))) {
    for (std::int64_t i = 0; i < c.layers; ++i) {
      layers->push_back(lm::LlamaBlock(c));
    }
  }
  torch::nn::Embedding embed_tokens;
  torch::nn::ModuleList layers;
  RmsNorm norm;
};

namespace {

// Hugging Face's initialization: N(0, initializer_range) for every matrix
// and embedding, zero biases, RMSNorm weights one.
void initialize(torch::nn::Module& model, double std) {
  at::NoGradGuard no_grad;
  for (auto& p : model.named_parameters()) {
    if (p.key().ends_with("layernorm.weight") ||
        p.key().ends_with("norm.weight")) {
      p.value().fill_(1);
    } else if (p.value().dim() >= 2) {
      p.value().normal_(0, std);
    } else {
      p.value().zero_();
    }
  }
}

} // namespace

Llama::Llama(LlamaConfig config)
    : config_(std::move(config)),
      rope_(std::make_shared<lm::RopeTable>(config_)) {
  config_.validate();
  parts_ = std::make_shared<Parts>(config_);
  register_module("model", parts_);
  if (!config_.tied) {
    lm_head_ = std::make_shared<torch::nn::Module>();
    lm_head_->register_parameter(
        "weight", at::empty({config_.vocab, config_.width}));
    register_module("lm_head", lm_head_);
  }
  initialize(*this, config_.init_std);
}

KvCache Llama::new_cache(std::int64_t batch) const {
  return lm::empty_cache(
      config_.layers,
      batch,
      config_.kv_heads,
      config_.context,
      config_.head_dim(),
      parts_->embed_tokens->weight.device());
}

at::Tensor Llama::output_weight() const {
  return lm_head_ ? lm_head_->named_parameters(false)["weight"]
                  : parts_->embed_tokens->weight;
}

at::Tensor Llama::hidden_states(
    const at::Tensor& tokens,
    const PackedRows& rows) {
  lm::check_tokens(tokens, config_.context, "Llama");
  lm::check_rows(rows, tokens, "Llama");
  at::Tensor x = parts_->embed_tokens(tokens);
  // Packed rows rotate each token by its position in its example, as
  // transformers' position_ids do. Rotations are relative, so with attention
  // kept inside each example the row's positions would give the same scores
  // up to rounding; the example's keep transformers' rounding.
  lm::BlockInputs in;
  std::tie(in.cos, in.sin) = rows.empty()
      ? rope_->at_positions(0, tokens.size(1), x)
      : rope_->at_positions(rows.positions, x);
  in.attention = lm::plan_attention(rows, x, config_.head_dim());
  const bool recompute = checkpoint_blocks_ && at::GradMode::is_enabled();
  const SegmentSide side = recompute ? in.side() : SegmentSide{};
  std::size_t unit = 0;
  for (const auto& m : *parts_->layers) {
    x = run_unit(unit++, [&] {
      return recompute ? checkpoint(*m, &lm::LlamaBlockImpl::segment, x, side)
                       : static_cast<lm::LlamaBlockImpl&>(*m).forward(x, in);
    });
  }
  return parts_->norm(x);
}

at::Tensor Llama::forward(const at::Tensor& tokens, KvCache& cache) {
  lm::check_cache(cache, tokens, config_.layers, config_.context, "Llama");
  at::Tensor x = parts_->embed_tokens(tokens);
  lm::BlockInputs in;
  std::tie(in.cos, in.sin) =
      rope_->at_positions(cache.length, tokens.size(1), x);
  std::size_t layer = 0;
  for (const auto& m : *parts_->layers) {
    x = static_cast<lm::LlamaBlockImpl&>(*m).forward(x, in, &cache, layer++);
  }
  cache.length += tokens.size(1);
  return at::linear(parts_->norm(x), output_weight());
}

std::vector<std::shared_ptr<torch::nn::Module>> Llama::shard_units() const {
  return parts_->layers->children();
}

void Llama::set_checkpointing(Checkpointing mode) {
  checkpoint_blocks_ = mode != Checkpointing::None;
}

bool Llama::decays(const std::string& name, const at::Tensor& p) const {
  return p.dim() >= 2 && (!config_.tied || name != "model.embed_tokens.weight");
}

void Llama::adapt_weights(
    std::vector<std::pair<std::string, at::Tensor>>& weights) const {
  std::erase_if(weights, [this](const auto& w) {
    // A tied model's lm_head is the embedding; older transformers saved
    // RoPE's inverse frequencies, which hotloop computes.
    return (config_.tied && w.first == "lm_head.weight") ||
        w.first.ends_with(".rotary_emb.inv_freq");
  });
}

double Llama::training_flops_per_sample() const {
  return config_.training_flops_per_token() *
      static_cast<double>(config_.context);
}

} // namespace hotloop::model
