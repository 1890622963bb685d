// The GPU-free judge of chapter 03: the learner's vectorized kernel (and pack_size, which
// decides when it runs), launched by the chapter's trilinear_forward_cuda, on guarded copies.
#include "bind_common.h"
#include "trilinear.h"

void trilinear_forward_cuda(const at::Tensor& feats, const at::Tensor& points, at::Tensor& out, Mapping mapping);

at::Tensor forward(const at::Tensor& feats, const at::Tensor& points, const std::string& mapping, bool at_end,
                   int64_t seed) {
  emu::st().rng.seed(static_cast<unsigned>(seed));
  const at::Tensor f = emu::guarded_copy(feats, at_end, "feats");
  const at::Tensor p = emu::guarded_copy(points, at_end, "points");
  at::Tensor out = emu::guarded_empty({feats.size(0), feats.size(2)}, feats.options(), at_end, "out");
  const Mapping m = mapping == "naive" ? Mapping::naive : mapping == "coalesced" ? Mapping::coalesced
                                                                                   : Mapping::vectorized;
  trilinear_forward_cuda(f, p, out, m);
  emu::check_written(out, "out", "(n, f)");
  return out.clone();
}

// feats of N cubes (N * 8 past 2^31), all zero but the last T = tail_feats.size(0) cubes, in
// reserved memory; the vectorized launch runs its first block and its last T blocks (each holds
// one cube or more, so they cover the last T cubes, where n * 8 wraps in 32 bits). Returns out's
// last T rows.
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
    trilinear_forward_cuda(feats, points, out, Mapping::vectorized);
  }
  emu::check_written(tail, "out's last cubes", "(n - (N - " + std::to_string(T) + "), f)");
  return tail.clone();
}

int64_t packs(int64_t F, int64_t element_size, int64_t feats_address, int64_t out_address) {
  return pack_size(F, element_size, static_cast<uintptr_t>(feats_address), static_cast<uintptr_t>(out_address));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "trilinear forward, CUDA code emulated on the CPU");
  m.def("forward_tail", &forward_tail, "the vectorized forward on N cubes (N * 8 past 2^31), its last cubes, emulated");
  m.def("pack_size", &packs, "the chapter's pack_size, as the emulated launch calls it");
}
