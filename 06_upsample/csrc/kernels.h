#pragma once
// Chapter 06: what the kernels receive, and two things the ATen API provided that
// the stable API does not.
//
// The kernels see torch::stable::Tensor (torch/csrc/stable/tensor.h): a handle
// whose every method is a call through a C function of libtorch (the "shim"),
// so nothing about at::Tensor's layout is compiled into this library.
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Dispatch_v2.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include "upsample.h"

// at::opmath_type<scalar_t>, which lives in ATen: the type a kernel computes in.
// float for float16/bfloat16 (their arithmetic is done in float), else the type itself.
template <typename scalar_t>
struct OpMath {
  using type = scalar_t;
};
template <>
struct OpMath<torch::headeronly::Half> {
  using type = float;
};
template <>
struct OpMath<torch::headeronly::BFloat16> {
  using type = float;
};
template <typename scalar_t>
using opmath_type = typename OpMath<scalar_t>::type;

// AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16, ...): the header-only
// THO_DISPATCH_V2 does the same switch, with `scalar_t` set in each case.
#define UPSAMPLE_DISPATCH(TYPE, NAME, BODY)                                                               \
  THO_DISPATCH_V2(TYPE, NAME, AT_WRAP(BODY), AT_FLOATING_TYPES, torch::headeronly::ScalarType::Half, \
                  torch::headeronly::ScalarType::BFloat16)

void upsample_forward_cpu(const torch::stable::Tensor& x, torch::stable::Tensor& out, const ResizeGeometry& g);
void upsample_backward_cpu(const torch::stable::Tensor& grad_out, torch::stable::Tensor& grad_in,
                           const ResizeGeometry& g);
#ifdef WITH_CUDA
void upsample_forward_cuda(const torch::stable::Tensor& x, torch::stable::Tensor& out, const ResizeGeometry& g);
// method: true = gather (deterministic), false = scatter (atomicAdd)
void upsample_backward_cuda(const torch::stable::Tensor& grad_out, torch::stable::Tensor& grad_in,
                            const ResizeGeometry& g, bool gather);
#endif
