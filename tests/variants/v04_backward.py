"""Plausible wrong solutions for chapter 04; each must fail at least one test of its own exercise
(or, outside every exercise, some test of the chapter)."""

from coursekit.exercises import Variant

VARIANTS = [
    # ------------------------------------------------------------------ gelu-derivative (csrc/gelu.h)
    Variant("gelu-tanh-form", "uses the tanh approximation's derivative for the exact GELU",
            "csrc/gelu.h", "  return cdf + x * pdf;\n",
            "  const T t = std::tanh(T(0.7978845608) * (x + T(0.044715) * x * x * x));\n"
            "  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * T(0.7978845608) * (T(1) + T(3 * 0.044715) * x * x);\n"),
    Variant("gelu-missing-product-rule", "forgets the x * phi(x) term",
            "csrc/gelu.h", "  return cdf + x * pdf;", "  return cdf;"),
    Variant("gelu-derivative-sign", "subtracts x * phi(x) instead of adding it",
            "csrc/gelu.h", "  return cdf + x * pdf;", "  return cdf - x * pdf;"),
    Variant("gelu-derivative-wrong-variance", "phi(x) with exp(-x^2) instead of exp(-x^2 / 2)",
            "csrc/gelu.h", "gelu_exp(T(-0.5) * x * x)", "gelu_exp(T(-1) * x * x)"),
    Variant("gelu-derivative-float-constant", "1/sqrt(2 pi) as a float literal: float64 goes through float",
            "csrc/gelu.h", "const T inv_sqrt_2pi = T(0.39894228040143267794);", "const T inv_sqrt_2pi = T(0.39894228f);"),
    Variant("gelu-derivative-float-inv-sqrt2", "1/sqrt(2) as a float literal in the derivative: float64 goes through float",
            "csrc/gelu.h", "const T inv_sqrt2 = T(0.70710678118654752440);\n  const T inv_sqrt_2pi",
            "const T inv_sqrt2 = T(0.70710678f);\n  const T inv_sqrt_2pi"),
    Variant("gelu-derivative-std-erf", "calls std::erf instead of gelu_erf: fine for float and double, no vector erf",
            "csrc/gelu.h", "const T cdf = T(0.5) * (T(1) + gelu_erf(x * inv_sqrt2));",
            "const T cdf = T(0.5) * (T(1) + std::erf(x * inv_sqrt2));"),
    # ------------------------------------------------------------------ GELU outside the exercise
    Variant("gelu-forward-float-constant", "1/sqrt(2) as a float literal in the forward: float64 through float",
            "csrc/gelu.h", "  const T inv_sqrt2 = T(0.70710678118654752440);\n  return x",
            "  const T inv_sqrt2 = T(0.70710678f);\n  return x"),
    Variant("gelu-forward-in-storage-type", "the CPU forward computes in float16/bfloat16 instead of float",
            "csrc/gelu_cpu.cpp", "o[i] = static_cast<scalar_t>(gelu_value<opmath_t>(static_cast<opmath_t>(in[i])));",
            "o[i] = gelu_value<scalar_t>(in[i]);"),
    Variant("gelu-derivative-in-storage-type", "the CPU backward evaluates gelu' in float16/bfloat16",
            "csrc/gelu_cpu.cpp", "gelu_derivative<opmath_t>(static_cast<opmath_t>(in[i]))",
            "gelu_derivative<scalar_t>(in[i])"),
    Variant("gelu-backward-rounds-twice", "rounds gelu'(x) to the storage type, then multiplies in it",
            "csrc/gelu_cpu.cpp",
            "gi[i] = static_cast<scalar_t>(static_cast<opmath_t>(g[i]) * gelu_derivative<opmath_t>(static_cast<opmath_t>(in[i])));",
            "gi[i] = g[i] * static_cast<scalar_t>(gelu_derivative<opmath_t>(static_cast<opmath_t>(in[i])));"),
    Variant("gelu-cuda-backward-opmath-float", "the CUDA backward computes in float for every dtype: float64 through float",
            "csrc/gelu_cuda.cu", "    using opmath_t = at::opmath_type<scalar_t>;\n    return static_cast<scalar_t>(static_cast<opmath_t>(grad) *",
            "    using opmath_t = float;\n    return static_cast<scalar_t>(static_cast<opmath_t>(grad) *", cuda_only=True),
    Variant("gelu-vec-tail-skipped", "the vectorised CPU loops never write the last (end - begin) % size values",
            "csrc/gelu_cpu_vec.cpp", "  if (i < end) {\n    const int rest = static_cast<int>(end - i);\n    f(Vec::loadu(in + i, rest)...)",
            "  if (false) {\n    const int rest = static_cast<int>(end - i);\n    f(Vec::loadu(in + i, rest)...)"),
    Variant("gelu-vec-backward-without-grad-out", "the vectorised CPU backward stores gelu'(x), not grad_out * gelu'(x)",
            "csrc/gelu_cpu_vec.cpp", "{ return g * as_vec(gelu_derivative<Math>(v)); }",
            "{ return as_vec(gelu_derivative<Math>(v)); }"),
    Variant("gelu-bf16-instruction-flushes-denormals", "the AVX512_BF16 rounding without its fallback: "
            "bfloat16 results below 2^-126 become 0",
            "csrc/gelu_cpu_vec.cpp", "if (__builtin_expect(tiny == 0, 1)) {", "if (true) {"),
    Variant("gelu-bf16-instruction-halves-swapped", "_mm512_cvtne2ps_pbh(lo, hi): the two halves of every vector swapped",
            "csrc/gelu_cpu_vec.cpp", "_mm512_cvtne2ps_pbh(hi, lo)", "_mm512_cvtne2ps_pbh(lo, hi)"),
    Variant("gelu-avx512-exp-truncates", "exp_coarse's n rounded down instead of to nearest: |r| up to ln 2, "
            "outside the polynomial's range",
            "csrc/gelu_cpu_vec.cpp", "_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC", "_MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC"),
    Variant("gelu-erf-sign-dropped", "the vector erf returns erf(|x|): the sign of x never applied",
            "csrc/gelu_cpu_vec.cpp", "const F u = at::vec::clamp(x, F(-4.f), F(4.f));",
            "const F u = at::vec::clamp(x.abs(), F(-4.f), F(4.f));"),
    Variant("gelu-grad-out-assumed-contiguous", "gelu_backward reads grad_out as if it were contiguous",
            "csrc/gelu_cpu.cpp", "const at::Tensor grad_out = grad_out_in.contiguous();", "const at::Tensor grad_out = grad_out_in;"),
    Variant("gelu-x-assumed-contiguous", "gelu_forward reads x as if it were contiguous",
            "csrc/gelu_cpu.cpp", "  check_gelu_input(x_in, \"x\");\n  const at::Tensor x = x_in.contiguous();\n  at::Tensor out",
            "  check_gelu_input(x_in, \"x\");\n  const at::Tensor x = x_in;\n  at::Tensor out"),
    Variant("gelu-shape-check-numel", "compares grad_out and x by element count, not shape",
            "csrc/gelu_cpu.cpp", "TORCH_CHECK(grad_out_in.sizes() == x_in.sizes(),", "TORCH_CHECK(grad_out_in.numel() == x_in.numel(),"),
    Variant("gelu-no-grad-dtype-check", "accepts a grad_out of another dtype than x",
            "csrc/gelu_cpu.cpp", "TORCH_CHECK(grad_out_in.scalar_type() == x_in.scalar_type(),",
            "TORCH_CHECK(true || grad_out_in.scalar_type() == x_in.scalar_type(),"),
    Variant("gelu-is-floating-type", "checks at::isFloatingType, which lets float8 through to the dispatch",
            "csrc/gelu_cpu.cpp",
            "TORCH_CHECK(dtype == at::kDouble || dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16, \"gelu: \",",
            "TORCH_CHECK(at::isFloatingType(dtype), \"gelu: \","),
    Variant("gelu-cuda-backward-rounds-twice", "the CUDA backward multiplies in the storage type",
            "csrc/gelu_cuda.cu",
            "return static_cast<scalar_t>(static_cast<opmath_t>(grad) * gelu_derivative<opmath_t>(static_cast<opmath_t>(x)));",
            "return grad * static_cast<scalar_t>(gelu_derivative<opmath_t>(static_cast<opmath_t>(x)));", cuda_only=True),
    Variant("gelu-cuda-tail-skipped", "the CUDA kernel never writes the last numel % VEC elements",
            "csrc/gelu_cuda.cu", "for (int64_t i = packs * VEC + first; i < numel; i += stride) {",
            "for (int64_t i = packs * VEC + first; i < packs * VEC; i += stride) {", cuda_only=True),
    # ------------------------------------------------------------------ weight-grad (csrc/trilinear.h)
    Variant("weight-grad-sign-by-value", "picks the sign by comparing the factor with u (wx == u) instead of "
            "testing the corner's bit: at x = 0, u = 1 - u and every -1 becomes +1",
            "csrc/trilinear.h",
            "  const T sx = (k >> 2) & 1 ? T(1) : T(-1);\n  const T sy = (k >> 1) & 1 ? T(1) : T(-1);\n"
            "  const T sz = k & 1 ? T(1) : T(-1);",
            "  const T sx = wx == u ? T(1) : T(-1);\n  const T sy = wy == v ? T(1) : T(-1);\n"
            "  const T sz = wz == w ? T(1) : T(-1);"),
    Variant("points-grad-sign", "the derivative of (1 - u) taken as +1",
            "csrc/trilinear.h", "const T sx = (k >> 2) & 1 ? T(1) : T(-1);", "const T sx = T(1);"),
    Variant("weight-grad-sign-swapped", "the signs along z the wrong way round",
            "csrc/trilinear.h", "const T sz = k & 1 ? T(1) : T(-1);", "const T sz = k & 1 ? T(-1) : T(1);"),
    Variant("weight-grad-wrong-bit", "the sign along x from bit 0 of k (the corner order of another convention)",
            "csrc/trilinear.h", "const T sx = (k >> 2) & 1 ? T(1) : T(-1);", "const T sx = k & 1 ? T(1) : T(-1);"),
    Variant("weight-grad-wrong-factor", "dW/dv keeps the y factor instead of the z factor",
            "csrc/trilinear.h", "d_dv = wx * sy * wz;", "d_dv = wx * sy * wy;"),
    Variant("weight-grad-through-float", "a float temporary in dW/du: float64 goes through float",
            "csrc/trilinear.h", "d_du = sx * wy * wz;", "d_du = static_cast<float>(sx * wy) * wz;"),
    # ------------------------------------------------------------------ points-grad-cpu (csrc/trilinear_cpu.cpp)
    Variant("points-grad-static-sums", "the three sums declared static and set to 0 at each call: one set for "
            "every thread of parallel_for (right values almost always; a data race)",
            "csrc/trilinear_cpu.cpp", "  opmath_t gx = 0, gy = 0, gz = 0;\n",
            "  static opmath_t gx, gy, gz;\n  gx = gy = gz = 0;\n"),
    Variant("missing-half", "forgets du/dx = 1/2",
            "csrc/trilinear_cpu.cpp", "gp_n[0] = static_cast<scalar_t>(opmath_t(0.5) * gx);",
            "gp_n[0] = static_cast<scalar_t>(gx);"),
    Variant("points-half-after-rounding", "rounds the sums to scalar_t first and halves them afterwards: in float16 "
            "a sum above 65504 whose half fits becomes inf",
            "csrc/trilinear_cpu.cpp",
            "  gp_n[0] = static_cast<scalar_t>(opmath_t(0.5) * gx);\n  gp_n[1] = static_cast<scalar_t>(opmath_t(0.5) * gy);\n"
            "  gp_n[2] = static_cast<scalar_t>(opmath_t(0.5) * gz);",
            "  gp_n[0] = static_cast<scalar_t>(gx);\n  gp_n[1] = static_cast<scalar_t>(gy);\n  gp_n[2] = static_cast<scalar_t>(gz);\n"
            "  for (int d = 0; d < 3; ++d) gp_n[d] = static_cast<scalar_t>(opmath_t(0.5) * static_cast<opmath_t>(gp_n[d]));"),
    Variant("points-grad-without-grad-out", "sums feats * dw over f without the factor grad_out",
            "csrc/trilinear_cpu.cpp", "    gx += g * sx;", "    gx += sx;"),
    Variant("points-sum-in-storage-type", "accumulates the sum over f in float16/bfloat16",
            "csrc/trilinear_cpu.cpp", "  opmath_t gx = 0, gy = 0, gz = 0;\n  for (int64_t f = 0; f < F; ++f) {",
            "  scalar_t gx = 0, gy = 0, gz = 0;\n  for (int64_t f = 0; f < F; ++f) {"),
    Variant("points-corner-sum-in-storage-type", "sums the eight corners of one f in float16/bfloat16",
            "csrc/trilinear_cpu.cpp", "    opmath_t sx = 0, sy = 0, sz = 0;", "    scalar_t sx = 0, sy = 0, sz = 0;"),
    Variant("points-sum-through-float", "accumulates in float for every dtype: float64 goes through float",
            "csrc/trilinear_cpu.cpp", "  opmath_t gx = 0, gy = 0, gz = 0;\n  for (int64_t f = 0; f < F; ++f) {",
            "  float gx = 0, gy = 0, gz = 0;\n  for (int64_t f = 0; f < F; ++f) {"),
    Variant("points-grad-wrong-layout", "reads feats as (N, F, 8) instead of (N, 8, F)",
            "csrc/trilinear_cpu.cpp", "const opmath_t value = static_cast<opmath_t>(f_n[k * F + f]);",
            "const opmath_t value = static_cast<opmath_t>(f_n[f * 8 + k]);"),
    Variant("points-grad-skips-last-feature", "the loop over f stops one short",
            "csrc/trilinear_cpu.cpp", "  for (int64_t f = 0; f < F; ++f) {\n    opmath_t sx",
            "  for (int64_t f = 0; f + 1 < F; ++f) {\n    opmath_t sx"),
    # ------------------------------------------------------------------ CPU kernel outside the exercises
    Variant("grad-feats-wrong-corner", "writes corner k's gradient with weight 7-k",
            "csrc/trilinear_cpu.cpp", "gf_n[k * F + f] = static_cast<scalar_t>(weight[k]", "gf_n[k * F + f] = static_cast<scalar_t>(weight[7 - k]"),
    Variant("weights-in-storage-type", "the corner weights computed and kept in float16/bfloat16",
            "csrc/trilinear_cpu.cpp",
            "      opmath_t weight[8], d_du[8], d_dv[8], d_dw[8];\n      for (int k = 0; k < 8; ++k) {\n"
            "        weight[k] = corner_weight<opmath_t>(k, u, v, w);",
            "      scalar_t weight[8];\n      opmath_t d_du[8], d_dv[8], d_dw[8];\n      for (int k = 0; k < 8; ++k) {\n"
            "        weight[k] = corner_weight<scalar_t>(k, u, v, w);"),
    Variant("weight-grads-in-storage-type", "the weight derivatives computed in float16/bfloat16",
            "csrc/trilinear_cpu.cpp", "corner_weight_grad<opmath_t>(k, u, v, w, d_du[k], d_dv[k], d_dw[k]);",
            "{ scalar_t a, b, c; corner_weight_grad<scalar_t>(k, u, v, w, a, b, c); d_du[k] = a; d_dv[k] = b; d_dw[k] = c; }"),
    Variant("backward-opmath-float", "the CPU backward computes in float for every dtype: float64 through float",
            "csrc/trilinear_cpu.cpp", "using opmath_t = at::opmath_type<scalar_t>;\n  const int64_t grain_size",
            "using opmath_t = float;\n  const int64_t grain_size"),
    # ------------------------------------------------------------------ entry point and checks (csrc/trilinear.cpp)
    Variant("grad-out-no-rank-check", "checks grad_out's two sizes but not its rank",
            "csrc/trilinear.cpp", "grad_out_in.dim() == 2 && ", ""),
    Variant("grad-out-no-N-check", "does not check grad_out's first size",
            "csrc/trilinear.cpp", "grad_out_in.size(0) == feats_in.size(0) && ", ""),
    Variant("grad-out-no-F-check", "does not check grad_out's second size",
            "csrc/trilinear.cpp", " && grad_out_in.size(1) == feats_in.size(2),", ","),
    Variant("grad-out-no-dtype-check", "accepts a grad_out of another dtype than feats",
            "csrc/trilinear.cpp", "TORCH_CHECK(grad_out_in.scalar_type() == feats_in.scalar_type(),",
            "TORCH_CHECK(true || grad_out_in.scalar_type() == feats_in.scalar_type(),"),
    Variant("feats-no-corner-check", "checks the rank of feats but not its 8 corners",
            "csrc/trilinear.cpp", "TORCH_CHECK(feats.dim() == 3 && feats.size(1) == 8,", "TORCH_CHECK(feats.dim() == 3,"),
    Variant("points-no-count-check", "does not check that points has N rows",
            "csrc/trilinear.cpp", "points.size(0) == feats.size(0) && ", ""),
    Variant("points-no-width-check", "does not check that points has 3 columns",
            "csrc/trilinear.cpp", " && points.size(1) == 3,", ","),
    Variant("is-floating-type", "checks at::isFloatingType, which lets float8 through to the dispatch",
            "csrc/trilinear.cpp",
            "TORCH_CHECK(dtype == at::kDouble || dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16,",
            "TORCH_CHECK(at::isFloatingType(dtype),"),
    Variant("grad-out-assumed-contiguous", "the backward reads grad_out as if it were contiguous",
            "csrc/trilinear.cpp", "const at::Tensor grad_out = grad_out_in.contiguous();", "const at::Tensor grad_out = grad_out_in;"),
    Variant("feats-assumed-contiguous-in-backward", "the backward reads feats as if it were contiguous",
            "csrc/trilinear.cpp",
            "  const at::Tensor grad_out = grad_out_in.contiguous();\n  const at::Tensor feats = feats_in.contiguous();",
            "  const at::Tensor grad_out = grad_out_in.contiguous();\n  const at::Tensor feats = feats_in;"),
    Variant("points-assumed-contiguous-in-backward", "the backward reads points as if they were contiguous",
            "csrc/trilinear.cpp",
            "  const at::Tensor feats = feats_in.contiguous();\n  const at::Tensor points = points_in.contiguous();\n  // A gradient",
            "  const at::Tensor feats = feats_in.contiguous();\n  const at::Tensor points = points_in;\n  // A gradient"),
    Variant("points-grad-always-computed", "ignores need_points: grad_points is computed and returned anyway",
            "csrc/trilinear.cpp",
            "at::Tensor grad_points = need_points ? at::empty(points.sizes(), points.options()) : at::Tensor();",
            "at::Tensor grad_points = at::empty(points.sizes(), points.options());"),
    Variant("f0-points-not-zeroed", "with F = 0 returns grad_points uninitialised instead of zero",
            "csrc/trilinear.cpp", "if (need_points) grad_points.zero_();", ""),
    # ------------------------------------------------------------------ points-reduction (csrc/trilinear_cuda.cu)
    Variant("reduction-half-after-rounding", "stores the row's sum in scalar_t and halves it afterwards: in float16 "
            "a sum above 65504 whose half fits becomes inf",
            "csrc/trilinear_cuda.cu",
            "      grad_points[3 * n + d] = static_cast<scalar_t>(opmath_t(0.5) * sum[d]);",
            "      grad_points[3 * n + d] = static_cast<scalar_t>(sum[d]);\n"
            "      grad_points[3 * n + d] = static_cast<scalar_t>(opmath_t(0.5) * static_cast<opmath_t>(grad_points[3 * n + d]));",
            cuda_only=True),
    Variant("racy-points-write", "every thread stores its own partial sum into grad_points[n]: the last writer wins",
            "csrc/trilinear_cuda.cu", "  if (valid && threadIdx.x == 0) {\n    // du/dx",
            "  if (valid) {\n    for (int d = 0; d < 3; ++d) {\n"
            "      grad_points[3 * n + d] = static_cast<scalar_t>(opmath_t(0.5) * (d == 0 ? gx : d == 1 ? gy : gz));\n"
            "    }\n  }\n  if (false) {\n    // du/dx", cuda_only=True),
    Variant("warp-only-reduction", "sums only the first warp of each row", "csrc/trilinear_cuda.cu",
            "for (int i = warp; i < warp + warps_per_row; ++i) {", "for (int i = warp; i < warp + 1; ++i) {", cuda_only=True),
    Variant("reduction-drops-last-warp", "the sum over the row's warps stops one warp short", "csrc/trilinear_cuda.cu",
            "for (int i = warp; i < warp + warps_per_row; ++i) {", "for (int i = warp; i < warp + warps_per_row - 1; ++i) {",
            cuda_only=True),
    Variant("no-warp-shuffle", "skips the warp reduction (lane 0 keeps only its own terms)", "csrc/trilinear_cuda.cu",
            "\n  for (int offset = width / 2; offset > 0; offset /= 2) {",
            "\n  for (int offset = width / 2; offset > 32; offset /= 2) {", cuda_only=True),
    Variant("shuffle-stops-at-2", "the shuffles stop at offset 2: lane 0 misses lane 1's terms", "csrc/trilinear_cuda.cu",
            "\n  for (int offset = width / 2; offset > 0; offset /= 2) {",
            "\n  for (int offset = width / 2; offset > 1; offset /= 2) {", cuda_only=True),
    Variant("shuffle-half-mask", "the shuffles name only lanes 0-15 in their mask while all 32 lanes call them "
            "(undefined on a GPU)", "csrc/trilinear_cuda.cu",
            "    gx += __shfl_down_sync(0xffffffffu, gx, offset, width);\n"
            "    gy += __shfl_down_sync(0xffffffffu, gy, offset, width);\n"
            "    gz += __shfl_down_sync(0xffffffffu, gz, offset, width);\n  }\n  // A row of a warp",
            "    gx += __shfl_down_sync(0x0000ffffu, gx, offset, width);\n"
            "    gy += __shfl_down_sync(0x0000ffffu, gy, offset, width);\n"
            "    gz += __shfl_down_sync(0x0000ffffu, gz, offset, width);\n  }\n  // A row of a warp", cuda_only=True),
    Variant("reduction-no-syncthreads", "reads the other warps' partials without waiting at __syncthreads()",
            "csrc/trilinear_cuda.cu", "    __syncthreads();\n    if (threadIdx.x == 0) {",
            "    if (threadIdx.x == 0) {", cuda_only=True),
    Variant("warp-index-ignores-row", "indexes shared memory by the warp within the row: rows overwrite each other",
            "csrc/trilinear_cuda.cu", "const int warp = (threadIdx.y * blockDim.x + threadIdx.x) / 32;",
            "const int warp = threadIdx.x / 32;", cuda_only=True),
    Variant("reduction-missing-half", "the CUDA reduction forgets du/dx = 1/2", "csrc/trilinear_cuda.cu",
            "static_cast<scalar_t>(opmath_t(0.5) * sum[d]);", "static_cast<scalar_t>(sum[d]);", cuda_only=True),
    Variant("shared-partials-in-storage-type", "keeps the warps' partial sums in float16/bfloat16 shared memory",
            "csrc/trilinear_cuda.cu", "__shared__ opmath_t partial[8][3];", "__shared__ scalar_t partial[8][3];",
            cuda_only=True),
    Variant("shared-partials-through-float", "keeps the warps' partial sums in float: float64 goes through float",
            "csrc/trilinear_cuda.cu", "__shared__ opmath_t partial[8][3];", "__shared__ float partial[8][3];",
            cuda_only=True),
    Variant("every-warp-writes", "lane 0 of every warp sums and writes, not only the row's first thread",
            "csrc/trilinear_cuda.cu", "if (threadIdx.x == 0) {\n      const int warps_per_row",
            "if (threadIdx.x % 32 == 0) {\n      const int warps_per_row", cuda_only=True),
    # ------------------------------------------------------------------ CUDA kernel outside the exercises
    Variant("grad-feats-wrong-corner-cuda", "the CUDA kernel writes corner k's gradient with weight 7-k",
            "csrc/trilinear_cuda.cu", "static_cast<scalar_t>(weight[k] * static_cast<opmath_t>(g.v[j]));",
            "static_cast<scalar_t>(weight[7 - k] * static_cast<opmath_t>(g.v[j]));", cuda_only=True),
    Variant("thread-partials-in-storage-type", "each thread sums its features in float16/bfloat16",
            "csrc/trilinear_cuda.cu", "  opmath_t gx = 0, gy = 0, gz = 0;\n  if (valid) {",
            "  scalar_t gx = 0, gy = 0, gz = 0;\n  if (valid) {", cuda_only=True),
    Variant("cuda-backward-opmath-float", "the CUDA backward computes in float for every dtype: float64 through float",
            "csrc/trilinear_cuda.cu", "using opmath_t = at::opmath_type<scalar_t>;\n  using P = Pack<scalar_t, VEC>;\n"
            "  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;\n  // No early return",
            "using opmath_t = float;\n  using P = Pack<scalar_t, VEC>;\n"
            "  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;\n  // No early return",
            cuda_only=True),
    Variant("cuda-weights-in-storage-type", "the CUDA backward rounds the corner weights to float16/bfloat16",
            "csrc/trilinear_cuda.cu", "weight[k] = corner_weight<opmath_t>(k, u, v, w);\n      corner_weight_grad",
            "weight[k] = static_cast<scalar_t>(corner_weight<opmath_t>(k, u, v, w));\n      corner_weight_grad",
            cuda_only=True),
    Variant("cuda-packs-ignore-alignment", "takes the 16-byte path without checking grad_out's alignment",
            "csrc/trilinear_cuda.cu", "return grad_out.size(1) % kVec == 0 && aligned16(grad_out.const_data_ptr()) &&",
            "return grad_out.size(1) % kVec == 0 &&", cuda_only=True),
    Variant("cuda-packs-ignore-feats-alignment", "takes the 16-byte path without checking feats' alignment",
            "csrc/trilinear_cuda.cu", "(!grad_points.defined() || aligned16(feats.const_data_ptr())) &&", "",
            cuda_only=True),
    # ------------------------------------------------------------------ the atomic comparison kernels
    Variant("atomic-no-determinism-alert", "the atomic comparison kernels run silently under deterministic mode",
            "csrc/trilinear.cpp", '  at::globalContext().alertNotDeterministic("trilinear_points_grad_atomic");\n', "",
            cuda_only=True),
    Variant("atomic-per-warp-every-lane-adds", "after the shuffles every lane adds its value, not lane 0 alone",
            "csrc/trilinear_cuda.cu", "    if (valid && threadIdx.x % width == 0) {\n      atomicAdd",
            "    if (valid) {\n      atomicAdd", cuda_only=True),
    Variant("atomic-per-thread-missing-half", "the per-thread atomics forget du/dx = 1/2",
            "csrc/trilinear_cuda.cu",
            "    if (valid) {\n      atomicAdd(&grad_points[3 * n + 0], static_cast<scalar_t>(opmath_t(0.5) * gx));",
            "    if (valid) {\n      atomicAdd(&grad_points[3 * n + 0], static_cast<scalar_t>(gx));", cuda_only=True),
    Variant("reduction-writes-past-last-cube", "the row's first thread stores whether or not its row has a cube: "
            "rows past the last cube write zeros past the end of grad_points",
            "csrc/trilinear_cuda.cu", "  if (valid && threadIdx.x == 0) {\n    // du/dx",
            "  if (threadIdx.x == 0) {\n    // du/dx", cuda_only=True),
]

