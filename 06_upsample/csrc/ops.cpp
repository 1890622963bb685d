// Chapter 06: the kernel entry points and the operator registration, on the
// LibTorch stable ABI.
//
// Two layers of operators:
//   ch06::upsample_bilinear2d(_backward)            the public operators. Their
//       schemas are declared here; their implementation is upsample.py's: it
//       checks every argument and raises ValueError or TypeError, which C++
//       code on the stable ABI cannot raise (STD_TORCH_CHECK reaches Python as
//       RuntimeError), then calls
//   ch06::_upsample_bilinear2d(_backward)_kernel    the kernels, registered here
//       for CPU (and CUDA). They check again what memory safety depends on, with
//       the same messages, so that a direct call with bad arguments fails
//       cleanly instead of reading out of bounds.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/MemoryFormat.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kernels.h"

using torch::headeronly::MemoryFormat;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

Mode parse_mode(const char* op, std::string_view mode) {
  if (mode == "align_corners") return Mode::AlignCorners;
  if (mode == "half_pixel") return Mode::HalfPixel;
  STD_TORCH_CHECK(mode == "tf_legacy", op, ": mode must be \"align_corners\", \"half_pixel\" or \"tf_legacy\", got \"",
                  mode, "\"");
  return Mode::TfLegacy;
}

// true = gather, false = scatter
static bool parse_method(const char* op, std::string_view method) {
  if (method == "gather") return true;
  STD_TORCH_CHECK(method == "scatter", op, ": backward method must be \"gather\" or \"scatter\", got \"", method,
                  "\"");
  return false;
}

static std::string shape_of(const Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    s += (d ? ", " : "") + std::to_string(t.size(d));
  }
  return s + "]";
}

static void check_scale(const char* op, const char* name, std::optional<double> scale) {
  STD_TORCH_CHECK(!scale.has_value() || (std::isfinite(*scale) && *scale > 0), op, ": ", name,
                  " must be a finite number > 0 or None, got ", scale.value_or(0));
}

static void check_tensor(const char* op, const char* name, const Tensor& t) {
  STD_TORCH_CHECK(t.dim() == 4, op, ": ", name, " must be 4-D (N, C, H, W), got shape ", shape_of(t));
  const ScalarType dtype = t.scalar_type();
  STD_TORCH_CHECK(dtype == ScalarType::Double || dtype == ScalarType::Float || dtype == ScalarType::Half ||
                      dtype == ScalarType::BFloat16,
                  op, ": ", name, " must be float64, float32, float16 or bfloat16, got ",
                  torch::headeronly::toString(dtype));
  STD_TORCH_CHECK(t.is_cpu() || t.is_cuda(), op, ": ", name, " must be on the CPU or a CUDA GPU");
  STD_TORCH_CHECK(t.size(2) >= 1 && t.size(3) >= 1, op, ": ", name, " must have H >= 1 and W >= 1, got shape ",
                  shape_of(t));
}

static void check_hw(const char* op, const char* name, const std::vector<int64_t>& hw) {
  STD_TORCH_CHECK(hw.size() == 2 && hw[0] >= 1 && hw[1] >= 1, op, ": ", name,
                  " must be (H, W) with H >= 1 and W >= 1");
}

// A scale factor below 1 / (2 * in + 2) changes nothing: with a ratio 1 / scale
// above 2 * in + 2, every source coordinate (except tf_legacy's first, which is
// 0 for any ratio) already lies beyond the last pixel and reads it alone. So the
// kernels get at least that bound: the same result, and a ratio that stays finite
// in float (1 / 1e-300 does not), so that no coordinate becomes inf, or NaN (0 * inf).
static std::optional<double> bounded_scale(std::optional<double> scale, int64_t in) {
  if (!scale.has_value()) return scale;
  const double least = 1.0 / (2.0 * static_cast<double>(in) + 2.0);
  return *scale < least ? least : *scale;
}

