// The module's entry point: hotloop's exceptions as the Python package's
// (hotloop/errors.py: the same message and hint), doctor, and the versions
// the module was built with.

#include "bindings.h"
#include "hotloop/cuda/build_info.h"
#include "hotloop/data/data_kinds.h"
#include "hotloop/env/doctor.h"
#include "hotloop/errors.h"

namespace hotloop::python {

namespace {

// The name of the Python class (hotloop/errors.py) for `e`'s type.
const char* error_class(const Error& e) {
  if (dynamic_cast<const ConfigError*>(&e) != nullptr) {
    return "ConfigError";
  }
  if (dynamic_cast<const UsageError*>(&e) != nullptr) {
    return "UsageError";
  }
  if (dynamic_cast<const DataError*>(&e) != nullptr) {
    return "DataError";
  }
  if (dynamic_cast<const EnvError*>(&e) != nullptr) {
    return "EnvError";
  }
  if (dynamic_cast<const OutOfMemoryError*>(&e) != nullptr) {
    return "OutOfMemoryError";
  }
  return "Error";
}

void translate(std::exception_ptr p) {
  try {
    if (p) {
      std::rethrow_exception(p);
    }
  } catch (const Error& e) {
    const py::object cls =
        py::module_::import("hotloop.errors").attr(error_class(e));
    const py::object error = cls(e.what(), e.hint());
    PyErr_SetObject(cls.ptr(), error.ptr());
  }
}

std::string doctor_json(const std::string& nvml_library) {
  env::DoctorOptions o;
  if (!nvml_library.empty()) {
    o.nvml_library = nvml_library;
  }
  return env::to_json(env::diagnose(o)).dump();
}

} // namespace

} // namespace hotloop::python

PYBIND11_MODULE(_hotloop, m) {
  namespace hp = hotloop::python;
  m.doc() = "hotloop's C++ core (the Python package's extension module)";
  py::register_exception_translator(&hp::translate);
  const hotloop::BuildInfo info = hotloop::build_info();
  m.attr("torch_version") = info.libtorch_version; // the headers built against
  m.attr("hotloop_version") = info.hotloop_version;
  m.def(
      "doctor_json",
      [](const std::string& nvml_library) {
        py::gil_scoped_release no_gil;
        return hp::doctor_json(nvml_library);
      },
      py::arg("nvml_library") = "",
      "hotloop doctor's report as JSON (what `hotloop doctor --json` prints)");
  m.def(
      "data_forms",
      [] { return hotloop::data::data_forms(); },
      "The --data forms, comma-separated (data/data_kinds.h's table)");
  hp::bind_loader(m);
  hp::bind_run(m);
}
