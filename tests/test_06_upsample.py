"""Chapter 06: bilinear resizing in three conventions, forward and backward.

PyTorch's conventions are checked against F.interpolate (float64, same inputs);
TensorFlow's legacy convention against a reference written here from the formula
and against values TensorFlow itself produced (tests/data/06_tf_legacy_golden.json,
made by 06_upsample/make_tf_golden.py).
"""

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as Fn

from coursekit import build
from coursekit.testing import TOLERANCE, assert_close, install_and_run, poisoned_empty

CHAPTER = "06"
GOLDEN = Path(__file__).parent / "data" / "06_tf_legacy_golden.json"
MODES = ["align_corners", "half_pixel", "tf_legacy"]
TORCH_MODES = {"align_corners": True, "half_pixel": False}  # mode -> F.interpolate's align_corners


@pytest.fixture(scope="module")
def up(ext, chapter_source):
    """The chapter's Python layer (upsample.py) from the folder under test."""
    return build.load_python(chapter_source, "upsample")


# ----------------------------------------------------------------------------
# An independent reference: the formula, one axis at a time, as a matrix.


def axis_matrix(n_in: int, n_out: int, mode: str, scale: float | None = None) -> torch.Tensor:
    """M (n_out, n_in) with out = M @ x along one axis, built in float64 from the formula."""
    m = torch.zeros(n_out, n_in, dtype=torch.float64)
    for d in range(n_out):
        if mode == "align_corners":
            s = d * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        elif mode == "half_pixel":
            ratio = 1 / scale if scale else n_in / n_out
            s = max((d + 0.5) * ratio - 0.5, 0.0)
        else:
            s = d * n_in / n_out
        i0 = min(math.floor(s), n_in - 1)
        i1 = min(i0 + 1, n_in - 1)
        lam = s - math.floor(s)
        m[d, i0] += 1 - lam
        m[d, i1] += lam
    return m


def reference(x: torch.Tensor, size, mode: str) -> torch.Tensor:
    """Float64 resize of (N, C, H, W) x: M_h @ x @ M_w^T."""
    mh = axis_matrix(x.shape[2], size[0], mode).to(x.device)
    mw = axis_matrix(x.shape[3], size[1], mode).to(x.device)
    return mh @ x.double() @ mw.T


def torch_reference_grad(x: torch.Tensor, grad_out: torch.Tensor, size, align_corners: bool) -> torch.Tensor:
    x64 = x.detach().double().requires_grad_()
    Fn.interpolate(x64, size=size, mode="bilinear", align_corners=align_corners).backward(grad_out.double())
    return x64.grad


# (N, C, H_in, W_in), (H_out, W_out): odd sizes, x2, non-integer ratios, down, 1 pixel, identity.
SHAPES = [
    ((2, 3, 3, 3), (5, 5)),
    ((1, 2, 7, 5), (16, 9)),
    ((2, 2, 16, 16), (5, 7)),
    ((1, 1, 1, 1), (4, 3)),
    ((1, 3, 5, 6), (1, 1)),
    ((2, 2, 4, 4), (4, 4)),
    ((1, 2, 6, 10), (11, 23)),
    ((3, 4, 32, 48), (64, 96)),
    ((1, 1, 2, 200), (3, 333)),
]
SHAPE_IDS = [f"{s[2]}x{s[3]}-to-{o[0]}x{o[1]}" for s, o in SHAPES]
CUDA_SHAPES = SHAPES + [((4, 16, 64, 64), (256, 256)), ((2, 8, 100, 130), (37, 391))]
CUDA_IDS = SHAPE_IDS + ["64x64-to-256x256", "100x130-to-37x391"]