# Found by a red-team round.
_CPU, _H, _G = "csrc/trilinear_cpu.cpp", "csrc/trilinear.h", "csrc/gelu.h"

VARIANTS += [
    Variant("points-grad-skips-zero-grad-out", "skips features whose grad_out is 0 (a 'sparse gradient' speed-up): "
            "a NaN or inf feature there no longer makes grad_points NaN (0 * inf is NaN in autograd)",
            _CPU, "  for (int64_t f = 0; f < F; ++f) {\n    opmath_t sx = 0, sy = 0, sz = 0;",
            "  for (int64_t f = 0; f < F; ++f) {\n    if (static_cast<opmath_t>(g_n[f]) == opmath_t(0)) continue;  // nothing flows back\n"
            "    opmath_t sx = 0, sy = 0, sz = 0;"),
    Variant("points-grad-skips-zero-derivative", "skips corners whose weight derivative is 0 (points on a face): "
            "NaN/inf features there vanish",
            _CPU, "      sx += value * d_du[k];\n      sy += value * d_dv[k];\n      sz += value * d_dw[k];",
            "      if (d_du[k] != 0) sx += value * d_du[k];\n      if (d_dv[k] != 0) sy += value * d_dv[k];\n"
            "      if (d_dw[k] != 0) sz += value * d_dw[k];"),
    Variant("points-grad-uninitialised-gy", "gy declared without = 0",
            _CPU, "  opmath_t gx = 0, gy = 0, gz = 0;\n  for (int64_t f = 0; f < F; ++f) {",
            "  opmath_t gx = 0, gy, gz = 0;\n  for (int64_t f = 0; f < F; ++f) {"),
    Variant("points-grad-swapped-y-z", "writes the v sum to gp_n[2] and the w sum to gp_n[1]",
            _CPU, "  gp_n[1] = static_cast<scalar_t>(opmath_t(0.5) * gy);\n  gp_n[2] = static_cast<scalar_t>(opmath_t(0.5) * gz);",
            "  gp_n[1] = static_cast<scalar_t>(opmath_t(0.5) * gz);\n  gp_n[2] = static_cast<scalar_t>(opmath_t(0.5) * gy);"),
    Variant("points-grad-g-in-storage-type", "multiplies grad_out by the corner sum in scalar_t, then widens",
            _CPU, "    gx += g * sx;", "    gx += static_cast<opmath_t>(g_n[f] * static_cast<scalar_t>(sx));"),
    Variant("points-grad-adds-into-output", "adds into gp_n (assumes a zero-filled grad_points)",
            _CPU, "  gp_n[0] = static_cast<scalar_t>(opmath_t(0.5) * gx);",
            "  gp_n[0] = static_cast<scalar_t>(static_cast<opmath_t>(gp_n[0]) + opmath_t(0.5) * gx);"),
    Variant("points-grad-mean-over-f", "divides the sum over f by F (a mean instead of a sum)",
            _CPU, "  gp_n[0] = static_cast<scalar_t>(opmath_t(0.5) * gx);",
            "  gp_n[0] = static_cast<scalar_t>(opmath_t(0.5) * gx / static_cast<opmath_t>(F));"),
    Variant("weight-grad-includes-half", "returns dW/dx (the 1/2 of du/dx inside) instead of dW/du",
            _H, "  d_du = sx * wy * wz;", "  d_du = T(0.5) * sx * wy * wz;"),
    Variant("weight-grad-d-dw-uses-u-sign", "dW/dw takes the sign of the x bit",
            _H, "  d_dw = wx * wy * sz;", "  d_dw = wx * wy * sx;"),
    Variant("weight-grad-all-positive-on-odd", "sign of y from bit 0 and z from bit 1 (y and z swapped)",
            _H, "  const T sy = (k >> 1) & 1 ? T(1) : T(-1);\n  const T sz = k & 1 ? T(1) : T(-1);",
            "  const T sy = k & 1 ? T(1) : T(-1);\n  const T sz = (k >> 1) & 1 ? T(1) : T(-1);"),
    Variant("gelu-constants-10-digits", "1/sqrt(2) and 1/sqrt(2 pi) with 10 significant digits",
            _G, "  const T inv_sqrt2 = T(0.70710678118654752440);\n  const T inv_sqrt_2pi = T(0.39894228040143267794);",
            "  const T inv_sqrt2 = T(0.7071067812);\n  const T inv_sqrt_2pi = T(0.3989422804);"),
    Variant("gelu-pdf-constant-12-digits", "1/sqrt(2 pi) with 12 significant digits",
            _G, "const T inv_sqrt_2pi = T(0.39894228040143267794);", "const T inv_sqrt_2pi = T(0.398942280401);"),
    Variant("gelu-cdf-uses-gelu-value", "derivative as gelu(x) / x + x phi(x): 0 / 0 at x = 0",
            _G, "  return cdf + x * pdf;", "  return gelu_value<T>(x) / x + x * pdf;"),
    Variant("gelu-pdf-sqrt-pi", "density scaled by 1/sqrt(pi) instead of 1/sqrt(2 pi)",
            _G, "const T inv_sqrt_2pi = T(0.39894228040143267794);", "const T inv_sqrt_2pi = T(0.56418958354775628695);"),
    Variant("grad-feats-skips-zero-grad-out", "the grad_feats loop skips features whose grad_out is 0: those "
            "elements of grad_feats are never written (uninitialised memory)",
            _CPU, "            gf_n[k * F + f] = static_cast<scalar_t>(weight[k] * static_cast<opmath_t>(g_n[f]));",
            "            if (static_cast<opmath_t>(g_n[f]) != opmath_t(0))\n"
            "              gf_n[k * F + f] = static_cast<scalar_t>(weight[k] * static_cast<opmath_t>(g_n[f]));"),
    Variant("grad-feats-skips-zero-weight", "the grad_feats loop skips corners of weight 0: never written there",
            _CPU, "        for (int k = 0; k < 8; ++k) {\n          for (int64_t f = 0; f < F; ++f) {",
            "        for (int k = 0; k < 8; ++k) {\n          if (weight[k] == 0) continue;\n          for (int64_t f = 0; f < F; ++f) {"),
]

