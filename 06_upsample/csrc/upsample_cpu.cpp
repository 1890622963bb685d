// Chapter 06: the CPU kernels.
//
// Bilinear resizing is separable: interpolate along W, then along H. The CPU
// kernels use that to do less work than "four taps per output pixel":
//
//   forward   each input row is interpolated along W once (into a W_out-long
//             line) and kept while neighbouring output rows blend it along H;
//   backward  each grad_out row is gathered along W once (into a W_in-long
//             line) and kept while neighbouring input rows gather it along H.
//
// The taps of an output column depend only on its index, so they go into a
// table once per call. Work is split over rows with torch::stable::parallel_for
// (at::parallel_for behind a C function of libtorch: the thread pool is torch's,
// so torch.set_num_threads applies); each task keeps its own small cache of
// lines, so tasks never share writable data.
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <vector>

#include "kernels.h"

template <typename T>
static std::vector<Taps<T>> taps_table(int64_t in, int64_t out, T ratio, Mode mode) {
  std::vector<Taps<T>> taps(out);
  for (int64_t d = 0; d < out; ++d) {
    taps[d] = source_taps<T>(d, in, ratio, mode);
  }
  return taps;
}

// Rows of about this many elements make one task for the thread pool.
constexpr int64_t kGrainElements = 16384;

// The most lines a task of the backward keeps (see backward_kernel).
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

// The forward, in either layout. NCHW is planes x H x W; channels-last is
// N x H x W x C, whose rows hold W pixels of C values each. NCHW is the case
// C = 1 (and N = planes): one kernel serves both, and the two layouts give the
// same bits.
template <typename scalar_t>
static void forward_kernel(const scalar_t* x, scalar_t* out, const ResizeGeometry& g) {
  // opmath_t is float for float16/bfloat16 (their arithmetic is done in float), else scalar_t.
  using opmath_t = opmath_type<scalar_t>;
  const opmath_t rh = axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h);
  const opmath_t rw = axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w);
  const std::vector<Taps<opmath_t>> xtaps = taps_table<opmath_t>(g.W_in, g.W_out, rw, g.mode);
  const int64_t C = g.channels_last ? g.channels : 1;  // values per pixel
  const int64_t length = g.W_out * C;                   // values per output row
  const int64_t rows = g.planes / C * g.H_out;  // output rows (n, h) of all images, in memory order
  const int64_t grain = std::max<int64_t>(1, kGrainElements / length);
  torch::stable::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    // Input row r (of all images: r = n * H_in + i) goes to slot r % 2. An
    // output row needs rows i0 and i0 + 1 (or i0 twice): different slots.
    LineCache<opmath_t> cache(2, length);
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / g.H_out, h = row % g.H_out;
      const Taps<opmath_t> yt = source_taps<opmath_t>(h, g.H_in, rh, g.mode);
      auto along_w = [&](int64_t r) {
        return cache.get(r, r % 2, [&](opmath_t* line) {
          const scalar_t* in_row = x + r * g.W_in * C;
          if (C == 1) {
            for (int64_t w = 0; w < g.W_out; ++w) {
              line[w] = sample_line<scalar_t, opmath_t>(in_row, xtaps[w]);
            }
            return;
          }
          for (int64_t w = 0; w < g.W_out; ++w) {  // channels-last: C channels at once, contiguous
            const Taps<opmath_t> xt{xtaps[w].i0 * C, xtaps[w].i1 * C, xtaps[w].l};
            for (int64_t k = 0; k < C; ++k) {
              line[w * C + k] = sample_line<scalar_t, opmath_t>(in_row + k, xt);
            }
          }
        });
      };
      const opmath_t* top = along_w(n * g.H_in + yt.i0);
      const opmath_t* bottom = along_w(n * g.H_in + yt.i1);
      const opmath_t a = opmath_t(1) - yt.l, b = yt.l;
      scalar_t* out_row = out + row * length;
      for (int64_t i = 0; i < length; ++i) {  // contiguous: the compiler vectorises it
        out_row[i] = static_cast<scalar_t>(a * top[i] + b * bottom[i]);
      }
    }
  });
}

void upsample_forward_cpu(const torch::stable::Tensor& x, torch::stable::Tensor& out, const ResizeGeometry& g) {
  dispatch_floating_types(x.scalar_type(), "upsample_forward_cpu", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    forward_kernel<scalar_t>(x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), g);
  });
}

// Backward, by gathering: each input pixel (h, w) sums grad_out over the output
// pixels that read it, each times the weight it was read with:
//   grad_in[h, w] = sum_{dh in range(h)} wy(dh, h) * line_dh[w],
//   line_dh[w]    = sum_{dw in range(w)} wx(dw, w) * grad_out[dh, dw]
// Every grad_in element has one owner and a fixed summation order: no races,
// and the same bits on every run and for any number of threads (the cache only
// avoids recomputing identical lines).

