// Chapter 06: argument checks, the choice of kernel, and the operator registration.
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cmath>

#include "upsample.h"

Mode parse_mode(const char* op, std::string_view mode) {
  if (mode == "align_corners") return Mode::AlignCorners;
  if (mode == "half_pixel") return Mode::HalfPixel;
  TORCH_CHECK(mode == "tf_legacy", op, ": mode must be \"align_corners\", \"half_pixel\" or \"tf_legacy\", got \"", mode, "\"");
  return Mode::TfLegacy;
}

// true = gather, false = scatter
static bool parse_method(const char* op, std::string_view method) {
  if (method == "gather") return true;
  TORCH_CHECK(method == "scatter", op, ": backward method must be \"gather\" or \"scatter\", got \"", method, "\"");
  return false;
}

static void check_scale(const char* op, const char* name, std::optional<double> scale) {
  TORCH_CHECK(!scale.has_value() || (std::isfinite(*scale) && *scale > 0), op, ": ", name,
              " must be a finite number > 0 or None, got ", scale.value_or(0));
}

static void check_tensor(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK(t.dim() == 4, op, ": ", name, " must be 4-D (N, C, H, W), got shape ", t.sizes());
  const at::ScalarType dtype = t.scalar_type();
  TORCH_CHECK(dtype == at::kDouble || dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16, op, ": ",
              name, " must be float64, float32, float16 or bfloat16, got ", dtype);
  TORCH_CHECK(t.is_cpu() || t.is_cuda(), op, ": ", name, " must be on the CPU or a CUDA GPU, got ", t.device());
}

static void check_hw(const char* op, const char* name, c10::IntArrayRef hw) {
  TORCH_CHECK(hw.size() == 2 && hw[0] >= 1 && hw[1] >= 1, op, ": ", name, " must be (H, W) with H >= 1 and W >= 1, got ",
              hw);
}

// One message for every op when this build has no CUDA kernels.
[[noreturn]] static void no_cuda(const char* op, const at::Tensor& t) {
  TORCH_CHECK(false, op, ": this extension was built without CUDA, so it cannot take tensors on ", t.device(),
              "; run ./course doctor to see why");
}

at::Tensor upsample_forward(const at::Tensor& x_in, c10::IntArrayRef size, std::string_view mode_name,
                            std::optional<double> scale_h, std::optional<double> scale_w,
                            std::string_view backward) {
  const char* op = "upsample_bilinear2d";
  check_tensor(op, "x", x_in);
  check_hw(op, "size", size);
  TORCH_CHECK(x_in.size(2) >= 1 && x_in.size(3) >= 1, op,
              ": x must have H >= 1 and W >= 1 to interpolate from, got shape ", x_in.sizes());
  check_scale(op, "scale_h", scale_h);
  check_scale(op, "scale_w", scale_w);
  const Mode mode = parse_mode(op, mode_name);
  parse_method(op, backward);  // only autograd uses it, but a typo should fail here, not in backward
  // The kernels index a packed NCHW layout. A channels_last or sliced input is
  // copied once here (free when x already is contiguous, the usual case).
  const at::Tensor x = x_in.contiguous();
  at::Tensor out = at::empty({x.size(0), x.size(1), size[0], size[1]}, x.options());
  if (out.numel() == 0) {
    return out;  // N = 0 or C = 0: nothing to compute, no kernel to launch
  }
  const ResizeGeometry g{x.size(0) * x.size(1), x.size(2), x.size(3), size[0], size[1], mode, scale_h, scale_w};
  if (x.is_cuda()) {
#ifdef WITH_CUDA
    upsample_forward_cuda(x, out, g);
#else
    no_cuda(op, x);
#endif
  } else {
    upsample_forward_cpu(x, out, g);
  }
  return out;
}

at::Tensor upsample_backward(const at::Tensor& grad_out_in, c10::IntArrayRef input_size, std::string_view mode_name,
                             std::string_view method, std::optional<double> scale_h,
                             std::optional<double> scale_w) {
  const char* op = "upsample_bilinear2d_backward";
  check_tensor(op, "grad_out", grad_out_in);
  check_hw(op, "input_size", input_size);
  TORCH_CHECK(grad_out_in.size(2) >= 1 && grad_out_in.size(3) >= 1, op,
              ": grad_out must have H >= 1 and W >= 1, got shape ", grad_out_in.sizes());
  check_scale(op, "scale_h", scale_h);
  check_scale(op, "scale_w", scale_w);
  const Mode mode = parse_mode(op, mode_name);
  const bool gather = parse_method(op, method);
  // Gradients from autograd are often not contiguous (expanded, channels_last).
  const at::Tensor grad_out = grad_out_in.contiguous();
  // The gradient has the shape of the forward's input.
  at::Tensor grad_in = at::empty({grad_out.size(0), grad_out.size(1), input_size[0], input_size[1]}, grad_out.options());
  if (grad_in.numel() == 0) {
    return grad_in;
  }
  const ResizeGeometry g{grad_out.size(0) * grad_out.size(1), input_size[0], input_size[1], grad_out.size(2),
                         grad_out.size(3), mode, scale_h, scale_w};
  if (grad_out.is_cuda()) {
#ifdef WITH_CUDA
    upsample_backward_cuda(grad_out, grad_in, g, gather);
#else
    no_cuda(op, grad_out);
#endif
  } else {
    // One CPU kernel for both methods: it gathers, so it is deterministic.
    upsample_backward_cpu(grad_out, grad_in, g);
  }
  return grad_in;
}

// The schemas. `backward` rides along with the forward so that the autograd
// formula (registered in upsample.py) knows which backward kernel to call.
TORCH_LIBRARY(ch06, m) {
  m.def(
      "upsample_bilinear2d(Tensor x, int[2] size, str mode, float? scale_h=None, float? scale_w=None, "
      "str backward=\"gather\") -> Tensor");
  m.def(
      "upsample_bilinear2d_backward(Tensor grad_out, int[2] input_size, str mode, str method, "
      "float? scale_h=None, float? scale_w=None) -> Tensor");
}

// The same entry points serve both keys; they pick the kernel themselves. The
// CUDA key is registered in a CPU-only build too, so that a CUDA tensor gets
// our "built without CUDA" message instead of the dispatcher's.
TORCH_LIBRARY_IMPL(ch06, CPU, m) {
  m.impl("upsample_bilinear2d", &upsample_forward);
  m.impl("upsample_bilinear2d_backward", &upsample_backward);
}

TORCH_LIBRARY_IMPL(ch06, CUDA, m) {
  m.impl("upsample_bilinear2d", &upsample_forward);
  m.impl("upsample_bilinear2d_backward", &upsample_backward);
}
