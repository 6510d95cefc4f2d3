#pragma once
// The models hotloop trains: a torch::nn::Module with a forward from images to
// logits and a named classifier head. C++ users derive their own from Model;
// hotloop's are made by name with make_model().

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "hotloop/core/named.h"
#include "hotloop/model/lm/lora.h"
#include "hotloop/model/loss.h"
#include "hotloop/model/model_batch.h"

namespace hotloop::model {

// --activation-checkpointing: which parts of the model recompute their
// activations in backward instead of keeping them.
enum class Checkpointing {
  None,
  Stages, // each residual stage (layer1..layer4)
  All, // the stem too: everything but the head
  // Each residual block on its own: only the blocks' inputs are kept, and
  // backward recomputes one block at a time.
  Blocks,
};
inline constexpr Named<Checkpointing> kCheckpointingNames[] = {
    {Checkpointing::None, "none"},
    {Checkpointing::Stages, "stages"},
    {Checkpointing::All, "all"},
    {Checkpointing::Blocks, "blocks"}};
Checkpointing parse_checkpointing(const std::string& text);
const char* to_string(Checkpointing mode);

class Model : public torch::nn::Module {
 public:
  // Image classifiers: (B, C, H, W) float -> (B, num_classes) logits.
  // Language models (tokens_per_sample() > 0): (B, T) int64 token ids ->
  // (B, T, vocabulary) next-token logits.
  virtual at::Tensor forward(const at::Tensor& images) = 0;
  // The training objective on forward()'s output and the batch's targets
  // (labels; a language model's next tokens): a 0-dim float32 loss, the
  // mean over the samples or, with options.reduction Sum, their sum. The
  // training steps, evaluation and smoke call it. Default: cross-entropy
  // with label smoothing over (B, K) logits (model/loss.h); language models
  // override it with next_token_loss.
  virtual at::Tensor loss(
      const at::Tensor& outputs,
      const at::Tensor& targets,
      const LossOptions& options) const {
    return cross_entropy_loss(outputs, targets, options);
  }
  // The training objective on a batch, as the training steps call it (under
  // the run's autocast): loss(forward(inputs), targets) by default, which
  // takes no packed rows (UsageError naming --packing). Language models take
  // packed rows and compute their output layer and loss in chunks
  // (model/lm/linear_cross_entropy.h).
  virtual at::Tensor objective(
      const ModelBatch& batch,
      const LossOptions& options);
  // Whether objective() takes packed rows (ModelBatch::rows).
  virtual bool takes_packed_rows() const {
    return false;
  }
  // The classifier head's submodule name: replaced (new initialization) when
  // fine-tuning to a different number of classes; the rest is the backbone.
  virtual std::string head_name() const {
    return "fc";
  }
  // Turns activation checkpointing on or off. Models that cannot do it throw
  // UsageError for anything but None.
  virtual void set_checkpointing(Checkpointing mode);
  // Rewrites a weight file's tensors into this model's form before they are
  // loaded (GPT: Hugging Face GPT-2's unpadded vocabulary, its tied lm_head
  // and attention-mask buffers). Default: as they are.
  virtual void adapt_weights(
      std::vector<std::pair<std::string, at::Tensor>>& weights) const {
    (void)weights;
  }
  // Whether weight decay applies to parameter `name` (default: all do).
  virtual bool decays(const std::string& name, const at::Tensor& p) const {
    (void)name;
    (void)p;
    return true;
  }
  // Training FLOPs (forward + backward) per sample, for MFU; 0: unknown.
  virtual double training_flops_per_sample() const {
    return 0;
  }
  // Tokens per sample for language models (the sequence length); 0 for
  // image models.
  virtual std::int64_t tokens_per_sample() const {
    return 0;
  }
};

// What an image classifier takes in and puts out (the image families, and
// an exported classifier's head: model/script/exported.h).
struct ImageModelOptions {
  std::int64_t num_classes = 10;
  std::int64_t in_channels = 1;
  // Input height and width; only mlp's first layer depends on it.
  std::int64_t size = 28;
  // Zero-initialize the last BatchNorm of each residual block (ResNets), so
  // each block starts as the identity ("Bag of Tricks", Goyal et al.).
  bool zero_init_residual = false;
};

// A language model's shape (model/gpt/gpt.h, model/llama/llama.h; an
// exported language model's context and vocabulary): 0 keeps the named
// size's value. vocab 0 on a small size: the data's vocabulary.
struct LmShapeOptions {
  std::int64_t layers = 0;
  std::int64_t heads = 0;
  std::int64_t width = 0;
  std::int64_t context = 0;
  std::int64_t vocab = 0;
};

// An exported model (torchscript:FILE, model/script/exported.h).
struct ExportedModelOptions {
  // The classifier head's module name; empty: the module owning the last
  // 2-D weight.
  std::string head;
};

// The model to build: its --model name and, grouped by the families they
// apply to, what shapes it. A family reads its own group (family.h).
struct ModelOptions {
  std::string name = "cnn-small";
  ImageModelOptions image;
  LmShapeOptions lm;
  // Language models: LoRA adapters on the projections (rank 0: none).
  LoraOptions lora;
  ExportedModelOptions exported;

  ModelOptions& set_name(std::string v) {
    name = std::move(v);
    return *this;
  }
  ModelOptions& set_num_classes(std::int64_t v) {
    image.num_classes = v;
    return *this;
  }
  ModelOptions& set_in_channels(std::int64_t v) {
    image.in_channels = v;
    return *this;
  }
  ModelOptions& set_image_size(std::int64_t v) {
    image.size = v;
    return *this;
  }
  ModelOptions& set_zero_init_residual(bool v) {
    image.zero_init_residual = v;
    return *this;
  }
  // Throws UsageError naming the option: an unknown model, classes or channels
  // below 1.
  void validate() const;
};

// Every named size of every family (model/family.h), in --help's order:
// mlp, cnn-small, the ResNets, the GPT and Llama-family sizes. Besides these,
// make_model() builds hf:DIR and loads torchscript:FILE.
const std::vector<std::string>& model_names();

// A new model with freshly initialized weights (the global torch generator:
// seed it first for a reproducible start). In training mode, on the CPU.
std::shared_ptr<Model> make_model(const ModelOptions& options);

// Parameter counts, for the "trainable vs frozen" line.
struct ParameterCount {
  std::int64_t trainable = 0;
  std::int64_t frozen = 0;
};
ParameterCount count_parameters(const torch::nn::Module& module);

} // namespace hotloop::model
