"""Chapter 04: GELU and trilinear backward, against autograd of float64 references."""

import pytest
import torch
import torch.nn.functional as Fn

from coursekit.build import load_python
from coursekit.testing import TOLERANCE, assert_close, poisoned_empty

CHAPTER = "04"


@pytest.fixture(scope="module")
def ref(chapter_source):
    """04_backward/reference.py: the op in plain PyTorch, and its gradients by autograd in float64."""
    return load_python(chapter_source, "reference")


def inputs(N, F, device="cpu", dtype=torch.float32, spread=1.0):
    feats = torch.randn(N, 8, F, device=device, dtype=dtype)
    points = ((torch.rand(N, 3, device=device, dtype=torch.float64) * 2 - 1) * spread).to(dtype)
    grad_out = torch.randn(N, F, device=device, dtype=dtype)
    return grad_out, feats, points


# grad_points sums 8 * F products per coordinate. Its float64 reference starts from
# the same rounded inputs, so what differs is the rounding of the sum; allow a few
# roundings more than for an elementwise result.
POINTS_TOL = {**TOLERANCE, torch.float32: 2e-5, torch.float16: 5e-3, torch.bfloat16: 4e-2}


def check_backward(ext, ref, device, dtype, N, F, spread=1.0):
    grad_out, feats, points = inputs(N, F, device, dtype, spread)
    with poisoned_empty():  # gradient elements the kernel never writes stay NaN
        grad_feats, grad_points = ext.backward(grad_out, feats, points, True, True)
    ref_feats, ref_points = ref.trilinear_grads(grad_out, feats, points)
    assert grad_feats.device == feats.device and grad_points.device == feats.device
    assert_close(grad_feats, ref_feats.to(dtype), dtype, what="grad_feats")
    assert_close(grad_points, ref_points.to(dtype), dtype, what="grad_points", tol=POINTS_TOL[dtype])


SIZES = [(1, 1), (3, 40), (2000, 67), (300, 256), (64, 1000)]


def test_poisoning_reaches_cpp():
    # at::empty in C++ and torch.empty in Python both call the operator aten::empty,
    # which fills new memory with NaN when deterministic algorithms and
    # fill_uninitialized_memory are on: what poisoned_empty() switches on.
    with poisoned_empty():
        assert torch.ops.aten.empty.memory_format([16]).isnan().all()


# ---------------------------------------------------------------------------- forward (as in chapter 02)


def test_forward(ext, ref, device, dtype):
    _, feats, points = inputs(500, 67, device, dtype)
    with poisoned_empty():
        out = ext.forward(feats, points)
    assert_close(out, ref.trilinear(feats.double(), points.double()).to(dtype), dtype)


# ---------------------------------------------------------------------------- trilinear backward


@pytest.mark.exercise("weight-grad")
@pytest.mark.exercise("points-grad-cpu")
@pytest.mark.parametrize("N, F", SIZES)
def test_backward_cpu(ext, ref, dtype, N, F):
    check_backward(ext, ref, "cpu", dtype, N, F)


@pytest.mark.cuda
@pytest.mark.exercise("weight-grad")
@pytest.mark.exercise("points-reduction")
@pytest.mark.parametrize("N, F", SIZES + [(20000, 256)])
def test_backward_cuda(ext, ref, device, dtype, N, F):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_backward(ext, ref, "cuda", dtype, N, F)


@pytest.mark.exercise("weight-grad")
def test_points_outside_extrapolate(ext, ref, device):
    # No clamping: outside [-1, 1] the same polynomial continues, and so do its derivatives.
    check_backward(ext, ref, device, torch.float64, 300, 20, spread=3.0)


def test_grad_feats_at_a_corner(ext, device):
    # At corner k the weights are 1 for k and 0 for the others: the whole gradient goes to feats[:, k].
    corners = torch.tensor([[(k >> 2) & 1, (k >> 1) & 1, k & 1] for k in range(8)], dtype=torch.float64) * 2 - 1
    grad_out, feats, _ = inputs(8, 5, device, torch.float64)
    grad_feats, _ = ext.backward(grad_out, feats, corners.to(device), True, False)
    expected = torch.zeros_like(grad_feats)
    for k in range(8):
        expected[k, k] = grad_out[k]
    torch.testing.assert_close(grad_feats, expected, msg="the gradient of a point at corner k belongs to corner k")


