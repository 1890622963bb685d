"""Trilinear interpolation in plain, differentiable PyTorch: the ground truth (chapter 04's).

Both autograd routes of this chapter must reproduce its output and, in float64, the
gradients autograd computes from it; bench.py times it as the plain-PyTorch baseline.
"""

from __future__ import annotations

import torch


def trilinear(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """out[n, f] = sum_k weight_k(points[n]) * feats[n, k, f]; corner k at offsets (k>>2&1, k>>1&1, k&1)."""
    u, v, w = ((points + 1) / 2).unbind(1)
    out = torch.zeros(feats.shape[0], feats.shape[2], dtype=feats.dtype, device=feats.device)
    for k in range(8):
        a = u if (k >> 2) & 1 else 1 - u
        b = v if (k >> 1) & 1 else 1 - v
        c = w if k & 1 else 1 - w
        out = out + (a * b * c)[:, None] * feats[:, k]
    return out


def trilinear_grads(grad_out: torch.Tensor, feats: torch.Tensor,
                    points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(dL/dfeats, dL/dpoints) for dL/dout = grad_out, by autograd of `trilinear` in float64 on the CPU."""
    g, f, p = (t.detach().double().cpu() for t in (grad_out, feats, points))
    f.requires_grad_()
    p.requires_grad_()
    return torch.autograd.grad(trilinear(f, p), (f, p), g)
