// Chapter 06: the CPU kernels for NCHW tensors (channels-last ones are in
// upsample_cpu_nhwc.cpp, which the entry points at the end call).
//
// Bilinear resizing is separable: interpolate along W, then along H. The CPU
// kernels use that to do less work than "four taps per output pixel":
//
//   forward   each input row is interpolated along W once (into a line of
//             output columns) and kept while neighbouring output rows blend it
//             along H;
//   backward  each grad_out row is gathered along W once (into a line of input
//             columns) and kept while neighbouring input rows gather it along H;
//             or, when that would cost more than the tensors hold (H grows while
//             W shrinks), along H first (backward_kernel_h_first).
//
// Memory: besides the tensors, a task keeps a few lines, and a call keeps the
// taps or ranges of one chunk of columns (rows wider than kChunkValues values
// are done a chunk of columns at a time) and of the rows when there are no more
// than that (the forward's taps when H_out <= 4096). No table grows with an
// axis past a chunk (an axis can hold 2^31 pixels); the H-first backward keeps
// lines of W_out values, and its table of the output columns is as long. Work is split over rows with
// torch::stable::parallel_for (at::parallel_for behind a C function of
// libtorch: the thread pool is torch's, so torch.set_num_threads applies); each
// task keeps its own lines, so tasks never share writable data.
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels.h"
#include "upsample_cpu.h"

// dst[k] += w * src[k] for k < n (src in scalar_t or opmath_t): contiguous, no
// aliasing (restrict), the conversions inline: the compiler vectorises it.
template <typename src_t, typename opmath_t>
static inline void add_scaled(opmath_t* __restrict__ dst, const src_t* __restrict__ src, opmath_t w, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    dst[k] += w * static_cast<opmath_t>(src[k]);
  }
}

// The forward of the output rows [begin, end) (of all planes, in memory order) when a row is
// narrow and whole (W_out values) and a plane is short: for each plane the task touches, the
// input rows it reads are sampled along W into `lines` (2-byte inputs widened first, when a row
// is not many more values than it gives and a plane's rows fit 64 KB as floats), then each output
// row is blended from two lines, the same arithmetic as forward_chunk's lines. xtaps: the W_out
// columns' taps; ytaps: the H_out rows'. A task keeps at most 16 KB of lines and 64 KB of floats.
template <typename scalar_t>
static void forward_plane_lines(const scalar_t* x, scalar_t* out, const ResizeGeometry& g,
                                const std::vector<Taps<opmath_type<scalar_t>>>& xtaps,
                                const std::vector<Taps<opmath_type<scalar_t>>>& ytaps, int64_t begin, int64_t end) {
  using opmath_t = opmath_type<scalar_t>;
  constexpr bool k2 = sizeof(scalar_t) == 2;
  const int64_t width = g.W_out;
  const bool widen_rows = k2 && g.W_in <= 4 * width + 64 && g.H_in * g.W_in <= 16384;
  std::vector<opmath_t> lines(g.H_in * width);
  std::vector<float> wide(widen_rows ? g.H_in * g.W_in : 0);
  std::vector<float> blended(k2 ? std::min(end - begin, g.H_out) * width : 0);
  for (int64_t row = begin; row < end;) {
    const int64_t p = row / g.H_out, h0 = row % g.H_out;
    const int64_t h1 = std::min(g.H_out, h0 + (end - row));  // this plane's output rows [h0, h1)
    int64_t lo = ytaps[h0].i0, hi = ytaps[h0].i1;              // the input rows they read: [lo, hi]
    for (int64_t h = h0; h < h1; ++h) {
      lo = std::min(lo, ytaps[h].i0);
      hi = std::max(hi, ytaps[h].i1);
    }
    const scalar_t* plane = x + p * g.H_in * g.W_in;
    if constexpr (k2) {
      if (widen_rows) widen(plane + lo * g.W_in, wide.data(), (hi + 1 - lo) * g.W_in);
    }
    for (int64_t i = lo; i <= hi; ++i) {
      opmath_t* line = lines.data() + (i - lo) * width;
      if (widen_rows) {
        const float* in_row = wide.data() + (i - lo) * g.W_in;
        for (int64_t w = 0; w < width; ++w) line[w] = sample_line<float, opmath_t>(in_row, xtaps[w]);
      } else {
        const scalar_t* in_row = plane + i * g.W_in;
        for (int64_t w = 0; w < width; ++w) line[w] = sample_line<scalar_t, opmath_t>(in_row, xtaps[w]);
      }
    }
    for (int64_t h = h0; h < h1; ++h) {
      const Taps<opmath_t>& yt = ytaps[h];
      const opmath_t a = opmath_t(1) - yt.l, b = yt.l;
      const opmath_t* top = lines.data() + (yt.i0 - lo) * width;
      const opmath_t* bottom = lines.data() + (yt.i1 - lo) * width;
      if constexpr (k2) {
        float* dst = blended.data() + (h - h0) * width;
        for (int64_t i = 0; i < width; ++i) dst[i] = a * top[i] + b * bottom[i];
      } else {
        scalar_t* dst = out + (p * g.H_out + h) * width;
        for (int64_t i = 0; i < width; ++i) dst[i] = static_cast<scalar_t>(a * top[i] + b * bottom[i]);
      }
    }
    if constexpr (k2) narrow(blended.data(), out + (p * g.H_out + h0) * width, (h1 - h0) * width);
    row += h1 - h0;
  }
}

