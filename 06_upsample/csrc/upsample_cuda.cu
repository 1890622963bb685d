// Chapter 06: the CUDA kernels.
//
// Work decomposition. threadIdx.x / blockIdx.x always run along w, the
// contiguous axis, so that a warp reads and writes neighbouring elements.
//
//   forward:  x -> a group of kV output columns,  y -> a chunk of kRowsNchw rows,     z -> a plane (n, c)
//   scatter:  x -> an output column w,            y -> an output row h,               z -> a group of kPlanes planes
//   gather:   x -> an input column,               y -> an input row,                  z -> a group of kPlanes planes
//   exact x2 / x0.5 gathers: x -> a group of kV input columns, y -> a pair of input rows, z -> a plane
//   channels-last: along a row of pixels with the channel fastest, x -> kV values (forward), a pixel's group
//   of channels (gather) or one value (scatter); y -> a chunk of kRows rows (forward) or a row (n, h)
//   channels-last x2 gather through shared memory: x -> a tile (8 input rows x 64 / G pixels x G channel packs)
//   channels-last RGB x2 forward: x -> kV output pixels (3 kV values), y -> a chunk of kRowsNhwc rows
//
// A thread computes its taps once and reuses them for all the pixels it owns:
// less index arithmetic per pixel, and several independent loads in flight.
// Index arithmetic is 64-bit where it multiplies by a plane count
// (N * C * H * W may pass 2^31).
//
// On the stable ABI (see the README, "Shipping on the stable ABI"):
//   device guard   torch::stable::accelerator::DeviceGuard (was c10::cuda::CUDAGuard)
//   stream         aoti_torch_get_current_cuda_stream, a C function of libtorch
//                  (was c10::cuda::getCurrentCUDAStream); declared when USE_CUDA
//                  is defined, which the build does for this file
//   launch check   STD_CUDA_KERNEL_LAUNCH_CHECK (was C10_CUDA_KERNEL_LAUNCH_CHECK)
//   temporaries    torch::stable::new_empty / new_zeros, i.e. aten ops called
//                  through the dispatcher's C interface, on the caching allocator
#include <cuda_runtime.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/macros.h>
#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/shim_utils.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "kernels.h"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGrid = 65535;  // the limit of gridDim.y and gridDim.z

struct Launch {
  dim3 grid, block;
};

// Threads along W (a multiple of 32, at most max_tx), the rest of the block along H.
// W and H count what one thread handles along each axis (pixels, or groups of them).
Launch launch_for(int64_t W, int64_t H, int64_t planes, int planes_per_thread, int max_tx = kThreads) {
  const int tx = static_cast<int>(std::min<int64_t>(max_tx, (W + 31) / 32 * 32));
  const int ty = kThreads / tx;
  const int64_t gx = (W + tx - 1) / tx;
  STD_TORCH_CHECK(gx <= std::numeric_limits<int32_t>::max(), "upsample_bilinear2d: W = ", W,
                  " is too large for one launch");
  // Grid-stride loops in the kernels cover rows and plane groups beyond 65535 blocks.
  const int64_t gy = std::min<int64_t>((H + ty - 1) / ty, kMaxGrid);
  const int64_t gz = std::min<int64_t>((planes + planes_per_thread - 1) / planes_per_thread, kMaxGrid);
  return {dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(gz)), dim3(tx, ty)};
}

// The forward. A thread owns kV neighbouring output columns (one vector store
// per row) and kRowsNchw consecutive output rows of one plane. Its column taps are
// computed once. Going down its rows, it keeps the two input rows it is
// blending, already sampled along W (`top`, `bottom`), in registers: when the
// next output row reads the same input rows it only blends again, and when it
// moves down by one input row the old bottom becomes the new top. At x2 each
// sampled input row serves two output rows, at x4 four: the scattered loads
// drop from 4 per output pixel to about 1.5 (x2) and 1 (x4), counting the two
// rows each chunk starts with. (The CPU kernel does the same with its line cache.)
constexpr int kRows = 8;
// The NCHW forward of 2-byte types takes twice as many: a bfloat16 thread's
// row is 8 outputs (16 bytes) with 16 scattered 2-byte loads, so per byte it
// does twice the work of a float thread, and 16 rows share each sampled input
// row between more outputs. float32 keeps 8: in one A/B run (H100) 16 rows took
// x2 0.256 -> 0.251 ms but x4 0.400 -> 0.409 and RGB 1080p 0.053 -> 0.056, and
// 4 rows were slower in all three (x2 0.277 ms).
template <typename scalar_t>
constexpr int kRowsNchw = sizeof(scalar_t) == 2 ? 16 : kRows;
// The channels-last forward takes as many, for the same reason: in one A/B run
// (H100), 16 rows for 2-byte types instead of 8 took RGB 1080p bfloat16 from
// 0.044 to 0.037 ms (47% -> 55%) and x2 bfloat16 from 0.131 to 0.130 ms; 4 rows
// took them to 0.060 and 0.145 ms. float32 keeps 8 here too: in a later A/B
// run (CUDA-graph replays), channels-last RGB 1080p float32 took 0.0534 ms with
// 8 rows, 0.0543 with 16 and 0.0630 with 4, and x2 (8, 64, 256, 256) 0.241,
// 0.241 and 0.257 ms.
template <typename scalar_t>
constexpr int kRowsNhwc = kRowsNchw<scalar_t>;
// ...and with 16 rows of 8 outputs a 2-byte thread holds 102 registers: two
// blocks of 256 threads per SM, too few warps to hide the loads' latency (ncu:
// 3.7 active warps per scheduler, no warp ready in 42% of cycles). Asking for
// 3 blocks per SM caps it at 80 (ptxas then spills 128 bytes, and it is still
// faster): 0.201 -> 0.176 ms in bfloat16 (H100, one A/B run). float32 and
// double ask for 4 blocks (64 registers, as without a bound): asking for 3, or
// for 1 (ptxas then took 70), made float32 x2 0.286 ms instead of 0.258.
template <typename scalar_t>
constexpr int kMinBlocksNchw = sizeof(scalar_t) == 2 ? 3 : 4;

// kV outputs make one 16-byte store: 2 doubles, 4 floats, 8 halves or bfloat16s.
// (With 4 outputs per thread in every dtype, a bfloat16 thread would move half
// the bytes of a float thread for the same index arithmetic and the same
// number of loads in flight: as slow per call as float, so half as fast per
// byte.)
template <typename scalar_t>
constexpr int kV = 16 / static_cast<int>(sizeof(scalar_t));

// A Pack is aligned to its size when that is a power of two up to 16 bytes (one
// vector load or store); the channels-last RGB forward's 48-byte pack of three
// 16-byte stores is aligned to 16.
constexpr size_t pack_align(size_t bytes) {
  return bytes >= 16 ? 16 : bytes;
}

template <typename scalar_t, int V>
struct alignas(pack_align(sizeof(scalar_t) * V)) Pack {
  scalar_t v[V];
};

// A thread's V channels of one pixel, as one 16-byte load.
template <typename scalar_t, int V>
__device__ __forceinline__ Pack<scalar_t, V> load_pack(const scalar_t* __restrict__ p) {
  Pack<scalar_t, V> r;
  static_assert(sizeof(r) == 16, "a Pack is 16 bytes");
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  memcpy(&r, &raw, sizeof(r));
  return r;
}

// Store n <= V outputs. `vector`: all V at once, as one aligned vector store
// marked streaming (st.global.cs: evict first). The output is 4x (x2) to 16x
// (x4) the size of the input and is not read again by this kernel; letting it
// leave L2 first keeps the input rows, which neighbouring threads still
// read, in the cache. The scalar path unrolls over V and tests j < n: a loop
// bounded by n would index r at run time and put it in local memory (ptxas:
// 128 bytes of spill stores in the 2-byte NCHW forward, 56 without it; bf16 x2
// 0.179 -> 0.159 ms, H100, one A/B run, though this path never ran there).
template <typename scalar_t, int V>
__device__ __forceinline__ void store_outputs(scalar_t* dst, const Pack<scalar_t, V>& r, int n, bool vector) {
  if (vector) {
    if constexpr (sizeof(r) == 16) {
      __stcs(reinterpret_cast<float4*>(dst), reinterpret_cast<const float4&>(r));
    } else {
      static_assert(sizeof(r) == 8, "Pack is 8 or 16 bytes");
      __stcs(reinterpret_cast<float2*>(dst), reinterpret_cast<const float2&>(r));
    }
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (j < n) {
        dst[j] = r.v[j];
      }
    }
  }
}

// The walk down a thread's output rows [h_begin, h_end) described above, shared
// by the forward kernels of both layouts. The thread has V outputs per row,
// already placed along W (its column taps): sample(row, dst) fills dst with
// input row `row` sampled at them; store(h, r) writes output row h.
template <typename scalar_t, int V, typename Sample, typename Store>
__device__ __forceinline__ void walk_rows(int64_t h_begin, int64_t h_end, int64_t H_in, opmath_type<scalar_t> rh,
                                          Mode mode, const Sample& sample, const Store& store) {
  using T = opmath_type<scalar_t>;
  T top[V], bottom[V];
  int64_t row0 = -1, row1 = -1;  // the input rows in top and bottom (none yet)
  for (int64_t h = h_begin; h < h_end; ++h) {
    const Taps<T> yt = source_taps<T>(h, H_in, rh, mode);
    // In NCHW, h is the same for the whole warp, so every branch below is taken
    // by all 32 threads or by none: no divergence.
    if (yt.i0 != row0 || yt.i1 != row1) {
      if (yt.i0 == row1) {  // moved down one input row: reuse, don't reload
#pragma unroll
        for (int j = 0; j < V; ++j) {
          top[j] = bottom[j];
        }
      } else {
        sample(yt.i0, top);
      }
      sample(yt.i1, bottom);
      row0 = yt.i0;
      row1 = yt.i1;
    }
    Pack<scalar_t, V> r;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      // the blend along H, on the cached row samples
      r.v[j] = static_cast<scalar_t>((T(1) - yt.l) * top[j] + yt.l * bottom[j]);
    }
    store(h, r);
  }
}

// How a thread samples an input row at its V output columns.
//   Taps    the general case: two scalar loads per output, at the taps' columns.
//   Halve   an exact x0.5 along W (half_pixel or tf_legacy, ratio 2, W_in = 2 *
//           W_out): output column d reads input columns 2d and 2d + 1, so a
//           thread's V outputs read exactly the 2V columns from 2 * w0, which
//           are two aligned 16-byte packs, instead of 4V scalar loads whose
//           lanes sit 2V elements apart. H100, one A/B run: bfloat16 0.062 ->
//           0.034 ms (45% -> 81% of the floor), float32 0.062 -> 0.060 ms.
//   Double  an exact x2 along W in half_pixel (ratio 0.5, W_out = 2 * W_in):
//           output 2k reads columns k - 1 and k, output 2k + 1 reads k and
//           k + 1 (weights 0.25 / 0.75 and 0.75 / 0.25). A thread's V outputs
//           from w0 = 2 * k0 read the V/2 + 2 columns from k0 - 1: three aligned
//           8-byte loads from k0 - V/2, every tap a fixed register of them, no
//           per-tap address arithmetic. The first and the last thread of a row
//           (output 0 clamps s to 0; the last output's second tap clamps to the
//           last column) pick their edge taps with a select, not a branch: a
//           branch made the warps holding them run both paths, and at W_out =
//           512 that is half the warps (float32 x2 0.254 -> 0.297-0.336 ms).
//           With selects, one A/B run: float32 x2 0.254 -> 0.245 ms (88% ->
//           91%), bfloat16 0.158 -> 0.141 ms (71% -> 79%), RGB 0.053 -> 0.052.
// All three compute sample_line's (1 - l) * a + l * b. Halve gives the bits of
// Taps; Double may differ from Taps in the last float bit (nvcc fuses a
// different one of the two products into an FMA there).
enum class Span : int { Taps, Halve, Double };

// The exact-x2 path asks every dtype for 4 blocks per SM. Its taps are fixed
// registers, not loaded addresses, so a 2-byte thread needs 66 registers, not
// 102; under the 3-block cap of kMinBlocksNchw that is 3 blocks, a third of the
// warp slots (ncu: 34% warps active, stalled on loads). Capped at 64, 4 blocks:
// bfloat16 x2 0.141 -> 0.131 ms (79% -> 85%), one A/B run on the H100. float32
// at 5 blocks (48 registers) was level there (x2 0.243 ms both).
template <typename scalar_t, Span kSpan>
constexpr int kMinBlocksForward = kSpan == Span::Double ? 4 : kMinBlocksNchw<scalar_t>;

// N values (8 bytes) as one load.
template <typename scalar_t, int N>
__device__ __forceinline__ void load8(const scalar_t* __restrict__ p, scalar_t* dst) {
  static_assert(N * sizeof(scalar_t) == 8, "8 bytes");
  const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p));
  memcpy(dst, &raw, 8);
}

