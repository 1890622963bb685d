"""The straight-through estimator (STE): round in the forward, identity in the backward.

    from ste import round_ste
    q = round_ste(x)          # == torch.round(x); dq/dx is taken to be 1

round is flat between integers and jumps at x.5, so its true derivative is 0
almost everywhere (and undefined at the jumps): torch.round's backward gives
zeros, and nothing upstream of a rounding step would ever learn. The STE
pretends the rounding was not there when going backward. It is a made-up
gradient, not the derivative: useful when the rounding is a small
perturbation of an otherwise smooth computation (quantisation-aware training:
weights and activations rounded to a grid in the forward, so the network learns
to live with the rounding, while the gradient still flows to the float weights).
"""

from __future__ import annotations

from pathlib import Path

import torch

from coursekit.build import build

ext = build(Path(__file__).parent)


class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return ext.round(x)  # ties to even, like torch.round

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION ste-backward
        # Straight through: d round(x)/dx is taken to be 1. The backward is
        # built from torch operations (here none at all), so it is itself
        # differentiable and needs no once_differentiable.
        return grad_out
        # END SOLUTION


def round_ste(x: torch.Tensor) -> torch.Tensor:
    return RoundSTE.apply(x)


def fake_quantize(x: torch.Tensor, scale: float) -> torch.Tensor:
    """x rounded to the grid scale * k (k integer), with the STE's gradient 1 (QAT's basic step)."""
    return round_ste(x / scale) * scale
