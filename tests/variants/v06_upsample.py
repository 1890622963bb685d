"""Plausible wrong solutions for chapter 06; each must fail at least one test."""

from coursekit.exercises import Variant

VARIANTS = [
    Variant("swapped-h-w", "takes the row ratio from the widths and the column ratio from the heights",
            "csrc/upsample_cpu.cpp",
            "  const opmath_t rh = axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h);\n"
            "  const opmath_t rw = axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w);\n"
            "  const std::vector<Taps<opmath_t>> xtaps = taps_table<opmath_t>(g.W_in, g.W_out, rw, g.mode);\n"
            "  const int64_t rows = g.planes * g.H_out;",
            "  const opmath_t rh = axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w);\n"
            "  const opmath_t rw = axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h);\n"
            "  const std::vector<Taps<opmath_t>> xtaps = taps_table<opmath_t>(g.W_in, g.W_out, rw, g.mode);\n"
            "  const int64_t rows = g.planes * g.H_out;"),
    Variant("missing-clamp", "lets the half-pixel coordinate go negative at the top/left edge",
            "csrc/upsample.h", "      return s < T(0) ? T(0) : s;", "      return s;"),
    Variant("tf-with-half-pixel", "gives the TF legacy mode half-pixel centres",
            "csrc/upsample.h",
            "      // right/down than half_pixel, so the content shifts up and to the left.\n"
            "      return ratio * static_cast<T>(d);",
            "      // right/down than half_pixel, so the content shifts up and to the left.\n"
            "      return ratio * (static_cast<T>(d) + T(0.5)) - T(0.5);"),
    Variant("align-corners-ratio", "uses in/out instead of (in-1)/(out-1) with align_corners",
            "csrc/upsample.h", "return out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);",
            "return static_cast<T>(in) / static_cast<T>(out);"),
    Variant("scale-factor-ignored", "computes the ratio from the sizes when a scale factor was given",
            "csrc/upsample.h", "  if (scale.has_value()) {", "  if (false) {"),
    Variant("weights-swapped", "gives x[i0] the weight l and x[i1] the weight 1 - l",
            "csrc/upsample.h",
            "return (T(1) - t.l) * static_cast<T>(line[t.i0]) + t.l * static_cast<T>(line[t.i1]);",
            "return t.l * static_cast<T>(line[t.i0]) + (T(1) - t.l) * static_cast<T>(line[t.i1]);"),
    Variant("forward-cache-one-slot", "keeps both input rows of the CPU forward in one cache slot",
            "csrc/upsample_cpu.cpp", "return cache.get(r, r % 2, [&](opmath_t* line) {",
            "return cache.get(r, 0, [&](opmath_t* line) {"),
    Variant("gather-range-from-i", "starts the gather range at the first output whose i0 is i (misses the i1 readers)",
            "csrc/upsample.h", "begin = first_output<T>(i - 1, in, out, ratio, mode);",
            "begin = first_output<T>(i, in, out, ratio, mode);"),
    Variant("gather-range-end-short", "ends the gather range one index early",
            "csrc/upsample.h", "end = first_output<T>(i + 1, in, out, ratio, mode);",
            "end = first_output<T>(i + 1, in, out, ratio, mode) - 1;"),
    Variant("tap-weight-one-tap", "counts only the i0 tap when both taps are the same edge pixel",
            "csrc/upsample.h", "return (t.i0 == i ? T(1) - t.l : T(0)) + (t.i1 == i ? t.l : T(0));",
            "return t.i0 == i ? T(1) - t.l : (t.i1 == i ? t.l : T(0));"),
    Variant("cuda-swapped-h-w-index", "steps between output rows by H_out instead of W_out in the CUDA forward",
            "csrc/upsample_cuda.cu", "store_outputs<scalar_t, V>(op + h * W_out, r, n, vector);",
            "store_outputs<scalar_t, V>(op + h * H_out, r, n, vector);", cuda_only=True),
    Variant("cuda-row-cache-assumes-step-one", "the CUDA forward reuses its bottom row whenever the rows change "
            "(right when upsampling, wrong when a downsampling step skips input rows)",
            "csrc/upsample_cuda.cu", "if (yt.i0 == row1) {", "if (row1 >= 0) {", cuda_only=True),
    Variant("scatter-drops-a-tap", "forgets the bottom-right atomicAdd", "csrc/upsample_cuda.cu",
            "          atomicAdd(plane + yt.i1 * W_in + xt.i1, static_cast<acc_t>(xt.l * bottom));\n", "",
            cuda_only=True),
    Variant("gather-one-plane", "reads the first plane of the group's gradient for every plane in the CUDA gather",
            "csrc/upsample_cuda.cu", "static_cast<T>(g_row[k * plane_out + dw])",
            "static_cast<T>(g_row[dw])", cuda_only=True),
]
