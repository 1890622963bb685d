// Seeded bug 1: a read past the end of an array.
// The tool that finds it on a GPU: compute-sanitizer --tool memcheck.
//
// row_dot: out[n] = sum over f of g[n, f] * x[n, f], one block of 256 threads per row n:
// the reduction of chapter 04's points gradient (a sum over f), in its two steps: warp
// shuffles, then shared memory across the 8 warps.
//
// The bug: the loop over f runs while f <= F, one step too far. Thread F % 256 reads
// g[n, F] and x[n, F]: row n + 1's first elements (a wrong sum, without a sound) and, for
// the last row, one element past the end of each allocation, which only memcheck (or the
// GPU-free judge's guard pages) sees. The fix, compiled with -DFIXED: f < F.
//
//   nvcc -lineinfo -o oob_read oob_read.cu && compute-sanitizer --tool memcheck ./oob_read
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr int kThreads = 256;  // 8 warps

__global__ void row_dot(const float* __restrict__ g, const float* __restrict__ x, float* __restrict__ out, int F) {
  const int n = blockIdx.x;
  float sum = 0.0f;
#ifdef FIXED
  for (int f = threadIdx.x; f < F; f += blockDim.x) {
#else
  for (int f = threadIdx.x; f <= F; f += blockDim.x) {  // BUG: f == F is past the row
#endif
    sum += g[n * F + f] * x[n * F + f];
  }
  // 1. Warp: lane 0 ends with the sum of its warp's 32 values.
  for (int offset = 16; offset > 0; offset /= 2) {
    sum += __shfl_down_sync(0xffffffffu, sum, offset);
  }
  // 2. Block: lane 0 of each warp leaves its sum in shared memory; thread 0 adds them up.
  __shared__ float partial[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    partial[warp] = sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < blockDim.x / 32; ++w) {
      total += partial[w];
    }
    out[n] = total;
  }
}

#include "row_dot_main.cuh"  // CHECK and main(): six rows, checked against a double-precision sum

void launch_row_dot(const float* g, const float* x, float* out, int N, int F) {
  row_dot<<<N, kThreads>>>(g, x, out, F);
}
