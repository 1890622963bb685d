// Chapter 02: the CPU kernel. It mirrors the CUDA kernel: the work is split
// over cubes n, and for each cube the inner loop over f reads and writes
// consecutive memory (which the compiler vectorises).
#include "trilinear.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

// feats (N, 8, F), points (N, 3) and out (N, F) are contiguous: feats[n][k][f]
// sits at (n * 8 + k) * F + f, points[n][i] at 3 * n + i, out[n][f] at n * F + f.
template <typename scalar_t>
static void forward_cpu_kernel(const scalar_t* feats, const scalar_t* points, scalar_t* out,
                               int64_t N, int64_t F) {
  // BEGIN SOLUTION cpu-kernel
  // opmath_t is float for float16/bfloat16 (their arithmetic is done in float), else scalar_t.
  using opmath_t = at::opmath_type<scalar_t>;
  // at::parallel_for splits [0, N) into chunks of at least grain_size cubes and
  // runs them on torch's intra-op thread pool (torch.get_num_threads() threads).
  // About 32768 output elements per chunk: small inputs stay on one thread.
  const int64_t grain_size = std::max<int64_t>(1, 32768 / std::max<int64_t>(F, 1));
  at::parallel_for(0, N, grain_size, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const opmath_t u = to_unit<opmath_t>(points[3 * n + 0]);
      const opmath_t v = to_unit<opmath_t>(points[3 * n + 1]);
      const opmath_t w = to_unit<opmath_t>(points[3 * n + 2]);
      opmath_t weight[8];
      for (int k = 0; k < 8; ++k) {
        weight[k] = corner_weight<opmath_t>(k, u, v, w);
      }
      const scalar_t* f_n = feats + n * 8 * F;  // feats[n] is 8 rows of F values
      scalar_t* out_n = out + n * F;
      for (int64_t f = 0; f < F; ++f) {
        opmath_t acc = 0;
        for (int k = 0; k < 8; ++k) {
          acc += weight[k] * static_cast<opmath_t>(f_n[k * F + f]);
        }
        out_n[f] = static_cast<scalar_t>(acc);
      }
    }
  });
  // END SOLUTION
}

void trilinear_forward_cpu(const at::Tensor& feats, const at::Tensor& points, at::Tensor& out) {
  const int64_t N = feats.size(0), F = feats.size(2);
  // AT_DISPATCH_* turns the run-time dtype into a compile-time type: the lambda
  // is instantiated once per listed type, with scalar_t bound to it.
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, feats.scalar_type(), "trilinear_forward_cpu", [&] {
    forward_cpu_kernel<scalar_t>(feats.const_data_ptr<scalar_t>(), points.const_data_ptr<scalar_t>(),
                                 out.mutable_data_ptr<scalar_t>(), N, F);
  });
}
