"""Route 2: the kernels as a registered operator, torch.ops.ch05.trilinear.

    from trilinear_op import trilinear
    out = trilinear(feats, points)                        # eager: calls our kernel
    out = torch.compile(model, fullgraph=True)(...)       # compiles, no graph break

The C++ side (csrc/ops.cpp) defines the operators and their CPU/CUDA kernels.
This file adds the two things the dispatcher still needs from us:

* a fake implementation for each op: output shapes, dtypes and devices from
  input metadata alone, after the same checks the C++ op makes. torch.compile
  traces with FakeTensors (no data), and without this it cannot know what our
  op returns;
* an autograd formula (register_autograd): which tensors to keep for backward
  and how to turn grad_out into input gradients, by calling the backward op.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

if importlib.util.find_spec("coursekit") and (Path(__file__).parent / "csrc").is_dir():
    from coursekit.build import build  # in the course: build (or reuse) the sources beside this file

    ext = build(Path(__file__).parent)  # loading the library registers torch.ops.ch05.*
else:  # installed with pip (see setup.py): the compiled extension is a module of its own
    import ch05_trilinear as ext

for _name in ("trilinear", "trilinear_backward"):
    if not hasattr(torch.ops.ch05, _name):
        raise RuntimeError(f"torch.ops.ch05.{_name} does not exist: csrc/ops.cpp defines no such operator "
                           "(see 05_autograd/README.md, exercise op-register)")

trilinear_op = torch.ops.ch05.trilinear.default
trilinear_backward_op = torch.ops.ch05.trilinear_backward.default

DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)  # what the kernels take


# Fake implementations receive FakeTensors (shape, dtype, device; no data), or
# tensors on the "meta" device, and return tensors of the right metadata, built
# with torch ops only. They repeat every check of the C++ op (except "CPU or
# CUDA": a fake tensor may live on the meta device), with the same messages, so
# that a traced program fails at trace time as eager would at run time.
# torch._check, not `if ...: raise`: sizes may be symbolic (dynamic shapes).
@torch.library.register_fake("ch05::trilinear")
def _(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    # BEGIN SOLUTION fake-impl
    # One size comparison per torch._check: C++'s && as Python's `and` would ask a
    # symbolic size for a plain bool, which fails for a size that depends on data.
    bad_feats = lambda: f"trilinear: feats must have shape (N, 8, F), got {list(feats.shape)}"  # noqa: E731
    torch._check(feats.dim() == 3, bad_feats)
    torch._check(feats.shape[1] == 8, bad_feats)
    bad_points = lambda: (f"trilinear: points must have shape (N, 3) with N = {feats.shape[0]} as feats, "  # noqa: E731
                          f"got {list(points.shape)}")
    torch._check(points.dim() == 2, bad_points)
    torch._check(points.shape[0] == feats.shape[0], bad_points)
    torch._check(points.shape[1] == 3, bad_points)
    torch._check(feats.dtype in DTYPES,
                 lambda: f"trilinear: feats must be float64, float32, float16 or bfloat16, got {feats.dtype}")
    torch._check(points.dtype == feats.dtype,
                 lambda: f"trilinear: points must have the dtype of feats ({feats.dtype}), got {points.dtype}")
    torch._check(points.device == feats.device,
                 lambda: f"trilinear: feats and points must be on the same device, got feats on {feats.device} "
                         f"and points on {points.device}")
    return feats.new_empty(feats.shape[0], feats.shape[2])
    # END SOLUTION


@torch.library.register_fake("ch05::trilinear_backward")
def _(grad_out: torch.Tensor, feats: torch.Tensor | None, points: torch.Tensor, need_feats: bool, need_points: bool):
    # BEGIN SOLUTION fake-impl
    torch._check(grad_out.dim() == 2, lambda: f"trilinear_backward: grad_out must have shape (N, F), "
                                              f"got {list(grad_out.shape)}")
    N, F = grad_out.shape
    bad_points = lambda: (f"trilinear_backward: points must have shape (N, 3) with N = {N} as grad_out, "  # noqa: E731
                          f"got {list(points.shape)}")
    torch._check(points.dim() == 2, bad_points)
    torch._check(points.shape[0] == N, bad_points)
    torch._check(points.shape[1] == 3, bad_points)
    if feats is not None:
        bad_feats = lambda: (f"trilinear_backward: feats must have shape (N, 8, F) = ({N}, 8, {F}) as "  # noqa: E731
                             f"grad_out, got {list(feats.shape)}")
        torch._check(feats.dim() == 3, bad_feats)
        torch._check(feats.shape[0] == N, bad_feats)
        torch._check(feats.shape[1] == 8, bad_feats)
        torch._check(feats.shape[2] == F, bad_feats)
    torch._check(feats is not None or not need_points,
                 lambda: "trilinear_backward: the points' gradient needs feats (need_points is true), got None")
    torch._check(grad_out.dtype in DTYPES,
                 lambda: f"trilinear_backward: grad_out must be float64, float32, float16 or bfloat16, "
                         f"got {grad_out.dtype}")
    torch._check(points.dtype == grad_out.dtype,
                 lambda: f"trilinear_backward: points must have the dtype of grad_out ({grad_out.dtype}), "
                         f"got {points.dtype}")
    torch._check(feats is None or feats.dtype == grad_out.dtype,
                 lambda: f"trilinear_backward: feats must have the dtype of grad_out ({grad_out.dtype}), "
                         f"got {feats.dtype}")
    torch._check(points.device == grad_out.device and (feats is None or feats.device == grad_out.device),
                 lambda: f"trilinear_backward: grad_out, feats and points must be on the same device, got grad_out "
                         f"on {grad_out.device}, points on {points.device}"
                         + (f", feats on {feats.device}" if feats is not None else ""))
    # Same rule as the C++ op: a gradient that is not needed is an empty tensor, shape (0,).
    grad_feats = grad_out.new_empty(N, 8, F) if need_feats else grad_out.new_empty(0)
    grad_points = points.new_empty(N, 3) if need_points else points.new_empty(0)
    return grad_feats, grad_points
    # END SOLUTION


def _setup_context(ctx, inputs, output):
    # Runs after the forward with its inputs and output, like the end of an
    # autograd.Function's forward. ctx.needs_input_grad has one flag per input
    # here, plus one that torch.library adds at the end: index it, do not unpack it.
    # BEGIN SOLUTION op-autograd
    feats, points = inputs
    # The weights (d out/d feats) need only the points; feats is kept only for the
    # points' gradient. Nothing needs the output.
    ctx.save_for_backward(feats if ctx.needs_input_grad[1] else None, points)
    # END SOLUTION


def _backward(ctx, grad_out):
    # BEGIN SOLUTION op-autograd
    feats, points = ctx.saved_tensors
    need_feats, need_points = ctx.needs_input_grad
    # The backward *op*, not ext.backward: torch.compile traces the backward too
    # (AOTAutograd), and only an operator is visible to it. It makes grad_out
    # contiguous itself.
    grad_feats, grad_points = trilinear_backward_op(grad_out, feats, points, need_feats, need_points)
    return (grad_feats if need_feats else None), (grad_points if need_points else None)
    # END SOLUTION


torch.library.register_autograd("ch05::trilinear", _backward, setup_context=_setup_context)


# The backward op has no derivative of its own. Without a formula registered,
# autograd would differentiate *through* it anyway (with a warning) and return
# wrong zeros for a second derivative.
def _backward_of_backward(ctx, grad_grad_feats, grad_grad_points):
    # BEGIN SOLUTION op-autograd
    raise RuntimeError("trilinear: double backward (a gradient of the gradient) is not implemented; "
                       "the backward op ch05::trilinear_backward is not differentiable")
    # END SOLUTION


torch.library.register_autograd("ch05::trilinear_backward", _backward_of_backward,
                                setup_context=lambda ctx, inputs, output: None)


def trilinear(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """feats (N, 8, F) interpolated at points (N, 3) in [-1, 1]: (N, F), differentiable in both."""
    return trilinear_op(feats, points)