# Backward sums up to (2 * out/in)^2 terms per input pixel; float16/bfloat16 inputs
# are rounded first, so give the reduced types a few roundings more.
GRAD_TOL = {**TOLERANCE, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def check_forward(up, device, dtype, shape, size, mode):
    x = torch.randn(shape, device=device, dtype=dtype)
    with poisoned_empty():  # every output element must be written
        out = up.upsample_bilinear(x, size, mode=mode)
    if mode in TORCH_MODES:
        ref = Fn.interpolate(x.double(), size=size, mode="bilinear", align_corners=TORCH_MODES[mode])
    else:
        ref = reference(x, size, mode)
    assert_close(out, ref.to(dtype), dtype, what=f"{mode} forward")


def check_backward(up, device, dtype, shape, size, mode, method):
    x = torch.randn(shape, device=device, dtype=dtype, requires_grad=True)
    grad_out = torch.randn(shape[:2] + size, device=device, dtype=dtype)
    with poisoned_empty():
        up.upsample_bilinear(x, size, mode=mode, backward=method).backward(grad_out)
    if mode in TORCH_MODES:
        ref = torch_reference_grad(x, grad_out, size, TORCH_MODES[mode])
    else:
        # The backward is the transpose: M_h^T @ grad_out @ M_w.
        mh = axis_matrix(shape[2], size[0], mode).to(device)
        mw = axis_matrix(shape[3], size[1], mode).to(device)
        ref = mh.T @ grad_out.double() @ mw
    assert_close(x.grad, ref.to(dtype), dtype, what=f"{mode} backward ({method})", tol=GRAD_TOL[dtype])


@pytest.mark.exercise("source-coordinate")
@pytest.mark.exercise("sample-line")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", SHAPES, ids=SHAPE_IDS)
def test_forward_cpu(up, dtype, shape, size, mode):
    check_forward(up, "cpu", dtype, shape, size, mode)


@pytest.mark.cuda
@pytest.mark.exercise("source-coordinate")
@pytest.mark.exercise("sample-line")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", CUDA_SHAPES, ids=CUDA_IDS)
def test_forward_cuda(up, device, dtype, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_forward(up, "cuda", dtype, shape, size, mode)


@pytest.mark.exercise("source-coordinate")
@pytest.mark.exercise("gather-range")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", SHAPES, ids=SHAPE_IDS)
def test_backward_cpu(up, dtype, shape, size, mode):
    check_backward(up, "cpu", dtype, shape, size, mode, "gather")


@pytest.mark.cuda
@pytest.mark.exercise("source-coordinate")
@pytest.mark.exercise("gather-range")
@pytest.mark.parametrize("method", ["gather", "scatter"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", CUDA_SHAPES, ids=CUDA_IDS)
def test_backward_cuda(up, device, dtype, shape, size, mode, method):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_backward(up, "cuda", dtype, shape, size, mode, method)


@pytest.mark.exercise("source-coordinate")
@pytest.mark.exercise("sample-line")
@pytest.mark.parametrize(
    "mode, expected",
    [
        ("align_corners", [0.0, 0.5, 1.0, 1.5, 2.0]),
        ("half_pixel", [0.0, 0.4, 1.0, 1.6, 2.0]),  # s = -0.2 clamps to 0; s = 2.2 reads pixel 2 twice
        ("tf_legacy", [0.0, 0.6, 1.2, 1.8, 2.0]),  # s = 2.4 reads pixel 2 twice
    ],
)
def test_worked_example(up, device, mode, expected):
    """The README's 3 -> 5 example: on x = [0, 1, 2] the output is the clamped source coordinate."""
    x = torch.arange(3, dtype=torch.float64, device=device).reshape(1, 1, 1, 3)
    out = up.upsample_bilinear(x, (1, 5), mode=mode)
    torch.testing.assert_close(out.flatten().cpu(), torch.tensor(expected, dtype=torch.float64))


@pytest.mark.exercise("source-coordinate")
@pytest.mark.exercise("sample-line")
@pytest.mark.parametrize("mode", MODES)
def test_tensorflow_golden(up, device, mode):
    """Values TensorFlow's tf.compat.v1.image.resize_bilinear computed (float32)."""
    doc = json.loads(GOLDEN.read_text())
    for case in doc["cases"]:
        x = torch.tensor(case["input"], device=device)
        expected = torch.tensor(case["outputs"][mode])
        out = up.upsample_bilinear(x, tuple(case["size"]), mode=mode)
        # TensorFlow blends as a + (b - a) * l, we as (1 - l) * a + l * b: a few float32 ulps apart.
        torch.testing.assert_close(out.cpu(), expected, rtol=1e-6, atol=1e-6,
                                   msg=lambda m: f"{mode}, {list(x.shape)} -> {case['size']}: {m}")


@pytest.mark.parametrize("factor", [2.0, 1.7, 0.6, (3.3, 0.5), 1.0])
@pytest.mark.parametrize("recompute", [False, True])
def test_scale_factor_like_pytorch(up, device, factor, recompute):
    """With scale_factor, PyTorch's ratio is 1/factor unless recompute_scale_factor=True."""
    x = torch.randn(2, 3, 7, 9, device=device, dtype=torch.float64)
    out = up.upsample_bilinear(x, scale_factor=factor, recompute_scale_factor=recompute)
    ref = Fn.interpolate(x, scale_factor=factor, mode="bilinear", align_corners=False,
                         recompute_scale_factor=recompute)
    assert_close(out, ref, what=f"scale_factor={factor}, recompute={recompute}")


def test_scale_factor_changes_the_ratio(up):
    """7 * 1.7 = 11.9 -> 11 pixels: ratio 1/1.7 is not 7/11, so the two calls differ."""
    x = torch.randn(1, 1, 7, 7, dtype=torch.float64)
    by_factor = up.upsample_bilinear(x, scale_factor=1.7)
    by_size = up.upsample_bilinear(x, size=(11, 11))
    assert by_factor.shape == by_size.shape == (1, 1, 11, 11)
    assert not torch.allclose(by_factor, by_size)


def test_gather_equals_scatter(up, device, dtype):
    x = torch.randn(2, 5, 13, 21, device=device, dtype=dtype, requires_grad=True)
    grad_out = torch.randn(2, 5, 40, 50, device=device, dtype=dtype)
    grads = {}
    for method in ("gather", "scatter"):
        x.grad = None
        up.upsample_bilinear(x, (40, 50), backward=method).backward(grad_out)
        grads[method] = x.grad.clone()
    assert_close(grads["scatter"], grads["gather"].double(), dtype, what="scatter vs gather", tol=GRAD_TOL[dtype])


@pytest.mark.cuda
def test_gather_is_deterministic(up, device):
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    grad_out = torch.randn(8, 32, 256, 256, device="cuda")
    first = torch.ops.ch06.upsample_bilinear2d_backward(grad_out, [64, 64], "half_pixel", "gather")
    for _ in range(5):
        again = torch.ops.ch06.upsample_bilinear2d_backward(grad_out, [64, 64], "half_pixel", "gather")
        assert torch.equal(again, first), "gather backward changed between runs"


@pytest.mark.parametrize("mode", MODES)
def test_gradcheck(up, device, mode):
    x = torch.randn(2, 2, 5, 7, device=device, dtype=torch.float64, requires_grad=True)
    for size in [(9, 4), (5, 7), (1, 13)]:
        assert torch.autograd.gradcheck(lambda t: up.upsample_bilinear(t, size, mode=mode), (x,))
        assert torch.autograd.gradgradcheck(lambda t: up.upsample_bilinear(t, size, mode=mode), (x,))


def test_opcheck(up, device):
    x = torch.randn(2, 3, 5, 6, device=device, requires_grad=True)
    for args in ([x, [9, 4], "half_pixel"], [x, [3, 11], "tf_legacy", None, None, "scatter"],
                 [x, [8, 8], "half_pixel", 1.7, 1.5]):
        torch.library.opcheck(torch.ops.ch06.upsample_bilinear2d, args)
    g = torch.randn(2, 3, 9, 4, device=device)
    torch.library.opcheck(torch.ops.ch06.upsample_bilinear2d_backward, [g, [5, 6], "align_corners", "gather"])


def test_compile_fullgraph(up, device):
    """The fake kernels let torch.compile trace through the op without a graph break."""
    x = torch.randn(2, 3, 5, 6, device=device)

    def f(t):
        return up.upsample_bilinear(t * 2, (9, 4), mode="tf_legacy").sum(dim=1)

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), f(x))


def test_non_contiguous_input(up, device):
    """channels_last and sliced inputs are copied to NCHW once; the output is NCHW."""
    x = torch.randn(2, 6, 9, 11, device=device, dtype=torch.float64)
    ref = Fn.interpolate(x, size=(17, 5), mode="bilinear", align_corners=False)
    for variant in (x.to(memory_format=torch.channels_last), x.transpose(2, 3).contiguous().transpose(2, 3)):
        out = up.upsample_bilinear(variant, (17, 5))
        assert out.is_contiguous()
        assert_close(out, ref, what="non-contiguous input")
    sliced = x[:, ::2, 1:, :]
    assert_close(up.upsample_bilinear(sliced, (17, 5)),
                 Fn.interpolate(sliced, size=(17, 5), mode="bilinear", align_corners=False), what="sliced input")


def test_non_contiguous_grad(up, device):
    x = torch.randn(2, 3, 6, 5, device=device, dtype=torch.float64, requires_grad=True)
    # sum() hands back an expanded gradient (stride 0)
    up.upsample_bilinear(x, (12, 10)).sum().backward()
    ref = torch_reference_grad(x, torch.ones(2, 3, 12, 10, dtype=torch.float64, device=device), (12, 10), False)
    assert_close(x.grad, ref, what="grad from an expanded grad_out")


@pytest.mark.parametrize("shape", [(0, 3, 4, 4), (2, 0, 4, 4)])
def test_empty_batch_or_channels(up, device, shape):
    x = torch.randn(shape, device=device, requires_grad=True)
    out = up.upsample_bilinear(x, (7, 9))
    assert out.shape == shape[:2] + (7, 9)
    out.sum().backward()
    assert x.grad.shape == shape


def _bad_op_calls(device):
    x = torch.randn(2, 3, 4, 5, device=device)
    g = torch.randn(2, 3, 8, 10, device=device)

    def op(*args):  # looked up when called: the ops exist once the extension is loaded
        return torch.ops.ch06.upsample_bilinear2d(*args)

    def bw(*args):
        return torch.ops.ch06.upsample_bilinear2d_backward(*args)

    return {
        "rank-3": (lambda: op(x[0], [8, 10], "half_pixel"),
                   r"upsample_bilinear2d: x must be 4-D \(N, C, H, W\), got shape \[3, 4, 5\]"),
        "integer": (lambda: op(x.int(), [8, 10], "half_pixel"),
                    r"upsample_bilinear2d: x must be float64, float32, float16 or bfloat16, got Int"),
        "zero-size": (lambda: op(x, [0, 10], "half_pixel"),
                      r"upsample_bilinear2d: size must be \(H, W\) with H >= 1 and W >= 1, got \[0, 10\]"),
        "empty-image": (lambda: op(x[:, :, :0], [8, 10], "half_pixel"),
                        r"upsample_bilinear2d: x must have H >= 1 and W >= 1 to interpolate from, got shape \[2, 3, 0, 5\]"),
        "unknown-mode": (lambda: op(x, [8, 10], "bicubic"),
                         r"upsample_bilinear2d: mode must be \"align_corners\", \"half_pixel\" or \"tf_legacy\", got \"bicubic\""),
        "unknown-method": (lambda: op(x, [8, 10], "half_pixel", None, None, "atomic"),
                           r"upsample_bilinear2d: backward method must be \"gather\" or \"scatter\", got \"atomic\""),
        "negative-scale": (lambda: op(x, [8, 10], "half_pixel", -2.0, 2.0),
                           r"upsample_bilinear2d: scale_h must be a finite number > 0 or None, got -2"),
        "grad-rank": (lambda: bw(g[0], [4, 5], "half_pixel", "gather"),
                      r"upsample_bilinear2d_backward: grad_out must be 4-D \(N, C, H, W\), got shape \[3, 8, 10\]"),
        "grad-input-size": (lambda: bw(g, [4, 0], "half_pixel", "gather"),
                            r"upsample_bilinear2d_backward: input_size must be \(H, W\) with H >= 1 and W >= 1, got \[4, 0\]"),
        "grad-method": (lambda: bw(g, [4, 5], "half_pixel", "sum"),
                        r"upsample_bilinear2d_backward: backward method must be \"gather\" or \"scatter\", got \"sum\""),
    }


@pytest.mark.parametrize("case", list(_bad_op_calls("cpu")))
def test_bad_op_arguments(up, device, case):
    call, message = _bad_op_calls(device)[case]
    with pytest.raises(RuntimeError, match=message):
        call()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(), r"give exactly one of size and scale_factor"),
        (dict(size=4, scale_factor=2.0), r"give exactly one of size and scale_factor"),
        (dict(size=(4, 0)), r"size must be integers >= 1, got \(4, 0\)"),
        (dict(size=(4, 5, 6)), r"size must be one value or \(H, W\), got \(4, 5, 6\)"),
        (dict(scale_factor=0.1), r"scale_factor \(0.1, 0.1\) turns input size \(4, 5\) into \(0, 0\)"),
        (dict(scale_factor=-1.0), r"scale_factor must be finite numbers > 0"),
        (dict(size=8, mode="linear"), r"mode must be one of"),
        (dict(size=8, backward="atomic"), r"backward must be one of"),
    ],
)
def test_bad_wrapper_arguments(up, kwargs, message):
    x = torch.randn(2, 3, 4, 5)
    with pytest.raises(ValueError, match="upsample_bilinear: " + message):
        up.upsample_bilinear(x, **kwargs)