VARIANTS += [
    Variant("points-grad-terms-rounded", "each per-f term g * (corner sum) rounded to scalar_t before it is added",
            _CPU, "    gx += g * sx;", "    gx += static_cast<opmath_t>(static_cast<scalar_t>(g * sx));"),
    Variant("points-grad-corner-terms-rounded", "each feature * derivative product rounded to scalar_t",
            _CPU, "      sx += value * d_du[k];", "      sx += static_cast<opmath_t>(static_cast<scalar_t>(value * d_du[k]));"),
]

# Found by a third red-team round (and two correct alternatives the graders refused).
VARIANTS += [
    Variant("points-grad-skips-zero-corner-sum", "skips the product with grad_out where the corner sum is 0 "
            "(constant or zero features): a NaN or inf grad_out there no longer makes grad_points NaN",
            _CPU, "    gx += g * sx;\n    gy += g * sy;\n    gz += g * sz;",
            "    if (sx != 0) gx += g * sx;  // a zero sum adds nothing\n    if (sy != 0) gy += g * sy;\n"
            "    if (sz != 0) gz += g * sz;"),
]

# Found by a red-team round of the GPU-free judge (coursekit/emulate.py): mistakes in the exercise
# points-reduction (shuffles, shared slots, the barrier, the order of the sums), and correct
# reductions written otherwise.
_CU = "csrc/trilinear_cuda.cu"
_SHUFFLES = ("\n  for (int offset = width / 2; offset > 0; offset /= 2) {\n"
             "    gx += __shfl_down_sync(0xffffffffu, gx, offset, width);\n"
             "    gy += __shfl_down_sync(0xffffffffu, gy, offset, width);\n"
             "    gz += __shfl_down_sync(0xffffffffu, gz, offset, width);\n  }\n")

