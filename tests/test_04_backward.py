"""Chapter 04: GELU and trilinear backward, CPU and CUDA.

Every graded test grades one exercise (its `exercise` marker) and may rely on the rest of
the chapter being right. Gradients are compared with float64 references computed by
autograd from the same (rounded) inputs: trilinear's from `reference.py`, GELU's from
torch's own `F.gelu`. float64 results element by element at 1e-12, float16/bfloat16
results to within one unit in the last place (what computing in float and rounding once
gives), float32 results by relative error. Outputs start as NaN (`poisoned_empty`), so an
element a kernel never writes fails.
"""

import ast
import importlib.util
import math

import pytest
import torch
import torch.nn.functional as Fn

from coursekit import ROOT
from coursekit.build import load_python
from coursekit.testing import (TOLERANCE, assert_bitwise, assert_close, assert_finite, assert_float64, assert_memcheck_clean,
                               assert_no_data_race, assert_property, assert_rounded, expect_error, memcheck_script, mismatch,
                               poisoned_empty, ulp_of)

CHAPTER = "04"

LOW = (torch.float16, torch.bfloat16)
LOW_IDS = ["float16", "bfloat16"]

# grad_points sums 8 * F products per coordinate. Its float64 reference starts from the
# same rounded inputs, so what differs is the rounding of the sum: a few roundings more
# than an elementwise result gets (relative error of the whole tensor, float32 only).
POINTS_TOL = {**TOLERANCE, torch.float32: 2e-5}


@pytest.fixture(scope="module")
def ref(chapter_source):
    """04_backward/reference.py: the op in plain PyTorch, and its gradients by autograd in float64."""
    return load_python(chapter_source, "reference")


def inputs(N, F, device="cpu", dtype=torch.float32, spread=1.0):
    """(grad_out, feats, points): random values drawn in float64, then rounded to dtype; the
    points in [-spread, spread]."""
    grad_out = torch.randn(N, F, dtype=torch.float64).to(device, dtype)
    feats = torch.randn(N, 8, F, dtype=torch.float64).to(device, dtype)
    points = ((torch.rand(N, 3, dtype=torch.float64) * 2 - 1) * spread).to(device, dtype)
    return grad_out, feats, points


def assert_matches(out, ref64, dtype, what="output", tol32=None, tiny=None, floor=0.0, inputs=None):
    """out against the float64 reference, as strictly as `dtype` allows (`inputs(index)`: what produced out[index])."""
    assert out is not None, f"{what}: got None"
    assert out.dtype == dtype, f"{what}: dtype {out.dtype}, expected {dtype}"
    if dtype == torch.float64:
        assert_float64(out, ref64, what=what, floor=floor, inputs=inputs)
    elif dtype in LOW:
        assert_rounded(out, ref64, tiny=tiny, what=what, inputs=inputs)
    else:
        assert_close(out, ref64.to(dtype), dtype, what=what, tol=tol32, inputs=inputs)


def check_backward(ext, ref, grad_out, feats, points, need_feats=True, need_points=True, what=""):
    """Run the backward on these inputs and compare each gradient asked for with autograd of reference.py."""
    dtype = feats.dtype
    with poisoned_empty():  # gradient elements the kernel never writes stay NaN
        grad_feats, grad_points = ext.backward(grad_out, feats, points, need_feats, need_points)
    ref_feats, ref_points = ref.trilinear_grads(grad_out, feats, points)
    assert (grad_feats is not None) == need_feats, "grad_feats must be None exactly when need_feats is False"
    assert (grad_points is not None) == need_points, "grad_points must be None exactly when need_points is False"
    if need_feats:
        assert grad_feats.device == feats.device, f"grad_feats on {grad_feats.device}, expected {feats.device}"
        # One product w_k * grad_out rounded once: correctly rounded down to the smallest normal number.
        assert_matches(grad_feats, ref_feats, dtype, what=f"grad_feats{what}", tiny=torch.finfo(dtype).tiny,
                       inputs=lambda i: f"points[{i[0]}] = {fmt(points[i[0]])}, grad_out[{i[0]}, {i[2]}] = "
                                        f"{fmt(grad_out[i[0], i[2]])}")
    if need_points:
        assert grad_points.device == feats.device, f"grad_points on {grad_points.device}, expected {feats.device}"
        # A sum whose terms may cancel (exactly, when every corner holds the same features): its
        # rounding is relative to the size of the terms, 1e-5 of the largest sum of |terms| at least.
        terms = (grad_out.detach().double().abs().cpu()[:, None, :] * feats.detach().double().abs().cpu()).sum((1, 2))
        floor = 1e-5 * terms.max().item() if terms.numel() else 0.0
        assert_matches(grad_points, ref_points, dtype, what=f"grad_points{what}", tol32=POINTS_TOL[dtype], floor=floor,
                       inputs=lambda i: f"points[{i[0]}] = {fmt(points[i[0]])}, a sum over f of grad_out[{i[0]}, f] "
                                        f"times feats[{i[0]}, :, f]")


def fmt(t: torch.Tensor) -> str:
    """A few values, short: [0.25, -1, 0.3333]."""
    return "[" + ", ".join(f"{v:.4g}" for v in t.detach().double().cpu().flatten().tolist()) + "]"


def only_cuda(device):
    if device != "cuda":
        pytest.skip("a test of the CUDA kernel")


# (N, F): one cube and one feature; F < 32; F a multiple of every pack width; F not a
# multiple of 32 (nor of a pack); N not a multiple of the rows in a block; F > 256, the
# widest block, with and without packs; F = 4, rows of 1, 2 and 4 threads on a GPU (float32,
# float64, 16-bit types: 32, 16 and 8 cubes a warp, the last warp part past N).
SIZES = [(1, 1), (1, 5), (3, 40), (13, 5), (300, 67), (64, 1000), (5, 1001), (37, 4)]
# The CUDA kernel's other launch shapes: a block of 4 and of 2 rows, several warps a row,
# more packs than threads in the row, a realistic size.
# Odd F (one value per load): rows of 5, 6 and 7 warps, the counts a reduction over a row's
# warps that halves a count that is not a power of two gets wrong.
ODD_WARPS = [(5, 151), (3, 181), (3, 213)]
CUDA_SIZES = SIZES + [(33, 256), (9, 512), (2000, 67), (7, 4104), (20000, 256)] + ODD_WARPS


def test_poisoning_reaches_cpp():
    # at::empty in C++ and torch.empty in Python both call the operator aten::empty,
    # which fills new memory with NaN when deterministic algorithms and
    # fill_uninitialized_memory are on: what poisoned_empty() switches on.
    with poisoned_empty():
        assert torch.ops.aten.empty.memory_format([16]).isnan().all()


# ---------------------------------------------------------------------------- gelu-derivative

GELU_VECTOR_BUILDS = ["avx2", "avx512", "avx512_bf16"]  # narrowest first


@pytest.fixture(params=["vector", "plain", "avx512", "avx2"])
def gelu_loops(request, ext, device):
    """The CPU GELU has two kinds of loop: the vector ones (AVX2, AVX-512, AVX-512 with
    AVX512_BF16: the widest the CPU has) and the plain one (one value at a time, for CPUs
    without AVX2). All are graded: "plain" switches the vector loops off for the test (a CPU
    without them runs the plain loop in both), and "avx512" / "avx2" run a narrower vector build
    where the CPU has a wider one (skipped where it has not)."""
    choice = request.param
    if choice != "vector" and device != "cpu":
        pytest.skip("the plain loop and the narrower vector builds are the CPU's")
    if choice in GELU_VECTOR_BUILDS:
        widest = ext.gelu_cpu_loops("auto")
        if widest not in GELU_VECTOR_BUILDS or GELU_VECTOR_BUILDS.index(choice) >= GELU_VECTOR_BUILDS.index(widest):
            pytest.skip(f"this CPU's widest GELU loops are {widest!r}: {choice!r} is not a narrower build")
    in_use = ext.gelu_cpu_loops("auto" if choice == "vector" else choice)
    assert choice == "vector" or in_use == choice, f"gelu_cpu_loops({choice!r}) runs {in_use!r}"
    yield choice
    ext.gelu_cpu_loops("auto")


def test_gelu_cpu_loops_choices(ext):
    """gelu_cpu_loops names the loops it runs, and refuses a build the CPU cannot run."""
    widest = ext.gelu_cpu_loops("auto")
    assert widest in ["plain", *GELU_VECTOR_BUILDS]
    try:
        with expect_error(r"avx512_bf16"):  # the message lists the choices
            ext.gelu_cpu_loops("sse")
        wider = GELU_VECTOR_BUILDS[GELU_VECTOR_BUILDS.index(widest) + 1:] if widest != "plain" else GELU_VECTOR_BUILDS
        for build in wider:
            with expect_error(f"cannot run the \"{build}\" loops"):
                ext.gelu_cpu_loops(build)
        assert ext.gelu_cpu_loops("plain") == "plain"
    finally:
        assert ext.gelu_cpu_loops("auto") == widest


def test_gelu_bfloat16_rounding_instruction(ext):
    """The AVX512_BF16 build differs from the AVX-512 one only in how it rounds float to
    bfloat16 (one instruction, and the integer code where a lane is denormal): the same bits,
    save NaN payloads."""
    if ext.gelu_cpu_loops("auto") != "avx512_bf16":
        pytest.skip("this CPU has no AVX512_BF16")
    tiny = torch.finfo(torch.bfloat16).tiny
    x = torch.cat([torch.randn(1 << 20, dtype=torch.float64) * 3,  # ordinary values
                   torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan")], dtype=torch.float64),
                   torch.linspace(-4 * tiny, 4 * tiny, 999, dtype=torch.float64)]).to(torch.bfloat16)  # denormal results
    grad_out = torch.randn(x.shape, dtype=torch.float64).to(torch.bfloat16)
    got = {}
    try:
        for build in ("avx512", "avx512_bf16"):
            ext.gelu_cpu_loops(build)
            got[build] = (ext.gelu_forward(x), ext.gelu_backward(grad_out, x))
    finally:
        ext.gelu_cpu_loops("auto")
    for i, what in enumerate(("gelu_forward", "gelu_backward")):
        new, old = got["avx512_bf16"][i], got["avx512"][i]
        # NaN stays NaN in both (its payload bits differ: the instruction keeps the float's).
        assert torch.equal(new.isnan(), old.isnan()), f"{what}: NaN in different places"
        assert_bitwise(new[~new.isnan()], old[~old.isnan()], what=f"{what}, avx512_bf16 against avx512")


