"""Chapter 02 demo: interpolate at a corner, at the centre, and at random points."""

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # `python 02_forward_kernel/demo.py` from anywhere: coursekit is in the course root
try:
    from coursekit.build import build, describe
except ImportError:  # this folder copied out of the course and installed with pip (see setup.py)
    import ch02_trilinear as ext
    device = "cuda" if torch.cuda.is_available() else "cpu"  # setup.py builds the CUDA kernels when a GPU is visible
else:
    ext = build(HERE)
    device = "cuda" if describe(ext) == "CPU+CUDA" else "cpu"

feats = torch.arange(8.0).reshape(1, 8, 1).repeat(1, 1, 2)  # corner k holds the value k
corner = torch.tensor([[1.0, -1.0, 1.0]])  # offsets (1, 0, 1): corner 4 + 0 + 1 = 5
centre = torch.zeros(1, 3)
print("at corner (1,-1,1):", ext.forward(feats, corner).tolist(), "(corner 5 holds 5)")
print("at the centre:     ", ext.forward(feats, centre).tolist(), "(the mean of 0..7 is 3.5)")

N, F = 4096, 64
feats = torch.randn(N, 8, F, device=device)
points = torch.rand(N, 3, device=device) * 2 - 1
out = ext.forward(feats, points)
print(f"forward on {device}: feats {tuple(feats.shape)}, points {tuple(points.shape)} -> out {tuple(out.shape)}")
