#include "hotloop/testplan/inspect_model.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "hotloop/cuda/cuda_graph.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/errors.h"
#include "hotloop/telemetry/op_flops.h"

namespace hotloop::testplan {

namespace {

using env::Check;
using env::Status;

Check check(
    std::string id,
    Status status,
    std::string summary,
    std::string fix = {}) {
  Check c;
  c.id = std::move(id);
  c.status = status;
  c.summary = std::move(summary);
  c.fix = std::move(fix);
  return c;
}

// A batch like the trainer's: images from a fixed generator (normalized
// pixels are about N(0, 1)), or token ids.
at::Tensor sample_batch(
    const model::ExportedOptions& o,
    std::int64_t batch,
    const c10::Device& device) {
  if (o.context > 0) {
    return at::zeros(
        {batch, o.context}, at::TensorOptions(device).dtype(at::kLong));
  }
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(0);
  return at::randn({batch, o.in_channels, o.image_size, o.image_size}, g)
      .to(device);
}

at::Tensor loss_of(const at::Tensor& out) {
  const at::Tensor logits =
      out.dim() == 3 ? out.reshape({-1, out.size(-1)}) : out;
  return at::cross_entropy_loss(
      logits.to(at::kFloat),
      at::zeros({logits.size(0)}, logits.options().dtype(at::kLong)));
}

Check backward_check(model::ExportedModel& m, const model::ExportedOptions& o) {
  m.train();
  for (auto& p : m.parameters()) {
    p.mutable_grad() = at::Tensor();
  }
  loss_of(m.forward(sample_batch(o, 4, c10::kCPU))).backward();
  std::vector<std::string> none;
  std::vector<std::string> bad;
  for (const auto& p : m.named_parameters()) {
    if (!p.value().requires_grad()) {
      continue;
    }
    const at::Tensor& g = p.value().grad();
    if (!g.defined()) {
      none.push_back(p.key());
    } else if (!at::isfinite(g).all().item<bool>()) {
      bad.push_back(p.key());
    }
  }
  auto listed = [](const std::vector<std::string>& v) {
    return v.size() <= 5 ? fmt::format("{}", fmt::join(v, ", "))
                         : fmt::format(
                               "{}, ... ({} in all)",
                               fmt::join(v.begin(), v.begin() + 5, ", "),
                               v.size());
  };
  if (!bad.empty()) {
    return check(
        "model.backward",
        Status::Fail,
        fmt::format(
            "a CPU batch of 4 gives non-finite gradients for {}", listed(bad)),
        "look for a log/sqrt/division of zero or an overflow in forward; run the same batch in Python with torch.autograd.set_detect_anomaly(True)");
  }
  if (!none.empty()) {
    return check(
        "model.backward",
        Status::Warn,
        fmt::format(
            "forward + backward on a CPU batch of 4 works, but {} trainable parameter(s) get no gradient: {}",
            none.size(),
            listed(none)),
        "forward does not use them: freeze them (--freeze) or remove them before export, or data parallel reduces zeros for them");
  }
  return check(
      "model.backward",
      Status::Pass,
      "forward + backward on a CPU batch of 4: finite gradients for every trainable parameter");
}

Check graph_check(const model::ExportedOptions& o) {
  try {
    auto m = model::load_exported_model(o);
    m->to(c10::Device(c10::kCUDA, 0));
    m->train();
    const at::Tensor x = sample_batch(o, 4, c10::Device(c10::kCUDA, 0));
    cuda::StreamScope stream(0);
    auto step = [&] { loss_of(m->forward(x)).backward(); };
    for (int i = 0; i < 3; ++i) {
      step(); // warm-up: gradients, workspaces, cuDNN's choices
    }
    cuda::Graph graph(0);
    graph.capture(step);
    graph.replay();
    // Reading a gradient waits for the replay: its errors surface here.
    for (const auto& p : m->parameters()) {
      if (p.grad().defined()) {
        (void)p.grad().sum().item<double>();
        break;
      }
    }
    return check(
        "model.cuda_graph",
        Status::Pass,
        "forward + backward of a batch of 4 captures as a CUDA graph and replays on cuda:0 (--cuda-graphs auto uses it)");
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const auto nl = what.find('\n'); nl != std::string::npos) {
      what.resize(nl);
    }
    return check(
        "model.cuda_graph",
        Status::Warn,
        fmt::format("the step cannot be captured as a CUDA graph: {}", what),
        "training runs it eagerly (--cuda-graphs auto says why); an op that syncs with the host (.item(), a data-dependent shape) is the usual cause");
  }
}

} // namespace

