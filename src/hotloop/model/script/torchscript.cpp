// ScriptedModel: a TorchScript module (torch.jit.script or trace, saved from
// Python) as a hotloop Model. Its parameters and buffers are registered in a
// tree of plain torch::nn::Modules that mirrors the script module's, so every
// part of the trainer (optimizer, checkpoints, data parallel, freezing,
// state_dict) sees them under the module's own dotted names; the tensors are
// shared, so .to(device) and set_data reach the script module too.
//
// Forward runs in TorchScript's interpreter with the graph executor's
// optimizations off: the same ATen kernels and autograd as eager PyTorch, no
// profiling runs, no re-specialization when the last batch is smaller, and
// nothing for a CUDA graph capture to trip over.

#include <cmath>
#include <sstream>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/nn/init.h>

#include "hotloop/errors.h"
#include "hotloop/model/script/exported.h"

namespace hotloop::model {

namespace {

// The message of a TorchScript error without its backtrace and interpreter
// traceback: the line that says what failed.
std::string brief(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::istringstream lines(
      c10_error ? c10_error->what_without_backtrace() : e.what());
  std::string line;
  std::string first;
  std::string last_error;
  while (std::getline(lines, line)) {
    if (first.empty() && !line.empty()) {
      first = line;
    }
    if (line.find("Error: ") != std::string::npos) {
      last_error = line;
    }
  }
  std::string out = last_error.empty() ? first : last_error;
  if (out.size() > 400) {
    out = out.substr(0, 400) + "...";
  }
  return out;
}

std::string last_part(const std::string& dotted) {
  const auto dot = dotted.rfind('.');
  return dot == std::string::npos ? dotted : dotted.substr(dot + 1);
}

std::string type_name(const torch::jit::Module& m) {
  const auto name = m.type()->name();
  return name ? last_part(name->qualifiedName()) : "Module";
}

void count_layers(const torch::jit::Module& src, ExportedInfo& info) {
  for (const auto& c : src.named_modules()) {
    const std::string kind = type_name(c.value);
    info.batch_norms += kind.find("BatchNorm") != std::string::npos;
    info.dropouts += kind.find("Dropout") != std::string::npos;
  }
}

void mirror(torch::nn::Module& dst, const torch::jit::Module& src) {
  for (const auto& p : src.named_parameters(/*recurse=*/false)) {
    if (p.value.defined()) {
      dst.register_parameter(p.name, p.value, p.value.requires_grad());
    }
  }
  for (const auto& b : src.named_buffers(/*recurse=*/false)) {
    if (b.value.defined()) {
      dst.register_buffer(b.name, b.value);
    }
  }
  for (const auto& c : src.named_children()) {
    auto child = std::make_shared<torch::nn::Module>(type_name(c.value));
    dst.register_module(c.name, child);
    mirror(*child, c.value);
  }
}

// The module that owns the last 2-D weight: a classifier's Linear.
std::string find_head(const torch::jit::Module& m) {
  std::string head;
  for (const auto& p : m.named_parameters()) {
    if (p.name.ends_with(".weight") && p.value.dim() == 2) {
      head = p.name.substr(0, p.name.size() - std::string(".weight").size());
    }
  }
  return head;
}

std::optional<torch::jit::Module> submodule(
    const torch::jit::Module& root,
    const std::string& dotted) {
  torch::jit::Module m = root;
  std::stringstream parts(dotted);
  std::string part;
  while (std::getline(parts, part, '.')) {
    if (!m.hasattr(part) || !m.attr(part).isModule()) {
      return std::nullopt;
    }
    m = m.attr(part).toModule();
  }
  return m;
}

std::string kind_of(const c10::IValue& v) {
  if (v.isTuple()) {
    return fmt::format("a tuple of {}", v.toTupleRef().elements().size());
  }
  if (v.isGenericDict()) {
    return "a dict";
  }
  if (v.isList()) {
    return "a list";
  }
  return v.tagKind();
}

class ScriptedModel : public ExportedModel {
 public:
  explicit ScriptedModel(const ExportedOptions& o) : options_(o) {
    info_.path = o.path;
    try {
      info_.format = sniff_model_file(o.path);
    } catch (const DataError& e) {
      throw DataError(
          e.what(),
          "check the path: --model torchscript:FILE names the file that torch.jit.save wrote");
    }
    if (info_.format.kind != ModelFileKind::TorchScript) {
      throw DataError(
          fmt::format(
              "{} is {}, not a TorchScript module",
              o.path,
              info_.format.description),
          export_hint());
    }
    try {
      module_ = torch::jit::load(o.path, c10::Device(c10::kCPU));
    } catch (const std::exception& e) {
      throw DataError(
          fmt::format("{}: TorchScript cannot load it: {}", o.path, brief(e)),
          "export it again with this PyTorch (2.11): " + export_hint());
    }
    if (!module_.find_method("forward")) {
      throw DataError(
          fmt::format("{}: the module has no forward method", o.path),
          "export a module whose forward takes the batch and returns the logits");
    }
    if (info_.format.traced) {
      info_.warnings.push_back(
          "traced: its control flow (ifs, loops, shapes read in Python) was frozen at export for the example input");
    }
    info_.head = o.head.empty() ? find_head(module_) : o.head;
    if (!o.head.empty() && !submodule(module_, o.head)) {
      throw UsageError(
          fmt::format("--head {}: {} has no such submodule", o.head, o.path),
          "name the classifier's module as Python does, e.g. --head classifier.3 (in Python: [n for n, _ in model.named_modules()])");
    }
    count_layers(module_, info_);
    module_.train(true);
    probe();
    mirror(*this, module_);
  }

