"""Route 1: a torch.autograd.Function around the pybind11 kernels.

    from trilinear_function import trilinear
    out = trilinear(feats, points)        # feats (N, 8, F), points (N, 3) in [-1, 1]
    out.sum().backward()                  # runs our backward kernel

Quick to write and fine in eager mode. torch.compile cannot look inside the
pybind11 calls, so it breaks the graph around them (see trilinear_op.py for the
route that compiles).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch.autograd.function import once_differentiable

from coursekit.build import build

# Built from this file's folder, so a learner's workspace uses its own sources.
ext = build(Path(__file__).parent)


class TrilinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION function-forward
        out = ext.forward(feats, points)
        # The backward needs both inputs (d out/d feats depends on the points,
        # d out/d points on the feats). save_for_backward, not ctx.feats = feats:
        # it checks that neither was modified in place before backward runs, and
        # it does not keep a reference cycle through the output.
        ctx.save_for_backward(feats, points)
        # END SOLUTION
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: torch.Tensor):
        # once_differentiable: our backward is a kernel that autograd cannot
        # differentiate again. The decorator runs it without recording a graph and
        # makes a second differentiation (create_graph=True, then grad of a grad)
        # fail with a clear error instead of silently returning wrong zeros.
        # BEGIN SOLUTION function-backward
        feats, points = ctx.saved_tensors
        need_feats, need_points = ctx.needs_input_grad
        # Incoming gradients may be expanded or transposed views (the gradient
        # of .sum() is a stride-0 expand): the kernel wants packed memory.
        grad_feats, grad_points = ext.backward(grad_out.contiguous(), feats, points, need_feats, need_points)
        # One gradient per input of forward, in the same order; None where an
        # input needs none (ext.backward already returns None for those).
        return grad_feats, grad_points
        # END SOLUTION


def trilinear(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """feats (N, 8, F) interpolated at points (N, 3) in [-1, 1]: (N, F), differentiable in both."""
    return TrilinearFunction.apply(feats, points)
