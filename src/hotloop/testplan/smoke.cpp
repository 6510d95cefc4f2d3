#include "hotloop/testplan/smoke.h"

#include <chrono>
#include <cmath>
#include <optional>

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/zeros.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/cuda/cuda_info.h"
#include "hotloop/data/data_spec.h"
#include "hotloop/data/loader.h"
#include "hotloop/errors.h"
#include "hotloop/model/model.h"
#include "hotloop/testplan/one_batch_steps.h"
#include "hotloop/train/batch_for_model.h"
#include "hotloop/train/optimizer.h"
#include "hotloop/train/precision.h"
#include "hotloop/train/resolve_run.h"

namespace hotloop::testplan {

namespace {

using Clock = std::chrono::steady_clock;
using env::Status;

// A check inside a rung failed: its message and the fix.
struct RungFailure {
  std::string detail;
  std::string fix;
};

[[noreturn]] void fail(std::string detail, std::string fix) {
  throw RungFailure{std::move(detail), std::move(fix)};
}

// The model's weights and buffers, to start every rung from the same state.
struct Snapshot {
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> buffers;
};

Snapshot snapshot(model::Model& m) {
  Snapshot s;
  for (const auto& p : m.parameters()) {
    s.params.push_back(p.detach().clone());
  }
  for (const auto& b : m.buffers()) {
    s.buffers.push_back(b.clone());
  }
  return s;
}

void restore(model::Model& m, const Snapshot& s) {
  at::NoGradGuard no_grad;
  auto params = m.parameters();
  auto buffers = m.buffers();
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].copy_(s.params[i]);
  }
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    buffers[i].copy_(s.buffers[i]);
  }
}

at::Tensor loss_of(model::Model& m, const data::Batch& b) {
  return m.objective(train::batch_for_model(b), {});
}

// The model as `hotloop train --model M --data D --batch B --seed S` builds
// it for this data: resolve_run, as every command that trains.
model::ModelOptions model_for(
    const SmokeOptions& options,
    const std::shared_ptr<const data::Dataset>& dataset) {
  train::RunOptions run;
  const std::pair<const char*, std::string> flags[] = {
      {"model", options.model},
      {"data", options.data},
      {"batch", std::to_string(options.batch)},
      {"seed", std::to_string(options.seed)},
      {"steps", "1"}};
  for (const auto& [name, value] : flags) {
    train::set_flag(run, name, value);
  }
  train::ResolveContext context;
  context.open_train = [&dataset](const std::string&, const std::string&) {
    return dataset;
  };
  train::resolve_run(run, context);
  return run.trainer.model;
}

data::Batch to_device(const data::Batch& b, const c10::Device& d) {
  data::Batch c = b;
  c.images = b.images.to(d);
  c.labels = b.labels.to(d);
  return c;
}

bool all_finite(const std::vector<at::Tensor>& ts) {
  for (const auto& t : ts) {
    if (t.defined() && !at::isfinite(t).all().item<bool>()) {
      return false;
    }
  }
  return true;
}

// One step of `steps` at `lr`; fails the rung on a non-finite loss or out of
// memory.
train::StepResult run_step(
    OneBatchSteps& steps,
    double lr,
    const std::string& where) {
  train::StepResult r;
  try {
    r = steps.run(lr);
  } catch (const train::StepFailure& e) {
    fail(
        fmt::format("on {}: {}", where, e.what()),
        "check the data (labels in range, images normalized) and the model's input size");
  }
  if (r.out_of_memory) {
    fail(
        fmt::format("out of memory on {}: {}", where, *r.out_of_memory),
        "use a smaller --batch or model");
  }
  return r;
}

// One step of plain SGD (lr 0.01) through the trainer's step; returns the
// loss. Fails the rung on a non-finite loss or gradient, or weights that did
// not move.
double one_step(
    const std::shared_ptr<model::Model>& m,
    const data::Batch& b,
    const c10::Device& device,
    const char* where) {
  train::OptimizerOptions sgd;
  sgd.momentum = 0;
  OneBatchSteps steps(m, b, device, train::Precision::Fp32, sgd);
  const at::Tensor before = m->parameters().front().detach().clone();
  const double loss = *run_step(steps, 0.01, where).loss_value;
  if (!all_finite(m->parameters())) {
    fail(
        fmt::format("a gradient on {} is not finite", where),
        "check the data and the model; try --precision fp32");
  }
  if (m->parameters().front().detach().equal(before)) {
    fail(
        fmt::format(
            "the optimizer step on {} did not change the weights", where),
        "the first layer gets no gradient: check that its parameters require grad");
  }
  return loss;
}

