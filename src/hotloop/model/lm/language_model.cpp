#include "hotloop/model/lm/language_model.h"

#include <algorithm>
#include <iterator>

#include <ATen/ops/linear.h>
#include <ATen/ops/nonzero_static.h>
#include <fmt/format.h>

#include "hotloop/data/tokens/token_data.h"
#include "hotloop/errors.h"
#include "hotloop/model/family.h"
#include "hotloop/model/model_kind.h"

namespace hotloop::model {

namespace {

// hidden (B, T, C) and targets (B, T) flattened to the positions with a
// target: the `trained` the loader counted on the host, found without a
// synchronization (nonzero_static's size is known). All of them when the
// count is unknown or every position has a target.
std::pair<at::Tensor, at::Tensor> trained_positions(
    const at::Tensor& hidden,
    const at::Tensor& targets,
    std::int64_t trained) {
  at::Tensor h = hidden.reshape({-1, hidden.size(-1)});
  at::Tensor t = targets.reshape({-1});
  if (trained < 0 || trained >= t.size(0)) {
    return {h, t};
  }
  const at::Tensor kept =
      at::nonzero_static(t.ne(data::kNoTarget), trained).view({-1});
  return {h.index_select(0, kept), t.index_select(0, kept)};
}

} // namespace

at::Tensor LanguageModel::real_rows(const at::Tensor& weight) const {
  return weight.size(0) > vocab() ? weight.narrow(0, 0, vocab()) : weight;
}

at::Tensor LanguageModel::forward(const at::Tensor& tokens) {
  return at::linear(hidden_states(tokens, {}), output_weight());
}

at::Tensor LanguageModel::objective(
    const ModelBatch& batch,
    const LossOptions& options) {
  const auto [hidden, targets] = trained_positions(
      hidden_states(batch.inputs, batch.rows), batch.targets, batch.trained);
  lm::LinearCrossEntropyOptions o;
  o.loss = options;
  return lm::linear_cross_entropy(
      hidden, real_rows(output_weight()), targets, o);
}

lm::LinearCrossEntropySums LanguageModel::evaluation_sums(
    const ModelBatch& batch) {
  const auto [hidden, targets] = trained_positions(
      hidden_states(batch.inputs, batch.rows), batch.targets, batch.trained);
  return lm::linear_cross_entropy_sums(
      hidden, real_rows(output_weight()), targets);
}

const std::vector<std::string>& language_model_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    std::copy_if(
        model_names().begin(),
        model_names().end(),
        std::back_inserter(n),
        [](const std::string& name) {
          return model_kind(name).language_model();
        });
    return n;
  }();
  return names;
}

ModelOptions resolve_language_model(
    const ModelOptions& options,
    const ModelKind& kind) {
  if (!kind.language_model()) {
    throw UsageError(
        fmt::format("--model {}: not a language model", options.name));
  }
  return family_entry(kind.family).resolve(options, kind);
}

ModelOptions resolve_language_model(const ModelOptions& options) {
  return resolve_language_model(options, model_kind(options.name));
}

std::shared_ptr<LanguageModel> make_language_model(const ModelOptions& o) {
  const ModelKind kind = model_kind(o.name);
  if (!kind.language_model()) {
    throw UsageError(fmt::format("--model {}: not a language model", o.name));
  }
  // A named size or a folder: its family's entry builds it.
  return std::static_pointer_cast<LanguageModel>(
      family_entry(kind.family).make(o, kind));
}

} // namespace hotloop::model