_SLOTS = ("    if (threadIdx.x % 32 == 0) {\n"
          "      partial[warp][0] = gx;\n"
          "      partial[warp][1] = gy;\n"
          "      partial[warp][2] = gz;\n"
          "    }\n")
# The row's sum: its first lane's (rows of a warp or less), else its warps' through shared memory.
_SUM_INIT = ("  // A row of a warp or less is one segment: its first thread holds the row's sum.\n"
             "  opmath_t sum[3] = {gx, gy, gz};\n"
             "  if (blockDim.x > 32) {  // the same for the whole block: every thread or none meets the barrier\n"
             "    // 2. Row: lane 0 of each warp leaves its sum in shared memory (at most 8\n"
             "    //    warps in a 256-thread block); the row's first thread adds them up.\n")
_ROW_SUM = ("    __shared__ opmath_t partial[8][3];\n"
            "    const int warp = (threadIdx.y * blockDim.x + threadIdx.x) / 32;\n" + _SLOTS +
            "    __syncthreads();\n"
            "    if (threadIdx.x == 0) {\n"
            "      const int warps_per_row = blockDim.x / 32;\n"
            "      for (int d = 0; d < 3; ++d) {\n"
            "        sum[d] = 0;\n"
            "        for (int i = warp; i < warp + warps_per_row; ++i) {\n"
            "          sum[d] += partial[i][d];\n"
            "        }\n"
            "      }\n"
            "    }\n")
