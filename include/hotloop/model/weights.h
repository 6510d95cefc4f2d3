#pragma once
// Weight files: safetensors (read and write) and PyTorch's torch.save() zip
// files (read and write, never executing anything), and loading them into a
// module with a clear report of what did not match.

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace torch::nn {
class Module;
}

namespace hotloop::model {

// Names and tensors in file (or module) order.
using StateDict = std::vector<std::pair<std::string, at::Tensor>>;

// Reads a .safetensors or torch.save() file; the format is told by its first
// bytes, not its name. Tensors are contiguous CPU tensors. Throws DataError
// naming the file and the problem (truncated, corrupt, a pickle that refers to
// anything but tensors and plain containers).
StateDict read_weights(const std::string& path);

// The same, with the safetensors header's "__metadata__" strings (empty for
// torch files).
struct WeightFile {
  StateDict tensors;
  std::map<std::string, std::string> metadata;
};
WeightFile read_weight_file(const std::string& path);
// The same for a file already in memory (`path` names it in errors).
WeightFile parse_weight_file(
    std::span<const std::uint8_t> bytes,
    const std::string& path);

// Writes `weights` as safetensors, or as a torch.save() zip when the path ends
// in .pt or .pth (torch.load reads it back as an OrderedDict). Atomic: a
// temporary file renamed into place. Tensors may be on any device and in any
// layout; they are written contiguous and little-endian. Safetensors files get
// a CRC-32 of their data in the metadata ("hotloop.crc32"), which
// read_weight_file verifies. `before_commit` (may be empty) runs when the
// temporary file is complete, before it is renamed into place.
void write_weights(
    const std::string& path,
    const StateDict& weights,
    const std::map<std::string, std::string>& metadata = {},
    const std::function<void()>& before_commit = {});

// A module's parameters and buffers by their dotted names, the same names
// torch's state_dict() gives.
StateDict state_dict(const torch::nn::Module& module);

struct ShapeMismatch {
  std::string name;
  std::vector<std::int64_t> model_shape;
  std::vector<std::int64_t> file_shape;
};

struct LoadReport {
  std::vector<std::string> loaded;
  std::vector<std::string> missing; // in the module, not in the file
  std::vector<std::string> unexpected; // in the file, not in the module
  std::vector<ShapeMismatch> mismatched;
  std::vector<std::string> skipped; // left at their initial values on purpose
                                    // (LoadOptions::skip_prefixes)
  // LoadOptions::defer's: each target with its source in the weights given
  // (valid while they are), for the caller to copy.
  std::vector<std::pair<at::Tensor, const at::Tensor*>> deferred;
  bool complete() const {
    return missing.empty() && unexpected.empty() && mismatched.empty();
  }
};

struct LoadOptions {
  // Strict: any missing, unexpected or mismatched key is an error and nothing
  // is loaded. Not strict: what matches is loaded, the rest reported.
  bool strict = true;
  // Names starting with one of these are not loaded and not reported as
  // mismatches (the classifier head when fine-tuning to new classes).
  std::vector<std::string> skip_prefixes;
  std::string source; // the file's name, for messages
  // Targets it says yes to are checked as the others but not copied: they
  // are LoadReport::deferred (ZeRO stage 3's sharded blocks, whose memory
  // the caller gathers a block at a time).
  std::function<bool(const at::Tensor&)> defer;
};

// Copies matching tensors into the module's parameters and buffers (converting
// dtype, keeping the module's device). Throws DataError listing every missing,
// unexpected and mismatched key (with shapes) when strict and incomplete.
LoadReport load_state_dict(
    torch::nn::Module& module,
    const StateDict& weights,
    const LoadOptions& options = {});

// The report as lines for a terminal: counts, then each problem.
std::string describe(const LoadReport& report, std::size_t max_listed = 20);

} // namespace hotloop::model