# Large |x| (Phi saturates at 0 or 1, phi underflows to 0), zero, tiny and ordinary values.
GELU_VALUES = [-30.0, -8.0, -3.0, -2.0186, -1.0, -0.7518, -1e-3, 0.0, 1e-3, 0.5, 1.0, 2.0186, 3.0, 8.0, 30.0]


def gelu_inputs(device, dtype, n=10_000):
    x = torch.cat([torch.tensor(GELU_VALUES, dtype=torch.float64), torch.randn(n, dtype=torch.float64) * 3])
    return x.to(device, dtype)


# float32 GELU, element by element. The vector loops' erf and exp are approximations (erf a
# rational function, exp a polynomial within about 2e-6 relative), so a float32 result is a few
# ulps from the float64 value rather than correctly rounded: ours stays within 8 ulps of
# max(|result|, scale) on 16,777,216 values of standard deviation 3 (F.gelu within 10), where scale is 1 for the
# forward and |grad_out| for the backward (whose error grows with grad_out). 16 ulps leaves room
# for any sound formula and catches an erf or exp that is off by 1e-5 (a relative-norm
# tolerance lets it through).
GELU32_ULPS = 16


def assert_gelu_float32(out, x, ref64, scale, what):
    assert out.dtype == torch.float32, f"{what}: dtype {out.dtype}, expected torch.float32"
    got, ref = out.detach().double().cpu().flatten(), ref64.detach().double().cpu().flatten()
    assert_finite(got, what)
    scale = torch.as_tensor(scale, dtype=torch.float64).flatten()
    unit = ulp_of(torch.maximum(ref.abs(), scale), torch.float32)
    if ((got - ref).abs() > GELU32_ULPS * unit).any():
        xs = x.detach().flatten()
        raise AssertionError(mismatch(what, got, ref, torch.maximum(ref.abs(), scale), torch.float32,
                                      f"are more than {GELU32_ULPS} float32 ulps from the float64 value",
                                      allowed=GELU32_ULPS * unit, unit=unit, inputs=lambda i: f"x = {xs[i[0]].item():.7g}"))


def gelu_grad_ref(grad_out, x):
    """grad_out * gelu'(x) in float64, by autograd of torch's own GELU (exact form, approximate="none")."""
    x64 = x.detach().double().cpu().requires_grad_()
    Fn.gelu(x64).backward(grad_out.detach().double().cpu())
    return x64.grad


@pytest.mark.exercise("gelu-derivative")
def test_gelu_backward_float64(ext, device, gelu_loops):
    """float64 element by element: every constant and every step of gelu'(x) in T, not float."""
    x = gelu_inputs(device, torch.float64)
    grad_out = torch.randn_like(x)
    with poisoned_empty():
        grad_in = ext.gelu_backward(grad_out, x)
    assert_float64(grad_in, gelu_grad_ref(grad_out, x), what="gelu_backward, float64")


@pytest.mark.exercise("gelu-derivative")
@pytest.mark.parametrize("dtype", LOW, ids=LOW_IDS)
def test_gelu_backward_rounds_once(ext, device, dtype, gelu_loops):
    """float16/bfloat16: gelu'(x) computed in float and the product rounded once, within 1 ulp."""
    x = gelu_inputs(device, dtype)
    grad_out = (torch.randn(x.shape, dtype=torch.float64) * 4).to(device, dtype)
    with poisoned_empty():
        grad_in = ext.gelu_backward(grad_out, x)
    assert_property(grad_in.dtype, dtype, "dtype", "gelu_backward")
    assert_rounded(grad_in, gelu_grad_ref(grad_out, x), what=f"gelu_backward, {dtype}")


@pytest.mark.exercise("gelu-derivative")
def test_gelu_backward_float32(ext, device, gelu_loops):
    x = gelu_inputs(device, torch.float32)
    grad_out = torch.randn_like(x)
    with poisoned_empty():
        grad_in = ext.gelu_backward(grad_out, x)
    ref = gelu_grad_ref(grad_out, x)
    assert_close(grad_in, ref.float(), torch.float32, what="gelu_backward, float32")
    assert_gelu_float32(grad_in, x, ref, grad_out.double().abs().cpu(), what="gelu_backward, float32")


@pytest.mark.exercise("gelu-derivative")
def test_gelu_derivative_special_values(ext, device, gelu_loops):
    # gelu'(x) -> 0 for x -> -inf, 1/2 at 0, -> 1 for x -> +inf; Phi(1) + phi(1) at x = 1; its
    # minimum, 0, near x = -0.7518; Phi(-1) - phi(-1) at x = -1.
    x = torch.tensor([-30.0, 0.0, 1.0, 30.0, -1.0], dtype=torch.float64, device=device)
    d = ext.gelu_backward(torch.ones_like(x), x)
    expected = torch.tensor([0.0, 0.5, 1.0833154705876864, 1.0, -0.0833154705876863], dtype=torch.float64)
    assert_float64(d, expected, what="gelu'(x) at x = -30, 0, 1, 30, -1")


# ---------------------------------------------------------------------------- weight-grad


@pytest.mark.exercise("weight-grad")
@pytest.mark.parametrize("spread", [1.0, 3.0], ids=["inside", "outside"])
def test_weight_grad_float64(ext, ref, device, spread):
    """grad_points in float64 element by element; outside [-1, 1] the same polynomial continues (no clamping)."""
    check_backward(ext, ref, *inputs(300, 20, device, torch.float64, spread), need_feats=False,
                   what=f" (points in [-{spread:g}, {spread:g}])")


@pytest.mark.exercise("weight-grad")
@pytest.mark.parametrize("corner", range(8))
def test_weight_grad_each_corner(ext, ref, device, corner):
    """Only corner k's features non-zero: grad_points then shows dw_k/du, dw_k/dv, dw_k/dw alone."""
    grad_out, feats, points = inputs(50, 12, device, torch.float64, spread=1.5)
    mask = torch.zeros(1, 8, 1, dtype=torch.float64, device=device)
    mask[0, corner] = 1
    bits = ((corner >> 2) & 1, (corner >> 1) & 1, corner & 1)
    check_backward(ext, ref, grad_out, feats * mask, points, need_feats=False,
                   what=f" with only corner {corner} (offsets {bits} along x, y, z) non-zero")


@pytest.mark.exercise("weight-grad")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_weight_grad_on_the_lattice(ext, ref, device, dtype):
    """Points on the lattice {-2, -1, -0.5, 0, 0.5, 1, 2}^3: the centre, faces, edges and corners of
    the cube (weights exactly 0 or 1; at x = 0, u = 1/2 = 1 - u) and points beyond it. A sign or
    factor chosen by comparing values instead of by the corner's bits, or a derivative written as
    the weight divided by a factor, goes wrong exactly there."""
    values = torch.tensor([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0], dtype=torch.float64)
    points = torch.cartesian_prod(values, values, values).to(device, dtype)
    N = points.shape[0]
    grad_out = torch.randn(N, 6, dtype=torch.float64).to(device, dtype)
    feats = torch.randn(N, 8, 6, dtype=torch.float64).to(device, dtype)
    check_backward(ext, ref, grad_out, feats, points, need_feats=False, what=" (points on the lattice)")


@pytest.mark.exercise("weight-grad")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("corner", range(8))
def test_weight_grad_to_rounding(ext, ref, device, dtype, corner):
    """One corner's features 1, the others 0, F = 1 and grad_out 1: each element of grad_points is
    then 1/2 times one derivative of w_k, a product of three factors with no sum around it, so it
    must match the float64 derivative to a few roundings (8 eps, relative to max(|value|, 1)). A
    derivative that is only nearly right, a finite difference say (exact in theory: w_k is linear
    in each coordinate), is off by far more here, where a sum over features hides it."""
    n = 500
    generator = torch.Generator().manual_seed(corner)
    points = ((torch.rand(n, 3, generator=generator, dtype=torch.float64) * 2 - 1) * 1.5).to(device, dtype)
    feats = torch.zeros(n, 8, 1, dtype=dtype, device=device)
    feats[:, corner] = 1
    grad_out = torch.ones(n, 1, dtype=dtype, device=device)
    _, got = ext.backward(grad_out, feats, points, False, True)
    _, want = ref.trilinear_grads(grad_out, feats, points)
    err = (got.double().cpu() - want).abs()
    bound = 8 * torch.finfo(dtype).eps * want.abs().clamp(min=1.0)
    worst = int((err / bound).flatten().argmax())
    i, d = divmod(worst, 3)
    assert bool((err <= bound).all()), (
        f"corner {corner}, {dtype}: grad_points[{i}, {d}] = {got[i, d].item():.17g}, the float64 derivative "
        f"{want[i, d].item():.17g} (off by {err[i, d].item():.3g}, {err[i, d].item() / bound[i, d].item():.1f} times "
        f"what a few roundings allow) at points[{i}] = {fmt(points[i])}: compute each derivative exactly, as the "
        "product of the other two factors and the sign of the corner's bit")


@pytest.mark.exercise("weight-grad")
@pytest.mark.parametrize("dtype", LOW, ids=LOW_IDS)
def test_weight_grad_rounds_once(ext, ref, device, dtype):
    check_backward(ext, ref, *inputs(200, 64, device, dtype), need_feats=False)


# ---------------------------------------------------------------------------- points-grad-cpu


@pytest.mark.exercise("points-grad-cpu")
@pytest.mark.parametrize("N, F", SIZES)
def test_points_grad_cpu(ext, ref, dtype, N, F):
    check_backward(ext, ref, *inputs(N, F, "cpu", dtype))


@pytest.mark.exercise("points-grad-cpu")
@pytest.mark.parametrize("N, F", SIZES)
def test_points_grad_cpu_alone(ext, ref, N, F):
    """need_feats=False: the kernel without grad_feats, float64 element by element."""
    check_backward(ext, ref, *inputs(N, F, "cpu", torch.float64), need_feats=False)


@pytest.mark.exercise("points-grad-cpu")
def test_points_grad_cpu_past_2_31(ext, ref):
    """One cube with F = 2^28 + 8 features in float16: feats holds 8 F elements, more than 2^31, so
    the index of feature f of corner 7, k * F + f, passes 2^31 (an index held in an int wraps). The
    tensors are anonymous memory of which only the last feature is ever written: 4.5 GiB of address
    space, zero where unwritten, read without being stored (the machine fills a few pages)."""
    import mmap

    F = 2**28 + 8
    buffers = []

    def zeros(*shape):  # zero-filled by the system, allocated only where written
        buffers.append(mmap.mmap(-1, math.prod(shape) * 2, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS))
        return torch.frombuffer(buffers[-1], dtype=torch.float16).view(*shape)

    feats, grad_out = zeros(1, 8, F), zeros(1, F)
    feats[0, 7, F - 1] = 1  # corner 7, the last feature: index 7 F + F - 1 = 8 F - 1 > 2^31
    grad_out[0, F - 1] = 1
    points = torch.tensor([[0.5, -0.25, 0.0]], dtype=torch.float16)
    _, got = ext.backward(grad_out, feats, points, False, True)
    # the same single term, from a cube of one feature
    one = torch.zeros(1, 8, 1, dtype=torch.float16)
    one[0, 7, 0] = 1
    _, want = ref.trilinear_grads(torch.ones(1, 1, dtype=torch.float16), one, points)
    assert_matches(got, want, torch.float16, what="grad_points of one cube whose feats index k * F + f passes 2^31 "
                   "(corner 7, feature 2^28 + 7): is the index computed in int64_t?")


