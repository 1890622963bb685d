// Chapter 02: the Python module.
#include <torch/extension.h>

#include "trilinear.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Chapter 02: trilinear interpolation forward (CPU and, if built with it, CUDA)";
  m.def("forward", &trilinear_forward, "out[n, f]: feats (N, 8, F) interpolated at points (N, 3) in [-1, 1]",
        py::arg("feats"), py::arg("points"));
}
