"""Chapter 03 demo: check the kernels against the reference, then time them properly."""

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # reference.py beside this file; coursekit in the course root
import reference  # noqa: E402

try:
    from coursekit import timing
    from coursekit.build import build, describe
except ImportError:  # this folder copied out of the course and installed with pip (see setup.py)
    import ch03_trilinear as ext
    timing = None  # the course's timing harness is not here: errors only
    device = "cuda" if torch.cuda.is_available() else "cpu"  # setup.py builds the CUDA kernels when a GPU is visible
else:
    ext = build(HERE)
    device = "cuda" if describe(ext) == "CPU+CUDA" and torch.cuda.is_available() else "cpu"


def rel_error(got, want):
    return ((got.double() - want).abs().max() / want.abs().max()).item()

N, F = (65536, 256) if device == "cuda" else (8192, 64)
feats = torch.randn(N, 8, F, device=device)
points = torch.rand(N, 3, device=device) * 2 - 1
expected = reference.trilinear64(feats, points)
for name in ("forward", "forward_naive", "forward_vectorized"):
    fn = getattr(ext, name)
    err = rel_error(fn(feats, points), expected)
    assert err < 1e-5, f"{name}: relative error {err:.2g} against the float64 reference"
    t = f"   median {timing.bench(lambda: fn(feats, points), device, min_run_time=0.2).median_ms:.3f} ms" if timing else ""
    print(f"{name:19s} relative error {err:.1e}{t}")
if timing:
    t = timing.bench(lambda: reference.trilinear(feats, points), device, min_run_time=0.2)
    print(f"{'reference (eager)':19s} {'':24s} median {t.median_ms:.3f} ms")
print(f"{device}: N={N} F={F} float32, all three mappings agree with the float64 reference")