// The forward of output columns [w0, w1): planes x H x W.
template <typename scalar_t>
static void forward_chunk(const scalar_t* x, scalar_t* out, const ResizeGeometry& g, int64_t w0, int64_t w1) {
  // opmath_t is float for float16/bfloat16 (their arithmetic is done in float), else scalar_t.
  using opmath_t = opmath_type<scalar_t>;
  const opmath_t rh = axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h);
  const opmath_t rw = axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w);
  // The taps of the chunk's output columns depend only on their index: a table for the chunk.
  std::vector<Taps<opmath_t>> xtaps(w1 - w0);
  for (int64_t w = w0; w < w1; ++w) {
    xtaps[w - w0] = source_taps<opmath_t>(w, g.W_in, rw, g.mode);
  }
  const int64_t width = w1 - w0;             // values per line
  const int64_t rows = g.planes * g.H_out;  // output rows (p, h) of all planes, in memory order
  const int64_t grain = std::max<int64_t>(1, kGrainElements / width);
  // Narrow rows (under 16 outputs) that shrink along H, where an input row serves about one output
  // row: each output straight from its four taps (the same arithmetic as the lines), no lines kept.
  const bool direct = width < 16 && g.H_out <= g.H_in;
  // 2-byte types convert in bulk (widen, narrow: a vector at a time). The inputs: on narrow rows,
  // whole rows, a block of consecutive rows at a time, when a row is not many more values than the
  // outputs it gives; on wider rows, the columns the chunk reads, under the same condition. The
  // outputs: a run of rows at a time when they are whole rows (consecutive in memory), else a row.
  constexpr bool k2 = sizeof(scalar_t) == 2;
  const int64_t run_rows = width == g.W_out ? std::max<int64_t>(1, 512 / width) : 1;
  int64_t lo = xtaps[0].i0, hi = xtaps[0].i1;
  for (const Taps<opmath_t>& t : xtaps) {
    lo = std::min(lo, t.i0);
    hi = std::max(hi, t.i1);
  }
  const int64_t span = hi + 1 - lo;
  const int64_t block_rows = k2 && width < 16 && width == g.W_out && g.W_in <= 4 * width + 64
                                 ? std::max<int64_t>(2, 512 / g.W_in) : 0;
  const bool widen_span = k2 && width >= 16 && span <= 4 * width + 64;
  // The taps of the output rows, when the rows of several planes would compute them again.
  std::vector<Taps<opmath_t>> ytaps(g.planes > 1 && g.H_out <= 4096 ? g.H_out : 0);
  for (int64_t h = 0; h < static_cast<int64_t>(ytaps.size()); ++h) {
    ytaps[h] = source_taps<opmath_t>(h, g.H_in, rh, g.mode);
  }
  // Short planes of narrow whole rows that grow along H (several output rows per input row): a
  // task samples each input row of a plane along W once, all of them together (a few KB), then
  // blends every output row of the plane from two of them. Per output row only the blend is
  // left, none of the line cache's bookkeeping, which on rows this short costs more than the blend.
  const bool plane_lines = !direct && width < 16 && width == g.W_out && !ytaps.empty() && g.H_in * width <= 4096;
  torch::stable::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    if (plane_lines) {
      forward_plane_lines(x, out, g, xtaps, ytaps, begin, end);
      return;
    }
    // Input row r (of all planes: r = p * H_in + i) goes to slot r % 2. An
    // output row needs rows i0 and i0 + 1 (or i0 twice): different slots.
    LineCache<opmath_t> cache(2, width);
    std::vector<float> wide(block_rows > 0 ? block_rows * g.W_in : widen_span ? span : 0);
    std::vector<float> blended(k2 ? run_rows * width : 0);
    int64_t wide_lo = 0, wide_hi = 0;  // block_rows: the input rows [wide_lo, wide_hi) are in `wide`
    auto widened = [&](int64_t r) {    // input row r, as floats
      if (r < wide_lo || r + 1 >= wide_hi) {  // r + 1 too: a direct output reads rows r and r + 1
        wide_lo = r;
        wide_hi = std::min(r + block_rows, g.planes * g.H_in);
        if constexpr (k2) widen(x + wide_lo * g.W_in, wide.data(), (wide_hi - wide_lo) * g.W_in);
      }
      return wide.data() + (r - wide_lo) * g.W_in;
    };
    auto along_w = [&](int64_t r) {  // the line of input row r: its values at the output columns
      return cache.get(r, r % 2, [&](opmath_t* line) {
        if constexpr (k2) {
          if (block_rows > 0) {
            const float* in_row = widened(r);
            for (int64_t w = 0; w < width; ++w) {
              line[w] = sample_line<float, opmath_t>(in_row, xtaps[w]);
            }
            return;
          }
          if (widen_span) {  // the same values, read as floats from columns lo, lo + 1, ...
            widen(x + r * g.W_in + lo, wide.data(), span);
            for (int64_t w = 0; w < width; ++w) {
              Taps<opmath_t> t = xtaps[w];
              t.i0 -= lo;
              t.i1 -= lo;
              line[w] = sample_line<float, opmath_t>(wide.data(), t);
            }
            return;
          }
        }
        const scalar_t* in_row = x + r * g.W_in;
        for (int64_t w = 0; w < width; ++w) {
          line[w] = sample_line<scalar_t, opmath_t>(in_row, xtaps[w]);
        }
      });
    };
    int64_t run_start = begin;  // 2-byte types: the first output row not yet rounded into `out`
    int64_t p = begin / g.H_out, h = begin % g.H_out;  // of `row`, counted along
    for (int64_t row = begin; row < end; ++row, h = h + 1 < g.H_out ? h + 1 : (++p, 0)) {
      const Taps<opmath_t> yt = ytaps.empty() ? source_taps<opmath_t>(h, g.H_in, rh, g.mode) : ytaps[h];
      const opmath_t a = opmath_t(1) - yt.l, b = yt.l;
      const int64_t r0 = p * g.H_in + yt.i0, r1 = p * g.H_in + yt.i1;
      // The row's outputs: into `out`, or for 2-byte types into the run, rounded below.
      auto store = [&](auto&& value) {
        if constexpr (k2) {
          float* run = blended.data() + (row - run_start) * width;
          for (int64_t i = 0; i < width; ++i) {
            run[i] = value(i);
          }
        } else {
          scalar_t* __restrict__ out_row = out + row * g.W_out + w0;
          for (int64_t i = 0; i < width; ++i) {  // contiguous: the compiler vectorises it
            out_row[i] = static_cast<scalar_t>(value(i));
          }
        }
      };
      // Direct: the two input rows as they are, or as floats (block_rows), each output from four taps.
      auto blend_rows = [&](const auto* in0, const auto* in1) {
        using in_t = std::remove_cv_t<std::remove_pointer_t<decltype(in0)>>;
        store([&](int64_t i) {
          return a * sample_line<in_t, opmath_t>(in0, xtaps[i]) + b * sample_line<in_t, opmath_t>(in1, xtaps[i]);
        });
      };
      if (direct && block_rows > 0) {
        const float* in0 = widened(r0);
        blend_rows(in0, in0 + (r1 - r0) * g.W_in);
      } else if (direct) {
        blend_rows(x + r0 * g.W_in, x + r1 * g.W_in);
      } else {
        const opmath_t* top = along_w(r0);
        const opmath_t* bottom = along_w(r1);
        store([&](int64_t i) { return a * top[i] + b * bottom[i]; });
      }
      if constexpr (k2) {
        if (row + 1 - run_start == run_rows || row + 1 == end) {
          narrow(blended.data(), out + run_start * g.W_out + w0, (row + 1 - run_start) * width);
          run_start = row + 1;
        }
      }
    }
  });
}