template <typename scalar_t, Span kSpan>
__global__ void __launch_bounds__(kThreads, kMinBlocksForward<scalar_t, kSpan>) forward_kernel(
    const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t planes, int64_t H_in, int64_t W_in,
    int64_t H_out, int64_t W_out, opmath_type<scalar_t> rh, opmath_type<scalar_t> rw, Mode mode,
    bool vector_stores) {
  using T = opmath_type<scalar_t>;
  constexpr int V = kV<scalar_t>;
  const int64_t w0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (w0 >= W_out) {
    return;
  }
  const int n = static_cast<int>(W_out - w0 < V ? W_out - w0 : V);  // fewer than V at the right edge
  const bool vector = vector_stores && n == V;
  Taps<T> xt[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    xt[j] = source_taps<T>(j < n ? w0 + j : w0, W_in, rw, mode);
  }
  const bool first = w0 == 0, last = w0 + V == W_out;  // Double: the threads at the edges
  const int64_t plane_in = H_in * W_in, plane_out = H_out * W_out;  // 64-bit: planes * plane may pass 2^31
  constexpr int R = kRowsNchw<scalar_t>;
  const int64_t chunks = (H_out + R - 1) / R;
  for (int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; c < chunks;
       c += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const int64_t h_begin = c * R, h_end = h_begin + R < H_out ? h_begin + R : H_out;
    for (int64_t p = blockIdx.z; p < planes; p += gridDim.z) {
      const scalar_t* xp = x + p * plane_in;
      scalar_t* op = out + p * plane_out + w0;
      auto store = [&](int64_t h, const Pack<scalar_t, V>& r) {
        store_outputs<scalar_t, V>(op + h * W_out, r, n, vector);
      };
      auto by_taps = [&](int64_t row, T(&dst)[V]) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          dst[j] = sample_line<scalar_t, T>(xp + row * W_in, xt[j]);
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
            dst[j] = (T(1) - xt[j].l) * static_cast<T>(span[2 * j]) + xt[j].l * static_cast<T>(span[2 * j + 1]);
          }
        }, store);
      } else if constexpr (kSpan == Span::Double) {
        walk_rows<scalar_t, V>(h_begin, h_end, H_in, rh, mode, [&](int64_t row, T(&dst)[V]) {
          constexpr int H = V / 2;
          const scalar_t* src = xp + row * W_in + w0 / 2;  // column k0 = w0 / 2
          scalar_t span[3 * H];                           // columns k0 - H .. k0 + 2H - 1
          load8<scalar_t, H>(first ? src : src - H, span);  // the first thread: before the row, unused
          load8<scalar_t, H>(src, span + H);
          load8<scalar_t, H>(last ? src : src + H, span + 2 * H);  // the last thread: past the row, unused
#pragma unroll
          for (int j = 0; j < V; ++j) {  // output 2t reads span[H + t - 1, H + t], 2t + 1 span[H + t, H + t + 1]
            const int lo = H + j / 2 - (j % 2 == 0 ? 1 : 0);
            scalar_t a = span[lo], b = span[lo + 1];
            if (j == 0 && first) {  // output 0: s clamps to 0, taps 0 and 1 (weight 0)
              a = span[H];
              b = span[H + 1];
            }
            if (j == V - 1 && last) {  // the last output: its second tap clamps to the last column
              b = span[2 * H - 1];
            }
            dst[j] = (T(1) - xt[j].l) * static_cast<T>(a) + xt[j].l * static_cast<T>(b);
          }
        }, store);
      } else {
        walk_rows<scalar_t, V>(h_begin, h_end, H_in, rh, mode, by_taps, store);
      }
    }
  }
}

// Backward by scatter (what PyTorch's own kernel does): one thread per
// grad_out element adds its four weighted contributions into grad_in. Several
// threads hit the same grad_in element, so the adds must be atomic; the order
// in which they land varies between runs, and float addition is not
// associative, so the low bits of the result vary too.
// acc_t is float for float16/bfloat16: an atomicAdd on a 16-bit value would
// round the running sum to 16 bits after every add, so we accumulate in a
// float buffer and convert once.
// The four atomic adds of one grad_out value g, read through the taps yt (along
// H) and xt (along W). `row` and `pixel` are grad_in's strides in elements: W_in
// and 1 in NCHW, W_in * C and C in channels-last.
template <typename acc_t, typename T>
__device__ __forceinline__ void scatter_taps(acc_t* grad_in, int64_t row, int64_t pixel, const Taps<T>& yt,
                                             const Taps<T>& xt, T g) {
  const T top = (T(1) - yt.l) * g, bottom = yt.l * g;
  atomicAdd(grad_in + yt.i0 * row + xt.i0 * pixel, static_cast<acc_t>((T(1) - xt.l) * top));
  atomicAdd(grad_in + yt.i0 * row + xt.i1 * pixel, static_cast<acc_t>(xt.l * top));
  atomicAdd(grad_in + yt.i1 * row + xt.i0 * pixel, static_cast<acc_t>((T(1) - xt.l) * bottom));
  atomicAdd(grad_in + yt.i1 * row + xt.i1 * pixel, static_cast<acc_t>(xt.l * bottom));
}

template <typename scalar_t, typename acc_t, int kPlanes>
__global__ void scatter_kernel(const scalar_t* __restrict__ grad_out, acc_t* __restrict__ grad_in, int64_t planes,
                               int64_t H_in, int64_t W_in, int64_t H_out, int64_t W_out,
                               opmath_type<scalar_t> rh, opmath_type<scalar_t> rw, Mode mode) {
  using opmath_t = opmath_type<scalar_t>;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= W_out) {
    return;
  }
  const Taps<opmath_t> xt = source_taps<opmath_t>(w, W_in, rw, mode);
  for (int64_t h = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; h < H_out;
       h += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const Taps<opmath_t> yt = source_taps<opmath_t>(h, H_in, rh, mode);
    for (int64_t p0 = static_cast<int64_t>(blockIdx.z) * kPlanes; p0 < planes;
         p0 += static_cast<int64_t>(gridDim.z) * kPlanes) {
#pragma unroll
      for (int k = 0; k < kPlanes; ++k) {
        const int64_t p = p0 + k;
        if (p < planes) {
          const opmath_t g = static_cast<opmath_t>(grad_out[(p * H_out + h) * W_out + w]);
          scatter_taps(grad_in + p * H_in * W_in, W_in, 1, yt, xt, g);
        }
      }
    }
  }
}

// Backward by gather: one thread per grad_in element (for kPlanes planes). It
// sums the gradients of the output pixels that read it, times the weights
// they read it with. One writer per element, a fixed order of additions: no
// atomics, no zeroing pass, and the same bits on every run.
//
// Which outputs read input index i, and with which weights, depends only on
// the axis, not on the plane or on the other axis. So plan_kernel first builds
// two small tables per axis (taps per output index, [begin, end) per input
// index), and the gather kernel only looks them up: no search per thread.
template <typename T>
struct AxisPlan {
  int64_t in, out;
  T ratio;
  int64_t* i0;     // [out] first tap of each output index
  int64_t* i1;     // [out] second tap
  T* l;            // [out] weight of the second tap
  int64_t* begin;  // [in]  first output index that reads each input index
  int64_t* end;    // [in]  one past the last
};

template <typename T>
__global__ void plan_kernel(AxisPlan<T> rows, AxisPlan<T> cols, Mode mode) {
  const AxisPlan<T> a = blockIdx.y == 0 ? rows : cols;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < a.out) {
    const Taps<T> taps = source_taps<T>(t, a.in, a.ratio, mode);
    a.i0[t] = taps.i0;
    a.i1[t] = taps.i1;
    a.l[t] = taps.l;
  }
  if (t < a.in) {
    gather_range<T>(t, a.in, a.out, a.ratio, mode, a.begin[t], a.end[t]);
  }
}


// The column half of the gather. Thread w reads the same grad_out columns
// [cols.begin[w], cols.end[w]) with the same weights in every row and plane, so
// it looks them up once, into registers: a ColumnWindow of K columns from
// `first`, `count` of them real, weight[k] the weight with which column
// first + k reads input column w (0 past count). K is a compile-time 2, 4 or 8
// (the host picks the smallest that holds an interior window, 2 / rw rounded
// up); a longer window, at a clamped edge or with an odd scale, is summed K
// columns at a time. Reading the weights from the plan in the loop instead,
// as the first version did, cost three table loads per column per row, and
// the loads, not the arithmetic, are what bounds this kernel (ncu: L1/TEX at
// 91.5% of its peak). Measured on the H100 in one A/B run: x2 0.305 -> 0.264
// ms (73% -> 85% of the floor), x4 0.914 -> 0.774, RGB 1080p 0.094 -> 0.074;
// bf16 x2 and x0.5 level (0.196 -> 0.203, 0.073 -> 0.075).
//
// With column packs (V > 1, below) `first` is rounded down to a multiple of V,
// so that the window's columns can be loaded V at a time; the columns before
// the real first one are not the thread's: the window's columns are first + k
// for lo <= k < count. Without packs (V = 1) lo is 0.
template <typename T, int K>
struct ColumnWindow {
  int64_t first;
  int lo, count;
  T weight[K];
};

template <typename T, int K, int V>
__device__ __forceinline__ ColumnWindow<T, K> column_window(const AxisPlan<T>& cols, int64_t w, int64_t first) {
  ColumnWindow<T, K> win;
  win.first = first;
  const int64_t skip = cols.begin[w] - first;
  win.lo = V == 1 || skip < 0 ? 0 : static_cast<int>(skip);  // a compile-time 0 without packs
  const int64_t left = cols.end[w] - first;
  win.count = static_cast<int>(left < K ? left : K);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const bool real = k >= win.lo && k < win.count;
    const int64_t d = first + (real ? k : win.lo);
    win.weight[k] = real ? tap_weight<T>(Taps<T>{cols.i0[d], cols.i1[d], cols.l[d]}, w) : T(0);
  }
  return win;
}

// The values of V neighbouring grad_out columns in N planes, from column p on:
// v[j][k] is column j of plane k. Planes are plane_out elements apart (NCHW),
// or, with kPack, N neighbouring channels loaded as one 16-byte pack
// (channels-last, C a multiple of N, 16-byte aligned; V is 1 there). Scalar
// loads of 4 channels whose lanes sit 16 bytes apart cost a warp four L1
// wavefronts each, one pack load four in all: channels-last x2 float32 0.465 ->
// 0.345 ms, bfloat16 (8 channels a pack) 0.353 -> 0.232 ms (H100, one A/B run,
// together with the column windows).
//   V > 1 (column packs, NCHW float32): the V columns of each plane as one
//   16-byte load; p must sit on a 16-byte boundary.
template <int N, int V, bool kPack, typename scalar_t, typename T>
__device__ __forceinline__ void load_columns(const scalar_t* __restrict__ p, int64_t plane_out, T (&v)[V][N]) {
  if constexpr (kPack) {
    static_assert(V == 1, "channel packs take one column at a time");
    const Pack<scalar_t, N> r = load_pack<scalar_t, N>(p);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      v[0][k] = static_cast<T>(r.v[k]);
    }
  } else if constexpr (V == 1) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      v[0][k] = static_cast<T>(p[k * plane_out]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const Pack<scalar_t, V> r = load_pack<scalar_t, V>(p + k * plane_out);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        v[j][k] = static_cast<T>(r.v[j]);
      }
    }
  }
}

// Exercise gather-cuda. Adds to acc[p] (plane p) what the window's columns
// give input pixel (h, w) through every grad_out row that reads input row h.
// grad_out points at the first plane (NCHW: plane p is p * plane_out further;
// channels-last: the planes are neighbouring channels, plane_out = 1). Within a
// plane, neighbouring pixels are `step` elements apart (1 in NCHW, C in
// channels-last) and rows step * row_length (row_length = W_out). Columns are
// loaded V at a time (load_columns); V divides K, and with V > 1, win.first and
// every row start sit on a pack boundary.
template <int N, int K, int V, bool kPack, typename scalar_t, typename T>
__device__ __forceinline__ void gather_planes(const scalar_t* __restrict__ grad_out, int64_t plane_out, int64_t step,
                                              int64_t h, const AxisPlan<T>& rows, int64_t row_length,
                                              const ColumnWindow<T, K>& win, T (&acc)[N]) {
  // BEGIN SOLUTION gather-cuda
  // STUB: for (int p = 0; p < N; ++p) acc[p] = static_cast<T>(NAN);  // NaN until you write it
  for (int64_t dh = rows.begin[h]; dh < rows.end[h]; ++dh) {
    const T wy = tap_weight<T>(Taps<T>{rows.i0[dh], rows.i1[dh], rows.l[dh]}, h);
    const scalar_t* g_row = grad_out + (dh * row_length + win.first) * step;
#pragma unroll
    for (int c = 0; c < K; c += V) {
      if (c < win.count) {
        T v[V][N];
        load_columns<N, V, kPack>(g_row + c * step, plane_out, v);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const int k = c + j;
          if (k >= win.lo && k < win.count) {
            const T weight = wy * win.weight[k];
#pragma unroll
            for (int p = 0; p < N; ++p) {
              acc[p] += weight * v[j][p];
            }
          }
        }
      }
    }
  }
  // END SOLUTION
}

