#pragma once
// hotloop._hotloop, the Python package's extension module: each file binds
// one part (loader_binding.cpp, run_binding.cpp, module.cpp: errors, doctor,
// build facts). pybind11 is torch's own copy, with torch's tensor caster
// (torch/csrc/utils/pybind.h): an at::Tensor crosses as the same tensor.

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

namespace hotloop::python {

namespace py = pybind11;

void bind_loader(py::module_& m);
void bind_run(py::module_& m);

} // namespace hotloop::python
