"""Plausible wrong solutions for chapter 04; each must fail at least one test."""

from coursekit.exercises import Variant

VARIANTS = [
    Variant("points-grad-sign", "the derivative of (1 - u) taken as +1",
            "csrc/trilinear.h", "const T sx = (k >> 2) & 1 ? T(1) : T(-1);", "const T sx = T(1);"),
    Variant("missing-half", "forgets du/dx = 1/2",
            "csrc/trilinear_cpu.cpp", "grad_points[3 * n + 0] = static_cast<scalar_t>(opmath_t(0.5) * gx);",
            "grad_points[3 * n + 0] = static_cast<scalar_t>(gx);"),
    Variant("grad-feats-wrong-corner", "writes corner k's gradient with weight 7-k",
            "csrc/trilinear_cpu.cpp", "gf_n[k * F + f] = static_cast<scalar_t>(weight[k]", "gf_n[k * F + f] = static_cast<scalar_t>(weight[7 - k]"),
    Variant("points-grad-without-grad-out", "sums feats * dw over f without the factor grad_out",
            "csrc/trilinear_cpu.cpp", "          gx += g * sx;", "          gx += sx;"),
    Variant("gelu-tanh-form", "uses the tanh approximation's derivative for the exact GELU",
            "csrc/gelu.h", "  return cdf + x * pdf;\n",
            "  const T t = std::tanh(T(0.7978845608) * (x + T(0.044715) * x * x * x));\n"
            "  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * T(0.7978845608) * (T(1) + T(3 * 0.044715) * x * x);\n"),
    Variant("gelu-missing-product-rule", "forgets the x * phi(x) term",
            "csrc/gelu.h", "  return cdf + x * pdf;", "  return cdf;"),
    Variant("racy-points-write", "every thread stores its own partial sum into grad_points[n]: the last writer wins",
            "csrc/trilinear_cuda.cu", "    __syncthreads();\n    if (valid && threadIdx.x == 0) {",
            "    if (valid) {\n      for (int d = 0; d < 3; ++d) {\n"
            "        grad_points[3 * n + d] = static_cast<scalar_t>(opmath_t(0.5) * (d == 0 ? gx : d == 1 ? gy : gz));\n"
            "      }\n    }\n    if (false) {", cuda_only=True),
    Variant("grad-feats-wrong-corner-cuda", "the CUDA kernel writes corner k's gradient with weight 7-k",
            "csrc/trilinear_cuda.cu", "static_cast<scalar_t>(weight[k] * static_cast<opmath_t>(g.v[j]));",
            "static_cast<scalar_t>(weight[7 - k] * static_cast<opmath_t>(g.v[j]));",
            cuda_only=True),
    Variant("warp-only-reduction", "sums only the first warp of each row", "csrc/trilinear_cuda.cu",
            "for (int i = warp; i < warp + warps_per_row; ++i) {", "for (int i = warp; i < warp + 1; ++i) {", cuda_only=True),
    Variant("no-warp-shuffle", "skips the warp reduction (lane 0 keeps only its own terms)", "csrc/trilinear_cuda.cu",
            "for (int offset = 16; offset > 0; offset /= 2) {", "for (int offset = 16; offset > 16; offset /= 2) {", cuda_only=True),
]
