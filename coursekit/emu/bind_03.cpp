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
  {
    emu::OneStorePerElement one;  // the design: one store per element of out
    trilinear_forward_cuda(f, p, out, m);
  }
  emu::check_written(out, "out", "(n, f)");
  return out.clone();
}

// The forward on N cubes, its last cubes only (emu::trilinear_tail).
at::Tensor forward_tail(const at::Tensor& tail_feats, const at::Tensor& tail_points, int64_t N, int64_t seed) {
  return emu::trilinear_tail(tail_feats, tail_points, N, seed,
                             [](const at::Tensor& feats, const at::Tensor& points, at::Tensor& out) {
                               trilinear_forward_cuda(feats, points, out, Mapping::vectorized);
                             });
}

// The vectorized forward's store pattern into out (emu::NoteStores): (neighbouring-lane store pairs,
// those more than 16 bytes apart, the first such pair in words).
std::tuple<int64_t, int64_t, std::string> forward_stores(const at::Tensor& feats, const at::Tensor& points) {
  return emu::stores_into("out", [&] { forward(feats, points, "vectorized", true, 1); });
}

int64_t packs(int64_t F, int64_t element_size, int64_t feats_address, int64_t out_address) {
  return pack_size(F, element_size, static_cast<uintptr_t>(feats_address), static_cast<uintptr_t>(out_address));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "trilinear forward, CUDA code emulated on the CPU");
  m.def("forward_tail", &forward_tail, "the vectorized forward on N cubes (N * 8 past 2^31), its last cubes, emulated");
  m.def("forward_stores", &forward_stores, "the vectorized forward's stores into out: neighbouring lanes' pairs, and those apart");
  m.def("pack_size", &packs, "the chapter's pack_size, as the emulated launch calls it");
}
