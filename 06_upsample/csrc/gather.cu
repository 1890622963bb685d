// Chapter 06: the general gathers, rungs GatherPlanes, GatherColumnPacks and
// GatherNhwc of the backward's ladder (ladder.h). Same sum as the plain gather
// (gather_plain.cu); what changes is what a thread owns and what it keeps in
// registers (gather_window.cuh).
#include "gather_window.cuh"

namespace ch06 {
namespace {

// The NCHW gather's block: 64 threads along W, 4 input rows. Neighbouring input
// rows read overlapping grad_out rows (at x2, rows h and h + 1 share two of their
// four), which a block spanning several rows can find in L1.
constexpr int kGatherWidth = 64;

// Planes per NCHW thread: the row weights and the loop over the window are shared
// by that many values, and that many independent loads are in flight per step.
template <typename scalar_t>
constexpr int kGatherPlanes = sizeof(scalar_t) == 2 ? 16 : 8;

// Input rows per NCHW thread: 4 when its column window serves little work (fewer
// than 8 planes, e.g. an RGB image; or a window of at most 2 columns, a
// downsampling), else 1. The grid covers H_in / rows of them; the kernel's
// grid-stride loop takes the rest.
constexpr int gather_rows_per_thread(int planes_per_thread, int window) {
  return planes_per_thread < 8 || window == 2 ? 4 : 1;
}

// Blocks per SM the gathers ask for (__launch_bounds__): 4 caps them at 64
// registers, so that enough warps are resident to hide the loads' latency.
// double keeps its registers (capped, it would spill).
template <typename scalar_t>
constexpr int kGatherMinBlocks = sizeof(scalar_t) == 8 ? 1 : 4;

// Column packs (rung GatherColumnPacks: NCHW float32, a window of more than 6
// columns, i.e. an upsampling by more than 3). At x4 a thread's window is 8
// columns from 4w - 2, lanes 4 columns apart: each scalar load of a warp spans
// 512 bytes to use 128. Loaded as aligned 16-byte packs, the window is
// kColumnPackWindow = 12 columns from a multiple of 4 (at x4 the 8 real ones and
// 2 more on either side, which the sum skips): 3 pack loads per plane and row
// instead of 8 scalar ones. The packs and 12 weights need registers, so a thread
// sums its planes kPackPlanes at a time and the kernel asks for 3 blocks per SM.
constexpr int kColumnPack = 4;
constexpr int kColumnPackWindow = 12;
constexpr int kPackPlanes = 4;

// x -> an input column w, y -> an input row h, z -> a group of kPlanes planes. A
// remainder of planes (fewer than kPlanes left) is summed one plane at a time.
template <typename scalar_t, int kPlanes, int K, int V>
__global__ void __launch_bounds__(kThreads, V == 1 ? kGatherMinBlocks<scalar_t> : 3)
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
        constexpr int P = V == 1 || kPlanes < kPackPlanes ? kPlanes : kPackPlanes;  // planes summed at once
#pragma unroll 1
        for (int s = 0; s < kPlanes; s += P) {
          gather_pixel<P, K, V, false>(go + s * plane_out, plane_out, gi + s * plane_in, plane_in, 1, h, w, rows,
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

// Channels-last: a thread per NC neighbouring channels of one grad_in pixel
// (step = C: the "planes" are the channels), as one 16-byte pack when kPack, in
// rows_per consecutive rows of pixels (n, h), kNhwcRows unless that leaves SMs
// idle: the thread's column window and its index arithmetic serve that many
// pixels, and the next row's grad_out rows overlap this one's. x -> (w, channel
// group), y -> a chunk of rows.
constexpr int kNhwcRows = 4;

template <typename scalar_t, int NC, int K, bool kPack>
__global__ void __launch_bounds__(kThreads, sizeof(scalar_t) == 2 ? 5 : kGatherMinBlocks<scalar_t>)
    gather_nhwc_kernel(const scalar_t* __restrict__ grad_out, scalar_t* __restrict__ grad_in, int64_t rows, int64_t C,
                       int rows_per, AxisPlan<opmath_type<scalar_t>> rows_plan, AxisPlan<opmath_type<scalar_t>> cols) {
  using T = opmath_type<scalar_t>;
  const int64_t groups = C / NC;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // (w, channel group)
  if (t >= cols.in * groups) {
    return;
  }
  const int64_t w = t / groups, c = (t - w * groups) * NC;
  const ColumnWindow<T, K> win = column_window<T, K, 1>(cols, w, cols.begin[w]);
  const int64_t chunks = (rows + rows_per - 1) / rows_per;
  for (int64_t chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
    const int64_t first = chunk * rows_per, last = first + rows_per < rows ? first + rows_per : rows;
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

// Calls f with std::integral_constant<int, K> for the window bound kw (2, 4 or 8).
template <typename F>
void with_window(int kw, F&& f) {
  if (kw == 2) return f(std::integral_constant<int, 2>{});
  if (kw == 4) return f(std::integral_constant<int, 4>{});
  return f(std::integral_constant<int, 8>{});
}

// Columns per window held in registers: the most grad_out columns that read one
// input column, 2 / rw rounded up (more only at a clamped edge, which the kernels
// handle K at a time).
template <typename T>
int window_bound(T rw) {
  const double reach = 2.0 / static_cast<double>(rw);
  return reach <= 2 ? 2 : reach <= 4 ? 4 : 8;
}

}  // namespace

template <typename scalar_t>
void launch_gather_planes(const Call<scalar_t>& c, bool column_packs) {
  const ResizeGeometry& g = c.g;
  const auto plan = make_plan(c, true, true);
  const int kw = window_bound(c.rw);
  // Up to 8 planes a thread (16 for 2-byte types), no more than there are, and fewer (a row a
  // thread, then 8, 4, 2, 1 planes; 3 goes to 1) while the launch would leave SMs idle.
  int per_thread = kGatherPlanes<scalar_t> > 8 && g.planes >= kGatherPlanes<scalar_t> ? kGatherPlanes<scalar_t>
                   : g.planes >= 8                                                 ? 8
                   : g.planes >= 4                                                 ? 4
                                                                                   : static_cast<int>(g.planes);
  int rows_per = gather_rows_per_thread(per_thread, kw);
  gather_work_to_fill(
      c.in.get_device_index(), per_thread, rows_per,
      [&](int per, int rows) { return g.W_in * ((g.H_in + rows - 1) / rows) * ((g.planes + per - 1) / per); },
      [](int per) { return per == 3 ? 1 : per / 2; });
  auto launch = [&](auto planes_tag) {
    constexpr int kPlanes = decltype(planes_tag)::value;
    const Launch l = launch_for(g.W_in, (g.H_in + rows_per - 1) / rows_per, g.planes, kPlanes, kGatherWidth);
    if constexpr (std::is_same_v<scalar_t, float>) {
      if (column_packs) {
        gather_kernel<scalar_t, kPlanes, kColumnPackWindow, kColumnPack>
            <<<l.grid, l.block, 0, c.stream>>>(c.src(), c.dst(), g.planes, plan.rows, plan.cols);
        STD_CUDA_KERNEL_LAUNCH_CHECK();
        return;
      }
    }
    STD_TORCH_CHECK(!column_packs, "upsample_bilinear2d: column packs are compiled for float32 only");
    with_window(kw, [&](auto k_tag) {
      gather_kernel<scalar_t, kPlanes, decltype(k_tag)::value, 1>
          <<<l.grid, l.block, 0, c.stream>>>(c.src(), c.dst(), g.planes, plan.rows, plan.cols);
    });
    STD_CUDA_KERNEL_LAUNCH_CHECK();
  };
  switch (per_thread) {
    case 1: return launch(std::integral_constant<int, 1>{});
    case 2: return launch(std::integral_constant<int, 2>{});
    case 3: return launch(std::integral_constant<int, 3>{});
    case 4: return launch(std::integral_constant<int, 4>{});
    case 8: return launch(std::integral_constant<int, 8>{});
    default: return launch(std::integral_constant<int, kGatherPlanes<scalar_t>>{});
  }
}

template <typename scalar_t>
void launch_gather_nhwc(const Call<scalar_t>& c) {
  const ResizeGeometry& g = c.g;
  const auto plan = make_plan(c, true, true);
  const int kw = window_bound(c.rw);
  const int64_t C = g.channels, n_rows = g.planes / C * g.H_in;
  const bool packs_aligned = aligned(c.in.const_data_ptr(), 16) && aligned(c.out.const_data_ptr(), 16);
  // kV channels per thread (16 bytes' worth) when C allows it, else 4, 3 or 2 when they divide C
  // (an RGB pixel's 3 channels share one thread's lookups), else 1; kNhwcRows rows a thread. While
  // that would leave SMs idle: a row a thread, then fewer channels (coalesced still: neighbouring
  // threads take neighbouring channels).
  constexpr int NC = kV<scalar_t>;
  const int counts[] = {NC, NC > 4 ? 4 : 3, 3, 2, 1};  // the first that divides C, then fewer
  auto dividing_below = [&](int above) {  // the first count under `above` that divides C
    int i = 0;
    while (counts[i] >= above || C % counts[i] != 0) ++i;
    return counts[i];
  };
  int nc = dividing_below(NC + 1), rows_per = kNhwcRows;
  gather_work_to_fill(
      c.in.get_device_index(), nc, rows_per,
      [&](int per, int rows) { return g.W_in * (C / per) * ((n_rows + rows - 1) / rows); }, dividing_below);
  auto launch = [&](auto channels_tag) {
    constexpr int kNC = decltype(channels_tag)::value;
    const Launch l = launch_rows(g.W_in * (C / kNC), (n_rows + rows_per - 1) / rows_per);
    with_window(kw, [&](auto k_tag) {
      constexpr int K = decltype(k_tag)::value;
      constexpr bool kCanPack = kNC * sizeof(scalar_t) == 16;
      auto kernel = kCanPack && packs_aligned ? gather_nhwc_kernel<scalar_t, kNC, K, kCanPack>
                                              : gather_nhwc_kernel<scalar_t, kNC, K, false>;
      kernel<<<l.grid, l.block, 0, c.stream>>>(c.src(), c.dst(), n_rows, C, rows_per, plan.rows, plan.cols);
    });
    STD_CUDA_KERNEL_LAUNCH_CHECK();
  };
  switch (nc) {
    case 1: return launch(std::integral_constant<int, 1>{});
    case 2: return launch(std::integral_constant<int, 2>{});
    case 3: return launch(std::integral_constant<int, 3>{});
    case 4: return launch(std::integral_constant<int, 4>{});
    default: return launch(std::integral_constant<int, NC>{});
  }
}

#define CH06_INSTANTIATE(T)                                         \
  template void launch_gather_planes<T>(const Call<T>&, bool);     \
  template void launch_gather_nhwc<T>(const Call<T>&);
CH06_FOR_EACH_TYPE(CH06_INSTANTIATE)

}  // namespace ch06
