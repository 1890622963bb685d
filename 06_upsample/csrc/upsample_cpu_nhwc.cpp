// Chapter 06: the CPU kernels for channels-last tensors (NHWC in memory).
//
// A pixel's C values lie side by side, so these kernels compute whole pixels,
// each from the few pixels it depends on, with the loop over C innermost: a
// block of kVectors vector registers of channels at a time.
//
//   forward   output pixel (h, w), from the taps y of h and x of w:
//               top    = (1 - x.l) * in[y.i0, x.i0] + x.l * in[y.i0, x.i1]
//               bottom = (1 - x.l) * in[y.i1, x.i0] + x.l * in[y.i1, x.i1]
//               out    = (1 - y.l) * top + y.l * bottom
//             Consecutive output rows that read the same two input rows (two at
//             x2, four at x4) share top and bottom: they are done together.
//             Pixels narrower than a vector go through lines, as in NCHW
//             (forward_narrow_rows).
//   backward  input pixel (h, w), from the grad_out pixels that read it (the
//             ranges of gather_range along H and W, in increasing order):
//               line(dh) = 0 + sum over dw of wx(dw) * grad_out[dh, dw]
//               grad_in  = 0 + sum over dh of wy(dh) * line(dh)
//             Each grad_out pixel is read, from cache, by the 2 x 2 input pixels
//             it feeds; nothing is kept in memory between them. The work is
//             (sum of the ranges along H) x (sum along W): about 4 x grad_out.
//             (H growing while W shrinks goes elsewhere: see backward_cpu.)
//             Pixels of fewer than 16 channels go through lines, as in NCHW, where
//             that is faster (gather_narrow_rows).
//
// These are the NCHW kernels' operations (upsample_cpu.cpp) in the same order,
// so the two layouts give the same bits. Memory: the column taps or ranges of
// one chunk of columns (see upsample_cpu.h), the backward's row ranges when H_in
// is no longer than a chunk, and per task two lines (narrow forward) or, when a
// range along H is longer than kRowBlock, one line of opmath_t (backward).
#include "upsample_cpu.h"

#include <cstring>
#include <type_traits>

namespace {

using torch::headeronly::BFloat16;
using torch::headeronly::Half;

constexpr int kVectors = 2;    // vectors of channels per block
constexpr int kGroup = 8;      // the most output rows the forward does together
constexpr int kRowBlock = 16;  // grad_out rows whose weights the backward keeps at once
constexpr int kTailLanes = 8;  // the lanes of gather_pixel's last vector
constexpr int kNarrow = 8;     // fewer channels than this: the forward works on lines (forward_narrow_rows)
constexpr int kNarrowGather = 15;  // this many channels or fewer: the backward works on lines where
                                  // that is faster (gather_chunk)
constexpr int kLineChannels = 8;  // the channels a narrow line takes at a time (gather_narrow_line)

// scalar_t -> opmath_t and back, one value.
template <typename opmath_t, typename scalar_t>
inline opmath_t load(scalar_t v) {
  return static_cast<opmath_t>(v);
}
template <typename scalar_t, typename opmath_t>
inline scalar_t round_to(opmath_t v) {
  return static_cast<scalar_t>(v);
}

// Vectors: Vec<T, B>::type holds B bytes of T, with elementwise + and * (a
// scalar operand applies to every lane). B = 0: one T, a plain scalar. With GCC
// and Clang, B = 16 or 32 is a vector type, one register of the width that the
// function it is inlined into is compiled for (16 bytes: SSE2, NEON; 32: AVX2);
// other compilers use B = 0 throughout.
template <typename T, int B>
struct Vec;
template <typename T>
struct Vec<T, 0> {
  using type = T;
};
template <typename T, int B>
constexpr int lanes = B == 0 ? 1 : B / static_cast<int>(sizeof(T));

#if defined(__GNUC__)
#define NHWC_INLINE inline __attribute__((always_inline))
constexpr int kBaseBytes = 16;
template <typename T, int B>
struct Vec {
  typedef T type __attribute__((vector_size(B)));
};
// The bits of L bfloat16 values, and of L floats.
template <int L>
struct Bits {
  typedef uint16_t narrow __attribute__((vector_size(2 * L)));
  typedef uint32_t wide __attribute__((vector_size(4 * L)));
};
// BFloat16's rounding of each of the L floats of v (to nearest even, NaN to
// 0x7FC0): the bfloat16 bits in the upper half of each 32-bit lane of t.
template <int L, typename V>
NHWC_INLINE void bf16_rounded(typename Bits<L>::wide& t, const V& v) {
  using Wide = typename Bits<L>::wide;
  Wide u;
  std::memcpy(&u, &v, sizeof u);
  const Wide nan = (Wide)(v != v);  // all ones where v is NaN
  t = (((u >> 16) & 1u) + u + 0x7FFFu) & ~nan;
  t |= nan & 0x7FC00000u;
}
#else
#define NHWC_INLINE inline
constexpr int kBaseBytes = 0;
#endif

// The task functions are written once, for vectors of B bytes, and compiled as
// two functions on x86-64: one for AVX2 (B = 32), one for the baseline (B = 16),
// picked at run time. AVX2 without FMA: no fused multiply-adds, so the same
// operations, and bits, as the NCHW kernels. The AVX2 function also converts
// float16 8 values at a time with F16C (vcvtph2ps, vcvtps2ph: exact, and
// rounding to nearest even, as Half's own conversions).
#if defined(__x86_64__) && defined(__GNUC__)
#define NHWC_AVX2 1
#define NHWC_AVX2_TARGET __attribute__((target("avx2,f16c")))
inline bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return yes;
}

// 8 float16 values to 8 floats, and back rounded to nearest even. Inline assembly, not the
// intrinsics: these helpers are inlined into the AVX2 function only, but the compiler checks an
// intrinsic's target against the function it is written in.
typedef uint16_t H8 __attribute__((vector_size(16)));
template <typename F>
NHWC_INLINE void widen_f16(F& v, const Half* p) {
  static_assert(sizeof(F) == 32, "8 floats");
  H8 n;
  std::memcpy(&n, p, sizeof n);
  asm("vcvtph2ps %1, %0" : "=x"(v) : "x"(n));
}
template <typename F>
NHWC_INLINE void narrow_f16(Half* p, const F& v) {
  static_assert(sizeof(F) == 32, "8 floats");
  H8 n;
  asm("vcvtps2ph $0, %1, %0" : "=x"(n) : "x"(v));  // imm 0: to nearest even
  std::memcpy(p, &n, sizeof n);
}