_STORE_HEAD = ("  }\n"
               "  // 3. One store per valid cube, by the row's first thread.\n"
               "  if (valid && threadIdx.x == 0) {\n")
_HALF = ("    // du/dx = 1/2: the chain rule through u = (x + 1) / 2.\n"
         "    for (int d = 0; d < 3; ++d) {\n"
         "      grad_points[3 * n + d] = static_cast<scalar_t>(opmath_t(0.5) * sum[d]);\n")
# A per-row shared slot that lane 0 of each warp adds into, read by the row's first thread.
_ROW_SLOT_ATOMICS = ("    __shared__ opmath_t row_sum[8][3];\n"
                     "    const int warp = threadIdx.y;  // the row's slot\n"
                     "    if (threadIdx.x == 0) {\n"
                     "      row_sum[warp][0] = row_sum[warp][1] = row_sum[warp][2] = 0;\n"
                     "    }\n"
                     "    __syncthreads();\n"
                     "    if (threadIdx.x % 32 == 0) {\n"
                     "      atomicAdd(&row_sum[warp][0], gx);\n"
                     "      atomicAdd(&row_sum[warp][1], gy);\n"
                     "      atomicAdd(&row_sum[warp][2], gz);\n"
                     "    }\n"
                     "    __syncthreads();\n"
                     "    if (threadIdx.x == 0) {\n"
                     "      for (int d = 0; d < 3; ++d) {\n"
                     "        sum[d] = row_sum[warp][d];\n"
                     "      }\n"
                     "    }\n")
