#pragma once
// The GELU operators that Python calls (gelu_cpu.cpp defines them), declared apart from the
// formulas in gelu.h: binding.cpp includes only this file, so an edit of gelu.h recompiles the
// files that compute GELU, not the bindings (the slowest file of the chapter to compile).
#include <string>

namespace at {
class Tensor;
}

at::Tensor gelu_forward(const at::Tensor& x);
at::Tensor gelu_backward(const at::Tensor& grad_out, const at::Tensor& x);

// The CPU loops GELU runs: "auto" (the vector loops where the CPU has them) or
// "plain" (one value at a time); returns the ones in use now: "avx512", "avx2" or "plain".
std::string gelu_cpu_loops(const std::string& choice);
