#pragma once
// Chapter 03: trilinear interpolation, forward, in three CUDA thread mappings.
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

#include <cstdint>

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

// Checks shapes, dtypes and devices; throws with a message that names the problem.
void check_trilinear_inputs(const at::Tensor& feats, const at::Tensor& points);

// How the CUDA kernel maps threads to outputs (the CPU has one loop for all three).
enum class Mapping {
  coalesced,   // chapter 02: f on threadIdx.x
  naive,       // n on threadIdx.x, as in many tutorials (uncoalesced)
  vectorized,  // f on threadIdx.x, 16 bytes (4 floats) per thread and load
};

// How many scalars forward_vectorized moves per 16-byte load and store (2 doubles,
// 4 floats, 8 halves) for features with F per row, feats starting at byte address
// `feats_address` and out at `out_address`; 0 when 16-byte packs would not fit
// (the coalesced kernel runs instead). Host code: built and testable without a GPU.
int64_t pack_size(int64_t F, int64_t element_size, uintptr_t feats_address, uintptr_t out_address);

// The entry point: checks, then runs the CPU or the CUDA kernel.
at::Tensor trilinear_forward(const at::Tensor& feats, const at::Tensor& points, Mapping mapping);

// The kernels take contiguous, checked inputs and a preallocated output.
void trilinear_forward_cpu(const at::Tensor& feats, const at::Tensor& points, at::Tensor& out);
#ifdef WITH_CUDA
void trilinear_forward_cuda(const at::Tensor& feats, const at::Tensor& points, at::Tensor& out, Mapping mapping);
#endif
