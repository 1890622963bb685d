// Chapter 04 warm-up: the GELU CPU loops, vectorised with at::vec::Vectorized.
//
// F.gelu on a CPU runs PyTorch's own loop over Vectorized<float>: 8 floats per
// AVX2 instruction, with a vector erf and exp. PyTorch compiles that loop
// several times (default, AVX2, AVX-512) and picks one when it starts, by what
// the CPU can do. An extension is compiled once, with flags that must run on any
// x86-64 CPU, so it gets no AVX2 unless it asks. This file asks, for itself
// only: on x86-64 with GCC it is compiled for AVX2 + FMA (#pragma GCC target),
// and gelu_cpu.cpp calls it only when the CPU reports both (plus F16C, which
// every AVX2 CPU has and ATen's AVX2 headers use). Everywhere else
// (another compiler, another architecture) the functions below are never called
// and gelu_cpu.cpp runs its plain loop.
//
// CPU_CAPABILITY names the namespace the Vectorized types live in
// (at::vec::AVX2::Vectorized<float> here): the same name PyTorch gives its own
// AVX2 build, and a different one from any other file of this extension.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(CPU_CAPABILITY)
#define GELU_VEC_AVX2 1
#pragma GCC target("avx,avx2,fma,f16c")
// The pragma lets the compiler emit AVX2 code; the headers that choose their
// AVX2 versions (ATen's Vectorized, the SLEEF vector math it calls) look for
// the macros that -mavx2 -mfma -mf16c would define, which the pragma does not.
#ifndef __AVX__
#define __AVX__ 1
#endif
#ifndef __AVX2__
#define __AVX2__ 1
#endif
#ifndef __FMA__
#define __FMA__ 1
#endif
#ifndef __F16C__
#define __F16C__ 1
#endif
#define CPU_CAPABILITY AVX2
#define CPU_CAPABILITY_AVX2
#include <ATen/cpu/vec/vec.h>

using at::vec::Vectorized;

// erf and exp of a whole vector: the vector counterparts of gelu.h's gelu_erf
// and gelu_exp. Declared before gelu.h, so that its formulas, instantiated
// with T = Vectorized below, find them.
static inline Vectorized<float> gelu_erf(const Vectorized<float>& x) { return x.erf(); }
static inline Vectorized<double> gelu_erf(const Vectorized<double>& x) { return x.erf(); }
static inline Vectorized<float> gelu_exp(const Vectorized<float>& x) { return x.exp(); }
static inline Vectorized<double> gelu_exp(const Vectorized<double>& x) { return x.exp(); }
#endif

#include "gelu.h"

#ifdef GELU_VEC_AVX2

bool gelu_cpu_vec_available() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

// Whole vectors first; the last (end - begin) % size values with a partial load
// and store (the unused lanes hold zeros, whose results are never stored).
template <typename scalar_t>
static void forward_loop(const scalar_t* x, scalar_t* out, int64_t begin, int64_t end) {
  using Vec = Vectorized<scalar_t>;
  int64_t i = begin;
  for (; i + Vec::size() <= end; i += Vec::size()) {
    gelu_value<Vec>(Vec::loadu(x + i)).store(out + i);
  }
  if (i < end) {
    const int rest = static_cast<int>(end - i);
    gelu_value<Vec>(Vec::loadu(x + i, rest)).store(out + i, rest);
  }
}

template <typename scalar_t>
static void backward_loop(const scalar_t* grad, const scalar_t* x, scalar_t* grad_in, int64_t begin, int64_t end) {
  using Vec = Vectorized<scalar_t>;
  int64_t i = begin;
  // The chain rule, as in the plain loop: dL/dx = dL/dgelu * gelu'(x).
  for (; i + Vec::size() <= end; i += Vec::size()) {
    (Vec::loadu(grad + i) * gelu_derivative<Vec>(Vec::loadu(x + i))).store(grad_in + i);
  }
  if (i < end) {
    const int rest = static_cast<int>(end - i);
    (Vec::loadu(grad + i, rest) * gelu_derivative<Vec>(Vec::loadu(x + i, rest))).store(grad_in + i, rest);
  }
}

void gelu_forward_cpu_vec(const float* x, float* out, int64_t begin, int64_t end) { forward_loop(x, out, begin, end); }
void gelu_forward_cpu_vec(const double* x, double* out, int64_t begin, int64_t end) { forward_loop(x, out, begin, end); }
void gelu_backward_cpu_vec(const float* g, const float* x, float* gi, int64_t begin, int64_t end) {
  backward_loop(g, x, gi, begin, end);
}
void gelu_backward_cpu_vec(const double* g, const double* x, double* gi, int64_t begin, int64_t end) {
  backward_loop(g, x, gi, begin, end);
}

#else  // no vector loops in this build: gelu_cpu.cpp keeps its plain loop

bool gelu_cpu_vec_available() { return false; }
void gelu_forward_cpu_vec(const float*, float*, int64_t, int64_t) {}
void gelu_forward_cpu_vec(const double*, double*, int64_t, int64_t) {}
void gelu_backward_cpu_vec(const float*, const float*, float*, int64_t, int64_t) {}
void gelu_backward_cpu_vec(const double*, const double*, double*, int64_t, int64_t) {}

#endif