// The gather's stores. grad_in is written once and not read again by the
// kernel, so its stores are streaming (st.global.cs, evict first), as the
// forward's are: L2 keeps the grad_out rows that neighbouring threads still
// read. The channels-last gather with channel packs (kPack) writes its N
// channels as one 16-byte store; before, they were N scalar stores. One A/B run
// on the H100 (CUDA-graph replays of the kernel op, float32 unless named, ms):
//   channels-last x0.5 bfloat16 (8, 64, 256, 256) 0.0735 -> 0.0387 (38% -> 72%:
//     eight 2-byte stores per pixel were the cost), x0.5 float32 0.0708 -> 0.0687,
//     x2 float32 0.268 -> 0.264, x2 bfloat16 0.200 -> 0.195;
//   NCHW (streaming stores only): x0.5 0.0731 -> 0.0724, x0.75 0.0276 -> 0.0260,
//     x2, x4 and RGB 1080p level, bfloat16 x2 level (0.176-0.182 both).
// The pack's address is a multiple of 16 bytes: the host checks grad_in's start
// (a fresh allocation) and the thread's first channel is a multiple of N.
template <typename scalar_t>
__device__ __forceinline__ void store_streaming(scalar_t* p, scalar_t v) {
  if constexpr (sizeof(scalar_t) == 2) {  // float16, bfloat16: __stcs takes their bits
    unsigned short bits;
    memcpy(&bits, &v, sizeof(bits));
    __stcs(reinterpret_cast<unsigned short*>(p), bits);
  } else {
    __stcs(p, v);
  }
}

// N sums in T, each rounded once to scalar_t, written as 16-byte streaming
// stores (store_outputs), one per kV values (or one of N < kV values): dst sits
// on a 16-byte boundary. The gathers that own 16 bytes of neighbouring grad_in
// values, or several times 16, end this way.
template <typename scalar_t, int N, typename T>
__device__ __forceinline__ void store_rounded_pack(scalar_t* dst, const T (&acc)[N]) {
  constexpr int P = N < kV<scalar_t> ? N : kV<scalar_t>;  // values per store
  static_assert(N % P == 0, "whole stores");
#pragma unroll
  for (int s = 0; s < N; s += P) {
    Pack<scalar_t, P> r;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      r.v[k] = static_cast<scalar_t>(acc[s + k]);
    }
    store_outputs<scalar_t, P>(dst + s, r, P, true);
  }
}

// grad_in[h, w] of N planes (grad_in points at the first; the same element of
// plane k is k * plane_in further): the whole window, K columns at a time, in
// opmath_t, and one rounding at the store. This thread is the only one that
// writes these N elements. `first` holds the window's first K columns.
template <int N, int K, int V, bool kPack, typename scalar_t, typename T>
__device__ __forceinline__ void gather_pixel(const scalar_t* __restrict__ grad_out, int64_t plane_out,
                                             scalar_t* __restrict__ grad_in, int64_t plane_in, int64_t step, int64_t h,
                                             int64_t w, const AxisPlan<T>& rows, const AxisPlan<T>& cols,
                                             const ColumnWindow<T, K>& first) {
  static_assert(K % V == 0, "a window holds whole packs");
  T acc[N];
#pragma unroll
  for (int k = 0; k < N; ++k) {
    acc[k] = 0;
  }
  gather_planes<N, K, V, kPack>(grad_out, plane_out, step, h, rows, cols.out, first, acc);
  for (int64_t d = first.first + K; d < cols.end[w]; d += K) {  // windows longer than K
    gather_planes<N, K, V, kPack>(grad_out, plane_out, step, h, rows, cols.out, column_window<T, K, V>(cols, w, d),
                                  acc);
  }
  // One rounding, at the end, and a streaming store (see store_streaming). With
  // channel packs the N values are neighbours: one 16-byte store, the forward's.
  if constexpr (kPack) {
    store_rounded_pack<scalar_t, N>(grad_in, acc);
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      store_streaming(grad_in + k * plane_in, static_cast<scalar_t>(acc[k]));
    }
  }
}

// The NCHW gather's block: 64 threads along W, 4 input rows. Neighbouring input
// rows read overlapping grad_out rows (at x2, rows h and h + 1 share two of
// their four), which a block spanning several rows can find in L1. Measured on
// the H100 against 256 x 1 in one run: x2 0.319 -> 0.307 ms, RGB 1080p 0.099 ->
// 0.094 ms, x4 no change; 32 x 8 and 128 x 2 no better, and channels-last
// blocks of 2, 4 or 8 rows no faster. So L2 re-reads were not what bounds it.
constexpr int kGatherWidth = 64;

// Planes per thread in the NCHW gather: the row weights and the loop over the
// window are shared by that many values. 2-byte types take 16: bf16 x2 0.252
// -> 0.198 ms (H100, one A/B run); float32 keeps 8: 16 were slower in an
// earlier A/B run, and 4 in a later one (x2 0.304 -> 0.415 ms, x4 0.906 ->
// 1.268, x0.5 0.073 -> 0.108), both before the column weights moved into
// registers. With the weights in registers, measured again (H100, one A/B
// run): bf16 with 8 planes level (0.202 ms both), float32 with 4 planes
// slower (x2 0.264 -> 0.304 ms, x0.5 0.075 -> 0.112, x4 0.770 -> 0.799). (The
// channels-last gather's kV channels per thread was the fastest of 1, 2, kV,
// 2 kV and 4 kV.)
template <typename scalar_t>
constexpr int kGatherPlanes = sizeof(scalar_t) == 2 ? 16 : 8;

// Input rows per NCHW gather thread: the grid covers H_in / rows of them and
// the kernel's grid-stride loop takes the rest. A thread's column window serves
// kPlanes values per row; with fewer than 8 planes (an RGB image has 3) that is
// too little work for its lookups, as in the channels-last gather (kNhwcRows),
// so such a thread takes 4 rows. One A/B run on the H100, 1, 2 or 4 rows for
// every case: RGB 1080p 0.074 -> 0.068 -> 0.066 ms (56% -> 63%); with 8 or 16
// planes 4 rows were slower (x4 0.717 -> 0.784 ms, bfloat16 0.174 -> 0.185) and
// 2 rows mixed (x2 0.264 -> 0.258, x4 0.717 -> 0.736), so they keep 1.
// A window of at most 2 columns (kw == 2: a downsampling, or a resize by at
// most x1) is also too little work for one row: such a thread takes 4 rows too.
// One A/B run on the H100 (CUDA-graph replays, ms), 1 -> 4 rows: x0.5 float32
// 0.0731 -> 0.0720, bfloat16 0.0471 -> 0.0468, x0.75 0.0276 -> 0.0270; 8 rows were
// slower at x0.5 (0.0736).
constexpr int gather_rows_per_thread(int planes_per_thread, int window) {
  return planes_per_thread < 8 || window == 2 ? 4 : 1;
}

// Both gather kernels ask for 4 blocks of 256 threads per SM, which caps them
// at 64 registers (the column-pack launch asks for 3: kColumnPackMinBlocks, below).
// Left alone, ptxas gave the bf16 and x4 gathers 72-78 registers and the
// channels-last ones 76: 3 blocks, a third of the warp slots
// (ncu), with the warps waiting on loads. With the cap (ptxas spills 4-12
// bytes in some instantiations, 76-120 in a few 2-byte ones), in one A/B run
// on the H100: bf16 x2 0.203 -> 0.179 ms, x4 0.771 -> 0.732, channels-last
// float32 0.345 -> 0.306, RGB 1080p channels-last 0.109 -> 0.085; the other
// cases level. 5 blocks (51 registers) were slower (x2 0.269 -> 0.325, x4
// 0.720 -> 0.951). double keeps its registers: capped, its instantiations
// spill up to 152 bytes, and no case of the benchmark measures it.
template <typename scalar_t>
constexpr int kGatherMinBlocks = sizeof(scalar_t) == 8 ? 1 : 4;
// The channels-last gather of 2-byte types asks for 5 (51 registers): bfloat16
// x2 0.232 -> 0.210 ms, RGB 1080p 0.081 -> 0.077 (one A/B run, H100). float32
// keeps 4, as in NCHW, where 5 blocks were slower.
template <typename scalar_t>
constexpr int kGatherNhwcMinBlocks = sizeof(scalar_t) == 2 ? 5 : kGatherMinBlocks<scalar_t>;

// Column packs (the NCHW float32 gather of an upsampling by more than 3, where
// a window holds more than 6 columns). At x4 a thread's window is 8 columns from 4w - 2,
// lanes 4 columns apart: each scalar load of a warp spans 512 bytes to use
// 128, and the kernel was bound by L1 (ncu, SPEED.md). Loaded as aligned
// 16-byte packs, the window is kColumnPackWindow = 12 columns from a multiple
// of 4 (at x4 the 8 real ones and 2 more on either side, which the sum skips):
// 3 pack loads per plane and row instead of 8 scalar ones. The pack values
// and 12 weights need registers: with 8 planes at once ptxas spilled 236 bytes
// at the 64-register cap and the kernel got slower, so a thread sums its
// planes kPackPlanes = 4 at a time and asks for 3 blocks per SM (80
// registers; ptxas spills 32 bytes in the 8-plane kernel, none with fewer
// planes). Four A/B runs on the H100, x4 (16, 256, 64, 64)
// float32, the kernel without packs at 0.716-0.719 ms (53%) in each; planes
// at a time, blocks per SM:
//   8, 4: 0.867 ms   4, 4: 0.654   2, 4: 0.542-0.545   1, 4: 0.792
//   8, 3: 0.661-0.664   4, 3: 0.497-0.498 (76%)   8 or 4, 2: 0.517-0.519
// At x2 (window 4), packs of 4 or 2 columns were slower in every form (0.264
// -> 0.282-0.451 ms), as at x0.5 and in bfloat16 (8-byte packs): those keep
// scalar loads. So did align_corners x2 (256 -> 512: a window bound of 8, as
// 2 / ratio is just over 4, but 4 or 5 real columns): 0.266 -> 0.386 ms with
// packs. Hence the threshold, 2 / ratio > 6 (one A/B run on the H100, float32,
// ms, without packs -> with): x4 0.718 -> 0.498, align_corners x4 0.740 ->
// 0.492, x5 0.542 -> 0.312, x8 (16, 64, 32, 32) 1.114 -> 0.350; x3, below the
// threshold, 0.156 without packs and 0.171 with; RGB 540p x4 0.081 -> 0.080.
constexpr int kColumnPack = 4;
constexpr int kColumnPackWindow = 12;
constexpr int kPackPlanes = 4;
constexpr int kColumnPackMinBlocks = 3;

template <typename scalar_t, int kPlanes, int K, int V>
__global__ void __launch_bounds__(kThreads, V == 1 ? kGatherMinBlocks<scalar_t> : kColumnPackMinBlocks)
    gather_kernel(const scalar_t* __restrict__ grad_out, scalar_t* __restrict__ grad_in, int64_t planes,
                  AxisPlan<opmath_type<scalar_t>> rows, AxisPlan<opmath_type<scalar_t>> cols) {
  using T = opmath_type<scalar_t>;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= cols.in) {
    return;
  }
  const ColumnWindow<T, K> win =
      column_window<T, K, V>(cols, w, cols.begin[w] / V * V);  // with packs, down to a V boundary
  const int64_t plane_in = rows.in * cols.in, plane_out = rows.out * cols.out;
  for (int64_t h = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; h < rows.in;
       h += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    for (int64_t p0 = static_cast<int64_t>(blockIdx.z) * kPlanes; p0 < planes;
         p0 += static_cast<int64_t>(gridDim.z) * kPlanes) {
      const scalar_t* go = grad_out + p0 * plane_out;
      scalar_t* gi = grad_in + p0 * plane_in + h * cols.in + w;
      if (planes - p0 >= kPlanes) {
        constexpr int S = V == 1 || kPlanes < kPackPlanes ? kPlanes : kPackPlanes;  // planes summed at once
#pragma unroll 1
        for (int s = 0; s < kPlanes; s += S) {
          gather_pixel<S, K, V, false>(go + s * plane_out, plane_out, gi + s * plane_in, plane_in, 1, h, w, rows,
                                       cols, win);
        }
      } else {
        for (int64_t k = 0; k < planes - p0; ++k) {
          gather_pixel<1, K, V, false>(go + k * plane_out, plane_out, gi + k * plane_in, plane_in, 1, h, w, rows,
                                       cols, win);
        }
      }
    }
  }
}

