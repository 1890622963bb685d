// Chapter 04 warm-up: the GELU CPU loops, vectorised with at::vec::Vectorized.
//
// F.gelu on a CPU runs PyTorch's own loop over Vectorized<float>: 8 floats per
// AVX2 instruction (16 with AVX-512), with a vector erf and exp. PyTorch compiles that loop
// several times (default, AVX2, AVX-512) and picks one when it starts, by what
// the CPU can do. An extension is compiled once, with flags that must run on any
// x86-64 CPU, so it gets no AVX2 unless it asks. This file asks, for itself
// only: on x86-64 with GCC it is compiled for AVX2 + FMA (#pragma GCC target),
// and gelu_cpu.cpp calls it only when the CPU reports both (plus F16C, which
// every AVX2 CPU has and ATen's AVX2 headers use). Everywhere else
// (another compiler, another architecture) the functions below are never called
// and gelu_cpu.cpp runs its plain loop.
//
// It is compiled three times: here for AVX2 + FMA (namespace gelu_avx2); by
// gelu_cpu_vec512.cpp, which sets GELU_VEC_ISA to 512 and includes this file, for
// AVX-512 (gelu_avx512), 16 floats per instruction, as PyTorch's own loop gets on
// a CPU that has it; and by gelu_cpu_vec512bf16.cpp for AVX-512 plus AVX512_BF16
// (gelu_avx512_bf16), whose one extra instruction rounds 32 floats to bfloat16.
// gelu_cpu.cpp runs the widest one the CPU can.
//
// CPU_CAPABILITY names the namespace the Vectorized types live in
// (at::vec::AVX2::Vectorized<float>, at::vec::AVX512::...): the same names
// PyTorch gives its own builds (AVX512_BF16 for the third build, a name of its
// own), and different ones from any other file of this extension.
#ifndef GELU_VEC_ISA
#define GELU_VEC_ISA 2  // AVX2
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(CPU_CAPABILITY)
#define GELU_VEC 1
#if GELU_VEC_ISA == 512 && defined(GELU_VEC_BF16)
#pragma GCC target("avx,avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")
#elif GELU_VEC_ISA == 512
#pragma GCC target("avx,avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")
#else
#pragma GCC target("avx,avx2,fma,f16c")
#endif
// The pragma lets the compiler emit these instructions; the headers that choose
// their versions by instruction set (ATen's Vectorized, the SLEEF vector math it
// calls) look for the macros that -mavx2 -mfma -mf16c (-mavx512f ...) would
// define, which the pragma does not.
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
#if GELU_VEC_ISA == 512
#ifndef __AVX512F__
#define __AVX512F__ 1
#endif
#ifndef __AVX512BW__
#define __AVX512BW__ 1
#endif
#ifndef __AVX512VL__
#define __AVX512VL__ 1
#endif
#ifndef __AVX512DQ__
#define __AVX512DQ__ 1
#endif
#ifdef GELU_VEC_BF16
#define CPU_CAPABILITY AVX512_BF16  // the AVX-512 Vectorized, in a namespace of this build's own
#else
#define CPU_CAPABILITY AVX512
#endif
#define CPU_CAPABILITY_AVX512
#else
#define CPU_CAPABILITY AVX2
#define CPU_CAPABILITY_AVX2
#endif
#include <ATen/cpu/vec/functional.h>  // convert_to_float / convert_from_float (float16, bfloat16)
#include <ATen/cpu/vec/vec.h>

using at::vec::Vectorized;

// erf and exp of a whole vector of doubles: the vector counterparts of gelu.h's
// gelu_erf and gelu_exp (SLEEF's, within 1 ulp). Declared before gelu.h, so
// that its formulas, instantiated with T = Vectorized<double> below, find them.
static inline Vectorized<double> gelu_erf(const Vectorized<double>& x) { return x.erf(); }
static inline Vectorized<double> gelu_exp(const Vectorized<double>& x) { return x.exp(); }

