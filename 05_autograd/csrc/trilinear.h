#pragma once
// Chapter 05: trilinear interpolation, forward and backward. The kernels are
// chapter 04's, 16-byte packs included; this chapter turns them into a PyTorch operator.
//
//   feats  (N, 8, F)  features at the 8 corners of N cubes
//   points (N, 3)     one point per cube, local coordinates (x, y, z) in [-1, 1]
//   out    (N, F)     the features interpolated at the points
//
// Corner k (0..7) sits at offsets (k>>2 & 1, k>>1 & 1, k & 1) along (x, y, z):
// k = 0 is (0,0,0), k = 4 is (1,0,0), k = 7 is (1,1,1). With u = (x+1)/2,
// v = (y+1)/2, w = (z+1)/2 its weight is the product of (u or 1-u), (v or 1-v),
// (w or 1-w): u where the offset along x is 1, 1-u where it is 0, and so on.
// Points outside [-1, 1] extrapolate with the same formula (weights can then
// be negative or exceed 1); the op does not clamp.
#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>

#include <optional>
#include <tuple>

// The weight of corner k. C10_HOST_DEVICE (= __host__ __device__ under nvcc,
// nothing under a C++ compiler) lets the CPU and the CUDA kernel share it.
// T is the arithmetic type: float for float/half/bfloat16 inputs, double for double.
template <typename T>
C10_HOST_DEVICE inline T corner_weight(int k, T u, T v, T w) {
  const T wx = (k >> 2) & 1 ? u : T(1) - u;
  const T wy = (k >> 1) & 1 ? v : T(1) - v;
  const T wz = k & 1 ? w : T(1) - w;
  return wx * wy * wz;
}

// [-1, 1] -> [0, 1]
template <typename T>
C10_HOST_DEVICE inline T to_unit(T x) {
  return (x + T(1)) * T(0.5);
}

// The derivatives of corner k's weight with respect to u, v and w (product rule:
// d/du of (u or 1-u) is +1 or -1, the other two factors stay).
template <typename T>
C10_HOST_DEVICE inline void corner_weight_grad(int k, T u, T v, T w, T& d_du, T& d_dv, T& d_dw) {
  const T wx = (k >> 2) & 1 ? u : T(1) - u;
  const T wy = (k >> 1) & 1 ? v : T(1) - v;
  const T wz = k & 1 ? w : T(1) - w;
  const T sx = (k >> 2) & 1 ? T(1) : T(-1);
  const T sy = (k >> 1) & 1 ? T(1) : T(-1);
  const T sz = k & 1 ? T(1) : T(-1);
  d_du = sx * wy * wz;
  d_dv = wx * sy * wz;
  d_dw = wx * wy * sz;
}

// Checks shapes, dtypes and devices; throws with a message that names the problem.
void check_trilinear_inputs(const at::Tensor& feats, const at::Tensor& points);

// The entry point: checks, then runs the CPU or the CUDA kernel.
at::Tensor trilinear_forward(const at::Tensor& feats, const at::Tensor& points);

// Backward: the gradients of a loss L with respect to feats and points, given
// grad_out = dL/dout (N, F). Only the ones asked for are computed; the others come
// back undefined (None in Python). feats is read only for the points' gradient:
// it may be absent (std::nullopt, None in Python) when need_points is false, so
// that autograd need not keep the largest tensor of the op alive for nothing.
std::tuple<at::Tensor, at::Tensor> trilinear_backward(const at::Tensor& grad_out, const std::optional<at::Tensor>& feats,
                                                      const at::Tensor& points, bool need_feats, bool need_points);

// The kernels take contiguous, checked inputs and a preallocated output.
// An undefined grad_feats / grad_points means "not needed"; the sizes come
// from grad_out (N, F), and feats is read only for grad_points (so it may be
// undefined when grad_points is).
void trilinear_forward_cpu(const at::Tensor& feats, const at::Tensor& points, at::Tensor& out);
void trilinear_backward_cpu(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                            at::Tensor& grad_feats, at::Tensor& grad_points);
#ifdef WITH_CUDA
void trilinear_forward_cuda(const at::Tensor& feats, const at::Tensor& points, at::Tensor& out);
void trilinear_backward_cuda(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                             at::Tensor& grad_feats, at::Tensor& grad_points);
#endif