#if defined(__clang__)
#define NHWC_SHUFFLE(T, a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define NHWC_SHUFFLE(T, a, b, ...) __builtin_shuffle(a, b, T{__VA_ARGS__})
#endif
using F8 = Vec<float, 32>::type;
using U8 = Bits<8>::wide;
using H16 = Bits<16>::narrow;

// 16 bfloat16 values into two vectors of 8 floats (32-byte vectors): values
// 0-3 and 8-11 in `lo`, 4-7 and 12-15 in `hi`, the order in which the unpack
// instructions place them (one instruction per vector). store_bf16_pair puts
// them back in order; what comes between is elementwise.
NHWC_INLINE void load_bf16_pair(F8& lo, F8& hi, const BFloat16* p) {
  H16 v;
  std::memcpy(&v, p, sizeof v);
  const H16 zero = {};
  const H16 a = NHWC_SHUFFLE(H16, zero, v, 0, 16, 1, 17, 2, 18, 3, 19, 8, 24, 9, 25, 10, 26, 11, 27);
  const H16 b = NHWC_SHUFFLE(H16, zero, v, 4, 20, 5, 21, 6, 22, 7, 23, 12, 28, 13, 29, 14, 30, 15, 31);
  std::memcpy(&lo, &a, sizeof lo);
  std::memcpy(&hi, &b, sizeof hi);
}

// The 16 values of load_bf16_pair's order, rounded, to p in order.
NHWC_INLINE void store_bf16_pair(BFloat16* p, const F8& lo, const F8& hi) {
  U8 a, b;
  bf16_rounded<8>(a, lo);
  bf16_rounded<8>(b, hi);
  const H16 v = NHWC_SHUFFLE(H16, (H16)a, (H16)b, 1, 3, 5, 7, 17, 19, 21, 23, 9, 11, 13, 15, 25, 27, 29, 31);
  std::memcpy(p, &v, sizeof v);
}
#endif

// v = lanes<opmath_t, B> values from p, in opmath_t.
template <int B, typename opmath_t, typename scalar_t>
NHWC_INLINE void vload(typename Vec<opmath_t, B>::type& v, const scalar_t* p) {
  constexpr int L = lanes<opmath_t, B>;
  if constexpr (B == 0) {
    v = load<opmath_t>(*p);
  } else if constexpr (std::is_same_v<scalar_t, opmath_t>) {
    std::memcpy(&v, p, sizeof v);
#if defined(__GNUC__)
  } else if constexpr (std::is_same_v<scalar_t, BFloat16>) {  // its bits, 16 places up
    using Narrow = typename Bits<L>::narrow;
    using Wide = typename Bits<L>::wide;
    Narrow n;
    std::memcpy(&n, p, sizeof n);
    const Wide w = __builtin_convertvector(n, Wide) << 16;
    std::memcpy(&v, &w, sizeof v);
#endif
#ifdef NHWC_AVX2
  } else if constexpr (B == 32 && std::is_same_v<scalar_t, Half>) {  // F16C (only in the AVX2 function)
    widen_f16(v, p);
#endif
  } else {  // float16: one value at a time
    opmath_t t[L];
    for (int i = 0; i < L; ++i) {
      t[i] = load<opmath_t>(p[i]);
    }
    std::memcpy(&v, t, sizeof v);
  }
}

// lanes<opmath_t, B> values of v to p, rounded to scalar_t.
template <int B, typename opmath_t, typename scalar_t>
NHWC_INLINE void vstore(scalar_t* p, const typename Vec<opmath_t, B>::type& v) {
  constexpr int L = lanes<opmath_t, B>;
  if constexpr (B == 0) {
    *p = round_to<scalar_t>(v);
  } else if constexpr (std::is_same_v<scalar_t, opmath_t>) {
    std::memcpy(p, &v, sizeof v);
#if defined(__GNUC__)
  } else if constexpr (std::is_same_v<scalar_t, BFloat16>) {
    typename Bits<L>::wide t;
    bf16_rounded<L>(t, v);
    const typename Bits<L>::narrow n = __builtin_convertvector(t >> 16, typename Bits<L>::narrow);
    std::memcpy(p, &n, sizeof n);
#endif
#ifdef NHWC_AVX2
  } else if constexpr (B == 32 && std::is_same_v<scalar_t, Half>) {  // F16C (only in the AVX2 function)
    narrow_f16(p, v);
#endif
  } else {
    opmath_t t[L];
    std::memcpy(t, &v, sizeof v);
    for (int i = 0; i < L; ++i) {
      p[i] = round_to<scalar_t>(t[i]);
    }
  }
}

// P vectors from p, or to p: vload and vstore, or, for bfloat16 in 32-byte
// vectors, two vectors at a time in load_bf16_pair's order.
template <int B, int P, typename opmath_t, typename scalar_t>
NHWC_INLINE void load_block(typename Vec<opmath_t, B>::type (&v)[P], const scalar_t* p) {
  constexpr int L = lanes<opmath_t, B>;
#ifdef NHWC_AVX2
  if constexpr (B == 32 && P % 2 == 0 && std::is_same_v<scalar_t, BFloat16>) {
    for (int q = 0; q < P; q += 2) {
      load_bf16_pair(v[q], v[q + 1], p + q * L);
    }
    return;
  }
#endif
  for (int q = 0; q < P; ++q) {
    vload<B, opmath_t>(v[q], p + q * L);
  }
}
template <int B, int P, typename opmath_t, typename scalar_t>
NHWC_INLINE void store_block(scalar_t* p, const typename Vec<opmath_t, B>::type (&v)[P]) {
  constexpr int L = lanes<opmath_t, B>;
#ifdef NHWC_AVX2
  if constexpr (B == 32 && P % 2 == 0 && std::is_same_v<scalar_t, BFloat16>) {
    for (int q = 0; q < P; q += 2) {
      store_bf16_pair(p + q * L, v[q], v[q + 1]);
    }
    return;
  }
#endif
  for (int q = 0; q < P; ++q) {
    vstore<B, opmath_t>(p + q * L, v[q]);
  }
}

