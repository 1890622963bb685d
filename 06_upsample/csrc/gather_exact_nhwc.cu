// Chapter 06: the channels-last exact x2 gathers (half_pixel, C a multiple of kV,
// aligned tensors), rungs GatherNhwcX2 and GatherNhwcX2Tile of the backward's
// ladder (ladder.h).
#include "exact_taps.cuh"

namespace ch06 {
namespace {

// Rung GatherNhwcX2: an exact x2 along W, H any ratio (the row plan). A thread owns
// one channel pack (kV channels, one 16-byte store) of kPairPixels = 2
// neighbouring input pixels w0, w0 + 1 (w0 even) in R rows of one image. Per
// grad_out row it loads the 6 packs of output columns 2 w0 - 1 .. 2 w0 + 4, which
// its two pixels share (the general gather would load 4 per pixel and look up each
// one's weight). Weights: times_tap's, in the x2 kernel's order, so pixel by pixel
// its sums are that kernel's (the general gather's bits, except in column 1).
// w0 is even, so pixel 1 is never a thread's first pixel: the weight-0 read of
// column 0 stays inside the thread's columns. In 2-byte types a pair away from the
// edges takes a copy of the loop whose columns all exist and whose weights are
// constants (kPairSplit); float32 keeps one loop (the copy would spill).
constexpr int kPairPixels = 2;
template <typename scalar_t>
constexpr int kPairRows = sizeof(scalar_t) == 2 ? 1 : 2;
template <typename scalar_t>
constexpr bool kPairSplit = sizeof(scalar_t) == 2;

template <typename scalar_t, int R>
__global__ void __launch_bounds__(kThreads, 3)
    gather_twice_nhwc_kernel(const scalar_t* __restrict__ grad_out, scalar_t* __restrict__ grad_in, int64_t images,
                             int64_t C, AxisPlan<opmath_type<scalar_t>> rows, int64_t W_in, Mode mode) {
  using T = opmath_type<scalar_t>;
  constexpr Span kRows = Span::Taps;  // H resized by another ratio: the row plan
  constexpr int V = kV<scalar_t>, P = kPairPixels, kCols = 2 * P + 2;
  const int64_t groups = C / V;  // the host checks C % V == 0
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // (pixel pair, channel group)
  if (t >= (W_in + P - 1) / P * groups) {
    return;
  }
  const int64_t q = t / groups, c = (t - q * groups) * V, w0 = q * P, W_out = 2 * W_in;
  // Column i (0 .. kCols - 1) is output column 2 w0 - 1 + i; pixel w0 + j reads it through
  // times_tap's tap m = i - 2j (m = -1 for pixel 1 only).
  const int64_t row_out = W_out * C, chunks = (rows.in + R - 1) / R;
  // kEdge: these rules at run time, for a pair with an edge (w0 = 0, or the last pixel in it) and,
  // in float32, every pair; in 2-byte types the other pairs read all their columns with the
  // constant weights, without a test (kPairSplit).
  const auto gather = [&](auto edge_tag) {
    constexpr bool kEdge = decltype(edge_tag)::value;
    // How pixel w0 + j reads column i: times_tap's tap m = i - 2j (-1 .. 3), and no tap of a pixel
    // past the row. Without kEdge, pixels 0, 1 and the last are not in the pair.
    const auto tap = [&](int j, int i) {
      const int64_t w = w0 + j;
      const int m = i - 2 * j;
      if (m < -1 || m > 3) {
        return ColumnTap<T>{false, T(0)};
      }
      if constexpr (!kEdge) {
        return times_tap<2, T>(m, false, false, false);
      }
      const ColumnTap<T> t = times_tap<2, T>(m, w <= 0, w == 1, w + 1 >= W_in);
      return ColumnTap<T>{w < W_in && t.reads, t.weight};
    };
    for (int64_t u = blockIdx.y; u < images * chunks; u += gridDim.y) {
      const int64_t n = u / chunks, h0 = (u - n * chunks) * R;
      int64_t begin[R], end[R];
      row_ranges<kRows>(rows, h0, begin, end);
      const scalar_t* go = grad_out + n * rows.out * row_out + c;
      T acc[P][R][V] = {};
      const auto load_row = [&](int64_t dh, Pack<scalar_t, V>(&g)[kCols]) {
        const scalar_t* row = go + dh * row_out;
#pragma unroll
        for (int i = 0; i < kCols; ++i) {
          const int64_t d = 2 * w0 - 1 + i;
          if (!kEdge || (d >= 0 && d < W_out)) {
            g[i] = load_pack<scalar_t, V>(row + d * C);
          } else {
            g[i] = {};  // no such column: no pixel reads it
          }
        }
      };
      // Explicit FMAs, in the x2 kernel's order (add_row there says why).
      const auto add_row = [&](int r, T wy, const Pack<scalar_t, V>(&g)[kCols]) {
#pragma unroll
        for (int i = 0; i < kCols; ++i) {
#pragma unroll
          for (int j = 0; j < P; ++j) {
            const ColumnTap<T> t = tap(j, i);
            if (t.reads) {
              const T wxy = wy * t.weight;
#pragma unroll
              for (int v = 0; v < V; ++v) {
                acc[j][r][v] = fma(wxy, static_cast<T>(g[i].v[v]), acc[j][r][v]);
              }
            }
          }
        }
      };
      for (int64_t dh = begin[0]; dh < end[R - 1]; ++dh) {
        Pack<scalar_t, V> g[kCols];
        load_row(dh, g);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (dh >= begin[r] && dh < end[r]) {
            add_row(r, row_weight<kRows>(rows, mode, dh, h0 + r), g);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < P; ++j) {
        if (w0 + j < W_in) {
          store_rows<scalar_t>(grad_in + ((n * rows.in + h0) * W_in + w0 + j) * C + c, W_in * C, rows.in - h0,
                               acc[j]);
        }
      }
    }
  };
  if constexpr (kPairSplit<scalar_t>) {
    if (w0 > 0 && w0 + P < W_in) {
      gather(std::false_type{});
      return;
    }
  }
  gather(std::true_type{});
}

// Rung GatherNhwcX2Tile: H an exact x2 too. A block takes a tile of 8 input rows x
// 64 / G pixels x G channel packs of one image (Tile<G>: G = 8, 4, 2 or 1, the
// most that divide C / kV). It first copies the grad_out packs the tile reads
// (rows 2 h0 - 1 .. 2 h0 + 16, columns 2 w0 - 1 .. 2 w0 + 128 / G) into shared
// memory, each pack once, with cp.async (straight from L2 into shared memory: the
// copies in flight hold no registers); the barrier after the wait makes every
// thread's copies visible to the block. Then a thread sums one pixel's pack in
// kTileRows = 2 rows from there, with the weights and in the order of the pair
// kernel (the same bits). A tile away from the image's edges (most of them)
// takes the x2 constants, unrolled, with no test; a tile at an edge takes the
// rules (times_tap, row_weight) at run time. Every grad_out pack is read from
// memory about once (the halos twice), where the pair kernel loads each about
// three times.
constexpr int kTileRows = 2;
template <int G>  // G channel packs x 64 / G pixels x 8 rows
struct Tile {
  static constexpr int pixels = 64 / G, rows = kThreads / 64 * kTileRows;
  static constexpr int rows_out = 2 * rows + 2, cols_out = 2 * pixels + 2;
};

// Copies 16 bytes from global to shared memory, or writes zeros there when !valid
// (gmem is then not read). cp.async needs sm_80; older GPUs take a load and a store.
__device__ __forceinline__ void copy_to_shared(void* smem, const void* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  *static_cast<uint4*>(smem) = valid ? __ldg(static_cast<const uint4*>(gmem)) : make_uint4(0, 0, 0, 0);
#else
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0));
#endif
}

// Waits for this thread's copy_to_shared calls (the caller then synchronises the block).
__device__ __forceinline__ void wait_copies_to_shared() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

template <typename scalar_t, int G>
__global__ void __launch_bounds__(kThreads, 3)
    gather_twice_nhwc_tile_kernel(const scalar_t* __restrict__ grad_out, scalar_t* __restrict__ grad_in,
                                  int64_t C, AxisPlan<opmath_type<scalar_t>> rows, int64_t W_in) {
  using T = opmath_type<scalar_t>;
  constexpr Span kRows = Span::Double;  // H is an exact x2 (half_pixel) too: rows in closed form
  constexpr int V = kV<scalar_t>, R = kTileRows;
  using Shape = Tile<G>;
  static_assert(R == 2, "the interior path sums 2 rows");
  __shared__ uint4 tile[Shape::rows_out][Shape::cols_out][G];
  const int64_t g_tiles = C / V / G, w_tiles = (W_in + Shape::pixels - 1) / Shape::pixels;
  const int64_t h_tiles = (rows.in + Shape::rows - 1) / Shape::rows;
  int64_t b = blockIdx.x;
  const int64_t gt = b % g_tiles;
  b /= g_tiles;
  const int64_t wt = b % w_tiles;
  b /= w_tiles;
  const int64_t ht = b % h_tiles, n = b / h_tiles;
  const int64_t c0 = gt * G * V, w0 = wt * Shape::pixels, h0 = ht * Shape::rows;
  const int64_t H_out = rows.out, W_out = 2 * W_in;
  const int64_t r0 = 2 * h0 - 1, d0 = 2 * w0 - 1;  // the tile's first grad_out row and column
  const scalar_t* go = grad_out + n * H_out * W_out * C + c0;
  for (int i = threadIdx.x; i < Shape::rows_out * Shape::cols_out * G; i += kThreads) {
    const int k = i % G, col = i / G % Shape::cols_out, row = i / (G * Shape::cols_out);
    const int64_t dh = r0 + row, d = d0 + col;
    const bool valid = dh >= 0 && dh < H_out && d >= 0 && d < W_out;
    copy_to_shared(&tile[row][col][k], valid ? go + (dh * W_out + d) * C + k * V : go, valid);
  }
  wait_copies_to_shared();
  __syncthreads();
  const int k = threadIdx.x % G, px = threadIdx.x / G % Shape::pixels, ry = threadIdx.x / (G * Shape::pixels);
  const int64_t w = w0 + px, h = h0 + ry * R;
  if (w >= W_in || h >= rows.in) {
    return;
  }
  T acc[R][V] = {};
  scalar_t* dst = grad_in + ((n * rows.in + h) * W_in + w) * C + c0 + k * V;
  if (h0 > 0 && h0 + Shape::rows < rows.in && w0 > 0 && w0 + Shape::pixels < W_in) {
    // Rows 2 h - 1 .. 2 h + 4 (tile rows 2 R ry + i), columns 2 w - 1 .. 2 w + 2 (tile columns
    // 2 px + m), weights 1/4, 3/4, 3/4, 1/4 both ways: the sums of the rule below, in its order.
#pragma unroll
    for (int i = 0; i < 2 * R + 2; ++i) {
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        Pack<scalar_t, V> g;
        const uint4 raw = tile[2 * R * ry + i][2 * px + m][k];
        memcpy(&g, &raw, sizeof(raw));
        const T wx = m == 0 || m == 3 ? T(0.25) : T(0.75);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int j = i - 2 * r;  // this row's tap
          if (j >= 0 && j < 4) {
            const T wxy = (j == 0 || j == 3 ? T(0.25) : T(0.75)) * wx;
#pragma unroll
            for (int v = 0; v < V; ++v) {
              acc[r][v] = fma(wxy, static_cast<T>(g.v[v]), acc[r][v]);
            }
          }
        }
      }
    }
    store_rows<scalar_t>(dst, W_in * C, R, acc);
    return;
  }
  // Pixel w reads column 2 w - 1 + m, tile column 2 px + m, through times_tap's tap m (-1 .. 3).
  ColumnTap<T> taps[5];
