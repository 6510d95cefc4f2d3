// hotloop._hotloop.Run: the trainer's run folder and telemetry for a Python
// loop (train/loop_run.h). Figures cross as JSON text (the package parses
// them); nothing here waits for the device.

#include <fmt/format.h>

#include "bindings.h"
#include "hotloop/errors.h"
#include "hotloop/train/loop_run.h"

namespace hotloop::python {

namespace {

Phase parse_phase(const std::string& name) {
  for (int i = 0; i <= static_cast<int>(Phase::Failed); ++i) {
    const auto p = static_cast<Phase>(i);
    if (name == to_string(p)) {
      return p;
    }
  }
  throw UsageError(fmt::format(
      "hotloop.Run.phase: '{}' is not a phase (forward, backward, all-reduce, optimizer, evaluation, checkpoint)",
      name));
}

std::string diagnosis_json(const train::LoopRun& run) {
  const auto d = run.diagnosis();
  return d ? telemetry::to_json(*d).dump() : std::string("null");
}

} // namespace

void bind_run(py::module_& m) {
  py::class_<train::LoopRun>(m, "Run")
      .def(
          py::init([](const std::string& out_dir,
                      const std::string& device,
                      const std::string& precision,
                      std::int64_t num_classes,
                      std::int64_t tokens_per_sample,
                      double flops_per_sample,
                      std::int64_t warmup_steps,
                      std::int64_t total_steps,
                      int rank,
                      int world_size,
                      bool telemetry,
                      double telemetry_interval_s,
                      std::int64_t diagnosis_window,
                      const std::string& nvml_library,
                      bool metrics_file,
                      bool tensorboard,
                      bool console,
                      const std::string& config_json,
                      std::vector<std::string> tokenizer_files) {
            train::LoopRunOptions o;
            o.out_dir = out_dir;
            o.device = c10::Device(device);
            o.precision = train::parse_precision(precision);
            o.num_classes = num_classes;
            o.tokens_per_sample = tokens_per_sample;
            o.flops_per_sample = flops_per_sample;
            o.warmup_steps = warmup_steps;
            o.total_steps = total_steps;
            o.rank = rank;
            o.world_size = world_size;
            o.callbacks.telemetry.enabled = telemetry;
            o.callbacks.telemetry.interval_s = telemetry_interval_s;
            o.callbacks.telemetry.diagnosis_window = diagnosis_window;
            o.callbacks.telemetry.nvml_library = nvml_library;
            o.callbacks.metrics_file = metrics_file;
            o.callbacks.tensorboard = tensorboard;
            o.callbacks.console.enabled = console;
            o.config = nlohmann::json::parse(config_json);
            o.tokenizer_files = std::move(tokenizer_files);
            py::gil_scoped_release no_gil;
            return std::make_unique<train::LoopRun>(std::move(o));
          }),
          py::arg("out_dir"),
          py::arg("device"),
          py::arg("precision"),
          py::arg("num_classes"),
          py::arg("tokens_per_sample"),
          py::arg("flops_per_sample"),
          py::arg("warmup_steps"),
          py::arg("total_steps"),
          py::arg("rank"),
          py::arg("world_size"),
          py::arg("telemetry"),
          py::arg("telemetry_interval_s"),
          py::arg("diagnosis_window"),
          py::arg("nvml_library"),
          py::arg("metrics_file"),
          py::arg("tensorboard"),
          py::arg("console"),
          py::arg("config_json"),
          py::arg("tokenizer_files"))
      .def(
          "begin_step",
          &train::LoopRun::begin_step,
          py::arg("data_wait_s") = py::none(),
          py::call_guard<py::gil_scoped_release>())
      .def(
          "phase",
          [](train::LoopRun& r, const std::string& name) {
            const Phase p = parse_phase(name);
            py::gil_scoped_release no_gil;
            r.phase(p);
          })
      .def(
          "end_step",
          &train::LoopRun::end_step,
          py::arg("samples"),
          py::arg("lr") = 0.0,
          py::arg("loss_follows") = false,
          py::call_guard<py::gil_scoped_release>())
      .def(
          "record_loss",
          &train::LoopRun::record_loss,
          py::call_guard<py::gil_scoped_release>())
      .def("diagnosis_json", &diagnosis_json)
      .def("steps", &train::LoopRun::steps)
      .def("in_step", &train::LoopRun::in_step)
      .def(
          "finish_json",
          [](train::LoopRun& r, std::size_t bad_samples, bool stopped_early) {
            py::gil_scoped_release no_gil;
            return r.finish(bad_samples, stopped_early).to_json().dump();
          },
          py::arg("bad_samples") = 0,
          py::arg("stopped_early") = false);
}

} // namespace hotloop::python
