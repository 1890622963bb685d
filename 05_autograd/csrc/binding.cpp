// Chapter 05: the Python module (pybind11). The same trilinear kernels are also
// registered as operators in ops.cpp; this file is the "direct" route that the
// autograd.Functions in trilinear_function.py and ste.py call.
#include <torch/extension.h>

#include "quantize.h"
#include "trilinear.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Chapter 05: trilinear forward/backward and fake quantisation, for autograd.Function and torch.library";
  m.def("forward", &trilinear_forward, "out[n, f]: feats (N, 8, F) interpolated at points (N, 3) in [-1, 1]",
        py::arg("feats"), py::arg("points"));
  // Undefined tensors come back to Python as None; None for feats becomes std::nullopt.
  m.def("backward", &trilinear_backward,
        "(grad_feats or None, grad_points or None); feats may be None when need_points is false",
        py::arg("grad_out"), py::arg("feats"), py::arg("points"), py::arg("need_feats") = true,
        py::arg("need_points") = true);
  m.def("fake_quantize", &fake_quantize_forward,
        "(out, mask): x snapped to the grid (q - zero_point) * scale, q in [quant_min, quant_max], ties to even; "
        "mask says where q was inside the range before clamping",
        py::arg("x"), py::arg("scale"), py::arg("zero_point"), py::arg("quant_min"), py::arg("quant_max"));
}