#pragma unroll
  for (int m = -1; m <= 3; ++m) {
    taps[m + 1] = times_tap<2, T>(m, w <= 0, w == 1, w + 1 >= W_in);
  }
  int64_t begin[R], end[R];
  row_ranges<kRows>(rows, h, begin, end);
  for (int64_t dh = begin[0]; dh < end[R - 1]; ++dh) {
    Pack<scalar_t, V> g[5];
#pragma unroll
    for (int m = 0; m < 5; ++m) {
      if (taps[m].reads) {
        const uint4 raw = tile[dh - r0][2 * px + m - 1][k];
        memcpy(&g[m], &raw, sizeof(raw));
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (dh >= begin[r] && dh < end[r]) {
        const T wy = row_weight<kRows>(rows, Mode::HalfPixel, dh, h + r);
#pragma unroll
        for (int m = 0; m < 5; ++m) {
          if (taps[m].reads) {
            const T wxy = wy * taps[m].weight;
#pragma unroll
            for (int v = 0; v < V; ++v) {
              acc[r][v] = fma(wxy, static_cast<T>(g[m].v[v]), acc[r][v]);
            }
          }
        }
      }
    }
  }
  store_rows<scalar_t>(dst, W_in * C, rows.in - h, acc);
}

}  // namespace

