// The GPU-free judge of chapter 05's CUDA kernels (trilinear_cuda.cu: the forward, and the
// backward with its 16-byte path), as trilinear.cpp calls them, on guarded copies. Chapter 05 has
// no CUDA exercise; its emulated tests check the kernels on a machine without a GPU.
#include "bind_common.h"

void trilinear_forward_cuda(const at::Tensor& feats, const at::Tensor& points, at::Tensor& out);
void trilinear_backward_cuda(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                             at::Tensor& grad_feats, at::Tensor& grad_points);

// offset: feats (and grad_out) start that many elements into their buffers (off the 16-byte grid).
at::Tensor forward(const at::Tensor& feats, const at::Tensor& points, bool at_end, int64_t seed, int64_t offset) {
  emu::st().rng.seed(static_cast<unsigned>(seed));
  const at::Tensor f = emu::guarded_copy(feats, at_end, "feats", offset);
  const at::Tensor p = emu::guarded_copy(points, at_end, "points");
  at::Tensor out = emu::guarded_empty({feats.size(0), feats.size(2)}, feats.options(), at_end, "out");
  trilinear_forward_cuda(f, p, out);
  emu::check_written(out, "out", "(n, f)");
  return out.clone();
}

// As trilinear.cpp's trilinear_backward: feats only when the points' gradient is needed, each
// gradient only when needed (an undefined tensor otherwise).
std::vector<at::Tensor> backward(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                                 bool need_feats, bool need_points, bool at_end, int64_t seed, int64_t offset) {
  return emu::trilinear_backward(trilinear_backward_cuda, grad_out, feats, points, need_feats, need_points, at_end,
                                 seed, offset, offset, true);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "chapter 05's CUDA forward, emulated on the CPU");
  m.def("backward", &backward, "chapter 05's CUDA backward, emulated on the CPU");
}