VARIANTS += [
    Variant("reduction-every-lane-stores-slot", "every lane of a warp stores into the warp's slot (no lane-0 test): "
            "the last writer wins, and only lane 0 holds the warp's sum",
            _CU, _SLOTS, _SLOTS.replace("    if (threadIdx.x % 32 == 0) {\n", "    {  // the warp's sum\n"), cuda_only=True),
    Variant("reduction-slot-by-row-first-thread", "stores the warp sums with `threadIdx.x == 0` (the row's first "
            "thread) instead of lane 0 of every warp: the row's other warps never fill their slots",
            _CU, _SLOTS, _SLOTS.replace("threadIdx.x % 32 == 0", "threadIdx.x == 0"), cuda_only=True),
    Variant("reduction-shfl-up", "folds with __shfl_up_sync: lane 0 has no lane below it and only doubles its "
            "own value", _CU, _SHUFFLES, _SHUFFLES.replace("__shfl_down_sync", "__shfl_up_sync"), cuda_only=True),
    Variant("reduction-shuffle-in-lane-branch", "ports the shared-memory tree literally: only lanes below the offset "
            "call the (full-mask) shuffle, the others skip it; the warp never meets at the shuffle",
            _CU, _SHUFFLES,
            "\n  for (int offset = width / 2; offset > 0; offset /= 2) {\n"
            "    if (threadIdx.x % width < offset) {\n"
            "      gx += __shfl_down_sync(0xffffffffu, gx, offset, width);\n"
            "      gy += __shfl_down_sync(0xffffffffu, gy, offset, width);\n"
            "      gz += __shfl_down_sync(0xffffffffu, gz, offset, width);\n    }\n  }\n", cuda_only=True),
    Variant("reduction-barrier-before-slot-writes", "puts __syncthreads() between the shuffles and the slot stores "
            "instead of between the stores and the reads: the row's first thread reads slots other warps have not "
            "written yet", _CU, _SLOTS + "    __syncthreads();\n", "    __syncthreads();\n" + _SLOTS, cuda_only=True),
    Variant("reduction-sums-all-block-slots", "the row's first thread adds all 8 slots of the block: right for a "
            "block of one row, the other rows' sums added in otherwise",
            _CU, "for (int i = warp; i < warp + warps_per_row; ++i) {", "for (int i = 0; i < 8; ++i) {",
            cuda_only=True),
    Variant("reduction-shared-atomics", "lane 0 of each warp atomicAdds its sums into a per-row shared slot: "
            "right sums, but in the order the warps arrive, which changes from run to run",
            _CU, _ROW_SUM,
            _ROW_SLOT_ATOMICS, cuda_only=True),
    Variant("reduction-slots-read-transposed", "reads the slots as partial[d][i] while they were stored as "
            "partial[warp][d]: the flat index d * 3 + i lands in other warps' slots",
            _CU, "sum[d] += partial[i][d];", "sum[d] += partial[d][i];", cuda_only=True),
    Variant("reduction-syncwarp", "waits with __syncwarp() instead of __syncthreads() (\"the slots come from "
            "warps\"): the row's first thread reads other warps' slots before they are stored",
            _CU, _SLOTS + "    __syncthreads();\n", _SLOTS + "    __syncwarp();\n", cuda_only=True),
    Variant("reduction-shared-initialiser", "declares the slots with an initialiser, `__shared__ opmath_t "
            "partial[8][3] = {};` (\"zeros for the unused slots\"): nvcc refuses it (initializer not allowed for "
            "__shared__ variable)", _CU, "__shared__ opmath_t partial[8][3];",
            "__shared__ opmath_t partial[8][3] = {};", cuda_only=True),
    Variant("reduction-shared-only", "no shuffles: every thread's partials go to a shared slot of their own, and "
            "the row's first thread adds the row's blockDim.x slots in order (slower, another order of the "
            "additions, deterministic)",
            _CU, _SHUFFLES + _SUM_INIT + _ROW_SUM + "  }\n",
            "\n  opmath_t sum[3] = {0, 0, 0};\n"
            "  __shared__ opmath_t partial[256][3];  // one slot per thread\n"
            "  const int t = threadIdx.y * blockDim.x + threadIdx.x;\n"
            "  partial[t][0] = gx;\n"
            "  partial[t][1] = gy;\n"
            "  partial[t][2] = gz;\n"
            "  __syncthreads();\n"
            "  if (threadIdx.x == 0) {\n"
            "    for (int i = t; i < t + static_cast<int>(blockDim.x); ++i) {\n"
            "      for (int d = 0; d < 3; ++d) {\n"
            "        sum[d] += partial[i][d];\n"
            "      }\n"
            "    }\n"
            "  }\n", cuda_only=True, correct=True),
    Variant("reduction-butterfly-xor", "folds with __shfl_xor_sync (a butterfly): every lane ends with the warp's "
            "sum, lane 0 included", _CU, _SHUFFLES, _SHUFFLES.replace("__shfl_down_sync", "__shfl_xor_sync"),
            cuda_only=True, correct=True),
    Variant("reduction-ascending-offsets", "shuffles down by 1, 2, 4, ... up to width / 2 (another tree, another "
            "order of the additions): the segment's first lane still ends with the segment's sum",
            _CU, _SHUFFLES, _SHUFFLES.replace("for (int offset = width / 2; offset > 0; offset /= 2)",
                                              "for (int offset = 1; offset < width; offset *= 2)"),
            cuda_only=True, correct=True),
    Variant("reduction-half-per-warp", "applies the 1/2 to each warp's sum (and a short row's) before the sum, and "
            "stores the row's sum as it is (a power of two: the same bits)",
            _CU, _SUM_INIT + _ROW_SUM + _STORE_HEAD + _HALF,
            _SUM_INIT.replace("{gx, gy, gz}", "{opmath_t(0.5) * gx, opmath_t(0.5) * gy, opmath_t(0.5) * gz}")
            + _ROW_SUM.replace("= gx;", "= opmath_t(0.5) * gx;").replace("= gy;", "= opmath_t(0.5) * gy;")
            .replace("= gz;", "= opmath_t(0.5) * gz;") + _STORE_HEAD
            + _HALF.replace("static_cast<scalar_t>(opmath_t(0.5) * sum[d])", "static_cast<scalar_t>(sum[d])"),
            cuda_only=True, correct=True),
]