// The row half of the two exact-ratio gathers below: which grad_out rows read
// input row h, [begin, end), and with which weight.
//   kRows = Span::Taps: looked up in the row plan, as the general gather does.
//   Span::Double (H_out = 2 H_in, half_pixel) and Span::Halve (H_in = 2 H_out,
//   not align_corners): worked out in place. The range has a closed form
//   (x2: outputs 2h - 1 .. 2h + 2, clamped, and row 1 is also read by output 0,
//   with weight 0; x0.5: output h / 2 alone), and the weight comes from the
//   functions the plan kernel calls (source_taps, tap_weight), so the bits are
//   the plan's. When W is the same exact ratio, the host then builds no plan
//   at all: no allocation, no plan kernel.
template <Span kRows, typename T>
__device__ __forceinline__ void row_range(const AxisPlan<T>& rows, int64_t h, int64_t& begin, int64_t& end) {
  if constexpr (kRows == Span::Taps) {
    begin = rows.begin[h];
    end = rows.end[h];
  } else if constexpr (kRows == Span::Double) {
    begin = h <= 1 ? 0 : 2 * h - 1;
    end = 2 * h + 3 < rows.out ? 2 * h + 3 : rows.out;
  } else {
    begin = h / 2;
    end = h / 2 + 1;
  }
}

template <Span kRows, typename T>
__device__ __forceinline__ T row_weight(const AxisPlan<T>& rows, Mode mode, int64_t dh, int64_t h) {
  if constexpr (kRows == Span::Taps) {
    return tap_weight<T>(Taps<T>{rows.i0[dh], rows.i1[dh], rows.l[dh]}, h);
  } else if constexpr (kRows == Span::Double) {  // s = dh / 2 - 1/4, clamped to 0 for output 0
    const int64_t i0 = dh == 0 ? 0 : (dh - 1) / 2;
    const T l = dh == 0 ? T(0) : dh % 2 == 1 ? T(0.25) : T(0.75);
    return tap_weight<T>(Taps<T>{i0, i0 + 1 < rows.in ? i0 + 1 : rows.in - 1, l}, h);
  } else {  // s = 2 dh + 1/2 (half_pixel) or 2 dh (tf_legacy)
    return tap_weight<T>(Taps<T>{2 * dh, 2 * dh + 1, mode == Mode::HalfPixel ? T(0.5) : T(0)}, h);
  }
}

// The ranges of a thread's R input rows h0 .. h0 + R - 1. Past the last input row:
// an empty range after the last real one, so that [begin[0], end[R - 1]) covers
// every grad_out row the thread reads.
template <Span kRows, int R, typename T>
__device__ __forceinline__ void row_ranges(const AxisPlan<T>& rows, int64_t h0, int64_t (&begin)[R],
                                           int64_t (&end)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r == 0 || h0 + r < rows.in) {
      row_range<kRows>(rows, h0 + r, begin[r], end[r]);
    } else {
      begin[r] = end[r] = end[r - 1];
    }
  }
}

// The exact gathers' stores: the V values (16 bytes, or a multiple) of each of
// the thread's R rows (W_in values apart) that exist (`rows_left` of them from
// dst's).
template <typename scalar_t, int R, int V, typename T>
__device__ __forceinline__ void store_rows(scalar_t* dst, int64_t W_in, int64_t rows_left, const T (&acc)[R][V]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < rows_left) {
      store_rounded_pack<scalar_t, V>(dst + r * W_in, acc[r]);
    }
  }
}

// The column taps of an exact xF upsampling along W in half_pixel (F = 2 or 4),
// the one rule both exact-upsampling gathers read. Output column d samples
// s = (d + 1/2) / F - 1/2, so input column w is read by the 2F outputs
// F w - F/2 + m, m = 0 .. 2F - 1, with the weights (2 min(m, 2F - 1 - m) + 1) / 2F:
// x2 1/4, 3/4, 3/4, 1/4; x4 1/8, 3/8, 5/8, 7/8, 7/8, 5/8, 3/8, 1/8. The plan's
// weights, exactly (sums of two float taps that are multiples of 1/2F). At the
// edges the plan clamps:
//   column 0 (at_first): outputs 0 .. F/2 - 1 sample s < 0, clamped to 0, and read
//     it with weight 1 (m = F/2 .. F - 1); the taps m < F/2 do not exist;
//   column 1 (at_second): those outputs also read it, with weight 0 (the plan's
//     second tap, l = 0): the taps m = -F/2 .. -1, read only here;
//   the last column (at_last): outputs with s past it read it with both taps,
//     weight 1 (m = F .. F + F/2 - 1); the taps m >= F + F/2 do not exist.
// A tap that does not exist has reads false and the weight 0. A weight-0 tap
// that does exist stays in the sum, as in the plan: 0 * inf is NaN, as in
// PyTorch's backward.
template <typename T>
struct ColumnTap {
  bool reads;
  T weight;
};

template <int F, typename T>
__device__ __forceinline__ ColumnTap<T> times_tap(int m, bool at_first, bool at_second, bool at_last) {
  const int from_end = 2 * F - 1 - m;
  const T weight = T(2 * (m < from_end ? m : from_end) + 1) / T(2 * F);
  if (m < 0) {
    return {at_second, T(0)};
  }
  if (m < F / 2) {
    return {!at_first, at_first ? T(0) : weight};
  }
  if (m < F) {
    return {true, at_first ? T(1) : weight};
  }
  if (m < F + F / 2) {
    return {true, at_last ? T(1) : weight};
  }
  return {!at_last, at_last ? T(0) : weight};
}

// The gather of an exact xF upsampling along W in half_pixel (W_out = F * W_in;
// F = 2, the forward's Span::Double transposed, or F = 4). Input column k is
// read by output columns 2k - 1, 2k, 2k + 1 and 2k + 2 at x2, with the weights
// 0.25, 0.75, 0.75 and 0.25 (away from the edges; times_tap has the rule for
// both factors and the edges). A thread owns V = kV neighbouring input columns
// from k0 (one 16-byte store per row; NC = 3 below) of kTwiceRows rows (x4:
// kQuadRows, RGB: kRgbRows) and one plane, instead of one column of kGatherPlanes planes: the FV output
// columns from F * k0 are F aligned 16-byte loads, and the F/2 on either side
// of them are the neighbouring lanes' end values, passed by warp shuffles;
// only lanes 0 and 31 load theirs. The row direction is the general
// gather's (the row plan), so H may be resized by any ratio; at an exact x2
// along H too the rows need no plan (row_range, row_weight), and away from the
// edges their weights are constants (below).
//
// The weights are the plan's, exact (0.25, 0.75 and 1, and their products with
// the row weights), and each input pixel sums its rows and columns in the
// general gather's order, with one exception: column 1, which outputs 0 to 4
// read (output 0 with weight 0), is five columns, and the general gather, with
// windows of four, adds the fifth in a second pass over the rows. Here it is
// added row by row. So the x2 kernel gives the general gather's bits, except in
// column 1, where they may differ by a rounding (float32; in 2-byte types the
// final rounding hid it in every case tested). Keeping the general order there
// (a second loop, in lane 0 of the row's first warp, while the other 31 lanes
// wait) made bfloat16 x2 0.127 -> 0.160 ms (two A/B runs, the general gather at
// 0.171-0.173 ms in both). At x4 column 1 is ten columns (outputs 0 to 9, the
// first two with weight 0), two passes for the general gather's windows of
// eight, so the same holds. Edges: column 0 is read by outputs 0, 1, 2 (weights
// 1, 0.75, 0.25), the last column by its last three (the last with weight 1:
// both of its taps); a tap of weight 0 stays in the sum, as in the plan (0 * inf
// is NaN, as in PyTorch's backward).
//
// Why: the general gather of a 2-byte type is bound by instruction issue,
// mostly address arithmetic: per output value 16 scalar loads (4 rows x 4
// columns), each with its own 64-bit address (SPEED.md). Here a row of
// 2V outputs is 2 pack loads. One A/B run on the H100 (CUDA-graph replays of
// the kernel op, ms; general gather -> this kernel):
//   x2 float32 (8, 64, 256, 256)   0.262 -> 0.233 (85% -> 96% of the floor)
//   x2 bfloat16                    0.169 -> 0.127 (66% -> 88%)
//   x2 float16                     0.181 -> 0.126 (62% -> 89%)
//   RGB 1080p x2 float32           0.064 -> 0.056 (65% -> 74%)
//   RGB 1080p x2 bfloat16          0.056 -> 0.033 (37% -> 63%)
// A thread takes kTwiceRows = 2 input rows, which share grad_out rows (two of
// the four each reads at x2); with 1 row (also capped at 4 blocks), in the same
// run: 0.243, 0.130, 0.128, 0.058 and 0.033 ms. Two rows take 72 registers in
// 2-byte types, 3 blocks of 256 threads per SM; asking for 4 caps them at 64
// (ptxas spills 16 bytes) and was faster: bfloat16 x2 0.136 -> 0.127 ms.
//
// Exact x2 along H too (kRows = Span::Double: every case of the benchmark). The
// rows' plan lookups, 3 table loads per grad_out row and a loop whose length
// is loaded, were the next cost. Away from the first two and the last input
// row, the two rows h0 and h0 + 1 read the six grad_out rows 2 h0 - 1 ..
// 2 h0 + 4 with constant weights, so that loop is unrolled with its weights
// folded in, and its twelve pack loads can all be issued at once. A/B runs on
// the H100 (CUDA-graph replays of the kernel op, ms; the row plan -> each row's
// taps worked out in place (row_weight), no plan kernel -> the unrolled interior
// at 3 blocks per SM -> the same with explicit FMAs in add_row, kept):
//   x2 float32      0.233 -> 0.236 -> 0.218 -> 0.227 (98% of the floor)
//   x2 bfloat16     0.127 -> 0.129 -> 0.114 -> 0.116 (97%)
//   x2 float16      0.126 -> 0.128 -> 0.116 -> 0.113 (99%)
//   RGB 1080p f32   0.056 -> 0.054 -> 0.047 -> 0.050 (83%)
//   RGB 1080p bf16  0.033 -> 0.032 -> 0.028 -> 0.029 (73%)
// (add_row says why the FMAs are explicit.) Unrolled, the 2-byte kernels spill
// 56-80 bytes under the 64-register cap of 4 blocks (bfloat16 0.130 ms); at 3
// (80 registers) the kept kernel spills nothing. The row-plan kernel keeps 4.
// (Since the edge rules moved into times_tap, shared with the channels-last
// kernel, ptxas spills 8 bytes in the float32 kernel; two A/B runs: x2 float32
// 0.2263-0.2265 -> 0.2269-0.2270 ms, bfloat16 0.1154 -> 0.1157.)
//
// x4 (F = 4; the rows take the plan). A thread's row is F = 4 pack loads and 2
// values from either neighbour. The general gather with column packs took
// 0.491 ms on (16, 256, 64, 64) float32 (77% of the floor) and bfloat16 0.503
// (38%). Its planes are 64 wide: 16 groups of V columns in float32, 8 in
// 2-byte types, so a warp of 32 lanes had half or a quarter of them at work.
// kShare: a row of at most 16 groups shares the warp with other planes' rows
// (times_lanes). A/B runs on the H100 (CUDA-graph replays, ms):
//   x4 float32: this kernel, 2 rows a thread, 3 or 4 blocks  0.506 / 0.458
//     + kShare, 2 rows (4 blocks; ptxas spills 12 bytes)   0.568
//     + kShare, 1 row (kQuadRows, 4 blocks)                0.408 (93%)
//   x4 bfloat16: 1 row, kShare, 4 or 3 blocks              0.230 (83%) / 0.241
//   x2 of the same planes: float32 0.140 -> 0.119 ms (80% -> 94%), bfloat16
//     0.159 -> 0.065 (35% -> 86%) with kShare.
// kShare is a template parameter: compiled into the kernel that wide rows
// take, its lane arithmetic cost x2 float32 0.2265 -> 0.2311 ms and bfloat16
// 0.1154 -> 0.1202 (spills of 24 and 12 bytes).
//
// Channels-last RGB (NC = 3, exact x2 along W). A channels-last row of an
// image is 3 W_in contiguous values, pixel-major, and pixel w reads output
// pixels 2w - 1 .. 2w + 2 in its own channel: so a thread owns V pixels of 3
// channels (3 packs), loads the 2V output pixels from 2 k0 (6 packs a row),
// takes one pixel's 3 values from either neighbour, and tap m of its pixel j
// is at g[3 (F j + m) + c] (NC = 1: F j + m). A plane is an image. The general
// channels-last gather spent a thread on each pixel: 16 taps of 3 scalar loads. One
// A/B run on the H100 (CUDA-graph replays, (1, 3, 1080, 1920) x2, ms; general
// -> kRgbRows = 1 (kept) / 2): float32 0.0705 -> 0.0517 (59% -> 80%) / 0.0557,
// bfloat16 0.0666 -> 0.0309 (31% -> 67%) / 0.0784. Two rows spilled 40 bytes
// (float32) and 460 (bfloat16); one row spills none in float32, 28 bytes in
// bfloat16. It does not unroll the interior rows as NC = 1 does (3 times the
// registers per row).
constexpr int kTwiceRows = 2;
constexpr int kQuadRows = 1;
constexpr int kRgbRows = 1;
// Lanes per row of the exact-upsampling gather: 32, or with fewer groups of V columns in a row
// than 32, their count rounded up to a power of two (1 .. 16), and the warp takes 32 / that many
// planes at once. (At x4 of a 64-wide plane a row is 16 groups in float32, 8 in 2-byte types.)
__host__ __device__ constexpr int times_lanes(int64_t groups) {
  return groups > 16 ? 32 : groups > 8 ? 16 : groups > 4 ? 8 : groups > 2 ? 4 : groups > 1 ? 2 : 1;
}
template <Span kRows>
constexpr int kTimesMinBlocks = kRows == Span::Double ? 3 : 4;