@pytest.mark.parametrize("need_feats, need_points", [(True, False), (False, True), (False, False)])
def test_only_what_is_asked(ext, ref, device, need_feats, need_points):
    grad_out, feats, points = inputs(50, 20, device, torch.float64)
    with poisoned_empty():
        grad_feats, grad_points = ext.backward(grad_out, feats, points, need_feats, need_points)
    ref_feats, ref_points = ref.trilinear_grads(grad_out, feats, points)
    assert (grad_feats is not None) == need_feats, "grad_feats must be None exactly when need_feats is False"
    assert (grad_points is not None) == need_points, "grad_points must be None exactly when need_points is False"
    if need_feats:
        assert_close(grad_feats, ref_feats.to(device), what="grad_feats")
    if need_points:
        assert_close(grad_points, ref_points.to(device), what="grad_points")


def test_gradient_shapes_match_inputs(ext, device):
    grad_out, feats, points = inputs(7, 9, device)
    grad_feats, grad_points = ext.backward(grad_out, feats, points)
    assert grad_feats.shape == feats.shape and grad_points.shape == points.shape


def test_non_contiguous_inputs(ext, ref, device):
    grad_out, feats, points = inputs(30, 16, device, torch.float64)
    expanded = torch.randn(1, 16, device=device, dtype=torch.float64).expand(30, 16)  # stride 0, as autograd makes
    transposed = grad_out.t().contiguous().t()
    sliced_feats = torch.randn(30, 8, 32, device=device, dtype=torch.float64)[:, :, ::2]
    for g, f in ((transposed, feats), (expanded, feats), (grad_out, sliced_feats)):
        grad_feats, grad_points = ext.backward(g, f, points)
        ref_feats, ref_points = ref.trilinear_grads(g, f, points)
        assert_close(grad_feats, ref_feats.to(device), what="grad_feats")
        assert_close(grad_points, ref_points.to(device), what="grad_points")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_unaligned_inputs(ext, ref, device, dtype):
    # Contiguous, but starting one element into their storage: not on a 16-byte
    # boundary, so the CUDA kernel must fall back from 16-byte packs to single elements.
    N, F = 100, 64
    grad_out = torch.randn(N * F + 1, device=device, dtype=dtype)[1:].view(N, F)
    feats = torch.randn(N * 8 * F + 1, device=device, dtype=dtype)[1:].view(N, 8, F)
    points = (torch.rand(N, 3, device=device) * 2 - 1).to(dtype)
    with poisoned_empty():
        grad_feats, grad_points = ext.backward(grad_out, feats, points)
    ref_feats, ref_points = ref.trilinear_grads(grad_out, feats, points)
    assert_close(grad_feats, ref_feats.to(dtype), dtype, what="grad_feats")
    assert_close(grad_points, ref_points.to(dtype), dtype, what="grad_points", tol=POINTS_TOL[dtype])


@pytest.mark.parametrize("N, F", [(0, 8), (8, 0), (0, 0)])
def test_empty(ext, device, N, F):
    grad_out, feats, points = inputs(N, F, device)
    grad_feats, grad_points = ext.backward(grad_out, feats, points)
    assert grad_feats.shape == (N, 8, F) and grad_points.shape == (N, 3)
    assert (grad_points == 0).all(), "with F = 0 the output does not depend on the points: zero gradient"
    assert ext.forward(feats, points).shape == (N, F)


@pytest.mark.cuda
def test_points_gradient_is_deterministic(ext, device):
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    grad_out, feats, points = inputs(5000, 1000, "cuda")
    first = ext.backward(grad_out, feats, points, False, True)[1]
    for _ in range(5):
        assert torch.equal(ext.backward(grad_out, feats, points, False, True)[1], first), \
            "grad_points differs from run to run: the reduction's order is not fixed"