// Whether the kernels for vectors of B bytes unroll their loops over a few rows
// and range lengths (each unrolled case is one more copy of the loop): with
// AVX2, for float and bfloat16. The others run the same loops with their
// lengths read at run time.
template <int B, typename scalar_t>
constexpr bool kUnrolled = B == 32 && (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, BFloat16>);

// ---------------------------------------------------------------------------
// Forward

// What the forward's tasks share: output columns [w0, w0 + width) of every output row.
template <typename scalar_t>
struct ForwardPlan {
  using opmath_t = opmath_type<scalar_t>;
  const scalar_t* x;
  scalar_t* out;
  const ResizeGeometry& g;
  const Taps<opmath_t>* xtaps;  // the taps of the chunk's output columns
  int64_t w0, width;
  opmath_t rh;
};

// The output rows that read the same two input rows, done together.
template <typename scalar_t, typename opmath_t>
struct RowGroup {
  scalar_t* out[kGroup];               // the rows' first output pixel
  opmath_t wy0[kGroup], wy1[kGroup];  // the rows' weights of the top and bottom input rows
  int rows;
};

// P vectors of channels of one output pixel, in each row of rg (at offset
// `at`): p00, p01 are its taps along W in the top input row, p10, p11 in the
// bottom one. ROWS > 0: rg holds ROWS rows (the loop unrolls); 0: rg.rows.
template <int B, int P, int ROWS, typename scalar_t, typename opmath_t>
NHWC_INLINE void forward_vectors(const RowGroup<scalar_t, opmath_t>& rg, int64_t at, const scalar_t* p00,
                                 const scalar_t* p01, const scalar_t* p10, const scalar_t* p11, opmath_t wx0,
                                 opmath_t wx1) {
  using V = typename Vec<opmath_t, B>::type;
  V a[P], b[P], top[P], bottom[P];
  load_block<B, P, opmath_t>(a, p00);
  load_block<B, P, opmath_t>(b, p01);
  for (int q = 0; q < P; ++q) {
    top[q] = wx0 * a[q] + wx1 * b[q];
  }
  load_block<B, P, opmath_t>(a, p10);
  load_block<B, P, opmath_t>(b, p11);
  for (int q = 0; q < P; ++q) {
    bottom[q] = wx0 * a[q] + wx1 * b[q];
  }
  const int rows = ROWS > 0 ? ROWS : rg.rows;
  for (int r = 0; r < rows; ++r) {
    V o[P];
    for (int q = 0; q < P; ++q) {
      o[q] = rg.wy0[r] * top[q] + rg.wy1[r] * bottom[q];
    }
    store_block<B, P, opmath_t>(rg.out[r] + at, o);
  }
}

// The output pixels of the rows of rg, from input rows `top` and `bottom`.
template <int B, int ROWS, typename scalar_t, typename opmath_t>
NHWC_INLINE void forward_pixels(const ForwardPlan<scalar_t>& p, const RowGroup<scalar_t, opmath_t>& rg,
                                const scalar_t* top, const scalar_t* bottom) {
  constexpr int L = lanes<opmath_t, B>, P = kVectors;
  const int64_t C = p.g.channels;
  for (int64_t w = 0; w < p.width; ++w) {
    const Taps<opmath_t>& xt = p.xtaps[w];
    const opmath_t wx0 = opmath_t(1) - xt.l, wx1 = xt.l;
    const scalar_t *p00 = top + xt.i0 * C, *p01 = top + xt.i1 * C;
    const scalar_t *p10 = bottom + xt.i0 * C, *p11 = bottom + xt.i1 * C;
    int64_t c = 0;
    for (; c + P * L <= C; c += P * L) {
      forward_vectors<B, P, ROWS>(rg, w * C + c, p00 + c, p01 + c, p10 + c, p11 + c, wx0, wx1);
    }
    for (; c + L <= C; c += L) {
      forward_vectors<B, 1, ROWS>(rg, w * C + c, p00 + c, p01 + c, p10 + c, p11 + c, wx0, wx1);
    }
    if constexpr (B > kBaseBytes) {  // a half-width vector, as gather_pixel
      constexpr int H = lanes<opmath_t, kBaseBytes>;
      for (; c + H <= C; c += H) {
        forward_vectors<kBaseBytes, 1, ROWS>(rg, w * C + c, p00 + c, p01 + c, p10 + c, p11 + c, wx0, wx1);
      }
    }
    for (; c < C; ++c) {
      forward_vectors<0, 1, ROWS>(rg, w * C + c, p00 + c, p01 + c, p10 + c, p11 + c, wx0, wx1);
    }
  }
}

// The forward's run_rows for pixels narrower than a vector (C < kNarrow, RGB say), where
// whole pixels would leave most of each vector empty: as the NCHW forward, each
// input row is blended along W into a line of width * C values, kept for the
// next output row (two lines), and each output row blends two lines along H in
// one contiguous loop.
template <typename scalar_t>
NHWC_INLINE void forward_narrow_rows(const ForwardPlan<scalar_t>& p, int64_t begin, int64_t end) {
  using opmath_t = opmath_type<scalar_t>;
  const ResizeGeometry& g = p.g;
  const int64_t C = g.channels, length = p.width * C;
  std::vector<opmath_t> lines(2 * length);
  int64_t held[2] = {-1, -1};  // the input row (n * H_in + i) in each line
  // float16: an input row widened and an output row rounded in bulk (widen, narrow: F16C where the
  // CPU has it), not one value at a time (bfloat16's conversions are a shift: done in place)
  constexpr bool bulk = std::is_same_v<scalar_t, Half>;
  std::vector<float> in_row(bulk ? g.W_in * C : 0), out_row(bulk ? length : 0);
  auto interpolate = [&](opmath_t* line, const auto* in) {
    for (int64_t w = 0; w < p.width; ++w) {
      const Taps<opmath_t>& xt = p.xtaps[w];
      const opmath_t wx0 = opmath_t(1) - xt.l, wx1 = xt.l;
      for (int64_t c = 0; c < C; ++c) {
        line[w * C + c] = wx0 * load<opmath_t>(in[xt.i0 * C + c]) + wx1 * load<opmath_t>(in[xt.i1 * C + c]);
      }
    }
  };
  auto line_of = [&](int64_t r) {
    opmath_t* line = lines.data() + (r % 2) * length;
    if (held[r % 2] != r) {
      held[r % 2] = r;
      const scalar_t* in = p.x + r * g.W_in * C;
      if constexpr (bulk) {
        widen(in, in_row.data(), g.W_in * C);
        interpolate(line, in_row.data());
      } else {
        interpolate(line, in);
      }
    }
    return line;
  };
  for (int64_t row = begin; row < end; ++row) {
    const int64_t n = row / g.H_out, h = row % g.H_out;
    const Taps<opmath_t> yt = source_taps<opmath_t>(h, g.H_in, p.rh, g.mode);
    const opmath_t* __restrict__ top = line_of(n * g.H_in + yt.i0);
    const opmath_t* __restrict__ bottom = line_of(n * g.H_in + yt.i1);
    const opmath_t wy0 = opmath_t(1) - yt.l, wy1 = yt.l;
    scalar_t* __restrict__ out = p.out + (row * g.W_out + p.w0) * C;
    if constexpr (bulk) {
      for (int64_t i = 0; i < length; ++i) {
        out_row[i] = wy0 * top[i] + wy1 * bottom[i];
      }
      narrow(out_row.data(), out, length);
    } else {
      for (int64_t i = 0; i < length; ++i) {
        out[i] = round_to<scalar_t>(wy0 * top[i] + wy1 * bottom[i]);
      }
    }
  }
}

