// Chapter 01: the bridge to Python.
//
// <torch/extension.h> brings in ATen, autograd and pybind11 with torch's type
// casters, so at::Tensor (alias torch::Tensor), std::string, double and bool
// convert to and from Python objects on their own.
#include <torch/extension.h>

#include "hello.h"

// TORCH_EXTENSION_NAME is defined by the build (-DTORCH_EXTENSION_NAME=ch01_hello).
// It must equal the name Python imports, or the import fails with
// "dynamic module does not define module export function (PyInit_...)".
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Chapter 01: echo, describe and scale";
  m.def("echo", &echo, "Return the tensor itself (no copy).", py::arg("x"));
  m.def("describe", &describe, "Describe a tensor's dtype, shape and device.", py::arg("x"));
  // py::arg names the parameters (so Python can pass them by keyword) and gives defaults.
  m.def("scale", &scale, "x * factor, in place if asked.",
        py::arg("x"), py::arg("factor"), py::arg("inplace") = false);
}
