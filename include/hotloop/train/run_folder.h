#pragma once
// A run folder's files, each named here once. The trainer, LoopRun (Python's
// hotloop.Run), the CLI and the reports write and read a run through it:
//   config.json        the options, the model, the sources (written first)
//   metrics.jsonl      a line a step (callbacks/metrics_file)
//   telemetry.jsonl    samples and diagnosis windows (telemetry)
//   summary.json       the run's figures (written last)
//   report.html        summary.json and metrics.jsonl as a page
//   model.safetensors  the final weights under the model's own names
//   checkpoints/       step-N.safetensors, the newest K (--shard: with
//                      step-N.rank-R-of-W.safetensors, each rank's part of
//                      the optimizer state: train/checkpoint_shards.h)
//   adapter/           LoRA's adapters as PEFT saves them
//   tokenizer/         the token data's tokenizer, for generate and predict
// TensorBoard's event files lie in the folder itself.
//   batch_finder.json  the batch finder's trials (--batch auto)

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hotloop::train {

class RunFolder {
 public:
  explicit RunFolder(std::string dir) : dir_(std::move(dir)) {}

  // The folders a weight file's run can be, nearer first: its own folder
  // (RUN/model.safetensors) and that folder's parent
  // (RUN/checkpoints/step-N.safetensors).
  static std::vector<RunFolder> around(const std::string& weights);

  const std::string& dir() const {
    return dir_;
  }
  std::string config() const {
    return file("config.json");
  }
  std::string metrics() const {
    return file("metrics.jsonl");
  }
  std::string telemetry() const {
    return file("telemetry.jsonl");
  }
  std::string summary() const {
    return file("summary.json");
  }
  std::string report() const {
    return file("report.html");
  }
  std::string weights() const {
    return file("model.safetensors");
  }
  std::string checkpoints() const {
    return file("checkpoints");
  }
  std::string adapter() const {
    return file("adapter");
  }
  std::string tokenizer() const {
    return file("tokenizer");
  }
  std::string batch_finder() const {
    return file("batch_finder.json");
  }

  // Makes the folder; DataError naming it when it cannot.
  void create() const;
  // config.json's object `part` ("model", "options"); nullopt when the file
  // or the part is missing or not JSON.
  std::optional<nlohmann::json> config_part(const char* part) const;
  // `files` (a tokenizer's) copied into tokenizer/; DataError when they
  // cannot be.
  void keep_tokenizer(const std::vector<std::string>& files) const;

  // Writes `j` to `path` (one of the files above) atomically, indented.
  static void write_json(const std::string& path, const nlohmann::json& j);

 private:
  std::string file(const char* name) const;
  std::string dir_;
};

} // namespace hotloop::train