// The output rows [begin, end) (row = n * H_out + h), one task.
template <int B, typename scalar_t>
NHWC_INLINE void run_rows(const ForwardPlan<scalar_t>& p, int64_t begin, int64_t end) {
  using opmath_t = opmath_type<scalar_t>;
  const ResizeGeometry& g = p.g;
  const int64_t C = g.channels;
  if (C < kNarrow) {
    return forward_narrow_rows(p, begin, end);
  }
  for (int64_t row = begin; row < end;) {
    const int64_t n = row / g.H_out, h = row % g.H_out;
    const Taps<opmath_t> yt = source_taps<opmath_t>(h, g.H_in, p.rh, g.mode);
    // This row and the next ones of the task and image that read input rows yt.i0 and yt.i1.
    RowGroup<scalar_t, opmath_t> rg;
    rg.rows = 0;
    for (Taps<opmath_t> t = yt;;) {
      rg.out[rg.rows] = p.out + ((row + rg.rows) * g.W_out + p.w0) * C;
      rg.wy0[rg.rows] = opmath_t(1) - t.l;
      rg.wy1[rg.rows] = t.l;
      if (++rg.rows == kGroup || row + rg.rows == end || h + rg.rows == g.H_out) break;
      t = source_taps<opmath_t>(h + rg.rows, g.H_in, p.rh, g.mode);
      if (t.i0 != yt.i0 || t.i1 != yt.i1) break;
    }
    const scalar_t* top = p.x + (n * g.H_in + yt.i0) * g.W_in * C;
    const scalar_t* bottom = p.x + (n * g.H_in + yt.i1) * g.W_in * C;
    switch (kUnrolled<B, scalar_t> ? rg.rows : 0) {
      case 1:
        forward_pixels<B, 1>(p, rg, top, bottom);
        break;
      case 2:
        forward_pixels<B, 2>(p, rg, top, bottom);
        break;
      default:
        forward_pixels<B, 0>(p, rg, top, bottom);
    }
    row += rg.rows;
  }
}

// One task of a plan (forward, gather, or a float16 row's conversion): its rows [begin, end) (its
// values, for a conversion), in the widest vectors this CPU has. run_rows is overloaded on the
// plan's type (the others are defined further down; the call finds them when task is
// instantiated for their plans).
template <typename Plan>
static void task_base(const Plan& p, int64_t begin, int64_t end) {
  run_rows<kBaseBytes>(p, begin, end);
}
#ifdef NHWC_AVX2
template <typename Plan>
NHWC_AVX2_TARGET static void task_avx2(const Plan& p, int64_t begin, int64_t end) {
  run_rows<32>(p, begin, end);
}
#endif
template <typename Plan>
static void task(const Plan& p, int64_t begin, int64_t end) {
#ifdef NHWC_AVX2
  if (has_avx2()) {
    return task_avx2(p, begin, end);
  }
#endif
  task_base(p, begin, end);
}

// Output columns [w0, w1) of every output row.
template <typename scalar_t>
static void forward_chunk(const scalar_t* x, scalar_t* out, const ResizeGeometry& g, int64_t w0, int64_t w1) {
  using opmath_t = opmath_type<scalar_t>;
  const opmath_t rw = axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w);
  std::vector<Taps<opmath_t>> xtaps(w1 - w0);
  for (int64_t w = w0; w < w1; ++w) {
    xtaps[w - w0] = source_taps<opmath_t>(w, g.W_in, rw, g.mode);
  }
  const ForwardPlan<scalar_t> plan{x, out, g, xtaps.data(), w0, w1 - w0,
                                   axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h)};
  const int64_t grain = std::max<int64_t>(1, kGrainElements / ((w1 - w0) * g.channels));
  torch::stable::parallel_for(0, g.planes / g.channels * g.H_out, grain,
                              [&](int64_t begin, int64_t end) { task(plan, begin, end); });
}

// ---------------------------------------------------------------------------
// Backward (gather)

// What the gather's tasks share: input columns [cols.lo, cols.hi) of every input row.
template <typename scalar_t>
struct GatherPlan {
  using opmath_t = opmath_type<scalar_t>;
  const scalar_t* grad_out;
  scalar_t* grad_in;
  const ResizeGeometry& g;
  const GatherTable<opmath_t>& cols;
  opmath_t rh;
  const GatherTable<opmath_t>* rows;  // the rows' ranges and weights, or null: computed per row
  std::vector<int64_t> read;          // see read_columns
  int64_t slots;                      // gather_narrow_rows: the lines a task keeps
};