// Per axis, for each input index i: the outputs [begin, end) that read it and
// their weights, stored one after the other (weight[offset[i] + k] belongs to
// output begin[i] + k).
template <typename T>
struct GatherTable {
  std::vector<int64_t> begin, end, offset;
  std::vector<T> weight;
  int64_t longest = 1;  // the longest range

  GatherTable(int64_t in, int64_t out, T ratio, Mode mode) : begin(in), end(in), offset(in) {
    const std::vector<Taps<T>> taps = taps_table<T>(in, out, ratio, mode);
    for (int64_t i = 0; i < in; ++i) {
      gather_range<T>(i, in, out, ratio, mode, begin[i], end[i]);
      offset[i] = static_cast<int64_t>(weight.size());
      for (int64_t d = begin[i]; d < end[i]; ++d) {
        weight.push_back(tap_weight<T>(taps[d], i));
      }
      longest = std::max(longest, end[i] - begin[i]);
    }
  }
};

// BEGIN SOLUTION gather-backward
// STUB: // (room for helpers of your kernel, if you want any)
// One grad_out row gathered along W: dst[w] = sum over the outputs dw that read
// input column w of wx(dw, w) * go_row[dw], for every w. K is at least the
// longest range, fixed at compile time: the loop over a range is unrolled and
// its bound check predicted, instead of a loop whose trip count is loaded per
// column (a range is 1 long at x0.5, 4 at x2, 8 at x4).
template <int K, typename scalar_t, typename opmath_t>
static void gather_line_k(const GatherTable<opmath_t>& cols, const scalar_t* __restrict__ go_row,
                          opmath_t* __restrict__ dst) {
  const int64_t n = static_cast<int64_t>(cols.begin.size());
  for (int64_t w = 0; w < n; ++w) {
    const opmath_t* wx = cols.weight.data() + cols.offset[w];
    const scalar_t* go = go_row + cols.begin[w];
    const int64_t count = cols.end[w] - cols.begin[w];
    opmath_t sum = 0;
    if constexpr (K > 0) {
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) {
        if (k < count) {
          sum += wx[k] * static_cast<opmath_t>(go[k]);
        }
      }
    } else {  // K = 0: any length
      for (int64_t k = 0; k < count; ++k) {
        sum += wx[k] * static_cast<opmath_t>(go[k]);
      }
    }
    dst[w] = sum;
  }
}

template <typename scalar_t, typename opmath_t>
static void gather_line(const GatherTable<opmath_t>& cols, const scalar_t* go_row, opmath_t* dst) {
  if (cols.longest <= 1) return gather_line_k<1>(cols, go_row, dst);
  if (cols.longest <= 2) return gather_line_k<2>(cols, go_row, dst);
  if (cols.longest <= 4) return gather_line_k<4>(cols, go_row, dst);
  if (cols.longest <= 8) return gather_line_k<8>(cols, go_row, dst);
  return gather_line_k<0>(cols, go_row, dst);
}
// END SOLUTION

// grad_out: planes x H_out x W_out, grad_in: planes x H_in x W_in, both packed.
template <typename scalar_t>
static void backward_kernel(const scalar_t* grad_out, scalar_t* grad_in, const ResizeGeometry& g) {
  using opmath_t = opmath_type<scalar_t>;
  const GatherTable<opmath_t> rows(g.H_in, g.H_out, axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h), g.mode);
  const GatherTable<opmath_t> cols(g.W_in, g.W_out, axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w), g.mode);
  const int64_t n_rows = g.planes * g.H_in;  // grad_in rows of all planes, in memory order
  const int64_t grain = std::max<int64_t>(1, kGrainElements / g.W_in);
  // The line cache of a task: `slots` lines of W_in values. A grad_in row's
  // range is about 2x the upsampling factor long (16 at x8), and every line
  // of it fits. A range can also be as long as H_out (H_in = 1, or a tiny
  // scale factor): a cache that held all of it would take H_out * W_in values
  // per task (a (1, 1, 1, 16000) input resized to (16000, 1): 16000 lines of
  // 16000, 1 GB). Capped, it stays at most kLineSlots * W_in; a line that was
  // evicted is computed again when the next grad_in row needs it, at most once
  // more (a grad_out row is read by at most two input rows).
  const int64_t slots = std::min<int64_t>(rows.longest, kLineSlots);
  // BEGIN SOLUTION gather-backward
  // STUB: STD_TORCH_CHECK(false, "exercise gather-backward is not done yet (see 06_upsample/README.md)");
  torch::stable::parallel_for(0, n_rows, grain, [&](int64_t begin, int64_t end) {
    // This task owns grad_in rows [begin, end): it writes each of their
    // elements once, and nothing else. grad_out row dh goes to slot
    // dh % slots of the cache: consecutive rows of a range never share a
    // slot, so a range of up to `slots` rows is gathered along W once.
    LineCache<opmath_t> cache(slots, g.W_in);
    std::vector<opmath_t> acc(g.W_in);
    const std::vector<opmath_t> zeros(g.W_in, opmath_t(0));
    for (int64_t row = begin; row < end; ++row) {
      const int64_t p = row / g.H_in, h = row % g.H_in;
      scalar_t* gi_row = grad_in + row * g.W_in;
      const int64_t first = rows.begin[h], last = rows.end[h] - 1;
      if (first > last) {  // no output row reads input row h: its gradient is 0
        std::fill(gi_row, gi_row + g.W_in, static_cast<scalar_t>(0));
        continue;
      }
      for (int64_t dh = first; dh <= last; ++dh) {
        // grad_out row dh of plane p, gathered along W: line[w] for every input column w
        const opmath_t* line = cache.get(p * g.H_out + dh, dh % slots, [&](opmath_t* dst) {
          gather_line(cols, grad_out + (p * g.H_out + dh) * g.W_out, dst);
        });
        const opmath_t wy = rows.weight[rows.offset[h] + (dh - first)];
        // One pass over the row per grad_out row: the first adds to zeros (no
        // separate zeroing pass), the last stores (no separate store pass).
        const opmath_t* sum = dh == first ? zeros.data() : acc.data();
        if (dh < last) {
          for (int64_t w = 0; w < g.W_in; ++w) {  // contiguous: vectorised
            acc[w] = sum[w] + wy * line[w];
          }
        } else {
          for (int64_t w = 0; w < g.W_in; ++w) {
            gi_row[w] = static_cast<scalar_t>(sum[w] + wy * line[w]);  // one rounding, at the end
          }
        }
      }
    }
  });
  // END SOLUTION
}

