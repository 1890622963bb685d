// Chapter 06: the NCHW forward, rungs 1 to 3 of its ladder (ladder.h).
#include "forward_rows.cuh"

namespace ch06 {
namespace {

// Rung 1 (ladder only): PyTorch's own design. A thread per output value, in
// memory order (x along W: a warp writes 32 neighbouring outputs). Each thread
// works out both axes' taps and makes four scalar loads; neighbouring threads
// load the same input values again, and nothing is shared between the rows.
template <typename scalar_t>
__global__ void forward_naive_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t planes,
                                     int64_t H_in, int64_t W_in, int64_t H_out, int64_t W_out,
                                     opmath_type<scalar_t> rh, opmath_type<scalar_t> rw, Mode mode) {
  using T = opmath_type<scalar_t>;
  const int64_t total = planes * H_out * W_out;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t w = i % W_out, h = i / W_out % H_out, p = i / (W_out * H_out);
    const Taps<T> yt = source_taps<T>(h, H_in, rh, mode), xt = source_taps<T>(w, W_in, rw, mode);
    const scalar_t* xp = x + p * H_in * W_in;
    const T top = sample_line<scalar_t, T>(xp + yt.i0 * W_in, xt);
    const T bottom = sample_line<scalar_t, T>(xp + yt.i1 * W_in, xt);
    out[i] = static_cast<scalar_t>((T(1) - yt.l) * top + yt.l * bottom);
  }
}

// Blocks per SM the rung-2 kernel asks for (__launch_bounds__): 2-byte types
// hold more registers (16 rows of 8 outputs); 3 blocks cap them at 80.
template <typename scalar_t>
constexpr int kMinBlocks = sizeof(scalar_t) == 2 ? 3 : 4;

// Rungs 2 and 3. A thread owns kV neighbouring output columns from w0 (one
// 16-byte store per row where the width allows) and rows_per consecutive output rows of one plane (kRowsOf,
// fewer when the launch would leave SMs idle), and walks down them (walk_rows): x -> a group of kV columns, y -> a chunk of rows,
// z -> a plane. Its column taps are computed once, for all its rows.
// kSpan says how it samples an input row at its kV columns:
//   Taps    rung 2, any ratio: two scalar loads per output, at the taps' columns.
//   Halve   rung 3, an exact x0.5 along W: the 2V columns from 2 w0 are two aligned
//           16-byte packs (the host checks W_in = 2 W_out, W_out % V == 0, x aligned).
//   Double  rung 3, an exact x2 along W in half_pixel: output 2k reads columns k - 1
//           and k, output 2k + 1 reads k and k + 1; the V/2 + 2 columns from k0 - 1
//           are three aligned 8-byte loads, every tap a fixed register of them. The
//           first and last thread of a row pick their edge taps with a select, not
//           a branch (a branch would make the warps holding them run both paths).
// All three compute sample_line's (1 - l) * a + l * b. Halve gives the bits of
// Taps; Double may differ from Taps in the last float bit (nvcc fuses a
// different one of the two products into an FMA there).
template <typename scalar_t, Span kSpan>
__global__ void __launch_bounds__(kThreads, kSpan == Span::Double ? 4 : kMinBlocks<scalar_t>) forward_kernel(
    const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t planes, int64_t H_in, int64_t W_in,
    int64_t H_out, int64_t W_out, opmath_type<scalar_t> rh, opmath_type<scalar_t> rw, Mode mode,
    int store_unit, int rows_per) {
  using T = opmath_type<scalar_t>;
  constexpr int V = kV<scalar_t>;
  const int64_t w0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (w0 >= W_out) {
    return;
  }
  const int n = static_cast<int>(W_out - w0 < V ? W_out - w0 : V);  // fewer than V at the right edge
  // The column taps, held as i0 and l only: i1 is i0 + 1 except at the last column (source_taps),
  // so it is worked out again per sample rather than kept. That frees V 64-bit registers, which a
  // 2-byte thread (V = 8) needs: with all three it spilled to local memory.
  int64_t xi[V];
  T xl[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const Taps<T> t = source_taps<T>(j < n ? w0 + j : w0, W_in, rw, mode);
    xi[j] = t.i0;
    xl[j] = t.l;
  }
  const bool first = w0 == 0, last = w0 + V == W_out;  // Double: the threads at the edges
  const int64_t plane_in = H_in * W_in, plane_out = H_out * W_out;  // 64-bit: planes * plane may pass 2^31
  const int64_t chunks = (H_out + rows_per - 1) / rows_per;
  for (int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; c < chunks;
       c += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const int64_t h_begin = c * rows_per, h_end = h_begin + rows_per < H_out ? h_begin + rows_per : H_out;
    for (int64_t p = blockIdx.z; p < planes; p += gridDim.z) {
      const scalar_t* xp = x + p * plane_in;
      scalar_t* op = out + p * plane_out + w0;
      auto store = [&](int64_t h, const Pack<scalar_t, V>& r) {
        store_outputs<scalar_t, V>(op + h * W_out, r, n, store_unit);
      };
      auto by_taps = [&](int64_t row, T(&dst)[V]) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const int64_t i1 = xi[j] + 1 < W_in ? xi[j] + 1 : xi[j];
          dst[j] = sample_line<scalar_t, T>(xp + row * W_in, Taps<T>{xi[j], i1, xl[j]});
        }
      };
      if constexpr (kSpan == Span::Halve) {
        walk_rows<scalar_t, V>(h_begin, h_end, H_in, rh, mode, [&](int64_t row, T(&dst)[V]) {
          const scalar_t* src = xp + row * W_in + 2 * w0;
          scalar_t span[2 * V];
          const Pack<scalar_t, V> a = load_pack<scalar_t, V>(src), b = load_pack<scalar_t, V>(src + V);
          memcpy(span, &a, sizeof(a));
          memcpy(span + V, &b, sizeof(b));
#pragma unroll
          for (int j = 0; j < V; ++j) {  // sample_line's arithmetic, on registers
            dst[j] = (T(1) - xl[j]) * static_cast<T>(span[2 * j]) + xl[j] * static_cast<T>(span[2 * j + 1]);
          }
        }, store);
      } else if constexpr (kSpan == Span::Double) {
        walk_rows<scalar_t, V>(h_begin, h_end, H_in, rh, mode, [&](int64_t row, T(&dst)[V]) {
          constexpr int Q = V / 2;  // values per 8-byte load
          const scalar_t* src = xp + row * W_in + w0 / 2;  // column k0 = w0 / 2
          scalar_t span[3 * Q];                           // columns k0 - Q .. k0 + 2Q - 1
          load8<scalar_t, Q>(first ? src : src - Q, span);  // the first thread: before the row, unused
          load8<scalar_t, Q>(src, span + Q);
          load8<scalar_t, Q>(last ? src : src + Q, span + 2 * Q);  // the last thread: past the row, unused
#pragma unroll
          for (int j = 0; j < V; ++j) {  // output 2t reads span[Q + t - 1, Q + t], 2t + 1 span[Q + t, Q + t + 1]
            const int lo = Q + j / 2 - (j % 2 == 0 ? 1 : 0);
            scalar_t a = span[lo], b = span[lo + 1];
            if (j == 0 && first) {  // output 0: s clamps to 0, taps 0 and 1 (weight 0)
              a = span[Q];
              b = span[Q + 1];
            }
            if (j == V - 1 && last) {  // the last output: its second tap clamps to the last column
              b = span[2 * Q - 1];
            }
            dst[j] = (T(1) - xl[j]) * static_cast<T>(a) + xl[j] * static_cast<T>(b);
          }
        }, store);
      } else {
        walk_rows<scalar_t, V>(h_begin, h_end, H_in, rh, mode, by_taps, store);
      }
    }
  }
}

}  // namespace