// A downscale along W leaves runs of columns that no output reads between those read. Filling each
// run costs a call; when the columns read hold fewer bytes than the runs' calls would cost (about
// 256 bytes' worth of filling each), a row is filled once and only its columns read are visited:
// those columns, else none.
template <typename scalar_t>
std::vector<int64_t> read_columns(const GatherTable<opmath_type<scalar_t>>& cols, int64_t C) {
  std::vector<int64_t> read;
  if (cols.unread_runs > 0 && cols.read * C * int64_t(sizeof(scalar_t)) <= cols.unread_runs * 256) {
    for (int64_t k = 0; k < cols.size(); ++k) {
      if (cols.end[k] > cols.begin[k]) {
        read.push_back(k);
      }
    }
  }
  return read;
}

// The grad_out rows [first, stop) that read input row h: from the plan's row table, else computed.
template <typename scalar_t>
NHWC_INLINE void input_row_range(const GatherPlan<scalar_t>& p, int64_t h, int64_t& first, int64_t& stop) {
  if (p.rows != nullptr) {
    first = p.rows->begin[h];
    stop = p.rows->end[h];
  } else {
    gather_range<opmath_type<scalar_t>>(h, p.g.H_in, p.g.H_out, p.rh, p.g.mode, first, stop);
  }
}

// The grad_out rows that one input row gathers in one pass: each row's start and its weight wy.
template <typename scalar_t, typename opmath_t>
struct RowBlock {
  const scalar_t* go[kRowBlock];
  opmath_t wy[kRowBlock];
  int rows;
};

// One input pixel's range along W: its first pixel's channels start at offset
// `at` of a grad_out row; `count` pixels, weighted wx[0], wx[1], ... (or, when
// wx is null, cols.weight_of(k, begin), ...: not stored).
template <typename opmath_t>
struct ColumnRange {
  int64_t at, count;
  const opmath_t* wx;
  const GatherTable<opmath_t>& cols;
  int64_t k, begin;
  opmath_t weight(int64_t d) const { return wx != nullptr ? wx[d] : cols.weight_of(k, begin + d); }
};

// P vectors of channels of one input pixel: acc (0 at the start of its range
// along H, else what `partial` holds) += wy * line(dh) for the rows of rb,
// line(dh) = 0 + the sum over the pixel's range along W of grad_out row dh;
// then into grad_in (gi) at the end of the range along H, else into `partial`.
// ROWS > 0: rb holds ROWS rows, CNT > 0: a range of CNT pixels (the loops
// unroll); 0: rb.rows, col.count.
// keep > 0 (P = 1): only the first `keep` lanes are a pixel's channels; the loads read past them
// (gather_pixel checks that they stay inside the grad_out row), and only they are stored.
template <int B, int P, int ROWS, int CNT, typename scalar_t, typename opmath_t>
NHWC_INLINE void gather_vectors(scalar_t* gi, opmath_t* partial, bool start, bool last,
                                const RowBlock<scalar_t, opmath_t>& rb, const ColumnRange<opmath_t>& col, int64_t C,
                                int keep = 0) {
  using V = typename Vec<opmath_t, B>::type;
  V acc[P];
  if (start) {
    for (int q = 0; q < P; ++q) {
      acc[q] = V{};
    }
  } else {
    load_block<B, P, opmath_t>(acc, partial);
  }
  const int64_t count = CNT > 0 ? CNT : col.count;
  const int rows = ROWS > 0 ? ROWS : rb.rows;
  for (int r = 0; r < rows; ++r) {
    const scalar_t* go = rb.go[r] + col.at;
    V line[P];
    for (int q = 0; q < P; ++q) {
      line[q] = V{};
    }
    for (int64_t d = 0; d < count; ++d) {
      const opmath_t w = CNT > 0 ? col.wx[d] : col.weight(d);
      V v[P];
      load_block<B, P, opmath_t>(v, go + d * C);
      for (int q = 0; q < P; ++q) {
        line[q] = line[q] + w * v[q];
      }
    }
    for (int q = 0; q < P; ++q) {
      acc[q] = acc[q] + rb.wy[r] * line[q];
    }
  }
  if (keep > 0) {
    if (last && B == 32 && std::is_same_v<scalar_t, Half>) {  // F16C rounds the vector: the first `keep` copied
      scalar_t h[lanes<opmath_t, B>];
      vstore<B, opmath_t>(h, acc[0]);
      for (int i = 0; i < keep; ++i) {
        gi[i] = h[i];
      }
      return;
    }
    opmath_t t[lanes<opmath_t, B>];
    std::memcpy(t, &acc[0], sizeof t);
    for (int i = 0; i < keep; ++i) {
      if (last) {
        gi[i] = round_to<scalar_t>(t[i]);
      } else {
        partial[i] = t[i];
      }
    }
  } else if (last) {
    store_block<B, P, opmath_t>(gi, acc);
  } else {
    store_block<B, P, opmath_t>(partial, acc);
  }
}

// All C channels of one input pixel: gather_vectors over blocks of kVectors
// vectors, then of one vector, then the channels left (1 to 3 of float or
// bfloat16, 1 to 7 of float16 with AVX2) in one more vector whose extra lanes
// are read and dropped, where those reads stay inside the grad_out row
// (row_values: its length), else one channel at a time.
template <int B, int ROWS, int CNT, typename scalar_t, typename opmath_t>
NHWC_INLINE void gather_pixel(scalar_t* gi, opmath_t* partial, bool start, bool last,
                              const RowBlock<scalar_t, opmath_t>& rb, ColumnRange<opmath_t> col, int64_t C,
                              int64_t row_values) {
  constexpr int L = lanes<opmath_t, B>, P = kVectors;
  int64_t c = 0;
  for (; c + P * L <= C; c += P * L, col.at += P * L) {
    gather_vectors<B, P, ROWS, CNT>(gi + c, partial ? partial + c : nullptr, start, last, rb, col, C);
  }
  for (; c + L <= C; c += L, col.at += L) {
    gather_vectors<B, 1, ROWS, CNT>(gi + c, partial ? partial + c : nullptr, start, last, rb, col, C);
  }
  // float16 with AVX2: the channels left go to the 8-lane tail below (F16C converts 8 at a time; a
  // 16-byte vector of it would convert one value at a time)
  constexpr bool kHalfAvx2 = B == 32 && std::is_same_v<scalar_t, Half>;
  if constexpr (B > kBaseBytes && !kHalfAvx2) {  // a half-width vector: the last 4 channels of float (of 12, say) in one
    constexpr int H = lanes<opmath_t, kBaseBytes>;
    for (; c + H <= C; c += H, col.at += H) {
      gather_vectors<kBaseBytes, 1, ROWS, CNT>(gi + c, partial ? partial + c : nullptr, start, last, rb, col, C);
    }
  }
  constexpr int T = kHalfAvx2 ? B : B > kBaseBytes ? kBaseBytes : B;  // 0: no vectors
  if constexpr (T > 0 && std::is_same_v<opmath_t, float> && (kHalfAvx2 || !std::is_same_v<scalar_t, Half>)) {
    // (float and bfloat16: a pixel of one term, as in a downscale, is done sooner one channel at a time)
    if (c < C && (kHalfAvx2 || rb.rows * col.count > 1) &&
        col.at + (col.count - 1) * C + lanes<opmath_t, T> <= row_values) {
      gather_vectors<T, 1, ROWS, CNT>(gi + c, partial ? partial + c : nullptr, start, last, rb, col, C,
                                      static_cast<int>(C - c));
      return;
    }
  }
  for (; c < C; ++c, ++col.at) {
    gather_vectors<0, 1, ROWS, CNT>(gi + c, partial ? partial + c : nullptr, start, last, rb, col, C);
  }
}