  const ExportedInfo& info() const override {
    return info_;
  }

  at::Tensor forward(const at::Tensor& input) override {
    torch::jit::GraphOptimizerEnabledGuard plain(false);
    c10::IValue out;
    try {
      out = module_.forward({input});
    } catch (const c10::OutOfMemoryError&) {
      throw;
    } catch (const std::exception& e) {
      // The interpreter rethrows what an op threw with its own traceback;
      // an allocation failure must stay one for OOM recovery.
      const std::string what = e.what();
      if (what.find("out of memory") != std::string::npos) {
        TORCH_CHECK_WITH(OutOfMemoryError, false, brief(e));
      }
      throw;
    }
    return logits_of(out);
  }

  void train(bool on) override {
    torch::nn::Module::train(on);
    module_.train(on);
  }

  std::string head_name() const override {
    return info_.head;
  }

  void set_checkpointing(Checkpointing mode) override {
    if (mode != Checkpointing::None) {
      throw UsageError(
          fmt::format(
              "--activation-checkpointing {}: a TorchScript module is one graph that hotloop cannot split into stages to recompute",
              to_string(mode)),
          "use --activation-checkpointing none; to save memory use --micro-batch or --precision bf16, or checkpoint inside the model (torch.utils.checkpoint is not scriptable)");
    }
  }

  std::int64_t tokens_per_sample() const override {
    return options_.context;
  }

 private:
  static std::string export_hint() {
    return "in Python: torch.jit.script(model).save('model.pt') (or torch.jit.trace(model, example).save(...)), then --model torchscript:model.pt";
  }

  static std::string tensor_output_hint() {
    return "hotloop needs forward to return the logits as one tensor: wrap the model so that forward returns out[0] (or out['logits']) and export it again";
  }

  // What forward returned, as the logits tensor; DataError for a tuple, a
  // dict or anything else.
  at::Tensor logits_of(const c10::IValue& out) const {
    if (!out.isTensor()) {
      throw DataError(
          fmt::format(
              "{}: forward returned {}, not one tensor",
              options_.path,
              kind_of(out)),
          tensor_output_hint());
    }
    return out.toTensor();
  }

  bool probing() const {
    return options_.context > 0 ||
        (options_.in_channels > 0 && options_.image_size > 0);
  }

  at::Tensor sample(std::int64_t batch) const {
    if (options_.context > 0) {
      return at::zeros({batch, options_.context}, at::kLong);
    }
    // A fixed pattern, not the global generator: loading consumes no
    // random numbers beyond a replaced head's.
    const std::int64_t n = batch * options_.in_channels * options_.image_size *
        options_.image_size;
    return at::sin(at::arange(n, at::kFloat) * 0.37)
        .reshape(
            {batch,
             options_.in_channels,
             options_.image_size,
             options_.image_size});
  }