template <typename scalar_t>
static void forward_kernel(const scalar_t* x, scalar_t* out, const ResizeGeometry& g) {
  if (g.channels_last) {
    return forward_nhwc<scalar_t>(x, out, g);
  }
  const int64_t chunk = chunk_pixels(1);
  for (int64_t w0 = 0; w0 < g.W_out; w0 += chunk) {
    forward_chunk<scalar_t>(x, out, g, w0, std::min(g.W_out, w0 + chunk));
  }
}

void upsample_forward_cpu(const torch::stable::Tensor& x, torch::stable::Tensor& out, const ResizeGeometry& g) {
  THO_DISPATCH_V2(x.scalar_type(), "upsample_forward_cpu", AT_WRAP(([&] {
    forward_kernel<scalar_t>(x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), g);
  })), AT_FLOATING_TYPES, torch::headeronly::ScalarType::Half, torch::headeronly::ScalarType::BFloat16);
}

// Backward, by gathering: each input pixel (h, w) sums grad_out over the output
// pixels that read it, each times the weight it was read with:
//   grad_in[h, w] = sum_{dh in range(h)} wy(dh, h) * line_dh[w],
//   line_dh[w]    = sum_{dw in range(w)} wx(dw, w) * grad_out[dh, dw]
// Every grad_in element has one owner and a fixed summation order: no races,
// and the same bits on every run and for any number of threads (the cache only
// avoids recomputing identical lines).