// The pixels of one input row (gi_row) for the rows of rb, ROWS as in gather_vectors.
// read: null, or the columns some output reads, when the row is already 0 (see run_rows): the
// others are left as they are.
template <int B, int ROWS, typename scalar_t, typename opmath_t>
NHWC_INLINE void gather_pixels(scalar_t* gi_row, std::vector<opmath_t>& partial, bool start, bool last,
                               const std::vector<int64_t>* read, const RowBlock<scalar_t, opmath_t>& rb,
                               const GatherTable<opmath_t>& cols, int64_t C, int64_t row_values) {
  const int64_t n = read != nullptr ? static_cast<int64_t>(read->size()) : cols.size();
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = read != nullptr ? (*read)[i] : i;
    scalar_t* gi = gi_row + k * C;
    if (cols.end[k] <= cols.begin[k]) {
      // No output reads this column, nor often the next ones (a downscale by 7 skips 6 in 7): the
      // sum of each is 0 + wy * 0 + ... = 0, one fill for the run.
      int64_t run = k + 1;
      while (run < cols.size() && cols.end[run] <= cols.begin[run]) {
        ++run;
      }
      if (last) {
        std::fill(gi, gi_row + run * C, round_to<scalar_t>(opmath_t(0)));
      }
      i = run - 1;
      continue;
    }
    opmath_t* part = partial.empty() ? nullptr : partial.data() + k * C;  // read unless start, written unless last
    const ColumnRange<opmath_t> col{cols.begin[k] * C, cols.end[k] - cols.begin[k],
                                    cols.weight.empty() ? nullptr : cols.weight.data() + cols.offset[k], cols, k,
                                    cols.begin[k]};
    switch (kUnrolled<B, scalar_t> && col.wx != nullptr ? col.count : -1) {
      case 1:
        gather_pixel<B, ROWS, 1>(gi, part, start, last, rb, col, C, row_values);
        break;
      case 2:
        gather_pixel<B, ROWS, 2>(gi, part, start, last, rb, col, C, row_values);
        break;
      case 3:
        gather_pixel<B, ROWS, 3>(gi, part, start, last, rb, col, C, row_values);
        break;
      case 4:
        gather_pixel<B, ROWS, 4>(gi, part, start, last, rb, col, C, row_values);
        break;
      default:
        gather_pixel<B, ROWS, 0>(gi, part, start, last, rb, col, C, row_values);
    }
  }
}

// One grad_out row gathered along W, NC channels of pixels of C (gather_narrow_rows): dst[k * C + c]
// = 0 + the sum over the outputs d that read input column cols.lo + k of wx(d) * go[(d - first) * C
// + c], in increasing d, for c < NC (go holds the row from output column `first` on, from the first
// of the NC channels). K (at least the longest range) and NC fixed at compile time: the loops unroll.
template <int NC, int K, typename src_t, typename opmath_t>
NHWC_INLINE void gather_narrow_line(const GatherTable<opmath_t>& cols, const src_t* __restrict__ go, int64_t first,
                                    int64_t C, opmath_t* __restrict__ dst) {
  for (int64_t k = 0; k < cols.size(); ++k, dst += C) {
    const opmath_t* wx = cols.weight.data() + cols.offset[k];
    const int64_t count = cols.end[k] - cols.begin[k];
    const src_t* src = count > 0 ? go + (cols.begin[k] - first) * C : go;  // an empty range reads nothing
    opmath_t sum[NC];
    for (int c = 0; c < NC; ++c) {
      sum[c] = opmath_t(0);
    }
#pragma GCC unroll 8
    for (int d = 0; d < K; ++d) {
      if (d < count) {
        for (int c = 0; c < NC; ++c) {
          sum[c] += wx[d] * load<opmath_t>(src[d * C + c]);
        }
      }
    }
    for (int c = 0; c < NC; ++c) {
      dst[c] = sum[c];
    }
  }
}

// gather_narrow_line for any channel count C (a loop over the channels, which the compiler
// vectorises), for gather_narrow_rows on 16 channels or more: the same terms in the same order
// per channel.
template <typename src_t, typename opmath_t>
NHWC_INLINE void gather_wide_line(const GatherTable<opmath_t>& cols, const src_t* __restrict__ go, int64_t first,
                                  int64_t C, opmath_t* __restrict__ dst) {
  for (int64_t k = 0; k < cols.size(); ++k, dst += C) {
    const opmath_t* wx = cols.weight.data() + cols.offset[k];
    const int64_t count = cols.end[k] - cols.begin[k];
    for (int64_t c = 0; c < C; ++c) {
      dst[c] = opmath_t(0);
    }
    if (count <= 0) continue;
    const src_t* src = go + (cols.begin[k] - first) * C;
    for (int64_t d = 0; d < count; ++d, src += C) {
      const opmath_t w = wx[d];
      for (int64_t c = 0; c < C; ++c) {
        dst[c] += w * load<opmath_t>(src[c]);
      }
    }
  }
}

