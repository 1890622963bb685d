// The GPU-free judge of chapter 02: the learner's trilinear_forward_cuda (its launch and
// its kernel), run under emulation on guarded copies of the inputs.
#include "bind_common.h"

void trilinear_forward_cuda(const at::Tensor& feats, const at::Tensor& points, at::Tensor& out);

at::Tensor forward(const at::Tensor& feats, const at::Tensor& points, bool at_end, int64_t seed) {
  emu::st().rng.seed(static_cast<unsigned>(seed));
  const at::Tensor f = emu::guarded_copy(feats, at_end, "feats");
  const at::Tensor p = emu::guarded_copy(points, at_end, "points");
  at::Tensor out = emu::guarded_empty({feats.size(0), feats.size(2)}, feats.options(), at_end, "out");
  trilinear_forward_cuda(f, p, out);
  emu::check_written(out, "out", "(n, f)");
  return out.clone();
}

// feats of N cubes (more than 2^31 elements), all zero but the last T = tail_feats.size(0) cubes,
// in reserved memory; the launch runs its first block and its last T blocks (each holds one cube
// or more, so they cover the last T cubes, where a 32-bit offset wraps). Returns out's last T rows.
at::Tensor forward_tail(const at::Tensor& tail_feats, const at::Tensor& tail_points, int64_t N, int64_t seed) {
  emu::st().rng.seed(static_cast<unsigned>(seed));
  const int64_t T = tail_feats.size(0), F = tail_feats.size(2);
  at::Tensor feats = emu::sparse_zeros({N, 8, F}, tail_feats.options(), "feats");
  at::Tensor points = emu::sparse_zeros({N, 3}, tail_points.options(), "points");
  at::Tensor out = emu::sparse_zeros({N, F}, tail_feats.options(), "out");
  feats.narrow(0, N - T, T).copy_(tail_feats);
  points.narrow(0, N - T, T).copy_(tail_points);
  at::Tensor tail = out.narrow(0, N - T, T);
  memset(tail.data_ptr(), 0xFF, static_cast<size_t>(tail.numel()) * tail.element_size());  // the poison
  {
    emu::SampledLaunch sampled(T);
    trilinear_forward_cuda(feats, points, out);
  }
  emu::check_written(tail, "out's last cubes", "(n - (N - " + std::to_string(T) + "), f)");
  return tail.clone();
}

// The last launch's grid and block: (grid.x, grid.y, grid.z, block.x, block.y, block.z).
std::vector<int64_t> last_launch() {
  const auto& s = emu::st();
  return {s.grid.x, s.grid.y, s.grid.z, s.block.x, s.block.y, s.block.z};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "trilinear forward, CUDA code emulated on the CPU");
  m.def("last_launch", &last_launch, "the last launch's grid and block");
  m.def("forward_tail", &forward_tail, "the forward on N cubes (> 2^31 elements), its last cubes only, emulated");
}
