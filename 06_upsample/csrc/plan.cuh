#pragma once
// Chapter 06: the gather's plan, and the row rules of the exact-ratio gathers.
//
// Which outputs read input index i, and with which weights, depends only on the
// axis, not on the plane or on the other axis. So plan_kernel first builds two
// small tables per axis (taps per output index, [begin, end) per input index),
// and the gather kernels look them up: no search per thread. A call with the
// sizes of a recent one reuses its plan (plan.cu keeps the last few).
#include "cuda_common.cuh"

namespace ch06 {

template <typename T>
struct AxisPlan {
  int64_t in, out;
  T ratio;
  int64_t* i0;     // [out] first tap of each output index
  int64_t* i1;     // [out] second tap
  T* l;            // [out] weight of the second tap
  int64_t* begin;  // [in]  first output index that reads each input index
  int64_t* end;    // [in]  one past the last
};

// The plans of both axes (the columns' only when `cols`), built on c's stream
// into tensors this object keeps alive (and the cache in plan.cu, for the next
// call with the same sizes on that stream). Without a plan (`build` false) the
// AxisPlans hold the sizes and ratios alone.
template <typename T>
struct Plan {
  AxisPlan<T> rows, cols;
  std::optional<torch::stable::Tensor> index, lambda;
};

template <typename scalar_t>
Plan<opmath_type<scalar_t>> make_plan(const Call<scalar_t>& c, bool build, bool cols);

// The taps of grad_out row dh, as the plan holds them, as a weight for input row h.
template <typename T>
__device__ __forceinline__ T plan_weight(const AxisPlan<T>& a, int64_t d, int64_t i) {
  return tap_weight<T>(Taps<T>{a.i0[d], a.i1[d], a.l[d]}, i);
}

// The row half of the exact-ratio gathers: which grad_out rows read input row h,
// [begin, end), and with which weight.
//   kRows = Span::Taps: looked up in the row plan, as the general gather does.
//   Span::Double (H_out = 2 H_in, half_pixel) and Span::Halve (H_in = 2 H_out,
//   not align_corners): worked out in place. The range has a closed form (x2:
//   outputs 2h - 1 .. 2h + 2, clamped, and row 1 is also read by output 0 with
//   weight 0; x0.5: output h / 2 alone), and the weight comes from the functions
//   the plan kernel calls (source_taps, tap_weight), so the bits are the plan's.
template <Span kRows, typename T>
__device__ __forceinline__ void row_range(const AxisPlan<T>& rows, int64_t h, int64_t& begin, int64_t& end) {
  if constexpr (kRows == Span::Taps) {
    begin = rows.begin[h];
    end = rows.end[h];
  } else if constexpr (kRows == Span::Double) {
    begin = h <= 1 ? 0 : 2 * h - 1;
    end = 2 * h + 3 < rows.out ? 2 * h + 3 : rows.out;
  } else {
    begin = h / 2;
    end = h / 2 + 1;
  }
}

template <Span kRows, typename T>
__device__ __forceinline__ T row_weight(const AxisPlan<T>& rows, Mode mode, int64_t dh, int64_t h) {
  if constexpr (kRows == Span::Taps) {
    return plan_weight(rows, dh, h);
  } else if constexpr (kRows == Span::Double) {  // s = dh / 2 - 1/4, clamped to 0 for output 0
    const int64_t i0 = dh == 0 ? 0 : (dh - 1) / 2;
    const T l = dh == 0 ? T(0) : dh % 2 == 1 ? T(0.25) : T(0.75);
    return tap_weight<T>(Taps<T>{i0, i0 + 1 < rows.in ? i0 + 1 : rows.in - 1, l}, h);
  } else {  // s = 2 dh + 1/2 (half_pixel) or 2 dh (tf_legacy)
    return tap_weight<T>(Taps<T>{2 * dh, 2 * dh + 1, mode == Mode::HalfPixel ? T(0.5) : T(0)}, h);
  }
}

// The ranges of a thread's R input rows h0 .. h0 + R - 1. Past the last input row:
// an empty range after the last real one, so that [begin[0], end[R - 1]) covers
// every grad_out row the thread reads.
template <Span kRows, int R, typename T>
__device__ __forceinline__ void row_ranges(const AxisPlan<T>& rows, int64_t h0, int64_t (&begin)[R],
                                           int64_t (&end)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r == 0 || h0 + r < rows.in) {
      row_range<kRows>(rows, h0 + r, begin[r], end[r]);
    } else {
      begin[r] = end[r] = end[r - 1];
    }
  }
}

// The exact gathers' stores: the V values (16 bytes, or a multiple) of each of the
// thread's R rows (`row` values apart) that exist (`rows_left` of them from dst's).
template <typename scalar_t, int R, int V, typename T>
__device__ __forceinline__ void store_rows(scalar_t* dst, int64_t row, int64_t rows_left, const T (&acc)[R][V]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < rows_left) {
      store_rounded_pack<scalar_t, V>(dst + r * row, acc[r]);
    }
  }
}

}  // namespace ch06
