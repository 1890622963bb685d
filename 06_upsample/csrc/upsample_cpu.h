#pragma once
// Chapter 06: what the two files of CPU kernels share. upsample_cpu.cpp holds the
// NCHW kernels (and the gather-backward exercise), upsample_cpu_nhwc.cpp the
// channels-last ones.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "kernels.h"

// Rows of about this many elements make one task for the thread pool.
constexpr int64_t kGrainElements = 16384;

// The rows of a gather's task (row_values values to a row): about kGrainElements terms of work. A
// grad_in value sums about (out / in + 1) grad_out values along each axis, so an upsampling's
// rows take more work per value than the forward's, and a small one is worth two threads sooner.
inline int64_t gather_grain(const ResizeGeometry& g, int64_t row_values) {
  const double terms = (double(g.H_out) / double(g.H_in) + 1) * (double(g.W_out) / double(g.W_in) + 1);
  return std::max<int64_t>(1, static_cast<int64_t>(double(kGrainElements) / (double(row_values) * terms)));
}

// The widest chunk of a row (values) that one pass handles: a line, and the
// taps or ranges of its columns, are at most this long.
constexpr int64_t kChunkValues = int64_t(1) << 16;

// A chunk of columns [lo, hi) holds at most this many pixels (of C values each).
inline int64_t chunk_pixels(int64_t C) { return std::max<int64_t>(1, kChunkValues / C); }

// One chunk of input indices [lo, hi) of an axis: for each, the outputs
// [begin, end) that read it, and their weights (weight(i, d) = M[d, i]).
// The weights are stored one range after the other (weight[offset[k] + j]
// belongs to input lo + k and output begin[k] + j) when they are few; a chunk
// whose ranges are long (an axis shrunk 16 times or more: a range of 2^23
// outputs for an input of 2 pixels shrunk from 2^24) computes them when asked.
template <typename T>
struct GatherTable {
  int64_t lo, hi;  // the input indices of the chunk
  std::vector<int64_t> begin, end, offset;  // of input index lo + k, at k
  std::vector<T> weight;                    // empty when computed on the fly
  int64_t longest = 1;                      // the longest range
  int64_t read = 0, unread_runs = 0;        // inputs some output reads; runs of inputs none reads
  int64_t in, out;
  T ratio;
  Mode mode;

  GatherTable(int64_t in, int64_t out, T ratio, Mode mode, int64_t lo, int64_t hi)
      : lo(lo), hi(hi), begin(hi - lo), end(hi - lo), offset(hi - lo), in(in), out(out), ratio(ratio), mode(mode) {
    int64_t total = 0;
    for (int64_t k = 0; k < hi - lo; ++k) {
      gather_range<T>(lo + k, in, out, ratio, mode, begin[k], end[k]);
      offset[k] = total;
      total += std::max<int64_t>(end[k] - begin[k], 0);
      longest = std::max(longest, end[k] - begin[k]);
      if (end[k] > begin[k]) {
        ++read;
      } else if (k == 0 || end[k - 1] > begin[k - 1]) {
        ++unread_runs;
      }
    }
    if (total > 16 * (hi - lo) + 64) return;  // too many to store: see weight_of
    weight.resize(total);
    for (int64_t k = 0; k < hi - lo; ++k) {
      for (int64_t d = begin[k]; d < end[k]; ++d) {
        weight[offset[k] + d - begin[k]] = tap_weight<T>(source_taps<T>(d, in, ratio, mode), lo + k);
      }
    }
  }
  int64_t size() const { return hi - lo; }
  // M[d, lo + k] for an output d of the range of lo + k.
  T weight_of(int64_t k, int64_t d) const {
    return weight.empty() ? tap_weight<T>(source_taps<T>(d, in, ratio, mode), lo + k) : weight[offset[k] + d - begin[k]];
  }
};

// The ranges and weights of every input row (a GatherTable of the H_in rows) when there are no
// more rows than a chunk holds, else none: a gather then looks a row up instead of two binary
// searches per row and a tap per term (an axis can hold 2^31 pixels: no table that long).
template <typename T>
std::optional<GatherTable<T>> row_table(const ResizeGeometry& g, T rh) {
  if (g.H_in > kChunkValues) return std::nullopt;
  return GatherTable<T>(g.H_in, g.H_out, rh, g.mode, 0, g.H_in);
}

// The most lines a task of the backward keeps (see backward_kernel, gather_narrow_rows).
constexpr int64_t kLineSlots = 16;

// A few lines of `length` values, each tagged with the row it holds. Looking a
// row up either finds it or recomputes it into the slot `slot_of(row)`.
template <typename T>
class LineCache {
 public:
  LineCache(int64_t slots, int64_t length)
      : length_(length), keys_(slots, -1), data_(static_cast<size_t>(slots * length)) {}

  template <typename Fill>
  const T* get(int64_t key, int64_t slot, Fill&& fill) {
    T* line = data_.data() + slot * length_;
    if (keys_[slot] != key) {
      fill(line);
      keys_[slot] = key;
    }
    return line;
  }

 private:
  int64_t length_;
  std::vector<int64_t> keys_;
  std::vector<T> data_;
};

// The longest range of outputs reading one input index along an axis, capped at
// `cap`: range(i) holds the outputs with i0 == i - 1 and those with i0 == i, so
// it is a run of equal i0 plus the run before it when that is of i0 - 1. One pass
// over the outputs, stopped at the cap.
template <typename T>
inline int64_t longest_range(int64_t in, int64_t out, T ratio, Mode mode, int64_t cap) {
  int64_t longest = 1, prev_i = -2, prev_run = 0, cur_i = -2, run = 0;
  for (int64_t d = 0; d <= out && longest < cap; ++d) {
    const int64_t i = d < out ? source_taps<T>(d, in, ratio, mode).i0 : -3;
    if (i == cur_i) {
      ++run;
      continue;
    }
    if (run > 0) {
      longest = std::max(longest, run + (prev_i == cur_i - 1 ? prev_run : 0));
      longest = std::max(longest, run);  // range(cur_i + 1) holds this run at least
    }
    prev_i = cur_i;
    prev_run = run;
    cur_i = i;
    run = 1;
  }
  return std::min(longest, cap);
}

// float16 and bfloat16 rows converted in bulk, 8 values at a time with F16C and AVX2 where the
// CPU has them (upsample_cpu_nhwc.cpp): widened exactly, rounded to nearest even, as the types'
// own conversions, which convert one value at a time.
void widen(const torch::headeronly::Half* src, float* dst, int64_t n);
void widen(const torch::headeronly::BFloat16* src, float* dst, int64_t n);
void narrow(const float* src, torch::headeronly::Half* dst, int64_t n);
void narrow(const float* src, torch::headeronly::BFloat16* dst, int64_t n);

// The channels-last kernels (upsample_cpu_nhwc.cpp), for float, double, Half
// and BFloat16: x, out, grad_out and grad_in packed NHWC. backward_nhwc sums
// along W first (see there); the caller sends the shapes that need H first
// elsewhere.
template <typename scalar_t>
void forward_nhwc(const scalar_t* x, scalar_t* out, const ResizeGeometry& g);
template <typename scalar_t>
void backward_nhwc(const scalar_t* grad_out, scalar_t* grad_in, const ResizeGeometry& g);