// Which memory format the output takes, PyTorch's rule (suggest_memory_format,
// c10's is_channels_last_strides_2d): channels-last when x's strides order the
// axes C, W, H, N from the innermost out, with ties (size-1 axes) going to NCHW.
// F.interpolate returns its output, and its backward its gradient, in that
// format; so do we.
static bool channels_last_like(const Tensor& t) {
  if (t.stride(1) == 0) {
    return false;
  }
  int64_t least = 0;
  for (int64_t d : {1, 3, 2, 0}) {
    if (t.size(d) == 0 || t.stride(d) < least) {
      return false;
    }
    if (d == 0 && least == t.stride(1)) {
      return false;  // ambiguous (N, 1, 1, 1)-like: NCHW
    }
    least = t.stride(d) * (t.size(d) > 1 ? t.size(d) : 1);
  }
  return true;
}

// t packed in that layout, as torch::stable::contiguous makes it: t itself when it already is (the
// usual case, and no call through the dispatcher), else a packed copy. Strides of axes of size 1
// do not matter, as in PyTorch's is_contiguous.
static Tensor packed(const Tensor& t, bool nhwc) {
  static constexpr int64_t kNchw[] = {3, 2, 1, 0}, kNhwc[] = {1, 3, 2, 0};  // innermost axis first
  int64_t expected = 1;
  bool is_packed = true;
  for (int64_t d : nhwc ? kNhwc : kNchw) {
    is_packed = is_packed && (t.size(d) == 1 || t.stride(d) == expected);
    expected *= t.size(d);
  }
  return is_packed || expected == 0 ? t
                                    : torch::stable::contiguous(t, nhwc ? MemoryFormat::ChannelsLast
                                                                        : MemoryFormat::Contiguous);
}

static ResizeGeometry geometry(int64_t planes, int64_t H_in, int64_t W_in, int64_t H_out, int64_t W_out, Mode mode,
                               std::optional<double> scale_h, std::optional<double> scale_w) {
  return {planes, H_in, W_in, H_out, W_out, mode, bounded_scale(scale_h, H_in), bounded_scale(scale_w, W_in)};
}

// The forward. `kernel`: empty, the dispatch table's choice; else a CUDA kernel of
// the ladder by name. With `name` set, nothing runs: *name says what would.
static Tensor forward_impl(const Tensor& x_in, const std::vector<int64_t>& size, const std::string& mode_name,
                           std::optional<double> scale_h, std::optional<double> scale_w, std::string_view kernel,
                           std::string* name) {
  const char* op = "upsample_bilinear2d";
  check_tensor(op, "x", x_in);
  check_hw(op, "size", size);
  check_scale(op, "scale_h", scale_h);
  check_scale(op, "scale_w", scale_w);
  const Mode mode = parse_mode(op, mode_name);
  // The kernels index two packed layouts: NCHW and channels-last (NHWC). The
  // output takes the input's (PyTorch's rule, above). A sliced or expanded
  // input is copied once into the packed form of its layout (free when x is
  // already packed, the usual case).
  const bool nhwc = channels_last_like(x_in);
  const Tensor x = packed(x_in, nhwc);
  Tensor out = new_packed(x, x.size(0), x.size(1), size[0], size[1], nhwc);
  if (out.numel() == 0) {
    if (name) *name = "none";
    return out;  // N = 0 or C = 0: nothing to compute, no kernel to launch
  }
  if (size[0] == x.size(2) && size[1] == x.size(3)) {
    if (name) *name = "copy";
    if (name) return out;
    // Neither axis changes size: a copy, whatever the scale factors say. PyTorch (CPU and
    // CUDA) takes this shortcut before it looks at a scale; with half_pixel and a factor
    // in (1, (in + 1) / in), the formula would shift the pixels instead (§1).
    torch::stable::copy_(out, x);
    return out;
  }
  ResizeGeometry g = geometry(x.size(0) * x.size(1), x.size(2), x.size(3), size[0], size[1], mode, scale_h, scale_w);
  g.channels = x.size(1);
  g.channels_last = nhwc;
  if (x.is_cuda()) {
#ifdef WITH_CUDA
    if (name) {
      *name = upsample_kernel_name_cuda(x, out, g, true, false);
    } else {
      upsample_forward_cuda(x, out, g, kernel);
    }
#else
    STD_TORCH_CHECK(false, op, ": this extension was built without CUDA");
#endif
  } else {
    STD_TORCH_CHECK(kernel.empty(), op, ": the ladder's kernels are CUDA kernels; got a CPU tensor");
    if (name) {
      *name = "cpu";
    } else {
      upsample_forward_cpu(x, out, g);
    }
  }
  return out;
}

