// Chapter 01: the functions of the extension, in plain C++.
//
// This file knows nothing about Python: it uses ATen, the tensor library under
// torch. binding.cpp exposes these functions to Python. Keeping the two apart
// pays off at build time: <ATen/core/Tensor.h> parses in a few seconds, while
// <torch/extension.h> (everything, pybind11 included) takes many times longer.
#include "hello.h"

#include <ATen/core/Tensor.h>

#include <sstream>
#include <string>

// An at::Tensor is a reference-counted handle to storage. Passing it by const
// reference and returning it copies the handle, never the data: Python gets back
// the very tensor it passed in.
at::Tensor echo(const at::Tensor& x) {
  return x;
}

// A non-tensor result: a std::string becomes a Python str.
// Format: "Tensor(Float, shape=(2, 3), device=cpu)"; a 1-d tensor has shape=(7), a 0-d one shape=().
std::string describe(const at::Tensor& x) {
  std::ostringstream out;
  // BEGIN SOLUTION describe
  out << "Tensor(" << c10::toString(x.scalar_type()) << ", shape=(";
  for (int64_t d = 0; d < x.dim(); ++d) {
    out << (d ? ", " : "") << x.size(d);
  }
  out << "), device=" << x.device() << ")";
  // END SOLUTION
  return out.str();
}

// Non-tensor arguments: a Python float arrives as double, a bool as bool.
// With inplace=true the input is modified and returned; otherwise a new tensor.
at::Tensor scale(at::Tensor x, double factor, bool inplace) {
  // BEGIN SOLUTION scale
  if (inplace) {
    return x.mul_(factor);
  }
  return x.mul(factor);
  // END SOLUTION
}
