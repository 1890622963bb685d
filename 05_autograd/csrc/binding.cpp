// Chapter 05: the Python module (pybind11). The same kernels are also
// registered as operators in ops.cpp; this file is the "direct" route that
// the autograd.Function in trilinear_function.py calls.
#include <torch/extension.h>

#include "ste.h"
#include "trilinear.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Chapter 05: trilinear forward/backward and round, for autograd.Function and torch.library";
  m.def("forward", &trilinear_forward, "out[n, f]: feats (N, 8, F) interpolated at points (N, 3) in [-1, 1]",
        py::arg("feats"), py::arg("points"));
  // Undefined tensors come back to Python as None.
  m.def("backward", &trilinear_backward, "(grad_feats or None, grad_points or None)", py::arg("grad_out"),
        py::arg("feats"), py::arg("points"), py::arg("need_feats") = true, py::arg("need_points") = true);
  m.def("round", &round_forward, "round to the nearest integer, ties to even (like torch.round)", py::arg("x"));
}
