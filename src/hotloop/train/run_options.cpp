// The run's options: the trainer's table lifted onto RunOptions, with "auto"
// batches, and the entries only a run has (option_table.h says what an entry
// holds).

#include "hotloop/train/run_options.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "hotloop/data/data_kinds.h"
#include "option_builders.h"

namespace hotloop::train {

namespace {

using namespace options_detail;
using R = RunOptions;

// --batch / --micro-batch: the trainer's entry, or "auto".
RunOption auto_batch(RunOption base, bool R::*is_auto, std::string help) {
  base.help = std::move(help);
  base.choices = {"auto"};
  base.get = [g = base.get, is_auto](const R& r) {
    return r.*is_auto ? nlohmann::json("auto") : g(r);
  };
  base.set = [s = base.set, is_auto](R& r, const std::string& text) {
    r.*is_auto = text == "auto";
    if (!(r.*is_auto)) {
      s(r, text);
    }
  };
  return base;
}

std::string check_backend(const std::string& b) {
  return b == "auto" || b == "gloo" || b == "nccl"
      ? std::string()
      : "expected auto, gloo or nccl";
}

std::vector<RunOption> make_table() {
  using C = CallbackOptions;
  const char* logs = "Telemetry and logs";
  std::vector<RunOption> table;
  table.push_back(text<R>(
      "data",
      "Model",
      field(&R::data),
      fmt::format(
          "{}; for language models {} (text: bytes, or a Hugging Face folder's tokens; instruct: JSON Lines of prompt/completion or messages, the loss on the answers) (default with a named language model: text:fortunes)",
          data::data_forms(data::DataFor::Images),
          data::data_forms(data::DataFor::Tokens))));
  for (const TrainerOption& t : trainer_options()) {
    RunOption o = lift(t, &R::trainer);
    if (t.name == "batch") {
      o = auto_batch(
          o,
          &R::batch_auto,
          "Global batch per optimizer step; auto: the batch-size finder's recommendation");
    } else if (t.name == "micro-batch") {
      o = auto_batch(
          o,
          &R::micro_batch_auto,
          "Samples per forward/backward; 0: the whole batch (no accumulation); auto: the finder's, dividing --batch");
    }
    table.push_back(std::move(o));
  }
  table.push_back(boolean<R>(
      "eval",
      "Run directory and checkpoints",
      field(&R::eval),
      "Evaluate on the data's val or test split (false: throughput runs)"));
  table.push_back(boolean<R>(
      "telemetry",
      logs,
      field(&R::callbacks, &C::telemetry, &TelemetryOptions::enabled),
      "Sample the GPU and host, time the step phases, diagnose every window (false: none of it)"));
  table.push_back(number<R, double>(
      "telemetry-interval",
      logs,
      field(&R::callbacks, &C::telemetry, &TelemetryOptions::interval_s),
      "Seconds between GPU/host samples (telemetry.jsonl)",
      positive()));
  table.push_back(number<R, std::int64_t>(
      "diagnosis-window",
      logs,
      field(&R::callbacks, &C::telemetry, &TelemetryOptions::diagnosis_window),
      "Steps per diagnosis (input-bound, throttled, ...)",
      at_least(1)));
  table.push_back(boolean<R>(
      "tensorboard",
      logs,
      field(&R::callbacks, &C::tensorboard),
      "Write TensorBoard event files into the run directory"));
  table.push_back(number<R, int>(
      "metrics-port",
      logs,
      field(&R::callbacks, &C::metrics_port),
      "Serve Prometheus metrics on 127.0.0.1:PORT; 0: off",
      [](const int& p) {
        return p >= 0 && p <= 65535 ? std::string()
                                    : std::string("is not a port (0: off)");
      }));
  table.push_back(text<R>(
      "profile",
      logs,
      field(&R::callbacks, &C::profile, &ProfileOptions::steps),
      "Record steps with LibTorch's profiler into RUN/profile/*.pt.trace.json (Perfetto, TensorBoard): A-B or N (steps as the log numbers them), or auto (a few steps after a slow step or when the diagnosis turns from healthy); empty: off"));
  table.push_back(number<R, double>(
      "log-every",
      logs,
      field(&R::callbacks, &C::console, &ConsoleOptions::log_every_s),
      "Seconds between plain progress lines off a terminal; 0: none",
      at_least(0)));
  const char* dp = "Data parallel";
  table.push_back(text<R>(
      "dist-backend",
      dp,
      field(&R::job, &parallel::JobOptions::backend),
      "auto (nccl on CUDA, gloo on the CPU), gloo or nccl",
      check_backend));
  table.push_back(number<R, double>(
      "dist-timeout",
      dp,
      field(&R::job, &parallel::JobOptions::timeout_s),
      "Seconds a rank waits for the others (rendezvous, collectives) before it stops with an error",
      positive()));
  // Each section's entries together, in the order the sections first come.
  std::vector<std::string> order;
  for (const RunOption& o : table) {
    if (std::find(order.begin(), order.end(), o.section) == order.end()) {
      order.push_back(o.section);
    }
  }
  std::stable_sort(
      table.begin(), table.end(), [&](const RunOption& a, const RunOption& b) {
        return std::find(order.begin(), order.end(), a.section) <
            std::find(order.begin(), order.end(), b.section);
      });
  return table;
}

} // namespace

RunOptions::RunOptions() {
  trainer.model.image.num_classes = 0;
  trainer.model.image.in_channels = 0;
}

bool RunOptions::given(std::string_view name) const {
  const auto it = sources.find(std::string(name));
  return it != sources.end() &&
      (it->second == kFromFlag || it->second == kFromConfigFile);
}

std::string RunOptions::source(std::string_view name) const {
  const auto it = sources.find(std::string(name));
  return it == sources.end() ? kFromDefault : it->second;
}

const std::vector<RunOption>& run_options() {
  static const std::vector<RunOption> table = make_table();
  return table;
}

const RunOption* find_run_option(std::string_view name) {
  return find_option(run_options(), name);
}

void set_flag(RunOptions& r, std::string_view name, const std::string& value) {
  const RunOption* o = find_run_option(name);
  if (o == nullptr) {
    throw std::logic_error(fmt::format("set_flag: no option '{}'", name));
  }
  o->set(r, value);
  r.sources[o->name] = kFromFlag;
}

std::string to_toml(const RunOptions& r) {
  std::string out =
      "# hotloop train: the resolved options of this run, each with its source.\n"
      "# `hotloop train --config THIS_FILE` trains with them again.\n";
  std::string section;
  for (const RunOption& o : run_options()) {
    if (o.section != section) {
      section = o.section;
      out += fmt::format("\n# {}\n", section);
    }
    out += fmt::format(
        "{} = {}  # {}\n",
        o.name,
        o.get(r).dump(), // JSON's strings, numbers and booleans are TOML's
        r.source(o.name));
  }
  return out;
}

RunRecord record_of(const RunOptions& r) {
  RunRecord record;
  for (const RunOption& o : run_options()) {
    record.options[o.name] = o.get(r);
    record.sources[o.name] = r.source(o.name);
  }
  return record;
}

} // namespace hotloop::train