// The gather in channels-last: the NCHW kernel's line cache, with lines of
// W_in pixels of C values each. Each grad_out row is gathered along W once for
// all its channels (the innermost loop runs along C), then summed along H over
// W_in * C contiguous values. The sums are the NCHW kernel's, in the same
// order: the two layouts give the same bits.
template <typename scalar_t>
static void backward_kernel_nhwc(const scalar_t* grad_out, scalar_t* grad_in, const ResizeGeometry& g) {
  using opmath_t = opmath_type<scalar_t>;
  const GatherTable<opmath_t> rows(g.H_in, g.H_out, axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h), g.mode);
  const GatherTable<opmath_t> cols(g.W_in, g.W_out, axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w), g.mode);
  const int64_t C = g.channels, N = g.planes / C, length = g.W_in * C;
  const int64_t grain = std::max<int64_t>(1, kGrainElements / length);
  const int64_t slots = std::min<int64_t>(kLineSlots, rows.longest);  // as in NCHW
  torch::stable::parallel_for(0, N * g.H_in, grain, [&](int64_t begin, int64_t end) {
    LineCache<opmath_t> cache(slots, length);
    std::vector<opmath_t> acc(length);
    const std::vector<opmath_t> zeros(length, opmath_t(0));
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / g.H_in, h = row % g.H_in;
      scalar_t* gi_row = grad_in + row * length;
      const int64_t first = rows.begin[h], last = rows.end[h] - 1;
      if (first > last) {
        std::fill(gi_row, gi_row + length, static_cast<scalar_t>(0));
        continue;
      }
      for (int64_t dh = first; dh <= last; ++dh) {
        const opmath_t* line = cache.get(n * g.H_out + dh, dh % slots, [&](opmath_t* dst) {
          const scalar_t* go_row = grad_out + (n * g.H_out + dh) * g.W_out * C;
          for (int64_t w = 0; w < g.W_in; ++w) {
            opmath_t* __restrict__ sum = dst + w * C;
            std::fill(sum, sum + C, opmath_t(0));
            for (int64_t k = 0; k < cols.end[w] - cols.begin[w]; ++k) {
              const opmath_t wx = cols.weight[cols.offset[w] + k];
              const scalar_t* __restrict__ go = go_row + (cols.begin[w] + k) * C;
              for (int64_t c = 0; c < C; ++c) {
                sum[c] += wx * static_cast<opmath_t>(go[c]);
              }
            }
          }
        });
        const opmath_t wy = rows.weight[rows.offset[h] + dh - first];
        const opmath_t* sum = dh == first ? zeros.data() : acc.data();  // as in NCHW: one pass per line
        if (dh < last) {
          for (int64_t i = 0; i < length; ++i) {
            acc[i] = sum[i] + wy * line[i];
          }
        } else {
          for (int64_t i = 0; i < length; ++i) {
            gi_row[i] = static_cast<scalar_t>(sum[i] + wy * line[i]);  // one rounding, at the end
          }
        }
      }
    }
  });
}

void upsample_backward_cpu(const torch::stable::Tensor& grad_out, torch::stable::Tensor& grad_in,
                           const ResizeGeometry& g) {
  dispatch_floating_types(grad_out.scalar_type(), "upsample_backward_cpu", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    if (g.channels_last) {
      backward_kernel_nhwc<scalar_t>(grad_out.const_data_ptr<scalar_t>(), grad_in.mutable_data_ptr<scalar_t>(), g);
    } else {
      backward_kernel<scalar_t>(grad_out.const_data_ptr<scalar_t>(), grad_in.mutable_data_ptr<scalar_t>(), g);
    }
  });
}
