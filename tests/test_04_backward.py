"""Chapter 04: GELU and trilinear backward, against autograd of float64 references."""

import pytest
import torch
import torch.nn.functional as Fn

from coursekit.testing import TOLERANCE, assert_close, poisoned_empty

CHAPTER = "04"


def reference(feats, points):
    """Trilinear forward in differentiable PyTorch (corner k at offsets (k>>2&1, k>>1&1, k&1))."""
    u, v, w = ((points + 1) / 2).unbind(1)
    out = torch.zeros(feats.shape[0], feats.shape[2], dtype=feats.dtype, device=feats.device)
    for k in range(8):
        a = u if (k >> 2) & 1 else 1 - u
        b = v if (k >> 1) & 1 else 1 - v
        c = w if k & 1 else 1 - w
        out = out + (a * b * c)[:, None] * feats[:, k]
    return out


def reference_grads(grad_out, feats, points):
    f64 = [t.detach().double().cpu() for t in (grad_out, feats, points)]
    feats64 = f64[1].requires_grad_()
    points64 = f64[2].requires_grad_()
    reference(feats64, points64).backward(f64[0])
    return feats64.grad, points64.grad


def inputs(N, F, device="cpu", dtype=torch.float32):
    feats = torch.randn(N, 8, F, device=device, dtype=dtype)
    points = (torch.rand(N, 3, device=device, dtype=torch.float64) * 2 - 1).to(dtype)
    grad_out = torch.randn(N, F, device=device, dtype=dtype)
    return grad_out, feats, points


# float16/bfloat16: grad_points sums F terms; the inputs' own rounding already
# moves the float64 answer by about that much, so allow a few roundings more.
POINTS_TOL = {**TOLERANCE, torch.float32: 2e-5, torch.float16: 5e-3, torch.bfloat16: 4e-2}


def check_backward(ext, device, dtype, N, F):
    grad_out, feats, points = inputs(N, F, device, dtype)
    with poisoned_empty():
        grad_feats, grad_points = ext.backward(grad_out, feats, points, True, True)
    ref_feats, ref_points = reference_grads(grad_out, feats, points)
    assert_close(grad_feats, ref_feats.to(dtype), dtype, what="grad_feats")
    assert_close(grad_points, ref_points.to(dtype), dtype, what="grad_points", tol=POINTS_TOL[dtype])


SIZES = [(1, 1), (3, 40), (2000, 67), (300, 256), (64, 1000)]


@pytest.mark.exercise("weight-grad")
@pytest.mark.exercise("points-grad-cpu")
@pytest.mark.parametrize("N, F", SIZES)
def test_backward_cpu(ext, dtype, N, F):
    check_backward(ext, "cpu", dtype, N, F)


@pytest.mark.cuda
@pytest.mark.exercise("weight-grad")
@pytest.mark.exercise("points-reduction")
@pytest.mark.parametrize("N, F", SIZES + [(20000, 256)])
def test_backward_cuda(ext, device, dtype, N, F):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_backward(ext, "cuda", dtype, N, F)


@pytest.mark.parametrize("need_feats, need_points", [(True, False), (False, True), (False, False)])
def test_only_what_is_asked(ext, device, need_feats, need_points):
    grad_out, feats, points = inputs(50, 20, device, torch.float64)
    grad_feats, grad_points = ext.backward(grad_out, feats, points, need_feats, need_points)
    ref_feats, ref_points = reference_grads(grad_out, feats, points)
    assert (grad_feats is not None) == need_feats and (grad_points is not None) == need_points
    if need_feats:
        assert_close(grad_feats, ref_feats.to(device), what="grad_feats")
    if need_points:
        assert_close(grad_points, ref_points.to(device), what="grad_points")


def test_gradient_shapes_match_inputs(ext, device):
    grad_out, feats, points = inputs(7, 9, device)
    grad_feats, grad_points = ext.backward(grad_out, feats, points)
    assert grad_feats.shape == feats.shape and grad_points.shape == points.shape


def test_non_contiguous_grad_out(ext, device):
    grad_out, feats, points = inputs(30, 16, device, torch.float64)
    expanded = torch.randn(1, 16, device=device, dtype=torch.float64).expand(30, 16)  # stride 0, as autograd makes
    for g in (grad_out.t().contiguous().t(), expanded):
        grad_feats, grad_points = ext.backward(g, feats, points)
        ref_feats, ref_points = reference_grads(g, feats, points)
        assert_close(grad_feats, ref_feats.to(device), what="grad_feats")
        assert_close(grad_points, ref_points.to(device), what="grad_points")