# Another round of plausible mistakes and right answers in points-reduction, written by someone
# other than the chapter's author: a 32-bit store index (caught by the sampled launch past 2^31
# cubes), the slots declared volatile or several to a line (right answers the judge must compile).
# Slots [row][warp of the row], all 8 of a row summed (the declaration's qualifiers go before it).
_EIGHT_SLOTS = ("__shared__ opmath_t partial[8][8][3];  // [row][warp of the row][axis]\n"
                "    const int warp = threadIdx.x / 32;\n"
                "    if (threadIdx.x % 32 == 0) {\n      partial[threadIdx.y][warp][0] = gx;\n"
                "      partial[threadIdx.y][warp][1] = gy;\n      partial[threadIdx.y][warp][2] = gz;\n    }\n"
                "    __syncthreads();\n"
                "    if (threadIdx.x == 0) {\n"
                "      for (int d = 0; d < 3; ++d) {\n"
                "        sum[d] = 0;\n"
                "        for (int i = 0; i < 8; ++i) {\n"
                "          sum[d] += partial[threadIdx.y][i][d];\n"
                "        }\n"
                "      }\n"
                "    }\n")
VARIANTS += [
    Variant("reduction-shuffle-through-float", "passes each partner's value through float in the shuffle: "
            "float64 partials lose their low bits", _CU, _SHUFFLES,
            _SHUFFLES.replace("gx, offset, width)", "static_cast<float>(gx), offset, width)")
            .replace("gy, offset, width)", "static_cast<float>(gy), offset, width)")
            .replace("gz, offset, width)", "static_cast<float>(gz), offset, width)"), cuda_only=True),
    Variant("reduction-shfl-sync-wrapping", "__shfl_sync from lane threadIdx.x + offset (taken modulo width): "
            "the segment's first lane still reads its own segment only, the sum is right", _CU, _SHUFFLES,
            _SHUFFLES.replace("__shfl_down_sync(0xffffffffu, gx, offset, width)", "__shfl_sync(0xffffffffu, gx, threadIdx.x + offset, width)")
            .replace("__shfl_down_sync(0xffffffffu, gy, offset, width)", "__shfl_sync(0xffffffffu, gy, threadIdx.x + offset, width)")
            .replace("__shfl_down_sync(0xffffffffu, gz, offset, width)", "__shfl_sync(0xffffffffu, gz, threadIdx.x + offset, width)"),
            cuda_only=True, correct=True),
    Variant("reduction-shuffle-inside-valid", "only rows with a cube shuffle, with the full mask: where a warp "
            "holds several rows (F / VEC < 32), lanes of rows past the last cube skip a shuffle that names them "
            "and go on to exit. Undefined by the letter of the CUDA guide (only exited lanes are exempt); no row "
            "reads another's lanes, and the judge, which counts finished lanes as exited, passes it",
            _CU, _SHUFFLES, "\n  if (valid) {" + _SHUFFLES + "  }\n", cuda_only=True, correct=True),
    Variant("reduction-segment-masks", "each row's segment shuffles with a mask that names its own lanes only "
            "(what cooperative groups' thread_block_tile passes): every lane a mask names makes the same call with "
            "that mask and reads inside it, which the CUDA guide allows; another right answer",
            _CU, _SHUFFLES,
            "\n  const unsigned lane = (threadIdx.y * blockDim.x + threadIdx.x) % 32;\n"
            "  const unsigned segment = width == 32 ? 0xffffffffu : ((1u << width) - 1u) << (lane / width * width);"
            + _SHUFFLES.replace("0xffffffffu", "segment"), cuda_only=True, correct=True),
    Variant("reduction-every-warp-leader-stores", "lane 0 of every warp adds up its row's slots and stores: "
            "the right values, but a row of k warps writes each element k times (the contract: one writer)",
            _CU, "    if (threadIdx.x == 0) {\n      const int warps_per_row = blockDim.x / 32;\n      for (int d = 0; d < 3; ++d) {\n        sum[d] = 0;\n        for (int i = warp; i < warp + warps_per_row; ++i) {\n          sum[d] += partial[i][d];\n        }\n      }\n    }\n  }\n  // 3. One store per valid cube, by the row's first thread.\n  if (valid && threadIdx.x == 0) {\n",
            "    if (threadIdx.x % 32 == 0) {\n      const int warps_per_row = blockDim.x / 32;\n      const int first = warp - threadIdx.x / 32;\n      for (int d = 0; d < 3; ++d) {\n        sum[d] = 0;\n        for (int i = first; i < first + warps_per_row; ++i) {\n          sum[d] += partial[i][d];\n        }\n      }\n    }\n  }\n  // 3. One store per valid cube, by the row's first thread.\n  if (valid && threadIdx.x % 32 == 0) {\n", cuda_only=True),
    Variant("reduction-multi-declarator-shared", "three shared arrays in one declaration, one per axis",
            _CU, _ROW_SUM,
            "    __shared__ opmath_t px[8], py[8], pz[8];\n"
            "    const int warp = (threadIdx.y * blockDim.x + threadIdx.x) / 32;\n"
            "    if (threadIdx.x % 32 == 0) {\n      px[warp] = gx;\n      py[warp] = gy;\n      pz[warp] = gz;\n    }\n"
            "    __syncthreads();\n"
            "    if (threadIdx.x == 0) {\n"
            "      const int warps_per_row = blockDim.x / 32;\n"
            "      sum[0] = sum[1] = sum[2] = 0;\n"
            "      for (int i = warp; i < warp + warps_per_row; ++i) {\n"
            "        sum[0] += px[i];\n        sum[1] += py[i];\n        sum[2] += pz[i];\n"
            "      }\n"
            "    }\n", cuda_only=True, correct=True),
    Variant("reduction-volatile-shared", "the slots declared `volatile __shared__` (as in warp-synchronous "
            "reduction code): otherwise the chapter's reduction", _CU,
            "    __shared__ opmath_t partial[8][3];\n", "    volatile __shared__ opmath_t partial[8][3];\n",
            cuda_only=True, correct=True),
    Variant("reduction-volatile-sums-8-row-slots", "slots [row][warp of the row], and the row's first thread adds "
            "all 8 slots of its row, trusting the unwritten ones to be 0 (shared memory is not zeroed on a GPU)",
            _CU, _ROW_SUM, "    volatile " + _EIGHT_SLOTS, cuda_only=True),
    Variant("reduction-sums-8-row-slots", "slots [row][warp of the row], and the row's first thread adds all 8 "
            "slots of its row, trusting the unwritten ones to be 0", _CU, _ROW_SUM, "    " + _EIGHT_SLOTS,
            cuda_only=True),
    Variant("reduction-shared-plain-add", "lane 0 of each warp adds its sums into the row's shared slot with a "
            "plain += (no atomic): a race, additions are lost on a GPU", _CU, _ROW_SUM,
            _ROW_SLOT_ATOMICS.replace("atomicAdd(&row_sum[warp][0], gx);", "row_sum[warp][0] += gx;")
            .replace("atomicAdd(&row_sum[warp][1], gy);", "row_sum[warp][1] += gy;")
            .replace("atomicAdd(&row_sum[warp][2], gz);", "row_sum[warp][2] += gz;"), cuda_only=True),
    Variant("reduction-int32-store-index", "the store index 3 * n + d held in an int: wraps from "
            "N = 716M cubes (11 GB of float16 feats with F = 1)", _CU, _HALF,
            _HALF.replace("      grad_points[3 * n + d] =", "      const int i = 3 * n + d;\n      grad_points[i] ="),
            cuda_only=True),
]

