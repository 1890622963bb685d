#pragma once
// Chapter 06: the general gather's building blocks (rungs GatherPlanes,
// GatherColumnPacks and GatherNhwc of ladder.h): the plain gather's sum
// (gather_plain.cu) with the column half looked up once per thread, and many
// planes (or channels) summed at once.
#include "plan.cuh"

namespace ch06 {

// The column half of the gather. Thread w reads the same grad_out columns
// [cols.begin[w], cols.end[w]) with the same weights in every row and plane, so it
// looks them up once, into registers: a ColumnWindow of K columns from `first`,
// `count` of them real, weight[k] the weight with which column first + k reads
// input column w (0 past count). K is a compile-time 2, 4 or 8 (the host picks
// the smallest that holds an interior window, 2 / rw rounded up); a longer window
// (a clamped edge, an odd scale) is summed K columns at a time. With column packs
// (V > 1) `first` is rounded down to a multiple of V, so that the window's columns
// can be loaded V at a time; the columns before the real first one are not the
// thread's: they are first + k for lo <= k < count. Without packs lo is 0.
template <typename T, int K>
struct ColumnWindow {
  int64_t first;
  int lo, count;
  T weight[K];
};

template <typename T, int K, int V>
__device__ __forceinline__ ColumnWindow<T, K> column_window(const AxisPlan<T>& cols, int64_t w, int64_t first) {
  ColumnWindow<T, K> win;
  win.first = first;
  const int64_t skip = cols.begin[w] - first;
  win.lo = V == 1 || skip < 0 ? 0 : static_cast<int>(skip);  // a compile-time 0 without packs
  const int64_t left = cols.end[w] - first;
  win.count = static_cast<int>(left < K ? left : K);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const bool real = k >= win.lo && k < win.count;
    const int64_t d = first + (real ? k : win.lo);
    win.weight[k] = real ? plan_weight(cols, d, w) : T(0);
  }
  return win;
}

// The values of V neighbouring grad_out columns in N planes, from column p on:
// v[j][k] is column j of plane k. Planes are plane_out values apart (NCHW), or,
// with kPack, N neighbouring channels loaded as one 16-byte pack (channels-last,
// C a multiple of N, aligned; V is 1 there). V > 1 (column packs, NCHW float32):
// the V columns of each plane as one 16-byte load; p sits on a 16-byte boundary.
template <int N, int V, bool kPack, typename scalar_t, typename T>
__device__ __forceinline__ void load_columns(const scalar_t* __restrict__ p, int64_t plane_out, T (&v)[V][N]) {
  if constexpr (kPack) {
    static_assert(V == 1, "channel packs take one column at a time");
    const Pack<scalar_t, N> r = load_pack<scalar_t, N>(p);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      v[0][k] = static_cast<T>(r.v[k]);
    }
  } else if constexpr (V == 1) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      v[0][k] = static_cast<T>(p[k * plane_out]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const Pack<scalar_t, V> r = load_pack<scalar_t, V>(p + k * plane_out);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        v[j][k] = static_cast<T>(r.v[j]);
      }
    }
  }
}

// Adds to acc[p] (plane p) what the window's columns give input pixel (h, w)
// through every grad_out row that reads input row h: the plain gather's sum for
// N planes at once (in its order when the window fits in K columns). grad_out points at the first plane (NCHW:
// plane p is p * plane_out further; channels-last: the planes are neighbouring
// channels, plane_out = 1). Within a plane, neighbouring pixels are `step` values
// apart (1 in NCHW, C in channels-last) and rows step * row_length. Columns are
// loaded V at a time; V divides K, and with V > 1, win.first and every row start
// sit on a pack boundary. A column outside [lo, count) is neither loaded nor added
// (past count it may lie past the tensor's end; 0 * inf would be NaN).
template <int N, int K, int V, bool kPack, typename scalar_t, typename T>
__device__ __forceinline__ void gather_planes(const scalar_t* __restrict__ grad_out, int64_t plane_out, int64_t step,
                                              int64_t h, const AxisPlan<T>& rows, int64_t row_length,
                                              const ColumnWindow<T, K>& win, T (&acc)[N]) {
  for (int64_t dh = rows.begin[h]; dh < rows.end[h]; ++dh) {
    const T wy = plan_weight(rows, dh, h);
    const scalar_t* g_row = grad_out + (dh * row_length + win.first) * step;
#pragma unroll
    for (int c = 0; c < K; c += V) {
      if (c < win.count) {
        T v[V][N];
        load_columns<N, V, kPack>(g_row + c * step, plane_out, v);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const int k = c + j;
          if (k >= win.lo && k < win.count) {
            const T weight = wy * win.weight[k];
#pragma unroll
            for (int p = 0; p < N; ++p) {
              acc[p] += weight * v[j][p];
            }
          }
        }
      }
    }
  }
}

// grad_in[h, w] of N planes (grad_in points at the first; the same value of plane
// k is k * plane_in further): the whole window, K columns at a time, in T, and
// one rounding at the store. This thread is the only one that writes these N
// values. `first` holds the window's first K columns.
template <int N, int K, int V, bool kPack, typename scalar_t, typename T>
__device__ __forceinline__ void gather_pixel(const scalar_t* __restrict__ grad_out, int64_t plane_out,
                                             scalar_t* __restrict__ grad_in, int64_t plane_in, int64_t step, int64_t h,
                                             int64_t w, const AxisPlan<T>& rows, const AxisPlan<T>& cols,
                                             const ColumnWindow<T, K>& first) {
  static_assert(K % V == 0, "a window holds whole packs");
  T acc[N];
#pragma unroll
  for (int k = 0; k < N; ++k) {
    acc[k] = 0;
  }
  gather_planes<N, K, V, kPack>(grad_out, plane_out, step, h, rows, cols.out, first, acc);
  for (int64_t d = first.first + K; d < cols.end[w]; d += K) {  // windows longer than K
    gather_planes<N, K, V, kPack>(grad_out, plane_out, step, h, rows, cols.out, column_window<T, K, V>(cols, w, d),
                                  acc);
  }
  // One rounding, at the end, and a streaming store. With channel packs the N
  // values are neighbours: one 16-byte store.
  if constexpr (kPack) {
    store_rounded_pack<scalar_t, N>(grad_in, acc);
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      store_streaming(grad_in + k * plane_in, static_cast<scalar_t>(acc[k]));
    }
  }
}

}  // namespace ch06