bool InspectReport::trainable_model() const {
  for (const Check& c : checks) {
    if (c.status == Status::Fail) {
      return false;
    }
  }
  return !checks.empty();
}

nlohmann::json InspectReport::to_json() const {
  nlohmann::json j = {
      {"path", path},
      {"format", format},
      {"trainable", trainable_model()},
      {"parameters", parameters},
      {"trainable_parameters", trainable},
      {"buffers", buffers},
      {"forward_flops_per_sample", forward_flops_per_sample},
      {"training_flops_per_sample", 3 * forward_flops_per_sample},
  };
  nlohmann::json cs = nlohmann::json::array();
  for (const Check& c : checks) {
    cs.push_back(
        {{"id", c.id},
         {"status", env::to_string(c.status)},
         {"summary", c.summary},
         {"facts", c.facts},
         {"fix", c.fix}});
  }
  j["checks"] = std::move(cs);
  return j;
}

namespace {

// Scripted, or traced (its control flow frozen at export).
Check torchscript_check(const model::ModelFileFormat& format) {
  return check(
      "model.format",
      format.traced ? Status::Warn : Status::Pass,
      format.traced
          ? "TorchScript (traced): its control flow (ifs, loops, shapes read in Python) was frozen for the example input at export"
          : "TorchScript (scripted)",
      format.traced
          ? "if forward branches on its input or its mode, script it instead: torch.jit.script(model)"
          : "");
}

// Its parameters, and that some of them train.
Check parameters_check(model::ExportedModel& m, InspectReport& r) {
  for (const auto& p : m.parameters()) {
    r.parameters += p.numel();
    r.trainable += p.requires_grad() ? p.numel() : 0;
  }
  r.buffers = static_cast<std::int64_t>(m.buffers().size());
  Check params = r.trainable > 0
      ? check(
            "model.parameters",
            Status::Pass,
            fmt::format(
                "{} parameters in {} tensors, {} of them trainable; {} buffer(s)",
                r.parameters,
                m.parameters().size(),
                r.trainable,
                r.buffers))
      : check(
            "model.parameters",
            Status::Fail,
            fmt::format(
                "none of its {} parameters requires a gradient", r.parameters),
            "export it without requires_grad_(False) or torch.no_grad() around the parameters; --freeze chooses what hotloop trains");
  params.facts = {
      {"parameters", r.parameters},
      {"trainable", r.trainable},
      {"buffers", r.buffers}};
  return params;
}

// train() and eval() switch its BatchNorm and dropout layers.
Check modes_check(const model::ExportedInfo& info) {
  const bool modes_ok = info.eval_freezes_batchnorm &&
      info.eval_disables_dropout && info.train_updates_batchnorm &&
      info.train_enables_dropout;
  std::vector<std::string> mode_problems;
  for (const std::string& w : info.warnings) {
    if (w.starts_with("eval()") || w.starts_with("train()")) {
      mode_problems.push_back(w);
    }
  }
  Check modes = check(
      "model.modes",
      modes_ok ? Status::Pass : Status::Warn,
      modes_ok
          ? fmt::format(
                "{} BatchNorm and {} dropout layer(s); train() and eval() switch them",
                info.batch_norms,
                info.dropouts)
          : fmt::format("{}", fmt::join(mode_problems, "; ")),
      modes_ok
          ? ""
          : "script it (torch.jit.script keeps `self.training`), or trace it once per mode");
  modes.facts = {
      {"batch_norms", info.batch_norms},
      {"dropouts", info.dropouts},
      {"eval_freezes_batchnorm", info.eval_freezes_batchnorm},
      {"eval_disables_dropout", info.eval_disables_dropout},
      {"train_updates_batchnorm", info.train_updates_batchnorm},
      {"train_enables_dropout", info.train_enables_dropout}};
  return modes;
}

// What a batch gives, and the head against the data's classes.
Check output_check(
    const model::ExportedInfo& info,
    const model::ExportedOptions& o) {
  std::string output = o.context > 0
      ? fmt::format(
            "(2, {}) token ids give logits [{}]; vocabulary {} covers the data's {}",
            o.context,
            fmt::join(info.output_shape, ", "),
            info.output_shape.empty() ? 0 : info.output_shape.back(),
            o.vocab)
      : fmt::format(
            "a (2, {}, {}, {}) batch gives [{}]",
            o.in_channels,
            o.image_size,
            o.image_size,
            fmt::join(info.output_shape, ", "));
  if (info.head_replaced) {
    output += fmt::format(
        "; head '{}' ({} outputs) is replaced for the data's {} classes",
        info.head,
        info.head_classes,
        o.num_classes);
  } else if (o.context == 0 && o.num_classes > 0) {
    output += fmt::format(
        ": {} classes, as the data has; follows the batch size", o.num_classes);
  }
  Check out = check("model.output", Status::Pass, output);
  out.facts = {
      {"output_shape", info.output_shape},
      {"head", info.head},
      {"head_replaced", info.head_replaced}};
  return out;
}

// FLOPs per sample, counted on one forward, for MFU.
Check flops_check(
    model::ExportedModel& m,
    const model::ExportedOptions& o,
    InspectReport& r) {
  try {
    m.eval();
    torch::NoGradGuard no_grad;
    const at::Tensor one = sample_batch(o, 1, c10::kCPU);
    r.forward_flops_per_sample =
        telemetry::counted_flops([&] { (void)m.forward(one); });
  } catch (const std::exception&) {
    r.forward_flops_per_sample = 0;
  }
  Check flops = r.forward_flops_per_sample > 0
      ? check(
            "model.flops",
            Status::Pass,
            fmt::format(
                "{:.4g} MFLOP per sample forward, {:.4g} for a training step (3x): the matrix products and convolutions, for MFU",
                r.forward_flops_per_sample / 1e6,
                3 * r.forward_flops_per_sample / 1e6))
      : check(
            "model.flops",
            Status::Warn,
            "no matrix product or convolution counted: runs report no MFU");
  flops.facts = {{"forward_flops_per_sample", r.forward_flops_per_sample}};
  return flops;
}

} // namespace