  std::string shape_text(const at::Tensor& t) const {
    return fmt::format("[{}]", fmt::join(t.sizes(), ", "));
  }

  at::Tensor call(const at::Tensor& x) {
    c10::IValue out;
    try {
      torch::jit::GraphOptimizerEnabledGuard plain(false);
      out = module_.forward({x});
    } catch (const std::exception& e) {
      if (info_.format.traced) {
        throw DataError(
            fmt::format(
                "{}: forward fails on a batch of shape {} ({}): {}; a traced module keeps its example input's shapes, so its batch size may be fixed",
                options_.path,
                shape_text(x),
                c10::toString(x.scalar_type()),
                brief(e)),
            "script it (torch.jit.script), or make forward follow the batch size (x.flatten(1), not x.view(8, -1)) and trace it again for inputs shaped like the data's");
      }
      throw DataError(
          fmt::format(
              "{}: forward fails on a batch of shape {} ({}): {}",
              options_.path,
              shape_text(x),
              c10::toString(x.scalar_type()),
              brief(e)),
          options_.context > 0
              ? "a token model takes (batch, --context) int64 ids; check --context and the model's vocabulary"
              : "export it for inputs shaped like the data's (channels, size), or set --size/--in-channels; `hotloop inspect model FILE --data SPEC` shows what it takes");
    }
    return logits_of(out);
  }

  // The output's shape for a batch of `batch`, or a DataError naming what is
  // wrong with it.
  void check_output(const at::Tensor& out, std::int64_t batch) {
    const bool lm = options_.context > 0;
    const bool ok = lm ? out.dim() == 3 && out.size(0) == batch &&
            out.size(1) == options_.context
                       : out.dim() == 2 && out.size(0) == batch;
    if (ok) {
      return;
    }
    if (out.dim() >= 1 && out.size(0) != batch) {
      throw DataError(
          fmt::format(
              "{}: a batch of {} gives an output of shape {}: its batch size is fixed{}",
              options_.path,
              batch,
              shape_text(out),
              info_.format.traced ? " (traced with another batch size)" : ""),
          "make the model follow the batch size (x.flatten(1) or x.view(x.size(0), -1), not a constant), or script it: torch.jit.script(model)");
    }
    throw DataError(
        fmt::format(
            "{}: forward gives shape {} for a batch of {}; {}",
            options_.path,
            shape_text(out),
            batch,
            lm ? fmt::format(
                     "a token model must give (batch, {}, vocabulary)",
                     options_.context)
               : "an image classifier must give (batch, classes)"),
        tensor_output_hint());
  }

  void replace_head(std::int64_t classes) {
    std::optional<torch::jit::Module> head = submodule(module_, info_.head);
    const bool has_weight = head && head->hasattr("weight") &&
        head->attr("weight").isTensor() &&
        head->attr("weight").toTensor().dim() == 2;
    if (!has_weight) {
      throw DataError(
          fmt::format(
              "{}: the model has {} outputs but the data {} classes, and it has no classifier head to replace{}",
              options_.path,
              info_.output_shape.back(),
              options_.num_classes,
              info_.head.empty() ? ""
                                 : " ('" + info_.head + "' has no 2-D weight)"),
          "name the head's module with --head NAME (a Linear), or export the model with the data's class count");
    }
    const at::Tensor old = head->attr("weight").toTensor();
    info_.head_classes = old.size(0);
    at::NoGradGuard no_grad;
    // PyTorch's nn.Linear initialization.
    at::Tensor w = at::empty({classes, old.size(1)}, old.options());
    torch::nn::init::kaiming_uniform_(w, std::sqrt(5.0));
    head->register_parameter(
        "weight", w.requires_grad_(old.requires_grad()), false);
    if (head->hasattr("bias") && head->attr("bias").isTensor()) {
      const at::Tensor old_bias = head->attr("bias").toTensor();
      const double bound = 1.0 / std::sqrt(static_cast<double>(old.size(1)));
      at::Tensor b =
          at::empty({classes}, old_bias.options()).uniform_(-bound, bound);
      head->register_parameter(
          "bias", b.requires_grad_(old_bias.requires_grad()), false);
    }
    info_.head_replaced = true;
  }