// The float loops (float32, and float16/bfloat16 widened to float) compute on
// Coarse: a float vector whose gelu_exp is exp_coarse below (about 2e-6
// relative, instead of SLEEF's 1 ulp) and whose gelu_erf is a rational function
// (erf_rational below: no exp at all, one reciprocal). gelu.h's formulas run on
// it unchanged: the same code, cheaper building blocks. Both stay within the
// float32 tests' 16 ulps (APPENDIX_gelu_speed.md gives the largest errors
// measured), and a float16/bfloat16 result keeps only 11/8 of the float's bits.
// In an unnamed namespace: this file is compiled once per instruction set, and
// each build's Coarse (and gelu_value<Coarse>, ...) must be a type of its own,
// or the linker could hand the AVX-512 loop the AVX2 build's functions.
namespace {
struct Coarse {
  Vectorized<float> v;
  Coarse(double c) : v(static_cast<float>(c)) {}  // the T(...) constants of gelu.h
  Coarse(const Vectorized<float>& x) : v(x) {}
};
static inline Coarse operator+(const Coarse& a, const Coarse& b) { return a.v + b.v; }
static inline Coarse operator-(const Coarse& a, const Coarse& b) { return a.v - b.v; }
static inline Coarse operator*(const Coarse& a, const Coarse& b) { return a.v * b.v; }
static inline Coarse operator/(const Coarse& a, const Coarse& b) { return a.v / b.v; }
static inline Coarse operator-(const Coarse& a) { return a.v.neg(); }
// exp(y) = 2^n * exp(r), n = round(y / ln 2), |r| <= ln(2) / 2, exp(r) by the
// degree-5 polynomial of ATen's exp_u20 (about 2e-6 relative). AVX-512 has one
// instruction for the 2^n: scalef(p, n) = p * 2^n, exact, 0 or inf where that
// underflows or overflows; exp_u20, written for AVX2 too, builds 2^n from the
// exponent bits instead (two conversions, an integer add and shift, and masks
// for the ends: 19 instructions against this one's 11, and with its data in
// cache the CPU GELU is bound by instructions). The clamp keeps n finite for y = +-inf
// (exp(-104) is 0 in float, exp(89) inf); NaN passes through it.
static inline Vectorized<float> exp_coarse(const Vectorized<float>& y) {
#if GELU_VEC_ISA == 512
  const __m512 v = _mm512_min_ps(_mm512_set1_ps(89.f), _mm512_max_ps(_mm512_set1_ps(-104.f), y));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693147180559945309f), v);
  __m512 p = _mm512_fmadd_ps(r, _mm512_set1_ps(0.00828929059f), _mm512_set1_ps(0.0418978221f));
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(0.166676521f));
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(0.499991506f));
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(0.999999701f));
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, n);
#else
  return y.exp_u20();
#endif
}
static inline Coarse gelu_exp(const Coarse& x) { return exp_coarse(x.v); }
// erf(u) = u P(u^2) / Q(u^2) for |u| <= 4, and erf(+-4) beyond (erf(4) = 1 - 1.5e-8,
// 1 in float): P of degree 6 and Q of degree 4 in u^2, fitted to erf on [0, 4] for the
// smallest largest error (5.4e-8 in exact arithmetic; float rounding of the steps
// adds more, see the appendix). 10 fused multiply-adds and one division, against
// Abramowitz and Stegun's formula (ATen's Vectorized<float>::erf), which needs an
// exp and a division: with the exp gone, the division became the slowest step, so
// AVX-512 replaces it by the reciprocal estimate (vrcp14ps, 14 bits) and one
// Newton step (about 28 bits). AVX2's estimate has 12 bits, too few for one step:
// that build keeps the division. The clamp keeps NaN (max then min return their
// second operand, the value, when it is NaN).
static inline Vectorized<float> erf_rational(const Vectorized<float>& x) {
  using F = Vectorized<float>;
  const F u = at::vec::clamp(x, F(-4.f), F(4.f));
  const F t = u * u;
  F p = fmadd(F(1.92172519e-08f), t, F(-1.99034369e-06f));
  p = fmadd(p, t, F(1.55540704e-04f));
  p = fmadd(p, t, F(4.29320052e-03f));
  p = fmadd(p, t, F(5.24339399e-02f));
  p = fmadd(p, t, F(2.13947971e-01f));
  p = fmadd(p, t, F(1.12837868f));
  F q = fmadd(F(1.09807481e-03f), t, F(1.55513915e-02f));
  q = fmadd(q, t, F(1.20801006e-01f));
  q = fmadd(q, t, F(5.22934110e-01f));
  q = fmadd(q, t, F(1.f));
#if GELU_VEC_ISA == 512
  const __m512 r0 = _mm512_rcp14_ps(q);
  const F r = _mm512_fmadd_ps(r0, _mm512_fnmadd_ps(q, r0, _mm512_set1_ps(1.f)), r0);  // r0 (2 - q r0)
  return u * p * r;
#else
  return u * p / q;
#endif
}
static inline Coarse gelu_erf(const Coarse& x) { return erf_rational(x.v); }

