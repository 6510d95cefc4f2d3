#include "hotloop/testplan/matrix.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <numeric>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "hotloop/core/first_line.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/data/data_kinds.h"
#include "hotloop/data/data_spec.h"
#include "hotloop/data/eval_split.h"
#include "hotloop/env/gpu_probe.h"
#include "hotloop/errors.h"
#include "hotloop/model/model.h"
#include "hotloop/train/callbacks/metrics_file.h"
#include "hotloop/train/callbacks/telemetry_callback.h"
#include "hotloop/train/callbacks/time_budget.h"
#include "hotloop/train/precision.h"
#include "hotloop/train/resolve_run.h"
#include "hotloop/train/trainer.h"

namespace hotloop::testplan {

namespace fs = std::filesystem;

namespace {

// `count` items evenly spaced over `base` (every class of a sorted test set
// is represented): the rows' validation, small enough for CPU rows.
class EvenSubset : public data::Dataset {
 public:
  EvenSubset(std::shared_ptr<const data::Dataset> base, std::size_t count)
      : base_(std::move(base)), count_(std::min(count, base_->size())) {}
  std::size_t size() const override {
    return count_;
  }
  data::Sample get(std::size_t i) const override {
    return base_->get(i * base_->size() / count_);
  }
  const std::vector<std::string>& class_names() const override {
    return base_->class_names();
  }
  std::optional<data::ImageShape> shape() const override {
    return base_->shape();
  }
  std::string describe() const override {
    return fmt::format("{} evenly spaced of {}", count_, base_->describe());
  }

 private:
  std::shared_ptr<const data::Dataset> base_;
  std::size_t count_;
};

struct OpenData {
  std::shared_ptr<const data::Dataset> train;
  std::shared_ptr<const data::Dataset> val; // may be null
};

OpenData open_data(const std::string& text, const MatrixOptions& o) {
  const data::DataSpec spec = data::parse_data_spec(text);
  OpenData d;
  d.train = data::open_dataset(spec, data::Split::Train, o.seed);
  d.val = data::open_eval_split(spec, o.seed);
  if (d.val && !data::data_kind(spec.kind).tokens) {
    // A language model's evaluation caps its own tokens; images are evenly
    // spaced over the split.
    d.val = std::make_shared<EvenSubset>(
        d.val, static_cast<std::size_t>(o.eval_samples));
  }
  return d;
}

std::string resolve_precision(const BenchRow& row) {
  if (row.precision != "mixed") {
    return row.precision;
  }
  return train::to_string(train::mixed_precision_for(
      row.device == "cpu" ? c10::Device(c10::kCPU)
                          : c10::Device(c10::kCUDA, 0)));
}

double median(std::vector<double> v) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// What a row reports, taken from its run as it goes: each step's time,
// phases and loss, and GPU 0's samples (the loss curves and GPU charts).
class RowRecorder final : public train::Callback {
 public:
  explicit RowRecorder(std::shared_ptr<const train::TelemetryCallback> t)
      : telemetry_(std::move(t)) {}
  std::string name() const override {
    return "bench-row";
  }
  void on_step_end(const train::RunState&, const train::StepEnd& e) override {
    step_ms_.push_back(e.seconds * 1e3);
    const telemetry::RunTelemetry* t = telemetry_->run();
    const auto& phases = telemetry_->last_step().phases_ms;
    if (phases.is_object()) {
      for (const auto& [k, v] : phases.items()) {
        phases_[k].push_back(v.get<double>());
      }
    }
    if (t->samples_taken() != samples_seen_) {
      samples_seen_ = t->samples_taken();
      if (const auto sample = t->latest_sample();
          sample && !sample->gpus.empty()) {
        add_gpu_sample(sample->unix_time, sample->gpus.front());
      }
    }
  }
  void on_loss(const train::RunState&, const train::StepLoss& l) override {
    losses_.push_back(l.loss);
  }

