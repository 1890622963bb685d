// Chapter 03: the Python module. Three names for the same result; on a GPU they
// differ only in how threads are mapped to outputs.
#include <torch/extension.h>

#include "trilinear.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Chapter 03: trilinear forward in three CUDA thread mappings (one CPU loop)";
  m.def("forward", [](const at::Tensor& feats, const at::Tensor& points) {
          return trilinear_forward(feats, points, Mapping::coalesced);
        }, "Chapter 02's kernel: f on threadIdx.x (coalesced)", py::arg("feats"), py::arg("points"));
  m.def("forward_naive", [](const at::Tensor& feats, const at::Tensor& points) {
          return trilinear_forward(feats, points, Mapping::naive);
        }, "n on threadIdx.x (uncoalesced); on the CPU the same loop as forward", py::arg("feats"), py::arg("points"));
  m.def("forward_vectorized", [](const at::Tensor& feats, const at::Tensor& points) {
          return trilinear_forward(feats, points, Mapping::vectorized);
        }, "f on threadIdx.x, 16-byte loads when F allows; else as forward", py::arg("feats"), py::arg("points"));
  m.def("pack_size", &pack_size,
        "Scalars per 16-byte pack that forward_vectorized uses for these addresses and F; 0: it falls back to forward",
        py::arg("F"), py::arg("element_size"), py::arg("feats_address"), py::arg("out_address"));
}