# Rows shorter than a warp: F / VEC < 32 gives rows of 1 to 16 threads, several cubes a warp, and
# the shuffles must stay within a row's segment of the warp (and every lane must meet them).
_WIDTH = "  const int width = blockDim.x < 32 ? blockDim.x : 32;"
_WARP_TREE = ("\n  for (int offset = 16; offset > 0; offset /= 2) {\n"
              "    gx += __shfl_down_sync(0xffffffffu, gx, offset);\n"
              "    gy += __shfl_down_sync(0xffffffffu, gy, offset);\n"
              "    gz += __shfl_down_sync(0xffffffffu, gz, offset);\n  }\n")
VARIANTS += [
    Variant("reduction-whole-warp-shuffles", "folds all 32 lanes as for rows of whole warps: where a warp holds "
            "several rows, the first row's sum takes in the next rows' terms", _CU, _WIDTH + _SHUFFLES,
            _WIDTH + _WARP_TREE, cuda_only=True),
    Variant("reduction-width-always-32", "segments of 32 lanes whatever the row's width", _CU, "\n" + _WIDTH,
            "\n  const int width = 32;", cuda_only=True),
    Variant("reduction-offsets-from-16-in-segments", "starts the offsets at 16 with segments of `width` lanes: "
            "a partner past the segment gives the lane its own value back, counted twice", _CU, _SHUFFLES,
            _SHUFFLES.replace("offset = width / 2;", "offset = 16;"), cuda_only=True),
    Variant("reduction-short-rows-lane-of-warp", "the store by lane 0 of each warp instead of each row's first "
            "thread: with short rows the warp's other rows write nothing (with long rows the row's other warps "
            "write their own partial sums)", _CU,
            "  if (valid && threadIdx.x == 0) {\n    // du/dx",
            "  if (valid && (threadIdx.y * blockDim.x + threadIdx.x) % 32 == 0) {\n    // du/dx", cuda_only=True),
    Variant("reduction-barrier-only-in-valid-rows", "takes the shared step only in rows with a cube: the last "
            "block's rows past N skip a __syncthreads() the others wait at", _CU,
            "  if (blockDim.x > 32) {  // the same for the whole block: every thread or none meets the barrier",
            "  if (blockDim.x > 32 && valid) {", cuda_only=True),
    Variant("reduction-segments-without-width-argument", "offsets from width / 2 but no width argument to the "
            "shuffles: a lane reads past its segment, but the segment's first lane only ever reads inside it",
            _CU, _SHUFFLES, _SHUFFLES.replace(", offset, width);", ", offset);"), cuda_only=True, correct=True),
    Variant("reduction-shared-path-for-one-warp", "takes the shared step from 32 threads on: a row of one warp "
            "goes through the shared slots, one slot a row (right, a barrier more)", _CU,
            "  if (blockDim.x > 32) {  // the same for the whole block: every thread or none meets the barrier",
            "  if (blockDim.x >= 32) {  // the same for the whole block: every thread or none meets the barrier",
            cuda_only=True, correct=True),
]

# A shuffle width past a warp: undefined on a GPU, stopped by the judge with its own report.
VARIANTS.append(Variant(
    "points-shuffle-width-of-the-row", "shuffles with width = blockDim.x (the whole row, 64 to 256 lanes): a "
    "shuffle moves values within one warp only, so a row of more than 32 threads reads lanes of other warps",
    _CU, "  //    after the loop, the segment's first lane holds the segment's sum.\n"
    "  const int width = blockDim.x < 32 ? blockDim.x : 32;",
    "  //    after the loop, the segment's first lane holds the segment's sum.\n  const int width = blockDim.x;",
    cuda_only=True))

# A red team's mistakes (written with the variants above at hand); the first and third passed the graders
# until test_weight_grad_to_rounding and test_points_grad_cpu_past_2_31 were added.
VARIANTS += [
    Variant('weight-grad-central-difference', "takes each derivative of w_k as a central difference with h = 0.01 ('w_k is linear in u, so it is exact'): right to about 1e-5 in float32, far more than a few roundings",
            'csrc/trilinear.h', '  d_du = sx * wy * wz;\n  d_dv = wx * sy * wz;\n  d_dw = wx * wy * sz;\n',
            '  // numerically: W_k is linear in each of u, v, w, so a central difference is exact\n  const T h = T(1e-2);\n  d_du = (corner_weight<T>(k, u + h, v, w) - corner_weight<T>(k, u - h, v, w)) / (T(2) * h);\n  d_dv = (corner_weight<T>(k, u, v + h, w) - corner_weight<T>(k, u, v - h, w)) / (T(2) * h);\n  d_dw = (corner_weight<T>(k, u, v, w + h) - corner_weight<T>(k, u, v, w - h)) / (T(2) * h);\n  (void)sx; (void)sy; (void)sz;\n'),
    Variant('weight-grad-precedence', 'writes the y sign as k & 2 == 2, which C++ reads as k & (2 == 2): the sign of bit 0',
            'csrc/trilinear.h', '  const T sy = (k >> 1) & 1 ? T(1) : T(-1);',
            '  const T sy = k & 2 == 2 ? T(1) : T(-1);'),
    Variant('points-grad-cpu-int32-index', "holds the feats index k * F + f in an int: it wraps once a cube's 8 F features pass 2^31",
            'csrc/trilinear_cpu.cpp', '      const opmath_t value = static_cast<opmath_t>(f_n[k * F + f]);',
            '      const int i = k * F + f;  // corner k, feature f\n      const opmath_t value = static_cast<opmath_t>(f_n[i]);'),
    Variant('points-grad-cpu-corner-sums-not-reset', "declares the per-feature corner sums outside the loop over f: each feature adds the previous ones' sums again",
            'csrc/trilinear_cpu.cpp', '  opmath_t gx = 0, gy = 0, gz = 0;\n  for (int64_t f = 0; f < F; ++f) {\n    opmath_t sx = 0, sy = 0, sz = 0;\n',
            '  opmath_t gx = 0, gy = 0, gz = 0;\n  opmath_t sx = 0, sy = 0, sz = 0;\n  for (int64_t f = 0; f < F; ++f) {\n'),
    Variant('reduction-own-warp-counted-twice', "drops the row sum's reset: the first thread's own partial (already in sum) is added again from its slot (the pitfall of Hint 3)",
            'csrc/trilinear_cuda.cu', '      for (int d = 0; d < 3; ++d) {\n        sum[d] = 0;\n        for (int i = warp; i < warp + warps_per_row; ++i) {\n',
            '      for (int d = 0; d < 3; ++d) {\n        for (int i = warp; i < warp + warps_per_row; ++i) {\n', cuda_only=True),
    Variant('reduction-shared-row-total', "sums the row's slots into one __shared__ array for the whole block: with several rows a block, the rows' first threads race on it: a GPU runs them (different warps) at once, and the GPU-free judge, whose threads switch only at barriers and shuffles, finds it by watching each __shared__ element's accesses",
            'csrc/trilinear_cuda.cu', '    if (threadIdx.x == 0) {\n      const int warps_per_row = blockDim.x / 32;\n      for (int d = 0; d < 3; ++d) {\n        sum[d] = 0;\n        for (int i = warp; i < warp + warps_per_row; ++i) {\n          sum[d] += partial[i][d];\n        }\n      }\n    }\n',
            "    __shared__ opmath_t row_total[3];  // the row's total, as in a shared-memory reduction\n    if (threadIdx.x == 0) {\n      const int warps_per_row = blockDim.x / 32;\n      for (int d = 0; d < 3; ++d) {\n        row_total[d] = 0;\n        for (int i = warp; i < warp + warps_per_row; ++i) {\n          row_total[d] += partial[i][d];\n        }\n        sum[d] = row_total[d];\n      }\n    }\n", cuda_only=True),
]