template <typename scalar_t>
void launch_gather_nhwc_x2(const Call<scalar_t>& c, bool tile) {
  if constexpr (std::is_same_v<scalar_t, double>) {
    STD_TORCH_CHECK(false, "upsample_bilinear2d: the channels-last x2 gathers are not compiled for float64");
  } else {
    const ResizeGeometry& g = c.g;
    const int64_t images = g.planes / g.channels, groups = g.channels / kV<scalar_t>;
    const auto plan = make_plan(c, !tile, false);  // the tile kernel's rows are in closed form
    if (tile) {
      const auto tiles = [&](auto packs_tag) {
        constexpr int G = decltype(packs_tag)::value;
        using Shape = Tile<G>;
        const int64_t blocks = images * ((g.H_in + Shape::rows - 1) / Shape::rows) *
                               ((g.W_in + Shape::pixels - 1) / Shape::pixels) * (groups / G);
        STD_TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "upsample_bilinear2d: ", blocks,
                        " tiles are too many for one launch");
        gather_twice_nhwc_tile_kernel<scalar_t, G><<<static_cast<unsigned>(blocks), kThreads, 0, c.stream>>>(
            c.src(), c.dst(), g.channels, plan.rows, g.W_in);
        STD_CUDA_KERNEL_LAUNCH_CHECK();
      };
      return groups % 8 == 0   ? tiles(std::integral_constant<int, 8>{})
             : groups % 4 == 0 ? tiles(std::integral_constant<int, 4>{})
             : groups % 2 == 0 ? tiles(std::integral_constant<int, 2>{})
                               : tiles(std::integral_constant<int, 1>{});
    }
    constexpr int R = kPairRows<scalar_t>;
    const Launch l = launch_rows((g.W_in + kPairPixels - 1) / kPairPixels * groups, images * ((g.H_in + R - 1) / R));
    gather_twice_nhwc_kernel<scalar_t, R><<<l.grid, l.block, 0, c.stream>>>(c.src(), c.dst(), images, g.channels,
                                                                            plan.rows, g.W_in, g.mode);
    STD_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

#define CH06_INSTANTIATE(T) template void launch_gather_nhwc_x2<T>(const Call<T>&, bool);
CH06_FOR_EACH_TYPE(CH06_INSTANTIATE)

}  // namespace ch06