template <typename scalar_t, int F, int NC, int R, Span kRows, bool kShare>
__global__ void __launch_bounds__(kThreads, kTimesMinBlocks<kRows>)
    gather_times_kernel(const scalar_t* __restrict__ grad_out, scalar_t* __restrict__ grad_in, int64_t planes,
                        AxisPlan<opmath_type<scalar_t>> rows, int64_t W_in, Mode mode) {
  using T = opmath_type<scalar_t>;
  constexpr int V = kV<scalar_t>;  // pixels a thread owns along W
  // Values a thread owns in a row (NC packs: pixel-major, channel-minor), and the values it takes
  // from either neighbour in the warp: the F/2 pixels beyond its own.
  constexpr int N = NC * V, H = NC * F / 2;
  constexpr unsigned kAll = 0xffffffffu;
  const int64_t groups = W_in / V;  // the host checks W_in % V == 0
  const int lane = static_cast<int>(threadIdx.x % 32);
  // kShare: a row of fewer than 32 groups (times_lanes) shares each warp with S - 1 other planes'
  // rows: lane = sub * G + the group. Then blockDim.x is 32 and gridDim.x 1.
  const int G = kShare ? times_lanes(groups) : 32, S = 32 / G, sub = lane / G;
  const int64_t t = G == 32 ? static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x : lane % G;
  if (t - lane >= groups) {  // the whole warp is past the row (blockDim.x is a multiple of 32)
    return;
  }
  // The warp's other threads stay for the shuffles: a thread past the row
  // computes the last group again and stores nothing. (Lanes 0 and 31 are
  // then the first and the last group of a row, or past it, when G < 32.)
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
    for (int64_t p0 = static_cast<int64_t>(blockIdx.z) * S; p0 < planes; p0 += static_cast<int64_t>(gridDim.z) * S) {
      // a lane past the last plane computes the last plane again and stores nothing
      const int64_t p = p0 + sub < planes ? p0 + sub : planes - 1;
      const scalar_t* go = grad_out + p * plane_out + F * k0 * NC;
      T acc[R][N] = {};
      // g[i] is value F * k0 * NC - H + i of grad_out row dh (output column F * k0 - F / 2 + i
      // when NC = 1; else value c of a pixel is at pixel * NC + c)
      const auto load_row = [&](int64_t dh, T(&g)[F * N + 2 * H]) {
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
            g[H + q * V + j] = static_cast<T>(a[q].v[j]);
          }
        }
#pragma unroll
        for (int i = 0; i < H; ++i) {
          T left = __shfl_up_sync(kAll, g[F * N + i], 1), right = __shfl_down_sync(kAll, g[H + i], 1);
          if (lane == 0 && !first) {
            left = static_cast<T>(row[i - H]);
          }
          if (lane == 31 && !last) {
            right = static_cast<T>(row[F * N + i]);
          }
          g[i] = first ? T(0) : left;  // no column -F/2 + i: weight 0, value 0
          g[F * N + H + i] = last ? T(0) : right;
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
      const auto add_row = [&](T wy, const T(&g)[F * N + 2 * H], T(&sum)[N]) {
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
          T g[F * N + 2 * H];
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
          T g[F * N + 2 * H];
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

// The gather of an exact x0.5 along W (W_in = 2 * W_out, ratio 2; half_pixel
// or tf_legacy), the forward's Span::Halve transposed: output column d reads
// input columns 2d and 2d + 1 alone, with the weights 1 - l and l (half_pixel:
// s = 2d + 0.5, l = 0.5; tf_legacy: s = 2d, l = 0), so input column i is read
// by output column i / 2 alone. A thread owns V = kV input columns from k0
// (one 16-byte store per row) of kHalveRows rows and one plane: per grad_out
// row it reads the V / 2 columns from k0 / 2 as one 8-byte load. The general
// gather does the same sums (one column per window, the rows in the plan's
// order), so this kernel gives its bits. Rows: as in the x2 kernel.
//
// Why: at x0.5 grad_in is 4 times grad_out, and the general gather, one value
// of kPlanes planes per thread with its window of 2 columns, 1 of them real,
// spends its time on lookups and scalar stores (SPEED.md). Two A/B
// runs on the H100 (CUDA-graph replays of the kernel op, (8, 64, 256, 256)
// grad_in, ms; general gather -> this kernel with the row plan -> rows worked
// out in place, no plan kernel, as kept):
//   x0.5 float32    0.071 -> 0.064 -> 0.059 (78% -> 94% of the floor)
//   x0.5 bfloat16   0.045 -> 0.033 -> 0.029 (62% -> 96%)
// 4 rows per thread instead of kHalveRows = 2: 0.060 and 0.030 ms.
constexpr int kHalveRows = 2;

template <typename scalar_t, int R, Span kRows>
__global__ void __launch_bounds__(kThreads)
    gather_halve_kernel(const scalar_t* __restrict__ grad_out, scalar_t* __restrict__ grad_in, int64_t planes,
                        AxisPlan<opmath_type<scalar_t>> rows, int64_t W_in, Mode mode) {
  using T = opmath_type<scalar_t>;
  constexpr int V = kV<scalar_t>, H = V / 2;
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
        scalar_t g[H];
        load8<scalar_t, H>(go + dh * W_out, g);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (dh >= begin[r] && dh < end[r]) {
            const T wy = row_weight<kRows>(rows, mode, dh, h0 + r);
            const T we = wy * w_even, wo = wy * w_odd;
#pragma unroll
            for (int j = 0; j < H; ++j) {  // explicit FMAs, as in the x2 kernel
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

// ---------------------------------------------------------------------------
// Channels-last (NHWC in memory: the C values of a pixel are neighbours).
// x / blockIdx.x run along one row of pixels with the channel fastest, so a warp
// reads and writes one contiguous span; blockIdx.y runs over rows (n, h). The
// arithmetic per value is the NCHW kernels', in the same order.


// Forward: a thread owns V neighbouring values of an output row of pixels
// (V = kV, 16 bytes) in kRowsNhwc consecutive output rows of one image, and walks
// down them as the NCHW kernel does (walk_rows).
//   kPixel: C is a multiple of V and the tensors are 16-byte aligned, so the V
//     values are channels of one pixel: one set of column taps, and each tap is
//     one 16-byte load.
//   otherwise (an RGB image: C = 3): the V values may belong to different
//     pixels; each has its own column taps and its own 2-byte or 4-byte loads,
//     and the row still ends in one 16-byte store when its length allows.
//     The first version gave such a thread one value: the index arithmetic
//     and a 4-byte store were paid per value, 41% of the floor on a 1080p RGB
//     image in float32 (0.101 ms); V values per thread: 68% (0.061 ms), and
//     76% (0.055 ms) since it shares walk_rows (H100, A/B runs). Slower, in a later
//     A/B run: the next input row's loads issued one step ahead in walk_rows:
//     0.053 -> 0.063 ms (0.057 at 4 blocks). At an exact x2 along W in half_pixel,
//     an RGB image takes forward_rgb_twice_kernel below instead.
template <typename scalar_t, int V, bool kPixel>
__global__ void __launch_bounds__(kThreads) forward_nhwc_kernel(
    const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t N, int64_t C, int64_t H_in, int64_t W_in,
    int64_t H_out, int64_t W_out, opmath_type<scalar_t> rh, opmath_type<scalar_t> rw, Mode mode,
    bool vector_stores) {
  using T = opmath_type<scalar_t>;
  const int64_t row_in = W_in * C, row_out = W_out * C;  // elements per row of pixels
  const int64_t f0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;  // first value, in a row
  if (f0 >= row_out) {
    return;
  }
  const int n = static_cast<int>(row_out - f0 < V ? row_out - f0 : V);  // fewer than V at the row's end
  const bool vector = vector_stores && n == V;
  constexpr int kTaps = kPixel ? 1 : V;
  // Where each value's two column taps sit in an input row: 32-bit (the host checks that a row
  // of W_in * C values fits), so the address of a tap is one 32-bit offset from the row, not a
  // 64-bit one. One A/B run on the H100: channels-last x2 float32 0.2406 -> 0.2352 ms (93% ->
  // 95%), the RGB image 0.0535 -> 0.0528 (float32) and 0.0365 -> 0.0360 (bfloat16); registers
  // unchanged (ptxas: 64 / 48 in float32).
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
  constexpr int kR = kRowsNhwc<scalar_t>;
  const int64_t chunks = (H_out + kR - 1) / kR;  // per image
  for (int64_t job = blockIdx.y; job < N * chunks; job += gridDim.y) {
    const int64_t image = job / chunks, h_begin = (job - image * chunks) * kR;
    const int64_t h_end = h_begin + kR < H_out ? h_begin + kR : H_out;
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
          store_outputs<scalar_t, V>(on + h * row_out, r, kPixel ? V : n, kPixel || vector);
        });
  }
}

// Forward, channels-last RGB (C = 3) at an exact x2 along W (half_pixel; H any
// ratio): forward_nhwc_kernel gives each of a thread's V values its own column
// taps and two 4-byte (or 2-byte) loads per input row, because the V values of a
// 16-byte store straddle pixels. ncu on the 1080p float32 image (H100): 29.8 M
// instructions and 1.17 M global load instructions, against 23.2 M and 0.44 M in
// the NCHW kernel that moves the same bytes, with the same warps resident (42%
// of the slots); this kernel: 19.0 M and 0.36 M. Here a thread owns V
// whole output pixels (3 V values, three 16-byte packs): at x2 they read V / 2 + 2
// input pixels, fetched with a few 8-byte loads, and every tap is a fixed
// register, as in the NCHW Span::Double path. Written straight to memory, a
// thread's three packs are 48 bytes apart across the warp, so every store
// instruction writes half sectors (twice the L2 write requests): that version
// was slower than forward_nhwc_kernel (0.053 -> 0.072 ms). So the warp passes its
// packs through shared memory (conflict-free: 16 bytes at a 48-byte stride, and
// then in order) and stores 3 x 512 contiguous bytes. One A/B run on the H100
// (CUDA-graph replays of the kernel op, each variant timed twice, alternating;
// forward_nhwc_kernel -> this kernel, ms):
//   (1, 3, 1080, 1920) x2 float32   0.0522-0.0524 -> 0.0482-0.0483 (79% -> 86% of the floor;
//                                   the NCHW kernel on the same image: 0.0499)
//   (1, 3, 1080, 1920) x2 bfloat16  0.0358-0.0362 -> 0.0251-0.0264 (57% -> 78-82%)
//   (1, 3, 1080, 1920) x2 float16   0.0360 -> 0.0254-0.0274
//   (4, 3, 720, 1280) x2 float32 / bfloat16   0.0899 -> 0.0833 / 0.0703 -> 0.0502
//   (2, 3, 720, 1280) -> (1080, 2560) float32  0.0402 -> 0.0352 (H by 1.5)
// ptxas: 64 registers in float32; 80 in 2-byte types (3 blocks per SM, 16 bytes
// of spills), where forward_nhwc_kernel takes 128 (2 blocks). Float32 results
// may differ from forward_nhwc_kernel's in the last bit (nvcc fuses another
// multiply-add; at most 4.8e-7 apart in that run), as the NCHW Span::Double
// path may; 2-byte results were bitwise equal.
template <typename scalar_t>
constexpr int kRgbMinBlocks = sizeof(scalar_t) == 2 ? 3 : 4;

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads, kRgbMinBlocks<scalar_t>) forward_rgb_twice_kernel(
    const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t N, int64_t H_in, int64_t W_in,
    int64_t H_out, opmath_type<scalar_t> rh, opmath_type<scalar_t> rw, Mode mode) {
  using T = opmath_type<scalar_t>;
  constexpr int V = kV<scalar_t>, H = V / 2;  // V output pixels, V / 2 input pixels; H values per 8-byte load
  // The loads start kPre values before pixel k0 (pixel k0 - 1, in whole loads) and end
  // with pixel k0 + H (the last one read).
  constexpr int kPre = (3 + H - 1) / H * H, kLoads = (kPre + 3 * H + 3 + H - 1) / H;
  __shared__ Pack<scalar_t, V> stage[3 * kThreads];
  const int64_t W_out = 2 * W_in, row_in = 3 * W_in, row_out = 3 * W_out;
  const int lane = threadIdx.x % 32;
  const int64_t w_first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x - lane) * V;  // the warp's
  // A thread past the row's end stays (it takes part in the warp's exchange), computes
  // the row's last V pixels again and stores nothing.
  const int64_t w_mine = w_first + lane * V;
  const int64_t w0 = w_mine < W_out ? w_mine : W_out - V;
  const int64_t k0 = w0 / 2;  // the first input pixel; the host checks W_in % H == 0
  const bool first = w0 == 0, last = k0 + H == W_in;
  T l[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    l[j] = source_taps<T>(w0 + j, W_in, rw, mode).l;
  }
  constexpr int kR = kRowsNhwc<scalar_t>;
  const int64_t chunks = (H_out + kR - 1) / kR;  // per image
  for (int64_t job = blockIdx.y; job < N * chunks; job += gridDim.y) {
    const int64_t image = job / chunks, h_begin = (job - image * chunks) * kR;
    const int64_t h_end = h_begin + kR < H_out ? h_begin + kR : H_out;
    const scalar_t* xn = x + image * H_in * row_in;
    scalar_t* on = out + image * H_out * row_out + 3 * w_first;
    walk_rows<scalar_t, 3 * V>(
        h_begin, h_end, H_in, rh, mode,
        [&](int64_t row, T(&dst)[3 * V]) {
          const scalar_t* src = xn + row * row_in + 3 * k0;
          scalar_t span[kLoads * H];  // pixel k0 + p, channel c at kPre + 3 p + c
#pragma unroll
          for (int i = 0; i < kLoads; ++i) {
            // the first thread's loads before the row and the last thread's past it: not used
            load8<scalar_t, H>((i < kPre / H && first) || (i >= kPre / H + 3 && last) ? src : src - kPre + i * H,
                               span + i * H);
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
              store_outputs<scalar_t, V>(dst + q * V, stage[3 * (threadIdx.x - lane) + q], V, true);
            }
          }
          __syncwarp();  // every pack read before the next row's are written
        });
  }
}

// Gather: a thread per NC neighbouring channels of one grad_in pixel
// (step = C: the "planes" are the channels), as one 16-byte pack when kPack,
// in kNhwcRows consecutive rows of pixels (n, h): the thread's column window
// and its index arithmetic serve that many pixels, and the next row's window
// of grad_out rows overlaps this one's (at x2, two of four rows). With one row
// per thread, in one A/B run on the H100 (1, 2, 4 and 8 rows): x2 float32
// 0.299 -> 0.271 ms, bfloat16 0.215 -> 0.201, RGB 1080p 0.086 -> 0.073, x0.5
// 0.112 -> 0.073 with 4; 2 rows were as good at x2 and worse at x0.5 (0.083).
constexpr int kNhwcRows = 4;

template <typename scalar_t, int NC, int K, bool kPack>
__global__ void __launch_bounds__(kThreads, kGatherNhwcMinBlocks<scalar_t>)
    gather_nhwc_kernel(const scalar_t* __restrict__ grad_out, scalar_t* __restrict__ grad_in, int64_t rows, int64_t C,
                       AxisPlan<opmath_type<scalar_t>> rows_plan, AxisPlan<opmath_type<scalar_t>> cols) {
  using T = opmath_type<scalar_t>;
  const int64_t groups = C / NC;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // (w, channel group)
  if (t >= cols.in * groups) {
    return;
  }
  const int64_t w = t / groups, c = (t - w * groups) * NC;
  const ColumnWindow<T, K> win = column_window<T, K, 1>(cols, w, cols.begin[w]);
  const int64_t chunks = (rows + kNhwcRows - 1) / kNhwcRows;
  for (int64_t chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
    const int64_t first = chunk * kNhwcRows, last = first + kNhwcRows < rows ? first + kNhwcRows : rows;
    int64_t n = first / rows_plan.in, h = first - n * rows_plan.in;  // one division per chunk
    for (int64_t row = first; row < last; ++row) {
      gather_pixel<NC, K, 1, kPack>(grad_out + n * rows_plan.out * cols.out * C + c, 1,
                                 grad_in + (row * cols.in + w) * C + c, 1, C, h, w, rows_plan, cols, win);
      if (++h == rows_plan.in) {
        h = 0;
        ++n;
      }
    }
  }
}

// The channels-last gather of an exact x2 along W (half_pixel; C a multiple of
// kV, 16-byte aligned tensors): gather_times_kernel (F = 2) in this layout. When
// H is an exact x2 too, gather_twice_nhwc_tile_kernel (below) takes the work
// instead; this kernel keeps H resized by another ratio. The measurements here are of the case the tile
// kernel took over (channels-last (8, 64, 256, 256) at x2), from before it. A thread
// owns one channel pack (kV channels, a 16-byte store) of kTwiceNhwcPixels = 2
// neighbouring input pixels w0, w0 + 1 (w0 even) in kTwiceNhwcRows rows (2 in
// float32, 1 in 2-byte types) of one image. Per grad_out row it loads the 6 packs of output columns
// 2 w0 - 1 .. 2 w0 + 4, which its two pixels share, where the general gather
// loads 4 per pixel and looks up each one's weight in the plan. Weights: the x2
// kernel's constants (1/4, 3/4, 3/4, 1/4 from column 2w - 1; 1 at the edges,
// and column 0 read by pixel 1 with weight 0), in the same order: pixel by
// pixel its sums are the x2 kernel's, so its bits are the general gather's
// except in input column 1 (gather_times_kernel says why). Rows: the plan (the
// tile kernel takes an exact x2 along H; the closed-form rows this kernel had
// for it, measured below, went with it). w0 is even, so pixel 1 is never a
// thread's first pixel: the weight-0 read of column 0 stays inside the
// thread's columns.
//
// A/B runs on the H100 (CUDA-graph replays of the kernel op, channels-last
// (8, 64, 256, 256) grad_in at x2, ms; float32 / bfloat16 / float16):
//   the general channels-last gather           0.264 / 0.195 / 0.194 (84% / 57% / 58%)
//   this kernel, its 6 interior rows unrolled  0.268 / 0.171-0.175 / 0.205-0.209
//   the rows in a loop (not unrolled)          0.231 / 0.173 / 0.173 (97% / 64% / 64%)
//   + kTwiceNhwcSplit (2-byte types)           0.232 / 0.162 / 0.160 (96% / 69% / 69%)
//   + 1 row a thread, 3 blocks (2-byte types)  0.233 / 0.159 / 0.152 (96% / 70% / 73%)
// Unrolled, the rows' 36 pack loads were issued at once and spilled (2-byte
// types: 48-84 bytes at 128 registers). With 2 rows the loop at 3 blocks per
// SM (80 registers) spilled 322 bytes in bfloat16 (0.356 ms), so 2-byte types
// asked for 2 blocks (128 registers), until they took 1 row a thread
// (kTwiceNhwcRows): fewer loads shared, but 3 blocks (bfloat16 still spills
// about 100 bytes; 4 blocks spilled 208-248: 0.191 ms). float32 keeps 2 rows: 1
// row took 0.265 ms. 4 channels per thread (8-byte packs, 3 blocks) in 2-byte
// types: 0.190-0.211 ms. What is left in 2-byte types (ncu, bfloat16, 2 rows
// and 2 blocks): 59 million warp instructions issued (97 million before
// kTwiceNhwcSplit), 0.45 per scheduler per cycle, 11 active warps per SM of
// the 16 that fit: too few warps hide the loads' latency.
// Two later tries were slower or level (float32 / bfloat16 / float16): the
// edge pairs out of line (__noinline__) 0.233 / 0.157 / 0.154; one pixel a
// thread walking down 8 input rows, each grad_out row loaded once, 0.291 /
// 0.238 / 0.215. ncu of the final form (bfloat16, 1 row a thread) then showed
// L2 at 83% of its peak and DRAM at 56%: see the tile kernel.
constexpr int kTwiceNhwcPixels = 2;
template <typename scalar_t>
constexpr int kTwiceNhwcRows = sizeof(scalar_t) == 2 ? 1 : 2;
constexpr int kTwiceNhwcMinBlocks = 3;
// kTwiceNhwcSplit: in 2-byte types a pair away from the edges (most of them)
// takes a copy of the loop whose columns all exist and whose weights are
// constants, with no test per column (the edge pairs keep the rules, at run
// time). float32 keeps one loop, the edges' rules for every pair: with the
// copy it spilled 32 bytes at 3 blocks per SM and took 0.255 ms.
template <typename scalar_t>
constexpr bool kTwiceNhwcSplit = sizeof(scalar_t) == 2;

template <typename scalar_t, int R>
__global__ void __launch_bounds__(kThreads, kTwiceNhwcMinBlocks)
    gather_twice_nhwc_kernel(const scalar_t* __restrict__ grad_out, scalar_t* __restrict__ grad_in, int64_t images,
                             int64_t C, AxisPlan<opmath_type<scalar_t>> rows, int64_t W_in, Mode mode) {
  using T = opmath_type<scalar_t>;
  constexpr Span kRows = Span::Taps;  // H resized by another ratio: the row plan
  constexpr int V = kV<scalar_t>, P = kTwiceNhwcPixels, kCols = 2 * P + 2;
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
  // constant weights, without a test (kTwiceNhwcSplit).
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
  if constexpr (kTwiceNhwcSplit<scalar_t>) {
    if (w0 > 0 && w0 + P < W_in) {
      gather(std::false_type{});
      return;
    }
  }
  gather(std::true_type{});
}

// The channels-last x2 gather through shared memory, when H is an exact x2 too.
// A block takes a tile of 8 input rows x 64 / G pixels x G channel packs of one
// image (Tile<G>: G = 8, 4, 2 or 1, the most that divide C / kV). It first
// copies the grad_out packs the tile reads (rows 2 h0 - 1 .. 2 h0 + 16, columns
// 2 w0 - 1 .. 2 w0 + 128 / G: at G = 8, 18 x 18 x 8 packs, 41 KB; 37-40 KB at
// the others) into shared memory, each pack once, with cp.async (straight from
// L2 into shared memory: the loads in flight hold no registers); then a thread
// sums one pixel's pack in kTileR = 2 rows from there, with the weights and in
// the order of gather_twice_nhwc_kernel (the same bits). A tile away from the
// image's edges (most of them) takes the x2 constants, unrolled, with no test;
// a tile at an edge takes the rules (times_tap, row_weight) at run time.
//
// Why: gather_twice_nhwc_kernel issues 24 pack loads per pixel pair, so every
// grad_out pack is loaded about 3 times (L1 catches some). ncu (bfloat16,
// 2 pixels x 1 row a thread): L2 throughput 83% of its peak, DRAM 56%: L2 is
// the wall, the reason 2-byte types stopped at 70% of the floor. A tile copies
// 18 x 18 / 16 x 16 = 1.27 times its own grad_out (the halos twice). A/B runs on the H100 (CUDA-graph
// replays of the kernel op, channels-last (8, 64, 256, 256) grad_in at x2, ms;
// float32 / bfloat16 / float16):
//   gather_twice_nhwc_kernel                         0.233 / 0.160 / 0.151 (96% / 70% / 74%)
//   tiles, every one taking the rules at run time    0.278 / 0.173 / 0.164
//   the same, persistent blocks copying the next
//     tile in while summing this one (2 buffers)     0.301 / 0.190 / 0.181
//   interior tiles unrolled with the constants       0.221 / 0.131 / 0.129
//   + 3 blocks per SM (kTileMinBlocks)               0.220 / 0.125 / 0.125 (102% / 89% / 89%)
// The first tile kernel had L2 to spare (ncu: L2 51%, DRAM 46%) but issued an
// instruction in 84% of the cycles: it was bound by its own arithmetic (the
// edge rules per row and tap), which the interior path's constants removed.
// Overlapping copy and sums in one block (the double buffer, 83 KB of dynamic
// shared memory: 2 blocks per SM) was slower than 4 blocks that each wait for
// their copy; measured on the first, instruction-bound tile kernel only. At 4
// blocks (64 registers) 2-byte types spilled 20 bytes; 3 blocks (80 registers,
// no spill) were faster.
// The first version took G = 8 only (C a multiple of 64 in 2-byte types, 32 in
// float32), the rest the pair kernel. Tiles of fewer packs and more pixels, the
// same grad_out bytes (A/B, (N, C, 256, 256) at x2 with N C = 512, pair kernel ->
// tile, ms): bfloat16 C = 8 0.249 -> 0.148 (45% -> 76%), C = 16 0.212 -> 0.134
// (53% -> 82%), C = 32 0.185 -> 0.130 (60% -> 86%); float32 C = 8 0.261 -> 0.230,
// C = 16 0.245 -> 0.230 (91% -> 97%).
// Why G < 8 stays below G = 8: not that fewer tiles are interior (at W = 256:
// 88% / 82% / 70% / 47% for G = 8 / 4 / 2 / 1): choosing the constants per
// thread instead of per tile measured level or slower (bfloat16 C = 16 0.131 ->
// 0.136 ms, one A/B run). Nor, as far as measured, that a quarter warp's 16-byte
// reads from shared memory (8 threads) cover pixels 2 columns apart, which fall
// on the same banks in pairs (G = 8 reads one pixel's 8 packs, 128 contiguous
// bytes): storing the even columns before the odd ones makes those reads
// contiguous, and was slower (bfloat16 C = 8 0.143 -> 0.187 ms, C = 16 0.131 ->
// 0.137; float32 C = 8 0.227 -> 0.256; one A/B run, same bits), the copies into
// shared memory then being scattered; why, not profiled. The cause is open.
constexpr int kTileR = 2;
template <int G>  // G channel packs (8, 4, 2 or 1: the most that divide C / kV) x 64 / G pixels x 8 rows
struct Tile {
  static constexpr int pixels = 64 / G, rows = kThreads / 64 * kTileR;
  static constexpr int rows_out = 2 * rows + 2, cols_out = 2 * pixels + 2;
};
constexpr int kTileMinBlocks = 3;

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
__global__ void __launch_bounds__(kThreads, kTileMinBlocks)
    gather_twice_nhwc_tile_kernel(const scalar_t* __restrict__ grad_out, scalar_t* __restrict__ grad_in,
                                  int64_t C, AxisPlan<opmath_type<scalar_t>> rows, int64_t W_in) {
  using T = opmath_type<scalar_t>;
  constexpr Span kRows = Span::Double;  // H is an exact x2 (half_pixel) too: rows in closed form
  constexpr int V = kV<scalar_t>, R = kTileR;
  using S = Tile<G>;
  static_assert(R == 2, "the interior path sums 2 rows");
  __shared__ uint4 tile[S::rows_out][S::cols_out][G];
  const int64_t g_tiles = C / V / G, w_tiles = (W_in + S::pixels - 1) / S::pixels;
  const int64_t h_tiles = (rows.in + S::rows - 1) / S::rows;
  int64_t b = blockIdx.x;
  const int64_t gt = b % g_tiles;
  b /= g_tiles;
  const int64_t wt = b % w_tiles;
  b /= w_tiles;
  const int64_t ht = b % h_tiles, n = b / h_tiles;
  const int64_t c0 = gt * G * V, w0 = wt * S::pixels, h0 = ht * S::rows;
  const int64_t H_out = rows.out, W_out = 2 * W_in;
  const int64_t r0 = 2 * h0 - 1, d0 = 2 * w0 - 1;  // the tile's first grad_out row and column
  const scalar_t* go = grad_out + n * H_out * W_out * C + c0;
  for (int i = threadIdx.x; i < S::rows_out * S::cols_out * G; i += kThreads) {
    const int k = i % G, col = i / G % S::cols_out, row = i / (G * S::cols_out);
    const int64_t dh = r0 + row, d = d0 + col;
    const bool valid = dh >= 0 && dh < H_out && d >= 0 && d < W_out;
    copy_to_shared(&tile[row][col][k], valid ? go + (dh * W_out + d) * C + k * V : go, valid);
  }
  wait_copies_to_shared();
  __syncthreads();
  const int k = threadIdx.x % G, px = threadIdx.x / G % S::pixels, ry = threadIdx.x / (G * S::pixels);
  const int64_t w = w0 + px, h = h0 + ry * R;
  if (w >= W_in || h >= rows.in) {
    return;
  }
  T acc[R][V] = {};
  scalar_t* dst = grad_in + ((n * rows.in + h) * W_in + w) * C + c0 + k * V;
  if (h0 > 0 && h0 + S::rows < rows.in && w0 > 0 && w0 + S::pixels < W_in) {
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

// Scatter: a thread per grad_out value, four atomic adds (scatter_taps).
template <typename scalar_t, typename acc_t>
__global__ void scatter_nhwc_kernel(const scalar_t* __restrict__ grad_out, acc_t* __restrict__ grad_in, int64_t rows,
                                    int64_t C, int64_t H_in, int64_t W_in, int64_t H_out, int64_t W_out,
                                    opmath_type<scalar_t> rh, opmath_type<scalar_t> rw, Mode mode) {
  using opmath_t = opmath_type<scalar_t>;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // (w, c)
  if (t >= W_out * C) {
    return;
  }
  const int64_t w = t / C, c = t - w * C;
  const Taps<opmath_t> xt = source_taps<opmath_t>(w, W_in, rw, mode);
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const int64_t n = row / H_out, h = row - n * H_out;
    const Taps<opmath_t> yt = source_taps<opmath_t>(h, H_in, rh, mode);
    const opmath_t g = static_cast<opmath_t>(grad_out[row * W_out * C + t]);
    scatter_taps(grad_in + n * H_in * W_in * C + c, W_in * C, C, yt, xt, g);
  }
}

// A grid for the channels-last kernels: x along a row of `row_length` values, y over `rows` rows.
Launch launch_rows(int64_t row_length, int64_t rows) {
  const int64_t gx = (row_length + kThreads - 1) / kThreads;
  STD_TORCH_CHECK(gx <= std::numeric_limits<int32_t>::max(), "upsample_bilinear2d: a row of ", row_length,
                  " values is too long for one launch");
  return {dim3(static_cast<unsigned>(gx), static_cast<unsigned>(std::min<int64_t>(rows, kMaxGrid))), dim3(kThreads)};
}

// The current CUDA stream of `device`: code running us under torch.cuda.stream(s)
// expects our work on s, and kernels on the legacy default stream would race
// with it.
cudaStream_t current_stream(int32_t device) {
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device, &stream));
  return static_cast<cudaStream_t>(stream);
}