// What a rung ends with when it does not throw: Pass with what it measured,
// or Skip with why. A failed check throws RungFailure (fail()).
struct Outcome {
  Status status = Status::Pass;
  std::string detail;
};
Outcome pass(std::string detail) {
  return {Status::Pass, std::move(detail)};
}
Outcome skip(std::string why) {
  return {Status::Skip, std::move(why)};
}
const char* const kNoGpu = "no usable GPU (the gpu rung says why)";

// The ladder's shared state, set up once (one batch of the data, the model's
// first state), and its rungs, each a member run in kRungs' order.
class Ladder {
 public:
  explicit Ladder(const SmokeOptions& options);

  Outcome gpu_rung();
  Outcome cpu_step();
  Outcome cuda_step();
  Outcome on_gpu();
  Outcome cpu_vs_gpu();
  Outcome overfit();
  Outcome mixed_precision();

 private:
  c10::Device best() const {
    return gpu_ ? cuda_ : c10::Device(c10::kCPU);
  }
  // A fresh model from the first state, on `device`.
  std::shared_ptr<model::Model> fresh_model(const c10::Device& device) const;

  const SmokeOptions& options_;
  std::shared_ptr<const data::Dataset> dataset_;
  data::Batch cpu_batch_;
  model::ModelOptions model_options_;
  std::shared_ptr<model::Model> cpu_model_;
  Snapshot start_;
  const c10::Device cuda_{c10::kCUDA, 0};
  bool gpu_ = false; // the gpu rung passed
  std::shared_ptr<model::Model> gpu_model_;
  data::Batch gpu_batch_;
  std::uint64_t allocated_before_ = 0;
};

struct RungEntry {
  const char* id;
  const char* title;
  Outcome (Ladder::*run)();
};
constexpr RungEntry kRungs[] = {
    {"gpu", "GPU visible and usable", &Ladder::gpu_rung},
    {"cpu-step", "one batch on the CPU", &Ladder::cpu_step},
    {"cuda-step", "the same batch on CUDA", &Ladder::cuda_step},
    {"on-gpu", "everything on the GPU", &Ladder::on_gpu},
    {"cpu-vs-gpu", "CPU and GPU losses agree", &Ladder::cpu_vs_gpu},
    {"overfit", "overfit one batch", &Ladder::overfit},
    {"mixed-precision", "one mixed-precision step", &Ladder::mixed_precision},
};

void check_smoke_options(const SmokeOptions& options) {
  const auto& ids = smoke_rung_ids();
  if (!options.inject_failure.empty() &&
      std::find(ids.begin(), ids.end(), options.inject_failure) == ids.end()) {
    throw UsageError(fmt::format(
        "HOTLOOP_SMOKE_INJECT={}: not a rung ({})",
        options.inject_failure,
        fmt::join(ids, ", ")));
  }
  if (options.device != "auto" && options.device != "cpu" &&
      options.device != "cuda") {
    throw UsageError(
        fmt::format("--device {}: expected auto, cpu or cuda", options.device));
  }
  if (options.batch < 2) {
    throw UsageError("--batch: the ladder needs at least 2 samples");
  }
}

// One batch of the data, in order, unaugmented.
data::Batch first_batch(
    const SmokeOptions& options,
    const std::shared_ptr<const data::Dataset>& dataset) {
  data::LoaderOptions lo;
  lo.batch_size = static_cast<std::size_t>(options.batch);
  lo.workers = 1;
  lo.prefetch_batches = 1;
  lo.shuffle = false;
  lo.train = false;
  lo.augment = data::Augment::None;
  data::Loader loader(dataset, lo);
  loader.start_epoch(0);
  std::optional<data::Batch> batch = loader.next();
  if (!batch) {
    throw DataError(fmt::format(
        "{}: fewer than {} samples for one batch",
        options.data,
        options.batch));
  }
  return std::move(*batch);
}