// BEGIN SOLUTION gather-backward
// STUB: // (room for helpers of your kernel, if you want any)
// One grad_out row gathered along W: dst[k] = sum over the outputs dw that read
// input column cols.lo + k of wx(dw) * go_row[dw], for every column of the chunk.
// K is at least the longest range, fixed at compile time: the loop over a range
// is unrolled and its bound check predicted, instead of a loop whose trip count
// is loaded per column (a range is 1 long at x0.5, 4 at x2, 8 at x4).
template <int K, typename scalar_t, typename opmath_t>
static void gather_line_k(const GatherTable<opmath_t>& cols, const scalar_t* __restrict__ go_row,
                          opmath_t* __restrict__ dst) {
  const int64_t n = cols.size();
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
  if (cols.weight.empty()) {  // ranges too long to store their weights: computed here
    for (int64_t w = 0; w < cols.size(); ++w) {
      opmath_t sum = 0;
      for (int64_t d = cols.begin[w]; d < cols.end[w]; ++d) {
        sum += cols.weight_of(w, d) * static_cast<opmath_t>(go_row[d]);
      }
      dst[w] = sum;
    }
    return;
  }
  if (cols.longest <= 1) return gather_line_k<1>(cols, go_row, dst);
  if (cols.longest <= 2) return gather_line_k<2>(cols, go_row, dst);
  if (cols.longest <= 4) return gather_line_k<4>(cols, go_row, dst);
  if (cols.longest <= 8) return gather_line_k<8>(cols, go_row, dst);
  return gather_line_k<0>(cols, go_row, dst);
}
// END SOLUTION

