"""Trilinear interpolation in plain, differentiable PyTorch: the ground truth for the kernels.

The formulation is chapter 03's reference, word for word (a test checks it): gather the
eight corner weights of each point, then one weighted sum over the corners. Autograd
differentiates it for us, so its gradients (in float64) are what the hand-written backward
kernels must reproduce, and bench.py times its autograd as the plain-PyTorch baseline.

Precision: like the kernels, it computes in float32 for float16/bfloat16 inputs (their
at::opmath_type) and in the inputs' own dtype for float32 and float64, and rounds to the
dtype of the inputs once, at the end.
"""

from __future__ import annotations

import torch

# Corner k sits at offsets (k>>2 & 1, k>>1 & 1, k & 1) along (x, y, z): row k of this table.
CORNER_OFFSETS = [[(k >> 2) & 1, (k >> 1) & 1, k & 1] for k in range(8)]


def corner_weights(points: torch.Tensor) -> torch.Tensor:
    """(N, 3) points in [-1, 1] -> (N, 8) weights; row n sums to 1."""
    uvw = (points + 1) / 2  # (N, 3): u, v, w in [0, 1] inside the cube
    offsets = torch.tensor(CORNER_OFFSETS, dtype=points.dtype, device=points.device)  # (8, 3)
    # Along each axis a corner with offset 1 takes u (or v, w), one with offset 0 takes 1 - u.
    factors = torch.where(offsets.bool(), uvw[:, None, :], 1 - uvw[:, None, :])  # (N, 8, 3)
    return factors.prod(dim=2)


def trilinear(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """feats (N, 8, F), points (N, 3) -> (N, F), in the dtype of the inputs (computed as the module says)."""
    compute = torch.promote_types(feats.dtype, torch.float32)  # float16/bfloat16 -> float32; float32, float64 stay
    weights = corner_weights(points.to(compute))  # (N, 8)
    out = (weights[:, :, None] * feats.to(compute)).sum(dim=1)  # (N, F), no rounding to the half type in between
    return out.to(feats.dtype)  # the one rounding


def trilinear_grads(grad_out: torch.Tensor, feats: torch.Tensor,
                    points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(dL/dfeats, dL/dpoints) for dL/dout = grad_out, by autograd of `trilinear` in float64 on the CPU."""
    g, f, p = (t.detach().double().cpu() for t in (grad_out, feats, points))
    f.requires_grad_()
    p.requires_grad_()
    return torch.autograd.grad(trilinear(f, p), (f, p), g)