@pytest.mark.exercise("points-grad-cpu")
@pytest.mark.parametrize("dtype", LOW, ids=LOW_IDS)
@pytest.mark.parametrize("N, F", [(64, 4096), (16, 4099)])
def test_points_grad_cpu_rounds_once(ext, ref, dtype, N, F):
    """A sum of 8 F products per coordinate: summed in float16/bfloat16 it drifts by many ulps."""
    check_backward(ext, ref, *inputs(N, F, "cpu", dtype), need_feats=False)


@pytest.mark.exercise("points-grad-cpu")
@pytest.mark.parametrize("threads", [3, 4])
def test_points_grad_cpu_threads(ext, ref, threads):
    """Several threads, each with its own chunk of cubes (begin > 0): nothing may be shared between them."""
    was = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        check_backward(ext, ref, *inputs(2001, 64, "cpu", torch.float64))  # chunks of 512 cubes or more
        check_backward(ext, ref, *inputs(4001, 24, "cpu", torch.float32), need_feats=False)
    finally:
        torch.set_num_threads(was)


@pytest.mark.exercise("points-grad-cpu")
def test_points_grad_cpu_large_values(ext, ref):
    """Large features and gradients: the float64 sum keeps every digit, relative to the result's size."""
    grad_out, feats, points = inputs(40, 300, "cpu", torch.float64)
    check_backward(ext, ref, grad_out * 1e150, feats * 1e100 + 3e100, points, need_feats=False)


def near_float16_max(ref, device):
    """float16 inputs whose grad_points reach about 50000, near float16's largest value (65504):
    the sums before the chain rule's final 1/2 are about 100000, which float16 cannot hold."""
    grad_out, feats, points = inputs(40, 300, "cpu", torch.float64)
    _, grad_points = ref.trilinear_grads(grad_out, feats, points)
    grad_out = grad_out * (50000 / grad_points.abs().max().item())
    return tuple(t.to(device, torch.float16) for t in (grad_out, feats, points))


@pytest.mark.exercise("points-grad-cpu")
def test_points_grad_cpu_near_float16_max(ext, ref):
    """Rounded to float16 before the final 1/2, the largest sums overflow to inf; halved first, they fit."""
    check_backward(ext, ref, *near_float16_max(ref, "cpu"), need_feats=False, what=" (float16, near its largest value)")


def nonfinite_inputs(device, dtype):
    """Inputs where skipping work that "cannot matter" changes the result: 0 * inf and 0 * NaN are
    NaN, so a gradient skipped where grad_out is 0, or where a corner's derivative or weight is 0
    (a point on a face or a corner of its cube), no longer shows the inf or NaN that PyTorch's
    autograd propagates (and that anomaly detection looks for). Elsewhere, exact zeros in grad_out."""
    grad_out, feats, points = inputs(24, 6, "cpu", torch.float64)
    inf, nan = float("inf"), float("nan")
    grad_out[6:, ::3] = 0                                           # plain rows with exact zeros
    grad_out[0, 1], feats[0, 3, 1] = 0, inf                          # nothing flows back, but 0 * inf
    points[1, 1], feats[1, 0, 2] = 1.0, nan                          # on a face: some derivatives are 0
    points[2], feats[2, 5, 0], grad_out[2, 0] = torch.tensor([-1.0, 1.0, 0.5]), -inf, 0
    points[3], grad_out[3, 4] = torch.tensor([1.0, 1.0, 1.0]), nan   # a corner: 7 weights are 0
    points[4], feats[4, 6, 3] = torch.tensor([0.0, -1.0, 1.0]), inf  # an edge, an inf feature
    feats[5], grad_out[5, 2], grad_out[5, 4] = 0, nan, inf           # corner sums of exactly 0 (zero features)
    return tuple(t.to(device, dtype) for t in (grad_out, feats, points))


def check_nonfinite(ext, ref, device, dtype):
    grad_out, feats, points = nonfinite_inputs(device, dtype)
    with poisoned_empty():
        grad_feats, grad_points = ext.backward(grad_out, feats, points, True, True)
    ref_feats, ref_points = ref.trilinear_grads(grad_out, feats, points)
    for name, got, want in (("grad_points", grad_points, ref_points), ("grad_feats", grad_feats, ref_feats)):
        got, want = got.detach().cpu().double(), want.detach().cpu().double()
        wrong = (got.isnan() != want.isnan()) | (got.isinf() != want.isinf())
        assert not wrong.any(), (
            f"{name}, {dtype}: {int(wrong.sum())} elements differ from autograd of the reference in being NaN or "
            f"inf, first at {[i.tolist() for i in wrong.nonzero()[:3]]} (got {got[wrong][:3].tolist()}, autograd "
            f"gives {want[wrong][:3].tolist()}); 0 * inf and 0 * NaN are NaN: sum every term, skip none")
        finite = want[want.isfinite()]
        scale = max(1.0, finite.abs().max().item()) if finite.numel() else 1.0  # sums may cancel: relative to the largest
        tol = 1e-5 if dtype == torch.float32 else 1e-12
        torch.testing.assert_close(got, want, equal_nan=True, rtol=tol, atol=tol * scale,
                                   msg=lambda m: f"{name}, {dtype}: {m}")


@pytest.mark.exercise("points-grad-cpu")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_points_grad_cpu_nonfinite(ext, ref, dtype):
    check_nonfinite(ext, ref, "cpu", dtype)


# ---------------------------------------------------------------------------- points-reduction (CUDA)


@pytest.mark.cuda
# points-reduction without a GPU: the GPU-free judge (coursekit/emulate.py) compiles the chapter's
# backward kernel and launch with the learner's reduction for the CPU and runs them thread by thread:
# the threads of a block switch only at __syncthreads() and the warp shuffles, in a shuffled order
# (a missing barrier reads a partial sum before it is written), tensors in guard-paged memory (a
# write for a row past the last cube names the thread and offset), outputs poisoned (an element
# no thread writes is an error). Each case runs twice (tensors ending, then starting, where their
# memory does), with two thread orders, and both runs must agree bit for bit.
class _Emulated:
    """The emulated judge with the extension's backward(grad_out, feats, points, need_feats, need_points);
    offsets: grad_out and feats start that many elements past a 16-byte boundary."""

    def __init__(self, module, offsets: tuple[int, int] = (0, 0)):
        self.module, self.offsets = module, offsets

    def backward(self, grad_out, feats, points, need_feats, need_points):
        # with an offset, both runs at the start of their pages: the offset then misaligns both
        placements = ((False, 1), (False, 2)) if any(self.offsets) else ((True, 1), (False, 2))
        runs = [self.module.backward(grad_out, feats, points, need_feats, need_points, at_end, seed, *self.offsets)
                for at_end, seed in placements]
        for a, b in zip(*runs):
            assert_bitwise(b, a, what="the emulated backward, run again with another thread order")
        got = iter(runs[0])
        return (next(got) if need_feats else None), (next(got) if need_points else None)


@pytest.fixture(scope="module")
def emulated(judged_source):
    from coursekit import emulate
    return _Emulated(emulate.build("04", judged_source))


@pytest.mark.exercise("points-reduction")
@pytest.mark.parametrize("N, F", SIZES + [(33, 256), (9, 512), (7, 4104)] + ODD_WARPS)
def test_points_reduction_emulated(emulated, ref, dtype, N, F):
    check_backward(emulated, ref, *inputs(N, F, "cpu", dtype))


@pytest.mark.exercise("points-reduction")
@pytest.mark.parametrize("which", ["grad_out", "feats"])
@pytest.mark.parametrize("N, F", [(5, 64), (33, 256)])
def test_points_reduction_emulated_unaligned(emulated, ref, dtype, N, F, which):
    """grad_out, or feats, one element past a 16-byte boundary (a view with an offset), the other
    tensors aligned: the launch must take the scalar path, since a GPU stops a misaligned 16-byte
    load, and so does the judge."""
    offsets = (1, 0) if which == "grad_out" else (0, 1)
    check_backward(_Emulated(emulated.module, offsets), ref, *inputs(N, F, "cpu", dtype),
                   what=f" ({which} one element past a 16-byte boundary; emulated)")


@pytest.mark.exercise("points-reduction")
def test_points_reduction_past_2_31_emulated(emulated, ref):
    """N = 2^31 / 3 + 64 cubes (F = 1, float16: 20 GiB of tensors reserved, not filled, zero but for the
    last 64 cubes) through the GPU-free judge, the launch sampled to its first block and its last 64:
    there the grad_points index 3 * n + d passes 2^31, and an index held in a 32-bit int wraps (an
    H100 holds this backward's 21.5 GB)."""
    T = 64
    N = 2**31 // 3 + T
    torch.manual_seed(0)
    grad_out, feats, points = inputs(T, 1, "cpu", torch.float16)
    hint = f"the last {T} cubes of N = {N}, where 3 * n + d passes 2^31: is the index computed in 64 bits?"
    try:
        got = emulated.module.points_grad_tail(grad_out, feats, points, N, 1)
    except RuntimeError as e:
        if "cannot reserve" in str(e):
            pytest.skip(f"this machine does not lend 20 GiB of address space: {e}")
        raise AssertionError(f"grad_points of {hint} The judge: {e}") from None
    _, ref_points = ref.trilinear_grads(grad_out, feats, points)
    assert_matches(got, ref_points, torch.float16, what=f"grad_points of {hint}")


@pytest.mark.exercise("points-reduction")
@pytest.mark.parametrize("N, F", [(3, 40), (13, 5), (9, 512)])
def test_points_reduction_emulated_alone(emulated, ref, N, F):
    check_backward(emulated, ref, *inputs(N, F, "cpu", torch.float64), need_feats=False)


@pytest.mark.exercise("points-reduction")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_points_reduction_emulated_nonfinite(emulated, ref, dtype):
    check_nonfinite(emulated, ref, "cpu", dtype)