// grad_out: planes x H_out x W_out, grad_in: planes x H_in x W_in, both packed.
// One call writes the columns [cols.lo, cols.hi) of every grad_in row: all of
// them, unless a row is wider than a chunk (backward_cpu calls it per chunk).
template <typename scalar_t>
static void backward_kernel(const scalar_t* grad_out, scalar_t* grad_in, const ResizeGeometry& g,
                            const GatherTable<opmath_type<scalar_t>>& cols) {
  using opmath_t = opmath_type<scalar_t>;
  const opmath_t rh = axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h);
  const int64_t n_rows = g.planes * g.H_in;  // grad_in rows of all planes, in memory order
  const int64_t width = cols.size();         // the columns of grad_in this call writes
  const int64_t grain = gather_grain(g, width);
  // The line cache of a task: `slots` lines of `width` values. A grad_in row's
  // range is about 2x the upsampling factor long (16 at x8), and every line
  // of it fits. A range can also be as long as H_out (H_in = 1, or a tiny
  // scale factor): a cache that held all of it would take H_out * width values
  // per task (a (1, 1, 1, 16000) input resized to (16000, 1): 16000 lines of
  // 16000, 1 GB). Capped, it stays at most kLineSlots * width; a line that was
  // evicted is computed again when the next grad_in row needs it, at most once
  // more (a grad_out row is read by at most two input rows).
  const int64_t slots = longest_range<opmath_t>(g.H_in, g.H_out, rh, g.mode, kLineSlots);
  // BEGIN SOLUTION gather-backward
  // STUB: STD_TORCH_CHECK(false, "exercise gather-backward is not done yet (see 06_upsample/README.md)");
  // float16 on rows of 16 values or more: a grad_out row's columns [read_lo, read_hi) (those the
  // chunk reads) widened in bulk before its gather, a grad_in row rounded in bulk (widen,
  // narrow): Half's own conversions take one value at a time.
  constexpr bool kHalf = std::is_same_v<scalar_t, torch::headeronly::Half>;
  const bool bulk = kHalf && width >= 16;
  int64_t read_lo = g.W_out, read_hi = 0;  // none when no column of the chunk is read
  for (int64_t k = 0; k < width; ++k) {
    if (cols.begin[k] < cols.end[k]) {
      read_lo = std::min(read_lo, cols.begin[k]);
      read_hi = std::max(read_hi, cols.end[k]);
    }
  }
  read_hi = std::max(read_hi, read_lo);
  // The rows' ranges and weights in a table like `cols` when H_in fits a chunk (row_table).
  const std::optional<GatherTable<opmath_t>> rows = row_table(g, rh);
  torch::stable::parallel_for(0, n_rows, grain, [&](int64_t begin, int64_t end) {
    // This task owns grad_in rows [begin, end): it writes each of their
    // elements once, and nothing else. grad_out row dh goes to slot
    // dh % slots of the cache: consecutive rows of a range never share a
    // slot, so a range of up to `slots` rows is gathered along W once.
    LineCache<opmath_t> cache(slots, width);
    std::vector<opmath_t> acc(width);
    const std::vector<opmath_t> zeros(width, opmath_t(0));
    std::vector<float> wide(bulk ? g.W_out : 0);
    for (int64_t row = begin; row < end; ++row) {
      const int64_t p = row / g.H_in, h = row % g.H_in;
      scalar_t* gi_row = grad_in + row * g.W_in + cols.lo;
      int64_t first, stop;  // the grad_out rows [first, stop) read input row h
      if (rows) {
        first = rows->begin[h];
        stop = rows->end[h];
      } else {
        gather_range<opmath_t>(h, g.H_in, g.H_out, rh, g.mode, first, stop);
      }
      const int64_t last = stop - 1;
      if (first > last) {  // no output row reads input row h: its gradient is 0
        std::fill(gi_row, gi_row + width, static_cast<scalar_t>(0));
        continue;
      }
      for (int64_t dh = first; dh <= last; ++dh) {
        // grad_out row dh of plane p, gathered along W: line[w] for every input column w of the chunk
        const opmath_t* line = cache.get(p * g.H_out + dh, dh % slots, [&](opmath_t* dst) {
          const scalar_t* go_row = grad_out + (p * g.H_out + dh) * g.W_out;
          if constexpr (kHalf) {
            if (bulk) {
              widen(go_row + read_lo, wide.data() + read_lo, read_hi - read_lo);
              return gather_line(cols, wide.data(), dst);
            }
          }
          gather_line(cols, go_row, dst);
        });
        const opmath_t wy =
            rows ? rows->weight_of(h, dh) : tap_weight<opmath_t>(source_taps<opmath_t>(dh, g.H_in, rh, g.mode), h);
        // One pass over the row per grad_out row: the first adds to zeros (no
        // separate zeroing pass), the last stores (no separate store pass).
        const opmath_t* sum = dh == first ? zeros.data() : acc.data();
        if (dh < last || bulk) {
          for (int64_t w = 0; w < width; ++w) {  // contiguous: vectorised
            acc[w] = sum[w] + wy * line[w];
          }
          if constexpr (kHalf) {
            if (dh == last) narrow(acc.data(), gi_row, width);
          }
        } else {
          for (int64_t w = 0; w < width; ++w) {
            gi_row[w] = static_cast<scalar_t>(sum[w] + wy * line[w]);  // one rounding, at the end
          }
        }
      }
    }
  });
  // END SOLUTION
}

