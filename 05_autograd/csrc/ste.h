#pragma once
// Chapter 05: round to the nearest integer, ties to even (what torch.round does):
// 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0. Its derivative is 0 almost everywhere,
// which is why the Python side gives it a made-up one (the straight-through estimator).
#include <ATen/core/Tensor.h>

// The entry point: checks, then the CPU or the CUDA kernel. Returns a new tensor.
at::Tensor round_forward(const at::Tensor& x);

// Kernels: x contiguous and checked, out preallocated with x's shape and dtype.
void round_cpu(const at::Tensor& x, at::Tensor& out);
#ifdef WITH_CUDA
void round_cuda(const at::Tensor& x, at::Tensor& out);
#endif
