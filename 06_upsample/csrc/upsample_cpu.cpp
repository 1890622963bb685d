// Chapter 06: the CPU kernels.
//
// The taps of an output column depend only on its index along W, so they are
// computed once per call into a small table and reused by every row of every
// plane; the taps of a row once per row. The inner loop then only loads,
// blends and stores.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <vector>

#include "upsample.h"

template <typename T>
static std::vector<Taps<T>> taps_table(int64_t in, int64_t out, T ratio, Mode mode) {
  std::vector<Taps<T>> taps(out);
  for (int64_t d = 0; d < out; ++d) {
    taps[d] = source_taps<T>(d, in, ratio, mode);
  }
  return taps;
}

// Rows of about this many output elements make one task for the thread pool.
constexpr int64_t kGrainElements = 16384;

template <typename scalar_t>
static void forward_kernel(const scalar_t* x, scalar_t* out, const ResizeGeometry& g) {
  using opmath_t = at::opmath_type<scalar_t>;
  const opmath_t rh = axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h);
  const opmath_t rw = axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w);
  const std::vector<Taps<opmath_t>> xtaps = taps_table<opmath_t>(g.W_in, g.W_out, rw, g.mode);
  const int64_t rows = g.planes * g.H_out;  // one task = some output rows, across planes
  const int64_t grain = std::max<int64_t>(1, kGrainElements / g.W_out);
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t p = row / g.H_out, h = row % g.H_out;
      const Taps<opmath_t> yt = source_taps<opmath_t>(h, g.H_in, rh, g.mode);
      const scalar_t* plane = x + p * g.H_in * g.W_in;
      scalar_t* out_row = out + row * g.W_out;
      for (int64_t w = 0; w < g.W_out; ++w) {
        out_row[w] = static_cast<scalar_t>(bilinear_sample<scalar_t, opmath_t>(plane, g.W_in, yt, xtaps[w]));
      }
    }
  });
}

void upsample_forward_cpu(const at::Tensor& x, at::Tensor& out, const ResizeGeometry& g) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "upsample_forward_cpu", [&] {
    forward_kernel<scalar_t>(x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), g);
  });
}

// Backward, by gathering: each input pixel (h, w) sums grad_out over the output
// pixels that read it, each times the weight it was read with:
//   grad_in[h, w] = sum_{dh in range(h)} wy(dh, h) * sum_{dw in range(w)} wx(dw, w) * grad_out[dh, dw]
// Every grad_in element has one owner and a fixed summation order: no races,
// and the same bits on every run and for any number of threads.
template <typename scalar_t>
static void backward_kernel(const scalar_t* grad_out, scalar_t* grad_in, const ResizeGeometry& g) {
  using opmath_t = at::opmath_type<scalar_t>;
  const opmath_t rh = axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h);
  const opmath_t rw = axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w);
  const std::vector<Taps<opmath_t>> xtaps = taps_table<opmath_t>(g.W_in, g.W_out, rw, g.mode);
  std::vector<int64_t> w_begin(g.W_in), w_end(g.W_in);
  for (int64_t w = 0; w < g.W_in; ++w) {
    gather_range<opmath_t>(w, g.W_in, g.W_out, rw, g.mode, w_begin[w], w_end[w]);
  }
  const int64_t rows = g.planes * g.H_in;
  const int64_t grain = std::max<int64_t>(1, kGrainElements / g.W_in);
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t p = row / g.H_in, h = row % g.H_in;
      int64_t h_begin, h_end;
      gather_range<opmath_t>(h, g.H_in, g.H_out, rh, g.mode, h_begin, h_end);
      const scalar_t* go = grad_out + p * g.H_out * g.W_out;
      scalar_t* gi_row = grad_in + row * g.W_in;
      for (int64_t w = 0; w < g.W_in; ++w) {
        opmath_t acc = 0;
        for (int64_t dh = h_begin; dh < h_end; ++dh) {
          const opmath_t wy = tap_weight<opmath_t>(source_taps<opmath_t>(dh, g.H_in, rh, g.mode), h);
          const scalar_t* go_row = go + dh * g.W_out;
          opmath_t sum = 0;
          for (int64_t dw = w_begin[w]; dw < w_end[w]; ++dw) {
            sum += tap_weight<opmath_t>(xtaps[dw], w) * static_cast<opmath_t>(go_row[dw]);
          }
          acc += wy * sum;
        }
        gi_row[w] = static_cast<scalar_t>(acc);
      }
    }
  });
}

void upsample_backward_cpu(const at::Tensor& grad_out, at::Tensor& grad_in, const ResizeGeometry& g) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad_out.scalar_type(), "upsample_backward_cpu", [&] {
    backward_kernel<scalar_t>(grad_out.const_data_ptr<scalar_t>(), grad_in.mutable_data_ptr<scalar_t>(), g);
  });
}
