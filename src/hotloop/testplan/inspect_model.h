#pragma once
// `hotloop inspect model FILE`: whether a model exported from Python can be
// trained, in the spirit of `doctor`: one verdict per question, each with the
// facts and, when something is wrong, the fix. The questions: what the file
// is (scripted, traced, or no TorchScript at all), its parameters and which
// train, its buffers, whether train()/eval() switches its BatchNorm and
// dropout, its output for the data's input against the class count, one CPU
// batch forward + backward with finite gradients for every trainable
// parameter, its FLOPs per sample, and on a GPU whether the step can be
// captured as a CUDA graph.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/env/doctor.h"
#include "hotloop/model/script/exported.h"

namespace hotloop::testplan {

struct InspectOptions {
  // The file, the data's input and class count (or context for a token
  // model), the head: as `hotloop train` would load it.
  model::ExportedOptions model;
  bool cuda = false; // also check the CUDA graph capture on cuda:0
};

struct InspectReport {
  std::string path;
  std::string format;
  std::int64_t parameters = 0;
  std::int64_t trainable = 0;
  std::int64_t buffers = 0;
  double forward_flops_per_sample = 0; // 0: unknown
  std::vector<env::Check> checks;
  // No check failed: `hotloop train` can train it.
  bool trainable_model() const;
  nlohmann::json to_json() const;
};

// Never throws for a bad file: what is wrong is a failed check.
InspectReport inspect_model(const InspectOptions& options);

// The report for a terminal: a line per check, its fix under it.
std::string render(const InspectReport& report, bool color);

} // namespace hotloop::testplan
