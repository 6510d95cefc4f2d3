#include "hotloop/telemetry/op_flops.h"

#include <string_view>

#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>

namespace hotloop::telemetry {

namespace {

// The count of the counted_flops() call running on this thread: a
// RecordFunction start callback is a plain function, with no state of its own.
thread_local double* tally = nullptr;

std::int64_t product(c10::IntArrayRef v) {
  std::int64_t p = 1;
  for (const std::int64_t x : v) {
    p *= x;
  }
  return p;
}

// aten::_convolution(input, weight, bias, stride, padding, dilation,
// transposed, output_padding, groups, ...): aten::convolution calls it, and
// traced graphs call it directly.
double convolution_flops(c10::ArrayRef<const c10::IValue> a) {
  if (a.size() < 9 || !a[0].isTensor() || !a[1].isTensor()) {
    return 0;
  }
  const at::Tensor& x = a[0].toTensor();
  const at::Tensor& w = a[1].toTensor();
  const bool transposed = a[6].toBool();
  const auto groups = a[8].toInt();
  const auto stride = a[3].toIntVector();
  const auto padding = a[4].toIntVector();
  const auto dilation = a[5].toIntVector();
  const std::int64_t spatial = x.dim() - 2;
  if (spatial < 1 || w.dim() != x.dim()) {
    return 0;
  }
  auto at = [](const std::vector<std::int64_t>& v, std::int64_t i) {
    return v.size() == 1 ? v[0] : v[static_cast<std::size_t>(i)];
  };
  const std::int64_t kernel = product(w.sizes().slice(2));
  if (transposed) {
    // Each input element meets every kernel tap of its group's outputs.
    const std::int64_t out_per_group = w.size(1);
    return 2.0 * static_cast<double>(x.numel()) *
        static_cast<double>(out_per_group * kernel);
  }
  std::int64_t outputs = x.size(0) * w.size(0);
  for (std::int64_t i = 0; i < spatial; ++i) {
    const std::int64_t in = x.size(2 + i);
    const std::int64_t k = w.size(2 + i);
    outputs *= (in + 2 * at(padding, i) - at(dilation, i) * (k - 1) - 1) /
            at(stride, i) +
        1;
  }
  (void)groups; // w.size(1) is already the inputs per group
  return 2.0 * static_cast<double>(outputs) *
      static_cast<double>(w.size(1) * kernel);
}

double matmul_flops(const at::Tensor& a, const at::Tensor& b) {
  // (..., m, k) x (..., k, n): 2 m n k per batch entry.
  if (a.dim() < 2 || b.dim() < 2) {
    return 0;
  }
  return 2.0 * static_cast<double>(a.numel()) * static_cast<double>(b.size(-1));
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (tally == nullptr) {
    return nullptr;
  }
  const std::string_view name = fn.name();
  const auto schema = fn.operator_schema();
  if (!schema) {
    return nullptr;
  }
  // TorchScript's interpreter passes its frame: the arguments are the last.
  const auto all = fn.inputs();
  const std::size_t n = schema->arguments().size();
  if (all.size() < n) {
    return nullptr;
  }
  const auto args = all.slice(all.size() - n);
  auto tensor = [&](std::size_t i) -> const at::Tensor* {
    return i < args.size() && args[i].isTensor() ? &args[i].toTensor()
                                                 : nullptr;
  };
  double flops = 0;
  if (name == "aten::_convolution") {
    flops = convolution_flops(args);
  } else if (name == "aten::mm" || name == "aten::bmm") {
    if (tensor(0) && tensor(1)) {
      flops = matmul_flops(*tensor(0), *tensor(1));
    }
  } else if (name == "aten::addmm" || name == "aten::baddbmm") {
    if (tensor(1) && tensor(2)) {
      flops = matmul_flops(*tensor(1), *tensor(2));
    }
  }
  *tally += flops;
  return nullptr;
}

} // namespace

double counted_flops(const std::function<void()>& work) {
  double count = 0;
  double* outer = tally;
  tally = &count;
  const at::CallbackHandle handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&on_start).needsInputs(true).scopes(
          {at::RecordScope::FUNCTION}));
  try {
    work();
  } catch (...) {
    at::removeCallback(handle);
    tally = outer;
    throw;
  }
  at::removeCallback(handle);
  tally = outer;
  return count;
}

} // namespace hotloop::telemetry
