"""Chapter 05: autograd.Function, the straight-through round, torch.library ops, FeatureGrid."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as Fn

from coursekit import ROOT, build
from coursekit.testing import TOLERANCE, assert_close, poisoned_empty

CHAPTER = "05"

# torch.compile backends. On the CPU, inductor generates and compiles C++ for
# every graph (about 12 s per test on 2 cores), so CPU tests use aot_eager: it
# runs the same Dynamo capture and AOTAutograd tracing (the parts that need our
# fake impl and autograd registration) and then executes the traced graph
# eagerly. On a GPU the tests use the default backend, inductor.
BACKEND = {"cpu": "aot_eager", "cuda": "inductor"}


# ---------------------------------------------------------------------------
# Fixtures: the chapter's Python files, loaded from the folder under test.


@pytest.fixture(scope="module")
def fn(ext, chapter_source):
    return build.load_python(chapter_source, "trilinear_function")


@pytest.fixture(scope="module")
def op(ext, chapter_source):
    return build.load_python(chapter_source, "trilinear_op")


@pytest.fixture(scope="module")
def ste(ext, chapter_source):
    return build.load_python(chapter_source, "ste")


@pytest.fixture(scope="module")
def grid_module(op, chapter_source):
    return build.load_python(chapter_source, "module")


# The plain-PyTorch formula and its float64 autograd gradients, from the course's
# own 05_autograd/reference.py (not from the folder under test, which a learner edits).
REFERENCE = build.load_python(ROOT / "05_autograd", "reference")


def inputs(N, F, device="cpu", dtype=torch.float32, requires_grad=False):
    feats = torch.randn(N, 8, F, device=device, dtype=dtype)
    points = (torch.rand(N, 3, device=device, dtype=torch.float64) * 2 - 1).to(dtype)
    return feats.requires_grad_(requires_grad), points.requires_grad_(requires_grad)


# grad_points sums F products: in float16/bfloat16 allow a few roundings more.
POINTS_TOL = {**TOLERANCE, torch.float32: 2e-5, torch.float16: 5e-3, torch.bfloat16: 4e-2}


def check_route(trilinear, device, dtype, N=60, F=19):
    feats, points = inputs(N, F, device, dtype, requires_grad=True)
    with poisoned_empty():
        out = trilinear(feats, points)
        grad_out = torch.randn_like(out)
        out.backward(grad_out)
    ref = REFERENCE.trilinear(feats.detach().double().cpu(), points.detach().double().cpu())
    assert_close(out, ref.to(dtype), dtype, what="out")
    ref_feats, ref_points = REFERENCE.trilinear_grads(grad_out, feats, points)
    assert_close(feats.grad, ref_feats.to(dtype), dtype, what="feats.grad")
    assert_close(points.grad, ref_points.to(dtype), dtype, what="points.grad", tol=POINTS_TOL[dtype])


def gradcheck_route(trilinear, device):
    feats, points = inputs(5, 4, device, torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(trilinear, (feats, points)), "gradcheck failed"
    # Only one input differentiable at a time: the other gets None and no work.
    assert torch.autograd.gradcheck(trilinear, (feats, points.detach()))
    assert torch.autograd.gradcheck(trilinear, (feats.detach(), points))


# ---------------------------------------------------------------------------
# Route 1: torch.autograd.Function around the pybind11 kernels.


@pytest.mark.exercise("function-forward")
def test_function_forward_saves_inputs(fn, device):
    feats, points = inputs(10, 6, device, torch.float64, requires_grad=True)
    out = fn.trilinear(feats, points)
    assert_close(out, REFERENCE.trilinear(feats.detach(), points.detach()), torch.float64, what="out")
    assert out.grad_fn is not None, "the output has no grad_fn: call the kernel inside forward and return its result"
    saved = out.grad_fn.saved_tensors  # what ctx.save_for_backward stored
    assert len(saved) == 2 and saved[0] is feats and saved[1] is points, \
        f"save (feats, points) for backward, in that order; saved {[tuple(s.shape) for s in saved]}"


@pytest.mark.exercise("function-backward")
def test_function_forward_backward(fn, device, dtype):
    check_route(fn.trilinear, device, dtype)


@pytest.mark.exercise("function-backward")
def test_function_gradcheck(fn, device):
    gradcheck_route(fn.trilinear, device)


class Spy:
    """Stands in for a backward kernel and records which gradients it was asked for."""

    def __init__(self, target):
        self.target, self.calls = target, []

    def __call__(self, grad_out, feats, points, need_feats, need_points):
        self.calls.append((bool(need_feats), bool(need_points)))
        return self.target(grad_out, feats, points, need_feats, need_points)


class SpyExt:
    def __init__(self, ext):
        self.forward, self.backward = ext.forward, Spy(ext.backward)


@pytest.mark.exercise("function-backward")
@pytest.mark.parametrize("which", ["feats", "points", "both"])
def test_function_needs_input_grad(fn, monkeypatch, which):
    spy = SpyExt(fn.ext)
    monkeypatch.setattr(fn, "ext", spy)
    feats, points = inputs(7, 5)
    feats.requires_grad_(which in ("feats", "both"))
    points.requires_grad_(which in ("points", "both"))
    fn.trilinear(feats, points).sum().backward()
    assert spy.backward.calls == [(feats.requires_grad, points.requires_grad)], \
        "backward must ask the kernel only for the gradients autograd needs (ctx.needs_input_grad)"
    assert (feats.grad is not None) == feats.requires_grad and (points.grad is not None) == points.requires_grad


@pytest.mark.exercise("function-backward")
def test_function_is_once_differentiable(fn):
    feats, points = inputs(4, 3, dtype=torch.float64, requires_grad=True)
    out = fn.trilinear(feats, points)
    (grad_points,) = torch.autograd.grad((out**2).sum(), points, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        grad_points.sum().backward()


def test_function_route_breaks_torch_compile(fn):
    # Dynamo cannot trace into a pybind11 function: with fullgraph=True that is an error.
    feats, points = inputs(4, 3)
    torch._dynamo.reset()
    compiled = torch.compile(lambda f, p: fn.trilinear(f, p).sum(), fullgraph=True, backend="eager")
    with pytest.raises(torch._dynamo.exc.Unsupported, match="pybind|C/C\\+\\+"):
        compiled(feats, points)


# ---------------------------------------------------------------------------
# Route 2: torch.library operators.


def test_ops_registered(ext):
    assert str(torch.ops.ch05.trilinear.default._schema) == "ch05::trilinear(Tensor feats, Tensor points) -> Tensor"
    assert str(torch.ops.ch05.trilinear_backward.default._schema) == (
        "ch05::trilinear_backward(Tensor grad_out, Tensor feats, Tensor points, bool need_feats, bool need_points)"
        " -> (Tensor, Tensor)")


def test_backward_op_returns_empty_for_unneeded(ext, device):
    feats, points = inputs(6, 4, device)
    grad_out = torch.randn(6, 4, device=device)
    gf, gp = torch.ops.ch05.trilinear_backward(grad_out, feats, points, True, False)
    assert gf.shape == feats.shape and gp.numel() == 0
    gf, gp = torch.ops.ch05.trilinear_backward(grad_out, feats, points, False, True)
    assert gf.numel() == 0 and gp.shape == points.shape


@pytest.mark.exercise("op-backward")
def test_op_forward_backward(op, device, dtype):
    check_route(op.trilinear, device, dtype)


@pytest.mark.exercise("op-backward")
def test_op_gradcheck(op, device):
    gradcheck_route(op.trilinear, device)


@pytest.mark.exercise("op-backward")
@pytest.mark.parametrize("which", ["feats", "points", "both"])
def test_op_needs_input_grad(op, monkeypatch, which):
    spy = Spy(op.trilinear_backward_op)
    monkeypatch.setattr(op, "trilinear_backward_op", spy)
    feats, points = inputs(7, 5)
    feats.requires_grad_(which in ("feats", "both"))
    points.requires_grad_(which in ("points", "both"))
    op.trilinear(feats, points).sum().backward()
    assert spy.calls == [(feats.requires_grad, points.requires_grad)]
    assert (feats.grad is not None) == feats.requires_grad and (points.grad is not None) == points.requires_grad


def test_op_refuses_double_backward(op):
    feats, points = inputs(4, 3, dtype=torch.float64, requires_grad=True)
    out = op.trilinear(feats, points)
    (grad_points,) = torch.autograd.grad((out**2).sum(), points, create_graph=True)
    with pytest.raises(RuntimeError, match="double backward"):
        grad_points.sum().backward()


@pytest.mark.exercise("fake-impl")
@pytest.mark.exercise("op-backward")
def test_opcheck(op, device, dtype):
    # opcheck runs the op under FakeTensor (our fake impl must agree with the real
    # kernel), checks the schema and the autograd registration, and traces it
    # with AOTAutograd, comparing to eager.
    feats, points = inputs(5, 7, device, dtype, requires_grad=True)
    torch.library.opcheck(torch.ops.ch05.trilinear.default, (feats, points))
    grad_out = torch.randn(5, 7, device=device, dtype=dtype)
    for need in [(True, True), (True, False), (False, True)]:
        torch.library.opcheck(torch.ops.ch05.trilinear_backward.default,
                              (grad_out, feats.detach(), points.detach(), *need))


@pytest.mark.exercise("fake-impl")
def test_fake_impl_shapes(op):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        feats, points = torch.empty(11, 8, 5), torch.empty(11, 3)
        out = torch.ops.ch05.trilinear(feats, points)
        gf, gp = torch.ops.ch05.trilinear_backward(torch.empty(11, 5), feats, points, False, True)
    assert out.shape == (11, 5) and gf.shape == (0,) and gp.shape == (11, 3)


@pytest.mark.exercise("fake-impl")
@pytest.mark.exercise("op-backward")
def test_torch_compile_fullgraph(op, device):
    def loss_fn(feats, points, grad_out):
        return (op.trilinear(feats, points) * grad_out).sum()

    feats, points = inputs(33, 20, device, requires_grad=True)
    grad_out = torch.randn(33, 20, device=device)
    torch._dynamo.reset()
    compiled = torch.compile(loss_fn, fullgraph=True, backend=BACKEND[device])
    loss = compiled(feats, points, grad_out)
    gf, gp = torch.autograd.grad(loss, (feats, points))
    loss_ref = loss_fn(feats, points, grad_out)
    gf_ref, gp_ref = torch.autograd.grad(loss_ref, (feats, points))
    torch.testing.assert_close(loss, loss_ref)
    torch.testing.assert_close(gf, gf_ref)
    torch.testing.assert_close(gp, gp_ref)


# ---------------------------------------------------------------------------
# Input checks and edge cases (through the operator, as a user calls it).

BAD = [
    ("feats rank", lambda: (torch.randn(4, 8), torch.rand(4, 3)), "feats must have shape \\(N, 8, F\\)"),
    ("7 corners", lambda: (torch.randn(4, 7, 2), torch.rand(4, 3)), "feats must have shape \\(N, 8, F\\)"),
    ("points (N, 2)", lambda: (torch.randn(5, 8, 2), torch.rand(5, 2)), "points must have shape \\(N, 3\\) with N = 5"),
    ("N differs", lambda: (torch.randn(5, 8, 2), torch.rand(4, 3)), "points must have shape \\(N, 3\\) with N = 5"),
    ("int feats", lambda: (torch.ones(4, 8, 2, dtype=torch.int32), torch.rand(4, 3)), "feats must be float64"),
    ("dtype mismatch", lambda: (torch.randn(4, 8, 2), torch.rand(4, 3, dtype=torch.float64)),
     "points must have the dtype of feats"),
]


@pytest.mark.parametrize("case, make, message", BAD, ids=[b[0] for b in BAD])
def test_bad_inputs(ext, case, make, message):
    feats, points = make()
    with pytest.raises(RuntimeError, match="trilinear: " + message):
        torch.ops.ch05.trilinear(feats, points)


@pytest.mark.cuda
def test_device_mix(ext):
    if build.describe(ext) != "CPU+CUDA":
        pytest.skip("built without CUDA")
    with pytest.raises(RuntimeError, match="trilinear: feats and points must be on the same device"):
        torch.ops.ch05.trilinear(torch.randn(4, 8, 2, device="cuda"), torch.rand(4, 3))


@pytest.mark.parametrize("N, F", [(0, 5), (4, 0)])
def test_empty(op, device, N, F):
    feats, points = inputs(N, F, device, requires_grad=True)
    out = op.trilinear(feats, points)
    assert out.shape == (N, F)
    out.sum().backward()
    assert feats.grad.shape == feats.shape and points.grad.shape == points.shape
    assert not points.grad.any(), "with F = 0 the output does not depend on the points"


def test_non_contiguous(op, device):
    feats, points = inputs(9, 6, device)
    feats_t = feats.transpose(0, 2).contiguous().transpose(0, 2)  # same values, other strides
    points_t = points.t().contiguous().t()
    assert not feats_t.is_contiguous() and not points_t.is_contiguous()
    torch.testing.assert_close(op.trilinear(feats_t, points_t), op.trilinear(feats, points))


# ---------------------------------------------------------------------------
# The straight-through round.


def round_inputs(device, dtype):
    ties = torch.arange(-6, 6, dtype=torch.float64) + 0.5  # -5.5 ... 5.5: half of them round down
    special = torch.tensor([0.0, -0.0, 0.49999997, -0.49999997, 1e4 + 0.5, float("inf"), float("-inf")],
                           dtype=torch.float64)
    x = torch.cat([torch.randn(3000, dtype=torch.float64) * 40, ties, special])
    return x.to(device=device, dtype=dtype)


@pytest.mark.exercise("round-half-even")
def test_round_matches_torch_round(ext, device, dtype):
    x = round_inputs(device, dtype)
    with poisoned_empty():
        y = ext.round(x)
    torch.testing.assert_close(y, torch.round(x), rtol=0, atol=0)
    nan = torch.tensor([float("nan")], device=device, dtype=dtype)
    assert ext.round(nan).isnan().all()


@pytest.mark.exercise("round-half-even")
def test_round_shapes(ext, device):
    x = (torch.randn(6, 5, device=device) * 10).t()  # non-contiguous
    torch.testing.assert_close(ext.round(x), torch.round(x), rtol=0, atol=0)
    assert ext.round(torch.empty(0, 3, device=device)).shape == (0, 3)


def test_round_bad_dtype(ext):
    with pytest.raises(RuntimeError, match="round: x must be float64, float32, float16 or bfloat16, got Int"):
        ext.round(torch.ones(3, dtype=torch.int32))


@pytest.mark.exercise("ste-backward")
def test_ste_gradient_is_identity(ste, device, dtype):
    x = round_inputs(device, dtype)[:3000].requires_grad_()
    weight = torch.randn_like(x)
    (ste.round_ste(x) * weight).sum().backward()
    torch.testing.assert_close(x.grad, weight, rtol=0, atol=0)
    # The true derivative, for contrast: torch.round's backward is zero.
    x2 = x.detach().clone().requires_grad_()
    (torch.round(x2) * weight).sum().backward()
    assert not x2.grad.any()


@pytest.mark.exercise("ste-backward")
def test_fake_quantize_learns(ste):
    # Fit w so that fake_quantize(w, 0.25) == 0.75: the STE lets the gradient through the rounding.
    w = torch.tensor([0.1, -1.3], requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    for _ in range(50):
        loss = ((ste.fake_quantize(w, 0.25) - 0.75) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.testing.assert_close(ste.fake_quantize(w, 0.25).detach(), torch.tensor([0.75, 0.75]))


# ---------------------------------------------------------------------------
# FeatureGrid.


def grid_sample_reference(values, resolution, points):
    """The same lookup with F.grid_sample (align_corners=True: -1 and 1 are the first and last vertex)."""
    R1 = resolution + 1
    volume = values.reshape(R1, R1, R1, -1).permute(3, 2, 1, 0)[None]  # (1, F, D=z, H=y, W=x)
    out = Fn.grid_sample(volume, points[None, :, None, None, :], mode="bilinear", align_corners=True)
    return out[0, :, :, 0, 0].t()  # (N, F)


@pytest.mark.exercise("grid-lookup")
def test_feature_grid_matches_grid_sample(grid_module, device):
    torch.manual_seed(1)
    grid = grid_module.FeatureGrid(resolution=5, features=3, device=device, dtype=torch.float64)
    points = torch.rand(500, 3, device=device, dtype=torch.float64) * 2 - 1
    corners = torch.tensor([[-1.0, -1, -1], [1, 1, 1], [1, -1, 0.2], [0.2, 0.6, -0.6]], device=device,
                           dtype=torch.float64)  # vertices and the far faces
    points = torch.cat([points, corners])
    out = grid(points)
    ref = grid_sample_reference(grid.values.detach(), 5, points)
    assert_close(out, ref, torch.float64, what="FeatureGrid output")


@pytest.mark.exercise("grid-lookup")
def test_feature_grid_gradients(grid_module):
    grid = grid_module.FeatureGrid(resolution=3, features=2, dtype=torch.float64)
    points = (torch.rand(20, 3, dtype=torch.float64) * 1.8 - 0.9).requires_grad_()
    values = grid.values.detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda v, p: torch.func.functional_call(grid, {"values": v}, (p,)), (values, points))


@pytest.mark.exercise("grid-lookup")
def test_feature_grid_training_reduces_loss(grid_module):
    grid = grid_module.FeatureGrid(resolution=4, features=1)
    opt = torch.optim.Adam(grid.parameters(), lr=0.05)
    points = torch.rand(512, 3) * 2 - 1
    target = (torch.sin(3 * points[:, 0]) * points[:, 1] + points[:, 2] ** 2)[:, None]
    losses = []
    for _ in range(30):
        loss = Fn.mse_loss(grid(points), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0], f"loss {losses[0]:.4f} -> {losses[-1]:.4f}: training does not learn"


@pytest.mark.exercise("grid-lookup")
def test_feature_grid_compiles(grid_module, device):
    grid = grid_module.FeatureGrid(resolution=4, features=3, device=device)
    points = torch.rand(100, 3, device=device) * 2 - 1
    torch._dynamo.reset()
    compiled = torch.compile(grid, fullgraph=True, backend=BACKEND[device])
    loss = compiled(points).square().sum()
    (g,) = torch.autograd.grad(loss, grid.values)
    (g_ref,) = torch.autograd.grad(grid(points).square().sum(), grid.values)
    torch.testing.assert_close(loss, grid(points).square().sum())
    torch.testing.assert_close(g, g_ref)
