"""Route 2: the kernels as a registered operator, torch.ops.ch05.trilinear.

    from trilinear_op import trilinear
    out = trilinear(feats, points)                        # eager: calls our kernel
    out = torch.compile(model, fullgraph=True)(...)       # compiles, no graph break

The C++ side (csrc/ops.cpp) defines the operators and their CPU/CUDA kernels.
This file adds the two things the dispatcher still needs from us:

* a fake implementation for each op: output shapes, dtypes and devices from
  input metadata alone. torch.compile traces with FakeTensors (no data), and
  without this it cannot know what our op returns;
* an autograd formula (register_autograd): which tensors to keep for backward
  and how to turn grad_out into input gradients, by calling the backward op.
"""

from __future__ import annotations

from pathlib import Path

import torch

from coursekit.build import build

ext = build(Path(__file__).parent)  # loading the library registers torch.ops.ch05.*

trilinear_op = torch.ops.ch05.trilinear.default
trilinear_backward_op = torch.ops.ch05.trilinear_backward.default


# Fake implementations receive FakeTensors (shape, dtype, device; no data) and
# return tensors of the right metadata, built with torch ops only. They are
# also the place to repeat the cheap shape checks, so that a traced program
# fails at trace time with the same message as eager.
@torch.library.register_fake("ch05::trilinear")
def _(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    # BEGIN SOLUTION fake-impl
    torch._check(feats.dim() == 3 and feats.shape[1] == 8,
                 lambda: f"trilinear: feats must have shape (N, 8, F), got {tuple(feats.shape)}")
    torch._check(points.dim() == 2 and points.shape[0] == feats.shape[0] and points.shape[1] == 3,
                 lambda: f"trilinear: points must have shape (N, 3) with N = {feats.shape[0]} as feats, "
                         f"got {tuple(points.shape)}")
    return feats.new_empty(feats.shape[0], feats.shape[2])
    # END SOLUTION


@torch.library.register_fake("ch05::trilinear_backward")
def _(grad_out: torch.Tensor, feats: torch.Tensor, points: torch.Tensor, need_feats: bool, need_points: bool):
    # BEGIN SOLUTION fake-impl
    # Same rule as the C++ op: a gradient that is not needed is an empty tensor.
    grad_feats = feats.new_empty(feats.shape) if need_feats else feats.new_empty(0)
    grad_points = points.new_empty(points.shape) if need_points else points.new_empty(0)
    return grad_feats, grad_points
    # END SOLUTION


def _setup_context(ctx, inputs, output):
    # Runs after the forward with its inputs and output, like the body of an
    # autograd.Function's forward after the kernel call.
    feats, points = inputs
    ctx.save_for_backward(feats, points)


def _backward(ctx, grad_out):
    # BEGIN SOLUTION op-backward
    feats, points = ctx.saved_tensors
    need_feats, need_points = ctx.needs_input_grad
    # Calling the backward *op* (not ext.backward) keeps the backward visible
    # to torch.compile, which traces it too (AOTAutograd).
    grad_feats, grad_points = trilinear_backward_op(grad_out.contiguous(), feats, points, need_feats, need_points)
    return (grad_feats if need_feats else None), (grad_points if need_points else None)
    # END SOLUTION


torch.library.register_autograd("ch05::trilinear", _backward, setup_context=_setup_context)


# The backward op has no derivative of its own. Without a formula registered,
# autograd would differentiate *through* it anyway (with a warning) and return
# wrong zeros for a second derivative. Registering one that refuses turns that
# into an error, like once_differentiable does for route 1.
def _no_double_backward(ctx, grad_grad_feats, grad_grad_points):
    raise RuntimeError("trilinear: double backward (a gradient of the gradient) is not implemented; "
                       "the backward op ch05::trilinear_backward is not differentiable")


torch.library.register_autograd("ch05::trilinear_backward", _no_double_backward, setup_context=lambda ctx, inputs, output: None)


def trilinear(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """feats (N, 8, F) interpolated at points (N, 3) in [-1, 1]: (N, F), differentiable in both."""
    return trilinear_op(feats, points)