// The vector type the formulas run on for a dtype's loop (Coarse for float,
// Vectorized<double> with SLEEF's erf and exp for double), and back to the
// vector the loop stores.
template <typename scalar_t>
struct MathOf {
  using type = Vectorized<scalar_t>;
};
template <>
struct MathOf<float> {
  using type = Coarse;
};
static inline Vectorized<float> as_vec(const Coarse& c) { return c.v; }
static inline Vectorized<double> as_vec(const Vectorized<double>& v) { return v; }
}  // namespace
#endif

#include "gelu.h"

#if GELU_VEC_ISA == 512 && defined(GELU_VEC_BF16)
namespace gelu_avx512_bf16 {
#elif GELU_VEC_ISA == 512
namespace gelu_avx512 {
#else
namespace gelu_avx2 {
#endif

#ifdef GELU_VEC

bool available() {
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#if GELU_VEC_ISA == 512
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#ifdef GELU_VEC_BF16
  return avx512 && __builtin_cpu_supports("avx512bf16");
#else
  return avx512;
#endif
#else
  return avx2;
#endif
}

// out[i] = f(in[i]...) for i in [begin, end), Vec::size() values at a time: whole
// vectors first, then the last (end - begin) % size values with a partial load
// and store (the unused lanes hold zeros, whose results are never stored).
template <typename Vec, typename T, typename F, typename... In>
static void vector_loop(T* out, int64_t begin, int64_t end, F f, const In*... in) {
  int64_t i = begin;
  for (; i + Vec::size() <= end; i += Vec::size()) {
    f(Vec::loadu(in + i)...).store(out + i);
  }
  if (i < end) {
    const int rest = static_cast<int>(end - i);
    f(Vec::loadu(in + i, rest)...).store(out + i, rest);
  }
}

// float32 and float64.
template <typename scalar_t>
static void forward_loop(const scalar_t* x, scalar_t* out, int64_t begin, int64_t end) {
  using Vec = Vectorized<scalar_t>;
  using Math = typename MathOf<scalar_t>::type;
  vector_loop<Vec>(out, begin, end, [](const Vec& v) { return as_vec(gelu_value<Math>(v)); }, x);
}

template <typename scalar_t>
static void backward_loop(const scalar_t* grad, const scalar_t* x, scalar_t* grad_in, int64_t begin, int64_t end) {
  using Vec = Vectorized<scalar_t>;
  using Math = typename MathOf<scalar_t>::type;
  // The chain rule, as in the plain loop: dL/dx = dL/dgelu * gelu'(x).
  vector_loop<Vec>(grad_in, begin, end, [](const Vec& g, const Vec& v) { return g * as_vec(gelu_derivative<Math>(v)); },
                   grad, x);
}

// Two float vectors rounded to one vector of float16/bfloat16, to nearest even.
// float16 has an instruction for it on every AVX2 CPU (F16C); bfloat16 has one
// only with AVX512_BF16, elsewhere ATen's convert_from_float does it with
// integer arithmetic (7 instructions per 16 floats, NaN kept apart). The
// instruction treats denormal floats as 0 (F.gelu's oneDNN kernel gives 0 there
// too); where a lane holds one (|y| < 2^-126, rare), the integer rounding does
// the whole vector, so that every build rounds every value the same way (a NaN
// stays NaN; the instruction keeps its payload, the integer code writes 0xffff).
template <typename half_t>
static inline Vectorized<half_t> round_to(const Vectorized<float>& lo, const Vectorized<float>& hi) {
#ifdef GELU_VEC_BF16
  if constexpr (std::is_same_v<half_t, c10::BFloat16>) {
    constexpr int kDenormal = 0x20;  // vfpclassps category: denormal
    const __mmask16 tiny = _mm512_fpclass_ps_mask(lo, kDenormal) | _mm512_fpclass_ps_mask(hi, kDenormal);
    if (__builtin_expect(tiny == 0, 1)) {
      return Vectorized<half_t>(reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
    }
  }
#endif
  return at::vec::convert_from_float<half_t>(lo, hi);
}

// float16 and bfloat16: a vector of 16 (32 with AVX-512) is widened into two float vectors,
// computed in float (the opmath type, as in the plain loop) with the Coarse
// exp and erf, and rounded once.
template <typename half_t>
static void forward_loop_reduced(const half_t* x, half_t* out, int64_t begin, int64_t end) {
  using Vec = Vectorized<half_t>;
  auto one = [](const Vec& v) {
    const auto [lo, hi] = at::vec::convert_to_float<half_t>(v);
    return round_to<half_t>(gelu_value<Coarse>(lo).v, gelu_value<Coarse>(hi).v);
  };
  vector_loop<Vec>(out, begin, end, one, x);
}

template <typename half_t>
static void backward_loop_reduced(const half_t* grad, const half_t* x, half_t* grad_in, int64_t begin, int64_t end) {
  using Vec = Vectorized<half_t>;
  auto one = [](const Vec& g, const Vec& v) {
    const auto [g_lo, g_hi] = at::vec::convert_to_float<half_t>(g);
    const auto [lo, hi] = at::vec::convert_to_float<half_t>(v);
    return round_to<half_t>(g_lo * gelu_derivative<Coarse>(lo).v, g_hi * gelu_derivative<Coarse>(hi).v);
  };
  vector_loop<Vec>(grad_in, begin, end, one, grad, x);
}

void forward(const float* x, float* out, int64_t begin, int64_t end) { forward_loop(x, out, begin, end); }
void forward(const double* x, double* out, int64_t begin, int64_t end) { forward_loop(x, out, begin, end); }
void backward(const float* g, const float* x, float* gi, int64_t begin, int64_t end) {
  backward_loop(g, x, gi, begin, end);
}
void backward(const double* g, const double* x, double* gi, int64_t begin, int64_t end) {
  backward_loop(g, x, gi, begin, end);
}
void forward(const c10::Half* x, c10::Half* out, int64_t begin, int64_t end) {
  forward_loop_reduced(x, out, begin, end);
}
void forward(const c10::BFloat16* x, c10::BFloat16* out, int64_t begin, int64_t end) {
  forward_loop_reduced(x, out, begin, end);
}
void backward(const c10::Half* g, const c10::Half* x, c10::Half* gi, int64_t begin, int64_t end) {
  backward_loop_reduced(g, x, gi, begin, end);
}
void backward(const c10::BFloat16* g, const c10::BFloat16* x, c10::BFloat16* gi, int64_t begin, int64_t end) {
  backward_loop_reduced(g, x, gi, begin, end);
}

#else  // no vector loops in this build: gelu_cpu.cpp keeps its plain loop

bool available() { return false; }
void forward(const float*, float*, int64_t, int64_t) {}
void forward(const double*, double*, int64_t, int64_t) {}
void backward(const float*, const float*, float*, int64_t, int64_t) {}
void backward(const double*, const double*, double*, int64_t, int64_t) {}
void forward(const c10::Half*, c10::Half*, int64_t, int64_t) {}
void forward(const c10::BFloat16*, c10::BFloat16*, int64_t, int64_t) {}
void backward(const c10::Half*, const c10::Half*, c10::Half*, int64_t, int64_t) {}
void backward(const c10::BFloat16*, const c10::BFloat16*, c10::BFloat16*, int64_t, int64_t) {}

#endif

}  // namespace