// The gather along H first, for shapes whose H grows while W shrinks (a column
// of N pixels from (N, 1) gradients into (1, N), say). Gathering along W first
// makes H_out lines of W_in values: H_out * W_in work, more than both tensors
// hold (N^2 there). Here a task sums, for each of its grad_in rows h, the
// grad_out rows of h's range into one line of W_out * C values (t = sum of
// wy * grad_out[dh]), then adds each output column of t into the one or two
// input columns it reads, in increasing order of the output column: per input
// pixel the same terms and order as a gather over its range, with one writer.
// Work: (2 H_out + H_in) * W_out + H_in * W_in per image; memory: two lines per
// task (three for 2-byte types) and a table of the W_out output columns. Both
// layouts (C = 1 for NCHW), with the same bits.
template <typename scalar_t>
static void backward_kernel_h_first(const scalar_t* grad_out, scalar_t* grad_in, const ResizeGeometry& g) {
  using opmath_t = opmath_type<scalar_t>;
  const opmath_t rh = axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h);
  const opmath_t rw = axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w);
  const int64_t C = g.channels_last ? g.channels : 1, N = g.planes / C;
  const int64_t in_len = g.W_in * C, out_len = g.W_out * C;
  const int64_t grain = gather_grain(g, std::max(in_len, out_len));
  // The output columns, read by every row: each one's input columns and their weights, a table
  // of W_out entries (as long as a line).
  struct Column {
    int64_t i0, i1;  // i1 == i0 (the last pixel): one tap, of weight w0
    opmath_t w0, w1;
  };
  std::vector<Column> columns(g.W_out);
  for (int64_t dw = 0; dw < g.W_out; ++dw) {
    const Taps<opmath_t> tw = source_taps<opmath_t>(dw, g.W_in, rw, g.mode);
    columns[dw] = {tw.i0, tw.i1, tap_weight<opmath_t>(tw, tw.i0), tap_weight<opmath_t>(tw, tw.i1)};
  }
  torch::stable::parallel_for(0, N * g.H_in, grain, [&](int64_t begin, int64_t end) {
    std::vector<opmath_t> t(out_len), acc(in_len);
    constexpr bool k2 = sizeof(scalar_t) == 2;
    std::vector<float> wide(k2 ? out_len : 0);  // 2-byte types: a grad_out row widened in bulk (widen)
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / g.H_in, h = row % g.H_in;
      scalar_t* gi_row = grad_in + row * in_len;
      int64_t first, stop;
      gather_range<opmath_t>(h, g.H_in, g.H_out, rh, g.mode, first, stop);
      if (first >= stop) {
        std::fill(gi_row, gi_row + in_len, static_cast<scalar_t>(0));
        continue;
      }
      std::fill(t.begin(), t.end(), opmath_t(0));
      for (int64_t dh = first; dh < stop; ++dh) {
        const opmath_t wy = tap_weight<opmath_t>(source_taps<opmath_t>(dh, g.H_in, rh, g.mode), h);
        const scalar_t* go_row = grad_out + (n * g.H_out + dh) * out_len;
        if constexpr (k2) {
          widen(go_row, wide.data(), out_len);
          add_scaled(t.data(), wide.data(), wy, out_len);
        } else {
          add_scaled(t.data(), go_row, wy, out_len);
        }
      }
      std::fill(acc.begin(), acc.end(), opmath_t(0));
      for (int64_t dw = 0; dw < g.W_out; ++dw) {
        const Column& c = columns[dw];
        if (C == 1) {  // NCHW: one value per column, without add_scaled's loop
          acc[c.i0] += c.w0 * t[dw];
          if (c.i1 != c.i0) acc[c.i1] += c.w1 * t[dw];
          continue;
        }
        add_scaled(acc.data() + c.i0 * C, t.data() + dw * C, c.w0, C);
        if (c.i1 != c.i0) {
          add_scaled(acc.data() + c.i1 * C, t.data() + dw * C, c.w1, C);
        }
      }
      if constexpr (k2) {
        narrow(acc.data(), gi_row, in_len);
      } else {
        for (int64_t i = 0; i < in_len; ++i) {
          gi_row[i] = static_cast<scalar_t>(acc[i]);
        }
      }
    }
  });
}

