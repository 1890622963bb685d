// The GPU-free judge of chapter 06: the learner's plain gather (gather_plain.cu: its
// launch and its kernel) and the chapter's plan kernel, run under emulation on a
// guarded copy of grad_out.
#include <torch/csrc/inductor/aoti_torch/utils.h>

#include <cmath>

#include "bind_common.h"

void emu06_gather_plain(AtenTensorHandle grad_out, AtenTensorHandle grad_in, int64_t H_in, int64_t W_in, int64_t mode,
                        double scale_h, double scale_w);

at::Tensor gather_plain(const at::Tensor& grad_out, std::vector<int64_t> input_size, int64_t mode,
                        std::optional<double> scale_h, std::optional<double> scale_w, bool at_end, int64_t seed) {
  emu::st().rng.seed(static_cast<unsigned>(seed));
  const at::Tensor g = emu::guarded_copy(grad_out, at_end, "grad_out");
  at::Tensor grad_in = emu::guarded_empty({grad_out.size(0), grad_out.size(1), input_size[0], input_size[1]},
                                          grad_out.options(), at_end, "grad_in");
  {
    emu::OneStorePerElement one;  // the contract: each grad_in value written once, by one thread
    emu06_gather_plain(torch::aot_inductor::new_tensor_handle(at::Tensor(g)),
                       torch::aot_inductor::new_tensor_handle(at::Tensor(grad_in)), input_size[0], input_size[1], mode,
                       scale_h.value_or(NAN), scale_w.value_or(NAN));
  }
  emu::check_written(grad_in, "grad_in", "(n, c, h, w)");
  return grad_in.clone();
}

// grad_out (1, planes, H_out, W_out) and grad_in (1, planes, H_in, W_in) in reserved memory (each may
// hold more than 2^31 elements), zero but the last plane of grad_out (`last`); the launch runs its
// first block and the z slices of the last plane (SampledLaunch). Returns grad_in's last plane.
at::Tensor gather_plain_last_plane(const at::Tensor& last, int64_t planes, std::vector<int64_t> input_size, int64_t mode,
                                   int64_t seed) {
  emu::st().rng.seed(static_cast<unsigned>(seed));
  const int64_t H_out = last.size(-2), W_out = last.size(-1);
  at::Tensor g = emu::sparse_zeros({1, planes, H_out, W_out}, last.options(), "grad_out");
  at::Tensor grad_in = emu::sparse_zeros({1, planes, input_size[0], input_size[1]}, last.options(), "grad_in");
  g.select(1, planes - 1).copy_(last.reshape({H_out, W_out}));
  at::Tensor tail = grad_in.select(1, planes - 1);
  memset(tail.data_ptr(), 0xFF, static_cast<size_t>(tail.numel()) * tail.element_size());  // the poison
  {
    emu::SampledLaunch sampled(0, planes - 1);
    emu06_gather_plain(torch::aot_inductor::new_tensor_handle(at::Tensor(g)),
                       torch::aot_inductor::new_tensor_handle(at::Tensor(grad_in)), input_size[0], input_size[1], mode,
                       NAN, NAN);
  }
  emu::check_written(tail, "grad_in's last plane", "(n, h, w)", emu::kPast2To31);
  return tail.clone();
}

// The plain gather's store pattern into grad_in (emu::NoteStores): (neighbouring-lane store pairs,
// those more than 16 bytes apart, the first such pair in words).
std::tuple<int64_t, int64_t, std::string> gather_plain_stores(const at::Tensor& grad_out, std::vector<int64_t> input_size,
                                                              int64_t mode) {
  emu::NoteStores noting;
  gather_plain(grad_out, std::move(input_size), mode, std::nullopt, std::nullopt, true, 0);
  for (const auto& note : emu::st().stores) {
    if (note.tensor == "grad_in") return {note.pairs, note.apart, note.example};
  }
  return {0, 0, ""};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("gather_plain_stores", &gather_plain_stores,
        "the plain CUDA gather's stores into grad_in: neighbouring lanes' pairs, and those apart (emulated)");
  m.def("gather_plain_last_plane", &gather_plain_last_plane,
        "the plain CUDA gather on planes of more than 2^31 elements in all, the last plane only, emulated");
  m.def("gather_plain", &gather_plain, "the plain CUDA gather, emulated on the CPU");
}
