// The GPU-free judge of chapter 02: the learner's trilinear_forward_cuda (its launch and
// its kernel), run under emulation on guarded copies of the inputs.
#include "bind_common.h"

void trilinear_forward_cuda(const at::Tensor& feats, const at::Tensor& points, at::Tensor& out);

at::Tensor forward(const at::Tensor& feats, const at::Tensor& points, bool at_end, int64_t seed) {
  emu::st().rng.seed(static_cast<unsigned>(seed));
  const at::Tensor f = emu::guarded_copy(feats, at_end, "feats");
  const at::Tensor p = emu::guarded_copy(points, at_end, "points");
  at::Tensor out = emu::guarded_empty({feats.size(0), feats.size(2)}, feats.options(), at_end, "out");
  {
    emu::OneStorePerElement one;  // the design: one store per element of out
    trilinear_forward_cuda(f, p, out);
  }
  emu::check_written(out, "out", "(n, f)");
  return out.clone();
}

// The forward on N cubes, its last cubes only (emu::trilinear_tail).
at::Tensor forward_tail(const at::Tensor& tail_feats, const at::Tensor& tail_points, int64_t N, int64_t seed) {
  return emu::trilinear_tail(tail_feats, tail_points, N, seed,
                             [](const at::Tensor& feats, const at::Tensor& points, at::Tensor& out) {
                               trilinear_forward_cuda(feats, points, out);
                             });
}

// The forward's store pattern into out (emu::NoteStores): (neighbouring-lane store pairs, those more
// than 16 bytes apart, the first such pair in words).
std::tuple<int64_t, int64_t, std::string> forward_stores(const at::Tensor& feats, const at::Tensor& points) {
  return emu::stores_into("out", [&] { forward(feats, points, true, 1); });
}

// The last launch's grid and block: (grid.x, grid.y, grid.z, block.x, block.y, block.z).
std::vector<int64_t> last_launch() {
  const auto& s = emu::st();
  return {s.grid.x, s.grid.y, s.grid.z, s.block.x, s.block.y, s.block.z};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "trilinear forward, CUDA code emulated on the CPU");
  m.def("last_launch", &last_launch, "the last launch's grid and block");
  m.def("forward_stores", &forward_stores, "the forward's stores into out: neighbouring lanes' pairs, and those apart");
  m.def("forward_tail", &forward_tail, "the forward on N cubes (> 2^31 elements), its last cubes only, emulated");
}