// f(NC, K) with std::integral_constant arguments for NC = C (1 to 8) and K = the longest range
// rounded up to 1, 2, 4 or 8.
template <typename F>
NHWC_INLINE void with_narrow_line(int64_t C, int64_t longest, F&& f) {
  auto with_k = [&](auto c_tag) {
    if (longest <= 1) return f(c_tag, std::integral_constant<int, 1>{});
    if (longest <= 2) return f(c_tag, std::integral_constant<int, 2>{});
    if (longest <= 4) return f(c_tag, std::integral_constant<int, 4>{});
    return f(c_tag, std::integral_constant<int, 8>{});
  };
  switch (C) {
    case 1: return with_k(std::integral_constant<int, 1>{});
    case 2: return with_k(std::integral_constant<int, 2>{});
    case 3: return with_k(std::integral_constant<int, 3>{});
    case 4: return with_k(std::integral_constant<int, 4>{});
    case 5: return with_k(std::integral_constant<int, 5>{});
    case 6: return with_k(std::integral_constant<int, 6>{});
    case 7: return with_k(std::integral_constant<int, 7>{});
    default: return with_k(std::integral_constant<int, 8>{});
  }
}

// The gather's run_rows for pixels of fewer than 16 channels (C <= kNarrowGather), where a pixel
// at a time fills a few vectors at most and its bookkeeping costs more than its sums, and for
// 16 channels or more where W grows more than 3 times (gather_chunk says why): as the
// NCHW gather, each grad_out row of an input row's range is gathered along W into a line of
// width * C values (the next input rows read it too: a few lines are kept, as the NCHW kernel's
// LineCache), and the input row sums its lines along H in one contiguous loop. Per channel, the
// NCHW kernel's terms in its order: the same bits.
template <typename scalar_t>
NHWC_INLINE void gather_narrow_rows(const GatherPlan<scalar_t>& p, int64_t begin, int64_t end) {
  using opmath_t = opmath_type<scalar_t>;
  const ResizeGeometry& g = p.g;
  const GatherTable<opmath_t>& cols = p.cols;
  const int64_t C = g.channels, width = cols.size(), length = width * C;
  int64_t read_lo = g.W_out, read_hi = 0;  // the grad_out columns the chunk reads
  for (int64_t k = 0; k < width; ++k) {
    if (cols.begin[k] < cols.end[k]) {
      read_lo = std::min(read_lo, cols.begin[k]);
      read_hi = std::max(read_hi, cols.end[k]);
    }
  }
  read_hi = std::max(read_hi, read_lo);
  LineCache<opmath_t> cache(p.slots, length);
  std::vector<opmath_t> acc(length);
  // float16: the columns read of a grad_out row widened, and an input row rounded, in bulk (widen,
  // narrow: F16C where the CPU has it); bfloat16's conversions are a shift: done in place
  constexpr bool bulk = std::is_same_v<scalar_t, Half>;
  std::vector<float> wide(bulk ? (read_hi - read_lo) * C : 0);
  auto gather = [&](opmath_t* line, const auto* go) {  // go: the grad_out row from column read_lo
    if (C > kNarrowGather) {
      return gather_wide_line(cols, go, read_lo, C, line);
    }
    for (int64_t c = 0; c < C; c += kLineChannels) {  // kLineChannels at a time, then the rest
      with_narrow_line(std::min<int64_t>(kLineChannels, C - c), cols.longest, [&](auto c_tag, auto k_tag) {
        gather_narrow_line<decltype(c_tag)::value, decltype(k_tag)::value>(cols, go + c, read_lo, C, line + c);
      });
    }
  };
  for (int64_t row = begin; row < end; ++row) {
    const int64_t n = row / g.H_in, h = row % g.H_in;
    scalar_t* gi_row = p.grad_in + (row * g.W_in + cols.lo) * C;
    int64_t first, stop;  // the grad_out rows that read input row h
    input_row_range(p, h, first, stop);
    if (first >= stop) {
      std::fill(gi_row, gi_row + length, round_to<scalar_t>(opmath_t(0)));
      continue;
    }
    for (int64_t dh = first; dh < stop; ++dh) {
      const opmath_t* line = cache.get(n * g.H_out + dh, dh % p.slots, [&](opmath_t* dst) {
        const scalar_t* go = p.grad_out + ((n * g.H_out + dh) * g.W_out + read_lo) * C;
        if constexpr (bulk) {
          widen(go, wide.data(), (read_hi - read_lo) * C);
          gather(dst, wide.data());
        } else {
          gather(dst, go);
        }
      });
      const opmath_t wy = p.rows != nullptr ? p.rows->weight_of(h, dh)
                                            : tap_weight<opmath_t>(source_taps<opmath_t>(dh, g.H_in, p.rh, g.mode), h);
      if (dh == first) {  // 0 + the first term, as the NCHW kernel adds to zeros
        for (int64_t i = 0; i < length; ++i) {
          acc[i] = opmath_t(0) + wy * line[i];
        }
      } else {
        for (int64_t i = 0; i < length; ++i) {
          acc[i] = acc[i] + wy * line[i];
        }
      }
    }
    if constexpr (bulk) {
      narrow(acc.data(), gi_row, length);
    } else {
      for (int64_t i = 0; i < length; ++i) {
        gi_row[i] = round_to<scalar_t>(acc[i]);
      }
    }
  }
}

