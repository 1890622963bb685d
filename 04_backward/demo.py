"""Chapter 04 demo: the hand-written gradients against autograd of a PyTorch formula."""

from pathlib import Path

import torch

from coursekit.build import build, describe

ext = build(Path(__file__).parent)
device = "cuda" if describe(ext) == "CPU+CUDA" else "cpu"


def reference(feats, points):
    u, v, w = ((points + 1) / 2).unbind(1)
    out = 0
    for k in range(8):
        a = u if (k >> 2) & 1 else 1 - u
        b = v if (k >> 1) & 1 else 1 - v
        c = w if k & 1 else 1 - w
        out = out + (a * b * c)[:, None] * feats[:, k]
    return out


N, F = 2000, 32
feats = torch.randn(N, 8, F, device=device, dtype=torch.float64, requires_grad=True)
points = (torch.rand(N, 3, device=device, dtype=torch.float64) * 2 - 1).requires_grad_()
grad_out = torch.randn(N, F, device=device, dtype=torch.float64)
reference(feats, points).backward(grad_out)
grad_feats, grad_points = ext.backward(grad_out, feats.detach(), points.detach())
err_f = ((grad_feats - feats.grad).norm() / feats.grad.norm()).item()
err_p = ((grad_points - points.grad).norm() / points.grad.norm()).item()
x = torch.linspace(-4, 4, 9, dtype=torch.float64, requires_grad=True)
torch.nn.functional.gelu(x).backward(torch.ones_like(x))
err_g = (ext.gelu_backward(torch.ones_like(x), x.detach()) - x.grad).abs().max().item()
print(f"on {device}, float64: grad_feats rel. error {err_f:.1e}, grad_points {err_p:.1e}, gelu' max error {err_g:.1e}")
