"""Plausible wrong solutions for chapter 02; each must fail at least one test."""

from coursekit.exercises import Variant

VARIANTS = [
    Variant("swapped-corner-order", "y and z offsets swapped (corner k at (k>>2&1, k&1, k>>1&1))",
            "csrc/trilinear.h", "const T wy = (k >> 1) & 1 ? v : T(1) - v;\n  const T wz = k & 1 ? w : T(1) - w;",
            "const T wy = k & 1 ? v : T(1) - v;\n  const T wz = (k >> 1) & 1 ? w : T(1) - w;"),
    Variant("no-unit-mapping", "uses x instead of u = (x + 1) / 2",
            "csrc/trilinear.h", "return (x + T(1)) * T(0.5);", "return x;"),
    Variant("float32-only-dispatch", "dispatches float32 and float64 only",
            "csrc/trilinear_cpu.cpp", "AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, feats.scalar_type()",
            "AT_DISPATCH_FLOATING_TYPES(feats.scalar_type()"),
    Variant("wrong-feature-stride", "indexes feats[n][k][f] as if F were 8",
            "csrc/trilinear_cpu.cpp", "acc += weight[k] * static_cast<opmath_t>(f_n[k * F + f]);",
            "acc += weight[k] * static_cast<opmath_t>(f_n[f * 8 + k]);"),
    Variant("no-dtype-check", "accepts points of another dtype",
            "csrc/trilinear.cpp", "  TORCH_CHECK(points.scalar_type() == feats.scalar_type(),",
            "  TORCH_CHECK(true || points.scalar_type() == feats.scalar_type(),"),
    Variant("missing-bounds-check", "no `n >= N` guard in the CUDA kernel", "csrc/trilinear_cuda.cu",
            "  if (n >= N) {\n    return;  // the last block", "  if (false) {\n    return;  // the last block",
            cuda_only=True),
    Variant("default-stream", "launches on the legacy default stream", "csrc/trilinear_cuda.cu",
            "<<<static_cast<unsigned>(blocks), block, 0, stream>>>", "<<<static_cast<unsigned>(blocks), block>>>",
            cuda_only=True),
]
