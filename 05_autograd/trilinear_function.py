"""Route 1: a torch.autograd.Function around the pybind11 kernels.

    from trilinear_function import trilinear
    out = trilinear(feats, points)        # feats (N, 8, F), points (N, 3) in [-1, 1]
    out.sum().backward()                  # runs our backward kernel

Quick to write and fine in eager mode. torch.compile cannot look inside the
pybind11 calls, so it breaks the graph around them (see trilinear_op.py for the
route that compiles).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

if importlib.util.find_spec("coursekit") and (Path(__file__).parent / "csrc").is_dir():
    from coursekit.build import build  # in the course: build (or reuse) the sources beside this file

    ext = build(Path(__file__).parent)  # this folder's sources: a learner's workspace uses its own
else:  # installed with pip (see setup.py): the compiled extension is a module of its own
    import ch05_trilinear as ext

DOUBLE_BACKWARD = ("trilinear: double backward (a gradient of the gradient, create_graph=True) is not "
                   "implemented: the backward kernel is not differentiable")


class TrilinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION function-forward
        out = ext.forward(feats, points)
        # d out/d feats (the weights) depends on the points only; d out/d points
        # needs feats. So feats is kept only when the points need a gradient: when
        # they do not (a fixed set of query points), the largest tensor of the op
        # is not held until backward. save_for_backward, not ctx.feats = feats: it
        # checks that nothing saved was modified in place before backward runs.
        ctx.save_for_backward(feats if ctx.needs_input_grad[1] else None, points)
        # END SOLUTION
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        # BEGIN SOLUTION function-backward
        # Autograd runs backward with grad mode on only for create_graph=True, that is,
        # when the gradient we return is to be differentiated again. Our kernel's result
        # has no derivative: refuse at once. (@once_differentiable is not enough: it
        # raises only when grad_out requires grad, and with a loss linear in the output,
        # out.sum(), grad_out is a constant and a gradient penalty silently loses a term.)
        if torch.is_grad_enabled():
            raise RuntimeError(DOUBLE_BACKWARD)
        feats, points = ctx.saved_tensors
        need_feats, need_points = ctx.needs_input_grad
        # ext.backward makes grad_out contiguous itself (the gradient of .sum() is a
        # stride-0 expand), and returns None for a gradient it was not asked for:
        # one value per input of forward, in the same order.
        return ext.backward(grad_out, feats, points, need_feats, need_points)
        # END SOLUTION


def trilinear(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """feats (N, 8, F) interpolated at points (N, 3) in [-1, 1]: (N, F), differentiable in both."""
    return TrilinearFunction.apply(feats, points)
