#pragma once
// FLOPs of the matrix products and convolutions one call of a function runs,
// counted from the operators' own arguments as ATen dispatches them. Unlike
// the profiler's count (profiler.h), it also counts TorchScript modules: the
// interpreter hands the profiler its whole frame as a convolution's inputs,
// so the profiler counts no convolution FLOPs for a scripted model (in Python
// too). Counted: aten::_convolution, which every convolution reaches, eager
// or scripted or traced (2 x outputs x inputs per output), mm,
// addmm, bmm, baddbmm (2 x m x n x k); the same totals as the profiler's for
// eager modules.

#include <functional>

namespace hotloop::telemetry {

// Counts on this thread while `work` runs.
double counted_flops(const std::function<void()>& work);

} // namespace hotloop::telemetry