template <typename scalar_t>
void launch_forward_naive(const Call<scalar_t>& c) {
  const ResizeGeometry& g = c.g;
  const int64_t total = g.planes * g.H_out * g.W_out;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t(1) << 30);
  forward_naive_kernel<scalar_t><<<static_cast<unsigned>(blocks), kThreads, 0, c.stream>>>(
      c.src(), c.dst(), g.planes, g.H_in, g.W_in, g.H_out, g.W_out, c.rh, c.rw, g.mode);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

// Grid: x over groups of V columns, y over chunks of rows, z over planes. A row's
// stores write as many values at once as its start's alignment allows: V when
// W_out is a multiple of V and the output starts on a pack boundary (ours is
// freshly allocated), fewer when W_out is a multiple of only 4 or 2 (store_unit).
template <typename scalar_t>
void launch_forward_rows(const Call<scalar_t>& c, Span span) {
  const ResizeGeometry& g = c.g;
  constexpr int V = kV<scalar_t>;
  const int64_t groups = (g.W_out + V - 1) / V;
  const int R = rows_to_fill(kRowsOf<scalar_t>, c.in.get_device_index(),
                             [&](int rows) { return groups * ((g.H_out + rows - 1) / rows) * g.planes; });
  const Launch l = launch_for(groups, (g.H_out + R - 1) / R, g.planes, 1);
  const int unit = store_unit<V>(g.W_out, aligned(c.out.data_ptr(), sizeof(Pack<scalar_t, V>)));
  auto kernel = span == Span::Halve    ? forward_kernel<scalar_t, Span::Halve>
                : span == Span::Double ? forward_kernel<scalar_t, Span::Double>
                                       : forward_kernel<scalar_t, Span::Taps>;
  kernel<<<l.grid, l.block, 0, c.stream>>>(c.src(), c.dst(), g.planes, g.H_in, g.W_in, g.H_out, g.W_out, c.rh, c.rw,
                                           g.mode, unit, R);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

#define CH06_INSTANTIATE(T)                                  \
  template void launch_forward_naive<T>(const Call<T>&);    \
  template void launch_forward_rows<T>(const Call<T>&, Span);
CH06_FOR_EACH_TYPE(CH06_INSTANTIATE)

}  // namespace ch06
