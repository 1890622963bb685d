"""Chapter 04 demo: the hand-written gradients against autograd of the PyTorch formula."""

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # reference.py beside this file; coursekit in the course root
import reference  # noqa: E402

try:
    from coursekit.build import build, describe
except ImportError:  # this folder copied out of the course and installed with pip (see setup.py)
    import ch04_trilinear as ext
    device = "cuda" if torch.cuda.is_available() else "cpu"  # setup.py builds the CUDA kernels when a GPU is visible
    built = "installed, " + ("CPU+CUDA" if device == "cuda" else "CPU")
else:
    ext = build(HERE)
    device = "cuda" if describe(ext) == "CPU+CUDA" and torch.cuda.is_available() else "cpu"
    built = describe(ext)

N, F = 2000, 32
grad_out = torch.randn(N, F, device=device, dtype=torch.float64)
feats = torch.randn(N, 8, F, device=device, dtype=torch.float64)
points = torch.rand(N, 3, device=device, dtype=torch.float64) * 2 - 1
grad_feats, grad_points = ext.backward(grad_out, feats, points, need_feats=True, need_points=True)
ref_feats, ref_points = reference.trilinear_grads(grad_out, feats, points)
err_f = ((grad_feats.cpu() - ref_feats).norm() / ref_feats.norm()).item()
err_p = ((grad_points.cpu() - ref_points).norm() / ref_points.norm()).item()

x = torch.linspace(-4, 4, 9, dtype=torch.float64, device=device, requires_grad=True)
torch.nn.functional.gelu(x).backward(torch.ones_like(x))
err_g = (ext.gelu_backward(torch.ones_like(x), x.detach()) - x.grad).abs().max().item()
print(f"{built} build, on {device}, float64, N={N} F={F}: grad_feats rel. error {err_f:.1e}, "
      f"grad_points {err_p:.1e}, gelu' max error {err_g:.1e}")
