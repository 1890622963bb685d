#pragma once
// Chapter 06: the column taps of an exact xF upsampling along W in half_pixel
// (F = 2 or 4), the one rule every exact-upsampling gather reads.
#include "plan.cuh"

namespace ch06 {

// Output column d samples s = (d + 1/2) / F - 1/2, so input column w is read by
// the 2F outputs F w - F/2 + m, m = 0 .. 2F - 1, with the weights
// (2 min(m, 2F - 1 - m) + 1) / 2F: x2 1/4, 3/4, 3/4, 1/4; x4 1/8, 3/8, 5/8, 7/8,
// 7/8, 5/8, 3/8, 1/8. The plan's weights, exactly (sums of two float taps that are
// multiples of 1/2F). At the edges the plan clamps:
//   column 0 (at_first): outputs 0 .. F/2 - 1 sample s < 0, clamped to 0, and read
//     it with weight 1 (m = F/2 .. F - 1); the taps m < F/2 do not exist;
//   column 1 (at_second): those outputs also read it, with weight 0 (the plan's
//     second tap, l = 0): the taps m = -F/2 .. -1, read only here;
//   the last column (at_last): outputs with s past it read it with both taps,
//     weight 1 (m = F .. F + F/2 - 1); the taps m >= F + F/2 do not exist.
// A tap that does not exist has reads false and the weight 0. A weight-0 tap that
// does exist stays in the sum, as in the plan: 0 * inf is NaN, as in PyTorch.
template <typename T>
struct ColumnTap {
  bool reads;
  T weight;
};

template <int F, typename T>
__device__ __forceinline__ ColumnTap<T> times_tap(int m, bool at_first, bool at_second, bool at_last) {
  const int from_end = 2 * F - 1 - m;
  const T weight = T(2 * (m < from_end ? m : from_end) + 1) / T(2 * F);
  if (m < 0) {
    return {at_second, T(0)};
  }
  if (m < F / 2) {
    return {!at_first, at_first ? T(0) : weight};
  }
  if (m < F) {
    return {true, at_first ? T(1) : weight};
  }
  if (m < F + F / 2) {
    return {true, at_last ? T(1) : weight};
  }
  return {!at_last, at_last ? T(0) : weight};
}

}  // namespace ch06
