#pragma once
// Chapter 06: the kernel ladder, and the one table that says which kernel a call takes.
//
// Each CUDA kernel of the chapter is a rung: a version of the forward or the
// backward that the lesson explains, from the plain one-thread-per-output kernel
// (PyTorch's own design) to the fastest. The host picks a kernel by walking this
// table in order and taking the first row whose condition holds (dispatch.cu).
// Rows marked "ladder only" are never picked: they run when asked for by name
// (torch.ops.ch06._upsample_bilinear2d_rung), for the ladder benchmark and the
// exercise's tests. torch.ops.ch06._upsample_bilinear2d_kernel_name tells which
// kernel a call takes; the tests ask it rather than re-derive these rules.
//
// "aligned" means the tensors' data start on a 16-byte boundary (ours always do,
// a view with an offset may not); V = kV, the values in 16 bytes (4 float32, 8 of
// a 2-byte type, 2 float64); "exact x2" and "exact x0.5" are Span::Double and
// Span::Halve (cuda_common.cuh): the ratio is exactly 0.5 / 2 in the compute type.
#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels.h"

namespace ch06 {

// How a kernel treats one axis when its ratio is exact:
//   Taps    any ratio: the general source_taps per index;
//   Halve   an exact x0.5 (in = 2 out, half_pixel or tf_legacy): index d reads 2d and 2d + 1;
//   Double  an exact x2 in half_pixel (out = 2 in): index d reads d/2 - 1/4's two neighbours.
enum class Span : int { Taps, Halve, Double };

enum class Kernel : int {
  // forward, NCHW
  ForwardNaive,   // ladder only: a thread per output value, 4 loads each
  ForwardRows,    // V outputs x a column of rows per thread, the sampled input rows kept in registers
  ForwardHalve,   // + an exact x0.5 along W: the two taps are one 16-byte pack
  ForwardDouble,  // + an exact x2 along W (half_pixel): the taps are fixed registers of three 8-byte loads
  // forward, channels-last
  ForwardNhwc,        // V values of a row of pixels per thread, each value its own taps
  ForwardNhwcPacks,   // C a multiple of V, aligned: V channels of one pixel, one 16-byte load per tap
  ForwardNhwcRgbX2,   // C = 3, exact x2 along W: whole pixels per thread, stores staged in shared memory
  // backward, scatter (atomicAdd; the order of the adds varies: not deterministic)
  Scatter,
  ScatterNhwc,
  // backward, gather (one writer per grad_in value: deterministic)
  GatherPlain,         // ladder only, the exercise: a thread per grad_in value, the plan looked up per tap
  GatherPlanes,        // a thread per input column, many planes; the column window in registers
  GatherColumnPacks,   // float32, a window of more than 6 columns: the window loaded 4 columns at a time
  GatherX2,            // an exact x2 along W: V columns per thread, 16-byte loads, neighbours by shuffles
  GatherX4,            // an exact x4 along W (half_pixel): the same, F = 4
  GatherHalve,         // an exact x0.5 along W: V columns per thread, one 8-byte load per grad_out row
  GatherNhwc,          // channels-last: a thread per group of channels of one pixel, 4 rows
  GatherNhwcRgbX2,     // channels-last, C = 3, exact x2 along W: GatherX2's kernel with 3 channels
  GatherNhwcX2,        // channels-last, C a multiple of V, exact x2 along W: a channel pack of 2 pixels
  GatherNhwcX2Tile,    // the same with H an exact x2 too: a tile of grad_out through shared memory
  Count
};

struct KernelInfo {
  Kernel id;
  const char* name;       // what the ops take and return
  const char* direction;  // "forward" or "backward"
  const char* when;       // the condition of its row, as the host checks it
};

// The table, in the order the host tries the rows (dispatch.cu, kTable).
const KernelInfo& kernel_info(Kernel k);
std::optional<Kernel> kernel_by_name(std::string_view name);

// Launchers: one per rung, in the file of its kernel; each is instantiated for
// double, float, Half and BFloat16 (the exact-ratio rungs refuse double).
template <typename scalar_t> struct Call;
template <typename scalar_t> void launch_forward_naive(const Call<scalar_t>& c);
template <typename scalar_t> void launch_forward_rows(const Call<scalar_t>& c, Span span);
template <typename scalar_t> void launch_forward_nhwc(const Call<scalar_t>& c, bool packs);
template <typename scalar_t> void launch_forward_nhwc_rgb_x2(const Call<scalar_t>& c);
template <typename scalar_t> void launch_scatter(const Call<scalar_t>& c);
template <typename scalar_t> void launch_gather_plain(const Call<scalar_t>& c);
template <typename scalar_t> void launch_gather_planes(const Call<scalar_t>& c, bool column_packs);
template <typename scalar_t> void launch_gather_nhwc(const Call<scalar_t>& c);
template <typename scalar_t> void launch_gather_exact(const Call<scalar_t>& c, Kernel k);
template <typename scalar_t> void launch_gather_nhwc_x2(const Call<scalar_t>& c, bool tile);

}  // namespace ch06