Tensor upsample_forward_kernel(const Tensor& x, std::vector<int64_t> size, std::string mode,
                               std::optional<double> scale_h, std::optional<double> scale_w) {
  return forward_impl(x, size, mode, scale_h, scale_w, {}, nullptr);
}

// The backward, likewise.
static Tensor backward_impl(const Tensor& grad_out_in, const std::vector<int64_t>& input_size,
                            const std::string& mode_name, const std::string& method, std::optional<double> scale_h,
                            std::optional<double> scale_w, std::string_view kernel, std::string* name) {
  const char* op = "upsample_bilinear2d_backward";
  check_tensor(op, "grad_out", grad_out_in);
  check_hw(op, "input_size", input_size);
  check_scale(op, "scale_h", scale_h);
  check_scale(op, "scale_w", scale_w);
  const Mode mode = parse_mode(op, mode_name);
  const bool gather = parse_method(op, method);
  // Gradients from autograd are often not packed (expanded after a .sum(),
  // sliced): packed here, in grad_out's layout, which grad_in takes too.
  const bool nhwc = channels_last_like(grad_out_in);
  const Tensor grad_out = packed(grad_out_in, nhwc);
  // The gradient has the shape of the forward's input.
  const int64_t N = grad_out.size(0), C = grad_out.size(1);
  Tensor grad_in = new_packed(grad_out, N, C, input_size[0], input_size[1], nhwc);
  if (grad_in.numel() == 0) {
    if (name) *name = "none";
    return grad_in;
  }
  if (input_size[0] == grad_out.size(2) && input_size[1] == grad_out.size(3)) {
    if (name) *name = "copy";
    if (name) return grad_in;
    torch::stable::copy_(grad_in, grad_out);  // the forward was a copy: so is its transpose
    return grad_in;
  }
  ResizeGeometry g = geometry(N * C, input_size[0], input_size[1], grad_out.size(2), grad_out.size(3), mode,
                              scale_h, scale_w);
  g.channels = C;
  g.channels_last = nhwc;
  if (grad_out.is_cuda()) {
#ifdef WITH_CUDA
    if (name) {
      *name = upsample_kernel_name_cuda(grad_out, grad_in, g, false, gather);
    } else {
      upsample_backward_cuda(grad_out, grad_in, g, gather, kernel);
    }
#else
    STD_TORCH_CHECK(false, op, ": this extension was built without CUDA");
#endif
  } else {
    STD_TORCH_CHECK(kernel.empty(), op, ": the ladder's kernels are CUDA kernels; got a CPU tensor");
    // One CPU kernel for both methods: it gathers, so it is deterministic.
    if (name) {
      *name = "cpu";
    } else {
      upsample_backward_cpu(grad_out, grad_in, g);
    }
  }
  return grad_in;
}

Tensor upsample_backward_kernel(const Tensor& grad_out, std::vector<int64_t> input_size, std::string mode,
                                std::string method, std::optional<double> scale_h, std::optional<double> scale_w) {
  return backward_impl(grad_out, input_size, mode, method, scale_h, scale_w, {}, nullptr);
}

// The ladder's ops (ladder.h): a named kernel forced, and the name of the kernel a call takes.
Tensor upsample_forward_rung(const Tensor& x, std::vector<int64_t> size, std::string mode, std::string kernel,
                             std::optional<double> scale_h, std::optional<double> scale_w) {
  STD_TORCH_CHECK(!kernel.empty(), "upsample_bilinear2d: name a kernel");
  return forward_impl(x, size, mode, scale_h, scale_w, kernel, nullptr);
}

Tensor upsample_backward_rung(const Tensor& grad_out, std::vector<int64_t> input_size, std::string mode,
                              std::string kernel, std::optional<double> scale_h, std::optional<double> scale_w) {
  STD_TORCH_CHECK(!kernel.empty(), "upsample_bilinear2d_backward: name a kernel");
  const std::string method = kernel.rfind("scatter", 0) == 0 ? "scatter" : "gather";
  return backward_impl(grad_out, input_size, mode, method, scale_h, scale_w, kernel, nullptr);
}

