#pragma once
// Chapter 06: the row walk that the forward kernels of both layouts share.
#include "cuda_common.cuh"

namespace ch06 {

// Output rows per thread: a thread walks down kRowsOf<scalar_t> consecutive
// output rows, so each input row it samples serves every output row that
// blends it (two at x2, four at x4). 2-byte types take twice as many: per byte
// moved, their threads do twice the work of a float thread. A launch that would
// leave SMs idle gives each thread fewer (rows_to_fill).
template <typename scalar_t>
constexpr int kRowsOf = sizeof(scalar_t) == 2 ? 16 : 8;

// The walk down a thread's output rows [h_begin, h_end). The thread has V outputs
// per row, already placed along W (its column taps): sample(row, dst) fills dst
// with input row `row` sampled at them; store(h, r) writes output row h. It keeps
// the two input rows it is blending, already sampled along W (`top`, `bottom`), in
// registers: when the next output row reads the same input rows it only blends
// again, and when it moves down by one input row the old bottom becomes the new top.
template <typename scalar_t, int V, typename Sample, typename Store>
__device__ __forceinline__ void walk_rows(int64_t h_begin, int64_t h_end, int64_t H_in, opmath_type<scalar_t> rh,
                                          Mode mode, const Sample& sample, const Store& store) {
  using T = opmath_type<scalar_t>;
  T top[V], bottom[V];
  int64_t row0 = -1, row1 = -1;  // the input rows in top and bottom (none yet)
  for (int64_t h = h_begin; h < h_end; ++h) {
    const Taps<T> yt = source_taps<T>(h, H_in, rh, mode);
    // In NCHW, h is the same for the whole warp, so every branch below is taken
    // by all 32 threads or by none: no divergence.
    if (yt.i0 != row0 || yt.i1 != row1) {
      if (yt.i0 == row1) {  // moved down one input row: reuse, don't reload
#pragma unroll
        for (int j = 0; j < V; ++j) {
          top[j] = bottom[j];
        }
      } else {
        sample(yt.i0, top);
      }
      sample(yt.i1, bottom);
      row0 = yt.i0;
      row1 = yt.i1;
    }
    Pack<scalar_t, V> r;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      // the blend along H, on the cached row samples
      r.v[j] = static_cast<scalar_t>((T(1) - yt.l) * top[j] + yt.l * bottom[j]);
    }
    store(h, r);
  }
}

}  // namespace ch06