@pytest.mark.exercise("points-reduction")
def test_points_reduction_emulated_near_float16_max(emulated, ref):
    check_backward(emulated, ref, *near_float16_max(ref, "cpu"), need_feats=False,
                   what=" (float16, near its largest value; emulated)")


@pytest.mark.exercise("points-reduction")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_points_reduction_nonfinite(ext, ref, device, dtype):
    only_cuda(device)
    check_nonfinite(ext, ref, device, dtype)


@pytest.mark.cuda
@pytest.mark.exercise("points-reduction")
@pytest.mark.parametrize("N, F", CUDA_SIZES)
def test_points_reduction(ext, ref, device, dtype, N, F):
    only_cuda(device)
    check_backward(ext, ref, *inputs(N, F, "cuda", dtype))


@pytest.mark.cuda
@pytest.mark.exercise("points-reduction")
@pytest.mark.parametrize("N, F", CUDA_SIZES)
def test_points_reduction_alone(ext, ref, device, N, F):
    """need_feats=False: the kernel without grad_feats, float64 element by element."""
    only_cuda(device)
    check_backward(ext, ref, *inputs(N, F, "cuda", torch.float64), need_feats=False)


@pytest.mark.cuda
@pytest.mark.exercise("points-reduction")
@pytest.mark.parametrize("dtype", LOW, ids=LOW_IDS)
@pytest.mark.parametrize("N, F", [(64, 4096), (40, 32768), (16, 4099)])
def test_points_reduction_rounds_once(ext, ref, device, dtype, N, F):
    """Long sums (up to 128 terms a thread and 8 warps a row): partials kept in the 16-bit type drift."""
    only_cuda(device)
    check_backward(ext, ref, *inputs(N, F, "cuda", dtype), need_feats=False)


@pytest.mark.cuda
@pytest.mark.exercise("points-reduction")
def test_points_reduction_stays_inside_its_tensors(ext, ref, device, chapter_source):
    """The launch shapes of CUDA_SIZES' small end (rows of threads without a cube in the last
    block), with and without grad_feats, under compute-sanitizer's memcheck: a write for a row
    past the last cube, or a shared-memory slot out of range, gives right values and goes unseen
    elsewhere; here it fails."""
    if device != "cuda":
        pytest.skip("a test of the CUDA kernel")
    shapes, dtypes = [(1, 1), (3, 40), (13, 5), (33, 256), (9, 512), (7, 4104)], (torch.float32, torch.float16)
    assert_memcheck_clean(memcheck_script(chapter_source, f"""
for N, F in {shapes!r}:
    for dtype in {dtypes!r}:
        g = torch.randn(N, F, device="cuda", dtype=dtype)
        feats = torch.randn(N, 8, F, device="cuda", dtype=dtype)
        points = torch.rand(N, 3, device="cuda", dtype=dtype) * 2 - 1
        for flags in ((True, True), (False, True)):
            ext.backward(g, feats, points, *flags)
"""), "the backward kernels on small shapes")
    # and the same shapes' values (a kernel that touches nothing is memcheck-clean too)
    for N, F in shapes:
        for dtype in dtypes:
            for need_feats in (True, False):
                check_backward(ext, ref, *inputs(N, F, "cuda", dtype), need_feats=need_feats,
                               what=f" (N={N}, F={F}, {dtype}, need_feats={need_feats})")


@pytest.mark.cuda
@pytest.mark.exercise("points-reduction")
def test_points_reduction_near_float16_max(ext, ref, device):
    """Rounded to float16 before the final 1/2, the largest sums overflow to inf; halved first, they fit."""
    only_cuda(device)
    check_backward(ext, ref, *near_float16_max(ref, "cuda"), need_feats=False,
                   what=" (float16, near its largest value)")


@pytest.mark.cuda
@pytest.mark.exercise("points-reduction")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("N, F", [(100, 64), (9, 2048)])
def test_points_reduction_unaligned(ext, ref, device, dtype, N, F):
    """Inputs one element into their storage: the kernel runs with one element per access (VEC = 1)."""
    only_cuda(device)
    grad_out, feats, points = inputs(N, F, "cuda", dtype)
    grad_out = torch.cat([grad_out.new_zeros(1), grad_out.flatten()])[1:].view(N, F)
    feats = torch.cat([feats.new_zeros(1), feats.flatten()])[1:].view(N, 8, F)
    check_backward(ext, ref, grad_out, feats, points)


@pytest.mark.cuda
@pytest.mark.exercise("points-reduction")
def test_points_reduction_is_deterministic(ext, ref, device):
    """The same bits on every run: the order of the additions is fixed (no atomics)."""
    only_cuda(device)
    grad_out, feats, points = inputs(5000, 1000, "cuda")
    first = ext.backward(grad_out, feats, points, False, True)[1]
    assert_close(first, ref.trilinear_grads(grad_out, feats, points)[1].float(), torch.float32,
                 what="grad_points", tol=POINTS_TOL[torch.float32])
    for _ in range(5):
        assert torch.equal(ext.backward(grad_out, feats, points, False, True)[1], first), \
            "grad_points differs from run to run: the reduction's order is not fixed"


# ---------------------------------------------------------------------------- debugging: the seeded bugs
# 04_backward/debugging/: the chapter's reduction with one seeded bug per program, fixed by -DFIXED
# (README, "Debugging a kernel"). Without a GPU the GPU-free judge runs each program with two thread
# orders: it names the kernel, block and thread of an out-of-bounds read and of a barrier not every
# thread reaches (exit status 99); a race and a read of unwritten memory show as its poison (NaN) in
# the rows they break, and the race's rows change with the thread order. With a GPU, the matching
# compute-sanitizer tool must report each bug and pass each fix.
DEBUGGING = ROOT / "04_backward" / "debugging"
SEEDED_JUDGE = {  # program: what the judge reports on stderr (exit status 99), or None: poisoned rows
    "oob_read": r"^GPU-free judge: out-of-bounds access: a read outside d_g: element 1200 \(past its end: it has "
                r"1200\), in kernel row_dot, block \(5, 0, 0\), thread \(200, 0, 0\)$",
    # (which two threads, and which access came first, depend on the thread order)
    "race": r"^GPU-free judge: a race on shared memory: thread \(\d+, 0, 0\) (reads|writes) __shared__ partial"
            r"\[\d+\], which thread \(\d+, 0, 0\) (wrote|read) since the block's start, in kernel row_dot, block "
            r"\(\d+, 0, 0\), the earlier access at race\.cu:(38|47), the later at race\.cu:(38|47)\. Nothing orders "
            r"the two: they are in different warps",
    "divergent_barrier": r"^GPU-free judge: barrier error in row_dot, block \(0, 0, 0\): thread \(0, 0, 0\) waits "
                         r"at the __syncthreads\(\) on line 45, thread \(1, 0, 0\) ended without reaching it",
    "uninit_shared": None,
    "uninit_global": None,
}
# program: (tool, what its report says). uninit_shared is not here: initcheck looks at global memory
# only, and none of the four tools reports it (results/04_backward_debugging/uninit_shared.initcheck.txt).
SEEDED_SANITIZER = {
    "oob_read": ("memcheck", r"Invalid __global__ read of size 4 bytes\s+=+\s+at row_dot\(.*\) ?\+0x\w+ in oob_read\.cu:31"
                             r"\s+=+\s+by thread \(200,0,0\) in block \(5,0,0\)"),
    "race": ("racecheck", r"Race reported between (Write|Read) access at row_dot\(.*\) ?\+0x\w+ in race\.cu:(38|47)"
                          r"\s+=+\s+and (Write|Read) access at row_dot\(.*\) ?\+0x\w+ in race\.cu:(38|47)"),
    "divergent_barrier": ("synccheck", r"Barrier error detected\. Divergent thread\(s\) in (warp|block)\.\s+=+\s+at "
                                       r"row_dot\(.*\) ?\+0x\w+ in divergent_barrier\.cu:45"),
    # (the read is inside atomicAdd: the report's first frame is CUDA's header, then a device frame)
    "uninit_global": ("initcheck", r"Uninitialized __global__ memory read of size 4 bytes\s+=+\s+at "
                                   r"atomicAdd[\s\S]*?row_dot\(.*\) ?\+0x\w+ in uninit_global\.cu:\d+"),
}


def _run_emulated(program, fixed, seed):
    import os
    import subprocess

    from coursekit import emulate
    exe = emulate.build_program(DEBUGGING / f"{program}.cu", ("FIXED",) if fixed else ())
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, COURSE_EMU_SEED=str(seed)))


def judge_program(source, kernel: str, floats: int, launch: str):
    """A small CUDA program built for the GPU-free judge: `kernel` (its first line is the file's
    second), then a main() that allocates `out`, `floats` floats, runs `launch` (say
    `k<<<2, 32>>>(out);`) and prints cudaDeviceSynchronize()'s answer. The executable's path."""
    from coursekit import emulate
    source.write_text(
        "#include <cstdio>\n" + kernel +
        "int main() {\n"
        "  float* out;\n"
        f"  cudaMalloc(&out, {floats} * sizeof(float));\n"
        f"  {launch}\n"
        "  printf(\"%s\\n\", cudaGetErrorString(cudaDeviceSynchronize()));\n"
        "  return 0;\n"
        "}\n")
    return emulate.build_program(source)


def test_judge_guards_shared_memory(tmp_path):
    """A __shared__ array is a guard-paged buffer of its own under the judge: an index one past its end
    stops the launch, naming the array, the element and the thread, instead of writing over whatever
    lies next to it."""
    import subprocess

    exe = judge_program(tmp_path / "shared_overflow.cu",
                        "__global__ void shift(float* out) {\n"
                        "  __shared__ float tile[32];\n"
                        "  tile[threadIdx.x + 1] = 1.0f;  // thread 31 writes tile[32]\n"
                        "  __syncthreads();\n"
                        "  out[threadIdx.x] = tile[threadIdx.x];\n"
                        "}\n", 32, "shift<<<1, 32>>>(out);")
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 99, f"the judge let a write past a __shared__ array pass (exit {r.returncode}):\n{r.stdout}{r.stderr}"
    assert "__shared__ tile: element 32 (past its end: it has 32)" in r.stderr and "thread (31, 0, 0)" in r.stderr, r.stderr