@pytest.mark.cuda
def test_large_grids(up, device):
    """More planes, and more rows, than 65535 blocks cover: the grid-stride loops.

    With W_out = 1 the blocks are 32 x 8 threads. A forward thread owns 8 output
    rows, so 4.2M rows need more than 65535 blocks along y; the scatter backward
    has one thread per output row, so 600k rows do. float64: each input pixel
    here sums 200k gradient terms, and in float32 that tests rounding, not indexing.
    """
    if device != "cuda":
        pytest.skip("the CUDA launch configuration's test")
    check_forward(up, "cuda", torch.float64, (1, 1, 3, 1), (4_200_001, 1), "half_pixel")
    for shape, size in [((1, 300_000, 1, 2), (2, 3)), ((1, 1, 3, 1), (600_000, 1))]:
        check_forward(up, "cuda", torch.float64, shape, size, "half_pixel")
        check_backward(up, "cuda", torch.float64, shape, size, "half_pixel", "gather")
        check_backward(up, "cuda", torch.float64, shape, size, "half_pixel", "scatter")


@pytest.mark.cuda
def test_current_stream_and_other_gpu(up, device):
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    x = torch.randn(2, 3, 16, 16, device="cuda")
    ref = up.upsample_bilinear(x, (32, 32))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = up.upsample_bilinear(x, (32, 32))
    s.synchronize()
    assert torch.equal(out, ref)
    if torch.cuda.device_count() < 2:
        pytest.skip("a second GPU is needed for the device-guard half of this test")
    x1 = x.to("cuda:1")
    out1 = up.upsample_bilinear(x1, (32, 32))  # current device stays cuda:0
    assert out1.device == x1.device
    assert torch.equal(out1.cpu(), ref.cpu())


@pytest.mark.aot
def test_setup_py_build(tmp_path, chapter_source):
    """The ahead-of-time route: pip install --no-build-isolation ./06_upsample, then the op by name."""
    code = ("import torch, ch06_upsample; x = torch.arange(3.0).reshape(1, 1, 1, 3); "
            "print(torch.ops.ch06.upsample_bilinear2d(x, [1, 5], 'tf_legacy').flatten().tolist())")
    out = install_and_run(chapter_source, tmp_path, code)
    assert [round(v, 4) for v in json.loads(out)] == [0.0, 0.6, 1.2, 1.8, 2.0]