// The input rows [begin, end) (row = n * H_in + h), one task.
template <int B, typename scalar_t>
NHWC_INLINE void run_rows(const GatherPlan<scalar_t>& p, int64_t begin, int64_t end) {
  using opmath_t = opmath_type<scalar_t>;
  const ResizeGeometry& g = p.g;
  const GatherTable<opmath_t>& cols = p.cols;
  const int64_t C = g.channels, width = cols.size(), length = width * C;
  if (p.slots > 0) {
    return gather_narrow_rows(p, begin, end);
  }
  std::vector<opmath_t> partial;  // a row's sums between passes, when its range is longer than kRowBlock
  const std::vector<int64_t>* read = p.read.empty() ? nullptr : &p.read;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t n = row / g.H_in, h = row % g.H_in;
    scalar_t* gi_row = p.grad_in + (row * g.W_in + cols.lo) * C;
    int64_t first, stop;  // the grad_out rows that read input row h
    input_row_range(p, h, first, stop);
    if (first >= stop) {
      std::fill(gi_row, gi_row + length, round_to<scalar_t>(opmath_t(0)));
      continue;
    }
    for (int64_t d0 = first; d0 < stop; d0 += kRowBlock) {
      RowBlock<scalar_t, opmath_t> rb;
      rb.rows = static_cast<int>(std::min<int64_t>(kRowBlock, stop - d0));
      for (int r = 0; r < rb.rows; ++r) {
        rb.go[r] = p.grad_out + (n * g.H_out + d0 + r) * g.W_out * C;
        rb.wy[r] = p.rows != nullptr ? p.rows->weight_of(h, d0 + r)
                                     : tap_weight<opmath_t>(source_taps<opmath_t>(d0 + r, g.H_in, p.rh, g.mode), h);
      }
      const bool start = d0 == first, last = stop - d0 <= kRowBlock;
      if (!last && partial.empty()) {
        partial.resize(length + kTailLanes);  // + the lanes a pixel's last vector reads past it
      }
      if (read != nullptr && start) {
        std::fill(gi_row, gi_row + length, round_to<scalar_t>(opmath_t(0)));
      }
      switch (kUnrolled<B, scalar_t> ? rb.rows : 0) {
        case 1:
          gather_pixels<B, 1>(gi_row, partial, start, last, read, rb, cols, C, g.W_out * C);
          break;
        default:
          gather_pixels<B, 0>(gi_row, partial, start, last, read, rb, cols, C, g.W_out * C);
      }
    }
  }
}

// Input columns [cols.lo, cols.hi) of every input row.
template <typename scalar_t>
static void gather_chunk(const scalar_t* grad_out, scalar_t* grad_in, const ResizeGeometry& g,
                         const GatherTable<opmath_type<scalar_t>>& cols) {
  using opmath_t = opmath_type<scalar_t>;
  const opmath_t rh = axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h);
  const std::optional<GatherTable<opmath_t>> rows = row_table(g, rh);  // when H_in fits a chunk
  // Lines (gather_narrow_rows) for 2 to kNarrowGather channels, ranges along W of at most 8 with
  // their weights stored, and W not upsampled (float16: any W). Where W grows in float, bfloat16
  // and float64, a pixel's few ranges along W are long and its vector path is as fast. Where W
  // shrinks, a narrow pixel's bookkeeping costs more than its one or two terms; a line takes
  // kLineChannels at a time. Lines for wider pixels too where W grows more than about 3 times
  // (ranges along W of 7 outputs or more): a pixel at a time reads each grad_out pixel once per
  // input pixel that sums it (four), a line reads it once; at x3 and below the two are level.
  const bool narrow_rows = !cols.weight.empty() &&
                           ((g.channels > 1 && g.channels <= kNarrowGather && cols.longest <= 8 &&
                             (std::is_same_v<scalar_t, Half> || g.W_out <= g.W_in)) ||
                            (g.channels > kNarrowGather && cols.longest > 6));
  const GatherPlan<scalar_t> plan{grad_out, grad_in, g, cols, rh, rows ? &*rows : nullptr,
                                  read_columns<scalar_t>(cols, g.channels),
                                  narrow_rows ? longest_range<opmath_t>(g.H_in, g.H_out, rh, g.mode, kLineSlots) : 0};
  const int64_t grain = gather_grain(g, cols.size() * g.channels);
  torch::stable::parallel_for(0, g.planes / g.channels * g.H_in, grain,
                              [&](int64_t begin, int64_t end) { task(plan, begin, end); });
}

// ---------------------------------------------------------------------------
// float16 and bfloat16 rows for the NCHW kernels (widen, narrow, in upsample_cpu.h): n values
// converted, a vector at a time through vload and vstore (F16C and AVX2 in the AVX2 function),
// the rest one at a time.
template <typename From, typename To>
struct ConvertPlan {
  const From* src;
  To* dst;
};

template <int B, typename From, typename To>
NHWC_INLINE void run_rows(const ConvertPlan<From, To>& p, int64_t begin, int64_t end) {
  constexpr int L = lanes<float, B>;
  int64_t i = begin;
  if constexpr (B > 0) {
    for (; i + L <= end; i += L) {
      typename Vec<float, B>::type v;
      vload<B, float>(v, p.src + i);
      vstore<B, float>(p.dst + i, v);
    }
  }
  for (; i < end; ++i) {
    float v;
    vload<0, float>(v, p.src + i);
    vstore<0, float>(p.dst + i, v);
  }
}

}  // namespace

void widen(const Half* src, float* dst, int64_t n) { task(ConvertPlan<Half, float>{src, dst}, 0, n); }
void widen(const BFloat16* src, float* dst, int64_t n) { task(ConvertPlan<BFloat16, float>{src, dst}, 0, n); }
void narrow(const float* src, Half* dst, int64_t n) { task(ConvertPlan<float, Half>{src, dst}, 0, n); }
void narrow(const float* src, BFloat16* dst, int64_t n) { task(ConvertPlan<float, BFloat16>{src, dst}, 0, n); }

template <typename scalar_t>
void forward_nhwc(const scalar_t* x, scalar_t* out, const ResizeGeometry& g) {
  const int64_t chunk = chunk_pixels(g.channels);
  for (int64_t w0 = 0; w0 < g.W_out; w0 += chunk) {
    forward_chunk<scalar_t>(x, out, g, w0, std::min(g.W_out, w0 + chunk));
  }
}

template <typename scalar_t>
void backward_nhwc(const scalar_t* grad_out, scalar_t* grad_in, const ResizeGeometry& g) {
  using opmath_t = opmath_type<scalar_t>;
  const opmath_t rw = axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w);
  const int64_t chunk = chunk_pixels(g.channels);
  for (int64_t w0 = 0; w0 < g.W_in; w0 += chunk) {
    const GatherTable<opmath_t> cols(g.W_in, g.W_out, rw, g.mode, w0, std::min(g.W_in, w0 + chunk));
    gather_chunk<scalar_t>(grad_out, grad_in, g, cols);
  }
}

#define INSTANTIATE(T)                                                        \
  template void forward_nhwc<T>(const T* x, T* out, const ResizeGeometry& g); \
  template void backward_nhwc<T>(const T* grad_out, T* grad_in, const ResizeGeometry& g);
INSTANTIATE(float)
INSTANTIATE(double)
INSTANTIATE(Half)
INSTANTIATE(BFloat16)
#undef INSTANTIATE