  // Runs the module on a batch of 2 (twice) and of 3 in eval mode without
  // gradients, checks what it returns, replaces the head for the data's class
  // count, and puts every buffer back as it was.
  void probe() {
    if (!probing()) {
      return;
    }
    std::vector<std::pair<at::Tensor, at::Tensor>> saved;
    for (const auto& b : module_.named_buffers()) {
      if (b.value.defined()) {
        saved.emplace_back(b.value, b.value.clone());
      }
    }
    auto restore = [&saved] {
      at::NoGradGuard no_grad;
      for (auto& [live, copy] : saved) {
        live.copy_(copy);
      }
    };
    at::NoGradGuard no_grad;
    module_.eval();
    try {
      const at::Tensor x2 = sample(2);
      const at::Tensor a = call(x2);
      const at::Tensor b = call(x2);
      info_.output_shape = a.sizes().vec();
      check_output(a, 2);
      info_.eval_disables_dropout = a.sizes() == b.sizes() && at::equal(a, b);
      for (const auto& [live, copy] : saved) {
        if (!at::equal(live, copy)) {
          info_.eval_freezes_batchnorm = false;
        }
      }
      restore();
      if (options_.context == 0 && options_.num_classes > 0 &&
          a.size(1) != options_.num_classes) {
        replace_head(options_.num_classes);
        const at::Tensor again = call(x2);
        check_output(again, 2);
        if (again.size(1) != options_.num_classes) {
          throw DataError(
              fmt::format(
                  "{}: with head '{}' replaced for {} classes, forward still gives shape {}",
                  options_.path,
                  info_.head,
                  options_.num_classes,
                  shape_text(again)),
              "name the module whose output is the logits with --head NAME");
        }
      }
      if (options_.context > 0 && a.size(2) < options_.vocab) {
        throw DataError(
            fmt::format(
                "{}: the model's vocabulary is {} but the data's token ids go up to {}",
                options_.path,
                a.size(2),
                options_.vocab - 1),
            "export the model with a vocabulary at least the tokenizer's");
      }
      check_output(call(sample(3)), 3);
      check_training_mode(x2, saved);
    } catch (...) {
      restore();
      module_.train(true);
      throw;
    }
    restore();
    module_.train(true);
    if (!info_.train_updates_batchnorm) {
      info_.warnings.push_back(
          "train() does not make its BatchNorm use batch statistics (traced in eval mode): it trains with frozen statistics");
    }
    if (!info_.train_enables_dropout) {
      info_.warnings.push_back(
          "train() does not make its dropout random (traced in eval mode, or p = 0): it trains without dropout");
    }
    if (!info_.eval_freezes_batchnorm) {
      info_.warnings.push_back(
          "eval() does not stop its BatchNorm updating running statistics (traced in training mode): validation changes them");
    }
    if (!info_.eval_disables_dropout) {
      info_.warnings.push_back(
          "eval() does not turn its dropout off (traced in training mode): validation and predictions are random");
    }
  }

  // In training mode BatchNorm layers update their statistics and dropout
  // differs from call to call. Checked for traced modules that have them (a
  // scripted module reads `self.training` itself, and dropout with p = 0 or
  // BatchNorm without running statistics would look frozen). The global
  // generator's state is put back (dropout draws from it).
  void check_training_mode(
      const at::Tensor& x,
      const std::vector<std::pair<at::Tensor, at::Tensor>>& saved) {
    if (!info_.format.traced ||
        (info_.batch_norms == 0 && info_.dropouts == 0)) {
      return;
    }
    at::Generator g = at::detail::getDefaultCPUGenerator();
    const at::Tensor rng = g.get_state();
    module_.train(true);
    const at::Tensor a = call(x);
    const at::Tensor b = call(x);
    g.set_state(rng);
    if (info_.dropouts > 0) {
      info_.train_enables_dropout = !at::equal(a, b);
    }
    if (info_.batch_norms > 0) {
      bool changed = false;
      for (const auto& [live, copy] : saved) {
        changed = changed || !at::equal(live, copy);
      }
      info_.train_updates_batchnorm = changed;
    }
  }

  ExportedOptions options_;
  ExportedInfo info_;
  torch::jit::Module module_;
};

} // namespace

std::shared_ptr<ExportedModel> load_exported_model(
    const ExportedOptions& options) {
  return std::make_shared<ScriptedModel>(options);
}

} // namespace hotloop::model
