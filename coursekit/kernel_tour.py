"""Launch every CUDA kernel of the course once, at small odd sizes, and compare with the CPU.

`./course gpu-report` runs this under each compute-sanitizer tool: small
shapes keep the sanitizers fast, odd ones (F not a multiple of 32, N not a
multiple of the rows per block, misaligned slices) reach the bounds checks
and the tails of vectorised loops. Usage: python -m coursekit.kernel_tour
"""

from __future__ import annotations

import sys

import torch

from . import build, chapters

DEVICE = "cuda"  # the device under test; the reference results come from the CPU kernels


def _close(name: str, cuda_out, cpu_out, failures: list[str]) -> None:
    for a, b in zip(cuda_out if isinstance(cuda_out, tuple) else (cuda_out,),
                    cpu_out if isinstance(cpu_out, tuple) else (cpu_out,)):
        if a is None and b is None:
            continue
        if not torch.allclose(a.cpu().double(), b.double(), rtol=1e-4, atol=1e-5):
            failures.append(name)
            return
    print(f"  ok  {name}")


def trilinear(ext, name: str, failures: list[str], shapes=((1, 1), (3, 33), (37, 100), (65, 257))) -> None:
    for N, F in shapes:
        feats = torch.randn(N, 8, F)
        points = torch.rand(N, 3) * 2 - 1
        grad = torch.randn(N, F)
        for fn in ("forward", "forward_naive", "forward_vectorized"):
            if hasattr(ext, fn):
                _close(f"{name}.{fn} N={N} F={F}", getattr(ext, fn)(feats.to(DEVICE), points.to(DEVICE)),
                       getattr(ext, fn)(feats, points), failures)
        if hasattr(ext, "backward"):
            for flags in ((True, True), (True, False), (False, True)):
                _close(f"{name}.backward{flags} N={N} F={F}", ext.backward(grad.to(DEVICE), feats.to(DEVICE), points.to(DEVICE), *flags),
                       ext.backward(grad, feats, points, *flags), failures)


# Chapter 06: every kernel of the dispatch table (csrc/dispatch.cu), run by name on each small
# case it applies to, in both layouts and two dtypes, against the CPU op in float64.
UPSAMPLE_CASES = [((1, 1, 1, 1), (3, 2)), ((2, 3, 5, 7), (11, 4)), ((1, 2, 8, 9), (16, 18)),
                  ((1, 4, 8, 8), (16, 16)), ((1, 4, 16, 16), (8, 8)), ((1, 4, 8, 8), (32, 32)),
                  ((1, 3, 4, 8), (8, 16)), ((1, 16, 5, 6), (10, 12)), ((1, 16, 5, 8), (7, 16)),
                  ((1, 8, 4, 12), (12, 48))]


def upsample_ladder(failures: list[str]) -> None:
    table = torch.ops.ch06._upsample_bilinear2d_kernel_table(torch.empty(0)).splitlines()
    for row in table:
        name, direction = row.split("|")[:2]
        ran = 0
        for mode in ("align_corners", "half_pixel", "tf_legacy"):
            for shape, size in UPSAMPLE_CASES:
                for dtype in (torch.float32, torch.bfloat16):
                    for cl in (False, True):
                        fmt = torch.channels_last if cl else torch.contiguous_format
                        if direction == "forward":
                            t = torch.randn(shape).to(dtype).float().to(memory_format=fmt)
                            want = torch.ops.ch06._upsample_bilinear2d_kernel(t.double(), list(size), mode)
                            fn, args = torch.ops.ch06._upsample_bilinear2d_rung, (list(size), mode, name)
                        else:
                            t = torch.randn(shape[:2] + size).to(dtype).float().to(memory_format=fmt)
                            want = torch.ops.ch06._upsample_bilinear2d_backward_kernel(
                                t.double(), list(shape[2:]), mode, "gather")
                            fn, args = torch.ops.ch06._upsample_bilinear2d_backward_rung, (list(shape[2:]), mode, name)
                        try:
                            got = fn(t.to(DEVICE, dtype), *args)
                        except RuntimeError as e:
                            if "does not apply" in str(e):
                                continue
                            raise
                        ran += 1
                        tol = 1e-5 if dtype == torch.float32 else 2e-2
                        if not torch.allclose(got.cpu().double(), want, rtol=tol, atol=tol * want.abs().max().item()):
                            failures.append(f"upsample {name} {mode} {shape}->{size} {dtype} channels_last={cl}")
        if ran == 0:
            failures.append(f"upsample {name}: no case of the tour applies to it")
        else:
            print(f"  ok  upsample {name} ({ran} cases)")


def main() -> int:
    if not torch.cuda.is_available():
        print("kernel_tour needs a CUDA GPU", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    failures: list[str] = []
    for chapter in chapters.existing():
        if chapter.number == "01":
            continue
        ext = build.build(chapter.path)
        if build.describe(ext) != "CPU+CUDA":
            failures.append(f"{chapter.dirname}: built without CUDA")
            continue
        print(chapter.dirname)
        if chapter.number in {"02", "03", "04", "05"}:
            trilinear(ext, chapter.module, failures)
            odd = torch.randn(4, 8, 97)[:, :, 1:]  # a misaligned, non-contiguous slice
            for fn in ("forward", "forward_vectorized"):
                if hasattr(ext, fn):
                    p = torch.rand(4, 3) * 2 - 1
                    _close(f"{chapter.module}.{fn} sliced", getattr(ext, fn)(odd.to(DEVICE), p.to(DEVICE)), getattr(ext, fn)(odd, p), failures)
        if hasattr(ext, "gelu_forward"):
            x = torch.randn(1001) * 3
            g = torch.randn(1001)
            _close("gelu_forward", ext.gelu_forward(x.to(DEVICE)), ext.gelu_forward(x), failures)
            _close("gelu_backward", ext.gelu_backward(g.to(DEVICE), x.to(DEVICE)), ext.gelu_backward(g, x), failures)
            _close("gelu_forward sliced", ext.gelu_forward(x[1:].to(DEVICE)), ext.gelu_forward(x[1:]), failures)
        if hasattr(ext, "fake_quantize"):
            x = torch.randn(1001) * 5
            for name, got, want in zip(("fake_quantize", "fake_quantize mask"),
                                       ext.fake_quantize(x.to(DEVICE), 0.07, 3, -128, 127),
                                       ext.fake_quantize(x, 0.07, 3, -128, 127)):
                _close(name, got, want, failures)
        if chapter.number == "06":
            upsample_ladder(failures)
    torch.cuda.synchronize()
    if failures:
        print("MISMATCH between CUDA and CPU:", *failures, sep="\n  ")
        return 1
    print("every kernel agrees with the CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
