// Chapter 04: input checks and the choice of kernel, forward and backward.
#include "trilinear.h"

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

void check_trilinear_inputs(const at::Tensor& feats, const at::Tensor& points) {
  TORCH_CHECK(feats.dim() == 3 && feats.size(1) == 8,
              "trilinear: feats must have shape (N, 8, F), got ", feats.sizes());
  TORCH_CHECK(points.dim() == 2 && points.size(0) == feats.size(0) && points.size(1) == 3,
              "trilinear: points must have shape (N, 3) with N = ", feats.size(0),
              " as feats, got ", points.sizes());
  // Named one by one: at::isFloatingType would also let the float8 types through.
  const at::ScalarType dtype = feats.scalar_type();
  TORCH_CHECK(dtype == at::kDouble || dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16,
              "trilinear: feats must be float64, float32, float16 or bfloat16, got ", dtype);
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

static void check_grad_out(const at::Tensor& grad_out_in, const at::Tensor& feats_in) {
  TORCH_CHECK(grad_out_in.dim() == 2 && grad_out_in.size(0) == feats_in.size(0) && grad_out_in.size(1) == feats_in.size(2),
              "trilinear_backward: grad_out must have shape (N, F) = (", feats_in.size(0), ", ", feats_in.size(2),
              "), got ", grad_out_in.sizes());
  TORCH_CHECK(grad_out_in.scalar_type() == feats_in.scalar_type(),
              "trilinear_backward: grad_out must have the dtype of feats (", feats_in.scalar_type(), "), got ",
              grad_out_in.scalar_type());
  TORCH_CHECK(grad_out_in.device() == feats_in.device(),
              "trilinear_backward: grad_out must be on the device of feats (", feats_in.device(), "), got ",
              grad_out_in.device());
}

std::tuple<at::Tensor, at::Tensor> trilinear_backward(const at::Tensor& grad_out_in, const at::Tensor& feats_in,
                                                      const at::Tensor& points_in, bool need_feats, bool need_points) {
  check_trilinear_inputs(feats_in, points_in);
  check_grad_out(grad_out_in, feats_in);
  // Gradients that arrive from autograd are often not contiguous (expanded, transposed).
  const at::Tensor grad_out = grad_out_in.contiguous();
  const at::Tensor feats = feats_in.contiguous();
  const at::Tensor points = points_in.contiguous();
  // A gradient has the shape of its input: dL/dfeats is (N, 8, F), dL/dpoints (N, 3).
  at::Tensor grad_feats = need_feats ? at::empty(feats.sizes(), feats.options()) : at::Tensor();
  at::Tensor grad_points = need_points ? at::empty(points.sizes(), points.options()) : at::Tensor();
  if (!need_feats && !need_points) {
    return {grad_feats, grad_points};
  }
  if (feats.size(0) == 0) {
    return {grad_feats, grad_points};  // N = 0: empty gradients, no kernel
  }
  if (feats.size(2) == 0) {
    if (need_points) grad_points.zero_();  // F = 0: out does not depend on the points
    return {grad_feats, grad_points};
  }
  if (feats.is_cuda()) {
#ifdef WITH_CUDA
    trilinear_backward_cuda(grad_out, feats, points, grad_feats, grad_points);
#else
    TORCH_CHECK(false, "trilinear_backward: this extension was built without CUDA, so it cannot take tensors on ",
                feats.device(), "; run ./course doctor to see why");
#endif
  } else {
    trilinear_backward_cpu(grad_out, feats, points, grad_feats, grad_points);
  }
  return {grad_feats, grad_points};
}

at::Tensor trilinear_points_grad_atomic(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                                        bool warp_reduce) {
  check_trilinear_inputs(feats, points);
  check_grad_out(grad_out, feats);
  TORCH_CHECK(feats.is_cuda(), "trilinear_points_grad_atomic: a CUDA-only comparison kernel, got tensors on ",
              feats.device());
  TORCH_CHECK(feats.scalar_type() == at::kFloat || feats.scalar_type() == at::kDouble,
              "trilinear_points_grad_atomic: float32 or float64 only, got ", feats.scalar_type());
  // The atomic additions land in an order that changes from run to run, and so
  // does the rounding of the float sum. Like PyTorch's own atomic kernels, say
  // so: under torch.use_deterministic_algorithms(True) this raises (with
  // warn_only=True it warns) instead of returning a result that may not repeat.
  at::globalContext().alertNotDeterministic("trilinear_points_grad_atomic");
  at::Tensor grad_points = at::zeros(points.sizes(), points.options());  // the atomics add into it
  if (feats.size(0) == 0 || feats.size(2) == 0) {
    return grad_points;
  }
#ifdef WITH_CUDA
  trilinear_points_grad_atomic_cuda(grad_out.contiguous(), feats.contiguous(), points.contiguous(), grad_points,
                                    warp_reduce);
#else
  TORCH_CHECK(false, "trilinear_points_grad_atomic: this extension was built without CUDA; run ./course doctor to see why");
#endif
  return grad_points;
}
