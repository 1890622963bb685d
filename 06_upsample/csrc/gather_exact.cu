// Chapter 06: the NCHW exact-ratio gathers, rungs GatherX2, GatherX4 and
// GatherHalve of the backward's ladder (ladder.h), and the channels-last RGB x2
// (GatherNhwcRgbX2: the x2 kernel with NC = 3).
#include "exact_taps.cuh"

namespace ch06 {
namespace {

// Input rows per thread: x2 and x0.5 take 2, which share grad_out rows (two of
// the four each reads at x2); x4 and RGB take 1 (their rows need more registers).
constexpr int kTwiceRows = 2;
constexpr int kQuadRows = 1;
constexpr int kRgbRows = 1;
constexpr int kHalveRows = 2;

// Lanes per row of the exact-upsampling gather: 32, or with fewer groups of V
// columns in a row than 32, their count rounded up to a power of two (1 .. 16);
// the warp then takes 32 / that many planes at once (kShare).
__host__ __device__ constexpr int times_lanes(int64_t groups) {
  return groups > 16 ? 32 : groups > 8 ? 16 : groups > 4 ? 8 : groups > 2 ? 4 : groups > 1 ? 2 : 1;
}

// The gather of an exact xF upsampling along W in half_pixel (W_out = F W_in; F = 2,
// the forward's Span::Double transposed, or 4). A thread owns V = kV neighbouring
// input columns from k0 (NC values each; one 16-byte store per row and channel
// pack) of R rows and one plane: the F V output columns from F k0 are F aligned
// 16-byte loads, and the F/2 on either side of them are the neighbouring lanes'
// end values, passed by warp shuffles; only lanes 0 and 31 load theirs. The
// shuffles are safe because every lane of the warp reaches them: a lane past the
// row recomputes the last group and stores nothing. Rows: kRows = Span::Taps
// takes the row plan (H any ratio); Span::Double works them out in place (H an
// exact x2 too), and away from the edges their weights are constants.
// Bits: each input pixel sums its rows and columns in the general gather's order
// with the plan's weights (exact here), except column 1, which the general
// gather's windows of 2F columns split into two passes over the rows and this
// kernel adds row by row: there float32 may differ by a rounding.
template <typename scalar_t, int F, int NC, int R, Span kRows, bool kShare>
__global__ void __launch_bounds__(kThreads, kRows == Span::Double ? 3 : 4)
    gather_times_kernel(const scalar_t* __restrict__ grad_out, scalar_t* __restrict__ grad_in, int64_t planes,
                        AxisPlan<opmath_type<scalar_t>> rows, int64_t W_in, Mode mode) {
  using T = opmath_type<scalar_t>;
  constexpr int V = kV<scalar_t>;  // pixels a thread owns along W
  // Values a thread owns in a row (NC packs: pixel-major, channel-minor), and the values it takes
  // from either neighbour in the warp (E: the F/2 pixels beyond its own).
  constexpr int N = NC * V, E = NC * F / 2;
  constexpr unsigned kAll = 0xffffffffu;
  const int64_t groups = W_in / V;  // the host checks W_in % V == 0
  const int lane = static_cast<int>(threadIdx.x % 32);
  // kShare: a row of fewer than 32 groups (times_lanes) shares each warp with per_warp - 1 other
  // planes' rows: lane = sub * width + the group. Then blockDim.x is 32 and gridDim.x 1.
  const int width = kShare ? times_lanes(groups) : 32, per_warp = 32 / width, sub = lane / width;
  const int64_t t = width == 32 ? static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x : lane % width;
  if (t - lane >= groups) {  // the whole warp is past the row (blockDim.x is a multiple of 32)
    return;
  }
  // The warp's other threads stay for the shuffles: a thread past the row
  // computes the last group again and stores nothing. (Lanes 0 and 31 are
  // then the first and the last group of a row, or past it, when width < 32.)
  const bool mine = t < groups;
  const int64_t k0 = (mine ? t : groups - 1) * V;
  const bool first = k0 == 0, last = k0 + V == W_in;
  const int64_t row_in = W_in * NC, row_out = F * row_in, plane_in = rows.in * row_in, plane_out = rows.out * row_out;
  for (int64_t h0 = (static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y) * R; h0 < rows.in;
       h0 += static_cast<int64_t>(gridDim.y) * blockDim.y * R) {  // h0 is the same across a warp
    // The thread's R input rows h0 + r read grad_out rows [begin[r], end[r]); each row is loaded
    // once for all of them (neighbouring input rows share grad_out rows: two of four at x2).
    int64_t begin[R], end[R];
    row_ranges<kRows>(rows, h0, begin, end);
    for (int64_t p0 = static_cast<int64_t>(blockIdx.z) * per_warp; p0 < planes; p0 += static_cast<int64_t>(gridDim.z) * per_warp) {
      // a lane past the last plane computes the last plane again and stores nothing
      const int64_t p = p0 + sub < planes ? p0 + sub : planes - 1;
      const scalar_t* go = grad_out + p * plane_out + F * k0 * NC;
      T acc[R][N] = {};
      // g[i] is value F * k0 * NC - E + i of grad_out row dh (output column F * k0 - F / 2 + i
      // when NC = 1; else value c of a pixel is at pixel * NC + c)
      const auto load_row = [&](int64_t dh, T(&g)[F * N + 2 * E]) {
        const scalar_t* row = go + dh * row_out;
        Pack<scalar_t, V> a[F * NC];
#pragma unroll
        for (int q = 0; q < F * NC; ++q) {
          a[q] = load_pack<scalar_t, V>(row + q * V);
        }
#pragma unroll
        for (int j = 0; j < V; ++j) {
#pragma unroll
          for (int q = 0; q < F * NC; ++q) {
            g[E + q * V + j] = static_cast<T>(a[q].v[j]);
          }
        }
#pragma unroll
        for (int i = 0; i < E; ++i) {
          T left = __shfl_up_sync(kAll, g[F * N + i], 1), right = __shfl_down_sync(kAll, g[E + i], 1);
          if (lane == 0 && !first) {
            left = static_cast<T>(row[i - E]);
          }
          if (lane == 31 && !last) {
            right = static_cast<T>(row[F * N + i]);
          }
          g[i] = first ? T(0) : left;  // no column -F/2 + i: weight 0, value 0
          g[F * N + E + i] = last ? T(0) : right;
        }
      };
      // What a grad_out row read with the row weight wy gives the thread's V pixels of one input
      // row (times_tap's taps; pixel j's tap m is output pixel F (k0 + j) - F/2 + m, at
      // g[NC (F j + m) + c] for channel c). Explicit FMAs, as the general gather's
      // acc += weight * v compiles to: with constant weights (the unrolled interior below) nvcc
      // would otherwise share one product between two sums that happen to use the same weight,
      // and add it unfused. A column that does not exist has the value 0 and the weight 0, and
      // stays in the sum (fma(0, 0, s) is s); only column 1's weight-0 reads (m < 0) are left out
      // elsewhere.
      const auto add_row = [&](T wy, const T(&g)[F * N + 2 * E], T(&sum)[N]) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const bool at_first = first && j == 0, at_second = first && j == 1, at_last = last && j == V - 1;
#pragma unroll
          for (int m = -F / 2; m < 2 * F; ++m) {
            if (F * j + m >= 0) {
              const ColumnTap<T> tap = times_tap<F, T>(m, at_first, at_second, at_last);
              if (m >= 0 || tap.reads) {
#pragma unroll
                for (int c = 0; c < NC; ++c) {
                  sum[j * NC + c] = fma(wy * tap.weight, g[NC * (F * j + m) + c], sum[j * NC + c]);
                }
              }
            }
          }
        }
      };
      if (F == 2 && NC == 1 && kRows == Span::Double && R == 2 && h0 >= 2 && h0 + R < rows.in) {
        // Away from the edges at x2 along H too: rows h0 and h0 + 1 read grad_out rows
        // 2 h0 - 1 .. 2 h0 + 2 and 2 h0 + 1 .. 2 h0 + 4 with the weights 1/4, 3/4, 3/4, 1/4,
        // constants, and all six rows' loads can be issued before the sums.
        constexpr T kWy[4] = {T(0.25), T(0.75), T(0.75), T(0.25)};
#pragma unroll
        for (int i = 0; i < 6; ++i) {
          T g[F * N + 2 * E];
          load_row(2 * h0 - 1 + i, g);
          if (i < 4) {
            add_row(kWy[i], g, acc[0]);
          }
          if (i >= 2) {
            add_row(kWy[i - 2], g, acc[1]);
          }
        }
      } else {
        for (int64_t dh = begin[0]; dh < end[R - 1]; ++dh) {
          T g[F * N + 2 * E];
          load_row(dh, g);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if (dh >= begin[r] && dh < end[r]) {
              add_row(row_weight<kRows>(rows, mode, dh, h0 + r), g, acc[r]);
            }
          }
        }
      }
      if (mine && p0 + sub < planes) {
        store_rows<scalar_t>(grad_in + p * plane_in + h0 * row_in + k0 * NC, row_in, rows.in - h0, acc);
      }
    }
  }
}

