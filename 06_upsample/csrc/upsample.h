#pragma once
// Chapter 06: bilinear resizing of NCHW tensors in three coordinate conventions.
//
//   x    (N, C, H_in, W_in)     packed NCHW, or packed channels-last (NHWC in
//                               memory); the entry points make it one of the two
//   out  (N, C, H_out, W_out)   any H_out, W_out >= 1: up- and downsampling
//
// Each axis is resized on its own. For output index d along an axis of input
// size in and output size out, the convention gives a source coordinate s, and
//
//   i0 = floor(s),  i1 = min(i0 + 1, in - 1),  l = s - i0
//   out[d] = (1 - l) * x[i0] + l * x[i1]
//
// Bilinear = this along H, then along W: four taps per output pixel.
//
// The conventions (ratio is the step in input pixels per output pixel):
//   align_corners  PyTorch align_corners=True      s = d * ratio,  ratio = (in-1)/(out-1), 0 if out == 1
//   half_pixel     PyTorch align_corners=False,    s = max((d + 0.5) * ratio - 0.5, 0),  ratio = in/out
//                  TF half_pixel_centers=True
//   tf_legacy      TF 1.x resize_bilinear default  s = d * ratio,  ratio = in/out
// PyTorch's F.interpolate(scale_factor=f) uses ratio = 1/f instead of in/out
// (unless recompute_scale_factor=True): the optional `scale` below.
//
// This header is plain C++ plus one macro from torch's header-only layer
// (C10_HOST_DEVICE): the CPU and the CUDA kernels share it, and it needs no
// part of libtorch.
#include <torch/headeronly/macros/Macros.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

enum class Mode : int { AlignCorners = 0, HalfPixel = 1, TfLegacy = 2 };

// "align_corners" / "half_pixel" / "tf_legacy" -> Mode; throws naming `op` otherwise.
Mode parse_mode(const char* op, std::string_view mode);

// The step between source coordinates of neighbouring output pixels, computed
// in T like PyTorch does (float for float/half/bfloat16 inputs, double for double).
//   align_corners            (in - 1) / (out - 1), and 0 when out == 1; a scale is ignored
//   half_pixel, tf_legacy    1 / scale when a scale is given (the double 1.0 / scale,
//                            then rounded to T), else in / out
template <typename T>
inline T axis_ratio(int64_t in, int64_t out, Mode mode, std::optional<double> scale) {
  // BEGIN SOLUTION source-coordinate
  // STUB: return std::numeric_limits<T>::quiet_NaN();  // NaN until you write it
  if (mode == Mode::AlignCorners) {
    return out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  }
  if (scale.has_value()) {
    return static_cast<T>(1.0 / *scale);  // the user's scale_factor wins over the sizes
  }
  return static_cast<T>(in) / static_cast<T>(out);
  // END SOLUTION
}

// The source coordinate of output index d (see the table above).
template <typename T>
C10_HOST_DEVICE inline T source_coordinate(int64_t d, T ratio, Mode mode) {
  // BEGIN SOLUTION source-coordinate
  // STUB: return (ratio - ratio) / (ratio - ratio);  // NaN until you write it
  switch (mode) {
    case Mode::AlignCorners:
      return ratio * static_cast<T>(d);
    case Mode::HalfPixel: {
      // Pixel d's centre is at d + 0.5 in output units, at (d + 0.5) * ratio in
      // input units, which is the coordinate (d + 0.5) * ratio - 0.5 of an
      // input pixel index. Near the top/left edge that is negative; PyTorch
      // clamps it to 0, so the edge output copies pixel 0 (TensorFlow reaches
      // the same value by clamping both taps to pixel 0 instead).
      const T s = ratio * (static_cast<T>(d) + T(0.5)) - T(0.5);
      return s < T(0) ? T(0) : s;
    }
    case Mode::TfLegacy:
    default:
      // The index itself, scaled: sampled (1 - ratio) / 2 input pixels further
      // right/down than half_pixel, so the content shifts up and to the left.
      return ratio * static_cast<T>(d);
  }
  // END SOLUTION
}

// The two input indices an output index reads, and the weight of the second.
template <typename T>
struct Taps {
  int64_t i0, i1;
  T l;  // x[i0] gets 1 - l, x[i1] gets l
};

