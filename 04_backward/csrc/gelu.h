#pragma once
// Chapter 04 warm-up: GELU, exact form (torch.nn.functional.gelu's default,
// approximate="none"):
//   gelu(x)  = x * Phi(x),  Phi(x) = (1 + erf(x / sqrt(2))) / 2   the standard normal CDF
//   gelu'(x) = Phi(x) + x * phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)   its density
//
// The two formulas are written once, for any arithmetic type T: float or double
// (the CUDA kernel, one value per thread, and the CPU loop's last few values),
// and on the CPU a whole vector of them, at::vec::Vectorized<float> (8 floats
// per AVX2 register) or Vectorized<double> (gelu_cpu_vec.cpp). So inside them:
// T(...) for constants, + - * on T, and gelu_erf / gelu_exp for erf and exp,
// which pick the right function for each T (std::erf for a float, a vector erf
// for a vector).
#include <c10/macros/Macros.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstdint>
#include <string>

namespace at {
class Tensor;
}

C10_HOST_DEVICE inline float gelu_erf(float x) { return std::erf(x); }
C10_HOST_DEVICE inline double gelu_erf(double x) { return std::erf(x); }
C10_HOST_DEVICE inline float gelu_exp(float x) { return std::exp(x); }
C10_HOST_DEVICE inline double gelu_exp(double x) { return std::exp(x); }

template <typename T>
C10_HOST_DEVICE inline T gelu_value(T x) {
  const T inv_sqrt2 = T(0.70710678118654752440);
  return x * T(0.5) * (T(1) + gelu_erf(x * inv_sqrt2));
}

template <typename T>
C10_HOST_DEVICE inline T gelu_derivative(T x) {
  // BEGIN SOLUTION gelu-derivative
  // STUB: return (x - x) / (x - x);  // NaN until you write it
  const T inv_sqrt2 = T(0.70710678118654752440);
  const T inv_sqrt_2pi = T(0.39894228040143267794);
  const T cdf = T(0.5) * (T(1) + gelu_erf(x * inv_sqrt2));
  const T pdf = inv_sqrt_2pi * gelu_exp(T(-0.5) * x * x);
  return cdf + x * pdf;
  // END SOLUTION
}

#include "gelu_ops.h"  // gelu_forward, gelu_backward, gelu_cpu_loops: what Python calls

void gelu_forward_cpu(const at::Tensor& x, at::Tensor& out);
void gelu_backward_cpu(const at::Tensor& grad_out, const at::Tensor& x, at::Tensor& grad_in);
#ifdef WITH_CUDA
void gelu_forward_cuda(const at::Tensor& x, at::Tensor& out);
void gelu_backward_cuda(const at::Tensor& grad_out, const at::Tensor& x, at::Tensor& grad_in);
#endif

// The vectorised CPU loops (gelu_cpu_vec.cpp): [begin, end) of a tensor of any of the
// four types, compiled for AVX2 + FMA (gelu_avx2) and for AVX-512 (gelu_avx512).
// Each exists only where the CPU can run it; available() says so.
#define GELU_VEC_LOOPS                                                                                     \
  bool available();                                                                                        \
  void forward(const float* x, float* out, int64_t begin, int64_t end);                                   \
  void forward(const double* x, double* out, int64_t begin, int64_t end);                                 \
  void forward(const c10::Half* x, c10::Half* out, int64_t begin, int64_t end);                           \
  void forward(const c10::BFloat16* x, c10::BFloat16* out, int64_t begin, int64_t end);                   \
  void backward(const float* grad, const float* x, float* grad_in, int64_t begin, int64_t end);           \
  void backward(const double* grad, const double* x, double* grad_in, int64_t begin, int64_t end);        \
  void backward(const c10::Half* grad, const c10::Half* x, c10::Half* grad_in, int64_t begin, int64_t end); \
  void backward(const c10::BFloat16* grad, const c10::BFloat16* x, c10::BFloat16* grad_in, int64_t begin,   \
                int64_t end);
namespace gelu_avx2 {
GELU_VEC_LOOPS
}
namespace gelu_avx512 {
GELU_VEC_LOOPS
}
namespace gelu_avx512_bf16 {
GELU_VEC_LOOPS
}
#undef GELU_VEC_LOOPS
