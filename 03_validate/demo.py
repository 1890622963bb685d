"""Chapter 03 demo: check the kernels against the reference, then time them properly."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python NN_chapter/demo.py` from anywhere: coursekit is in the course root
from coursekit import timing
from coursekit.build import build, describe, load_python
from coursekit.testing import rel_error

HERE = Path(__file__).parent
ext = build(HERE)
reference = load_python(HERE, "reference")
device = "cuda" if describe(ext) == "CPU+CUDA" and torch.cuda.is_available() else "cpu"

N, F = (65536, 256) if device == "cuda" else (8192, 64)
feats = torch.randn(N, 8, F, device=device)
points = torch.rand(N, 3, device=device) * 2 - 1
expected = reference.trilinear64(feats, points)
for name in ("forward", "forward_naive", "forward_vectorized"):
    fn = getattr(ext, name)
    err = rel_error(fn(feats, points), expected)
    assert err < 1e-5, f"{name}: relative error {err:.2g} against the float64 reference"
    t = timing.bench(lambda: fn(feats, points), device, min_run_time=0.2)
    print(f"{name:19s} relative error {err:.1e}   median {t.median_ms:.3f} ms")
t = timing.bench(lambda: reference.trilinear(feats, points), device, min_run_time=0.2)
print(f"{'reference (eager)':19s} {'':24s} median {t.median_ms:.3f} ms")
print(f"{device}: N={N} F={F} float32, all three mappings agree with the float64 reference")
