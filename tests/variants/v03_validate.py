"""Plausible wrong solutions for chapter 03; each must fail at least one test."""

from coursekit.exercises import Variant

VARIANTS = [
    Variant("reference-swapped-axes", "the reference pairs offsets with (u, w, v) instead of (u, v, w)",
            "reference.py", "uvw = (points + 1) / 2  # (N, 3)", "uvw = ((points + 1) / 2)[:, [0, 2, 1]]  # (N, 3)"),
    Variant("reference-no-unit-mapping", "the reference uses x in [-1, 1] as the weight instead of u = (x + 1) / 2",
            "reference.py", "uvw = (points + 1) / 2  # (N, 3)", "uvw = points  # (N, 3)"),
    Variant("reference-sum-not-product", "adds the three per-axis factors instead of multiplying them",
            "reference.py", "return factors.prod(dim=2)", "return factors.sum(dim=2) / 3"),
    Variant("timer-mean", "averages the timed calls instead of taking the median",
            "stopwatch.py", "return statistics.median(times)", "return statistics.mean(times)"),
    Variant("timer-no-warmup", "skips the warm-up calls",
            "stopwatch.py", "    for _ in range(warmup):  # first calls", "    for _ in range(0):  # first calls"),
    Variant("timer-no-sync", "reads the CUDA events before the GPU has reached them",
            "stopwatch.py", "        torch.cuda.synchronize(device)  # wait", "        pass  # wait", cuda_only=True),
    Variant("naive-missing-bounds-check", "no bounds check in the naive kernel (F not a multiple of 8)",
            "csrc/trilinear_cuda.cu", "  if (n >= N || f >= F) {\n    return;\n  }\n  // END SOLUTION",
            "  // END SOLUTION", cuda_only=True),
    Variant("naive-swapped-axes", "n taken from the y index and f from the x index",
            "csrc/trilinear_cuda.cu",
            "const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;\n  const int64_t f = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;",
            "const int64_t f = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;\n  const int64_t n = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;",
            cuda_only=True),
    Variant("vectorized-ignores-alignment", "uses 16-byte loads on a misaligned slice",
            "csrc/trilinear_cuda.cu", "const bool packs_fit = F % pack == 0 && reinterpret_cast<uintptr_t>(f) % 16 == 0 &&",
            "const bool packs_fit = F % pack == 0 && true &&", cuda_only=True),
]
