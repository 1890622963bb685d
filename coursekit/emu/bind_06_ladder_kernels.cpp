// The GPU-free judge of chapter 06's ladder, the kernel side: the chapter's CUDA entry points
// (dispatch.cu) called as ops.cpp calls them, on the CPU.
#include <cmath>

#define WITH_CUDA  // the declarations of the CUDA entry points
#include "kernels.h"

void emu06_run(AtenTensorHandle in_h, AtenTensorHandle out_h, int64_t H_in, int64_t W_in, int64_t mode, bool forward,
               bool gather, bool channels_last, const std::string& kernel, std::optional<double> scale_h,
               std::optional<double> scale_w) {
  torch::stable::Tensor in(in_h), out(out_h);
  const torch::stable::Tensor& big = forward ? out : in;  // the output side of the resize
  ResizeGeometry g{in.size(0) * in.size(1), H_in, W_in, big.size(2), big.size(3), static_cast<Mode>(mode),
                   scale_h, scale_w};
  g.channels = in.size(1);
  g.channels_last = channels_last;
  if (forward) {
    upsample_forward_cuda(in, out, g, kernel);
  } else {
    upsample_backward_cuda(in, out, g, gather, kernel);
  }
}

std::string emu06_table() { return upsample_kernel_table_cuda(); }