Ladder::Ladder(const SmokeOptions& options)
    : options_(options),
      dataset_(data::open_dataset(
          data::parse_data_spec(options.data),
          data::Split::Train,
          options.seed)),
      cpu_batch_(first_batch(options, dataset_)),
      model_options_(model_for(options, dataset_)) {
  at::manual_seed(options.seed);
  cpu_model_ = model::make_model(model_options_);
  start_ = snapshot(*cpu_model_);
}

std::shared_ptr<model::Model> Ladder::fresh_model(
    const c10::Device& device) const {
  std::shared_ptr<model::Model> m = model::make_model(model_options_);
  restore(*m, start_);
  m->to(device);
  return m;
}

// Runs one rung: its outcome, or FAIL from its check or any exception; after a
// FAIL, the rest are "not run".
Rung run_rung(
    Ladder& ladder,
    const RungEntry& entry,
    const SmokeOptions& options,
    bool stopped) {
  Rung r;
  r.id = entry.id;
  r.title = entry.title;
  const Clock::time_point t0 = Clock::now();
  if (stopped) {
    r.status = Status::Skip;
    r.detail = "not run: an earlier rung failed";
    return r;
  }
  try {
    Outcome outcome = (ladder.*entry.run)();
    r.status = outcome.status;
    r.detail = std::move(outcome.detail);
    if (r.status == Status::Pass && options.inject_failure == entry.id) {
      fail(
          "injected failure (HOTLOOP_SMOKE_INJECT)",
          "unset HOTLOOP_SMOKE_INJECT");
    }
  } catch (const RungFailure& f) {
    r.status = Status::Fail;
    r.detail = f.detail;
    r.fix = f.fix;
  } catch (const std::exception& e) {
    r.status = Status::Fail;
    r.detail = e.what();
    r.fix =
        "the message above says what failed; `hotloop doctor` checks the machine";
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

Outcome Ladder::gpu_rung() {
  if (options_.device == "cpu") {
    return skip("--device cpu");
  }
  const env::Report doctor = env::diagnose(options_.doctor);
  std::string problems;
  std::string fixes;
  for (const auto& c : doctor.checks) {
    if (c.status == Status::Fail) {
      problems += (problems.empty() ? "" : "; ") + c.summary;
      fixes += (fixes.empty() ? "" : "; ") + c.fix;
    }
  }
  if (doctor.verdict == env::Verdict::Fail) {
    fail("doctor: " + problems, fixes);
  }
  if (doctor.verdict == env::Verdict::CpuOnly) {
    if (options_.device == "cuda") {
      fail(
          "--device cuda, but doctor finds no usable NVIDIA GPU",
          "run `hotloop doctor` for the reason and its fix, or use --device auto");
    }
    return skip(
        "no NVIDIA GPU on this machine (doctor: cpu-only); the GPU rungs are skipped");
  }
  const cuda::State st = cuda::state();
  if (!st.available || st.devices.empty()) {
    fail(
        "NVML sees a GPU but LibTorch cannot use it: " + st.error,
        "`hotloop doctor` names the driver/CUDA mismatch and its fix");
  }
  const std::string probe = cuda::kernel_probe(0);
  if (!probe.empty()) {
    fail(
        "a kernel on GPU 0 failed: " + probe,
        "this LibTorch build has no kernels for this GPU: install a build for its compute capability");
  }
  gpu_ = true;
  return pass(fmt::format(
      "GPU 0: {} (compute {}.{}, {:.0f} GiB); driver and CUDA compatible; a kernel ran",
      st.devices[0].name,
      st.devices[0].major,
      st.devices[0].minor,
      static_cast<double>(st.devices[0].total_memory_bytes) / (1 << 30)));
}

Outcome Ladder::cpu_step() {
  const double loss =
      one_step(cpu_model_, cpu_batch_, c10::Device(c10::kCPU), "the CPU");
  return pass(fmt::format(
      "{} x {}: forward, backward and step, loss {:.4f}",
      options_.model,
      options_.batch,
      loss));
}

Outcome Ladder::cuda_step() {
  if (!gpu_) {
    return skip(kNoGpu);
  }
  allocated_before_ = cuda::memory_stats(0).allocated;
  gpu_model_ = fresh_model(cuda_);
  gpu_batch_ = to_device(cpu_batch_, cuda_);
  const double loss = one_step(gpu_model_, gpu_batch_, cuda_, "CUDA");
  return pass(fmt::format(
      "forward, backward and step on {}, loss {:.4f}", cuda_.str(), loss));
}

Outcome Ladder::on_gpu() {
  if (!gpu_) {
    return skip(kNoGpu);
  }
  for (const auto& p : gpu_model_->named_parameters()) {
    if (!p.value().is_cuda() ||
        (p.value().grad().defined() && !p.value().grad().is_cuda())) {
      fail(
          fmt::format("parameter {} or its gradient is on the CPU", p.key()),
          "move the model with model->to(device) before creating the optimizer");
    }
  }
  for (const auto& b : gpu_model_->named_buffers()) {
    if (!b.value().is_cuda()) {
      fail(
          fmt::format("buffer {} is on the CPU", b.key()),
          "register tensors as buffers (register_buffer) so that to(device) moves them");
    }
  }
  if (!gpu_batch_.images.is_cuda() || !gpu_batch_.labels.is_cuda()) {
    fail("the batch is on the CPU", "copy each batch to the device");
  }
  const std::uint64_t now = cuda::memory_stats(0).allocated;
  if (now <= allocated_before_) {
    fail(
        fmt::format(
            "GPU memory did not rise ({} -> {} bytes allocated)",
            allocated_before_,
            now),
        "the work did not reach the GPU");
  }
  return pass(fmt::format(
      "parameters, buffers, gradients and batch on {}; allocated {:.1f} -> {:.1f} MiB",
      cuda_.str(),
      static_cast<double>(allocated_before_) / (1 << 20),
      static_cast<double>(now) / (1 << 20)));
}

Outcome Ladder::cpu_vs_gpu() {
  if (!gpu_) {
    return skip(kNoGpu);
  }
  const double tolerance = 1e-3;
  train::configure_math_mode(train::Precision::Fp32, cuda_); // TF32 off
  restore(*cpu_model_, start_);
  restore(*gpu_model_, start_);
  cpu_model_->eval();
  gpu_model_->eval();
  at::NoGradGuard no_grad;
  const double a = loss_of(*cpu_model_, cpu_batch_).item<double>();
  const double b = loss_of(*gpu_model_, gpu_batch_).item<double>();
  const double rel = std::abs(a - b) / std::max(std::abs(a), 1e-12);
  if (!(rel <= tolerance)) {
    fail(
        fmt::format(
            "CPU loss {:.6f} vs GPU loss {:.6f}: {:.2e} relative, over {:.0e}",
            a,
            b,
            rel,
            tolerance),
        "a kernel computes something else on the GPU: update the driver and LibTorch, and report it");
  }
  return pass(fmt::format(
      "CPU {:.6f} vs GPU {:.6f}: {:.1e} relative (tolerance {:.0e}, fp32, TF32 off, eval mode)",
      a,
      b,
      rel,
      tolerance));
}

Outcome Ladder::overfit() {
  std::shared_ptr<model::Model> m = fresh_model(best());
  const data::Batch b = to_device(cpu_batch_, best());
  train::OptimizerOptions oo;
  oo.kind = train::OptimizerKind::AdamW;
  OneBatchSteps steps(m, b, best(), train::Precision::Fp32, oo);
  double first = 0;
  double last = 0;
  int steps_run = 0;
  for (int s = 0; s < options_.overfit_steps; ++s) {
    last = *run_step(steps, 1e-3, best().str()).loss_value;
    if (s == 0) {
      first = last;
    }
    steps_run = s + 1;
    if (last * options_.overfit_factor <= first) {
      break; // memorized: the rung has its answer
    }
  }
  if (!(last * options_.overfit_factor <= first)) {
    fail(
        fmt::format(
            "the loss went {:.4f} -> {:.4f} in {} steps on one batch, less than {:.0f}x",
            first,
            last,
            options_.overfit_steps,
            options_.overfit_factor),
        "a model that cannot memorize one batch has a bug: labels misaligned with images, a detached graph, frozen parameters, or a learning rate far off");
  }
  return pass(fmt::format(
      "on {}: loss {:.4f} -> {:.4f} in {} AdamW steps on one batch ({:.0f}x; {:.0f}x needed within {})",
      best().str(),
      first,
      last,
      steps_run,
      first / std::max(last, 1e-12),
      options_.overfit_factor,
      options_.overfit_steps));
}

Outcome Ladder::mixed_precision() {
  const train::Precision p = train::mixed_precision_for(best());
  const bool bf16 = p == train::Precision::Bf16;
  std::shared_ptr<model::Model> m = fresh_model(best());
  const data::Batch b = to_device(cpu_batch_, best());
  m->eval();
  double reference = 0;
  double mixed = 0;
  {
    at::NoGradGuard no_grad;
    reference = loss_of(*m, b).item<double>();
    train::AutocastScope autocast(p, best());
    mixed = loss_of(*m, b).item<double>();
  }
  const double tolerance = 5e-2;
  const double rel = std::abs(mixed - reference) / std::max(reference, 1e-12);
  if (!(rel <= tolerance)) {
    fail(
        fmt::format(
            "{} loss {:.4f} vs fp32 {:.4f}: {:.2e} relative, over {:.0e}",
            bf16 ? "bf16" : "fp16",
            mixed,
            reference,
            rel,
            tolerance),
        "an op overflows in low precision: use --precision bf16 (or fp32) and report the model");
  }
  OneBatchSteps steps(m, b, best(), p, train::OptimizerOptions{});
  const train::StepResult r = run_step(steps, 1e-3, best().str());
  if (r.skipped || !all_finite(m->parameters())) {
    fail(
        fmt::format(
            "{} step: loss {} with non-finite gradients",
            bf16 ? "bf16" : "fp16",
            r.loss_value.value_or(0)),
        bf16 ? "use --precision fp32 for this model"
             : "use bf16 if the GPU has it, else fp32");
  }
  const double scale = steps.precision().loss_scale();
  return pass(fmt::format(
      "{} on {}: loss {:.4f} vs fp32 {:.4f} ({:.1e} relative, tolerance {:.0e}); gradients finite{}",
      bf16 ? "bf16" : "fp16 with loss scaling",
      best().str(),
      mixed,
      reference,
      rel,
      tolerance,
      scale > 0 ? fmt::format(" at scale {}", scale) : std::string()));
}

} // namespace

bool SmokeReport::failed() const {
  for (const auto& r : rungs) {
    if (r.status == Status::Fail) {
      return true;
    }
  }
  return false;
}

const std::vector<std::string>& smoke_rung_ids() {
  static const std::vector<std::string> ids = [] {
    std::vector<std::string> out;
    for (const RungEntry& e : kRungs) {
      out.emplace_back(e.id);
    }
    return out;
  }();
  return ids;
}

SmokeReport run_smoke(
    const SmokeOptions& options,
    const std::function<void(const Rung&)>& progress) {
  check_smoke_options(options);
  Ladder ladder(options);
  SmokeReport report;
  bool stopped = false;
  for (const RungEntry& entry : kRungs) {
    report.rungs.push_back(run_rung(ladder, entry, options, stopped));
    stopped = stopped || report.rungs.back().status == Status::Fail;
    if (progress) {
      progress(report.rungs.back());
    }
  }
  return report;
}

nlohmann::json to_json(const SmokeReport& report) {
  nlohmann::json rungs = nlohmann::json::array();
  for (const auto& r : report.rungs) {
    rungs.push_back(
        {{"id", r.id},
         {"title", r.title},
         {"status", env::to_string(r.status)},
         {"detail", r.detail},
         {"fix", r.fix},
         {"seconds", r.seconds}});
  }
  return {{"passed", !report.failed()}, {"rungs", rungs}};
}

std::string to_text(const Rung& r, bool color) {
  const char* tag = env::to_string(r.status);
  const char* on = "";
  const char* off = color ? "\033[0m" : "";
  if (color) {
    on = r.status == Status::Pass  ? "\033[32m"
        : r.status == Status::Fail ? "\033[31m"
                                   : "\033[2m";
  }
  std::string s = fmt::format(
      "{}{:<4}{} {:<16} {} ({:.1f} s)",
      on,
      tag,
      off,
      r.id,
      r.detail,
      r.seconds);
  if (!r.fix.empty()) {
    s += fmt::format("\n     fix: {}", r.fix);
  }
  return s;
}

int exit_code(const SmokeReport& report) {
  return report.failed() ? 1 : 0;
}

} // namespace hotloop::testplan