// 2-byte types (float16, bfloat16), rows shorter than 32 values in planes of at most
// kGrainElements values: the gather converts the values of a row it reads and rounds those it
// stores a few at a time (a float16 row of 16 or more in bulk, but the tail of 1 to 7 values and a
// shorter row a value at a time, with Half's own conversion). Here a task widens a block of planes
// to float in one bulk conversion (widen), gathers it with the float kernel (its parallel_for,
// nested, runs in the task) and rounds the block in one (narrow). The same sums in float and one
// rounding to nearest even: the same bits as the 2-byte kernel. Memory: two blocks of at most
// kGrainElements floats per task. On longer rows the extra pass over each block costs more than
// it saves.
template <typename scalar_t>
static void backward_planes_via_float(const scalar_t* grad_out, scalar_t* grad_in, const ResizeGeometry& g,
                                      const GatherTable<float>& cols) {
  const int64_t out_plane = g.H_out * g.W_out, in_plane = g.H_in * g.W_in;
  const int64_t block = std::max<int64_t>(1, kGrainElements / std::max(out_plane, in_plane));
  torch::stable::parallel_for(0, g.planes, block, [&](int64_t begin, int64_t end) {
    std::vector<float> go(std::min(block, end - begin) * out_plane), gi(std::min(block, end - begin) * in_plane);
    for (int64_t p = begin; p < end; p += block) {
      ResizeGeometry sub = g;
      sub.planes = std::min(block, end - p);
      widen(grad_out + p * out_plane, go.data(), sub.planes * out_plane);
      backward_kernel<float>(go.data(), gi.data(), sub, cols);
      narrow(gi.data(), grad_in + p * in_plane, sub.planes * in_plane);
    }
  });
}

// Which order, and the chunks of columns: see the top of the file.
template <typename scalar_t>
static void backward_cpu(const scalar_t* grad_out, scalar_t* grad_in, const ResizeGeometry& g) {
  using opmath_t = opmath_type<scalar_t>;
  if (g.H_out > g.H_in && g.W_out < g.W_in) {
    return backward_kernel_h_first<scalar_t>(grad_out, grad_in, g);
  }
  if (g.channels_last) {
    return backward_nhwc<scalar_t>(grad_out, grad_in, g);
  }
  if constexpr (sizeof(scalar_t) == 2) {
    if (g.W_in < 32 && g.H_in * g.W_in <= kGrainElements && g.H_out * g.W_out <= kGrainElements) {
      const GatherTable<float> cols(g.W_in, g.W_out, axis_ratio<float>(g.W_in, g.W_out, g.mode, g.scale_w), g.mode,
                                    0, g.W_in);
      return backward_planes_via_float<scalar_t>(grad_out, grad_in, g, cols);
    }
  }
  const opmath_t rw = axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w);
  const int64_t chunk = chunk_pixels(1);
  for (int64_t w0 = 0; w0 < g.W_in; w0 += chunk) {
    const GatherTable<opmath_t> cols(g.W_in, g.W_out, rw, g.mode, w0, std::min(g.W_in, w0 + chunk));
    backward_kernel<scalar_t>(grad_out, grad_in, g, cols);
  }
}

void upsample_backward_cpu(const torch::stable::Tensor& grad_out, torch::stable::Tensor& grad_in,
                           const ResizeGeometry& g) {
  THO_DISPATCH_V2(grad_out.scalar_type(), "upsample_backward_cpu", AT_WRAP(([&] {
    backward_cpu<scalar_t>(grad_out.const_data_ptr<scalar_t>(), grad_in.mutable_data_ptr<scalar_t>(), g);
  })), AT_FLOATING_TYPES, torch::headeronly::ScalarType::Half, torch::headeronly::ScalarType::BFloat16);
}
