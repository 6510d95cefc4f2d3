#pragma once
// A loader's batch (data/loader.h) as a model's objective takes it
// (model/model_batch.h): the training step and evaluation hand every batch
// to the model through this, packed rows and the host's target count
// included.

#include <ATen/core/Tensor.h>

#include "hotloop/data/loader.h"
#include "hotloop/model/model_batch.h"

namespace hotloop::train {

// `inputs`: the batch's images or token ids as the step feeds them (channels
// last, where it converts them).
inline model::ModelBatch batch_for_model(
    const data::Batch& b,
    const at::Tensor& inputs) {
  model::ModelBatch m;
  m.inputs = inputs;
  m.targets = b.labels;
  m.rows.positions = b.positions;
  m.rows.starts = b.sequence_starts;
  m.rows.longest = b.longest_sequence;
  m.trained = b.trained_targets;
  return m;
}

inline model::ModelBatch batch_for_model(const data::Batch& b) {
  return batch_for_model(b, b.images);
}

} // namespace hotloop::train
