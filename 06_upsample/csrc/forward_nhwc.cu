// Chapter 06: the channels-last forward (NHWC in memory: the C values of a pixel
// are neighbours). x / blockIdx.x run along one row of pixels with the channel
// fastest, so a warp reads and writes one contiguous span; blockIdx.y runs over
// chunks of rows (n, h). The arithmetic per value is the NCHW kernels', in the
// same order.
#include "forward_rows.cuh"

namespace ch06 {
namespace {

// A thread owns V = kV neighbouring values of an output row of pixels (16 bytes)
// in rows_per consecutive output rows of one image (kRowsOf, fewer when the launch
// would leave SMs idle), and walks down them as the
// NCHW kernel does (walk_rows).
//   kPixel (rung ForwardNhwcPacks): C is a multiple of V and the tensors are
//     aligned, so the V values are channels of one pixel: one set of column taps,
//     and each tap is one 16-byte load.
//   otherwise (ForwardNhwc, e.g. an RGB image, C = 3): the V values may belong to
//     different pixels; each has its own column taps and its own scalar loads, and
//     the row still ends in one 16-byte store when its length allows (else in the
//     widest stores its start's alignment allows, store_outputs).
template <typename scalar_t, int V, bool kPixel>
__global__ void __launch_bounds__(kThreads) forward_nhwc_kernel(
    const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t N, int64_t C, int64_t H_in, int64_t W_in,
    int64_t H_out, int64_t W_out, opmath_type<scalar_t> rh, opmath_type<scalar_t> rw, Mode mode,
    int store_unit, int rows_per) {
  using T = opmath_type<scalar_t>;
  const int64_t row_in = W_in * C, row_out = W_out * C;  // elements per row of pixels
  const int64_t f0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;  // first value, in a row
  if (f0 >= row_out) {
    return;
  }
  const int n = static_cast<int>(row_out - f0 < V ? row_out - f0 : V);  // fewer than V at the row's end
  constexpr int kTaps = kPixel ? 1 : V;
  // Where each value's two column taps sit in an input row: 32-bit offsets from the row (the
  // host checks that a row of W_in * C values fits), one register each, not two.
  int o0[kTaps], o1[kTaps];
  T l[kTaps];
#pragma unroll
  for (int j = 0; j < kTaps; ++j) {
    const int64_t f = f0 + (j < n ? j : 0);
    const int64_t w = f / C, c = f - w * C;
    const Taps<T> xt = source_taps<T>(w, W_in, rw, mode);
    o0[j] = static_cast<int>(xt.i0 * C + c);
    o1[j] = static_cast<int>(xt.i1 * C + c);
    l[j] = xt.l;
  }
  const int64_t chunks = (H_out + rows_per - 1) / rows_per;  // per image
  for (int64_t job = blockIdx.y; job < N * chunks; job += gridDim.y) {
    const int64_t image = job / chunks, h_begin = (job - image * chunks) * rows_per;
    const int64_t h_end = h_begin + rows_per < H_out ? h_begin + rows_per : H_out;
    const scalar_t* xn = x + image * H_in * row_in;
    scalar_t* on = out + image * H_out * row_out + f0;
    walk_rows<scalar_t, V>(
        h_begin, h_end, H_in, rh, mode,
        [&](int64_t row, T(&dst)[V]) {
          const scalar_t* line = xn + row * row_in;
          if constexpr (kPixel) {
            const Pack<scalar_t, V> a = load_pack<scalar_t, V>(line + o0[0]);
            const Pack<scalar_t, V> b = load_pack<scalar_t, V>(line + o1[0]);
#pragma unroll
            for (int j = 0; j < V; ++j) {
              dst[j] = (T(1) - l[0]) * static_cast<T>(a.v[j]) + l[0] * static_cast<T>(b.v[j]);
            }
          } else {
#pragma unroll
            for (int j = 0; j < V; ++j) {
              dst[j] = (T(1) - l[j]) * static_cast<T>(line[o0[j]]) + l[j] * static_cast<T>(line[o1[j]]);
            }
          }
        },
        [&](int64_t h, const Pack<scalar_t, V>& r) {
          // kPixel: every row is whole vectors (C is a multiple of V), so no test per store
          if constexpr (kPixel) {
            store_outputs<scalar_t, V>(on + h * row_out, r, V, V);
          } else {
            store_outputs<scalar_t, V>(on + h * row_out, r, n, store_unit);
          }
        });
  }
}

// Rung ForwardNhwcRgbX2: channels-last RGB (C = 3) at an exact x2 along W
// (half_pixel; H any ratio). forward_nhwc_kernel gives each of a thread's V values
// its own taps and loads, because the values of a 16-byte store straddle pixels.
// Here a thread owns V whole output pixels (3 V values, three 16-byte packs): at
// x2 they read V / 2 + 2 input pixels, fetched with a few 8-byte loads, and every
// tap is a fixed register, as in the NCHW Span::Double path. Written straight to
// memory, a thread's three packs would be 48 bytes apart across the warp (every
// store instruction writing half sectors), so the warp passes its packs through
// shared memory (16 bytes at a 48-byte stride: conflict-free) and stores 3 x 32
// contiguous packs. __syncwarp before the stores: every lane's packs are in
// shared memory; after them: every pack is read before the next row's are written.
// Float32 results may differ from forward_nhwc_kernel's in the last bit (nvcc
// fuses another multiply-add), as the NCHW Span::Double path may.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads, sizeof(scalar_t) == 2 ? 3 : 4) forward_rgb_twice_kernel(
    const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t N, int64_t H_in, int64_t W_in,
    int64_t H_out, opmath_type<scalar_t> rh, opmath_type<scalar_t> rw, Mode mode, int rows_per) {
  using T = opmath_type<scalar_t>;
  constexpr int V = kV<scalar_t>, Q = V / 2;  // V output pixels, V / 2 input pixels; Q values per 8-byte load
  // The loads start kPre values before pixel k0 (pixel k0 - 1, in whole loads) and end
  // with pixel k0 + Q (the last one read).
  constexpr int kPre = (3 + Q - 1) / Q * Q, kLoads = (kPre + 3 * Q + 3 + Q - 1) / Q;
  __shared__ Pack<scalar_t, V> stage[3 * kThreads];
  const int64_t W_out = 2 * W_in, row_in = 3 * W_in, row_out = 3 * W_out;
  const int lane = threadIdx.x % 32;
  const int64_t w_first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x - lane) * V;  // the warp's
  // A thread past the row's end stays (it takes part in the warp's exchange), computes
  // the row's last V pixels again and stores nothing.
  const int64_t w_mine = w_first + lane * V;
  const int64_t w0 = w_mine < W_out ? w_mine : W_out - V;
  const int64_t k0 = w0 / 2;  // the first input pixel; the host checks W_in % Q == 0
  const bool first = w0 == 0, last = k0 + Q == W_in;
  T l[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    l[j] = source_taps<T>(w0 + j, W_in, rw, mode).l;
  }
  const int64_t chunks = (H_out + rows_per - 1) / rows_per;  // per image
  for (int64_t job = blockIdx.y; job < N * chunks; job += gridDim.y) {
    const int64_t image = job / chunks, h_begin = (job - image * chunks) * rows_per;
    const int64_t h_end = h_begin + rows_per < H_out ? h_begin + rows_per : H_out;
    const scalar_t* xn = x + image * H_in * row_in;
    scalar_t* on = out + image * H_out * row_out + 3 * w_first;
    walk_rows<scalar_t, 3 * V>(
        h_begin, h_end, H_in, rh, mode,
        [&](int64_t row, T(&dst)[3 * V]) {
          const scalar_t* src = xn + row * row_in + 3 * k0;
          scalar_t span[kLoads * Q];  // pixel k0 + p, channel c at kPre + 3 p + c
#pragma unroll
          for (int i = 0; i < kLoads; ++i) {
            // the first thread's loads before the row and the last thread's past it: not used
            load8<scalar_t, Q>((i < kPre / Q && first) || (i >= kPre / Q + 3 && last) ? src : src - kPre + i * Q,
                               span + i * Q);
          }
#pragma unroll
          for (int j = 0; j < V; ++j) {  // output pixel w0 + j reads input pixels k0 + lo and k0 + lo + 1
            const int lo = j / 2 - (j % 2 == 0 ? 1 : 0);
#pragma unroll
            for (int c = 0; c < 3; ++c) {
              scalar_t a = span[kPre + 3 * lo + c], b = span[kPre + 3 * (lo + 1) + c];
              if (first && j == 0) {  // output 0: s clamps to 0, pixels 0 and 1 (weight 0)
                a = span[kPre + c];
                b = span[kPre + 3 + c];
              }
              if (last && j == V - 1) {  // the last output: its second tap clamps to the last pixel
                b = span[kPre + 3 * lo + c];
              }
              dst[3 * j + c] = (T(1) - l[j]) * static_cast<T>(a) + l[j] * static_cast<T>(b);
            }
          }
        },
        [&](int64_t h, const Pack<scalar_t, 3 * V>& r) {
#pragma unroll
          for (int s = 0; s < 3; ++s) {
            memcpy(&stage[3 * threadIdx.x + s], r.v + s * V, sizeof(Pack<scalar_t, V>));
          }
          __syncwarp();
          scalar_t* dst = on + h * row_out;
#pragma unroll
          for (int s = 0; s < 3; ++s) {
            const int q = 32 * s + lane;  // the warp's q-th pack
            if (3 * w_first + q * V < row_out) {
              store_outputs<scalar_t, V>(dst + q * V, stage[3 * (threadIdx.x - lane) + q], V, V);
            }
          }
          __syncwarp();  // every pack read before the next row's are written
        });
  }
}

}  // namespace