  void fill(RowResult& r) const {
    r.losses = losses_;
    // Steady state: the trainer's rule (summary.h).
    const std::size_t warm = train::steady_state_start(step_ms_.size());
    const std::vector<double> steady(
        step_ms_.begin() + static_cast<std::ptrdiff_t>(warm), step_ms_.end());
    if (!steady.empty()) {
      r.mean_step_ms = std::accumulate(steady.begin(), steady.end(), 0.0) /
          static_cast<double>(steady.size());
      r.median_step_ms = median(steady);
    }
    r.phases_ms = nlohmann::json::object();
    for (const auto& [k, v] : phases_) {
      const auto begin =
          v.begin() + static_cast<std::ptrdiff_t>(std::min(warm, v.size()));
      const double n = static_cast<double>(v.end() - begin);
      r.phases_ms[k] = n > 0 ? std::accumulate(begin, v.end(), 0.0) / n : 0.0;
    }
    r.gpu_series = series_;
    if (samples_ > 0) {
      r.gpu = {
          {"util_min", util_max_ >= 0 ? util_min_ : -1},
          {"util_max", util_max_},
          {"temp_min", temp_max_ >= 0 ? temp_min_ : -1},
          {"temp_max", temp_max_},
          {"power_mean_w", power_n_ > 0 ? power_sum_ / power_n_ : -1},
          {"throttle_samples", throttled_},
          {"samples", samples_}};
      if (gpm_n_ > 0) {
        r.gpu["sm_active_mean"] = sm_active_sum_ / gpm_n_;
        r.gpu["tensor_active_mean"] = tensor_active_sum_ / gpm_n_;
        r.gpu["dram_bw_mean"] = dram_bw_sum_ / gpm_n_;
      }
    }
  }

 private:
  void add_gpu_sample(double time, const telemetry::GpuSample& g) {
    t0_ = t0_ < 0 ? time : t0_;
    const double util = g.util_percent ? *g.util_percent : -1.0;
    const double temp = g.temperature_c ? *g.temperature_c : -1.0;
    const double mem =
        g.memory_used_bytes ? static_cast<double>(*g.memory_used_bytes) : -1.0;
    ++samples_;
    if (util >= 0) {
      util_min_ = std::min(util_min_, util);
      util_max_ = std::max(util_max_, util);
    }
    if (temp >= 0) {
      temp_min_ = std::min(temp_min_, temp);
      temp_max_ = std::max(temp_max_, temp);
    }
    if (g.power_w) {
      power_sum_ += *g.power_w;
      ++power_n_;
    }
    if (g.gpm && g.gpm->sm_active_percent) {
      sm_active_sum_ += *g.gpm->sm_active_percent;
      tensor_active_sum_ += g.gpm->tensor_active_percent.value_or(0);
      dram_bw_sum_ += g.gpm->dram_bw_percent.value_or(0);
      ++gpm_n_;
    }
    if (g.throttle_reasons) {
      for (const auto& reason :
           env::throttle_reason_names(*g.throttle_reasons)) {
        if (reason.find("thermal") != std::string::npos ||
            reason.find("power") != std::string::npos) {
          ++throttled_;
          break;
        }
      }
    }
    series_.push_back(
        {{"t", time - t0_},
         {"util", util},
         {"temp", temp},
         {"mem_gib", mem >= 0 ? mem / (1 << 30) : -1.0}});
  }