// Calls f with std::integral_constant<int, K> for the gather's window bound kw
// (2, 4 or 8): K becomes a template argument of the kernel.
template <typename F>
void with_window(int kw, F&& f) {
  if (kw == 2) return f(std::integral_constant<int, 2>{});
  if (kw == 4) return f(std::integral_constant<int, 4>{});
  return f(std::integral_constant<int, 8>{});
}

}  // namespace

void upsample_forward_cuda(const torch::stable::Tensor& x, torch::stable::Tensor& out, const ResizeGeometry& g) {
  // Launch on the tensor's GPU, whatever device is current.
  const torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  const cudaStream_t stream = current_stream(x.get_device_index());
  dispatch_floating_types(x.scalar_type(), "upsample_forward_cuda", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    using opmath_t = opmath_type<scalar_t>;
    constexpr int V = kV<scalar_t>;
    const opmath_t rh = axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h);
    const opmath_t rw = axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w);
    if (g.channels_last) {
      const int64_t C = g.channels, N = g.planes / C;
      // 16-byte loads need C a multiple of V and aligned tensors; 16-byte
      // stores need every row to start on a V-value boundary and an aligned output.
      const bool pixel = C % V == 0 && reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0;
      const bool vector_stores =
          (g.W_out * C) % V == 0 && reinterpret_cast<uintptr_t>(out.data_ptr()) % sizeof(Pack<scalar_t, V>) == 0;
      constexpr int kR = kRowsNhwc<scalar_t>;
      STD_TORCH_CHECK(g.W_in * C <= std::numeric_limits<int32_t>::max(), "upsample_bilinear2d: a channels-last row of ",
                      g.W_in * C, " input values is too long for the kernel's 32-bit offsets");
      if constexpr (!std::is_same_v<scalar_t, double>) {
        // RGB at an exact x2 along W, every load 8-byte aligned (W_in a multiple of V / 2, x
        // aligned), every store 16-byte aligned
        if (C == 3 && g.mode == Mode::HalfPixel && rw == opmath_t(0.5) && g.W_out == 2 * g.W_in &&
            g.W_in % (V / 2) == 0 && g.W_out < (int64_t(1) << 22) &&
            reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 8 == 0 &&
            reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0) {
          const Launch l = launch_rows(g.W_out / V, N * ((g.H_out + kR - 1) / kR));
          forward_rgb_twice_kernel<scalar_t><<<l.grid, l.block, 0, stream>>>(
              x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), N, g.H_in, g.W_in, g.H_out, rh, rw,
              g.mode);
          STD_CUDA_KERNEL_LAUNCH_CHECK();
          return;
        }
      }
      const Launch l = launch_rows((g.W_out * C + V - 1) / V, N * ((g.H_out + kR - 1) / kR));
      auto kernel = pixel ? forward_nhwc_kernel<scalar_t, V, true> : forward_nhwc_kernel<scalar_t, V, false>;
      kernel<<<l.grid, l.block, 0, stream>>>(x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), N, C,
                                            g.H_in, g.W_in, g.H_out, g.W_out, rh, rw, g.mode, vector_stores);
      STD_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    // Grid: x over groups of V columns, y over chunks of kRowsNchw rows, z over planes.
    const int64_t groups = (g.W_out + V - 1) / V, chunks = (g.H_out + kRowsNchw<scalar_t> - 1) / kRowsNchw<scalar_t>;
    const Launch l = launch_for(groups, chunks, g.planes, 1);
    // Vector stores need every row to start on a V-element boundary: W_out a
    // multiple of V and an aligned output (ours is freshly allocated).
    const bool vector_stores =
        g.W_out % V == 0 && reinterpret_cast<uintptr_t>(out.data_ptr()) % sizeof(Pack<scalar_t, V>) == 0;
    // x0.5 exactly: taps 2d and 2d + 1 with the weight 0.5 (half_pixel: s = 2d + 0.5) or 0
    // (tf_legacy: s = 2d), exact in float while 2 * W_out < 2^23. The packs need every
    // row to start on a 16-byte boundary: W_in = 2 * W_out a multiple of 2V, an aligned x.
    const bool halve = g.mode != Mode::AlignCorners && rw == opmath_t(2) && g.W_in == 2 * g.W_out &&
                       g.W_out % V == 0 && g.W_out < (int64_t(1) << 22) &&
                       reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 16 == 0;
    // x2 exactly in half_pixel: s = d / 2 - 1/4, exact in float while W_out < 2^22. The
    // 8-byte loads need every row to start on an 8-byte boundary: W_in a multiple of V / 2.
    const bool twice = g.mode == Mode::HalfPixel && rw == opmath_t(0.5) && g.W_out == 2 * g.W_in &&
                       g.W_in % (V / 2) == 0 && g.W_out < (int64_t(1) << 22) &&
                       reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 8 == 0;
    auto kernel = halve   ? forward_kernel<scalar_t, Span::Halve>
                  : twice ? forward_kernel<scalar_t, Span::Double>
                          : forward_kernel<scalar_t, Span::Taps>;
    kernel<<<l.grid, l.block, 0, stream>>>(
        x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), g.planes, g.H_in, g.W_in, g.H_out, g.W_out,
        rh, rw, g.mode, vector_stores);
    STD_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void upsample_backward_cuda(const torch::stable::Tensor& grad_out, torch::stable::Tensor& grad_in,
                            const ResizeGeometry& g, bool gather) {
  using torch::headeronly::ScalarType;
  const torch::stable::accelerator::DeviceGuard guard(grad_out.get_device_index());
  const cudaStream_t stream = current_stream(grad_out.get_device_index());
  dispatch_floating_types(grad_out.scalar_type(), "upsample_backward_cuda", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    using opmath_t = opmath_type<scalar_t>;
    const opmath_t rh = axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h);
    const opmath_t rw = axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w);
    if (gather) {
      // An exact x2 or x4 (half_pixel) or x0.5 (half_pixel, tf_legacy) along W
      // takes gather_times_kernel or gather_halve_kernel, when their 16-byte
      // loads and stores are aligned (every row too: W_in a multiple of V);
      // channels-last, an exact x2 takes gather_twice_nhwc_tile_kernel when H is an
      // exact x2 too, else gather_twice_nhwc_kernel (both: C a multiple of V), or
      // with 3 channels gather_times_kernel (NC = 3, W_in a multiple of V). Their rows take the same closed form when H has
      // the same exact ratio (x2, x0.5), else the row plan (always at x4).
      Span exact_w = Span::Taps, exact_h = Span::Taps;
      bool quad = false;  // an exact x4 along W (NCHW): exact_w stays Span::Taps
      bool rgb = false;   // channels-last, 3 channels, an exact x2 along W: gather_times_kernel, NC = 3
      if constexpr (!std::is_same_v<scalar_t, double>) {
        const auto exact = [&](int64_t in, int64_t out, opmath_t ratio) {  // exact in float below 2^22
          if (g.mode == Mode::HalfPixel && ratio == opmath_t(0.5) && out == 2 * in && out < (int64_t(1) << 22)) {
            return Span::Double;
          }
          if (g.mode != Mode::AlignCorners && ratio == opmath_t(2) && in == 2 * out && in < (int64_t(1) << 22)) {
            return Span::Halve;
          }
          return Span::Taps;
        };
        if (reinterpret_cast<uintptr_t>(grad_out.const_data_ptr()) % 16 == 0 &&
            reinterpret_cast<uintptr_t>(grad_in.const_data_ptr()) % 16 == 0) {
          if (!g.channels_last && g.W_in % kV<scalar_t> == 0) {
            exact_w = exact(g.W_in, g.W_out, rw);
            quad = g.mode == Mode::HalfPixel && rw == opmath_t(0.25) && g.W_out == 4 * g.W_in &&
                   g.W_out < (int64_t(1) << 22);
          } else if (g.channels_last && exact(g.W_in, g.W_out, rw) == Span::Double) {  // channels-last: x2 only
            if (g.channels % kV<scalar_t> == 0) {
              exact_w = Span::Double;
            } else if (g.channels == 3 && g.W_in % kV<scalar_t> == 0) {
              exact_w = Span::Double;
              rgb = true;
            }
          }
          exact_h = exact_w == Span::Taps ? Span::Taps : exact(g.H_in, g.H_out, rh);
        }
      }
      // The plan: 3 values per output index and 2 per input index, per axis,
      // for the axes that need one. Allocated on grad_out's device and
      // stream-ordered by the caching allocator.
      AxisPlan<opmath_t> rows{g.H_in, g.H_out, rh, nullptr, nullptr, nullptr, nullptr, nullptr};
      AxisPlan<opmath_t> cols{g.W_in, g.W_out, rw, nullptr, nullptr, nullptr, nullptr, nullptr};
      std::optional<torch::stable::Tensor> index, lambda;  // alive until the kernels are queued
      if (exact_w == Span::Taps || exact_h != exact_w) {
        index = torch::stable::new_empty(grad_out, {2 * (g.H_in + g.W_in) + 2 * (g.H_out + g.W_out)},
                                         ScalarType::Long);
        lambda = torch::stable::new_empty(grad_out, {g.H_out + g.W_out},
                                          std::is_same_v<opmath_t, double> ? ScalarType::Double : ScalarType::Float);
        int64_t* ip = index->mutable_data_ptr<int64_t>();
        opmath_t* lp = lambda->mutable_data_ptr<opmath_t>();
        rows = {g.H_in, g.H_out, rh, ip, ip + g.H_out, lp, ip + 2 * g.H_out, ip + 2 * g.H_out + g.H_in};
        ip += 2 * (g.H_out + g.H_in);
        cols = {g.W_in, g.W_out, rw, ip, ip + g.W_out, lp + g.H_out, ip + 2 * g.W_out, ip + 2 * g.W_out + g.W_in};
        const int64_t longest = std::max({g.H_in, g.W_in, g.H_out, g.W_out});
        // blockIdx.y 0 builds the rows' plan, 1 the columns' (not needed by the exact kernels).
        const dim3 plan_grid(static_cast<unsigned>((longest + kThreads - 1) / kThreads),
                             exact_w == Span::Taps && !quad ? 2 : 1);
        plan_kernel<opmath_t><<<plan_grid, kThreads, 0, stream>>>(rows, cols, g.mode);
        STD_CUDA_KERNEL_LAUNCH_CHECK();
      }
      if constexpr (!std::is_same_v<scalar_t, double>) {
        if (exact_w != Span::Taps && g.channels_last && !rgb) {
          const int64_t images = g.planes / g.channels;
          if (exact_h == Span::Double) {  // the tile kernel
            const int64_t groups = g.channels / kV<scalar_t>;
            const auto tiles = [&](auto packs_tag) {
              constexpr int G = decltype(packs_tag)::value;
              using S = Tile<G>;
              const int64_t blocks = images * ((g.H_in + S::rows - 1) / S::rows) *
                                     ((g.W_in + S::pixels - 1) / S::pixels) * (groups / G);
              STD_TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "upsample_bilinear2d: ", blocks,
                              " tiles are too many for one launch");
              gather_twice_nhwc_tile_kernel<scalar_t, G><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
                  grad_out.const_data_ptr<scalar_t>(), grad_in.mutable_data_ptr<scalar_t>(), g.channels, rows,
                  g.W_in);
              STD_CUDA_KERNEL_LAUNCH_CHECK();
            };
            return groups % 8 == 0   ? tiles(std::integral_constant<int, 8>{})
                   : groups % 4 == 0 ? tiles(std::integral_constant<int, 4>{})
                   : groups % 2 == 0 ? tiles(std::integral_constant<int, 2>{})
                                     : tiles(std::integral_constant<int, 1>{});
          }
          constexpr int R = kTwiceNhwcRows<scalar_t>;
          auto kernel = gather_twice_nhwc_kernel<scalar_t, R>;
          const Launch l = launch_rows((g.W_in + kTwiceNhwcPixels - 1) / kTwiceNhwcPixels * (g.channels / kV<scalar_t>),
                                       images * ((g.H_in + R - 1) / R));
          kernel<<<l.grid, l.block, 0, stream>>>(grad_out.const_data_ptr<scalar_t>(),
                                                 grad_in.mutable_data_ptr<scalar_t>(), images, g.channels, rows,
                                                 g.W_in, g.mode);
          STD_CUDA_KERNEL_LAUNCH_CHECK();
          return;
        }
        if (exact_w != Span::Taps || quad) {  // the exact kernels take the same arguments
          const bool exact_rows = exact_h == exact_w;
          // gather_times_kernel: with fewer than 32 groups a row, a warp takes 32 / times_lanes planes
          const int64_t groups = g.W_in / kV<scalar_t>;
          const bool share = exact_w != Span::Halve && times_lanes(groups) < 32;
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
          const Launch l = launch_for(per_warp > 1 ? 32 : groups, (g.H_in + rows_per - 1) / rows_per, planes,
                                      per_warp, kGatherWidth);
          kernel<<<l.grid, l.block, 0, stream>>>(grad_out.const_data_ptr<scalar_t>(),
                                                 grad_in.mutable_data_ptr<scalar_t>(), planes, rows, g.W_in, g.mode);
          STD_CUDA_KERNEL_LAUNCH_CHECK();
          return;
        }
      }
      // Columns per window held in registers: the most grad_out columns that
      // read one input column, 2 / rw rounded up (more only at a clamped edge,
      // which the kernels handle K at a time).
      const double reach = 2.0 / static_cast<double>(rw);
      const int kw = reach <= 2 ? 2 : reach <= 4 ? 4 : 8;
      if (g.channels_last) {
        // kV<scalar_t> channels per thread (16 bytes' worth) when C allows
        // it, else 4, 3 or 2 when they divide C (an RGB pixel's 3 channels
        // share one thread's plan lookups and weights), else 1.
        const int64_t C = g.channels, n_rows = g.planes / C * g.H_in;
        // Channel packs: 16-byte loads of grad_out and 16-byte stores to grad_in.
        const bool aligned = reinterpret_cast<uintptr_t>(grad_out.const_data_ptr()) % 16 == 0 &&
                             reinterpret_cast<uintptr_t>(grad_in.const_data_ptr()) % 16 == 0;
        auto launch = [&](auto channels_tag) {
          constexpr int NC = decltype(channels_tag)::value;
          const Launch l = launch_rows(g.W_in * (C / NC), (n_rows + kNhwcRows - 1) / kNhwcRows);
          with_window(kw, [&](auto k_tag) {
            constexpr int K = decltype(k_tag)::value;
            constexpr bool kCanPack = NC * sizeof(scalar_t) == 16;
            auto kernel = kCanPack && aligned ? gather_nhwc_kernel<scalar_t, NC, K, kCanPack>
                                              : gather_nhwc_kernel<scalar_t, NC, K, false>;
            kernel<<<l.grid, l.block, 0, stream>>>(grad_out.const_data_ptr<scalar_t>(),
                                                   grad_in.mutable_data_ptr<scalar_t>(), n_rows, C, rows, cols);
          });
          STD_CUDA_KERNEL_LAUNCH_CHECK();
        };
        constexpr int NC = kV<scalar_t>;
        if (C % NC == 0) return launch(std::integral_constant<int, NC>{});
        if (NC > 4 && C % 4 == 0) return launch(std::integral_constant<int, 4>{});
        if (C % 3 == 0) return launch(std::integral_constant<int, 3>{});
        if (C % 2 == 0) return launch(std::integral_constant<int, 2>{});
        return launch(std::integral_constant<int, 1>{});
      }
      // A thread sums kPlanes planes at once: the plan lookups and weights are
      // shared, and kPlanes independent loads are in flight per step. Up to 8
      // (16 for 2-byte types), and no more than there are planes (an RGB image
      // has 3): a remainder is summed one plane at a time.
      auto launch = [&](auto planes_tag) {
        constexpr int kPlanes = decltype(planes_tag)::value;
        const int rows_per = gather_rows_per_thread(kPlanes, kw);
        const Launch l = launch_for(g.W_in, (g.H_in + rows_per - 1) / rows_per, g.planes, kPlanes, kGatherWidth);
        // Column packs: float32 with a window of more than 6 columns (upsampling by more
        // than 3), rows of whole packs, an aligned grad_out.
        if constexpr (std::is_same_v<scalar_t, float>) {
          if (reach > 6 && g.W_out % kColumnPack == 0 &&
              reinterpret_cast<uintptr_t>(grad_out.const_data_ptr()) % 16 == 0) {
            gather_kernel<scalar_t, kPlanes, kColumnPackWindow, kColumnPack><<<l.grid, l.block, 0, stream>>>(
                grad_out.const_data_ptr<scalar_t>(), grad_in.mutable_data_ptr<scalar_t>(), g.planes, rows, cols);
            STD_CUDA_KERNEL_LAUNCH_CHECK();
            return;
          }
        }
        with_window(kw, [&](auto k_tag) {
          gather_kernel<scalar_t, kPlanes, decltype(k_tag)::value, 1><<<l.grid, l.block, 0, stream>>>(
              grad_out.const_data_ptr<scalar_t>(), grad_in.mutable_data_ptr<scalar_t>(), g.planes, rows, cols);
        });
        STD_CUDA_KERNEL_LAUNCH_CHECK();
      };
      constexpr int kMost = kGatherPlanes<scalar_t>;
      if (kMost > 8 && g.planes >= kMost) {
        return launch(std::integral_constant<int, kMost>{});
      }
      switch (g.planes < 8 ? g.planes : 8) {
        case 1: return launch(std::integral_constant<int, 1>{});
        case 2: return launch(std::integral_constant<int, 2>{});
        case 3: return launch(std::integral_constant<int, 3>{});
        case 4: case 5: case 6: case 7: return launch(std::integral_constant<int, 4>{});
        default: return launch(std::integral_constant<int, 8>{});
      }
    }
    constexpr int kPlanes = 4;
    // float and double: the atomics add straight into grad_in. float16 and
    // bfloat16: into a float buffer in grad_in's layout, converted once at the end.
    using acc_t = std::conditional_t<std::is_same_v<scalar_t, opmath_t>, scalar_t, float>;
    constexpr bool direct = std::is_same_v<acc_t, scalar_t>;
    const int64_t N = grad_in.size(0), C = grad_in.size(1);
    torch::stable::Tensor acc =
        direct ? grad_in
        : g.channels_last
            ? new_empty_channels_last(grad_in, N, C, g.H_in, g.W_in, ScalarType::Float)
            : torch::stable::new_empty(grad_in, {N, C, g.H_in, g.W_in}, ScalarType::Float);
    torch::stable::zero_(acc);  // the atomics add into it (zero_ runs on the current stream)
    if (g.channels_last) {
      const int64_t n_rows = N * g.H_out;
      const Launch l = launch_rows(g.W_out * C, n_rows);
      scatter_nhwc_kernel<scalar_t, acc_t><<<l.grid, l.block, 0, stream>>>(
          grad_out.const_data_ptr<scalar_t>(), acc.mutable_data_ptr<acc_t>(), n_rows, C, g.H_in, g.W_in, g.H_out,
          g.W_out, rh, rw, g.mode);
    } else {
      const Launch l = launch_for(g.W_out, g.H_out, g.planes, kPlanes);
      scatter_kernel<scalar_t, acc_t, kPlanes><<<l.grid, l.block, 0, stream>>>(
          grad_out.const_data_ptr<scalar_t>(), acc.mutable_data_ptr<acc_t>(), g.planes, g.H_in, g.W_in, g.H_out,
          g.W_out, rh, rw, g.mode);
    }
    STD_CUDA_KERNEL_LAUNCH_CHECK();
    if (!direct) {
      torch::stable::copy_(grad_in, acc);  // one rounding to float16/bfloat16, at the end
    }
  });
}
