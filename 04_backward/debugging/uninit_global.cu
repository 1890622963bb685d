// Seeded bug 5 (the global-memory cousin of bug 4): a sum added to memory nobody zeroed.
// The tool that finds it on a GPU: compute-sanitizer --tool initcheck.
//
// row_dot: out[n] = sum over f of g[n, f] * x[n, f], one block of 256 threads per row n:
// warp shuffles, then one atomicAdd per warp into out[n] (chapter 04's AtomicPerWarp).
//
// The bug: out is cudaMalloc'ed and never set to zero (in PyTorch: torch.empty where the
// kernel needs torch.zeros), so the atomics add to whatever the allocation held: often
// zeros on a fresh allocation, and then the program even passes. initcheck reports
// every read of global memory that nothing wrote. The fix, compiled with -DFIXED: a
// cudaMemset to zero before the launch.
//
//   nvcc -lineinfo -o uninit_global uninit_global.cu && compute-sanitizer --tool initcheck ./uninit_global
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
  // 2. Block: lane 0 of each warp adds its sum into out[n] (one atomic per warp, no shared
  //    memory: chapter 04's AtomicPerWarp). out[n] must hold 0 before the launch.
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&out[n], sum);
  }
}

#include "row_dot_main.cuh"  // CHECK and main(): six rows, checked against a double-precision sum

void launch_row_dot(const float* g, const float* x, float* out, int N, int F) {
#ifdef FIXED
  CHECK(cudaMemset(out, 0, N * sizeof(float)));  // the sums start from zero
#endif
  // BUG (without FIXED): out holds whatever cudaMalloc left there; the atomics add to it.
  row_dot<<<N, kThreads>>>(g, x, out, F);
}