# Shared-memory hazards: kernel body (s: __shared__ float[128]; out: 256 floats; <<<2, 128>>>, 4 warps a
# block; w the thread's warp, t its index) -> what the judge says (None: a clean run). Each hazard is two
# accesses of one element by two threads, one a write, that no barrier orders (a warp operation too,
# for lanes of one warp): found whatever order the run gave them.
SHARED_HAZARDS = {
    # a write, then another warp's read, no barrier between (either order: a read-after-write or a
    # write-after-read, as the run's order has them)
    "missing_barrier": ("s[t] = t; out[B + t] = s[(t + 64) % 128];",
                        r"__shared__ s\[\d+\], which thread \(\d+, 0, 0\) (wrote|read) since the block's start.*"
                        r"different warps"),
    # the barrier at the end of a loop's step left out: the next step's write meets this step's read
    "loop_without_closing_barrier": ("float a = 0; for (int k = 0; k < 3; ++k) { s[t] = t + k; __syncthreads(); "
                                     "a += s[(t + 64) % 128]; } out[B + t] = a;",
                                     r"since the __syncthreads\(\) on line \d+.*different warps"),
    # two rows' first threads (warps 0 and 2) sum into one slot: a read-modify-write each
    "one_total_two_rows": ("if (t % 64 == 0) { s[0] = 0; for (int k = 0; k < 4; ++k) s[0] += k + t; out[B + t] = s[0]; }",
                           r"__shared__ s\[0\], which thread \((0|64), 0, 0\) wrote.*different warps"),
    # two warps write one slot with different values, then read it after a barrier
    "two_values_one_slot": ("if (t % 32 == 0) s[0] = w; __syncthreads(); out[B + t] = s[0];",
                            r"__shared__ s\[0\], which thread \(\d+, 0, 0\) wrote.*Which value stays"),
    # lane 0 writes, its warp's lanes read, nothing between: lanes of one warp need not run in step
    "warp_without_syncwarp": ("if (t % 32 == 0) s[w] = w; out[B + t] = s[w];",
                              r"lanes of one warp.*no __syncwarp\(\) lies between"),
    "barrier_between": ("s[t] = t; __syncthreads(); out[B + t] = s[(t + 64) % 128];", None),
    "syncwarp_between": ("if (t % 32 == 0) s[w] = w; __syncwarp(); out[B + t] = s[w];", None),
    "same_value_everywhere": ("s[0] = 7; __syncthreads(); out[B + t] = s[0];", None),
    "own_slots": ("s[t] = t; s[t] += 1; out[B + t] = s[t];", None),
    "atomics": ("if (t == 0) s[0] = 0; __syncthreads(); atomicAdd(&s[0], 1.0f); __syncthreads(); out[B + t] = s[0];",
                None),
}


@pytest.mark.parametrize("case", list(SHARED_HAZARDS))
def test_judge_finds_shared_memory_hazards(tmp_path, case):
    """Under the judge, two threads of a block touching one __shared__ element between two barriers,
    one of them writing, stop the launch naming both threads, the array, the element and the two
    lines (racecheck's finding on a GPU), in both thread orders, even where the order run gave the
    right values; what barriers, __syncwarp, one value or atomics order passes."""
    import os
    import platform
    import re
    import subprocess

    body, expected = SHARED_HAZARDS[case]
    if expected is not None and platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the judge watches shared memory on x86-64 only (the trap flag)")
    exe = judge_program(tmp_path / f"{case}.cu",
                        "__global__ void k(float* out) {\n"
                        "  __shared__ float s[128];\n"
                        "  const int t = threadIdx.x, w = t / 32, B = blockIdx.x * 128;\n"
                        f"  {body}\n"  # line 5
                        "}\n", 256, "k<<<2, 128>>>(out);")
    for seed in ("1", "2"):
        r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, COURSE_EMU_SEED=seed))
        if expected is None:
            assert r.returncode == 0, f"{case}: the judge stopped a right kernel (exit {r.returncode}):\n{r.stderr}"
        else:
            assert r.returncode == 99 and re.search(r"^GPU-free judge: a race on shared memory: thread \(\d+, 0, 0\) "
                                                    r"(reads|writes) .*" + expected, r.stderr), \
                f"{case}, thread order {seed}: exit {r.returncode}\n{r.stdout}{r.stderr}"
            assert re.search(rf"the earlier access at {case}\.cu:5, the later at {case}\.cu:5\.", r.stderr), \
                f"{case}: the report does not give the accesses' line:\n{r.stderr}"


def test_judge_builds_keep_line_numbers(monkeypatch):
    """The judge's chapter builds carry debug information (-g), as its programs do: a race on shared
    memory in a learner's kernel is reported with its two source lines (addr2line on the build), which
    a build without it would drop."""
    import torch.utils.cpp_extension as cpp

    from coursekit import emulate
    seen = {}
    monkeypatch.setattr(cpp, "load", lambda **kwargs: seen.update(kwargs))
    emulate.build("04")
    assert "-g" in seen["extra_cflags"], f"the judge's chapter build has no -g: {seen['extra_cflags']}"


OWNERS = {  # kernel body (out has 64 floats, <<<2, 32>>>) -> what the judge says (None: a clean run)
    # every lane stores the warp's sum, the same value to the same element: what a GPU does too
    "same_value_in_a_warp": ("out[blockIdx.x] = 1.0f;", None),
    "own_elements": ("out[blockIdx.x * 32 + threadIdx.x] = threadIdx.x;", None),
    "atomics": ("atomicAdd(&out[0], 1.0f);", None),
    "other_values_in_a_block": ("out[blockIdx.x] = threadIdx.x;",
                                r"a race: two threads write out element [01]: thread \(\d+, 0, 0\) of block .*another value"),
    "two_blocks_one_element": ("out[threadIdx.x] = threadIdx.x;",
                               r"a race: two threads write out element \d+: thread \(\d+, 0, 0\) of block \(0, 0, 0\), "
                               r"then thread \(\d+, 0, 0\) of block \(1, 0, 0\).*gridDim \* blockDim"),
}


@pytest.mark.parametrize("case", list(OWNERS))
def test_judge_gives_each_element_one_owner(tmp_path, case):
    """Under the judge each output element has one owner: two blocks writing one element (a loop
    whose step is too short: right values, more work), or two threads of a block writing different
    values (a race), stop the launch naming both threads; the same value from a block, and
    atomics, pass."""
    import platform
    import re
    import subprocess

    body, expected = OWNERS[case]
    if expected is not None and platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the judge watches stores on x86-64 only (the trap flag)")
    exe = judge_program(tmp_path / f"{case}.cu", f"__global__ void k(float* out) {{ {body} }}\n", 64,
                        "k<<<2, 32>>>(out);")
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    if expected is None:
        assert r.returncode == 0, f"{case}: the judge stopped a right kernel (exit {r.returncode}):\n{r.stdout}{r.stderr}"
    else:
        assert r.returncode == 99 and re.search(expected, r.stderr), f"{case}: exit {r.returncode}\n{r.stdout}{r.stderr}"


@pytest.mark.parametrize("program", list(SEEDED_JUDGE))
def test_seeded_bug_emulated(program):
    """The GPU-free judge on each seeded bug: the right kind of report, naming the kernel (and, where it
    can, the block and thread); the fixed program runs clean under both thread orders."""
    import re
    runs = [_run_emulated(program, False, seed) for seed in (1, 2)]
    expected = SEEDED_JUDGE[program]
    for r in runs:
        if expected is not None:
            assert r.returncode == 99, f"{program}: the judge let it pass (exit {r.returncode}):\n{r.stdout}{r.stderr}"
            assert re.search(expected, r.stderr.strip(), re.M), f"{program}: the judge said\n{r.stderr}"
        else:
            assert r.returncode == 1 and r.stderr == "", f"{program}: exit {r.returncode}\n{r.stdout}{r.stderr}"
            assert re.search(r"^row_dot: out\[\d\] = -?nan, expected", r.stdout, re.M), \
                f"{program}: no row holds the judge's poison:\n{r.stdout}"
    for seed in (1, 2):
        r = _run_emulated(program, True, seed)
        assert r.returncode == 0 and r.stderr == "" and "row_dot: 0 of 6 rows wrong" in r.stdout, \
            f"{program} -DFIXED under the judge (thread order {seed}): exit {r.returncode}\n{r.stdout}{r.stderr}"


@pytest.mark.cuda
@pytest.mark.parametrize("program", list(SEEDED_SANITIZER))
def test_seeded_bug_sanitizer(program, tmp_path):
    """compute-sanitizer's matching tool reports each seeded bug (file and line, and the thread where the
    tool gives one) and reports nothing on the fixed program."""
    import os
    import re
    import subprocess

    from coursekit import toolkit
    if os.environ.get("COURSE_SANITIZER"):
        pytest.skip("already running under compute-sanitizer")
    sanitizer, kit = toolkit.compute_sanitizer(), toolkit.find_toolkit()
    if sanitizer is None or kit is None:
        pytest.skip("nvcc and compute-sanitizer not found (they come with the CUDA toolkit)")
    tool, expected = SEEDED_SANITIZER[program]
    for fixed in (False, True):
        exe = tmp_path / (program + ("_fixed" if fixed else ""))
        subprocess.run([str(kit.nvcc), "-lineinfo", "-arch=native", *(["-DFIXED"] if fixed else []), "-o", str(exe),
                        f"{program}.cu"], check=True, cwd=DEBUGGING, capture_output=True)
        r = subprocess.run([sanitizer, "--tool", tool, "--error-exitcode", "99", str(exe)], capture_output=True,
                           text=True, timeout=120)
        if fixed:
            assert r.returncode == 0, f"{program} -DFIXED under {tool}: exit {r.returncode}\n{r.stdout[-3000:]}"
        else:
            assert r.returncode == 99 and re.search(expected, r.stdout), \
                f"{program} under {tool}: exit {r.returncode}\n{r.stdout[-3000:]}"


# ---------------------------------------------------------------------------- the chapter as a whole


def test_forward(ext, ref, device, dtype):
    _, feats, points = inputs(500, 67, device, dtype)
    with poisoned_empty():
        out = ext.forward(feats, points)
    assert_matches(out, ref.trilinear(feats.double().cpu(), points.double().cpu()), dtype, what="forward")


@pytest.mark.parametrize("N, F", SIZES)
def test_backward(ext, ref, device, dtype, N, F):
    check_backward(ext, ref, *inputs(N, F, device, dtype))


@pytest.mark.parametrize("N, F", [(20000, 256), (7, 4104)])
def test_backward_large(ext, ref, device, N, F):
    if device == "cpu" and N * F > 10**6:
        pytest.skip("CUDA size")
    check_backward(ext, ref, *inputs(N, F, device, torch.float32))


@pytest.mark.parametrize("dtype", LOW, ids=LOW_IDS)
def test_grad_feats_rounds_once(ext, ref, device, dtype):
    """grad_feats = w_k * grad_out: the weight in float, the product rounded once; large values."""
    grad_out, feats, points = inputs(300, 40, device, dtype)
    check_backward(ext, ref, (grad_out.double() * 50 + 100).to(dtype), feats, points, need_points=False)