InspectReport inspect_model(const InspectOptions& options) {
  const model::ExportedOptions& o = options.model;
  InspectReport r;
  r.path = o.path;
  model::ModelFileFormat format;
  try {
    format = model::sniff_model_file(o.path);
  } catch (const Error& e) {
    r.checks.push_back(check("model.file", Status::Fail, e.what(), e.hint()));
    return r;
  }
  r.format = format.description;
  if (format.kind != model::ModelFileKind::TorchScript) {
    r.checks.push_back(check(
        "model.format",
        Status::Fail,
        fmt::format("{} is {}, not TorchScript", o.path, format.description),
        format.kind == model::ModelFileKind::TorchExport
            ? "LibTorch 2.11 trains TorchScript only: torch.jit.script(model).save('model.pt')"
            : "export the model with its code: torch.jit.script(model).save('model.pt') (or torch.jit.trace); a weight file only loads into a model that exists (--init)"));
    return r;
  }
  r.checks.push_back(torchscript_check(format));
  std::shared_ptr<model::ExportedModel> m;
  try {
    m = model::load_exported_model(o);
  } catch (const Error& e) {
    r.checks.push_back(check("model.load", Status::Fail, e.what(), e.hint()));
    return r;
  }
  const model::ExportedInfo& info = m->info();
  r.checks.push_back(parameters_check(*m, r));
  r.checks.push_back(modes_check(info));
  r.checks.push_back(output_check(info, o));
  try {
    r.checks.push_back(backward_check(*m, o));
  } catch (const std::exception& e) {
    r.checks.push_back(check(
        "model.backward",
        Status::Fail,
        fmt::format("backward fails on a CPU batch of 4: {}", e.what()),
        "an op without a gradient formula, or an in-place change of a tensor autograd needs; check the same batch in Python"));
  }

  r.checks.push_back(flops_check(*m, o, r));
  if (options.cuda && cuda::state().available) {
    r.checks.push_back(graph_check(o));
  } else {
    r.checks.push_back(check(
        "model.cuda_graph",
        Status::Skip,
        options.cuda ? "no CUDA device: the CUDA graph capture is not checked"
                     : "not checked on the CPU (--device cuda checks it)"));
  }
  return r;
}

std::string render(const InspectReport& report, bool color) {
  std::string out = fmt::format("{}: {}\n", report.path, report.format);
  for (const Check& c : report.checks) {
    const char* s = env::to_string(c.status);
    const char* on = !color        ? ""
        : c.status == Status::Pass ? "\033[32m"
        : c.status == Status::Warn ? "\033[33m"
        : c.status == Status::Fail ? "\033[31m"
                                   : "\033[2m";
    out += fmt::format(
        "{}{:<4}{} {:<17} {}\n",
        on,
        s,
        color ? "\033[0m" : "",
        c.id,
        c.summary);
    if (!c.fix.empty()) {
      out += fmt::format("{:22}fix: {}\n", "", c.fix);
    }
  }
  out += report.trainable_model()
      ? "verdict: hotloop can train it\n"
      : "verdict: hotloop cannot train it as exported\n";
  return out;
}

} // namespace hotloop::testplan
