// Chapter 04: the Python module.
#include <torch/extension.h>

#include "gelu_ops.h"  // not gelu.h: an edit of the formulas then leaves this file alone
#include "trilinear.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Chapter 04: trilinear forward and backward, GELU forward and backward";
  m.def("forward", &trilinear_forward, "out[n, f]: feats (N, 8, F) interpolated at points (N, 3) in [-1, 1]",
        py::arg("feats"), py::arg("points"));
  // Undefined tensors come back to Python as None.
  m.def("backward", &trilinear_backward, "(grad_feats or None, grad_points or None)", py::arg("grad_out"),
        py::arg("feats"), py::arg("points"), py::arg("need_feats") = true, py::arg("need_points") = true);
  m.def("points_grad_atomic", &trilinear_points_grad_atomic,
        "grad_points by the backward's CUDA kernel with atomicAdd instead of its reduction: per thread, or per warp "
        "after a shuffle reduction (warp_reduce=True). CUDA, float32/float64; not deterministic; for comparison",
        py::arg("grad_out"), py::arg("feats"), py::arg("points"), py::arg("warp_reduce") = false);
  m.def("gelu_forward", &gelu_forward, "x * Phi(x) (exact GELU)", py::arg("x"));
  m.def("gelu_backward", &gelu_backward, "grad_out * (Phi(x) + x * phi(x))", py::arg("grad_out"), py::arg("x"));
  m.def("gelu_cpu_loops", &gelu_cpu_loops,
        "the CPU loops GELU runs: \"auto\" (the widest vector loops the CPU can run), \"plain\", or a narrower "
        "build (\"avx2\", \"avx512\", \"avx512_bf16\"); returns the ones in use",
        py::arg("choice") = "auto");
}
