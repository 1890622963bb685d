// The host half of every seeded-bug program in this folder: six rows of 200 features (F not a
// multiple of 32, fewer features than threads), copied to the GPU, reduced by the program's
// row_dot through its launch_row_dot, and checked against a double-precision sum; the exit
// status says whether any row came out wrong. A program includes this after its kernel (its
// kernel's line numbers are what the reports quote) and then defines launch_row_dot.
#pragma once
// (cuda_runtime.h: the program includes it, and the GPU-free judge stands in for it.)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                      \
  do {                                                                                   \
    const cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));   \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

// The program's launch of row_dot on N rows of F features (device pointers).
void launch_row_dot(const float* g, const float* x, float* out, int N, int F);

int main() {
  const int N = 6, F = 200;  // F: not a multiple of 32, fewer features than threads
  std::vector<float> g(N * F), x(N * F), out(N);
  for (int i = 0; i < N * F; ++i) {
    g[i] = 0.25f * (i * 7 % 11) - 1.0f;
    x[i] = 0.5f * (i * 5 % 13) - 3.0f;
  }
  float *d_g, *d_x, *d_out;
  CHECK(cudaMalloc(&d_g, N * F * sizeof(float)));
  CHECK(cudaMalloc(&d_x, N * F * sizeof(float)));
  CHECK(cudaMalloc(&d_out, N * sizeof(float)));
  CHECK(cudaMemcpy(d_g, g.data(), N * F * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_x, x.data(), N * F * sizeof(float), cudaMemcpyHostToDevice));
  launch_row_dot(d_g, d_x, d_out, N, F);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(out.data(), d_out, N * sizeof(float), cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int n = 0; n < N; ++n) {
    double want = 0;
    for (int f = 0; f < F; ++f) {
      want += double(g[n * F + f]) * x[n * F + f];
    }
    if (!(std::fabs(out[n] - want) <= 1e-4 * (1 + std::fabs(want)))) {
      std::printf("row_dot: out[%d] = %g, expected %g\n", n, out[n], want);
      ++wrong;
    }
  }
  std::printf("row_dot: %d of %d rows wrong\n", wrong, N);
  CHECK(cudaFree(d_g));
  CHECK(cudaFree(d_x));
  CHECK(cudaFree(d_out));
  return wrong ? 1 : 0;
}
