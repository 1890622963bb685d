// Seeded bug 3: a __syncthreads() that not every thread reaches.
// The tool that finds it on a GPU: compute-sanitizer --tool synccheck.
//
// row_dot: out[n] = sum over f of g[n, f] * x[n, f], one block of 256 threads per row n:
// the reduction of chapter 04's points gradient, in its two steps: warp shuffles, then
// shared memory across the 8 warps.
//
// The bug: the barrier sits inside `if (lane == 0)`, so only one thread per warp reaches
// it; the other 31 skip it (and leave the kernel). A barrier must be reached by every
// thread of the block, or by none (CUDA C++ Programming Guide, __syncthreads()): here the
// program may hang, or pass the barrier with too few threads. synccheck reports it.
// The fix, compiled with -DFIXED: the barrier after the branch, where every thread goes.
//
//   nvcc -lineinfo -o divergent_barrier divergent_barrier.cu && compute-sanitizer --tool synccheck ./divergent_barrier
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr int kThreads = 256;  // 8 warps

__global__ void row_dot(const float* __restrict__ g, const float* __restrict__ x, float* __restrict__ out, int F) {
  const int n = blockIdx.x;
  float sum = 0.0f;
  for (int f = threadIdx.x; f < F; f += blockDim.x) {
    sum += g[n * F + f] * x[n * F + f];
  }
  // 1. Warp: lane 0 ends with the sum of its warp's 32 values.
  for (int offset = 16; offset > 0; offset /= 2) {
    sum += __shfl_down_sync(0xffffffffu, sum, offset);
  }
  // 2. Block: lane 0 of each warp leaves its sum in shared memory; thread 0 adds them up.
  __shared__ float partial[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#ifdef FIXED
  if (lane == 0) {
    partial[warp] = sum;
  }
  __syncthreads();
#else
  if (lane == 0) {
    partial[warp] = sum;
    __syncthreads();  // BUG: only lane 0 of each warp gets here
  }
#endif
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