// The gather of an exact x0.5 along W (W_in = 2 W_out; half_pixel or tf_legacy),
// the forward's Span::Halve transposed: input column i is read by output column
// i / 2 alone, with the weight 1 - l (even i) or l (odd i). A thread owns V = kV
// input columns from k0 (one 16-byte store per row) of R rows and one plane: per
// grad_out row it reads the V / 2 columns from k0 / 2 as one 8-byte load. The
// general gather does the same sums in the same order: this kernel gives its bits.
template <typename scalar_t, int R, Span kRows>
__global__ void __launch_bounds__(kThreads)
    gather_halve_kernel(const scalar_t* __restrict__ grad_out, scalar_t* __restrict__ grad_in, int64_t planes,
                        AxisPlan<opmath_type<scalar_t>> rows, int64_t W_in, Mode mode) {
  using T = opmath_type<scalar_t>;
  constexpr int V = kV<scalar_t>, Q = V / 2;
  const int64_t groups = W_in / V;  // the host checks W_in % V == 0
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= groups) {
    return;
  }
  const int64_t k0 = t * V, W_out = W_in / 2, plane_in = rows.in * W_in, plane_out = rows.out * W_out;
  const T l = mode == Mode::HalfPixel ? T(0.5) : T(0);
  const T w_even = tap_weight<T>(Taps<T>{0, 1, l}, 0), w_odd = tap_weight<T>(Taps<T>{0, 1, l}, 1);
  for (int64_t h0 = (static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y) * R; h0 < rows.in;
       h0 += static_cast<int64_t>(gridDim.y) * blockDim.y * R) {
    int64_t begin[R], end[R];
    row_ranges<kRows>(rows, h0, begin, end);
    for (int64_t p = blockIdx.z; p < planes; p += gridDim.z) {
      const scalar_t* go = grad_out + p * plane_out + k0 / 2;
      T acc[R][V] = {};
      for (int64_t dh = begin[0]; dh < end[R - 1]; ++dh) {
        scalar_t g[Q];
        load8<scalar_t, Q>(go + dh * W_out, g);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (dh >= begin[r] && dh < end[r]) {
            const T wy = row_weight<kRows>(rows, mode, dh, h0 + r);
            const T we = wy * w_even, wo = wy * w_odd;
#pragma unroll
            for (int j = 0; j < Q; ++j) {  // explicit FMAs, as in the x2 kernel
              acc[r][2 * j] = fma(we, static_cast<T>(g[j]), acc[r][2 * j]);
              acc[r][2 * j + 1] = fma(wo, static_cast<T>(g[j]), acc[r][2 * j + 1]);
            }
          }
        }
      }
      store_rows<scalar_t>(grad_in + p * plane_in + h0 * W_in + k0, W_in, rows.in - h0, acc);
    }
  }
}

}  // namespace

