#include "hotloop/bench/matrix.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "hotloop/core/first_line.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/data/data_spec.h"
#include "hotloop/errors.h"
#include "hotloop/model/model.h"
#include "hotloop/train/precision.h"
#include "hotloop/train/trainer.h"

namespace hotloop::bench {

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
  for (const data::Split split : {data::Split::Val, data::Split::Test}) {
    try {
      d.val = std::make_shared<EvenSubset>(
          std::shared_ptr<const data::Dataset>(
              data::open_dataset(spec, split, o.seed)),
          static_cast<std::size_t>(o.eval_samples));
      break;
    } catch (const DataError&) {
    }
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

// The per-step figures and the GPU samples the row's run directory holds.
void read_run(RowResult& r) {
  std::ifstream metrics(fs::path(r.run_dir) / "metrics.jsonl");
  std::vector<double> times;
  std::map<std::string, std::vector<double>> phases;
  for (std::string line; std::getline(metrics, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("loss") || !j.contains("step_time_ms")) {
      continue;
    }
    r.losses.push_back(j["loss"].get<double>());
    times.push_back(j["step_time_ms"].get<double>());
    if (j.contains("phases_ms")) {
      for (const auto& [k, v] : j["phases_ms"].items()) {
        phases[k].push_back(v.get<double>());
      }
    }
  }
  // Steady state: the trainer's rule (leave out the first tenth + 2).
  const std::size_t warm =
      std::min(times.size() / 10 + 2, times.size() > 3 ? times.size() - 3 : 0);
  const std::vector<double> steady(
      times.begin() + static_cast<std::ptrdiff_t>(warm), times.end());
  if (!steady.empty()) {
    r.mean_step_ms = std::accumulate(steady.begin(), steady.end(), 0.0) /
        static_cast<double>(steady.size());
    r.median_step_ms = median(steady);
  }
  r.phases_ms = nlohmann::json::object();
  for (auto& [k, v] : phases) {
    const auto begin =
        v.begin() + static_cast<std::ptrdiff_t>(std::min(warm, v.size()));
    const double n = static_cast<double>(v.end() - begin);
    r.phases_ms[k] = n > 0 ? std::accumulate(begin, v.end(), 0.0) / n : 0.0;
  }

  std::ifstream telemetry(fs::path(r.run_dir) / "telemetry.jsonl");
  r.gpu_series = nlohmann::json::array();
  double t0 = -1;
  double util_min = 1e9, util_max = -1, temp_min = 1e9, temp_max = -1;
  double power_sum = 0;
  int power_n = 0, throttled = 0, samples = 0;
  for (std::string line; std::getline(telemetry, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("gpus") || j["gpus"].empty()) {
      continue;
    }
    const auto& g = j["gpus"][0];
    const double t = j.value("time", 0.0);
    t0 = t0 < 0 ? t : t0;
    auto num = [&](const char* k) {
      return g.contains(k) && g[k].is_number() ? g[k].get<double>() : -1.0;
    };
    const double util = num("util_percent");
    const double temp = num("temperature_c");
    const double mem = num("memory_used_bytes");
    const double power = num("power_w");
    ++samples;
    if (util >= 0) {
      util_min = std::min(util_min, util);
      util_max = std::max(util_max, util);
    }
    if (temp >= 0) {
      temp_min = std::min(temp_min, temp);
      temp_max = std::max(temp_max, temp);
    }
    if (power >= 0) {
      power_sum += power;
      ++power_n;
    }
    if (g.contains("throttle_reasons") && g["throttle_reasons"].is_array()) {
      for (const auto& reason : g["throttle_reasons"]) {
        const std::string s =
            reason.is_string() ? reason.get<std::string>() : "";
        if (s.find("thermal") != std::string::npos ||
            s.find("power") != std::string::npos) {
          ++throttled;
          break;
        }
      }
    }
    r.gpu_series.push_back(
        {{"t", t - t0},
         {"util", util},
         {"temp", temp},
         {"mem_gib", mem >= 0 ? mem / (1 << 30) : -1.0}});
  }
  if (samples > 0) {
    r.gpu = {
        {"util_min", util_max >= 0 ? util_min : -1},
        {"util_max", util_max},
        {"temp_min", temp_max >= 0 ? temp_min : -1},
        {"temp_max", temp_max},
        {"power_mean_w", power_n > 0 ? power_sum / power_n : -1},
        {"throttle_samples", throttled},
        {"samples", samples}};
  }
}

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
    train::TrainerOptions t;
    t.model.name = row.model;
    const auto shape = d.train->shape();
    t.model.in_channels = shape ? shape->channels : 3;
    t.model.num_classes = static_cast<std::int64_t>(d.train->num_classes());
    t.model.image_size = shape ? shape->height : 224;
    t.steps = o.steps;
    t.batch = row.batch;
    // One recipe for every row: SGD with momentum, a short warm-up, cosine
    // (a model from scratch at lr 0.1 without warm-up spikes its loss).
    t.schedule.lr = 0.05;
    t.schedule.warmup_steps = std::min<std::int64_t>(20, o.steps / 10);
    t.precision = train::parse_precision(r.resolved_precision);
    t.device = row.device;
    t.seed = o.seed;
    t.threads = o.threads;
    if (o.workers > 0) {
      t.loader.workers = static_cast<unsigned int>(o.workers);
    }
    t.evaluate = false; // evaluated below, also when the budget cut it
    t.out_dir = (fs::path(o.out_dir) / "rows" / row.id()).string();
    t.write_checkpoints = false;
    t.quiet = true;
    t.oom_recovery = false; // an OOM is this row's answer
    t.tensorboard = false;
    t.telemetry_interval_s = 0.5;
    t.log_every_s = 0;
    r.run_dir = t.out_dir;
    std::error_code ec;
    fs::remove_all(t.out_dir, ec);

    train::Trainer trainer(model::make_model(t.model), d.train, d.val, t);
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::thread watchdog;
    if (row.device == "cpu" && o.cpu_row_seconds > 0) {
      watchdog = std::thread([&] {
        std::unique_lock<std::mutex> lock(mu);
        if (!cv.wait_for(
                lock, std::chrono::duration<double>(o.cpu_row_seconds), [&] {
                  return done;
                })) {
          stop = true;
        }
      });
    }
    struct Join {
      std::mutex& mu;
      std::condition_variable& cv;
      bool& done;
      std::thread& t;
      ~Join() {
        {
          std::lock_guard<std::mutex> lock(mu);
          done = true;
        }
        cv.notify_all();
        if (t.joinable()) {
          t.join();
        }
      }
    } join{mu, cv, done, watchdog};
    const train::TrainSummary s = trainer.fit(&stop);
    r.steps = s.steps;
    r.cut_by_budget = s.stopped_early;
    r.images_per_s = s.images_per_s;
    r.peak_allocated_bytes = s.peak_allocated_bytes;
    r.peak_reserved_bytes = s.peak_reserved_bytes;
    r.peak_rss_bytes = s.peak_rss_bytes;
    r.train_loss = s.train_loss;
    if (d.val) {
      const train::EvalResult e = trainer.evaluate();
      r.val_accuracy = e.accuracy;
      r.val_loss = e.loss;
    }
    read_run(r);
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
      "{} {}{} b{}",
      r.row.device,
      r.row.precision,
      r.resolved_precision != r.row.precision
          ? fmt::format(" ({})", r.resolved_precision)
          : std::string(),
      r.row.batch);
  if (r.status != "ok") {
    return fmt::format(
        "{}: {}{}", name, r.status, r.reason.empty() ? "" : ": " + r.reason);
  }
  return fmt::format(
      "{}: {:.0f} img/s, {:.1f} ms/step (median), {} steps{}, val {:.1f}% ({:.0f} s)",
      name,
      r.images_per_s,
      r.median_step_ms,
      r.steps,
      r.cut_by_budget ? " (time budget)" : "",
      100 * r.val_accuracy,
      r.wall_s);
}

} // namespace hotloop::bench