@pytest.mark.parametrize("need_feats, need_points", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float16], ids=str)
def test_only_what_is_asked(ext, ref, device, dtype, need_feats, need_points):
    check_backward(ext, ref, *inputs(50, 24, device, dtype), need_feats, need_points)


def test_grad_feats_at_a_corner(ext, device):
    # At corner k the weights are 1 for k and 0 for the others: the whole gradient goes to feats[:, k].
    corners = torch.tensor([[(k >> 2) & 1, (k >> 1) & 1, k & 1] for k in range(8)], dtype=torch.float64) * 2 - 1
    grad_out, feats, _ = inputs(8, 5, device, torch.float64)
    grad_feats, _ = ext.backward(grad_out, feats, corners.to(device), True, False)
    expected = grad_out[:, None, :].expand(8, 8, 5) * 0.0  # w_k * grad_out with w_k = +0: signed zeros
    for k in range(8):
        expected[k, k] = grad_out[k]  # w_k = 1: exactly grad_out
    assert_bitwise(grad_feats, expected, what="the gradient of a point at corner k belongs to corner k")


def test_gradients_are_new_tensors(ext, device):
    grad_out, feats, points = inputs(7, 9, device)
    grad_feats, grad_points = ext.backward(grad_out, feats, points)
    assert_property(tuple(grad_feats.shape), tuple(feats.shape), "shape", "grad_feats")
    assert_property(tuple(grad_points.shape), tuple(points.shape), "shape", "grad_points")
    for name, g in (("grad_feats", grad_feats), ("grad_points", grad_points)):
        assert g.is_contiguous(), f"{name}: strides {g.stride()} for shape {tuple(g.shape)}, expected contiguous"
    inputs_storage = {t.untyped_storage().data_ptr() for t in (grad_out, feats, points)}
    assert grad_feats.untyped_storage().data_ptr() not in inputs_storage
    assert grad_points.untyped_storage().data_ptr() not in inputs_storage


def _layouts(grad_out, feats, points):
    """name -> (grad_out, feats, points): one argument in another layout (the others contiguous).

    Each strided tensor lives in a storage at least as large as its contiguous copy, so a
    kernel that reads it as if it were contiguous reads wrong values, not past the end.
    """
    g, f, p = grad_out, feats, points
    N, _, F = f.shape
    dev, dt = f.device, f.dtype

    def fresh(*shape):
        return torch.randn(*shape, dtype=torch.float64).to(dev, dt)

    flat_g = fresh(N * F + 3)
    return {
        "grad_out-transposed": (g.t().contiguous().t(), f, p),
        "grad_out-sliced": (fresh(N, 2 * F)[:, ::2], f, p),
        "grad_out-rows-sliced": (fresh(2 * N, F)[::2], f, p),
        "grad_out-offset": (fresh(N + 1, F + 3)[1:, 3:], f, p),
        "grad_out-offset-contiguous": (flat_g[3:].view(N, F), f, p),
        # out.sum().backward() hands the backward a single 1 expanded to (N, F), strides (0, 0)
        "grad_out-expanded-scalar": (flat_g[1].expand(N, F), f, p),
        "grad_out-expanded-rows": (g[:1].expand(N, F), f, p),  # stride 0 along n
        "grad_out-expanded-features": (g[:, :1].expand(N, F), f, p),  # stride 0 along f
        "feats-transposed": (g, f.transpose(0, 2).contiguous().transpose(0, 2), p),
        "feats-corner-major": (g, f.transpose(0, 1).contiguous().transpose(0, 1), p),
        "feats-sliced": (g, fresh(N, 8, 2 * F)[:, :, ::2], p),
        "feats-offset": (g, fresh(N + 1, 8, F + 3)[1:, :, 3:], p),
        "feats-offset-contiguous": (g, fresh(N * 8 * F + 1)[1:].view(N, 8, F), p),
        "feats-expanded-cube": (g, f[:1].expand(N, 8, F), p),
        "feats-expanded-corner": (g, f[:, :1].expand(N, 8, F), p),
        "feats-expanded-feature": (g, f[:, :, :1].expand(N, 8, F), p),
        "points-transposed": (g, f, p.t().contiguous().t()),
        "points-sliced": (g, f, (torch.rand(N, 6, dtype=torch.float64) * 2 - 1).to(dev, dt)[:, ::2]),
        "points-offset": (g, f, (torch.rand(3 * N + 1, dtype=torch.float64) * 2 - 1).to(dev, dt)[1:].view(N, 3)),
        "points-expanded-cube": (g, f, p[:1].expand(N, 3)),
        "points-expanded-axis": (g, f, p[:, :1].expand(N, 3)),  # x = y = z
    }


@pytest.mark.parametrize("case", list(_layouts(*inputs(2, 3))))
def test_strided_inputs(ext, ref, device, case):
    """Any strides, storage offset or stride 0, in every argument: the gradients of the values."""
    grad_out, feats, points = _layouts(*inputs(40, 24, device, torch.float64))[case]
    check_backward(ext, ref, grad_out, feats, points, what=f" ({case})")


def test_grad_out_of_a_sum(ext, ref, device):
    """The grad_out that autograd passes for loss = out.sum(): torch.ones(()).expand(N, F)."""
    _, feats, points = inputs(30, 16, device, torch.float64)
    grad_out = torch.ones((), dtype=torch.float64, device=device).expand(30, 16)
    check_backward(ext, ref, grad_out, feats, points, what=" (grad_out of out.sum())")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_unaligned_inputs(ext, ref, device, dtype):
    # Contiguous, but starting one element into their storage: not on a 16-byte
    # boundary, so the CUDA kernel must fall back from 16-byte packs to single elements.
    N, F = 100, 64
    grad_out = torch.randn(N * F + 1, device=device).to(dtype)[1:].view(N, F)
    feats = torch.randn(N * 8 * F + 1, device=device).to(dtype)[1:].view(N, 8, F)
    points = (torch.rand(N, 3, device=device) * 2 - 1).to(dtype)
    check_backward(ext, ref, grad_out, feats, points)
    check_backward(ext, ref, grad_out, feats.contiguous(), points, what=" (only grad_out unaligned)")
    check_backward(ext, ref, grad_out.contiguous(), feats, points, what=" (only feats unaligned)")


@pytest.mark.parametrize("N, F", [(0, 8), (8, 0), (0, 0)])
@pytest.mark.parametrize("need_feats, need_points", [(True, True), (True, False), (False, True)])
def test_empty(ext, device, N, F, need_feats, need_points):
    grad_out, feats, points = inputs(N, F, device)
    with poisoned_empty():
        grad_feats, grad_points = ext.backward(grad_out, feats, points, need_feats, need_points)
    if need_feats:
        assert grad_feats.shape == (N, 8, F) and grad_feats.dtype == feats.dtype and grad_feats.device == feats.device
    else:
        assert grad_feats is None
    if need_points:
        assert grad_points.shape == (N, 3) and grad_points.dtype == points.dtype
        assert (grad_points == 0).all(), "with F = 0 the output does not depend on the points: zero gradient"
    else:
        assert grad_points is None
    assert ext.forward(feats, points).shape == (N, F)


@pytest.mark.cuda
def test_current_stream(ext, ref, device):
    only_cuda(device)
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
        check_backward(ext, ref, grad_out, feats, points)


# The comparison kernels' shapes: a row of one warp, of two, of eight (several rows per block and
# one), with 16-byte packs and without (F odd, or a slice one element into its storage).
ATOMIC_SIZES = [(300, 100), (300, 67), (33, 256), (9, 1000), (5, 4104)]


@pytest.mark.parametrize("warp_reduce", [False, True], ids=["per-thread", "per-warp"])
def test_atomic_comparison_kernels(ext, ref, device, warp_reduce):
    grad_out, feats, points = inputs(300, 100, device, torch.float64)
    if device == "cpu":
        with expect_error("trilinear_points_grad_atomic: a CUDA-only comparison kernel"):
            ext.points_grad_atomic(grad_out, feats, points, warp_reduce)
        return
    what = f"grad_points (atomicAdd {'per warp' if warp_reduce else 'per thread'})"
    for N, F in ATOMIC_SIZES:
        grad_out, feats, points = inputs(N, F, device, torch.float64)
        ref_points = ref.trilinear_grads(grad_out, feats, points)[1]
        assert_float64(ext.points_grad_atomic(grad_out, feats, points, warp_reduce), ref_points, what=f"{what}, N={N} F={F}")
        g32, f32, p32 = grad_out.float(), feats.float(), points.float()
        assert_close(ext.points_grad_atomic(g32, f32, p32, warp_reduce), ref.trilinear_grads(g32, f32, p32)[1].float(),
                     torch.float32, what=f"{what}, float32, N={N} F={F}", tol=POINTS_TOL[torch.float32])
    # One element into their storage: no 16-byte packs.
    g, f, p = grad_out.float(), feats.float(), points.float()
    g, f = torch.cat([g.new_zeros(1), g.flatten()])[1:].view(g.shape), torch.cat([f.new_zeros(1), f.flatten()])[1:].view(f.shape)
    assert_close(ext.points_grad_atomic(g, f, p, warp_reduce), ref.trilinear_grads(g, f, p)[1].float(),
                 torch.float32, what=f"{what}, unaligned float32", tol=POINTS_TOL[torch.float32])
    with expect_error(r"trilinear_points_grad_atomic: float32 or float64 only, got Half"):
        ext.points_grad_atomic(grad_out.half(), feats.half(), points.half(), warp_reduce)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_gelu_cuda_emulated(emulated, dtype):
    """GELU's CUDA kernels, forward and backward, through the GPU-free judge: one element, a tail
    after the last 16-byte pack, several blocks, and inputs one element past a 16-byte boundary
    (the scalar path), each tensor at the end and at the start of its pages."""
    gen = torch.Generator().manual_seed(4)
    for numel, offset in ((1, 0), (37, 0), (4099, 0), (4099, 1)):
        x = (torch.randn(numel, dtype=torch.float64, generator=gen) * 3).to(dtype)
        grad_out = torch.randn(numel, dtype=torch.float64, generator=gen).to(dtype)
        for at_end in (True, False):
            what = (f"the CUDA gelu (emulated), {dtype}, {numel} elements" + (", one past 16 bytes" if offset else "")
                    + (", ending where its pages end" if at_end else ""))
            out = emulated.module.gelu(None, x, at_end, 1, offset)
            if dtype == torch.float32:  # element by element (see GELU32_ULPS): a few values have no norm to hide in
                assert_gelu_float32(out, x, Fn.gelu(x.double()), 1.0, what=f"{what}, forward")
            else:
                assert_matches(out, Fn.gelu(x.double()), dtype, what=f"{what}, forward")
            grad_in, ref = emulated.module.gelu(grad_out, x, at_end, 1, offset), gelu_grad_ref(grad_out, x)
            if dtype == torch.float64:
                assert_float64(grad_in, ref, what=f"{what}, backward")
            elif dtype == torch.float32:
                assert_gelu_float32(grad_in, x, ref, grad_out.double().abs(), what=f"{what}, backward")
            else:
                assert_rounded(grad_in, ref, what=f"{what}, backward")


