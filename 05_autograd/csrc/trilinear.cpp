// Chapter 05: input checks and the choice of kernel, forward and backward.
#include "trilinear.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <string>

// Named one by one: at::isFloatingType would also let the float8 types through.
static bool is_kernel_dtype(at::ScalarType t) {
  return t == at::kDouble || t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
}

void check_trilinear_inputs(const at::Tensor& feats, const at::Tensor& points) {
  TORCH_CHECK(feats.dim() == 3 && feats.size(1) == 8,
              "trilinear: feats must have shape (N, 8, F), got ", feats.sizes());
  TORCH_CHECK(points.dim() == 2 && points.size(0) == feats.size(0) && points.size(1) == 3,
              "trilinear: points must have shape (N, 3) with N = ", feats.size(0),
              " as feats, got ", points.sizes());
  TORCH_CHECK(is_kernel_dtype(feats.scalar_type()),
              "trilinear: feats must be float64, float32, float16 or bfloat16, got ", feats.scalar_type());
  TORCH_CHECK(points.scalar_type() == feats.scalar_type(),
              "trilinear: points must have the dtype of feats (", feats.scalar_type(), "), got ",
              points.scalar_type());
  TORCH_CHECK(points.device() == feats.device(),
              "trilinear: feats and points must be on the same device, got feats on ", feats.device(),
              " and points on ", points.device());
  TORCH_CHECK(feats.is_cpu() || feats.is_cuda(),
              "trilinear: tensors must be on the CPU or a CUDA GPU, got ", feats.device());
}

at::Tensor trilinear_forward(const at::Tensor& feats_in, const at::Tensor& points_in) {
  check_trilinear_inputs(feats_in, points_in);
  // The kernels index with plain strides of a packed layout, so we make the
  // inputs contiguous. For inputs that already are (the usual case) this is free;
  // a transposed or sliced input is copied once.
  const at::Tensor feats = feats_in.contiguous();
  const at::Tensor points = points_in.contiguous();
  at::Tensor out = at::empty({feats.size(0), feats.size(2)}, feats.options());
  if (out.numel() == 0) {
    return out;  // N = 0 or F = 0: nothing to compute, no kernel to launch
  }
  if (feats.is_cuda()) {
#ifdef WITH_CUDA
    trilinear_forward_cuda(feats, points, out);
#else
    TORCH_CHECK(false, "trilinear: this extension was built without CUDA, so it cannot take tensors on ",
                feats.device(), "; run ./course doctor to see why");
#endif
  } else {
    trilinear_forward_cpu(feats, points, out);
  }
  return out;
}

// The backward's own checks. Its sizes come from grad_out (N, F): feats, the
// one argument that may be absent, cannot be the reference. Every check here has
// a twin in the fake implementation (trilinear_op.py).
static void check_backward_inputs(const at::Tensor& grad_out, const std::optional<at::Tensor>& feats,
                                  const at::Tensor& points, bool need_points) {
  TORCH_CHECK(grad_out.dim() == 2, "trilinear_backward: grad_out must have shape (N, F), got ", grad_out.sizes());
  const int64_t N = grad_out.size(0), F = grad_out.size(1);
  TORCH_CHECK(points.dim() == 2 && points.size(0) == N && points.size(1) == 3,
              "trilinear_backward: points must have shape (N, 3) with N = ", N, " as grad_out, got ", points.sizes());
  if (feats.has_value()) {
    TORCH_CHECK(feats->dim() == 3 && feats->size(0) == N && feats->size(1) == 8 && feats->size(2) == F,
                "trilinear_backward: feats must have shape (N, 8, F) = (", N, ", 8, ", F, ") as grad_out, got ",
                feats->sizes());
  }
  TORCH_CHECK(feats.has_value() || !need_points,
              "trilinear_backward: the points' gradient needs feats (need_points is true), got None");
  TORCH_CHECK(is_kernel_dtype(grad_out.scalar_type()),
              "trilinear_backward: grad_out must be float64, float32, float16 or bfloat16, got ", grad_out.scalar_type());
  TORCH_CHECK(points.scalar_type() == grad_out.scalar_type(),
              "trilinear_backward: points must have the dtype of grad_out (", grad_out.scalar_type(), "), got ",
              points.scalar_type());
  TORCH_CHECK(!feats.has_value() || feats->scalar_type() == grad_out.scalar_type(),
              "trilinear_backward: feats must have the dtype of grad_out (", grad_out.scalar_type(), "), got ",
              feats->scalar_type());
  TORCH_CHECK(points.device() == grad_out.device() && (!feats.has_value() || feats->device() == grad_out.device()),
              "trilinear_backward: grad_out, feats and points must be on the same device, got grad_out on ",
              grad_out.device(), ", points on ", points.device(),
              feats.has_value() ? ", feats on " + feats->device().str() : std::string());
  TORCH_CHECK(grad_out.is_cpu() || grad_out.is_cuda(),
              "trilinear_backward: tensors must be on the CPU or a CUDA GPU, got ", grad_out.device());
}

std::tuple<at::Tensor, at::Tensor> trilinear_backward(const at::Tensor& grad_out_in,
                                                      const std::optional<at::Tensor>& feats_in,
                                                      const at::Tensor& points_in, bool need_feats, bool need_points) {
  check_backward_inputs(grad_out_in, feats_in, points_in, need_points);
  // Gradients that arrive from autograd are often not contiguous (expanded, transposed).
  const at::Tensor grad_out = grad_out_in.contiguous();
  const at::Tensor points = points_in.contiguous();
  // Only the points' gradient reads feats; without it, feats is not even copied.
  const at::Tensor feats = need_points ? feats_in->contiguous() : at::Tensor();
  const int64_t N = grad_out.size(0), F = grad_out.size(1);
  // A gradient has the shape of its input: dL/dfeats is (N, 8, F), dL/dpoints (N, 3).
  at::Tensor grad_feats = need_feats ? at::empty({N, 8, F}, grad_out.options()) : at::Tensor();
  at::Tensor grad_points = need_points ? at::empty(points.sizes(), points.options()) : at::Tensor();
  if (!need_feats && !need_points) {
    return {grad_feats, grad_points};
  }
  if (N == 0) {
    return {grad_feats, grad_points};  // N = 0: empty gradients, no kernel
  }
  if (F == 0) {
    if (need_points) grad_points.zero_();  // F = 0: out does not depend on the points
    return {grad_feats, grad_points};
  }
  if (grad_out.is_cuda()) {
#ifdef WITH_CUDA
    trilinear_backward_cuda(grad_out, feats, points, grad_feats, grad_points);
#else
    TORCH_CHECK(false, "trilinear_backward: this extension was built without CUDA, so it cannot take tensors on ",
                grad_out.device(), "; run ./course doctor to see why");
#endif
  } else {
    trilinear_backward_cpu(grad_out, feats, points, grad_feats, grad_points);
  }
  return {grad_feats, grad_points};
}