// As PyTorch's guard_index_and_lambda: i0 = min(floor(s), in - 1) and
// l = min(s - i0, 1). When s passes in - 1 (upsampling: 2.2 or 2.4 for 3 -> 5),
// i0 = i1 = in - 1 and l has no effect. The clamp is done in T, before the
// conversion: converting a floating-point value that int64_t cannot hold is
// undefined behaviour in C++, and a tiny scale factor (1e-19 and below) makes
// s that large. Clamped first, any s >= in - 1, infinity included, reads the
// last pixel. A NaN s (only a broken coordinate function makes one) gets a
// valid index and keeps l = NaN, so that the output shows it.
template <typename T>
C10_HOST_DEVICE inline Taps<T> source_taps(int64_t d, int64_t in, T ratio, Mode mode) {
  const T s = source_coordinate<T>(d, ratio, mode);
  const T last = static_cast<T>(in - 1);
  T f = std::floor(s);
  f = f < last ? f : last;
  f = f > T(0) ? f : T(0);
  const int64_t i0 = static_cast<int64_t>(f);
  const int64_t i1 = i0 + 1 < in ? i0 + 1 : in - 1;
  const T l = s - f;
  return {i0, i1, l > T(1) ? T(1) : l};
}

// One axis: the value at taps t of a line of samples (a row, or one column
// of two rows' results).
template <typename scalar_t, typename T>
C10_HOST_DEVICE inline T sample_line(const scalar_t* __restrict__ line, const Taps<T>& t) {
  return (T(1) - t.l) * static_cast<T>(line[t.i0]) + t.l * static_cast<T>(line[t.i1]);
}

// ---------------------------------------------------------------------------
// The gather backward (exercise gather-backward: tap_weight and gather_range
// here, the CPU loop in upsample_cpu.cpp; exercise gather-cuda: the plain CUDA
// gather in gather_plain.cu, whose plan (plan.cu) calls the two functions below).
//
// Along one axis the forward is out = M x with M (out x in); the backward is
// grad_in = M^T grad_out. tap_weight is the entry M[d, i]: the weight with which
// output index d (its taps t) reads input index i, and 0 if it does not read i.
template <typename T>
C10_HOST_DEVICE inline T tap_weight(const Taps<T>& t, int64_t i) {
  // BEGIN SOLUTION gather-backward
  // STUB: return (t.l - t.l) / (t.l - t.l);  // NaN until you write it
  // Both taps can be the same pixel (i0 == i1 == in - 1): then the weights add up.
  return (t.i0 == i ? T(1) - t.l : T(0)) + (t.i1 == i ? t.l : T(0));
  // END SOLUTION
}

// The gather backward asks the transposed question: which output indices read
// input index i? i0(d) never decreases as d grows (s is monotone, and so is
// its rounding), so the answer is a contiguous range [begin, end) of d.
// first_output(j) is the first d with i0(d) >= j (out if none): a binary search.
template <typename T>
C10_HOST_DEVICE inline int64_t first_output(int64_t j, int64_t in, int64_t out, T ratio, Mode mode) {
  int64_t lo = 0, hi = out;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (source_taps<T>(mid, in, ratio, mode).i0 >= j) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// The outputs [begin, end) whose taps include input index i (i0(d) == i or
// i1(d) == i): all of them, and no other. begin == end when no output reads i
// (downsampling skips input pixels).
template <typename T>
C10_HOST_DEVICE inline void gather_range(int64_t i, int64_t in, int64_t out, T ratio, Mode mode, int64_t& begin,
                                         int64_t& end) {
  // BEGIN SOLUTION gather-backward
  // STUB: begin = 0; end = 0;  // no contributions: the gradient comes out all zero
  // d reads i through i0 when i0(d) == i, through i1 when i0(d) == i - 1 (and
  // when i0(d) == i == in - 1 through both, which is inside the first case).
  begin = first_output<T>(i - 1, in, out, ratio, mode);
  end = first_output<T>(i + 1, in, out, ratio, mode);
  // END SOLUTION
}

// What the kernels receive: sizes, convention and scale factors, already checked
// (ops.cpp). `scale_h`/`scale_w` are PyTorch's scale factors (see above).
//
// Layout: NCHW (planes = N * C planes of H x W, each packed), or channels-last
// (NHWC in memory: the C values of a pixel side by side, `channels` = C,
// planes = N * C as well).
struct ResizeGeometry {
  int64_t planes;  // N * C
  int64_t H_in, W_in, H_out, W_out;
  Mode mode;
  std::optional<double> scale_h, scale_w;
  int64_t channels = 1;        // C
  bool channels_last = false;  // x/out (forward), grad_out/grad_in (backward) are NHWC in memory
};
