#pragma once
// The functions chapter 01 exposes to Python; defined in hello.cpp.
#include <ATen/core/Tensor.h>

#include <string>

at::Tensor echo(const at::Tensor& x);
std::string describe(const at::Tensor& x);
at::Tensor scale(at::Tensor x, double factor, bool inplace);
