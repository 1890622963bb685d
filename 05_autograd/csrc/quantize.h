#pragma once
// Chapter 05: fake quantisation (what quantisation-aware training runs in the
// forward). A value x is snapped to the nearest level of a grid of integers
// quant_min .. quant_max, each level q standing for the real number
// (q - zero_point) * scale, and returned as that real number, in x's dtype:
//
//   q   = round_half_even(x * inv_scale) + zero_point        inv_scale = 1 / scale
//   out = (clamp(q, quant_min, quant_max) - zero_point) * scale
//   in_range = quant_min <= q <= quant_max                   (the straight-through mask)
//
// For float32, float16 and bfloat16 this is, bit for bit, what
// torch.fake_quantize_per_tensor_affine computes for finite inputs (it too
// multiplies by a float inv_scale); see the README, exercise fake-quantize.
//
// The per-value rule has a header of its own, shared by the CPU and the CUDA
// kernel, so that editing it recompiles only the two kernel files.
#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>

#include <cmath>
#include <cstdint>
#include <tuple>

// One quantiser's grid, in the arithmetic type T: float for float32, float16 and
// bfloat16 inputs (every such value is exactly a float), double for float64.
template <typename T>
struct QuantGrid {
  T scale;       // the distance between two levels
  T inv_scale;   // 1 / scale
  T zero_point;  // the level that stands for 0.0
  T quant_min;   // the lowest level
  T quant_max;   // the highest level
};

// Built once per call, on the host, from the operator's arguments (already
// checked: scale positive and finite, quant_min <= zero_point <= quant_max, all
// levels exact in float).
template <typename T>
inline QuantGrid<T> make_quant_grid(double scale, int64_t zero_point, int64_t quant_min, int64_t quant_max) {
  // BEGIN SOLUTION fake-quantize
  // STUB: return {T(NAN), T(NAN), T(NAN), T(NAN), T(NAN)};  // NaN until you write it
  // scale is rounded to T first and inverted in T: for float inputs that is
  // PyTorch's float inv_scale, for double inputs nothing passes through float.
  const T s = static_cast<T>(scale);
  return {s, T(1) / s, static_cast<T>(zero_point), static_cast<T>(quant_min), static_cast<T>(quant_max)};
  // END SOLUTION
}

// One value, on the host or the GPU: returns the fake-quantised x and sets
// in_range (whether x's level lies inside [quant_min, quant_max] before clamping).
template <typename T>
C10_HOST_DEVICE inline T fake_quantize_one(T x, const QuantGrid<T>& g, bool& in_range) {
  // BEGIN SOLUTION fake-quantize
  // STUB: in_range = false;
  // STUB: return x * T(NAN);  // NaN until you write it
  // rint rounds in the current rounding mode, round-to-nearest-even unless a
  // program changes it. Multiply by inv_scale (not x / scale: the two differ in
  // the last bit, and at a tie that bit decides), round, and only then shift by
  // the zero point: rint(y + zero_point) would round ties to the even *level*.
  const T q = ::rint(x * g.inv_scale) + g.zero_point;
  in_range = q >= g.quant_min && q <= g.quant_max;  // false for NaN
  // Written with comparisons so that NaN stays NaN (fmin/fmax would return the bound).
  const T c = q < g.quant_min ? g.quant_min : (q > g.quant_max ? g.quant_max : q);
  // (c - zero_point) first: a level equal to the zero point gives +0.0, never -0.0.
  return (c - g.zero_point) * g.scale;
  // END SOLUTION
}

// The entry point: checks, then the CPU or the CUDA kernel. Returns (out, mask):
// out with x's shape and dtype, mask a bool tensor of the same shape.
std::tuple<at::Tensor, at::Tensor> fake_quantize_forward(const at::Tensor& x, double scale, int64_t zero_point,
                                                         int64_t quant_min, int64_t quant_max);

// Kernels: x contiguous and checked, out and mask preallocated, contiguous.
void fake_quantize_cpu(const at::Tensor& x, double scale, int64_t zero_point, int64_t quant_min, int64_t quant_max,
                       at::Tensor& out, at::Tensor& mask);
#ifdef WITH_CUDA
void fake_quantize_cuda(const at::Tensor& x, double scale, int64_t zero_point, int64_t quant_min, int64_t quant_max,
                        at::Tensor& out, at::Tensor& mask);
#endif