template <typename scalar_t>
void launch_forward_nhwc(const Call<scalar_t>& c, bool packs) {
  const ResizeGeometry& g = c.g;
  constexpr int V = kV<scalar_t>;
  const int64_t C = g.channels, N = g.planes / C;
  STD_TORCH_CHECK(g.W_in * C <= std::numeric_limits<int32_t>::max(), "upsample_bilinear2d: a channels-last row of ",
                  g.W_in * C, " input values is too long for the kernel's 32-bit offsets");
  // 16-byte stores need every row to start on a V-value boundary and an aligned output; else
  // the widest stores a row's start allows (store_unit).
  const int unit = store_unit<V>(g.W_out * C, aligned(c.out.data_ptr(), sizeof(Pack<scalar_t, V>)));
  const int64_t groups = (g.W_out * C + V - 1) / V;  // threads along a row
  const int R = rows_to_fill(kRowsOf<scalar_t>, c.in.get_device_index(),
                             [&](int rows) { return groups * N * ((g.H_out + rows - 1) / rows); });
  const Launch l = launch_rows(groups, N * ((g.H_out + R - 1) / R));
  auto kernel = packs ? forward_nhwc_kernel<scalar_t, V, true> : forward_nhwc_kernel<scalar_t, V, false>;
  kernel<<<l.grid, l.block, 0, c.stream>>>(c.src(), c.dst(), N, C, g.H_in, g.W_in, g.H_out, g.W_out, c.rh, c.rw,
                                           g.mode, unit, R);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t>
void launch_forward_nhwc_rgb_x2(const Call<scalar_t>& c) {
  if constexpr (std::is_same_v<scalar_t, double>) {
    STD_TORCH_CHECK(false, "upsample_bilinear2d: the RGB x2 forward is not compiled for float64");
  } else {
    const ResizeGeometry& g = c.g;
    constexpr int V = kV<scalar_t>;
    const int64_t N = g.planes / 3;
    STD_TORCH_CHECK(g.W_in * 3 <= std::numeric_limits<int32_t>::max(), "upsample_bilinear2d: a channels-last row of ",
                    g.W_in * 3, " input values is too long for the kernel's 32-bit offsets");
    const int64_t groups = g.W_out / V;  // threads along a row
    const int R = rows_to_fill(kRowsOf<scalar_t>, c.in.get_device_index(),
                               [&](int rows) { return groups * N * ((g.H_out + rows - 1) / rows); });
    const Launch l = launch_rows(groups, N * ((g.H_out + R - 1) / R));
    forward_rgb_twice_kernel<scalar_t><<<l.grid, l.block, 0, c.stream>>>(c.src(), c.dst(), N, g.H_in, g.W_in, g.H_out,
                                                                          c.rh, c.rw, g.mode, R);
    STD_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

#define CH06_INSTANTIATE(T)                                        \
  template void launch_forward_nhwc<T>(const Call<T>&, bool);     \
  template void launch_forward_nhwc_rgb_x2<T>(const Call<T>&);
CH06_FOR_EACH_TYPE(CH06_INSTANTIATE)

}  // namespace ch06