  std::shared_ptr<const train::TelemetryCallback> telemetry_;
  std::vector<double> step_ms_;
  std::vector<double> losses_;
  std::map<std::string, std::vector<double>> phases_;
  std::size_t samples_seen_ = 0;
  nlohmann::json series_ = nlohmann::json::array();
  double t0_ = -1;
  double util_min_ = 1e9, util_max_ = -1, temp_min_ = 1e9, temp_max_ = -1;
  double power_sum_ = 0;
  int power_n_ = 0, throttled_ = 0, samples_ = 0;
  // GPM counters (Hopper and later): sums over the samples that had them.
  double sm_active_sum_ = 0, tensor_active_sum_ = 0, dram_bw_sum_ = 0;
  int gpm_n_ = 0;
};

RowResult run_row(
    const BenchRow& row,
    const MatrixOptions& o,
    std::map<std::string, OpenData>& data_cache) {
  RowResult r;
  r.row = row;
  r.resolved_precision = row.precision;
  if (row.device == "cuda" && !o.gpu_available) {
    r.status = "skipped";
    r.reason = "no GPU";
    return r;
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    r.resolved_precision = resolve_precision(row);
    if (!data_cache.contains(row.data)) {
      data_cache[row.data] = open_data(row.data, o);
    }
    const OpenData& d = data_cache[row.data];
    train::RunOptions run;
    for (const auto& [name, value] : row_train_flags(row, o)) {
      train::set_flag(run, name, value);
    }
    train::ResolveContext resolve;
    resolve.open_train = [&d](const std::string&, const std::string&) {
      return d.train;
    };
    train::resolve_run(run, resolve);
    const train::TrainerOptions& t = run.trainer;
    r.run_dir = t.out_dir;
    std::error_code ec;
    fs::remove_all(t.out_dir, ec);

    // The row's figures come from its own callbacks: telemetry (sampled
    // twice a second), the recorder reading it, and a time budget on CPU
    // rows; metrics.jsonl and telemetry.jsonl stay in the row's folder.
    auto telemetry =
        std::make_shared<train::TelemetryCallback>(run.callbacks.telemetry);
    auto recorder = std::make_shared<RowRecorder>(telemetry);
    std::atomic<bool> stop{false};
    train::TrainerContext context;
    context.callbacks = {
        telemetry, std::make_shared<train::MetricsFile>(telemetry), recorder};
    context.record = train::record_of(run);
    if (row.device == "cpu" && o.cpu_row_seconds > 0) {
      context.callbacks.push_back(
          std::make_shared<train::TimeBudget>(o.cpu_row_seconds, stop));
    }
    train::Trainer trainer(
        model::make_model(t.model), d.train, d.val, t, context);
    const train::TrainSummary s = trainer.fit(&stop);
    r.steps = s.steps;
    r.cut_by_budget = s.stopped_early;
    r.images_per_s = s.images_per_s;
    r.tokens_per_s = s.tokens_per_s;
    r.model_flops_per_s = s.model_flops_per_s;
    r.mfu = s.mfu;
    r.peak_allocated_bytes = s.peak_allocated_bytes;
    r.peak_reserved_bytes = s.peak_reserved_bytes;
    r.peak_rss_bytes = s.peak_rss_bytes;
    r.train_loss = s.train_loss;
    if (d.val) {
      // The final evaluation; a row cut by its budget is evaluated now.
      const train::EvalResult e = s.eval ? *s.eval : trainer.evaluate();
      r.val_accuracy = e.accuracy;
      r.val_loss = e.loss;
    }
    recorder->fill(r);
    if (s.step_clock == "cuda-events") {
      // The host's step times on a GPU measure how fast it queues work:
      // the step times are the GPU's (CUDA events), as images/s is.
      r.median_step_ms = s.step_time_ms_median;
      r.mean_step_ms = s.images_per_s > 0
          ? 1e3 * static_cast<double>(t.batch) / s.images_per_s
          : 0;
    }
  } catch (const OutOfMemoryError& e) {
    r.status = "oom";
    r.reason = "out of memory";
  } catch (const c10::OutOfMemoryError& e) {
    r.status = "oom";
    r.reason = "out of memory";
  } catch (const std::exception& e) {
    r.status = "failed";
    r.reason = first_line(e.what());
  }
  if (row.device == "cuda") {
    cuda::empty_cache();
  }
  r.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return r;
}

} // namespace

std::vector<std::pair<std::string, std::string>> row_train_flags(
    const BenchRow& row,
    const MatrixOptions& o) {
  std::vector<std::pair<std::string, std::string>> flags = {
      {"model", row.model},
      {"data", row.data},
      {"batch", std::to_string(row.batch)},
      {"precision", resolve_precision(row)},
      {"device", row.device},
      {"steps", std::to_string(o.steps)},
      {"seed", std::to_string(o.seed)},
      {"threads", std::to_string(o.threads)},
      {"out", (fs::path(o.out_dir) / "rows" / row.id()).string()},
      {"keep-checkpoints", "0"},
      {"save-weights", "false"},
      {"oom-recovery", "false"},
      {"tensorboard", "false"},
      {"log-every", "0"},
      {"telemetry-interval", "0.5"}};
  if (o.workers > 0) {
    flags.emplace_back("workers", std::to_string(o.workers));
  }
  return flags;
}

std::string BenchRow::id() const {
  std::string m = model == "resnet18-small" ? "" : model + "-";
  return fmt::format("{}{}-{}-b{}", m, device, precision, batch);
}

std::vector<BenchRow> default_matrix(
    const std::string& model,
    const std::string& data) {
  std::vector<BenchRow> rows;
  for (const char* device : {"cpu", "cuda"}) {
    for (const char* precision : {"fp32", "mixed"}) {
      for (const std::int64_t batch : {32, 64}) {
        rows.push_back({device, precision, batch, model, data, false});
      }
    }
  }
  return rows;
}

std::vector<RowResult> run_matrix(
    const MatrixOptions& options,
    const std::function<void(const RowResult&)>& progress,
    const std::atomic<bool>* stop) {
  std::map<std::string, OpenData> data_cache;
  std::vector<RowResult> results;
  auto run = [&](const BenchRow& row) {
    results.push_back(run_row(row, options, data_cache));
    if (progress) {
      progress(results.back());
    }
    return results.back();
  };
  for (const auto& row : options.rows) {
    if (stop != nullptr && stop->load()) {
      return results;
    }
    run(row);
  }
  if (!options.grow_gpu_batch || !options.gpu_available) {
    return results;
  }
  // Doubling GPU batches per (model, data, precision) from the largest that
  // ran, until the first OOM (a row of its own) or the cap.
  std::map<std::string, BenchRow> largest;
  for (const auto& r : results) {
    if (r.row.device != "cuda" || r.status != "ok") {
      continue;
    }
    const std::string key =
        r.row.model + "|" + r.row.data + "|" + r.row.precision;
    if (!largest.contains(key) || largest[key].batch < r.row.batch) {
      largest[key] = r.row;
    }
  }
  for (auto& [key, row] : largest) {
    for (int i = 0; i < options.max_grown_rows; ++i) {
      if (stop != nullptr && stop->load()) {
        return results;
      }
      row.batch *= 2;
      row.grown = true;
      if (run(row).status != "ok") {
        break;
      }
    }
  }
  return results;
}

nlohmann::json to_json(const RowResult& r, bool with_series) {
  nlohmann::json j = {
      {"id", r.row.id()},
      {"device", r.row.device},
      {"precision", r.row.precision},
      {"resolved_precision", r.resolved_precision},
      {"batch", r.row.batch},
      {"model", r.row.model},
      {"data", r.row.data},
      {"grown", r.row.grown},
      {"status", r.status},
      {"reason", r.reason},
      {"steps", r.steps},
      {"cut_by_budget", r.cut_by_budget},
      {"mean_step_ms", r.mean_step_ms},
      {"median_step_ms", r.median_step_ms},
      {"images_per_s", r.images_per_s},
      {"tokens_per_s", r.tokens_per_s},
      {"model_flops_per_s", r.model_flops_per_s},
      {"mfu", r.mfu ? nlohmann::json(*r.mfu) : nlohmann::json()},
      {"peak_allocated_bytes", r.peak_allocated_bytes},
      {"peak_reserved_bytes", r.peak_reserved_bytes},
      {"peak_rss_bytes", r.peak_rss_bytes},
      {"val_accuracy", r.val_accuracy},
      {"val_loss", r.val_loss},
      {"train_loss", r.train_loss},
      {"wall_s", r.wall_s},
      {"gpu", r.gpu},
      {"phases_ms", r.phases_ms},
      {"run_dir", r.run_dir}};
  if (with_series) {
    j["losses"] = r.losses;
    j["gpu_series"] = r.gpu_series;
  }
  return j;
}

BenchRow bench_row_from_json(const nlohmann::json& j) {
  BenchRow row;
  row.device = j.value("device", row.device);
  row.precision = j.value("precision", row.precision);
  row.batch = j.value("batch", row.batch);
  row.model = j.value("model", row.model);
  row.data = j.value("data", row.data);
  row.grown = j.value("grown", false);
  return row;
}

RowResult row_from_json(const nlohmann::json& j) {
  RowResult r;
  r.row = bench_row_from_json(j);
  r.status = j.value("status", "ok");
  r.reason = j.value("reason", "");
  r.resolved_precision = j.value("resolved_precision", r.row.precision);
  r.steps = j.value("steps", std::int64_t{0});
  r.cut_by_budget = j.value("cut_by_budget", false);
  r.mean_step_ms = j.value("mean_step_ms", 0.0);
  r.median_step_ms = j.value("median_step_ms", 0.0);
  r.images_per_s = j.value("images_per_s", 0.0);
  r.tokens_per_s = j.value("tokens_per_s", 0.0);
  r.model_flops_per_s = j.value("model_flops_per_s", 0.0);
  if (j.contains("mfu") && j["mfu"].is_number()) {
    r.mfu = j["mfu"].get<double>();
  }
  r.peak_allocated_bytes = j.value("peak_allocated_bytes", std::uint64_t{0});
  r.peak_reserved_bytes = j.value("peak_reserved_bytes", std::uint64_t{0});
  r.peak_rss_bytes = j.value("peak_rss_bytes", std::uint64_t{0});
  r.val_accuracy = j.value("val_accuracy", 0.0);
  r.val_loss = j.value("val_loss", 0.0);
  r.train_loss = j.value("train_loss", 0.0);
  r.wall_s = j.value("wall_s", 0.0);
  r.gpu = j.value("gpu", nlohmann::json());
  r.phases_ms = j.value("phases_ms", nlohmann::json::object());
  if (j.contains("losses")) {
    r.losses = j["losses"].get<std::vector<double>>();
  }
  r.gpu_series = j.value("gpu_series", nlohmann::json::array());
  r.run_dir = j.value("run_dir", "");
  return r;
}

std::string to_line(const RowResult& r) {
  const std::string name = fmt::format(
      "{} {}{}{} b{}",
      r.row.device,
      r.row.precision,
      r.resolved_precision != r.row.precision
          ? fmt::format(" ({})", r.resolved_precision)
          : std::string(),
      r.row.model == "resnet18-small" ? "" : " " + r.row.model,
      r.row.batch);
  if (r.status != "ok") {
    return fmt::format(
        "{}: {}{}", name, r.status, r.reason.empty() ? "" : ": " + r.reason);
  }
  return fmt::format(
      "{}: {}, {:.1f} ms/step (median), {} steps{}, val {:.1f}% ({:.0f} s)",
      name,
      r.tokens_per_s > 0 ? fmt::format("{:.0f} tok/s", r.tokens_per_s)
                         : fmt::format("{:.0f} img/s", r.images_per_s),
      r.median_step_ms,
      r.steps,
      r.cut_by_budget ? " (time budget)" : "",
      100 * r.val_accuracy,
      r.wall_s);
}

} // namespace hotloop::testplan
