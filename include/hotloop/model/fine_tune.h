#pragma once
// Fine-tuning helpers: start from a weight file whose classifier head may have
// a different number of classes, freeze the backbone, and split parameters
// into head and backbone groups (for separate learning rates).

#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/model/model.h"
#include "hotloop/model/weights.h"

namespace hotloop::model {

struct InitOptions {
  // .safetensors, torch.save() file, a hotloop checkpoint, or a Hugging Face
  // model folder (model/lm/hf_checkpoint.h)
  std::string path;
  bool strict = true; // --init-strict
  // How a file (not a folder) is read; empty: read_weight_file. The
  // training layer's reads a ZeRO stage-3 checkpoint whole, its blocks'
  // weights from the shard files beside it (train/checkpoint_shards.h).
  std::function<WeightFile(const std::string&)> read;
};

struct InitResult {
  LoadReport report;
  // The file's head had another number of classes: the model's head kept
  // its fresh initialization.
  bool head_replaced = false;
  std::int64_t file_classes = 0;
};

// Loads `options.path` into `model`. When the head's shapes differ from the
// file's (fine-tuning to new classes), the head is skipped and everything else
// loaded. Any other mismatch is an error listing the keys when strict, else
// reported. Throws DataError for an unreadable file.
InitResult load_initial_weights(Model& model, const InitOptions& options);

enum class Freeze { None, Backbone, Patterns };
// "none" | "backbone" | globs on parameter names ("features.*,fc.bias").
Freeze parse_freeze(const std::string& text);
// The comma-separated globs of --freeze; UsageError for an empty one.
std::vector<std::string> freeze_patterns(const std::string& text);

// requires_grad=false for every parameter whose name matches one of
// `patterns` (shell globs: * also matches dots). Returns how many tensors it
// froze; UsageError naming a pattern that matches no parameter.
std::size_t freeze_matching(
    Model& model,
    const std::vector<std::string>& patterns);

// requires_grad=false for every parameter outside the head (BatchNorm running
// statistics still update in training mode, as in PyTorch).
void freeze_backbone(Model& model);

struct ParameterGroups {
  std::vector<at::Tensor> backbone; // trainable ones only
  std::vector<at::Tensor> head;
};
ParameterGroups parameter_groups(Model& model);

} // namespace hotloop::model