@pytest.mark.parametrize("warp_reduce", [False, True], ids=["per-thread", "per-warp"])
def test_atomic_comparison_kernels_emulated(emulated, ref, warp_reduce):
    """The atomic comparison kernels through the GPU-free judge (atomics are plain read-modify-writes
    there): rows of one partial warp, of several, and a last block that is partial."""
    what = f"grad_points (atomicAdd {'per warp' if warp_reduce else 'per thread'}, emulated)"
    for N, F in [(3, 40), (13, 5), (9, 100)]:
        for dtype in (torch.float64, torch.float32):
            grad_out, feats, points = inputs(N, F, "cpu", dtype)
            want = ref.trilinear_grads(grad_out, feats, points)[1]
            for at_end, seed in ((True, 1), (False, 2)):
                got = emulated.module.points_grad_atomic(grad_out, feats, points, warp_reduce, at_end, seed)
                if dtype == torch.float64:
                    assert_float64(got, want, what=f"{what}, N={N} F={F}")
                else:
                    assert_close(got, want.float(), torch.float32, what=f"{what}, float32, N={N} F={F}",
                                 tol=POINTS_TOL[torch.float32])


@pytest.mark.cuda
@pytest.mark.parametrize("warp_reduce", [False, True], ids=["per-thread", "per-warp"])
def test_atomic_kernels_refuse_deterministic_mode(ext, device, warp_reduce):
    """Under torch.use_deterministic_algorithms(True) the atomic kernels raise, as PyTorch's own do."""
    only_cuda(device)
    grad_out, feats, points = inputs(64, 1000, "cuda")
    was_on, was_warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        with expect_error("trilinear_points_grad_atomic does not have a deterministic implementation",
                          what="points_grad_atomic under torch.use_deterministic_algorithms(True)"):
            ext.points_grad_atomic(grad_out, feats, points, warp_reduce)
        ext.backward(grad_out, feats, points)  # the chapter's own backward is deterministic: no complaint
        torch.use_deterministic_algorithms(True, warn_only=True)  # a warning only: the kernel runs
        assert ext.points_grad_atomic(grad_out, feats, points, warp_reduce).isfinite().all()
    finally:
        torch.use_deterministic_algorithms(was_on, warn_only=was_warn)


def test_deterministic_mode_accepts_the_chapter_kernels(ext, device):
    """The backward and GELU kernels run in a fixed order: deterministic mode lets them through."""
    grad_out, feats, points = inputs(40, 67, device)
    was_on, was_warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        ext.backward(grad_out, feats, points)
        ext.gelu_backward(grad_out, ext.gelu_forward(grad_out))
    finally:
        torch.use_deterministic_algorithms(was_on, warn_only=was_warn)


# ---------------------------------------------------------------------------- one reference for the course


def _import(path, name):
    """A module from a file, under a name of its own (not in sys.modules as `reference`)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_formulation(path):
    """The code of a reference.py's corner table, corner_weights and trilinear, without docstrings or comments."""
    found = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name in ("corner_weights", "trilinear"):
            node.body = [n for n in node.body
                         if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str))]
            found[node.name] = ast.dump(node)
        elif isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["CORNER_OFFSETS"]:
            found["CORNER_OFFSETS"] = ast.dump(node)
    return found


def test_reference_is_chapter_03s():
    """One reference formulation in the course: this chapter's reference.py is chapter 03's, statement for statement."""
    ours_path, theirs_path = ROOT / "04_backward" / "reference.py", ROOT / "03_validate" / "reference.py"
    theirs = reference_formulation(theirs_path)
    assert sorted(theirs) == ["CORNER_OFFSETS", "corner_weights", "trilinear"], f"{theirs_path}: {sorted(theirs)}"
    ours = reference_formulation(ours_path)
    for name in theirs:
        assert ours.get(name) == theirs[name], f"{ours_path}: {name} is not written as in {theirs_path}"
    ours, theirs = _import(ours_path, "ch04_reference"), _import(theirs_path, "ch03_reference")
    for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        _, feats, points = inputs(50, 7, "cpu", dtype, spread=2.0)
        assert torch.equal(ours.trilinear(feats, points), theirs.trilinear(feats, points)), f"{dtype}: results differ"


# ---------------------------------------------------------------------------- bad inputs


def _bad_backward(device):
    """name -> (grad_out, feats, points, message): one thing wrong in one argument."""
    g, f, p = inputs(4, 5, device)
    dev = str(f.device)
    go = r"trilinear_backward: grad_out must have shape \(N, F\) = \(4, 5\), got "
    go_dtype = r"trilinear_backward: grad_out must have the dtype of feats \(Float\), got "
    sf = r"trilinear: feats must have shape \(N, 8, F\), got "
    sp = r"trilinear: points must have shape \(N, 3\) with N = 4 as feats, got "
    floating = r"trilinear: feats must be float64, float32, float16 or bfloat16, got "
    rows = {
        # grad_out: every rank but 2, each of its two sizes, its dtype, its device
        "grad_out-rank-0": (g[0, 0], f, p, go + r"\[\]"),
        "grad_out-rank-1": (g[0], f, p, go + r"\[5\]"),
        "grad_out-rank-1-N": (g[:, 0], f, p, go + r"\[4\]"),
        "grad_out-rank-3": (g[..., None], f, p, go + r"\[4, 5, 1\]"),
        "grad_out-rank-3-lead": (g[None], f, p, go + r"\[1, 4, 5\]"),
        "grad_out-N-3": (g[:3], f, p, go + r"\[3, 5\]"),
        "grad_out-N-5": (torch.cat([g, g[:1]]), f, p, go + r"\[5, 5\]"),
        "grad_out-F-4": (g[:, :4], f, p, go + r"\[4, 4\]"),
        "grad_out-F-6": (torch.cat([g, g[:, :1]], 1), f, p, go + r"\[4, 6\]"),
        "grad_out-transposed-shape": (g.t(), f, p, go + r"\[5, 4\]"),
        "grad_out-double": (g.double(), f, p, go_dtype + "Double"),
        "grad_out-half": (g.half(), f, p, go_dtype + "Half"),
        "grad_out-int": (g.int(), f, p, go_dtype + "Int"),
        "grad_out-meta": (g.to("meta"), f, p,
                          rf"trilinear_backward: grad_out must be on the device of feats \({dev}\), got meta"),
        # feats: every rank but 3, the corner count, and N and F against the others
        "feats-rank-0": (g, f[0, 0, 0], p, sf + r"\[\]"),
        "feats-rank-1": (g, f[0, :, 0], p, sf + r"\[8\]"),
        "feats-rank-2": (g, f[:, :, 0], p, sf + r"\[4, 8\]"),
        "feats-rank-4": (g, f[..., None], p, sf + r"\[4, 8, 5, 1\]"),
        "feats-rank-4-lead": (g, f[None], p, sf + r"\[1, 4, 8, 5\]"),
        "feats-corners-7": (g, f[:, :7], p, sf + r"\[4, 7, 5\]"),
        "feats-corners-9": (g, torch.cat([f, f[:, :1]], 1), p, sf + r"\[4, 9, 5\]"),
        "feats-N-5": (g, torch.cat([f, f[:1]]), p,
                      r"trilinear: points must have shape \(N, 3\) with N = 5 as feats, got \[4, 3\]"),
        "feats-F-6": (g, torch.cat([f, f[..., :1]], 2), p,
                      r"trilinear_backward: grad_out must have shape \(N, F\) = \(4, 6\), got \[4, 5\]"),
        # points: every rank but 2, the count N and the width 3
        "points-rank-0": (g, f, p[0, 0], sp + r"\[\]"),
        "points-rank-1": (g, f, p[:, 0], sp + r"\[4\]"),
        "points-rank-1-3": (g, f, p[0], sp + r"\[3\]"),
        "points-rank-3": (g, f, p[..., None], sp + r"\[4, 3, 1\]"),
        "points-rank-3-lead": (g, f, p[None], sp + r"\[1, 4, 3\]"),
        "points-width-2": (g, f, p[:, :2], sp + r"\[4, 2\]"),
        "points-width-4": (g, f, torch.cat([p, p[:, :1]], 1), sp + r"\[4, 4\]"),
        "points-count-3": (g, f, p[:3], sp + r"\[3, 3\]"),
        "points-count-5": (g, f, torch.cat([p, p[:1]]), sp + r"\[5, 3\]"),
        # dtypes: the four floating types only, the same for all three
        "int32": (g.int(), f.int(), p.int(), floating + "Int"),
        "int64": (g.long(), f.long(), p.long(), floating + "Long"),
        "bool": (g > 0, f > 0, p > 0, floating + "Bool"),
        "complex64": (g.to(torch.complex64), f.to(torch.complex64), p.to(torch.complex64), floating + "ComplexFloat"),
        "float8": (g.to(torch.float8_e4m3fn), f.to(torch.float8_e4m3fn), p.to(torch.float8_e4m3fn),
                   floating + "Float8_e4m3fn"),
        "points-double": (g, f, p.double(), r"trilinear: points must have the dtype of feats \(Float\), got Double"),
        "points-half": (g, f, p.half(), r"trilinear: points must have the dtype of feats \(Float\), got Half"),
        "feats-double": (g, f.double(), p, r"trilinear: points must have the dtype of feats \(Double\), got Float"),
        # devices: one device for all, the CPU or a CUDA GPU
        "meta": (g.to("meta"), f.to("meta"), p.to("meta"), r"trilinear: tensors must be on the CPU or a CUDA GPU, got meta"),
        "points-meta": (g, f, p.to("meta"),
                        rf"trilinear: feats and points must be on the same device, got feats on {dev} and points on meta"),
        "feats-meta": (g, f.to("meta"), p,
                       rf"trilinear: feats and points must be on the same device, got feats on meta and points on {dev}"),
    }
    if device == "cuda":
        rows["grad_out-cpu"] = (g.cpu(), f, p, r"trilinear_backward: grad_out must be on the device of feats "
                                               r"\(cuda:0\), got cpu")
        rows["points-cpu"] = (g, f, p.cpu(), r"trilinear: feats and points must be on the same device, "
                                             r"got feats on cuda:0 and points on cpu")
        rows["feats-cpu"] = (g, f.cpu(), p, r"trilinear: feats and points must be on the same device, "
                                            r"got feats on cpu and points on cuda:0")
        rows["all-cpu-grad_out-cuda"] = (g, f.cpu(), p.cpu(), r"trilinear_backward: grad_out must be on the device "
                                                              r"of feats \(cpu\), got cuda:0")
    return rows


