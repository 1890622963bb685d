// The GPU-free judge of chapter 06's whole ladder: any CUDA kernel of the dispatch table, by
// name or as the table picks it, run under emulation on guarded copies (06_upsample/ladder.py
// --emulated, tests/test_06_upsample.py test_every_rung_emulated).
#include <torch/csrc/inductor/aoti_torch/utils.h>

#include "bind_common.h"

void emu06_run(AtenTensorHandle in, AtenTensorHandle out, int64_t H_in, int64_t W_in, int64_t mode, bool forward,
               bool gather, bool channels_last, const std::string& kernel, std::optional<double> scale_h,
               std::optional<double> scale_w);
std::string emu06_table();

// forward: t is x and size the output's (H, W); backward: t is grad_out and size the input's.
// kernel: a rung's name, or "" for the table's choice (what the op runs). at_end: each tensor ends
// where its accessible pages end (a read past it faults; its start is then only as aligned as its
// size makes it), else it starts there (a read before it faults). offset: the input starts that
// many elements into its buffer (a view whose data is not on a 16-byte boundary).
at::Tensor run(const at::Tensor& t, std::vector<int64_t> size, int64_t mode, bool forward, const std::string& method,
               const std::string& kernel, bool at_end, int64_t seed, std::optional<double> scale_h,
               std::optional<double> scale_w, int64_t offset) {
  emu::st().rng.seed(static_cast<unsigned>(seed));
  const bool cl = t.dim() == 4 && t.size(1) > 1 && t.is_contiguous(at::MemoryFormat::ChannelsLast) &&
                  !t.is_contiguous();
  const int64_t N = t.size(0), C = t.size(1);
  // the input's bytes in its own layout, packed, in a guarded buffer
  const at::Tensor packed = cl ? t.permute({0, 2, 3, 1}).contiguous() : t.contiguous();
  at::Tensor in = emu::guarded_copy(packed, at_end, forward ? "x" : "grad_out", offset);
  if (cl) in = in.permute({0, 3, 1, 2});
  at::Tensor out = cl ? emu::guarded_empty({N, size[0], size[1], C}, t.options(), at_end, forward ? "out" : "grad_in")
                            .permute({0, 3, 1, 2})
                      : emu::guarded_empty({N, C, size[0], size[1]}, t.options(), at_end, forward ? "out" : "grad_in");
  const int64_t H_in = forward ? t.size(2) : size[0], W_in = forward ? t.size(3) : size[1];
  emu06_run(torch::aot_inductor::new_tensor_handle(at::Tensor(in)), torch::aot_inductor::new_tensor_handle(at::Tensor(out)),
            H_in, W_in, mode, forward, method != "scatter", cl, kernel, scale_h, scale_w);
  emu::check_written(out.contiguous(cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous),
                     forward ? "out" : "grad_in", "(n, c, h, w)");
  return out.clone();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("run", &run, "one call of chapter 06's CUDA path (a named kernel, or the table's choice), emulated",
        py::arg("t"), py::arg("size"), py::arg("mode"), py::arg("forward"), py::arg("method"), py::arg("kernel"),
        py::arg("at_end"), py::arg("seed"), py::arg("scale_h") = std::nullopt, py::arg("scale_w") = std::nullopt,
        py::arg("offset") = 0);
  m.def("kernel_table", &emu06_table, "the dispatch table, a row a line: name|direction|auto or ladder|condition");
}