@pytest.mark.cuda
def test_current_stream(ext, ref, device):
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    grad_out, feats, points = inputs(4000, 256, "cuda")
    late = torch.randn_like(feats)  # holds other values until the side stream copies feats into it
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)  # keeps the side stream busy for a few ms
        late.copy_(feats)
        grad_feats, grad_points = ext.backward(grad_out, late, points)
    torch.cuda.synchronize()
    # A kernel launched on the default stream would not wait for the copy and would read the old values.
    ref_feats, ref_points = ref.trilinear_grads(grad_out, feats, points)
    assert_close(grad_points, ref_points.float().cuda(), what="grad_points (launched on the current stream?)",
                 tol=POINTS_TOL[torch.float32])


@pytest.mark.cuda
def test_second_gpu(ext, ref, device):
    if device != "cuda" or torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    grad_out, feats, points = inputs(100, 40, "cuda:1", torch.float64)
    with torch.cuda.device(0):  # the current device is not the tensors' device: the guard must switch
        grad_feats, grad_points = ext.backward(grad_out, feats, points)
    assert grad_feats.device == feats.device
    ref_feats, ref_points = ref.trilinear_grads(grad_out, feats, points)
    assert_close(grad_feats, ref_feats.to(feats.device), what="grad_feats")
    assert_close(grad_points, ref_points.to(feats.device), what="grad_points")


def test_atomic_comparison_kernel(ext, ref, device):
    grad_out, feats, points = inputs(300, 100, device, torch.float64)
    if device == "cpu":
        with pytest.raises(RuntimeError, match="trilinear_points_grad_atomic: a CUDA-only comparison kernel"):
            ext.points_grad_atomic(grad_out, feats, points)
        return
    assert_close(ext.points_grad_atomic(grad_out, feats, points), ref.trilinear_grads(grad_out, feats, points)[1].cuda(),
                 what="grad_points (atomicAdd version)")


def _bad(device):
    g, f, p = inputs(4, 5, device)
    cases = {
        "grad-shape": (g[:, :4], f, p, r"trilinear_backward: grad_out must have shape \(N, F\) = \(4, 5\), got \[4, 4\]"),
        "grad-rank": (g[None], f, p, r"trilinear_backward: grad_out must have shape \(N, F\) = \(4, 5\), got \[1, 4, 5\]"),
        "grad-dtype": (g.double(), f, p, r"trilinear_backward: grad_out must have the dtype of feats \(Float\), got Double"),
        "feats-shape": (g, f[:, :7], p, r"trilinear: feats must have shape \(N, 8, F\), got \[4, 7, 5\]"),
        "points-shape": (g, f, p[:, :2], r"trilinear: points must have shape \(N, 3\) with N = 4 as feats, got \[4, 2\]"),
        "points-count": (g, f, p[:3], r"trilinear: points must have shape \(N, 3\) with N = 4 as feats, got \[3, 3\]"),
        "points-dtype": (g, f, p.double(), r"trilinear: points must have the dtype of feats \(Float\), got Double"),
        "integer": (g.int(), f.int(), p.int(), r"trilinear: feats must be float64, float32, float16 or bfloat16, got Int"),
    }
    if device == "cuda":
        cases["points-on-cpu"] = (g, f, p.cpu(), r"trilinear: feats and points must be on the same device, "
                                                 r"got feats on cuda:0 and points on cpu")
        cases["grad-on-cpu"] = (g.cpu(), f, p, r"trilinear_backward: grad_out must be on the device of feats "
                                               r"\(cuda:0\), got cpu")
    return cases


BAD_CASES = list(_bad("cpu")) + ["points-on-cpu", "grad-on-cpu"]


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_backward_inputs(ext, device, case):
    cases = _bad(device)
    if case not in cases:
        pytest.skip("a CPU/CUDA mix needs a GPU")
    g, f, p, message = cases[case]
    with pytest.raises(RuntimeError, match=message):
        ext.backward(g, f, p)


