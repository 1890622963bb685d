// The GPU-free judge of chapter 04: the learner's points-gradient reduction, inside the
// chapter's backward kernel and launch (trilinear_backward_cuda), on guarded copies.
#include "bind_common.h"
#include "trilinear.h"

void trilinear_backward_cuda(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                             at::Tensor& grad_feats, at::Tensor& grad_points);

// grad_out_offset, feats_offset: those tensors start that many elements into their buffers (off
// the 16-byte grid, where the vector path must not be taken).
std::vector<at::Tensor> backward(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                                 bool need_feats, bool need_points, bool at_end, int64_t seed,
                                 int64_t grad_out_offset, int64_t feats_offset) {
  return emu::trilinear_backward(trilinear_backward_cuda, grad_out, feats, points, need_feats, need_points, at_end,
                                 seed, grad_out_offset, feats_offset, false);
}

// The backward's points gradient on N cubes, its last cubes only (emu::points_grad_tail).
at::Tensor points_grad_tail(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points, int64_t N,
                            int64_t seed) {
  return emu::points_grad_tail(trilinear_backward_cuda, grad_out, feats, points, N, seed);
}

void trilinear_points_grad_atomic_cuda(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                                       at::Tensor& grad_points, bool warp_reduce);

// The chapter's atomic comparison kernels (grad_points by atomicAdd, per thread or per warp).
at::Tensor points_grad_atomic(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                              bool warp_reduce, bool at_end, int64_t seed) {
  emu::st().rng.seed(static_cast<unsigned>(seed));
  const at::Tensor g = emu::guarded_copy(grad_out, at_end, "grad_out");
  const at::Tensor f = emu::guarded_copy(feats, at_end, "feats");
  const at::Tensor p = emu::guarded_copy(points, at_end, "points");
  at::Tensor grad_points = emu::guarded_copy(at::zeros_like(points), at_end, "grad_points");  // the atomics add into it
  trilinear_points_grad_atomic_cuda(g, f, p, grad_points, warp_reduce);
  return grad_points.clone();
}

void gelu_forward_cuda(const at::Tensor& x, at::Tensor& out);
void gelu_backward_cuda(const at::Tensor& grad_out, const at::Tensor& x, at::Tensor& grad_in);

// The chapter's GELU kernels: the forward of x, or with grad_out the backward; x and grad_out
// start `offset` elements into their buffers (off the 16-byte grid when offset > 0).
at::Tensor gelu(const std::optional<at::Tensor>& grad_out, const at::Tensor& x, bool at_end, int64_t seed,
                int64_t offset) {
  emu::st().rng.seed(static_cast<unsigned>(seed));
  const at::Tensor xg = emu::guarded_copy(x, at_end, "x", offset);
  const char* name = grad_out ? "grad_in" : "out";
  at::Tensor out = emu::guarded_empty(x.sizes(), x.options(), at_end, name);
  if (grad_out) {
    gelu_backward_cuda(emu::guarded_copy(*grad_out, at_end, "grad_out", offset), xg, out);
  } else {
    gelu_forward_cuda(xg, out);
  }
  emu::check_written(out, name, "(i)");
  return out.clone();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("gelu", &gelu, "GELU's CUDA kernels (forward, or backward with grad_out), emulated on the CPU");
  m.def("backward", &backward, "trilinear backward, CUDA code emulated on the CPU", py::arg("grad_out"),
        py::arg("feats"), py::arg("points"), py::arg("need_feats"), py::arg("need_points"), py::arg("at_end"),
        py::arg("seed"), py::arg("grad_out_offset") = 0, py::arg("feats_offset") = 0);
  m.def("points_grad_tail", &points_grad_tail,
        "the backward's points gradient on N cubes (3 * N past 2^31), its last cubes only, emulated");
  m.def("points_grad_atomic", &points_grad_atomic, "the atomic comparison kernels, emulated on the CPU");
}
