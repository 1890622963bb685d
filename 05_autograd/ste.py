"""Fake quantisation with a straight-through gradient (quantisation-aware training's basic step).

    from ste import fake_quantize
    q = fake_quantize(w, scale=0.05, zero_point=0, quant_min=-128, quant_max=127)   # int8 levels
    # forward: w snapped to the grid (k - zero_point) * scale, k in [quant_min, quant_max], ties to even
    # backward: dq/dw taken to be 1 where w's level was inside the range, 0 where it was clamped

Rounding is flat between levels and jumps between them, so its true derivative is
0 almost everywhere (and undefined at the jumps): nothing upstream of a rounding
step would ever learn. The straight-through estimator (STE) pretends the
rounding was not there when going backward, but keeps the clamp: a value pushed
past the last level gets no gradient, as the clamp's own derivative says. A
made-up gradient, not the derivative: useful while the rounding is a small
perturbation of an otherwise smooth computation.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

if importlib.util.find_spec("coursekit") and (Path(__file__).parent / "csrc").is_dir():
    from coursekit.build import build  # in the course: build (or reuse) the sources beside this file

    ext = build(Path(__file__).parent)
else:  # installed with pip (see setup.py): the compiled extension is a module of its own
    import ch05_trilinear as ext


class FakeQuantizeSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, scale: float, zero_point: int, quant_min: int, quant_max: int) -> torch.Tensor:
        # BEGIN SOLUTION quantize-ste
        out, mask = ext.fake_quantize(x, scale, zero_point, quant_min, quant_max)
        # The backward needs only where x's level was in range: one byte per value,
        # a quarter of x in float32, and x itself can be freed.
        ctx.save_for_backward(mask)
        # END SOLUTION
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        # BEGIN SOLUTION quantize-ste
        (mask,) = ctx.saved_tensors
        # The chain rule with a local derivative of 1 or 0: a product, as autograd
        # would form it (so -0.0 and NaN in grad_out behave as in torch's own ops),
        # built from a torch operation and hence differentiable itself: a gradient
        # penalty through fake_quantize works. One gradient per input of forward:
        # scale, zero point and the range get None.
        return grad_out * mask, None, None, None, None
        # END SOLUTION


def fake_quantize(x: torch.Tensor, scale: float, zero_point: int = 0, quant_min: int = -128,
                  quant_max: int = 127) -> torch.Tensor:
    """x snapped to the grid (k - zero_point) * scale, k integer in [quant_min, quant_max], with the
    straight-through gradient (1 inside the range, 0 where x was clamped)."""
    return FakeQuantizeSTE.apply(x, scale, zero_point, quant_min, quant_max)