template <typename scalar_t>
void launch_gather_exact(const Call<scalar_t>& c, Kernel k) {
  if constexpr (std::is_same_v<scalar_t, double>) {
    STD_TORCH_CHECK(false, "upsample_bilinear2d: the exact-ratio gathers are not compiled for float64");
  } else {
    using T = opmath_type<scalar_t>;
    const ResizeGeometry& g = c.g;
    const bool quad = k == Kernel::GatherX4, rgb = k == Kernel::GatherNhwcRgbX2;
    const Span exact_w = k == Kernel::GatherHalve ? Span::Halve : quad ? Span::Taps : Span::Double;
    // Rows in closed form when H has W's exact ratio (never at x4), else the row plan.
    const bool exact_rows = !quad && exact_span<T>(g, g.H_in, g.H_out, c.rh) == exact_w;
    const auto plan = make_plan(c, !exact_rows, false);
    const int64_t groups = g.W_in / kV<scalar_t>;
    const bool share = !(k == Kernel::GatherHalve) && times_lanes(groups) < 32;
    const auto pick = [&](auto share_tag) {
      constexpr bool kShare = decltype(share_tag)::value;
      return quad ? gather_times_kernel<scalar_t, 4, 1, kQuadRows, Span::Taps, kShare>
             : rgb ? (exact_rows ? gather_times_kernel<scalar_t, 2, 3, kRgbRows, Span::Double, kShare>
                                 : gather_times_kernel<scalar_t, 2, 3, kRgbRows, Span::Taps, kShare>)
             : exact_w == Span::Double
                 ? (exact_rows ? gather_times_kernel<scalar_t, 2, 1, kTwiceRows, Span::Double, kShare>
                               : gather_times_kernel<scalar_t, 2, 1, kTwiceRows, Span::Taps, kShare>)
                 : (exact_rows ? gather_halve_kernel<scalar_t, kHalveRows, Span::Halve>
                               : gather_halve_kernel<scalar_t, kHalveRows, Span::Taps>);
    };
    auto kernel = share ? pick(std::true_type{}) : pick(std::false_type{});
    const int rows_per = quad ? kQuadRows : rgb ? kRgbRows : exact_w == Span::Double ? kTwiceRows : kHalveRows;
    const int64_t planes = rgb ? g.planes / 3 : g.planes;  // channels-last RGB: a plane is an image
    const int per_warp = share ? 32 / times_lanes(groups) : 1;
    const Launch l = launch_for(per_warp > 1 ? 32 : groups, (g.H_in + rows_per - 1) / rows_per, planes, per_warp, 64);
    kernel<<<l.grid, l.block, 0, c.stream>>>(c.src(), c.dst(), planes, plan.rows, g.W_in, g.mode);
    STD_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

#define CH06_INSTANTIATE(T) template void launch_gather_exact<T>(const Call<T>&, Kernel);
CH06_FOR_EACH_TYPE(CH06_INSTANTIATE)

}  // namespace ch06