std::string upsample_kernel_name(const Tensor& t, std::vector<int64_t> size, std::string mode, std::string direction,
                                 std::string method, std::optional<double> scale_h, std::optional<double> scale_w) {
  std::string name;
  STD_TORCH_CHECK(direction == "forward" || direction == "backward",
                  "_upsample_bilinear2d_kernel_name: direction must be \"forward\" or \"backward\"");
  if (direction == "forward") {
    forward_impl(t, size, mode, scale_h, scale_w, {}, &name);
  } else {
    backward_impl(t, size, mode, method, scale_h, scale_w, {}, &name);
  }
  return name;
}

std::string upsample_kernel_table(const Tensor& like) {
  (void)like;
#ifdef WITH_CUDA
  return upsample_kernel_table_cuda();
#else
  return "";
#endif
}

// The schemas. `backward` rides along with the forward so that the autograd
// formula (registered in upsample.py) knows which backward kernel to call.
STABLE_TORCH_LIBRARY(ch06, m) {
  m.def(
      "upsample_bilinear2d(Tensor x, int[2] size, str mode, float? scale_h=None, float? scale_w=None, "
      "str backward=\"gather\") -> Tensor");
  m.def(
      "upsample_bilinear2d_backward(Tensor grad_out, int[2] input_size, str mode, str method, "
      "float? scale_h=None, float? scale_w=None) -> Tensor");
  m.def(
      "_upsample_bilinear2d_kernel(Tensor x, int[2] size, str mode, float? scale_h=None, float? scale_w=None) "
      "-> Tensor");
  m.def(
      "_upsample_bilinear2d_backward_kernel(Tensor grad_out, int[2] input_size, str mode, str method, "
      "float? scale_h=None, float? scale_w=None) -> Tensor");
  // The ladder (ladder.h): run one named CUDA kernel; name the kernel a call takes
  // ("cpu", "copy" or "none" where no CUDA kernel runs); the table, one row a line.
  m.def(
      "_upsample_bilinear2d_rung(Tensor x, int[2] size, str mode, str kernel, float? scale_h=None, "
      "float? scale_w=None) -> Tensor");
  m.def(
      "_upsample_bilinear2d_backward_rung(Tensor grad_out, int[2] input_size, str mode, str kernel, "
      "float? scale_h=None, float? scale_w=None) -> Tensor");
  m.def(
      "_upsample_bilinear2d_kernel_name(Tensor t, int[2] size, str mode, str direction, str method=\"gather\", "
      "float? scale_h=None, float? scale_w=None) -> str");
  m.def("_upsample_bilinear2d_kernel_table(Tensor like) -> str");
}

// TORCH_BOX turns a typed C++ function into the boxed form the stable ABI passes
// around (an array of StableIValue). The same entry points serve both keys;
// they pick the kernel themselves.
STABLE_TORCH_LIBRARY_IMPL(ch06, CPU, m) {
  m.impl("_upsample_bilinear2d_kernel", TORCH_BOX(&upsample_forward_kernel));
  m.impl("_upsample_bilinear2d_backward_kernel", TORCH_BOX(&upsample_backward_kernel));
  m.impl("_upsample_bilinear2d_rung", TORCH_BOX(&upsample_forward_rung));
  m.impl("_upsample_bilinear2d_backward_rung", TORCH_BOX(&upsample_backward_rung));
  m.impl("_upsample_bilinear2d_kernel_name", TORCH_BOX(&upsample_kernel_name));
  m.impl("_upsample_bilinear2d_kernel_table", TORCH_BOX(&upsample_kernel_table));
}

#ifdef WITH_CUDA
STABLE_TORCH_LIBRARY_IMPL(ch06, CUDA, m) {
  m.impl("_upsample_bilinear2d_kernel", TORCH_BOX(&upsample_forward_kernel));
  m.impl("_upsample_bilinear2d_backward_kernel", TORCH_BOX(&upsample_backward_kernel));
  m.impl("_upsample_bilinear2d_rung", TORCH_BOX(&upsample_forward_rung));
  m.impl("_upsample_bilinear2d_backward_rung", TORCH_BOX(&upsample_backward_rung));
  m.impl("_upsample_bilinear2d_kernel_name", TORCH_BOX(&upsample_kernel_name));
  m.impl("_upsample_bilinear2d_kernel_table", TORCH_BOX(&upsample_kernel_table));
}
#endif