BAD_BACKWARD = list(_bad_backward("cpu")) + ["grad_out-cpu", "points-cpu", "feats-cpu", "all-cpu-grad_out-cuda"]


@pytest.mark.parametrize("case", BAD_BACKWARD)
def test_bad_backward_inputs(ext, device, case):
    """Each bad argument is refused with its message, whatever gradients are asked for."""
    rows = _bad_backward(device)
    if case not in rows:
        pytest.skip("a CPU/CUDA mix needs a GPU")
    g, f, p, message = rows[case]
    for need_feats, need_points in [(True, True), (True, False), (False, True), (False, False)]:
        with expect_error(message, what=f"backward with {case}, need_feats={need_feats}, need_points={need_points}"):
            ext.backward(g, f, p, need_feats, need_points)
    # The comparison kernels run the same checks before their own.
    for warp_reduce in (False, True):
        with expect_error(message, what=f"points_grad_atomic with {case}, warp_reduce={warp_reduce}"):
            ext.points_grad_atomic(g, f, p, warp_reduce)
    if message.startswith("trilinear: "):  # a problem with feats or points: the forward refuses it too
        with expect_error(message, what=f"forward with {case}"):
            ext.forward(f, p)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_good_inputs_pass_the_checks(ext, device, dtype):
    """The checks refuse what they must and nothing else: every floating dtype, any N and F."""
    for N, F in [(4, 5), (1, 1), (0, 3), (3, 0)]:
        grad_out, feats, points = inputs(N, F, device, dtype)
        grad_feats, grad_points = ext.backward(grad_out, feats, points)
        assert grad_feats.shape == (N, 8, F) and grad_points.shape == (N, 3)


# ---------------------------------------------------------------------------- GELU forward, layouts, checks


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_gelu_forward(ext, device, dtype, gelu_loops):
    x = gelu_inputs(device, dtype)
    with poisoned_empty():
        out = ext.gelu_forward(x)
    # torch's default GELU (approximate="none") is the exact erf form, like ours.
    assert_matches(out, Fn.gelu(x.double().cpu()), dtype, what="gelu_forward")
    if dtype == torch.float32:
        assert_gelu_float32(out, x, Fn.gelu(x.double().cpu()), 1.0, what="gelu_forward, float32")


def _gelu_layouts(x):
    """name -> a view of values shaped like x (2-D), in another layout, on a storage at least as large."""
    R, C = x.shape
    dev, dt = x.device, x.dtype

    def fresh(*shape):
        return (torch.randn(*shape, dtype=torch.float64) * 3).to(dev, dt)

    flat = fresh(R * C + 3)
    return {
        "transposed": x.t().contiguous().t(),
        "sliced": fresh(R, 2 * C)[:, ::2],
        "offset": fresh(R + 1, C + 3)[1:, 3:],
        "offset-contiguous": flat[3:].view(R, C),
        "expanded-scalar": flat[1].expand(R, C),
        "expanded-rows": x[:1].expand(R, C),
        "expanded-columns": x[:, :1].expand(R, C),
    }


@pytest.mark.parametrize("which", ["x", "grad_out"])
@pytest.mark.parametrize("case", list(_gelu_layouts(torch.zeros(2, 2))))
def test_gelu_strided_inputs(ext, device, which, case):
    x = (torch.randn(33, 40, dtype=torch.float64) * 3).to(device)
    grad_out = torch.randn(33, 40, dtype=torch.float64, device=device)
    if which == "x":
        x = _gelu_layouts(x)[case]
        with poisoned_empty():
            out = ext.gelu_forward(x)
        assert_property(tuple(out.shape), tuple(x.shape), "shape", f"gelu_forward of x {case}")
        assert_float64(out, Fn.gelu(x.cpu()), what=f"gelu_forward of x {case}")
    else:
        grad_out = _gelu_layouts(grad_out)[case]
    with poisoned_empty():
        grad_in = ext.gelu_backward(grad_out, x)
    assert_property(tuple(grad_in.shape), tuple(x.shape), "shape", f"gelu_backward with {which} {case}")
    assert_float64(grad_in, gelu_grad_ref(grad_out, x), what=f"gelu_backward with {which} {case}")


def test_gelu_keeps_shape(ext, device):
    x = torch.randn(2, 3, 4, device=device)
    assert ext.gelu_forward(x).shape == (2, 3, 4)
    assert ext.gelu_backward(torch.randn_like(x), x).shape == (2, 3, 4)
    assert ext.gelu_forward(torch.tensor(0.5, device=device)).shape == ()
    assert ext.gelu_forward(torch.empty(0, 3, device=device)).shape == (0, 3)
    assert ext.gelu_backward(torch.empty(0, 3, device=device), torch.empty(0, 3, device=device)).shape == (0, 3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_gelu_unaligned(ext, device, dtype, gelu_loops):
    # A view starting one element into its storage: the CUDA kernel cannot use 16-byte packs.
    x = (torch.randn(10_001, device=device) * 3).to(dtype)[1:]
    grad_out = torch.randn(10_001, device=device).to(dtype)[1:]
    with poisoned_empty():
        out, grad_in = ext.gelu_forward(x), ext.gelu_backward(grad_out, x)
    assert_matches(out, Fn.gelu(x.double().cpu()), dtype, what="gelu_forward")
    assert_matches(grad_in, gelu_grad_ref(grad_out, x), dtype, what="gelu_backward")


def test_gelu_fresh_pages(ext, device):
    """Outputs of 40 MiB, which the allocator takes fresh from the operating system: the CPU loops
    first have Linux map each thread's pages in one call (gelu_cpu.cpp, map_fresh_pages), then
    write every element, forward and backward."""
    if device != "cpu":
        pytest.skip("the CPU loops map their output's pages")
    n = 10 << 20
    x = torch.randn(n) * 3
    grad_out = torch.randn(n)
    out, grad_in = ext.gelu_forward(x), ext.gelu_backward(grad_out, x)
    assert_matches(out, Fn.gelu(x.double()), torch.float32, what="gelu_forward of 10 Mi values")
    assert_matches(grad_in, gelu_grad_ref(grad_out, x), torch.float32, what="gelu_backward of 10 Mi values")


def _bad_gelu(device):
    """name -> (function, args, message)."""
    x = torch.randn(2, 3, device=device)
    dev = str(x.device)
    floating = r"gelu: x must be float64, float32, float16 or bfloat16, got "
    shape = r"gelu_backward: grad_out must have the shape of x \(\[2, 3\]\), got "
    dtype = r"gelu_backward: grad_out must have the dtype of x \(Float\), got "
    rows = {
        "forward-int": ("gelu_forward", (x.int(),), floating + "Int"),
        "forward-bool": ("gelu_forward", (x > 0,), floating + "Bool"),
        "forward-complex": ("gelu_forward", (x.to(torch.complex64),), floating + "ComplexFloat"),
        "forward-float8": ("gelu_forward", (x.to(torch.float8_e5m2),), floating + "Float8_e5m2"),
        "forward-meta": ("gelu_forward", (x.to("meta"),), r"gelu: tensors must be on the CPU or a CUDA GPU, got meta"),
        "backward-int": ("gelu_backward", (x.int(), x.int()), floating + "Int"),
        "backward-x-int": ("gelu_backward", (x, x.int()), floating + "Int"),
        "backward-float8": ("gelu_backward", (x.to(torch.float8_e4m3fn), x.to(torch.float8_e4m3fn)),
                            floating + "Float8_e4m3fn"),
        "grad-rank-0": ("gelu_backward", (x[0, 0], x), shape + r"\[\]"),
        "grad-rank-1": ("gelu_backward", (x[0], x), shape + r"\[3\]"),
        "grad-rank-3": ("gelu_backward", (x[..., None], x), shape + r"\[2, 3, 1\]"),
        "grad-rank-3-lead": ("gelu_backward", (x[None], x), shape + r"\[1, 2, 3\]"),
        "grad-dim-0": ("gelu_backward", (torch.cat([x, x[:1]]), x), shape + r"\[3, 3\]"),
        "grad-dim-1": ("gelu_backward", (x[:, :2], x), shape + r"\[2, 2\]"),
        "grad-transposed-shape": ("gelu_backward", (x.t(), x), shape + r"\[3, 2\]"),
        "grad-double": ("gelu_backward", (x.double(), x), dtype + "Double"),
        "grad-half": ("gelu_backward", (x.half(), x), dtype + "Half"),
        "grad-int": ("gelu_backward", (x.int(), x), dtype + "Int"),
        "grad-meta": ("gelu_backward", (x.to("meta"), x),
                      rf"gelu_backward: grad_out must be on the device of x \({dev}\), got meta"),
        "backward-meta": ("gelu_backward", (x.to("meta"), x.to("meta")),
                          r"gelu: tensors must be on the CPU or a CUDA GPU, got meta"),
    }
    if device == "cuda":
        rows["grad-cpu"] = ("gelu_backward", (x.cpu(), x),
                            r"gelu_backward: grad_out must be on the device of x \(cuda:0\), got cpu")
        rows["x-cpu"] = ("gelu_backward", (x, x.cpu()),
                         r"gelu_backward: grad_out must be on the device of x \(cpu\), got cuda:0")
    return rows


@pytest.mark.parametrize("case", list(_bad_gelu("cpu")) + ["grad-cpu", "x-cpu"])
def test_gelu_bad_inputs(ext, device, case):
    rows = _bad_gelu(device)
    if case not in rows:
        pytest.skip("a CPU/CUDA mix needs a GPU")
    fn, args, message = rows[case]
    with expect_error(message, what=f"{fn} with {case}"):
        getattr(ext, fn)(*args)


# Last, as it is the slowest: a data race that gives right values (a `static` array, a buffer
# declared outside the lambda), which no value test sees.
@pytest.mark.exercise("points-grad-cpu")
def test_points_grad_cpu_threads_share_nothing(judged_source):
    """The CPU forward and backward under ThreadSanitizer (coursekit/races.py), their chunks on
    three threads: each task writes only its own outputs and its own locals."""
    assert_no_data_race("04", judged_source)