# ---------------------------------------------------------------------------- GELU

# Large |x| (Phi saturates at 0 or 1, phi underflows to 0), zero, tiny and ordinary values.
GELU_VALUES = torch.tensor([-30.0, -8.0, -3.0, -1.0, -1e-3, 0.0, 1e-3, 0.5, 1.0, 3.0, 8.0, 30.0])


def gelu_inputs(device, dtype):
    return torch.cat([GELU_VALUES, torch.randn(10_000) * 3]).to(device=device, dtype=dtype)


def test_gelu_forward(ext, device, dtype):
    x = gelu_inputs(device, dtype)
    with poisoned_empty():
        out = ext.gelu_forward(x)
    # torch's default GELU (approximate="none") is the exact erf form, like ours.
    assert_close(out, Fn.gelu(x.double()).to(dtype), dtype, what="gelu")


@pytest.mark.exercise("gelu-derivative")
def test_gelu_backward(ext, device, dtype):
    x = gelu_inputs(device, dtype)
    grad_out = torch.randn_like(x)
    x64 = x.double().requires_grad_()
    Fn.gelu(x64).backward(grad_out.double())  # torch's own GELU and its autograd
    with poisoned_empty():
        grad_in = ext.gelu_backward(grad_out, x)
    assert_close(grad_in, x64.grad.to(dtype), dtype, what="gelu backward")


@pytest.mark.exercise("gelu-derivative")
def test_gelu_derivative_special_values(ext, device):
    # gelu'(x) -> 0 for x -> -inf, 1/2 at 0, -> 1 for x -> +inf; 1.0833 at x = 1 (Phi(1) + phi(1)).
    x = torch.tensor([-30.0, 0.0, 1.0, 30.0], dtype=torch.float64, device=device)
    d = ext.gelu_backward(torch.ones_like(x), x)
    torch.testing.assert_close(d.cpu(), torch.tensor([0.0, 0.5, 1.0833154705876864, 1.0], dtype=torch.float64))


def test_gelu_keeps_shape_and_layout(ext, device):
    x = torch.randn(6, 5, device=device).t()
    torch.testing.assert_close(ext.gelu_forward(x), Fn.gelu(x))
    assert ext.gelu_forward(torch.empty(0, 3, device=device)).shape == (0, 3)
    assert ext.gelu_backward(torch.empty(0, 3, device=device), torch.empty(0, 3, device=device)).shape == (0, 3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_gelu_unaligned(ext, device, dtype):
    # A view starting one element into its storage: the CUDA kernel cannot use 16-byte packs.
    x = (torch.randn(10_001, device=device) * 3).to(dtype)[1:]
    grad_out = torch.randn(10_001, device=device).to(dtype)[1:]
    with poisoned_empty():
        out, grad_in = ext.gelu_forward(x), ext.gelu_backward(grad_out, x)
    x64 = x.double().requires_grad_()
    Fn.gelu(x64).backward(grad_out.double())
    assert_close(out, Fn.gelu(x.double()).to(dtype), dtype, what="gelu")
    assert_close(grad_in, x64.grad.to(dtype), dtype, what="gelu backward")


@pytest.mark.parametrize("case", ["integer", "grad-shape", "grad-dtype"])
def test_gelu_bad_inputs(ext, device, case):
    x = torch.randn(4, device=device)
    messages = {
        "integer": r"gelu: x must be float64, float32, float16 or bfloat16, got Int",
        "grad-shape": r"gelu_backward: grad_out must have the shape of x \(\[4\]\), got \[5\]",
        "grad-dtype": r"gelu_backward: grad_out must have the dtype of x \(Float\), got Double",
    }
    with pytest.raises(RuntimeError, match=messages[case]):
        if case == "integer":
            ext.gelu_forward(x.int())
        elif case == "grad-shape":
            ext.gelu_backward(torch.randn(5, device=device), x)
        else:
            ext.gelu_backward(x.double(), x)
