// Chapter 05: the CPU kernels, forward and backward. They mirror the CUDA
// kernels: the work is split over cubes n, and for each cube the inner loop
// over f reads and writes consecutive memory (which the compiler vectorises).
#include "trilinear.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

template <typename scalar_t>
static void forward_cpu_kernel(const scalar_t* feats, const scalar_t* points, scalar_t* out,
                               int64_t N, int64_t F) {
  // opmath_t is float for float16/bfloat16 (their arithmetic is done in float), else scalar_t.
  using opmath_t = at::opmath_type<scalar_t>;
  // at::parallel_for splits [0, N) into chunks of at least grain_size cubes and
  // runs them on torch's intra-op thread pool (torch.get_num_threads() threads).
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

// Backward. For cube n, with weights w_k and g = grad_out[n, :]:
//   grad_feats[n, k, f] = w_k * g[f]
//   grad_points[n, 0]   = 1/2 * sum_f g[f] * sum_k feats[n, k, f] * dw_k/du    (and v, w alike)
// The points gradient is a sum over f; on the CPU one thread owns cube n, so it
// simply accumulates in local variables.

// The points gradient of one cube (exercise points-grad-cpu, README section 4).
//   g_n   grad_out[n, :], F values
//   f_n   feats[n], 8 rows of F values (corner k's row starts at f_n + k * F)
//   d_du, d_dv, d_dw   dw_k/du, dw_k/dv, dw_k/dw of this cube's point, k = 0..7
//   gp_n  grad_points[n], 3 values: the only output, written once each
// Inlined into the kernel below; the thread that calls it owns cube n.
template <typename scalar_t, typename opmath_t>
static inline void points_grad_cube(const scalar_t* g_n, const scalar_t* f_n, const opmath_t* d_du,
                                    const opmath_t* d_dv, const opmath_t* d_dw, int64_t F, scalar_t* gp_n) {
  opmath_t gx = 0, gy = 0, gz = 0;
  for (int64_t f = 0; f < F; ++f) {
    opmath_t sx = 0, sy = 0, sz = 0;
    for (int k = 0; k < 8; ++k) {
      const opmath_t value = static_cast<opmath_t>(f_n[k * F + f]);
      sx += value * d_du[k];
      sy += value * d_dv[k];
      sz += value * d_dw[k];
    }
    const opmath_t g = static_cast<opmath_t>(g_n[f]);
    gx += g * sx;
    gy += g * sy;
    gz += g * sz;
  }
  // du/dx = 1/2: the chain rule through u = (x + 1) / 2. One rounding to scalar_t, at the end.
  gp_n[0] = static_cast<scalar_t>(opmath_t(0.5) * gx);
  gp_n[1] = static_cast<scalar_t>(opmath_t(0.5) * gy);
  gp_n[2] = static_cast<scalar_t>(opmath_t(0.5) * gz);
}

template <typename scalar_t, bool NEED_FEATS, bool NEED_POINTS>
static void backward_cpu_kernel(const scalar_t* grad_out, const scalar_t* feats, const scalar_t* points,
                                scalar_t* grad_feats, scalar_t* grad_points, int64_t N, int64_t F) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t grain_size = std::max<int64_t>(1, 32768 / std::max<int64_t>(F, 1));
  at::parallel_for(0, N, grain_size, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const opmath_t u = to_unit<opmath_t>(points[3 * n + 0]);
      const opmath_t v = to_unit<opmath_t>(points[3 * n + 1]);
      const opmath_t w = to_unit<opmath_t>(points[3 * n + 2]);
      opmath_t weight[8], d_du[8], d_dv[8], d_dw[8];
      for (int k = 0; k < 8; ++k) {
        weight[k] = corner_weight<opmath_t>(k, u, v, w);
        corner_weight_grad<opmath_t>(k, u, v, w, d_du[k], d_dv[k], d_dw[k]);
      }
      const scalar_t* g_n = grad_out + n * F;
      if constexpr (NEED_FEATS) {
        scalar_t* gf_n = grad_feats + n * 8 * F;
        for (int k = 0; k < 8; ++k) {
          for (int64_t f = 0; f < F; ++f) {
            gf_n[k * F + f] = static_cast<scalar_t>(weight[k] * static_cast<opmath_t>(g_n[f]));
          }
        }
      }
      if constexpr (NEED_POINTS) {
        points_grad_cube<scalar_t, opmath_t>(g_n, feats + n * 8 * F, d_du, d_dv, d_dw, F, grad_points + 3 * n);
      }
    }
  });
}

template <typename scalar_t, bool NEED_FEATS, bool NEED_POINTS>
static void backward_cpu_launch(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                                at::Tensor& grad_feats, at::Tensor& grad_points) {
  // Sizes from grad_out (N, F); feats is read only for the points' gradient.
  backward_cpu_kernel<scalar_t, NEED_FEATS, NEED_POINTS>(
      grad_out.const_data_ptr<scalar_t>(), NEED_POINTS ? feats.const_data_ptr<scalar_t>() : nullptr,
      points.const_data_ptr<scalar_t>(), NEED_FEATS ? grad_feats.mutable_data_ptr<scalar_t>() : nullptr,
      NEED_POINTS ? grad_points.mutable_data_ptr<scalar_t>() : nullptr, grad_out.size(0), grad_out.size(1));
}

void trilinear_backward_cpu(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                            at::Tensor& grad_feats, at::Tensor& grad_points) {
  const bool need_feats = grad_feats.defined(), need_points = grad_points.defined();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad_out.scalar_type(), "trilinear_backward_cpu", [&] {
    if (need_feats && need_points) {
      backward_cpu_launch<scalar_t, true, true>(grad_out, feats, points, grad_feats, grad_points);
    } else if (need_feats) {
      backward_cpu_launch<scalar_t, true, false>(grad_out, feats, points, grad_feats, grad_points);
    } else {
      backward_cpu_launch<scalar_t, false, true>(grad_out, feats, points, grad_feats, grad_points);
    }
  });
}