@pytest.mark.parametrize("N, F", [(0, 8), (8, 0)])
def test_empty(ext, device, N, F):
    grad_out, feats, points = inputs(N, F, device)
    grad_feats, grad_points = ext.backward(grad_out, feats, points)
    assert grad_feats.shape == (N, 8, F) and grad_points.shape == (N, 3)
    assert (grad_points == 0).all()


@pytest.mark.cuda
def test_points_gradient_is_deterministic(ext, device):
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    grad_out, feats, points = inputs(5000, 1000, "cuda")
    first = ext.backward(grad_out, feats, points, False, True)[1]
    for _ in range(5):
        assert torch.equal(ext.backward(grad_out, feats, points, False, True)[1], first)


def _bad(device):
    g, f, p = inputs(4, 5, device)
    return {
        "grad-shape": (g[:, :4], f, p, r"trilinear_backward: grad_out must have shape \(N, F\) = \(4, 5\), got \[4, 4\]"),
        "grad-dtype": (g.double(), f, p, r"trilinear_backward: grad_out must have the dtype of feats \(Float\), got Double"),
        "feats-shape": (g, f[:, :7], p, r"trilinear: feats must have shape \(N, 8, F\), got \[4, 7, 5\]"),
        "points-shape": (g, f, p[:, :2], r"trilinear: points must have shape \(N, 3\) with N = 4 as feats, got \[4, 2\]"),
        "points-dtype": (g, f, p.double(), r"trilinear: points must have the dtype of feats \(Float\), got Double"),
        "integer": (g.int(), f.int(), p.int(), r"trilinear: feats must be float64, float32, float16 or bfloat16, got Int"),
    }


@pytest.mark.parametrize("case", list(_bad("cpu")))
def test_bad_backward_inputs(ext, device, case):
    g, f, p, message = _bad(device)[case]
    with pytest.raises(RuntimeError, match=message):
        ext.backward(g, f, p)


@pytest.mark.cuda
def test_grad_out_on_another_device(ext, device):
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    g, f, p = inputs(4, 5, "cuda")
    with pytest.raises(RuntimeError, match=r"grad_out must be on the device of feats \(cuda:0\), got cpu"):
        ext.backward(g.cpu(), f, p)


# ---------------------------------------------------------------------------- GELU

GELU_VALUES = torch.tensor([-30.0, -8.0, -3.0, -1.0, -1e-3, 0.0, 1e-3, 0.5, 1.0, 3.0, 8.0, 30.0])


def gelu_inputs(device, dtype):
    return torch.cat([GELU_VALUES, torch.randn(10_000) * 3]).to(device=device, dtype=dtype)


def test_gelu_forward(ext, device, dtype):
    x = gelu_inputs(device, dtype)
    with poisoned_empty():
        out = ext.gelu_forward(x)
    assert_close(out, Fn.gelu(x.double()).to(dtype), dtype, what="gelu")


@pytest.mark.exercise("gelu-derivative")
def test_gelu_backward(ext, device, dtype):
    x = gelu_inputs(device, dtype)
    grad_out = torch.randn_like(x)
    x64 = x.double().requires_grad_()
    Fn.gelu(x64).backward(grad_out.double())  # torch's own GELU (exact erf form) and its autograd
    with poisoned_empty():
        grad_in = ext.gelu_backward(grad_out, x)
    assert_close(grad_in, x64.grad.to(dtype), dtype, what="gelu backward")


@pytest.mark.exercise("gelu-derivative")
def test_gelu_derivative_special_values(ext, device):
    x = torch.tensor([-30.0, 0.0, 30.0], dtype=torch.float64, device=device)
    d = ext.gelu_backward(torch.ones_like(x), x)
    torch.testing.assert_close(d.cpu(), torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64))


def test_gelu_keeps_shape_and_layout(ext, device):
    x = torch.randn(6, 5, device=device).t()
    torch.testing.assert_close(ext.gelu_forward(x), Fn.gelu(x))
    assert ext.gelu_forward(torch.empty(0, 3, device=device)).shape == (0, 3)


@pytest.mark.parametrize("case", ["integer", "grad-shape", "grad-dtype"])
def test_gelu_bad_inputs(ext, device, case):
    x = torch.randn(4, device=device)
    with pytest.raises(RuntimeError, match="gelu"):
        if case == "integer":
            ext.gelu_forward(x.int())
        elif case == "grad-shape":
            ext.gelu_backward(torch.randn(5, device=device), x)
        else:
            ext.gelu_backward(x.double(), x)
