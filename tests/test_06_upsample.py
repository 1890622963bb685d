"""Chapter 06: bilinear resizing in three conventions, forward and backward.

Every result is compared with a reference that shares no code with the kernels:
`axis_matrix` below, the formula of the README written in plain PyTorch (one axis
at a time, as a matrix M with out = M @ x; the backward is M^T), and for PyTorch's
two conventions also F.interpolate and its autograd. TensorFlow's legacy
convention is checked against values TensorFlow itself produced as well
(tests/data/06_tf_legacy_golden.json, made by 06_upsample/make_tf_golden.py).

How close is close enough:
  float64            every element within 1e-12 of the float64 reference (a float
                     temporary or a float ratio anywhere shows up as ~1e-8);
  float32            relative norm error (coursekit.testing.TOLERANCE);
  float16, bfloat16  every element within 1 ulp of the float64 reference
                     (assert_rounded): coordinates, weights and sums in float,
                     one rounding at the end. The reference computes the source
                     coordinates in float32 there, as the op's spec says.

Exercises: source-coordinate (the forward and everything about the conventions),
gather-backward (the gather backward on the CPU, and the range and weight
functions the GPU shares), gather-cuda (the plain CUDA gather, csrc/gather_plain.cu).
"""

import json
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as Fn

from coursekit import build
from coursekit.testing import (
    TOLERANCE,
    assert_bitwise,
    assert_finite,
    assert_memcheck_clean,
    assert_no_data_race,
    memcheck_script,
    mismatch,
    assert_property,
    assert_close,
    assert_rounded,
    expect_error,
    install_and_run,
    poisoned_empty,
)

CHAPTER = "06"
# The library allocates its outputs with aoti_torch_empty_strided (csrc/kernels.h, new_packed),
# which, unlike torch.empty, ignores fill_uninitialized_memory: poisoned_empty does not reach them.
# This asks the library itself to start every new output as NaN, in every test here and in the
# processes they start, so an element no kernel writes is an error wherever it happens.
os.environ["CH06_POISON_OUTPUTS"] = "1"
GOLDEN = Path(__file__).parent / "data" / "06_tf_legacy_golden.json"
MODES = ["align_corners", "half_pixel", "tf_legacy"]
BACKWARDS = ["gather", "scatter"]
TORCH_MODES = {"align_corners": True, "half_pixel": False}  # mode -> F.interpolate's align_corners
HALF_TYPES = [torch.float16, torch.bfloat16]
HALF_IDS = ["float16", "bfloat16"]
# The type the op computes coordinates, weights and sums in (at::opmath_type).
OPMATH = {torch.float64: torch.float64, torch.float32: torch.float32,
          torch.float16: torch.float32, torch.bfloat16: torch.float32}


@pytest.fixture(scope="module")
def up(ext, chapter_source):
    """The chapter's Python layer (upsample.py): from the folder under test, or the installed
    package's copy (tests run with --installed against the wheel)."""
    installed = getattr(ext, "upsample", None)
    if installed is not None:
        return installed
    return build.load_python(chapter_source, "upsample")


def op(*args):
    return torch.ops.ch06.upsample_bilinear2d(*args)


def bw(grad_out, input_size, mode, method, *scales):
    """The public backward op; method "gather", "scatter", or "rung:NAME" for one kernel of the ladder."""
    if method.startswith("rung:"):
        return torch.ops.ch06._upsample_bilinear2d_backward_rung(grad_out, input_size, mode, method[5:], *scales)
    return torch.ops.ch06.upsample_bilinear2d_backward(grad_out, input_size, mode, method, *scales)


def kernel_name(t, size, mode, direction="backward", method="gather", *scales):
    """The kernel of the dispatch table (csrc/dispatch.cu) that this call takes."""
    return torch.ops.ch06._upsample_bilinear2d_kernel_name(t, list(size), mode, direction, method, *scales)


# The exercise gather-cuda: the plain gather (csrc/gather_plain.cu), a rung of the ladder the
# public op never picks; its tests run it by name.
PLAIN = "rung:gather_plain"


# ----------------------------------------------------------------------------
# The reference: the formula, one axis at a time, as a matrix.


def axis_ratio(n_in: int, n_out: int, mode: str, scale: float | None, coord: torch.dtype) -> torch.Tensor:
    """The step in input pixels per output pixel, computed in `coord` (a 0-d tensor)."""
    if mode == "align_corners":  # a scale factor plays no part, as in PyTorch
        if n_out == 1:
            return torch.zeros((), dtype=coord)
        return torch.tensor(n_in - 1, dtype=coord) / torch.tensor(n_out - 1, dtype=coord)
    if scale is not None:  # PyTorch's scale_factor: the ratio is 1 / factor, computed in double
        return torch.tensor(1.0 / scale, dtype=torch.float64).to(coord)
    return torch.tensor(n_in, dtype=coord) / torch.tensor(n_out, dtype=coord)


def axis_taps(n_in: int, n_out: int, mode: str, scale: float | None = None,
              coord: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each output's two taps along one axis, i0 and i1, and the weight of i1 (float64): output d
    is (1 - lam[d]) * x[i0[d]] + lam[d] * x[i1[d]]; coordinates computed in `coord`."""
    ratio = axis_ratio(n_in, n_out, mode, scale, coord)
    d = torch.arange(n_out, dtype=coord)
    if mode == "half_pixel":
        s = (ratio * (d + 0.5) - 0.5).clamp(min=0)
    else:  # align_corners and tf_legacy scale the index itself (with different ratios)
        s = ratio * d
    f = torch.floor(s)
    i0 = f.long().clamp(0, n_in - 1)
    i1 = (i0 + 1).clamp(max=n_in - 1)
    return i0, i1, (s - f).double()


def axis_matrix(n_in: int, n_out: int, mode: str, scale: float | None = None,
                coord: torch.dtype = torch.float64) -> torch.Tensor:
    """M (n_out, n_in), float64, with out = M @ x along one axis; coordinates computed in `coord`."""
    i0, i1, lam = axis_taps(n_in, n_out, mode, scale, coord)
    m = torch.zeros(n_out, n_in, dtype=torch.float64)
    rows = torch.arange(n_out)
    m.index_put_((rows, i0), 1 - lam, accumulate=True)
    m.index_put_((rows, i1), lam, accumulate=True)  # i0 == i1 at the edge: the weights add up
    return m


def matrices(in_hw, out_hw, mode, scales=(None, None), coord=torch.float64, device="cpu"):
    if tuple(in_hw) == tuple(out_hw):  # no axis changes size: a copy, whatever the scales (PyTorch's rule)
        scales = (None, None)
    mh = axis_matrix(in_hw[0], out_hw[0], mode, scales[0], coord).to(device)
    mw = axis_matrix(in_hw[1], out_hw[1], mode, scales[1], coord).to(device)
    return mh, mw


def ref_forward(x: torch.Tensor, size, mode: str, scales=(None, None)) -> torch.Tensor:
    """float64 M_h @ x @ M_w^T, coordinates in the op's arithmetic type for x's dtype."""
    mh, mw = matrices(x.shape[2:], size, mode, scales, OPMATH[x.dtype], x.device)
    return mh @ x.detach().double() @ mw.T


def ref_backward(grad_out: torch.Tensor, input_size, mode: str, scales=(None, None)) -> torch.Tensor:
    """float64 M_h^T @ grad_out @ M_w: the transpose of the forward."""
    mh, mw = matrices(input_size, grad_out.shape[2:], mode, scales, OPMATH[grad_out.dtype], grad_out.device)
    return mh.T @ grad_out.detach().double() @ mw


def ref_backward_taps(grad_out: torch.Tensor, input_size, mode: str) -> torch.Tensor:
    """ref_backward without the matrices, for axes too long for one: each output's two taps along
    H, then along W, added into a float64 gradient (index_add_)."""
    g = grad_out.detach().double()
    coord = OPMATH[grad_out.dtype]
    (h_in, w_in), (n, c, h_out, w_out) = input_size, g.shape
    i0, i1, lam = axis_taps(h_in, h_out, mode, None, coord)
    t = torch.zeros(n, c, h_in, w_out, dtype=torch.float64)
    t.index_add_(2, i0, g * (1 - lam)[:, None])
    t.index_add_(2, i1, g * lam[:, None])
    j0, j1, mu = axis_taps(w_in, w_out, mode, None, coord)
    r = torch.zeros(n, c, h_in, w_in, dtype=torch.float64)
    r.index_add_(3, j0, t * (1 - mu))
    r.index_add_(3, j1, t * mu)
    return r


def torch_grad(x: torch.Tensor, grad_out: torch.Tensor, align_corners: bool, **kwargs) -> torch.Tensor:
    """The gradient of F.interpolate in float64, by autograd."""
    x64 = x.detach().double().requires_grad_()
    Fn.interpolate(x64, mode="bilinear", align_corners=align_corners, **kwargs).backward(grad_out.double())
    return x64.grad


def assert_close64(out: torch.Tensor, ref: torch.Tensor, what: str, tol: float = 1e-12, inputs=None) -> None:
    """float64: every element within tol * max(1, max |ref|) of the float64 reference."""
    assert out.dtype == torch.float64, f"{what}: dtype {out.dtype}, expected torch.float64"
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
    got, ref = out.detach().cpu(), ref.detach().cpu().double()
    assert_finite(got, what)
    if ref.numel() == 0:
        return
    scale = max(1.0, ref.abs().max().item())
    if (got - ref).abs().max().item() > tol * scale:
        raise AssertionError(mismatch(what, got, ref, scale, torch.float64, f"are off by more than {tol * scale:.1e}",
                                      allowed=torch.full_like(ref, tol * scale), inputs=inputs))


def check(out: torch.Tensor, ref64: torch.Tensor, what: str, tol32: float | None = None, inputs=None) -> None:
    """The dtype's own standard: see the module docstring. inputs(index): what out[index] is made of
    (taps_of gives it)."""
    if out.dtype == torch.float64:
        assert_close64(out, ref64, what, inputs=inputs)
    elif out.dtype == torch.float32:
        assert_close(out, ref64, what=what, tol=tol32, inputs=inputs)
    else:
        assert_rounded(out, ref64, what=what, inputs=inputs)


def taps_of(in_hw, out_hw, mode, scales=(None, None), backward=False):
    """inputs(index) for `check`: the rows and columns (with their weights, from the reference's
    matrices) that out[n, c, h, w] reads in the forward, or that grad_in[n, c, h, w] gathers from."""
    mh, mw = matrices(in_hw, out_hw, mode, scales)

    def taps(m: torch.Tensor) -> str:
        nz = m.nonzero().flatten().tolist()
        return "{" + ", ".join(f"{j}: {m[j].item():.4g}" for j in nz[:6]) + (", ..." if len(nz) > 6 else "") + "}"

    def inputs(idx):
        n, c, h, w = idx
        if backward:
            return f"grad_out[{n}, {c}] rows {taps(mh[:, h])} x columns {taps(mw[:, w])} ({mode})"
        return f"x[{n}, {c}] rows {taps(mh[h])} x columns {taps(mw[w])} ({mode}, source row: weight)"

    return inputs


# (N, C, H_in, W_in), (H_out, W_out): odd sizes, x2, non-integer ratios, down, 1 pixel, one axis
# kept (the whole identity is a copy that runs no kernel: test_same_size_is_a_copy_whatever_the_scale).
SHAPES = [
    ((2, 3, 3, 3), (5, 5)),
    ((1, 2, 7, 5), (16, 9)),
    ((2, 2, 16, 16), (5, 7)),
    ((1, 1, 1, 1), (4, 3)),
    ((1, 3, 5, 6), (1, 1)),
    ((2, 2, 4, 4), (4, 7)),
    ((1, 2, 6, 10), (11, 23)),
    ((3, 4, 32, 46), (64, 92)),
    ((1, 1, 2, 200), (3, 333)),
]
SHAPE_IDS = [f"{s[2]}x{s[3]}-to-{o[0]}x{o[1]}" for s, o in SHAPES]
CUDA_SHAPES = SHAPES + [((4, 16, 64, 64), (256, 256)), ((2, 8, 100, 130), (37, 391))]
CUDA_IDS = SHAPE_IDS + ["64x64-to-256x256", "100x130-to-37x391"]
# Where coordinate and weight arithmetic in float16/bfloat16 shows: long axes with
# ratios that no short mantissa holds (s = d * 101/287 up to 100), and downsampling.
# Not much longer: at s ~ 500 one float ulp of s (GPU code fuses the half-pixel
# coordinate's multiply and add, the reference does not) is already a float16 ulp
# of the output.
ROUNDING_SHAPES = [((1, 4, 9, 101), (17, 287)), ((1, 4, 121, 7), (41, 5))]
ROUNDING_IDS = ["9x101-to-17x287", "121x7-to-41x5"]
# The backward of a strong upsampling: each input pixel sums up to 32 x 32 = 1024
# gradients (x16), or about 12 x 20 at ratios that are not integers.
SUM_SHAPES = [((1, 3, 4, 5), (64, 80)), ((2, 2, 3, 7), (61, 113))]
SUM_IDS = ["4x5-to-64x80", "3x7-to-61x113"]


def check_forward(up, device, dtype, shape, size, mode):
    x = torch.randn(shape, device=device, dtype=dtype)
    with poisoned_empty():  # every output element must be written
        out = up.upsample_bilinear(x, size, mode=mode)
    ref = ref_forward(x, size, mode)
    try:
        check(out, ref, f"{mode} forward {list(shape)} -> {list(size)}", inputs=taps_of(shape[2:], size, mode))
    except AssertionError as e:
        # A near miss in float32 on a long axis is the coordinate's rounding: the same formula
        # rearranged (ratio * d + ratio / 2 - 1/2, say) rounds differently from PyTorch's.
        if dtype == torch.float32 and torch.isfinite(out).all() and \
                (out.double() - ref).norm() <= 10 * TOLERANCE[torch.float32] * ref.norm():
            raise AssertionError(f"{e}\n  a near miss, a few float32 roundings off: compute the ratio and the "
                                 "coordinate in T, in the spec's order ((d + 0.5) * ratio - 0.5 for half_pixel, "
                                 "ratio * d otherwise), as PyTorch does") from None
        raise
    if dtype == torch.float64 and mode in TORCH_MODES:
        ref = Fn.interpolate(x, size=size, mode="bilinear", align_corners=TORCH_MODES[mode])
        assert_close64(out, ref, f"{mode} forward vs F.interpolate")


def check_backward(up, device, dtype, shape, size, mode, method):
    x = torch.randn(shape, device=device, dtype=dtype, requires_grad=True)
    grad_out = torch.randn(shape[:2] + size, device=device, dtype=dtype)
    with poisoned_empty():
        up.upsample_bilinear(x, size, mode=mode, backward=method).backward(grad_out)
    check(x.grad, ref_backward(grad_out, shape[2:], mode), f"{mode} backward ({method}) {list(shape)} -> {list(size)}",
          inputs=taps_of(shape[2:], size, mode, backward=True))
    if dtype == torch.float64 and mode in TORCH_MODES:
        assert_close64(x.grad, torch_grad(x, grad_out, TORCH_MODES[mode], size=size), f"{mode} backward vs F.interpolate")


def check_backward_sums(device, dtype, shape, size, mode, method):
    """The backward op on positive gradients: long sums that do not cancel."""
    grad_out = (torch.rand(shape[:2] + size, device=device) + 0.5).to(dtype)
    with poisoned_empty():
        grad_in = bw(grad_out, list(shape[2:]), mode, method)
    assert_rounded(grad_in, ref_backward(grad_out, shape[2:], mode), what=f"{mode} backward ({method}) sums")


# ----------------------------------------------------------------------------
# The ladder (not graded): the table's choice and every rung against the reference. First in the
# file: a kernel of the ladder that is wrong fails here, before the long tests of the exercises.

# The dispatch table's names (csrc/dispatch.cu) and the CUDA kernel each one launches.
KERNEL_SYMBOLS = {
    "forward_naive": "forward_naive_kernel", "forward_rows": "forward_kernel", "forward_halve": "forward_kernel",
    "forward_double": "forward_kernel", "forward_nhwc": "forward_nhwc_kernel",
    "forward_nhwc_packs": "forward_nhwc_kernel", "forward_nhwc_rgb_x2": "forward_rgb_twice_kernel",
    "scatter": "scatter_kernel", "scatter_nhwc": "scatter_nhwc_kernel", "gather_plain": "gather_plain_kernel",
    "gather_planes": "gather_kernel", "gather_column_packs": "gather_kernel", "gather_x2": "gather_times_kernel",
    "gather_x4": "gather_times_kernel", "gather_halve": "gather_halve_kernel", "gather_nhwc": "gather_nhwc_kernel",
    "gather_nhwc_rgb_x2": "gather_times_kernel", "gather_nhwc_x2": "gather_twice_nhwc_kernel",
    "gather_nhwc_x2_tile": "gather_twice_nhwc_tile_kernel",
}
EXACT_GATHERS = {"gather_x2", "gather_x4", "gather_halve", "gather_nhwc_rgb_x2", "gather_nhwc_x2",
                 "gather_nhwc_x2_tile"}


def kernel_table() -> list[tuple[str, str, str, str]]:
    """(name, direction, auto or ladder, condition): the rows of csrc/dispatch.cu's table, in order."""
    text = torch.ops.ch06._upsample_bilinear2d_kernel_table(torch.empty(0))
    return [tuple(line.split("|")) for line in text.splitlines()]


# One case per row of the table: (what, tensor maker, size, mode, direction, method, the kernel expected).
def _nchw(*shape, dtype=torch.float32):
    return lambda: torch.randn(*shape, device="cuda", dtype=dtype)


def _nhwc(*shape, dtype=torch.float32):
    return lambda: torch.randn(*shape, device="cuda", dtype=dtype).contiguous(memory_format=torch.channels_last)


TABLE_CASES = [
    ("x2 float32", _nchw(1, 4, 16, 16), (32, 32), "half_pixel", "forward", "gather", "forward_double"),
    ("x0.5 bfloat16", _nchw(1, 4, 32, 32, dtype=torch.bfloat16), (16, 16), "tf_legacy", "forward", "gather",
     "forward_halve"),
    ("x1.5", _nchw(1, 4, 16, 16), (24, 24), "half_pixel", "forward", "gather", "forward_rows"),
    ("x2 align_corners", _nchw(1, 4, 16, 16), (32, 32), "align_corners", "forward", "gather", "forward_rows"),
    ("channels-last C 16", _nhwc(1, 16, 8, 8), (16, 16), "half_pixel", "forward", "gather", "forward_nhwc_packs"),
    ("channels-last C 5", _nhwc(1, 5, 8, 8), (16, 16), "half_pixel", "forward", "gather", "forward_nhwc"),
    ("channels-last RGB x2", _nhwc(1, 3, 8, 8), (16, 16), "half_pixel", "forward", "gather", "forward_nhwc_rgb_x2"),
    ("channels-last RGB x2 float64", _nhwc(1, 3, 8, 8, dtype=torch.float64), (16, 16), "half_pixel", "forward",
     "gather", "forward_nhwc"),
    ("scatter", _nchw(1, 4, 32, 32), (16, 16), "half_pixel", "backward", "scatter", "scatter"),
    ("scatter channels-last", _nhwc(1, 4, 32, 32), (16, 16), "half_pixel", "backward", "scatter", "scatter_nhwc"),
    ("x2 float32", _nchw(1, 4, 32, 32), (16, 16), "half_pixel", "backward", "gather", "gather_x2"),
    ("x2 W, x1.5 H", _nchw(1, 4, 24, 32), (16, 16), "half_pixel", "backward", "gather", "gather_x2"),
    ("x2 float64", _nchw(1, 4, 32, 32, dtype=torch.float64), (16, 16), "half_pixel", "backward", "gather",
     "gather_planes"),
    ("x4 bfloat16", _nchw(1, 4, 64, 64, dtype=torch.bfloat16), (16, 16), "half_pixel", "backward", "gather",
     "gather_x4"),
    ("x0.5", _nchw(1, 4, 16, 16), (32, 32), "tf_legacy", "backward", "gather", "gather_halve"),
    ("x4 align_corners", _nchw(1, 4, 64, 64), (16, 16), "align_corners", "backward", "gather",
     "gather_column_packs"),
    ("x4 align_corners bfloat16", _nchw(1, 4, 64, 64, dtype=torch.bfloat16), (16, 16), "align_corners", "backward",
     "gather", "gather_planes"),
    ("x3", _nchw(1, 4, 48, 48), (16, 16), "half_pixel", "backward", "gather", "gather_planes"),
    ("x1.5", _nchw(1, 4, 24, 24), (16, 16), "half_pixel", "backward", "gather", "gather_planes"),
    ("channels-last C 16 x2", _nhwc(1, 16, 32, 32), (16, 16), "half_pixel", "backward", "gather",
     "gather_nhwc_x2_tile"),
    ("channels-last C 16 x2 W only", _nhwc(1, 16, 24, 32), (16, 16), "half_pixel", "backward", "gather",
     "gather_nhwc_x2"),
    ("channels-last RGB x2", _nhwc(1, 3, 32, 32), (16, 16), "half_pixel", "backward", "gather",
     "gather_nhwc_rgb_x2"),
    ("channels-last C 5", _nhwc(1, 5, 32, 32), (16, 16), "half_pixel", "backward", "gather", "gather_nhwc"),
]


@pytest.mark.cuda
def test_dispatch_table_cuda(up, device):
    """The table picks each automatic kernel for its case; every automatic row has a case here."""
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    rows = kernel_table()
    assert {name for name, *_ in rows} == set(KERNEL_SYMBOLS), "the table's kernels changed: update KERNEL_SYMBOLS"
    auto = {name for name, _, how, _ in rows if how == "auto"}
    assert auto <= {case[-1] for case in TABLE_CASES}, f"rows without a case: {auto - {c[-1] for c in TABLE_CASES}}"
    for what, make, size, mode, direction, method, expected in TABLE_CASES:
        t = make()
        got = kernel_name(t, size, mode, direction, method)
        assert got == expected, f"{direction} {what} {list(t.shape)} -> {list(size)}, {mode}: the table picks {got}"
        run = (lambda: op(t, list(size), mode)) if direction == "forward" else (
            lambda: bw(t, list(size), mode, method))
        names = cuda_kernels(run)
        assert any(KERNEL_SYMBOLS[got] in k for k in names), f"{direction} {what}: {got}, but launched {names}"
    assert kernel_name(torch.randn(1, 1, 4, 4), (8, 8), "half_pixel") == "cpu"


# Every rung of the ladder, forced by name, on every case it applies to, against the reference.
RUNG_CASES = [((2, 3, 9, 13), (17, 26)), ((1, 4, 16, 16), (32, 32)), ((1, 4, 32, 32), (16, 16)),
              ((1, 16, 16, 16), (32, 32)), ((1, 16, 17, 24), (34, 48)), ((1, 8, 16, 16), (64, 64)),
              ((1, 3, 8, 16), (16, 32)), ((1, 16, 12, 16), (17, 32)), ((2, 5, 7, 9), (3, 4))]


def every_rung_emulated(chapter_source) -> None:
    """test_every_rung_emulated's body, run in a process of its own (see there)."""
    import sys

    from coursekit import emulate
    module = emulate.build("06-ladder", chapter_source)
    rows = [line.split("|") for line in module.kernel_table().splitlines()]
    ran = set()
    for name, direction, _, _ in rows:
        for shape, size in RUNG_CASES:
            for layout in (torch.contiguous_format, torch.channels_last):
                for dtype in (torch.float32, torch.bfloat16):
                    for mode in ("half_pixel", "align_corners"):
                        forward = direction == "forward"
                        t = torch.randn(shape if forward else shape[:2] + size, dtype=dtype)
                        t = t.contiguous(memory_format=layout)
                        target = size if forward else shape[2:]
                        method = "scatter" if name.startswith("scatter") else "gather"
                        what = f"rung {name} (emulated), {mode}, {dtype}, {list(t.shape)} -> {list(target)}, {layout}"
                        print(what, file=sys.stderr, flush=True)  # the last line names the case if the process dies
                        try:
                            got = module.run(t, list(target), EMULATED_MODES[mode], forward, method, name, False, 1)
                        except RuntimeError as e:
                            assert "does not apply" in str(e), f"rung {name}, emulated: {e}"
                            continue
                        ran.add(name)
                        ref = ref_forward(t, size, mode) if forward else ref_backward(t, shape[2:], mode)
                        check(got, ref, what)
    assert ran == {name for name, *_ in rows}, f"rungs that no case reached: {sorted({r[0] for r in rows} - ran)}"


# The table's choice, as the op makes it (kernel ""), on cases at the edges of every automatic
# row's condition: exact x0.5, x2 and x4 along W, with widths that are and are not multiples of a
# pack (rows of 20 or 26 values start 4 or 2 values past a pack boundary: narrower stores); scale factors whose ratio is exact while the sizes are not (scale_factor=0.5 on an odd
# width); 3 channels and a multiple of a pack in channels-last; wide windows (float32 column
# packs); every mode (tf_legacy's taps at x2 are not half_pixel's). Each tensor once at the end of
# its pages (a load past a row's end on the last row faults; the start is then only as aligned as
# the size makes it), once at their start, and once with the input one element past a 16-byte
# boundary (a view: a vector path taken then reads a misaligned pack, which the judge stops).
DISPATCH_CASES = [((1, 2, 6, 32), (3, 16), None), ((1, 2, 6, 33), (3, 16), (0.5, 0.5)),
                  ((1, 2, 5, 16), (10, 32), None), ((1, 2, 5, 12), (10, 24), None),
                  ((1, 2, 4, 16), (8, 64), None), ((1, 3, 5, 16), (10, 32), None), ((1, 3, 5, 13), (10, 26), None),
                  ((1, 8, 4, 8), (8, 16), None), ((1, 8, 4, 8), (5, 16), None), ((1, 16, 3, 8), (6, 16), None),
                  ((2, 5, 7, 9), (3, 4), None), ((1, 4, 3, 40), (5, 4), None), ((1, 3, 5, 7), (9, 20), None)]


def dispatch_emulated(chapter_source) -> None:
    """test_dispatch_emulated's body, run in a process of its own."""
    import sys

    from coursekit import emulate
    module = emulate.build("06-ladder", chapter_source)
    for shape, size, scales in DISPATCH_CASES:
        for mode in MODES:
            sc = scales if scales is not None and mode == "half_pixel" else (None, None)
            for layout in (torch.contiguous_format, torch.channels_last):
                for dtype, at_end, offset in ((torch.float32, True, 0), (torch.bfloat16, True, 0),
                                              (torch.float32, False, 0), (torch.bfloat16, False, 1)):
                    where = ("at the end of its pages" if at_end else "at the start of its pages") + (
                        ", the input one element past a 16-byte boundary" if offset else "")
                    for forward in (True, False):
                        t = torch.randn(shape if forward else shape[:2] + size, dtype=dtype)
                        t = t.contiguous(memory_format=layout)
                        target = size if forward else shape[2:]
                        what = (f"the table's {'forward' if forward else 'gather'} (emulated), {mode}, {dtype}, "
                                f"{list(t.shape)} -> {list(target)}, scales {sc}, {layout}, each tensor {where}")
                        print(f"rung {what}", file=sys.stderr, flush=True)
                        got = module.run(t, list(target), EMULATED_MODES[mode], forward, "gather", "", at_end, 1,
                                         sc[0], sc[1], offset)
                        ref = ref_forward(t, size, mode, sc) if forward else ref_backward(t, shape[2:], mode, sc)
                        check(got, ref, what)
    # the gathers' windows: no column outside a range is read; the last case is exact x2 along W only
    # (x0.5 along H; channels-last: gather_nhwc_x2, where the tile takes x2 on both axes)
    for mode, shape, size in NONFINITE_CASES + [("half_pixel", (1, 16, 8, 6), (4, 12))]:
        base = nonfinite_grad_out(*shape[:2], size, torch.float32)
        ref = torch.ops.aten.upsample_bilinear2d_backward(base, list(size), list(shape), mode == "align_corners",
                                                         None, None)
        for layout in (torch.contiguous_format, torch.channels_last):
            what = f"the table's gather (emulated), {mode}, grad_out {list(base.shape)} with NaN and inf, {layout}"
            print(f"rung {what}", file=sys.stderr, flush=True)
            got = module.run(base.float().contiguous(memory_format=layout), list(shape[2:]), EMULATED_MODES[mode],
                             False, "gather", "", True, 1).double()
            for name, mask in NONFINITE_MASKS:
                wrong = (mask(got) != mask(ref)).nonzero().tolist()
                assert not wrong, (f"{what}: {len(wrong)} elements where {name} should"
                                   f"{' not' if not mask(ref)[tuple(wrong[0])] else ''} be, first at (n, c, h, w) = "
                                   f"{tuple(wrong[0])}: got {got[tuple(wrong[0])].item()}, expected "
                                   f"{ref[tuple(wrong[0])].item()} (a column of weight 0 still added: 0 * inf is NaN)")


def run_emulated_apart(chapter_source, body: str, what: str, env: dict | None = None) -> None:
    """Run this module's function `body` in a process of its own (with `env` added to its
    environment): a crash of the judge then fails the test, naming the last case it printed,
    instead of ending the test run."""
    import os
    import subprocess
    import sys

    code = (f"import sys; sys.path[:0] = [{str(Path(__file__).parent)!r}]\n"
            f"import test_06_upsample as t; t.{body}({str(chapter_source)!r})")
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True,
                       env={**os.environ, **(env or {})})
    lines = r.stderr.strip().splitlines()
    last_case = next((ln for ln in reversed(lines) if ln.startswith("rung ")), "before the first case")
    problems = [ln for ln in lines if not ln.startswith("rung ")]
    shown = problems if len(problems) <= 40 else problems[:28] + ["..."] + problems[-10:]  # the native stack's top
    assert r.returncode == 0, (f"{what} ended with exit code {r.returncode} at {last_case}:\n" + "\n".join(shown))


def test_every_rung_emulated(judged_source):
    """Every rung on the CPU, without a GPU: 06_upsample/ladder.py's check through the GPU-free judge
    (coursekit/emulate.py: the chapter's CUDA files compiled for the CPU, run thread by thread, with
    warp shuffles, shared memory and atomics), each rung on every small case it applies to, both
    layouts, float32 and bfloat16, against the float64 reference; every rung must run. In a process
    of its own: a crash of the judge fails this test (naming the case) instead of the test run."""
    run_emulated_apart(judged_source, "every_rung_emulated", "the emulated ladder")


@pytest.mark.parametrize("sms", ["1", "0"], ids=["one-SM", "SMs-unknown"])
def test_dispatch_emulated(judged_source, sms):
    """The kernel the table picks, on the CPU through the GPU-free judge: DISPATCH_CASES in every
    mode and layout, each tensor placed at the end and at the start of its guarded pages, against
    the float64 reference; and the gathers with NaN and inf in grad_out, which reach exactly the
    inputs whose ranges hold them (a window that sums a column outside its range meets one).
    Twice: on a GPU of one SM, where these small launches take less work per thread to fill it,
    and on one whose SM count is unknown, where every launch keeps its usual work per thread."""
    run_emulated_apart(judged_source, "dispatch_emulated", f"the emulated dispatch ({sms} SMs)",
                       {"COURSE_EMU_SMS": sms})


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
def test_every_rung_cuda(up, device, dtype, mode):
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    ran = set()
    for name, direction, _, when in kernel_table():
        for shape, size in RUNG_CASES:
            for layout in (torch.contiguous_format, torch.channels_last):
                if direction == "forward":
                    t = torch.randn(shape, device="cuda", dtype=dtype).contiguous(memory_format=layout)
                    args, ref = (t, list(size), mode, name), ref_forward(t, size, mode)
                    fn = torch.ops.ch06._upsample_bilinear2d_rung
                else:
                    t = torch.randn(shape[:2] + size, device="cuda", dtype=dtype).contiguous(memory_format=layout)
                    args, ref = (t, list(shape[2:]), mode, name), ref_backward(t, shape[2:], mode)
                    fn = torch.ops.ch06._upsample_bilinear2d_backward_rung
                try:
                    with poisoned_empty():
                        got = fn(*args)
                except RuntimeError as e:
                    assert "does not apply" in str(e), f"{name}: {e}"
                    continue
                ran.add(name)
                check(got, ref, f"rung {name}, {mode}, {list(t.shape)}, {layout}")
    if dtype == torch.float32 and mode == "half_pixel":
        assert ran == {name for name, *_ in kernel_table()}, f"rungs never run: {set(KERNEL_SYMBOLS) - ran}"


def cuda_kernels(fn) -> list[str]:
    """The names of the CUDA kernels that fn() launches."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


# ----------------------------------------------------------------------------
# source-coordinate: the forward, in every convention and with every argument.


@pytest.mark.exercise("source-coordinate")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", SHAPES, ids=SHAPE_IDS)
def test_forward_cpu(up, dtype, shape, size, mode):
    check_forward(up, "cpu", dtype, shape, size, mode)


@pytest.mark.cuda
@pytest.mark.exercise("source-coordinate")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", CUDA_SHAPES, ids=CUDA_IDS)
def test_forward_cuda(up, device, dtype, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_forward(up, "cuda", dtype, shape, size, mode)


@pytest.mark.exercise("source-coordinate")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", ROUNDING_SHAPES, ids=ROUNDING_IDS)
@pytest.mark.parametrize("half", HALF_TYPES, ids=HALF_IDS)
def test_forward_rounding(up, device, half, shape, size, mode):
    """float16/bfloat16 on long axes: coordinates and weights in float, one rounding per output."""
    x = torch.randn(shape, device=device).to(half)
    with poisoned_empty():
        out = up.upsample_bilinear(x, size, mode=mode)
    assert_rounded(out, ref_forward(x, size, mode), what=f"{mode} forward {list(shape)} -> {list(size)}")


@pytest.mark.exercise("source-coordinate")
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
    assert_close64(out.flatten(), torch.tensor(expected, dtype=torch.float64), f"{mode}, [0, 1, 2] -> 5 pixels")


@pytest.mark.exercise("source-coordinate")
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


FACTORS = [2.0, 1.7, 0.6, (3.3, 0.5), (1.0, 1.4)]  # (1.0, 1.4): H kept (1.0 alone is a copy, no kernel)


@pytest.mark.exercise("source-coordinate")
@pytest.mark.parametrize("factor", FACTORS, ids=str)
@pytest.mark.parametrize("recompute", [False, True], ids=["factor-ratio", "recompute"])
@pytest.mark.parametrize("mode", MODES)
def test_scale_factor(up, device, mode, recompute, factor):
    """scale_factor in every mode: the output is floor(in * factor) pixels; the ratio is 1/factor in
    half_pixel unless recompute_scale_factor=True, (in-1)/(out-1) in align_corners, in/out in tf_legacy."""
    x = torch.randn(2, 3, 7, 9, device=device, dtype=torch.float64)
    with poisoned_empty():
        out = up.upsample_bilinear(x, scale_factor=factor, mode=mode, recompute_scale_factor=recompute)
    fh, fw = factor if isinstance(factor, tuple) else (factor, factor)
    size = (int(7 * fh), int(9 * fw))
    scales = (fh, fw) if mode == "half_pixel" and not recompute else (None, None)
    what = f"{mode}, scale_factor={factor}, recompute_scale_factor={recompute}"
    assert_close64(out, ref_forward(x, size, mode, scales), what)
    if mode in TORCH_MODES:
        ref = Fn.interpolate(x, scale_factor=factor, mode="bilinear", align_corners=TORCH_MODES[mode],
                             recompute_scale_factor=recompute)
        assert_close64(out, ref, what + " vs F.interpolate")


@pytest.mark.exercise("source-coordinate")
@pytest.mark.parametrize("mode", MODES)
def test_op_scales(up, device, mode, dtype):
    """The op's own scale_h / scale_w: ratio 1/scale in half_pixel and tf_legacy, ignored in align_corners."""
    x = torch.randn(2, 3, 7, 9, device=device, dtype=dtype)
    # out = floor(in * scale) in the first four, as F.interpolate makes them; the op takes any
    # pair, and a scale that does not give the size still sets the ratio (the last two, as aten)
    for size, scales in [((11, 15), (1.7, 1.75)), ((4, 20), (0.6, 2.3)), ((13, 4), (None, 0.45)), ((1, 1), (0.15, 0.12)),
                         ((4, 20), (0.5, 2.0)), ((9, 5), (1.5, 0.9))]:
        with poisoned_empty():
            out = op(x, list(size), mode, *scales)
        check(out, ref_forward(x, size, mode, scales), f"{mode}, size {size}, scales {scales}")
        if dtype == torch.float64 and mode in TORCH_MODES:
            # aten's CPU kernel: its CUDA kernel clamps no source index from above, so where a scale
            # asks for more columns than the size gives (9 -> 20 at scale 2) it reads past the row
            ref = torch.ops.aten.upsample_bilinear2d(x.cpu(), list(size), TORCH_MODES[mode], *scales)
            assert_close64(out, ref, f"{mode}, size {size}, scales {scales} vs aten.upsample_bilinear2d (CPU)")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_same_size_is_a_copy_whatever_the_scale(up, device, dtype):
    """F.interpolate(x, scale_factor=1.1) on a 7 x 7 image keeps 7 x 7 pixels, and PyTorch (CPU and CUDA)
    then copies them, whatever the factor says; so do our forward and gather backward. (With one axis
    resized and the other not, PyTorch's CPU kernel copies that axis and its CUDA kernel applies the
    factor; ours applies it, as the CUDA kernel does.)"""
    x = torch.randn(2, 3, 7, 9, device=device, dtype=dtype)
    for scales in [(1.1, 1.1), (1.12, 1.05), (None, 1.1)]:
        for mode in MODES:
            with poisoned_empty():
                out = op(x, [7, 9], mode, *scales)
            assert torch.equal(out, x), f"{mode}, size unchanged, scales {scales}: not a copy of x"
            for method in ("gather", "scatter") if device == "cuda" else ("gather",):
                with poisoned_empty():
                    grad_in = bw(x, [7, 9], mode, method, *scales)
                assert torch.equal(grad_in, x), f"{mode}, {method}, size unchanged, scales {scales}: not a copy"
        if dtype == torch.float64 and scales[0] is not None:
            ref = Fn.interpolate(x, scale_factor=scales, mode="bilinear", align_corners=False)
            assert torch.equal(ref, x) and torch.equal(up.upsample_bilinear(x, scale_factor=scales), x)


@pytest.mark.exercise("source-coordinate")
@pytest.mark.parametrize("mode", MODES)
def test_one_axis_keeps_its_size_with_a_scale(up, device, mode):
    """H keeps its 7 pixels with a scale of 1.1 while W is resized: along H the ratio is still
    1 / 1.1 (half_pixel, tf_legacy), as PyTorch's CUDA kernel computes it; only an output of the
    input's size in both axes is a plain copy. (PyTorch's CPU kernel copies that axis instead.)"""
    x = torch.randn(2, 3, 7, 9, device=device, dtype=torch.float64)
    for size, scales in [((7, 15), (1.1, 1.75)), ((11, 9), (1.7, 1.05))]:
        with poisoned_empty():
            out = op(x, list(size), mode, *scales)
        check(out, ref_forward(x, size, mode, scales), f"{mode}, size {size} from (7, 9), scales {scales}")
        if device == "cuda" and mode in TORCH_MODES:
            ref = torch.ops.aten.upsample_bilinear2d(x, list(size), TORCH_MODES[mode], *scales)
            assert_close64(out, ref, f"{mode}, size {size}, scales {scales} vs aten.upsample_bilinear2d (CUDA)")


def sample_row_float(x: torch.Tensor, ratio: float, n_out: int, fused: bool) -> torch.Tensor:
    """x's last axis sampled at half_pixel coordinates s = ratio * (d + 0.5) - 0.5 computed in float32
    (ratio a float32 value): with two roundings, or with one where the compiler fuses the multiply
    and the add (nvcc does). The blend is in float64."""
    n_in = x.shape[-1]
    r = torch.tensor(ratio, dtype=torch.float64)
    d = torch.arange(n_out, dtype=torch.float64)
    s = (r * (d + 0.5) - 0.5).float() if fused else r.float() * (d.float() + 0.5) - 0.5
    s = s.double().clamp(min=0)
    i0 = s.floor().long().clamp(max=n_in - 1)
    i1 = (i0 + 1).clamp(max=n_in - 1)
    lam = s - s.floor()
    xs = x.detach().double().cpu()
    return (xs[..., i0] * (1 - lam) + xs[..., i1] * lam).to(x.device)


@pytest.mark.exercise("source-coordinate")
def test_size_ratio_rounding_on_a_long_axis(up, device):
    """float32, a 2400-pixel row resized to 4080 by size: the ratio is in / out divided in float
    (T), rounded once. Taken another way (1 / (out / in), or in double then rounded twice) it is
    an ulp off, and over 4080 outputs the coordinates drift by 1e-3."""
    x = torch.randn(1, 2, 1, 2400, device=device, dtype=torch.float32)
    out = up.upsample_bilinear(x, (1, 4080), mode="half_pixel")
    ratio = (torch.tensor(2400.0) / torch.tensor(4080.0)).item()  # float32 division, one rounding
    # the coordinate fused into a multiply-add or not: either is right
    err = min((out.double() - sample_row_float(x, ratio, 4080, fused)).abs().max().item() for fused in (False, True))
    assert err < 2e-5, (f"float32 resizing of a 2400-pixel row to 4080 is {err:.2g} away from the reference: is the "
                        f"ratio in / out divided once, in T?")


@pytest.mark.exercise("source-coordinate")
def test_scale_ratio_rounding_on_a_long_axis(up, device):
    """float32, scale 1.7 on a 2400-pixel row: the ratio is 1.0 / scale in double, rounded to float
    once (PyTorch's rule). An inverse taken in float (T(1) / T(scale)) is one ulp off, an error that
    grows with the output index until it moves whole interpolation weights by 1e-4."""
    x = torch.randn(1, 2, 1, 2400, device=device, dtype=torch.float32)
    out = up.upsample_bilinear(x, scale_factor=1.7, mode="half_pixel")
    # The reference, not F.interpolate: the CPU kernel of torch < 2.12 rounds differently here.
    ref = ref_forward(x, (1, 4080), "half_pixel", scales=(1.7, 1.7))
    if device == "cuda":  # nvcc contracts ratio * (d + 0.5) - 0.5 into one fused multiply-add: one rounding
        ref = sample_row_float(x, torch.tensor(1.0 / 1.7, dtype=torch.float64).float().item(), 4080, fused=True)
    assert out.shape == ref.shape, f"shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
    err = (out.double() - ref).abs().max().item()
    assert err < 2e-5, (f"float32 upsampling of a 2400-pixel row by 1.7 is {err:.2g} away from the reference: "
                        f"is the ratio 1.0 / scale computed in double and rounded to float once?")


@pytest.mark.exercise("source-coordinate")
def test_scale_factor_changes_the_ratio(up):
    """7 * 1.7 = 11.9 -> 11 pixels: ratio 1/1.7 is not 7/11, so the two calls differ."""
    x = torch.randn(1, 1, 7, 7, dtype=torch.float64)
    by_factor = up.upsample_bilinear(x, scale_factor=1.7)
    by_size = up.upsample_bilinear(x, size=(11, 11))
    assert_close64(by_factor, ref_forward(x, (11, 11), "half_pixel", (1.7, 1.7)), "scale_factor=1.7")
    assert_close64(by_size, ref_forward(x, (11, 11), "half_pixel"), "size=(11, 11)")
    assert (by_factor - by_size).abs().max() > 1e-3


@pytest.mark.exercise("source-coordinate")
@pytest.mark.parametrize("mode", MODES)
def test_size_argument_forms(up, mode):
    """size as one int, a tuple or a list."""
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64)
    ref = ref_forward(x, (7, 7), mode)
    for size in (7, (7, 7), [7, 7]):
        assert_close64(up.upsample_bilinear(x, size, mode=mode), ref, f"{mode}, size={size!r}")


def assert_same_layout(out: torch.Tensor, like: torch.Tensor, what: str) -> None:
    """out is laid out as `like` (PyTorch's own op's result): the same strides."""
    assert out.stride() == like.stride(), (
        f"{what}: strides {out.stride()}, PyTorch's op gives {like.stride()} "
        f"({'channels-last' if like.is_contiguous(memory_format=torch.channels_last) else 'NCHW'}): "
        "the output takes the input's memory format")


# Input layouts: (name, function of an NCHW tensor). F.interpolate's output layout is the standard.
LAYOUTS = {
    "channels_last": lambda t: t.contiguous(memory_format=torch.channels_last),
    "channels_last-sliced": lambda t: t.contiguous(memory_format=torch.channels_last)[:, :, 1:, 2:],
    "channels_last-offset": lambda t: t.contiguous(memory_format=torch.channels_last)[1:],
    "transposed": lambda t: t.transpose(2, 3).contiguous().transpose(2, 3),
    "sliced": lambda t: t[:, ::2, 1:, 2:],
    "offset": lambda t: t[1:],
    "expanded": lambda t: t[:, :1].expand(t.shape),  # stride 0 along C
    "expanded-w": lambda t: t[:, :, :, :1].expand(t.shape),  # stride 0 along W
}


@pytest.mark.exercise("source-coordinate")
@pytest.mark.parametrize("mode", MODES)
def test_non_contiguous_input(up, device, mode):
    """Channels-last, transposed, sliced, offset and expanded inputs; the output has F.interpolate's layout."""
    base = torch.randn(3, 6, 9, 11, device=device, dtype=torch.float64)
    for name, layout in LAYOUTS.items():
        x = layout(base)
        with poisoned_empty():
            out = up.upsample_bilinear(x, (17, 5), mode=mode)
        assert_same_layout(out, Fn.interpolate(x, size=(17, 5), mode="bilinear"), f"{name} input")
        assert_close64(out, ref_forward(x, (17, 5), mode), f"{mode}, {name} input")


def channel_shape_ids(cases) -> list[str]:
    return [f"C{s[1]}-{s[2]}x{s[3]}-to-{o[0]}x{o[1]}" for s, o in cases]


# Channels-last (NHWC in memory) has kernels of its own. C = 1 (ambiguous: PyTorch calls it NCHW
# unless the strides say otherwise), 3 (an image), 5 (odd), 4 and 10 (the CUDA gather's groups of
# 4 and 2 channels), 8/16/64 (16-byte vectors in every dtype).
NHWC_SHAPES = [((2, 3, 7, 9), (13, 20)), ((1, 1, 5, 4), (9, 3)), ((2, 5, 6, 6), (3, 11)),
               ((1, 4, 5, 7), (9, 13)), ((2, 10, 4, 6), (7, 11)),
               ((2, 8, 9, 7), (18, 14)), ((1, 16, 4, 5), (4, 9)), ((1, 64, 6, 10), (11, 23)),
               # shrunk 8 and 11 times along W: runs of input columns that no output reads
               ((1, 8, 5, 40), (3, 5)), ((2, 3, 6, 33), (4, 3))]
NHWC_IDS = channel_shape_ids(NHWC_SHAPES)


def misaligned_channels_last(t: torch.Tensor, elements: int = 1) -> torch.Tensor:
    """t in a packed channels-last layout whose data starts `elements` past an aligned address."""
    n, c, h, w = t.shape
    flat = torch.empty(t.numel() + elements, dtype=t.dtype, device=t.device)[elements:]
    nhwc = flat.view(n, h, w, c)
    nhwc.copy_(t.permute(0, 2, 3, 1))
    return nhwc.permute(0, 3, 1, 2)


@pytest.mark.exercise("source-coordinate")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", NHWC_SHAPES, ids=NHWC_IDS)
def test_channels_last_forward(up, device, dtype, shape, size, mode):
    """Channels-last in, channels-last out, the same values as from NCHW, for any C."""
    x = torch.randn(shape, device=device, dtype=dtype)
    nchw = up.upsample_bilinear(x, size, mode=mode)
    for name, xl in [("channels_last", x.contiguous(memory_format=torch.channels_last)),
                     ("channels_last-misaligned", misaligned_channels_last(x))]:
        with poisoned_empty():
            out = up.upsample_bilinear(xl, size, mode=mode)
        what = f"{mode} forward, {name} {list(shape)} -> {list(size)}"
        assert_same_layout(out, Fn.interpolate(xl.float(), size=size, mode="bilinear"), what)
        check(out, ref_forward(x, size, mode), what)
        same_up_to_fma(out, nchw, what + " vs the NCHW result")


# RGB images in channels-last at x2 along W (half_pixel): the CUDA forward then gives a thread
# V whole pixels read with 8-byte loads, when W_in is a multiple of V / 2 and x starts on 8 bytes.
# W_in = V / 2 (one thread, at both edges) in float32 (2) and in 2-byte types (4), rows of
# several warps with a partial last one, H shrunk or grown, two images; at an 8-byte offset (this
# kernel, from a shifted start) and at one element (the general kernel). W_in = 5 and 6 are not
# multiples of V / 2 in float32 and in 2-byte types: the general kernel's.
RGB_SHAPES = [((1, 3, 3, 2), (6, 4)), ((2, 3, 5, 4), (9, 8)), ((1, 3, 4, 36), (8, 72)),
              ((2, 3, 3, 1000), (5, 2000)), ((1, 3, 6, 12), (3, 24)), ((1, 3, 2, 5), (3, 10)),
              ((1, 3, 3, 6), (5, 12))]


@pytest.mark.exercise("source-coordinate")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", RGB_SHAPES, ids=channel_shape_ids(RGB_SHAPES))
def test_channels_last_rgb_x2(up, device, dtype, shape, size, mode):
    """An RGB image in channels-last, W doubled: the reference's values, and the NCHW result's."""
    x = torch.randn(shape, device=device, dtype=dtype)
    nchw = up.upsample_bilinear(x, size, mode=mode)
    offset = 8 // x.element_size()  # elements in 8 bytes
    for name, xl in [("channels_last", x.contiguous(memory_format=torch.channels_last)),
                     (f"channels_last at +{offset} elements", misaligned_channels_last(x, offset)),
                     ("channels_last-misaligned", misaligned_channels_last(x))]:
        with poisoned_empty():
            out = up.upsample_bilinear(xl, size, mode=mode)
        what = f"{mode} forward, {name} {list(shape)} -> {list(size)}"
        assert out.is_contiguous(memory_format=torch.channels_last), \
            f"{what}: strides {out.stride()}, expected channels-last {xl.contiguous(memory_format=torch.channels_last).stride()}"
        check(out, ref_forward(x, size, mode), what)
        same_up_to_fma(out, nchw, what + " vs the NCHW result")


# The forward kernels that load whole spans of input columns (channels-last RGB at x2, NCHW at
# exact x2 and x0.5) must not load past a row's end or before its start, even where the values
# loaded would not be used: at the end of the last row they lie past the tensor. Only a
# sanitizer sees such a read, so this runs them under memcheck on small shapes whose x ends
# exactly where its allocation ends (and starts one aligned load past an allocation's start).
FORWARD_MEMCHECK = [((1, 3, 3, 2), (6, 4), True), ((2, 3, 2, 4), (5, 8), True), ((1, 3, 3, 36), (4, 72), True),
                    ((1, 2, 3, 8), (6, 16), False), ((1, 2, 3, 16), (5, 8), False), ((1, 1, 2, 40), (3, 80), False)]


@pytest.mark.cuda
def test_forward_reads_only_x_cuda(device, chapter_source, tmp_path):
    if device != "cuda":
        pytest.skip("the CUDA kernels' test")
    saved = tmp_path / "outputs.pt"
    code = memcheck_script(chapter_source, f"""
forward = torch.ops.ch06._upsample_bilinear2d_kernel
results = []
for shape, size, channels_last in {FORWARD_MEMCHECK!r}:
    n, c, h, w = shape
    for dtype in (torch.float32, torch.bfloat16):
        for skip in (0, 64 // torch.finfo(dtype).bits):  # 0, or the values of one 8-byte load
            flat = torch.randn(n * c * h * w + skip, device="cuda", dtype=dtype)[skip:]
            x = flat.view(n, h, w, c).permute(0, 3, 1, 2) if channels_last else flat.view(shape)
            for mode in {MODES!r}:
                results.append((x.cpu(), list(size), mode, forward(x, list(size), mode, None, None).cpu()))
torch.save(results, {str(saved)!r})
""")
    assert_memcheck_clean(code, "the forward on small shapes")
    for x, size, mode, out in torch.load(saved):  # and the outputs of that run are right
        layout = "NCHW" if x.is_contiguous() else "channels_last"
        check(out, ref_forward(x, size, mode), f"{mode} forward under memcheck, {layout} {x.dtype} {list(x.shape)} -> {size}")


# Exact x0.5 and x2 along W, W_out a multiple of 8 (every dtype's 16-byte pack), and x2 on
# short rows (every thread at an edge): the CUDA forward then loads whole spans of input
# columns (x0.5: two 16-byte packs; x2 in half_pixel: three 8-byte loads) instead of one
# value per tap.
SPAN_SHAPES = [((2, 3, 6, 32), (3, 16)), ((1, 2, 5, 48), (9, 24)), ((2, 3, 5, 40), (10, 80)),
               ((1, 2, 3, 4), (6, 8)), ((1, 2, 2, 1), (4, 2)), ((1, 1, 4, 2), (3, 4))]
SPAN_IDS = [f"{s[2]}x{s[3]}-to-{o[0]}x{o[1]}" for s, o in SPAN_SHAPES]


@pytest.mark.exercise("source-coordinate")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", SPAN_SHAPES, ids=SPAN_IDS)
def test_forward_spans(up, device, dtype, shape, size, mode):
    """x0.5 and x2 along W: the reference's values, and those of the same input one element past
    an aligned address (which the CUDA kernel reads one value per tap): bit for bit at x0.5,
    within one rounding at x2 (see same_up_to_fma)."""
    x = torch.randn(shape, device=device, dtype=dtype)
    what = f"{mode} forward {list(shape)} -> {list(size)}"
    with poisoned_empty():
        out = up.upsample_bilinear(x, size, mode=mode)
    check(out, ref_forward(x, size, mode), what)
    shifted = torch.empty(x.numel() + 1, device=device, dtype=dtype)[1:].view(shape)
    shifted.copy_(x)
    by_taps = up.upsample_bilinear(shifted, size, mode=mode)
    if size[1] < shape[3]:
        assert_bitwise(by_taps, out, what=what + ", misaligned input")
    else:
        same_up_to_fma(by_taps, out, what + ", misaligned input")


def same_up_to_fma(out: torch.Tensor, other: torch.Tensor, what: str) -> None:
    """The same values from two kernels that do the same arithmetic (two layouts, or two ways of
    loading the input): bit for bit on the CPU (the same operations in the same order, and no fused
    multiply-adds in the CPU build); on a GPU within one rounding, since nvcc may fuse a different
    multiply and add into an FMA in each kernel."""
    if out.device.type == "cpu":
        assert_bitwise(out.contiguous(), other, what=what)
    else:
        eps = torch.finfo(out.dtype).eps
        torch.testing.assert_close(out.contiguous(), other, rtol=eps, atol=eps * max(1.0, other.abs().max().item()),
                                   msg=lambda m: f"{what}: {m}")


def check_channels_last_backward(up, device, dtype, shape, size, mode, method):
    grad_out = torch.randn(shape[:2] + size, device=device, dtype=dtype)
    for name, gl in [("channels_last", grad_out.contiguous(memory_format=torch.channels_last)),
                     ("channels_last-misaligned", misaligned_channels_last(grad_out))]:
        with poisoned_empty():
            grad_in = bw(gl, list(shape[2:]), mode, method)
        what = f"{mode} backward ({method}), {name} grad_out {list(grad_out.shape)} -> {list(shape[2:])}"
        like = torch.ops.aten.upsample_bilinear2d_backward(gl.float(), list(size), list(shape), False, None, None)
        assert_same_layout(grad_in, like, what)
        check(grad_in, ref_backward(grad_out, shape[2:], mode), what)
        # (Both layouts against the reference, not against each other: the NCHW gather is an
        # exercise, whose order of additions is the learner's. That the chapter's two layouts add
        # in one order is test_channels_last_gather_adds_in_nchw_order's, ungraded.)
    # through autograd: x.grad in x's layout, as F.interpolate's backward gives it
    x = torch.randn(shape, device=device, dtype=dtype).contiguous(memory_format=torch.channels_last)
    x.requires_grad_()
    up.upsample_bilinear(x, size, mode=mode, backward=method).backward(
        grad_out.contiguous(memory_format=torch.channels_last))
    x_ref = x.detach().float().requires_grad_()
    Fn.interpolate(x_ref, size=size, mode="bilinear").backward(grad_out.float().contiguous(
        memory_format=torch.channels_last))
    assert_same_layout(x.grad, x_ref.grad, f"{mode} x.grad ({method}) of a channels_last x")
    check(x.grad, ref_backward(grad_out, shape[2:], mode), f"{mode} x.grad ({method}) of a channels_last x")


@pytest.mark.parametrize("mode", MODES)
def test_channels_last_gather_adds_in_nchw_order(up, device, mode):
    """The chapter's channels-last gathers add in the NCHW gather's order (one writer per element):
    the same bits on the CPU, within one rounding on a GPU. Not graded: the NCHW gathers are exercises."""
    for dtype in (torch.float32, torch.bfloat16):
        for shape, size in NHWC_SHAPES:
            grad_out = torch.randn(shape[:2] + size, device=device, dtype=dtype)
            for name, gl in [("channels_last", grad_out.contiguous(memory_format=torch.channels_last)),
                             ("channels_last-misaligned", misaligned_channels_last(grad_out))]:
                same_up_to_fma(bw(gl, list(shape[2:]), mode, "gather"), bw(grad_out, list(shape[2:]), mode, "gather"),
                               f"{mode} gather, {dtype}, {name} grad_out {list(grad_out.shape)} vs the NCHW result")


# The CPU's channels-last kernels (upsample_cpu_nhwc.cpp) on what NHWC_SHAPES do not reach:
# blocks of 16 channels with one vector, half a vector (4 floats) or single channels left over
# (24, 40, 12, 33, 5), ranges of more than 4 columns and of more than 16 rows (a row's sums kept
# between passes: 8 channels, and 16 with W grown 2.5 times), downsampling that skips columns, 2 to
# 15 channels (the backward's lines, 8 channels at a time: W shrunk or kept, H shrunk, kept or grown
# past 16 rows a range), lines for 16 and 40 channels (W grown more than 3 times), and NaN, inf and
# -0 in the input.
CPU_NHWC_SHAPES = [((1, 16, 3, 2), (40, 37)), ((2, 24, 5, 7), (11, 3)), ((1, 40, 4, 4), (2, 50)),
                   ((1, 33, 3, 40), (3, 20)), ((2, 64, 8, 8), (4, 4)), ((1, 16, 40, 3), (2, 7)),
                   ((1, 12, 5, 6), (9, 4)), ((2, 5, 33, 6), (4, 13)), ((2, 3, 9, 10), (20, 23)),
                   ((1, 7, 6, 5), (13, 11)), ((1, 2, 7, 9), (15, 4)), ((1, 3, 2, 5), (40, 11)),
                   ((2, 3, 30, 41), (7, 9)), ((1, 5, 12, 20), (12, 13)), ((1, 6, 20, 17), (3, 17)),
                   ((1, 8, 3, 2), (40, 37)), ((1, 16, 3, 6), (40, 15)), ((1, 8, 12, 16), (6, 8)),
                   ((2, 9, 3, 30), (40, 13)), ((1, 15, 20, 21), (7, 5))]


def same_bits_or_nan(out: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    """NaN in the same elements, every other element bit for bit. (Which NaN comes out of an
    addition of two NaNs is the first operand's, and a compiler may swap the operands.)"""
    out = out.contiguous()
    nan = expected.isnan()
    assert torch.equal(out.isnan(), nan), f"{what}: NaN in other elements"
    assert_bitwise(out[~nan], expected[~nan], what=what)


@pytest.mark.parametrize("mode", MODES)
def test_channels_last_same_bits_as_nchw_cpu(up, mode):
    """The CPU forward and gather give the same values in both layouts, bit for bit (the same
    operations in the same order), for every dtype, on shapes that take every path of the
    channels-last kernels."""
    forward, backward = torch.ops.ch06._upsample_bilinear2d_kernel, torch.ops.ch06._upsample_bilinear2d_backward_kernel
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        for shape, size in CPU_NHWC_SHAPES:
            x = torch.randn(shape, dtype=dtype)
            grad_out = torch.randn(shape[:2] + size, dtype=dtype)
            x.view(-1)[[1, 7]] = torch.tensor([float("nan"), float("inf")], dtype=dtype)
            grad_out.view(-1)[[2, 9, 11]] = torch.tensor([float("-inf"), float("nan"), -0.0], dtype=dtype)
            what = f"{mode}, {dtype}, {list(shape)} -> {list(size)}"
            same_bits_or_nan(forward(x.contiguous(memory_format=torch.channels_last), list(size), mode, None, None),
                             forward(x, list(size), mode, None, None), f"forward {what}, channels_last vs NCHW")
            same_bits_or_nan(backward(grad_out.contiguous(memory_format=torch.channels_last), list(shape[2:]), mode,
                                      "gather"),
                             backward(grad_out, list(shape[2:]), mode, "gather"),
                             f"gather {what}, channels_last vs NCHW")


def float32_rounded_once(call, t: torch.Tensor, what: str, reference=None) -> None:
    """call(t, mode) on float16 or bfloat16 `t`, in both layouts and every mode: the bits of call on
    t's values in float32 in the same layout (the same kernel), rounded once to t's dtype. With
    reference(t32, mode) (float64), the float32 result is checked against it first: a mistake
    that both dtypes share would otherwise agree with itself."""
    for mode in MODES:
        for layout, u in [("NCHW", t), ("channels_last", t.contiguous(memory_format=torch.channels_last))]:
            got32 = call(u.float(), mode)
            if reference is not None:
                check(got32, reference(u.float(), mode), f"{what}, {mode}, {layout}, in float32")
            want = got32.to(t.dtype).contiguous()
            same_bits_or_nan(call(u, mode).contiguous(), want, f"{what}, {mode}, {layout}, against float32 rounded once")


# (grad_out shape, input size): rows chunked at 65536 columns, one chunk that no output reads, and
# with input rows that no output reads; rows of 7 and 29 values (NCHW: planes widened in blocks,
# the last block of a task cut short), and of 13 in planes too large for a block
HALF_BULK_SHAPES = [((1, 1, 2, 2), (3, 200000)), ((2, 1, 3, 5), (4, 140000)), ((1, 1, 2, 2), (6, 70000)),
                    ((1, 2, 46, 61), (73, 98)), ((2, 256, 8, 6), (10, 7)), ((3, 5, 7, 9), (11, 29)),
                    ((1, 3, 1500, 9), (1400, 13))]


@pytest.mark.exercise("gather-backward")
@pytest.mark.parametrize("go_shape, size", HALF_BULK_SHAPES, ids=[f"{c[0]}-to-{c[1]}" for c in HALF_BULK_SHAPES])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cpu_float16_gather_same_bits_as_float32(up, go_shape, size, dtype):
    """The CPU gather in float16 (bfloat16) is its float32 computation rounded once: the same bits
    as the float32 gather of the same values rounded once, in both layouts, also on rows done in
    chunks of 65536 columns and in a chunk that no output reads (the chapter's converts rows in
    bulk there), and on small planes (converted a block of planes at a time)."""
    backward = torch.ops.ch06._upsample_bilinear2d_backward_kernel
    float32_rounded_once(lambda t, mode: backward(t, list(size), mode, "gather"), torch.randn(go_shape).to(dtype),
                         f"{dtype} gather, {list(go_shape)} -> {list(size)}",
                         reference=lambda t, mode: ref_backward(t, size, mode))


# (grad_out shape, input size): more than 65536 input rows, the gather's path without a table of
# the rows (their ranges and weights computed per row); the forward's H grown, shrunk, and kept
# with W shrunk
UNTABLED_ROWS = [((1, 1, 140000, 1), (70000, 1)), ((1, 2, 35000, 3), (70000, 3)), ((1, 1, 70001, 2), (70001, 5))]


@pytest.mark.exercise("gather-backward")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("go_shape, size", UNTABLED_ROWS, ids=[f"{c[0]}-to-{c[1]}" for c in UNTABLED_ROWS])
def test_backward_untabled_rows_cpu(up, go_shape, size, mode):
    """Inputs of more than 65536 rows, where the gather computes each row's range and weights itself
    (no row table): float32 against the reference, in both layouts."""
    grad_out = torch.randn(go_shape)
    ref = ref_backward_taps(grad_out, size, mode)
    for layout, g in [("NCHW", grad_out), ("channels_last", grad_out.contiguous(memory_format=torch.channels_last))]:
        check(bw(g, list(size), mode, "gather"), ref, f"gather {list(go_shape)} -> {list(size)}, {mode}, {layout}")


# (input shape, output size): short rows in runs of many (a task's last run cut short); narrow rows
# shrinking along H, read from blocks of widened rows (the last block cut short) or from the tensor;
# rows of 37 values; rows chunked at 65536 columns
HALF_FORWARD_SHAPES = [((8, 128, 5, 6), (26, 7)), ((2, 256, 10, 7), (8, 6)), ((2, 3, 40, 300), (20, 5)),
                       ((3, 5, 9, 20), (11, 37)), ((1, 1, 3, 70000), (2, 140000))]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape, size", HALF_FORWARD_SHAPES, ids=[f"{c[0]}-to-{c[1]}" for c in HALF_FORWARD_SHAPES])
def test_cpu_2byte_forward_same_bits_as_float32(up, shape, size, dtype):
    """The CPU forward in float16 and bfloat16 converts in bulk (F16C, AVX2): inputs a block of rows
    or a row's columns at a time, outputs a run of whole rows or a row of a chunk at a time. The
    same bits as the float32 forward of the same values rounded once, in both layouts."""
    forward = torch.ops.ch06._upsample_bilinear2d_kernel
    float32_rounded_once(lambda t, mode: forward(t, list(size), mode, None, None), torch.randn(shape).to(dtype),
                         f"{dtype} forward, {list(shape)} -> {list(size)}")


@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
def test_outputs_are_tensors_of_their_own(up, device, layout):
    """The output and the gradient are new tensors, not views of one made inside the op (as
    F.interpolate's): autograd refuses an in-place change to a view made inside a custom
    Function, so `y = upsample_bilinear(x); y.mul_(2)` would fail with "Output 0 of _Resize is
    a view and is being modified inplace"."""
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    x = torch.randn(2, 5, 7, 9, device=device).contiguous(memory_format=fmt)
    expected = torch.autograd.grad(2 * Fn.interpolate(x.requires_grad_(), size=(3, 4), mode="bilinear").sum(), x)[0]
    for name, fn in [("upsample_bilinear", lambda t: up.upsample_bilinear(t, size=(3, 4))),
                     ("torch.ops.ch06.upsample_bilinear2d", lambda t: op(t, [3, 4], "half_pixel"))]:
        y = fn(x)
        assert not y._is_view(), f"{name} ({layout}): the output is a view of another tensor"
        y.mul_(2)  # in place, under autograd
        got = torch.autograd.grad(y.sum(), x)[0]
        assert not got._is_view(), f"{name} ({layout}): the gradient is a view of another tensor"
        assert_close(got, expected, torch.float32, f"{name} ({layout}): the gradient of 2 * out, doubled in place")


# ----------------------------------------------------------------------------
# gather-backward: the backward on the CPU (and the range and weights the GPU shares).


@pytest.mark.exercise("gather-backward")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", SHAPES, ids=SHAPE_IDS)
def test_backward_cpu(up, dtype, shape, size, mode):
    check_backward(up, "cpu", dtype, shape, size, mode, "gather")


# The CPU gather sums a column range with a loop unrolled K times, K picked from the longest
# range (1, 2, 4, 8, or any length): ranges just past each bound. Along W, 2 -> 9 has edge pixels
# read by 9 outputs, 2 -> 8 by 8, 3 -> 17 by 12 to 16, in every mode (SHAPES stop at 6).
LONG_RANGE_SHAPES = [((1, 2, 3, 2), (5, 9)), ((1, 2, 2, 2), (7, 8)), ((2, 1, 2, 3), (9, 17))]


@pytest.mark.exercise("gather-backward")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", LONG_RANGE_SHAPES,
                         ids=[f"{s[2]}x{s[3]}-to-{o[0]}x{o[1]}" for s, o in LONG_RANGE_SHAPES])
def test_backward_cpu_long_ranges(up, dtype, shape, size, mode):
    check_backward(up, "cpu", dtype, shape, size, mode, "gather")


@pytest.mark.exercise("gather-backward")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", SUM_SHAPES, ids=SUM_IDS)
@pytest.mark.parametrize("half", HALF_TYPES, ids=HALF_IDS)
def test_backward_sums_cpu(up, half, shape, size, mode):
    """Long sums in float16/bfloat16: accumulate in float, round once."""
    check_backward_sums("cpu", half, shape, size, mode, "gather")


@pytest.mark.exercise("gather-backward")
@pytest.mark.parametrize("shape, size", ROUNDING_SHAPES, ids=ROUNDING_IDS)
@pytest.mark.parametrize("half", HALF_TYPES, ids=HALF_IDS)
def test_backward_rounding_cpu(up, half, shape, size):
    """float16/bfloat16 on long axes (the weights in float)."""
    grad_out = torch.randn(shape[:2] + size).to(half)
    with poisoned_empty():
        grad_in = bw(grad_out, list(shape[2:]), "tf_legacy", "gather")
    assert_rounded(grad_in, ref_backward(grad_out, shape[2:], "tf_legacy"), what="tf_legacy backward")


@pytest.mark.exercise("gather-backward")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", NHWC_SHAPES, ids=NHWC_IDS)
def test_channels_last_backward_cpu(up, dtype, shape, size, mode):
    check_channels_last_backward(up, "cpu", dtype, shape, size, mode, "gather")


@pytest.mark.exercise("gather-backward")
@pytest.mark.parametrize("method", ["gather", "scatter"])
def test_backward_method_cpu(up, method):
    """On the CPU both names run the gather kernel."""
    check_backward(up, "cpu", torch.float64, (2, 3, 6, 7), (13, 10), "half_pixel", method)


def check_backward_op_scales(device, mode, dtype, method="gather"):
    """The backward op with scale_h / scale_w, against the transposed formula and aten's backward."""
    # out = floor(in * scale) where a scale is given, as F.interpolate makes them
    for in_hw, out_hw, scales in [((7, 9), (11, 15), (1.7, 1.75)), ((7, 9), (4, 20), (0.6, 2.3)),
                                  ((5, 4), (13, 1), (None, 0.45)), ((3, 2), (1, 1), (0.4, 0.6)),
                                  ((7, 9), (4, 20), (0.5, 2.0))]:  # the last: scales that do not give the sizes
        grad_out = torch.randn((2, 3) + out_hw, device=device, dtype=dtype)
        with poisoned_empty():
            grad_in = bw(grad_out, list(in_hw), mode, method, *scales)
        what = f"{mode} backward ({method}), {in_hw} -> {out_hw}, scales {scales}"
        check(grad_in, ref_backward(grad_out, in_hw, mode, scales), what)
        if dtype == torch.float64 and mode in TORCH_MODES:
            # aten's CPU kernel, for the reason test_op_scales gives (its CUDA one would add past a row)
            ref = torch.ops.aten.upsample_bilinear2d_backward(grad_out.cpu(), list(out_hw), [2, 3, *in_hw],
                                                              TORCH_MODES[mode], *scales)
            assert_close64(grad_in, ref, what + " vs aten.upsample_bilinear2d_backward (CPU)")


def check_backward_scale_factor(up, device, mode, recompute):
    """autograd through upsample_bilinear(scale_factor=...): the backward uses the forward's ratio."""
    x = torch.randn(2, 3, 7, 9, device=device, dtype=torch.float64, requires_grad=True)
    for factor in (1.7, (3.3, 0.6)):
        x.grad = None
        y = up.upsample_bilinear(x, scale_factor=factor, mode=mode, recompute_scale_factor=recompute)
        grad_out = torch.randn_like(y)
        with poisoned_empty():
            y.backward(grad_out)
        fh, fw = factor if isinstance(factor, tuple) else (factor, factor)
        scales = (fh, fw) if mode == "half_pixel" and not recompute else (None, None)
        what = f"{mode} backward, scale_factor={factor}, recompute_scale_factor={recompute}"
        assert_close64(x.grad, ref_backward(grad_out, (7, 9), mode, scales), what)
        if mode in TORCH_MODES:
            ref = torch_grad(x, grad_out, TORCH_MODES[mode], scale_factor=factor, recompute_scale_factor=recompute)
            assert_close64(x.grad, ref, what + " vs F.interpolate")


def check_backward_grad_out_layouts(up, device, mode):
    """grad_out channels_last, transposed, sliced, offset and expanded (stride 0)."""
    base = torch.randn(3, 6, 13, 16, device=device, dtype=torch.float64)
    layouts = {
        "channels_last": base.to(memory_format=torch.channels_last),
        "channels_last, one element off an aligned address": misaligned_channels_last(base),
        "transposed": base.transpose(2, 3).contiguous().transpose(2, 3),
        "sliced": base[:, ::2, 1:, 2:],
        "offset": base[1:],
        "expanded-c": base[:, :1].expand(3, 6, 13, 16),
        "expanded-h": base[:, :, :1].expand(3, 6, 13, 16),
        "expanded-all": base[:1, :1, :1, :1].expand(3, 6, 13, 16),
    }
    for name, grad_out in layouts.items():
        with poisoned_empty():
            grad_in = bw(grad_out, [5, 7], mode, "gather")
        assert_close64(grad_in, ref_backward(grad_out, (5, 7), mode), f"{mode} backward, {name} grad_out")
    # what autograd hands over after .sum(): an expanded tensor of ones
    x = torch.randn(2, 3, 6, 5, device=device, dtype=torch.float64, requires_grad=True)
    up.upsample_bilinear(x, (12, 10), mode=mode).sum().backward()
    ones = torch.ones(2, 3, 12, 10, dtype=torch.float64, device=device)
    assert_close64(x.grad, ref_backward(ones, (6, 5), mode), f"{mode} backward after .sum()")


# Non-finite gradients: NaN and +-inf in grad_out reach exactly the input pixels whose ranges
# include them (a tap of weight 0 too: 0 * inf is NaN), no more and no fewer. PyTorch's own
# backward (float64, CPU) is the reference for the masks; its modes are half_pixel and
# align_corners (tf_legacy has the same structure). The ratios are powers of two, so every
# coordinate is exact in any precision and the taps are the same as PyTorch's. Each plane has
# its NaN in a different column, so a sum that reads a column outside its range meets one
# (on the GPU: past a window's count, or, with column packs, before its first real column).
# The last row and column stay finite: in align_corners they read the last pixel through both
# taps with l = 0, which the gather weighs 1 (inf stays inf) and PyTorch's four-term scatter
# 1 and 0 (inf + 0 * inf = NaN).
NONFINITE_CASES = [("half_pixel", (1, 16, 4, 6), (8, 12)), ("half_pixel", (1, 16, 3, 3), (12, 12)),
                   ("half_pixel", (1, 16, 8, 8), (4, 4)), ("half_pixel", (2, 3, 6, 4), (12, 8)),
                   ("half_pixel", (2, 3, 4, 5), (16, 20)), ("half_pixel", (1, 16, 2, 2), (16, 16)),
                   ("align_corners", (1, 16, 5, 5), (9, 9)), ("align_corners", (1, 16, 3, 5), (9, 17)),
                   ("align_corners", (1, 16, 9, 9), (5, 5)), ("align_corners", (2, 3, 5, 3), (9, 5))]
NONFINITE_IDS = [f"{m}-C{s[1]}-{s[2]}x{s[3]}-to-{o[0]}x{o[1]}" for m, s, o in NONFINITE_CASES]


def nonfinite_grad_out(n, c, size, dtype) -> torch.Tensor:
    """A float64 grad_out of dtype's values with one NaN, one inf and one -inf in each plane."""
    gen = torch.Generator().manual_seed(6)
    base = torch.randn(n, c, *size, dtype=torch.float64, generator=gen)
    for p in range(n * c):
        plane = base.view(n * c, *size)[p]
        rows, cols = max(size[0] - 1, 1), max(size[1] - 1, 1)
        plane[(3 * p) % rows, p % cols] = float("nan")
        plane[(5 * p + 1) % rows, (7 * p + 3) % cols] = float("inf")
        plane[(2 * p + 2) % rows, (5 * p + 1) % cols] = -float("inf")
    return base.to(dtype).double()  # what the kernel sees


NONFINITE_MASKS = [("NaN", torch.isnan), ("+inf", lambda t: t == float("inf")), ("-inf", lambda t: t == -float("inf"))]


def check_backward_nonfinite(device, dtype, shape, size, mode, method="gather",
                             layouts=(torch.contiguous_format, torch.channels_last)):
    base = nonfinite_grad_out(*shape[:2], size, dtype)
    ref = torch.ops.aten.upsample_bilinear2d_backward(base, list(size), list(shape), mode == "align_corners",
                                                     None, None)
    for layout in layouts:
        grad_out = base.to(device=device, dtype=dtype).contiguous(memory_format=layout)
        with poisoned_empty():
            got = bw(grad_out, list(shape[2:]), mode, method).cpu().double()
        what = f"{mode} {method}, {'channels_last' if layout is torch.channels_last else 'NCHW'} grad_out {list(base.shape)} with NaN and inf"
        for name, mask in NONFINITE_MASKS:
            wrong = (mask(got) != mask(ref)).nonzero().tolist()
            assert not wrong, (f"{what}: {len(wrong)} elements where {name} should{' not' if not mask(ref)[tuple(wrong[0])] else ''} be, "
                               f"first at (n, c, h, w) = {tuple(wrong[0])}: got {got[tuple(wrong[0])].item()}, "
                               f"expected {ref[tuple(wrong[0])].item()}")
        finite = torch.isfinite(ref)
        check(torch.where(finite, got, 0).to(dtype), torch.where(finite, ref, 0), what + ", the finite elements")


@pytest.mark.exercise("gather-backward")
@pytest.mark.parametrize("mode, shape, size", NONFINITE_CASES, ids=NONFINITE_IDS)
def test_backward_nonfinite_cpu(up, dtype, shape, size, mode):
    check_backward_nonfinite("cpu", dtype, shape, size, mode)


@pytest.mark.exercise("gather-backward")
@pytest.mark.parametrize("mode", MODES)
def test_backward_op_scales_cpu(up, mode, dtype):
    check_backward_op_scales("cpu", mode, dtype)


@pytest.mark.exercise("gather-backward")
@pytest.mark.parametrize("recompute", [False, True], ids=["factor-ratio", "recompute"])
@pytest.mark.parametrize("mode", MODES)
def test_backward_scale_factor_cpu(up, mode, recompute):
    check_backward_scale_factor(up, "cpu", mode, recompute)


@pytest.mark.exercise("gather-backward")
@pytest.mark.parametrize("mode", MODES)
def test_backward_grad_out_layouts_cpu(up, mode):
    check_backward_grad_out_layouts(up, "cpu", mode)


@pytest.mark.exercise("gather-backward")
@pytest.mark.parametrize("shape, size, repeats, layout", [
    ((2, 8, 96, 64), (37, 29), 1, "nchw"), ((4, 8, 256, 256), (64, 64), 12, "nchw"),
    ((8, 32, 64, 64), (128, 128), 4, "nchw"), ((4, 8, 256, 256), (64, 64), 12, "channels_last")],
    ids=["down", "x4-many-tasks", "x0.5-many-tasks", "x4-many-tasks-channels-last"])
def test_gather_same_bits_any_threads(up, shape, size, repeats, layout):
    """The CPU gather gives the same bits with 1 thread and with several, every time: each task
    of parallel_for must own its scratch (line cache, accumulator). Tasks that share one race,
    and a race shows only sometimes, so the shapes with many tasks run several times."""
    grad_out = torch.randn(shape, dtype=torch.float32)
    if layout == "channels_last":
        grad_out = grad_out.contiguous(memory_format=torch.channels_last)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = bw(grad_out, list(size), "half_pixel", "gather")
        torch.set_num_threads(max(threads, 2))
        many = [bw(grad_out, list(size), "half_pixel", "gather") for _ in range(repeats)]
    finally:
        torch.set_num_threads(threads)
    assert_close(one, ref_backward(grad_out, size, "half_pixel"), what=f"gather backward {list(shape)} -> {list(size)}")
    for i, m in enumerate(many):
        assert_bitwise(m, one, what=f"gather backward {list(shape)} -> {list(size)} with {max(threads, 2)} threads "
                       f"vs one (call {i + 1} of {repeats})")


# ----------------------------------------------------------------------------
# gather-cuda: the plain CUDA gather (csrc/gather_plain.cu), run by name through the ladder's op.


# Without a GPU: the GPU-free judge (coursekit/emulate.py) compiles gather_plain.cu (the kernel and
# its launch) and the chapter's plan for the CPU and runs them thread by thread: grad_out in
# guard-paged memory (a read outside it names the kernel, block, thread and offset), grad_in
# poisoned (an element no thread writes is an error), the launch checked as the driver checks
# it. Each case runs twice: the tensors ending where their memory ends, then starting there.
# Shapes: partial blocks along W and H, one pixel, a long row, long sums (a strong upsampling).
EMULATED_SHAPES = [((1, 2, 5, 7), (9, 13)), ((2, 3, 4, 6), (8, 12)), ((1, 3, 9, 11), (4, 5)),
                   ((1, 1, 3, 40), (5, 80)), ((1, 2, 3, 4), (9, 32)), ((2, 2, 1, 1), (3, 2)),
                   ((1, 1, 2, 1), (5, 300)), ((1, 2, 33, 70), (40, 90)), ((1, 1, 2, 3), (150, 200)),
                   ((1, 2, 2, 300), (3, 333)),  # wider than one block of 256 threads
                   # shrunk along W: more input columns than output columns, by more than a warp
                   ((1, 2, 5, 70), (3, 20)), ((1, 1, 4, 300), (2, 40))]
EMULATED_MODES = {"align_corners": 0, "half_pixel": 1, "tf_legacy": 2}


@pytest.fixture(scope="module")
def emulated(judged_source):
    from coursekit import emulate
    return emulate.build("06", judged_source)


def emulated_gather(module, grad_out, input_size, mode, scale_h=None, scale_w=None):
    out = None
    for at_end in (True, False):
        got = module.gather_plain(grad_out, list(input_size), EMULATED_MODES[mode], scale_h, scale_w, at_end,
                                  grad_out.numel())
        if out is not None:
            assert_bitwise(got, out, what=f"{mode} plain gather (emulated), run again")
        out = got
    return out


@pytest.mark.exercise("gather-cuda")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", EMULATED_SHAPES, ids=channel_shape_ids(EMULATED_SHAPES))
def test_gather_plain_emulated(emulated, dtype, shape, size, mode):
    grad_out = torch.randn(shape[:2] + size, dtype=dtype)
    check(emulated_gather(emulated, grad_out, shape[2:], mode), ref_backward(grad_out, shape[2:], mode),
          f"{mode} plain gather (emulated) {list(grad_out.shape)} -> {list(shape[2:])}",
          inputs=taps_of(shape[2:], size, mode, backward=True))


@pytest.mark.exercise("gather-cuda")
@pytest.mark.parametrize("mode", MODES)
def test_gather_plain_more_than_2_32_elements_emulated(emulated, mode):
    """The plain gather through the GPU-free judge on 65535 planes whose grad_out and grad_in both hold
    more than 2^32 elements (float16, 27 GiB in reserved memory: only the pages written take memory),
    zero but the last plane; of the launch only the first block and the last plane's blocks run. A
    32-bit offset (into grad_out's plane, or grad_in's element), signed or unsigned, wraps there."""
    planes, in_hw, out_hw = 65535, (257, 257), (384, 384)
    assert planes * in_hw[0] * in_hw[1] > 2**32 and planes * out_hw[0] * out_hw[1] > 2**32
    torch.manual_seed(0)
    last = torch.randn((1, 1) + out_hw, dtype=torch.float16)
    try:
        got = emulated.gather_plain_last_plane(last, planes, list(in_hw), EMULATED_MODES[mode], 1)
    except RuntimeError as e:
        if "cannot reserve" in str(e):
            pytest.skip(f"this machine does not lend the address space (27 GiB): {e}")
        raise
    check(got[None], ref_backward(last, in_hw, mode),
          f"{mode} plain gather (emulated), the last of {planes} planes {list(out_hw)} -> {list(in_hw)} (more than "
          "2^32 elements in grad_out and in grad_in: are the offsets 64-bit, and signed?)")


@pytest.mark.exercise("gather-cuda")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("half", HALF_TYPES, ids=HALF_IDS)
def test_gather_plain_emulated_sums(emulated, half, mode):
    for shape, size in SUM_SHAPES + ROUNDING_SHAPES:
        grad_out = (torch.rand(shape[:2] + size) + 0.5).to(half)
        assert_rounded(emulated_gather(emulated, grad_out, shape[2:], mode), ref_backward(grad_out, shape[2:], mode),
                       what=f"{mode} plain gather (emulated) sums {list(grad_out.shape)} -> {list(shape[2:])}")


@pytest.mark.exercise("gather-cuda")
@pytest.mark.parametrize("mode", MODES)
def test_gather_plain_emulated_scales(emulated, mode):
    for in_hw, out_hw, scales in [((7, 9), (11, 15), (1.7, 1.75)), ((7, 9), (4, 20), (0.6, 2.3))]:
        grad_out = torch.randn((2, 3) + out_hw, dtype=torch.float64)
        check(emulated_gather(emulated, grad_out, in_hw, mode, *scales), ref_backward(grad_out, in_hw, mode, scales),
              f"{mode} plain gather (emulated), {in_hw} -> {out_hw}, scales {scales}")


@pytest.mark.exercise("gather-cuda")
@pytest.mark.parametrize("mode, shape, size", NONFINITE_CASES, ids=NONFINITE_IDS)
def test_gather_plain_emulated_nonfinite(emulated, shape, size, mode):
    base = nonfinite_grad_out(*shape[:2], size, torch.float32).float()
    ref = torch.ops.aten.upsample_bilinear2d_backward(base.double(), list(size), list(shape),
                                                     mode == "align_corners", None, None)
    got = emulated_gather(emulated, base, shape[2:], mode).double()
    for name, mask in NONFINITE_MASKS:
        wrong = (mask(got) != mask(ref)).nonzero().tolist()
        assert not wrong, (f"{mode} plain gather (emulated) with NaN and inf in grad_out: {len(wrong)} elements where "
                           f"{name} should{' not' if not mask(ref)[tuple(wrong[0])] else ''} be, first at (n, c, h, w) "
                           f"= {tuple(wrong[0])} (a column or row of weight 0 still adds 0 * value: NaN from inf)")


@pytest.mark.exercise("gather-cuda")
@pytest.mark.parametrize("shape, size", [((1, 2, 20, 70), (40, 140)), ((2, 3, 37, 9), (18, 5)),
                                         ((1, 1, 2, 1300), (4, 2600))],
                         ids=["wide", "tall", "wider-than-a-block"])
def test_gather_plain_emulated_stores_along_w(emulated, shape, size):
    """The mapping: neighbouring lanes of a warp write neighbouring grad_in values (x along W), so that
    a warp's stores are one contiguous run (coalesced). Right values from lanes that run along H, or
    blocks of one column, are a GPU's slowest way to store; no value test sees it. The judge notes
    which thread wrote each grad_in element (x86-64 only)."""
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the judge notes stores on x86-64 only")
    pairs, apart, example = emulated.gather_plain_stores(torch.randn(shape[:2] + size), list(shape[2:]), 1)
    assert pairs > 0, (f"no two neighbouring lanes of a warp both wrote grad_in {list(shape)}: blocks of one thread? "
                       "x should run along W, one thread per grad_in column")
    assert apart <= pairs // 4, (
        f"neighbouring lanes of a warp write grad_in values far apart ({apart} of {pairs} pairs of stores, "
        f"{list(shape)}): {example}. x should run along W, the contiguous axis, in the kernel (w from "
        "blockIdx.x * blockDim.x + threadIdx.x) and in the launch (grid.x over W_in), so that a warp's stores are "
        "one contiguous run; rows along x make each lane's store a memory transaction of its own")


@pytest.mark.exercise("gather-cuda")
def test_gather_plain_emulated_many_rows(emulated):
    """524289 input rows: more than a grid's 65535 blocks along y (the rows past them need a loop)."""
    grad_out = torch.randn(1, 1, 3, 3)
    got = emulated.gather_plain(grad_out, [8 * 65535 + 9, 2], 1, None, None, True, 0)
    check(got, ref_backward(grad_out, (8 * 65535 + 9, 2), "half_pixel"),
          "half_pixel plain gather (emulated), 524289 input rows")


@pytest.mark.exercise("gather-cuda")
def test_gather_plain_emulated_many_planes(emulated):
    """70000 planes: more than a grid's 65535 blocks along z (the planes past them need a loop)."""
    grad_out = torch.randn(1, 70000, 2, 3)
    got = emulated.gather_plain(grad_out, [1, 2], 1, None, None, True, 0)
    check(got, ref_backward(grad_out, (1, 2), "half_pixel"), "half_pixel plain gather (emulated), 70000 planes")


@pytest.mark.cuda
@pytest.mark.exercise("gather-cuda")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", CUDA_SHAPES, ids=CUDA_IDS)
def test_gather_plain_cuda(device, dtype, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    grad_out = torch.randn(shape[:2] + size, device="cuda", dtype=dtype)
    with poisoned_empty():
        grad_in = bw(grad_out, list(shape[2:]), mode, PLAIN)
    check(grad_in, ref_backward(grad_out, shape[2:], mode), f"{mode} plain gather {list(grad_out.shape)} -> {list(shape[2:])}")


@pytest.mark.cuda
@pytest.mark.exercise("gather-cuda")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", SUM_SHAPES + ROUNDING_SHAPES, ids=SUM_IDS + ROUNDING_IDS)
@pytest.mark.parametrize("half", HALF_TYPES, ids=HALF_IDS)
def test_gather_plain_sums_cuda(device, half, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_backward_sums("cuda", half, shape, size, mode, PLAIN)


@pytest.mark.cuda
@pytest.mark.exercise("gather-cuda")
@pytest.mark.parametrize("mode", MODES)
def test_gather_plain_scales_cuda(device, mode, dtype):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_backward_op_scales("cuda", mode, dtype, PLAIN)


@pytest.mark.cuda
@pytest.mark.exercise("gather-cuda")
@pytest.mark.parametrize("mode, shape, size", NONFINITE_CASES, ids=NONFINITE_IDS)
def test_gather_plain_nonfinite_cuda(device, dtype, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_backward_nonfinite("cuda", dtype, shape, size, mode, PLAIN, layouts=(torch.contiguous_format,))


@pytest.mark.cuda
@pytest.mark.exercise("gather-cuda")
def test_gather_plain_is_deterministic(device):
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    grad_out = torch.randn(8, 32, 256, 256, device="cuda")
    first = bw(grad_out, [64, 64], "half_pixel", PLAIN)
    assert_close(first, ref_backward(grad_out, (64, 64), "half_pixel"), what="plain gather")
    for _ in range(3):
        assert_bitwise(bw(grad_out, [64, 64], "half_pixel", PLAIN), first, what="plain gather, run again")


# Long sums (about 100 outputs per input index per axis), long rows, and planes and rows past the
# grid's 65535 blocks along z and y (the grid-stride loops).
PLAIN_LONG_SHAPES = [((2, 3, 2, 3), (300, 400)), ((1, 2, 6, 1500), (7, 2900)), ((1, 2, 2, 1), (5, 9000)),
                     ((1, 70000, 1, 2), (2, 3)), ((1, 1, 8 * 65535 + 9, 2), (3, 3))]


@pytest.mark.cuda
@pytest.mark.exercise("gather-cuda")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", PLAIN_LONG_SHAPES, ids=channel_shape_ids(PLAIN_LONG_SHAPES))
def test_gather_plain_long_cuda(device, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    grad_out = torch.randn(shape[:2] + size, device="cuda", dtype=torch.float32)
    with poisoned_empty():
        grad_in = bw(grad_out, list(shape[2:]), mode, PLAIN)
    check(grad_in, ref_backward(grad_out, shape[2:], mode), f"{mode} plain gather {list(grad_out.shape)} -> {list(shape[2:])}")


PLAIN_MEMCHECK_SHAPES = [((1, 2, 5, 7), (9, 13)), ((2, 3, 4, 6), (8, 12)), ((1, 3, 9, 11), (4, 5)),
                         ((1, 1, 3, 40), (5, 80)), ((1, 2, 3, 4), (9, 32))]


@pytest.mark.cuda
@pytest.mark.exercise("gather-cuda")
def test_gather_plain_reads_only_grad_out_cuda(device, chapter_source, tmp_path):
    """Under compute-sanitizer's memcheck, each grad_out ending exactly where its allocation ends."""
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    saved = tmp_path / "gradients.pt"
    code = memcheck_script(chapter_source, f"""
gather = torch.ops.ch06._upsample_bilinear2d_backward_rung
results = []
for shape, size in {PLAIN_MEMCHECK_SHAPES!r}:
    for dtype in (torch.float32, torch.bfloat16):
        g = torch.randn(shape[:2] + tuple(size), device="cuda", dtype=dtype)
        for mode in {MODES!r}:
            results.append((g.cpu(), list(shape[2:]), mode, gather(g, list(shape[2:]), mode, "gather_plain").cpu()))
torch.save(results, {str(saved)!r})
""")
    assert_memcheck_clean(code, "the plain gather on small shapes")
    for grad_out, size, mode, grad_in in torch.load(saved):
        check(grad_in, ref_backward(grad_out, size, mode), f"{mode} plain gather under memcheck {list(grad_out.shape)} -> {size}")


# ----------------------------------------------------------------------------
# The dispatch's CUDA gathers (not graded: the later rungs of the ladder; the exercise is the
# plain gather above). Through the public op, so every kernel the table picks is covered.


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", CUDA_SHAPES, ids=CUDA_IDS)
def test_backward_cuda(up, device, dtype, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_backward(up, "cuda", dtype, shape, size, mode, "gather")


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", SUM_SHAPES + ROUNDING_SHAPES, ids=SUM_IDS + ROUNDING_IDS)
@pytest.mark.parametrize("half", HALF_TYPES, ids=HALF_IDS)
def test_backward_sums_cuda(up, device, half, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_backward_sums("cuda", half, shape, size, mode, "gather")


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
def test_backward_op_scales_cuda(up, device, mode, dtype):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_backward_op_scales("cuda", mode, dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("recompute", [False, True], ids=["factor-ratio", "recompute"])
@pytest.mark.parametrize("mode", MODES)
def test_backward_scale_factor_cuda(up, device, mode, recompute):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_backward_scale_factor(up, "cuda", mode, recompute)


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
def test_backward_grad_out_layouts_cuda(up, device, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_backward_grad_out_layouts(up, "cuda", mode)


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", NHWC_SHAPES, ids=NHWC_IDS)
def test_channels_last_backward_cuda(up, device, dtype, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_channels_last_backward(up, "cuda", dtype, shape, size, mode, "gather")


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", NHWC_SHAPES, ids=NHWC_IDS)
def test_channels_last_scatter_cuda(up, device, dtype, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_channels_last_backward(up, "cuda", dtype, shape, size, mode, "scatter")


@pytest.mark.cuda
@pytest.mark.parametrize("mode, shape, size", NONFINITE_CASES, ids=NONFINITE_IDS)
def test_backward_nonfinite_cuda(up, device, dtype, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_backward_nonfinite("cuda", dtype, shape, size, mode)


@pytest.mark.cuda
def test_gather_is_deterministic(up, device):
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    grad_out = torch.randn(8, 32, 256, 256, device="cuda")
    first = bw(grad_out, [64, 64], "half_pixel", "gather")
    assert_close(first, ref_backward(grad_out, (64, 64), "half_pixel"), what="gather backward")
    for _ in range(5):
        assert_bitwise(bw(grad_out, [64, 64], "half_pixel", "gather"), first, what="gather backward, run again")


# A strong upsampling (ranges of about 100 outputs per input index, per axis), in both layouts:
# long per-pixel sums over grad_out, in NCHW and with step = C. The last two: long rows (1500
# input columns, 2900 output columns), and one input column read by 9000 outputs.
STRONG_SHAPES = [((2, 3, 2, 3), (300, 400)), ((1, 8, 3, 2), (250, 190)), ((1, 5, 4, 4), (97, 301)),
                 ((1, 2, 6, 1500), (7, 2900)), ((1, 2, 2, 1), (5, 9000))]


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", STRONG_SHAPES, ids=channel_shape_ids(STRONG_SHAPES))
def test_gather_strong_upsampling_cuda(up, device, dtype, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    grad_out = torch.randn(shape[:2] + size, device="cuda", dtype=dtype)
    ref = ref_backward(grad_out, shape[2:], mode)
    for name, g in [("NCHW", grad_out), ("channels_last", grad_out.contiguous(memory_format=torch.channels_last))]:
        with poisoned_empty():
            grad_in = bw(g, list(shape[2:]), mode, "gather")
        check(grad_in, ref, f"{mode} gather, {name} grad_out {list(grad_out.shape)} -> {list(shape[2:])}")


# Column packs: the NCHW float32 gather of an upsampling by more than 3 along W (W_out a multiple
# of 4, an aligned grad_out) loads its window 4 columns at a time from a pack boundary, 4 planes
# at a time. Plane counts with a remainder (5, 12) and an RGB image's 3, a non-integer ratio,
# windows longer than one pack window (x8); then the same grad_out 4 bytes past a 16-byte
# boundary (scalar loads).
PACK_SHAPES = [((1, 5, 6, 7), (24, 28)), ((1, 12, 5, 9), (20, 36)), ((2, 3, 4, 5), (17, 20)),
               ((1, 2, 3, 4), (9, 32))]


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", PACK_SHAPES, ids=channel_shape_ids(PACK_SHAPES))
def test_gather_column_packs_cuda(up, device, dtype, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_backward(up, "cuda", dtype, shape, size, mode, "gather")
    numel = shape[0] * shape[1] * size[0] * size[1]
    grad_out = torch.randn(numel + 1, device="cuda", dtype=dtype)[1:].view(shape[:2] + size)
    with poisoned_empty():
        grad_in = bw(grad_out, list(shape[2:]), mode, "gather")
    check(grad_in, ref_backward(grad_out, shape[2:], mode),
          f"{mode} gather, grad_out {list(grad_out.shape)} one element past an aligned start -> {list(shape[2:])}")


# Every load inside grad_out: a window's columns past `count` (or before `lo`) must not be loaded,
# even when the sum would skip their values; at the end of the last row of the last plane they
# lie past the tensor. Only a sanitizer sees such a read, so this runs the gather on small
# shapes under compute-sanitizer's memcheck, each grad_out ending exactly where its
# allocation ends: the column-pack shapes aligned and one element off, and scalar-load shapes
# of every window bound, in both layouts and a 2-byte type.
MEMCHECK_SHAPES = PACK_SHAPES + [((1, 2, 5, 7), (9, 13)), ((2, 3, 4, 6), (8, 12)), ((1, 4, 3, 5), (9, 16)),
                                 ((1, 3, 9, 11), (4, 5)), ((1, 8, 3, 3), (40, 40)),
                                 ((1, 2, 3, 8), (6, 16)), ((1, 1, 3, 40), (5, 80)),  # these two: the x2 kernel
                                 ((1, 2, 3, 8), (12, 32)), ((1, 1, 2, 40), (5, 160)),  # and the x4 kernel
                                 ((1, 3, 3, 16), (6, 32)),  # channels-last: the RGB x2 kernel,
                                 ((1, 16, 3, 5), (7, 10)),  # the pair kernel,
                                 ((1, 16, 3, 5), (6, 10)), ((1, 64, 17, 18), (34, 36))]  # the tile kernel


@pytest.mark.cuda
def test_gather_reads_only_grad_out_cuda(device, chapter_source, tmp_path):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    saved = tmp_path / "gradients.pt"
    code = memcheck_script(chapter_source, f"""
gather = torch.ops.ch06._upsample_bilinear2d_backward_kernel
results = []
for shape, size in {MEMCHECK_SHAPES!r}:
    for dtype in (torch.float32, torch.bfloat16):
        numel = shape[0] * shape[1] * size[0] * size[1]
        for skip in (0, 1):  # the tensor ends where its allocation ends; skip 1: one element off an aligned start
            g = torch.randn(numel + skip, device="cuda", dtype=dtype)[skip:].view(shape[:2] + tuple(size))
            for mode in {MODES!r}:
                results.append((g.cpu(), list(shape[2:]), mode, gather(g, list(shape[2:]), mode, "gather").cpu()))
                if skip == 0:
                    cl = torch.randn(numel, device="cuda", dtype=dtype).view(shape[0], size[0], size[1], shape[1])
                    cl = cl.permute(0, 3, 1, 2)
                    results.append((cl.cpu(), list(shape[2:]), mode, gather(cl, list(shape[2:]), mode, "gather").cpu()))
torch.save(results, {str(saved)!r})
""")
    assert_memcheck_clean(code, "the gather backward on small shapes")
    # and the gradients of that run are right (a kernel that reads nothing is memcheck-clean too)
    for grad_out, size, mode, grad_in in torch.load(saved):
        layout = "NCHW" if grad_out.is_contiguous() else "channels_last"
        check(grad_in, ref_backward(grad_out, size, mode),
              f"{mode} gather under memcheck, {layout} {grad_out.dtype} grad_out {list(grad_out.shape)} -> {size}")


# ----------------------------------------------------------------------------
# The chapter as a whole (not graded): scatter, autograd, the operator, bad input.


# The gathers of an exact ratio along W are not the exercise's code, so they are tested here:
#   x2 in half_pixel: gather_times_kernel (NCHW, and channels-last with 3 channels) and
#     gather_twice_nhwc_tile_kernel (channels-last, H an exact x2 too) or gather_twice_nhwc_kernel
#     (channels-last, H resized by another ratio);
#   x4 in half_pixel: gather_times_kernel (NCHW);
#   x0.5 in half_pixel and tf_legacy: gather_halve_kernel (NCHW).
# They take float32, float16 and bfloat16 with 16 bytes' worth of values (4 or 8) dividing W_in
# (NCHW, channels-last with 3 channels) or C (other channels-last) and aligned tensors; the other
# modes and float64 take the general gather. They are checked against the reference, and against
# the general gather, which the same grad_out one element past an aligned address takes. The x2
# and x4 kernels sum in the general gather's order except in column 1 (see gather_times_kernel):
# the same bits elsewhere, and in column 1 no further off than reordering the sum can make it;
# the x0.5 kernel the same bits everywhere. When H has the same exact ratio (x2, x0.5), their
# rows need no plan either, and no plan kernel runs; at x4 the rows always take the plan.
# NCHW shapes: one thread's columns, several warps' (a warp's neighbour across the shuffle), a row
# that ends inside a warp, long rows, H resized by other ratios (the row plan), an odd H. Rows of
# at most 16 groups of V columns share a warp between planes: W_in <= 64 in float32, <= 128 in
# 2-byte types, with a plane count that fills some warps and leaves the last one part empty.
TWICE_SHAPES = [((1, 3, 5, 8), (10, 16)), ((2, 3, 7, 16), (14, 32)), ((1, 2, 6, 40), (12, 80)),
                ((1, 1, 3, 264), (5, 528)), ((1, 2, 3, 2056), (7, 4112)), ((1, 3, 9, 16), (4, 32)),
                ((1, 1, 1, 8), (2, 16)), ((1, 2, 2, 24), (4, 48)), ((4, 9, 3, 24), (6, 48))]
# x4: the same kinds of shapes (two values on either side of a thread's columns cross the shuffle;
# W_in = 20 and 36 are multiples of 4, not of 8), H by x4 (its plan), x2 and a downsampling.
QUAD_SHAPES = [((1, 3, 5, 8), (20, 32)), ((2, 3, 7, 16), (28, 64)), ((1, 2, 6, 40), (24, 160)),
               ((1, 1, 3, 264), (12, 1056)), ((1, 2, 2, 2056), (5, 8224)), ((1, 3, 9, 16), (4, 64)),
               ((1, 1, 1, 8), (4, 32)), ((1, 2, 3, 20), (6, 80)), ((1, 1, 2, 36), (8, 144)),
               ((2, 19, 3, 8), (12, 32))]
# x0.5: W_in = 20 is a multiple of 4, not of 8 (bfloat16 and float16 take the general gather).
HALVE_SHAPES = [((1, 3, 8, 16), (4, 8)), ((2, 3, 14, 32), (7, 16)), ((1, 2, 12, 80), (6, 40)),
                ((1, 1, 5, 528), (3, 264)), ((1, 2, 7, 4112), (3, 2056)), ((1, 3, 4, 32), (9, 16)),
                ((1, 2, 6, 20), (3, 10)), ((1, 1, 2, 8), (1, 4))]
# Channels-last x2: a thread owns two neighbouring pixels, so odd and even W (the last pair half
# empty), W = 1 and 2 (both edges in one pair), H = 1; C = 12 is 16 bytes' worth in float32 only;
# H resized by another ratio (the row plan); rows of many pairs and several images.
# When H is an exact x2 too, the tile kernel takes them (tiles of 8 rows x 64 / G pixels x G
# channel packs, G = 8, 4, 2 or 1, the most that divide C / V): interior tiles (H past 16, W past
# 64 / G) and tiles cut by the image's edges, each G in one dtype or another (C = 8 .. 64, 192:
# several tiles of channels); the pair kernel keeps H resized by another ratio (C = 8, 16, 64).
NHWC_TWICE_SHAPES = [((1, 8, 5, 7), (10, 14)), ((2, 16, 6, 8), (12, 16)), ((1, 24, 3, 1), (6, 2)),
                     ((1, 8, 1, 3), (2, 6)), ((1, 12, 4, 6), (8, 12)), ((1, 8, 9, 10), (4, 20)),
                     ((2, 32, 7, 33), (14, 66)), ((1, 8, 2, 2), (4, 4)),
                     ((2, 64, 19, 21), (38, 42)), ((1, 192, 9, 10), (18, 20)), ((1, 64, 1, 1), (2, 2)),
                     ((1, 32, 17, 40), (34, 80)), ((1, 64, 20, 18), (13, 36)), ((2, 16, 5, 7), (9, 14)),
                     ((1, 16, 19, 72), (38, 144)), ((1, 8, 17, 130), (34, 260)), ((1, 12, 17, 130), (34, 260))]
# Channels-last RGB x2: a thread owns 3 packs (V pixels of 3 channels) and takes one pixel's 3
# values from either neighbour: W a multiple of 8 and of 4 only, a row of several warps, H = 1,
# H resized by another ratio, narrow rows (a warp shared by images), several images.
RGB_TWICE_SHAPES = [((1, 3, 5, 8), (10, 16)), ((2, 3, 6, 12), (12, 24)), ((1, 3, 3, 320), (6, 640)),
                    ((1, 3, 4, 264), (7, 528)), ((3, 3, 1, 16), (2, 32)), ((5, 3, 2, 24), (4, 48))]
EXACT_CASES = ([("x2", "NCHW", s, o) for s, o in TWICE_SHAPES] + [("x4", "NCHW", s, o) for s, o in QUAD_SHAPES]
               + [("x0.5", "NCHW", s, o) for s, o in HALVE_SHAPES]
               + [("x2", "channels_last", s, o) for s, o in NHWC_TWICE_SHAPES + RGB_TWICE_SHAPES])
EXACT_IDS = [f"{r}-{l}-{i}" for (r, l, _, _), i in
             zip(EXACT_CASES, channel_shape_ids([(s, o) for _, _, s, o in EXACT_CASES]))]


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ratio, layout, shape, size", EXACT_CASES, ids=EXACT_IDS)
def test_gather_exact_ratio_cuda(up, device, dtype, ratio, layout, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    n, c = shape[:2]
    numel = n * c * size[0] * size[1]
    cl = layout == "channels_last"

    def grad_out_at(offset: int, values: torch.Tensor) -> torch.Tensor:
        """values, in grad_out's layout, `offset` elements past the start of a fresh allocation."""
        buf = torch.empty(numel + offset, device="cuda", dtype=dtype)[offset:]
        t = buf.view(n, *size, c).permute(0, 3, 1, 2) if cl else buf.view(n, c, *size)
        return t.copy_(values)

    values = torch.randn(n, c, *size, device="cuda", dtype=dtype)
    grad_out, shifted = grad_out_at(0, values), grad_out_at(1, values)
    what = f"{mode} gather, {ratio} along W, {layout} {list(grad_out.shape)} -> {list(shape[2:])}, {dtype}"
    with poisoned_empty():
        fast = bw(grad_out, list(shape[2:]), mode, "gather")
    general = bw(shifted, list(shape[2:]), mode, "gather")
    check(fast, ref_backward(grad_out, shape[2:], mode), what)
    modes = ["half_pixel", "tf_legacy"] if ratio == "x0.5" else ["half_pixel"]
    # Which kernel takes the call is the dispatch table's answer (csrc/dispatch.cu), and the
    # profiler must see that kernel launched; test_dispatch_table_cuda pins the table itself.
    name = kernel_name(grad_out, shape[2:], mode)
    takes = name in EXACT_GATHERS
    names = cuda_kernels(lambda: bw(grad_out, list(shape[2:]), mode, "gather"))
    assert any(KERNEL_SYMBOLS[name] in k for k in names), f"{what}: the table names {name}; launched: {names}"
    if takes:  # rows in closed form: no plan at all (other rows read a plan, kept since the first call)
        closed = name not in ("gather_x4", "gather_nhwc_x2")
        closed = closed and (size[0] == 2 * shape[2] if ratio == "x2" else shape[2] == 2 * size[0])
        assert not (closed and any("plan_kernel" in k for k in names)), f"{what}: kernels launched: {names}"
    other = kernel_name(shifted, shape[2:], mode)
    assert other in ("gather_planes", "gather_column_packs", "gather_nhwc"), f"{what}: one element off, it took {other}"
    if not takes:  # both are a general gather
        return
    others = torch.arange(shape[3], device="cuda") != (-1 if ratio == "x0.5" else 1)
    assert_bitwise(fast[..., others], general[..., others], what=what + ", vs the general gather")
    if shape[3] > 1:
        # Column 1: the same `terms` products, summed in another order. Two orders of a float32 sum
        # differ by at most 2 (terms - 1) eps sum|product| (the gather of |grad_out|), then one
        # rounding to dtype.
        factor = 4 if ratio == "x4" else 2
        terms = (2 * factor + factor // 2) * (2 * -(-size[0] // shape[2]) + 2)  # columns x rows reading it
        magnitude = bw(shifted.abs(), list(shape[2:]), mode, "gather")[..., 1].double()
        bound = (2 * (terms - 1) * torch.finfo(torch.float32).eps * magnitude
                 + torch.finfo(dtype).eps * general[..., 1].double().abs())
        excess = (fast[..., 1].double() - general[..., 1].double()).abs() - bound
        assert excess.max() <= 0, (f"{what}, column 1 vs the general gather: off by more than a reordered sum can "
                                   f"be, by {excess.max().item():.3g} past the bound")
    # NaN and inf reach the same pixels as in the general gather (every mode) ...
    bad = nonfinite_grad_out(n, c, size, dtype).to(device="cuda", dtype=dtype)
    fast, general = (bw(grad_out_at(offset, bad), list(shape[2:]), mode, "gather").cpu() for offset in (0, 1))
    for name, mask in NONFINITE_MASKS:
        wrong = (mask(fast) != mask(general)).nonzero().tolist()
        assert not wrong, (f"{what}, grad_out with NaN and inf: {len(wrong)} elements where {name} differs from the "
                           f"general gather, first at (n, c, h, w) = {tuple(wrong[0])}: got {fast[tuple(wrong[0])]}, "
                           f"the general gather {general[tuple(wrong[0])]}")
    # ... and as in PyTorch's backward (which has no tf_legacy). Not with an axis of size 1: there
    # both taps of every output are pixel 0, with weights 1 - l and l; PyTorch multiplies grad_out
    # by each (an inf times a weight 0 is NaN), the gather by their sum, 1.
    if mode == "half_pixel" and min(shape[2:]) > 1:
        check_backward_nonfinite("cuda", dtype, shape, size, mode)


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, size", CUDA_SHAPES, ids=CUDA_IDS)
def test_scatter_backward_cuda(up, device, dtype, shape, size, mode):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_backward(up, "cuda", dtype, shape, size, mode, "scatter")


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("half", HALF_TYPES, ids=HALF_IDS)
def test_scatter_sums_cuda(up, device, half, mode):
    """The scatter adds into a float buffer for float16/bfloat16 and rounds once."""
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    for shape, size in SUM_SHAPES:
        check_backward_sums("cuda", half, shape, size, mode, "scatter")


def test_gather_equals_scatter(up, device, dtype):
    x = torch.randn(2, 5, 13, 21, device=device, dtype=dtype, requires_grad=True)
    grad_out = torch.randn(2, 5, 40, 50, device=device, dtype=dtype)
    grads = {}
    for method in ("gather", "scatter"):
        x.grad = None
        up.upsample_bilinear(x, (40, 50), backward=method).backward(grad_out)
        grads[method] = x.grad.clone()
    ref = ref_backward(grad_out, (13, 21), "half_pixel")
    for method, grad in grads.items():
        check(grad, ref, f"{method} backward")


@pytest.mark.parametrize("mode", MODES)
def test_double_backward(up, device, mode):
    """The backward is linear in grad_out; its derivative is the forward (with the same ratios)."""
    x = torch.randn(2, 3, 5, 7, device=device, dtype=torch.float64, requires_grad=True)
    for kwargs, size, scales in [(dict(size=(9, 4)), (9, 4), (None, None)),
                                 (dict(scale_factor=(1.7, 0.6)), (8, 4),
                                  (1.7, 0.6) if mode == "half_pixel" else (None, None))]:
        y = up.upsample_bilinear(x, mode=mode, **kwargs)
        grad_out = torch.randn_like(y, requires_grad=True)
        (grad_x,) = torch.autograd.grad(y, x, grad_out, create_graph=True)
        assert_close64(grad_x, ref_backward(grad_out, (5, 7), mode, scales), f"{mode} backward, {kwargs}")
        v = torch.randn_like(grad_x)
        (grad_grad,) = torch.autograd.grad(grad_x, grad_out, v)
        assert_close64(grad_grad, ref_forward(v, size, mode, scales), f"{mode} double backward, {kwargs}")
    # the backward op by itself, with scales
    g = torch.randn(2, 3, 11, 6, device=device, dtype=torch.float64, requires_grad=True)
    gi = bw(g, [5, 7], mode, "gather", 2.3, 0.9)
    v = torch.randn_like(gi)
    (gg,) = torch.autograd.grad(gi, g, v)
    assert_close64(gg, ref_forward(v, (11, 6), mode, (2.3, 0.9)), f"{mode} derivative of the backward op")


@pytest.mark.parametrize("mode", MODES)
def test_gradcheck(up, device, mode):
    x = torch.randn(2, 2, 5, 7, device=device, dtype=torch.float64, requires_grad=True)
    for size in [(9, 4), (1, 13)]:
        assert torch.autograd.gradcheck(lambda t: up.upsample_bilinear(t, size, mode=mode), (x,))
        assert torch.autograd.gradgradcheck(lambda t: up.upsample_bilinear(t, size, mode=mode), (x,))


def test_opcheck(up, device):
    x = torch.randn(2, 3, 5, 6, device=device, requires_grad=True)
    xl = x.detach().contiguous(memory_format=torch.channels_last).requires_grad_()
    for args in ([x, [9, 4], "half_pixel"], [x, [3, 11], "tf_legacy", None, None, "scatter"],
                 [x, [8, 8], "half_pixel", 1.7, 1.5], [x, [8, 8], "align_corners", None, 2.0], [xl, [9, 4], "half_pixel"]):
        torch.library.opcheck(torch.ops.ch06.upsample_bilinear2d, args)
    g = torch.randn(2, 3, 9, 4, device=device, requires_grad=True)
    for args in ([g, [5, 6], "align_corners", "gather"], [g, [5, 6], "tf_legacy", "scatter", 1.7, None]):
        torch.library.opcheck(torch.ops.ch06.upsample_bilinear2d_backward, args)


@pytest.mark.parametrize("layout", ["contiguous"] + list(LAYOUTS))
def test_fake_strides_match_eager(up, device, layout):
    """The fake kernels (what torch.compile and torch.export trace with) give every op's output
    the strides the real kernel gives it, in every input layout: a fake that makes NCHW outputs
    for a channels-last input lets a compiled model's later ops assume the wrong strides."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    as_layout = LAYOUTS.get(layout, lambda t: t)
    x = as_layout(torch.randn(3, 4, 5, 6, device=device))
    g = as_layout(torch.randn(3, 4, 9, 8, device=device))
    calls = [("upsample_bilinear2d", lambda t: op(t, [9, 8], "half_pixel"), x),
             ("upsample_bilinear2d_backward", lambda t: bw(t, [5, 6], "half_pixel", "gather"), g),
             ("_upsample_bilinear2d_kernel",
              lambda t: torch.ops.ch06._upsample_bilinear2d_kernel(t, [9, 8], "half_pixel", None, None), x),
             ("_upsample_bilinear2d_backward_kernel",
              lambda t: torch.ops.ch06._upsample_bilinear2d_backward_kernel(t, [5, 6], "half_pixel", "gather"), g)]
    for name, fn, t in calls:
        if name.startswith("_") and not (t.is_contiguous() or t.is_contiguous(memory_format=torch.channels_last)):
            continue  # the kernel ops take the layouts the public ops hand them
        eager = fn(t)
        mode = FakeTensorMode()
        with mode:
            fake = fn(mode.from_tensor(t))
        assert (fake.shape, fake.stride(), fake.dtype) == (eager.shape, eager.stride(), eager.dtype), (
            f"{name}, {layout} input {list(t.shape)} strides {t.stride()}: the fake kernel gives shape "
            f"{list(fake.shape)} strides {fake.stride()} {fake.dtype}, the real one {list(eager.shape)} strides "
            f"{eager.stride()} {eager.dtype}: register_fake must allocate as the real kernel does")


def test_compile_fullgraph(up, device):
    """The fake kernels let torch.compile trace through the op without a graph break."""
    x = torch.randn(2, 3, 5, 6, device=device)

    def f(t):
        return up.upsample_bilinear(t * 2, (9, 4), mode="tf_legacy").sum(dim=1)

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), f(x))


@pytest.mark.parametrize("shape", [(0, 3, 4, 4), (2, 0, 4, 4)])
def test_empty_batch_or_channels(up, device, shape):
    x = torch.randn(shape, device=device, requires_grad=True)
    out = up.upsample_bilinear(x, (7, 9))
    assert out.shape == shape[:2] + (7, 9)
    out.sum().backward()
    assert x.grad.shape == shape
    g = torch.randn(shape[:2] + (7, 9), device=device)
    assert bw(g, [4, 4], "half_pixel", "gather").shape == shape
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    fx, fg = mode.from_tensor(x.detach()), mode.from_tensor(g)
    with mode:
        assert op(fx, [7, 9], "half_pixel").shape == shape[:2] + (7, 9)
        assert bw(fg, [4, 4], "half_pixel", "gather").shape == shape


def _bad_op_calls():
    """(function, args, message, exception type): one wrong thing per call, every argument of both ops.
    A bad value raises ValueError, a bad dtype TypeError, as PyTorch's own checks do
    (TORCH_CHECK_VALUE, TORCH_CHECK_TYPE)."""
    x = torch.randn(2, 3, 4, 5)
    g = torch.randn(2, 3, 8, 10)
    F, B = "upsample_bilinear2d", "upsample_bilinear2d_backward"
    rank = "{op}: {name} must be 4-D (N, C, H, W), got shape {shape}"
    dtype = "{op}: {name} must be float64, float32, float16 or bfloat16, got {got}"
    hw = "{op}: {name} must be (H, W) with H >= 1 and W >= 1, got {got}"
    scale = "{op}: {name} must be a finite number > 0 or None, got {got}"
    mode = '{op}: mode must be "align_corners", "half_pixel" or "tf_legacy", got "{got}"'
    method = '{op}: backward method must be "gather" or "scatter", got "{got}"'
    cases = {}
    for fn, name, t, rest in [(op, "x", x, ([8, 10], "half_pixel")), (bw, "grad_out", g, ([4, 5], "half_pixel", "gather"))]:
        o = F if fn is op else B
        for bad in (t[0, 0, 0, 0], t[0, 0, 0], t[0, 0], t[0], t[None]):
            cases[f"{o}-{name}-rank-{bad.dim()}"] = (fn, (bad, *rest), rank.format(op=o, name=name, shape=list(bad.shape)),
                                                     ValueError)
        for dt, got in [(torch.int32, "Int"), (torch.int64, "Long"), (torch.bool, "Bool"),
                        (torch.complex64, "ComplexFloat"), (torch.float8_e5m2, "Float8_e5m2")]:
            cases[f"{o}-{name}-{got}"] = (fn, (t.to(dt), *rest), dtype.format(op=o, name=name, got=got), TypeError)
        to = " to interpolate from" if fn is op else ""
        for axis, bad in (("H", t[:, :, :0]), ("W", t[:, :, :, :0])):
            cases[f"{o}-{name}-{axis}-0"] = (
                fn, (bad, *rest), f"{o}: {name} must have H >= 1 and W >= 1{to}, got shape {list(bad.shape)}", ValueError)
    for fn, name, head, tail in [(op, "size", (x,), ("half_pixel",)), (bw, "input_size", (g,), ("half_pixel", "gather"))]:
        o = F if fn is op else B
        for bad in ([8], [8, 10, 3], [], [0, 10], [8, 0], [-3, 10], [8, -1]):
            cases[f"{o}-{name}-{bad}"] = (fn, (*head, bad, *tail), hw.format(op=o, name=name, got=bad), ValueError)
    for fn, args in [(op, (x, [8, 10], "half_pixel")), (bw, (g, [4, 5], "half_pixel", "gather"))]:
        o = F if fn is op else B
        for name, good in (("scale_h", 1.5), ("scale_w", 1.5)):
            for bad, got in [(-2.0, "-2"), (0.0, "0"), (float("inf"), "inf"), (float("nan"), "nan"), (-1.5, "-1.5")]:
                scales = (bad, good) if name == "scale_h" else (good, bad)
                cases[f"{o}-{name}-{got}"] = (fn, (*args, *scales), scale.format(op=o, name=name, got=got), ValueError)
    cases[f"{F}-mode"] = (op, (x, [8, 10], "bicubic"), mode.format(op=F, got="bicubic"), ValueError)
    cases[f"{F}-mode-empty"] = (op, (x, [8, 10], ""), mode.format(op=F, got=""), ValueError)
    cases[f"{F}-backward"] = (op, (x, [8, 10], "half_pixel", None, None, "atomic"), method.format(op=F, got="atomic"),
                              ValueError)
    cases[f"{B}-mode"] = (bw, (g, [4, 5], "nearest", "gather"), mode.format(op=B, got="nearest"), ValueError)
    cases[f"{B}-method"] = (bw, (g, [4, 5], "half_pixel", "sum"), method.format(op=B, got="sum"), ValueError)
    return cases


BAD_CALLS = _bad_op_calls()


@pytest.mark.parametrize("how", ["eager", "fake", "meta"])
@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_bad_op_arguments(up, case, how):
    """Every argument check, eagerly, under FakeTensorMode and on meta tensors (the fake kernels in
    upsample.py), with the same exception type and message."""
    import re

    from torch._subclasses.fake_tensor import FakeTensorMode

    fn, args, message, exc = BAD_CALLS[case]
    if how == "eager":
        with expect_error(re.escape(message), exc, what=f"{case}, eager"):
            fn(*args)
    elif how == "meta":
        meta = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
        with expect_error(re.escape(message), exc, what=f"{case}, on meta tensors"):
            fn(*meta)
    else:
        mode = FakeTensorMode()
        fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        with mode, expect_error(re.escape(message), exc, what=f"{case}, under FakeTensorMode"):
            fn(*fake)


@pytest.mark.parametrize("case, pattern", [
    ("upsample_bilinear2d-x-rank-3", r"x must be 4-D \(N, C, H, W\), got shape \[3, 4, 5\]"),
    ("upsample_bilinear2d-x-Long", r"x must be float64, float32, float16 or bfloat16, got Long"),
    ("upsample_bilinear2d-x-W-0", r"x must have H >= 1 and W >= 1, got shape \[2, 3, 4, 0\]"),
    ("upsample_bilinear2d-size-[8, 0]", r"size must be \(H, W\) with H >= 1 and W >= 1"),
    ("upsample_bilinear2d-scale_h-nan", r"scale_h must be a finite number > 0 or None, got nan"),
    ("upsample_bilinear2d_backward-grad_out-rank-5", r"grad_out must be 4-D"),
    ("upsample_bilinear2d_backward-input_size-[8]", r"input_size must be \(H, W\)"),
    ("upsample_bilinear2d_backward-method", r'backward method must be "gather" or "scatter", got "sum"'),
], ids=lambda v: v if v in BAD_CALLS else "")
def test_kernel_ops_check_too(up, case, pattern):
    """The kernel operators behind the public ones check again what memory safety depends on:
    called directly with a bad argument they fail (RuntimeError, from C++) instead of reading
    outside a tensor."""
    fn, args, _, _ = BAD_CALLS[case]
    kernel = (torch.ops.ch06._upsample_bilinear2d_kernel if fn is op
              else torch.ops.ch06._upsample_bilinear2d_backward_kernel)
    with expect_error(pattern, what=f"{case}, the kernel operator"):
        kernel(*(args[:5] if fn is op else args))  # the forward's kernel has no `backward` argument


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(), r"give exactly one of size and scale_factor"),
        (dict(size=4, scale_factor=2.0), r"give exactly one of size and scale_factor"),
        (dict(size=(4, 0)), r"size must be integers >= 1, got \(4, 0\)"),
        (dict(size=(4, 5, 6)), r"size must be one value or \(H, W\), got \(4, 5, 6\)"),
        (dict(scale_factor=0.1), r"scale_factor \(0.1, 0.1\) turns input size \(4, 5\) into \(0, 0\)"),
        (dict(scale_factor=-1.0), r"scale_factor must be finite numbers > 0"),
        (dict(scale_factor=(2.0, 2.0, 2.0)), r"scale_factor must be one value or \(H, W\)"),
        (dict(size=8, mode="linear"), r"mode must be one of"),
        (dict(size=8, backward="atomic"), r"backward must be one of"),
    ],
)
def test_bad_wrapper_arguments(up, kwargs, message):
    x = torch.randn(2, 3, 4, 5)
    with expect_error("upsample_bilinear: " + message, ValueError):
        up.upsample_bilinear(x, **kwargs)
    with expect_error(r"upsample_bilinear: x must be a 4-D \(N, C, H, W\) tensor, got \[4, 5\]", ValueError):
        up.upsample_bilinear(x[0, 0], 8)


@pytest.mark.cuda
def test_large_grids(up, device):
    """More planes, and more rows, than 65535 blocks cover: the grid-stride loops.

    With W_out = 1 the blocks are 32 x 8 threads. A forward thread owns 8 output
    rows, so 4.2M rows need more than 65535 blocks along y; the scatter backward
    has one thread per output row, so 600k rows do; a channels-last gather thread
    takes 4 input rows of pixels, so 300k of them do. float64: each input pixel
    here sums 200k gradient terms, and in float32 that tests rounding, not indexing.
    """
    if device != "cuda":
        pytest.skip("the CUDA launch configuration's test")
    check_forward(up, "cuda", torch.float64, (1, 1, 3, 1), (4_200_001, 1), "half_pixel")
    for shape, size in [((1, 300_000, 1, 2), (2, 3)), ((1, 1, 3, 1), (600_000, 1))]:
        check_forward(up, "cuda", torch.float64, shape, size, "half_pixel")
        check_backward(up, "cuda", torch.float64, shape, size, "half_pixel", "gather")
        check_backward(up, "cuda", torch.float64, shape, size, "half_pixel", "scatter")
    # Channels-last: a gather thread takes 4 rows of pixels (n, h), so 300k of them need more than
    # 65535 blocks along y; here every row is an image of its own.
    check_channels_last_backward(up, "cuda", torch.float64, (300_001, 2, 1, 2), (2, 3), "half_pixel", "gather")


def _so_path(ext) -> str:
    """The compiled library: the JIT build's module, or an installed package's _C."""
    return getattr(ext, "_C", ext).__file__


@pytest.mark.exercise("gather-backward")
@pytest.mark.parametrize("shape, size", [((1, 1, 1, 16000), (16000, 1)), ((1, 1, 16000, 1), (1, 16000))],
                         ids=["one-row-to-16000-rows", "one-column-to-16000-columns"])
def test_backward_long_ranges_cpu(up, ext, shape, size):
    """One input row read by 16000 output rows: a gather range as long as H_out. The CPU backward
    keeps a bounded number of grad_out lines per task (O(W) memory): measured in a fresh process,
    the peak memory must not grow by more than 200 MB (a cache of the whole range takes 16000 lines
    of 16000 floats, 1 GB) and the call must take well under a few seconds. The transposed shape
    (one input column, 16000 output columns) is checked too, for correctness."""
    import subprocess
    import sys

    grad_out = torch.randn((1, 1) + size, dtype=torch.float32)
    with poisoned_empty():
        grad_in = bw(grad_out, list(shape[2:]), "half_pixel", "gather")
    assert_close(grad_in, ref_backward(grad_out, shape[2:], "half_pixel"), what=f"backward {shape} -> {size}")
    # The peak resident memory of this process alone: VmHWM starts afresh in a new program
    # (ru_maxrss does not: Linux carries the parent's peak over a fork and exec).
    code = f"""
import time, torch
def peak_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
torch.ops.load_library({_so_path(ext)!r})
g = torch.randn(1, 1, {size[0]}, {size[1]})
torch.ops.ch06._upsample_bilinear2d_backward_kernel(g[..., :8, :8], [1, 1], "half_pixel", "gather")  # warm-up
before = peak_mb()
start = time.perf_counter()
torch.ops.ch06._upsample_bilinear2d_backward_kernel(g, {list(shape[2:])}, "half_pixel", "gather")
print(time.perf_counter() - start, peak_mb() - before)
"""
    if not Path("/proc/self/status").is_file():
        pytest.skip("measures memory through /proc (Linux)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seconds, grown_mb = (float(v) for v in proc.stdout.split())
    assert grown_mb < 200, f"the backward {shape} -> {size} grew the peak memory by {grown_mb:.0f} MB"
    assert seconds < 5, f"the backward {shape} -> {size} took {seconds:.1f} s"



# (grad_out shape, input size, what it needs): shapes whose cost or memory a tap table or the
# wrong order of the separable sums made grow with the product of two axes, not the tensors.
BOUNDED_CASES = [
    ((1, 1, 200_000, 1), (1, 200_000), "H grows, W shrinks: W first makes 200000 lines of 200000"),
    ((1, 1, 1, 200_000), (200_000, 1), "the transposed shape"),
    ((1, 2, 100_000, 2), (2, 100_000), "two planes, a range of 50000 rows per input row"),
    ((1, 1, 1, 1 << 24), (1, 2), "a range of 2^23 outputs per input pixel: no weight table that long"),
    ((1, 1, 4096, 4096), (1, 4096), "one input row read by every output row: the line cache stays capped"),
]


# The case the NCHW gather itself takes (the others go through backward_kernel_h_first or have one
# column a row): it grades gather-backward's line cache.
GRADED_BOUNDED = {((1, 1, 4096, 4096), (1, 4096))}


@pytest.mark.parametrize("go_shape, size, what", [
    pytest.param(*c, id=f"{c[0]}-to-{c[1]}",
                 marks=[pytest.mark.exercise("gather-backward")] if c[:2] in GRADED_BOUNDED else [])
    for c in BOUNDED_CASES])
def test_backward_bounded_cpu(up, ext, go_shape, size, what):
    """The CPU gather takes time and memory in proportion to its tensors, whatever the shape
    (upsample_cpu.cpp: chunks of columns, no table along an axis, H first when H grows while W
    shrinks). Measured in a fresh process: well under a second, and the peak resident memory grows
    by less than 16 MB beyond the tensors (a table of taps along a 2^24 axis took 512 MB; caching
    every line of a 4096-row range, 64 MB). Values against float64 aten (both layouts)."""
    import subprocess
    import sys

    if not Path("/proc/self/status").is_file():
        pytest.skip("measures memory through /proc (Linux)")
    code = f"""
import time, torch
def peak_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
torch.ops.load_library({_so_path(ext)!r})
torch.set_num_threads(2)
torch.manual_seed(0)
op = torch.ops.ch06._upsample_bilinear2d_backward_kernel
g = torch.randn({tuple(go_shape)})
op(g[..., :8, :8], [1, 1], "half_pixel", "gather")  # warm-up
before = peak_mb()
start = time.perf_counter()
out = op(g, {list(size)}, "half_pixel", "gather")
seconds = time.perf_counter() - start
grown = peak_mb() - before
ref = torch.ops.aten.upsample_bilinear2d_backward(g.double(), {list(go_shape[2:])}, {list(go_shape[:2]) + list(size)},
                                                   False, None, None)
scale = max(1.0, ref.abs().max().item())
err = (out.double() - ref).abs().max().item() / scale
last = op(g.contiguous(memory_format=torch.channels_last), {list(size)}, "half_pixel", "gather")
err_cl = (last.double() - ref).abs().max().item() / scale
print(seconds, grown, err, err_cl)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seconds, grown_mb, err, err_cl = (float(v) for v in proc.stdout.split())
    assert seconds < 1.0, f"backward {go_shape} -> {size} ({what}): took {seconds:.2f} s"
    assert grown_mb < 16, (f"backward {go_shape} -> {size} ({what}): the peak memory grew by {grown_mb:.0f} MB, "
                           "more than 16 MB beyond the tensors (a cache or a table as long as a range or an axis? "
                           "keep a few lines a task: LineCache with `slots` lines)")
    # float32 sums of up to 2^23 terms, one after another as aten's own CPU kernel adds them: a
    # relative error of about 1e-7 * sqrt(terms), a few 1e-4 (aten's float32 op reaches 3e-4 on some
    # seeds). A wrong weight or a dropped term is off by far more.
    assert err < 1e-3 and err_cl < 1e-3, f"backward {go_shape} -> {size}: relative error {err:.2e} (NCHW), " \
                                         f"{err_cl:.2e} (channels_last) against float64 aten"


TINY_SCALES = [1e-18, 1e-19, 1e-30, 1e-39, 1e-300, 5e-324]


def _read_pixels(n_in: int, n_out: int, mode: str) -> list[int]:
    """With a tiny scale, every source coordinate lies beyond the last pixel, except tf_legacy's
    first (0 * ratio = 0): the pixel each output index reads, alone."""
    return [0 if mode == "tf_legacy" and d == 0 else n_in - 1 for d in range(n_out)]


@pytest.mark.parametrize("mode", ["half_pixel", "tf_legacy"])
@pytest.mark.parametrize("shape", [(1, 2, 100, 3), (1, 2, 3, 100)], ids=["tall", "wide"])
def test_tiny_scales_long_axes(up, device, mode, shape):
    """A tiny scale on each axis is bounded by that axis's own length: on a 100 x 3 image (and
    3 x 100) each output still reads the pixel test_tiny_scales names, on the right axis."""
    x = torch.randn(shape, device=device, dtype=torch.float64)
    ih, iw = _read_pixels(shape[2], 3, mode), _read_pixels(shape[3], 2, mode)
    with poisoned_empty():
        out = op(x, [3, 2], mode, 1e-18, 1e-18)
    assert_bitwise(out, x[:, :, ih][:, :, :, iw], what=f"{mode}, {list(shape)} -> [3, 2], scales 1e-18")
    if mode == "half_pixel" and device == "cpu" and shape[2] > shape[3]:
        # aten's CPU kernel agrees along H; along W, at this scale, it reads other pixels (not ours to test)
        assert_close64(out, torch.ops.aten.upsample_bilinear2d(x, [3, 2], False, 1e-18, 1e-18),
                       f"{list(shape)} -> [3, 2], scales 1e-18 vs aten.upsample_bilinear2d")


@pytest.mark.parametrize("mode", ["half_pixel", "tf_legacy"])
def test_tiny_scales(up, device, mode):
    """Scale factors down to the smallest double: the ratio 1/scale is huge or infinite, and the
    source coordinates pass what int64 holds (from about 1e-19). Converting those to an index is
    undefined behaviour in C++ (it put the taps on pixel 0, and gave NaN at 1e-300); the op
    clamps in floating point first, so each output reads the last pixel (tf_legacy's first output
    pixel 0), exactly, in every dtype; the backward sends each gradient there."""
    x = torch.randn(2, 3, 4, 5, device=device, dtype=torch.float64)
    ih, iw = _read_pixels(4, 3, mode), _read_pixels(5, 6, mode)
    expected = x[:, :, ih][:, :, :, iw]
    g = torch.randn(2, 3, 3, 6, device=device, dtype=torch.float64)
    expected_grad = torch.zeros_like(x)
    for a, h in enumerate(ih):
        for b, w in enumerate(iw):
            expected_grad[:, :, h, w] += g[:, :, a, b]
    for scale in TINY_SCALES:
        for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
            with poisoned_empty():
                out = op(x.to(dtype), [3, 6], mode, scale, scale)
            assert_bitwise(out, expected.to(dtype), what=f"{mode}, {dtype}, scale {scale:g}")
        with poisoned_empty():
            grad = bw(g, [4, 5], mode, "gather", scale, scale)
        assert_close64(grad, expected_grad, f"{mode} backward, scale {scale:g}")
    # where PyTorch's own arithmetic is still defined, it agrees (on the CPU: aten's CUDA kernel reads
    # out of bounds at such a scale, an illegal memory access)
    if mode == "half_pixel" and device == "cpu":
        ref = torch.ops.aten.upsample_bilinear2d(x, [3, 6], False, 1e-18, 1e-18)
        assert_bitwise(op(x, [3, 6], mode, 1e-18, 1e-18), ref, what="scale 1e-18 vs aten.upsample_bilinear2d")
    # the other end: a huge scale makes the ratio tiny, and every output reads pixel 0
    out = op(x, [3, 6], mode, 1e300, 1e300)
    assert_close64(out, x[:, :, :1, :1].expand(2, 3, 3, 6), f"{mode}, scale 1e300")


def _restore_determinism():
    state = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    return lambda: torch.use_deterministic_algorithms(state[0], warn_only=state[1])


def test_deterministic_mode_alert(up):
    """The alert PyTorch's own kernels raise (at::globalContext().alertNotDeterministic, not part of
    the stable ABI, so upsample.py makes it): an error in deterministic mode, a warning with
    warn_only=True, nothing otherwise. On a GPU test_scatter_is_nondeterministic_cuda checks that
    the scatter backward makes it."""
    import warnings

    restore = _restore_determinism()
    try:
        torch.use_deterministic_algorithms(False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            up._alert_not_deterministic("something")
        torch.use_deterministic_algorithms(True)
        with expect_error(r"^something does not have a deterministic implementation, but you set "
                          r"'torch.use_deterministic_algorithms\(True\)'"):
            up._alert_not_deterministic("something")
        torch.use_deterministic_algorithms(True, warn_only=True)
        with pytest.warns(UserWarning, match="something does not have a deterministic implementation"):
            up._alert_not_deterministic("something")
    finally:
        restore()


def test_deterministic_mode_cpu(up):
    """On the CPU both backward methods run the gather kernel: deterministic mode lets them run."""
    import warnings

    restore = _restore_determinism()
    try:
        torch.use_deterministic_algorithms(True)
        x = torch.randn(2, 3, 5, 6, dtype=torch.float64, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for method in BACKWARDS:
                x.grad = None
                up.upsample_bilinear(x, (9, 11), backward=method).sum().backward()
                assert_close64(x.grad, ref_backward(torch.ones(2, 3, 9, 11, dtype=torch.float64), (5, 6),
                                                    "half_pixel"), f"{method} backward in deterministic mode")
    finally:
        restore()


@pytest.mark.cuda
def test_scatter_is_nondeterministic_cuda(up, device):
    """torch.use_deterministic_algorithms(True): the scatter backward (atomics) raises as PyTorch's own
    CUDA bilinear backward does, directly and through autograd; warn_only=True turns the error into
    a warning; the gather backward, deterministic, runs."""
    if device != "cuda":
        pytest.skip("the scatter backward runs on a GPU only")
    restore = _restore_determinism()
    x = torch.randn(2, 3, 16, 16, device="cuda", requires_grad=True)
    g = torch.randn(2, 3, 32, 32, device="cuda")
    message = r"does not have a deterministic implementation, but you set 'torch.use_deterministic_algorithms"
    try:
        torch.use_deterministic_algorithms(True)
        with expect_error(message, what="the scatter backward in deterministic mode"):
            bw(g, [16, 16], "half_pixel", "scatter")
        with expect_error(message, what="autograd through backward=\"scatter\" in deterministic mode"):
            up.upsample_bilinear(x, (32, 32), backward="scatter").backward(g)
        gathered = bw(g, [16, 16], "half_pixel", "gather")
        assert_close(gathered, ref_backward(g, (16, 16), "half_pixel"), what="gather backward, deterministic mode")
        torch.use_deterministic_algorithms(True, warn_only=True)
        with pytest.warns(UserWarning, match="does not have a deterministic implementation"):
            scattered = bw(g, [16, 16], "half_pixel", "scatter")
        assert_close(scattered, ref_backward(g, (16, 16), "half_pixel"), what="scatter backward, warn_only")
    finally:
        restore()


@pytest.mark.cuda
@pytest.mark.parametrize("what", ["forward", "gather", "scatter"])
def test_runs_on_the_current_stream(up, device, what):
    """The kernels go on the current stream, not the legacy default one. The default stream is kept
    busy (torch.cuda._sleep) while the op runs under torch.cuda.stream(s), and `out.add_(1)` is
    queued on s after it. A kernel launched on the default stream would run after the sleep, and
    after the add: it would overwrite the added result, and `out` would come out as the plain result."""
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    x = torch.randn(8, 16, 64, 64, device="cuda")
    g = torch.randn(8, 16, 128, 128, device="cuda")
    run = {"forward": lambda: op(x, [128, 128], "half_pixel"),
           "gather": lambda: bw(g, [64, 64], "half_pixel", "gather"),
           "scatter": lambda: bw(g, [64, 64], "half_pixel", "scatter")}[what]
    expected = run() + 1
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()  # PyTorch's streams do not synchronise with the legacy default stream
    stream.wait_stream(torch.cuda.current_stream())  # the inputs are ready
    torch.cuda._sleep(50_000_000)  # keep the default stream busy (~25 ms)
    with torch.cuda.stream(stream):
        out = run()
        out.add_(1)  # queued on `stream`: must run after the kernel
    stream.synchronize()
    torch.cuda.synchronize()
    if what == "scatter":  # atomics: the order of the additions varies
        assert_close(out, expected, what="scatter backward on a side stream")
    else:
        assert_bitwise(out, expected, what=f"{what} on a side stream")


@pytest.mark.cuda
def test_kept_plans(up, device):
    """The gather keeps the plans it builds (plan.cu) and a repeated call reads its plan from there.
    Three ways a kept plan could be read where it must not be, each made to give a wrong gradient if
    it were: a call on another stream while the stream that built the plan has not run its plan
    kernel yet (the default stream is kept busy); a CUDA graph replayed after other shapes have
    pushed every kept plan out and their memory was handed out again (a graph that read a kept plan
    would read that memory); the same sizes with another ratio (a scale factor)."""
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    in_hw, size = [13, 17], [29, 23]  # no closed form on either axis: gather_planes and its plan
    g = torch.randn(2, 3, *size, device="cuda", dtype=torch.float64)
    expected = ref_backward(g, in_hw, "half_pixel")
    assert_close64(bw(g, in_hw, "half_pixel", "gather"), expected, "gather, first call (builds its plan)")
    assert_close64(bw(g, in_hw, "half_pixel", "gather"), expected, "gather, second call (its kept plan)")
    scales = (29 / 13 + 0.1, 23 / 17 - 0.05)  # the same sizes, other coordinates
    assert_close64(bw(g, in_hw, "half_pixel", "gather", *scales), ref_backward(g, in_hw, "half_pixel", scales),
                   "gather with scale factors, after the same sizes without")

    # Another stream: the default stream builds a plan for new sizes behind a sleep; the side stream must not use it.
    g2 = torch.randn(2, 3, 31, 27, device="cuda", dtype=torch.float64)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    torch.cuda._sleep(50_000_000)  # ~25 ms on the default stream
    on_default = bw(g2, [11, 19], "half_pixel", "gather")
    with torch.cuda.stream(side):
        on_side = bw(g2, [11, 19], "half_pixel", "gather")
    torch.cuda.synchronize()
    expected2 = ref_backward(g2, [11, 19], "half_pixel")
    assert_close64(on_side, expected2, "gather on a side stream, same sizes as a plan still being built")
    assert_close64(on_default, expected2, "gather on the default stream")

    # A CUDA graph: captured on `side`, where the plan of these sizes is kept; replayed after 40 other sizes.
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        bw(g, in_hw, "half_pixel", "gather")  # keeps the plan on `side`
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        captured = bw(g, in_hw, "half_pixel", "gather")
    with torch.cuda.stream(side):
        for k in range(40):  # more sizes than the cache holds, on the stream the graph was captured on
            bw(torch.randn(1, 1, 20 + k, 30 - k // 2, device="cuda", dtype=torch.float64), [7 + k, 9], "half_pixel",
               "gather")
    graph.replay()
    torch.cuda.synchronize()
    assert_close64(captured, expected, "gather in a CUDA graph, replayed after its sizes' kept plan was dropped")


@pytest.mark.cuda
def test_other_gpu(up, device):
    """Tensors on cuda:1 while cuda:0 is current: the kernels run on the tensors' GPU (device guard)."""
    if device != "cuda" or torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    x = torch.randn(2, 3, 16, 16, device="cuda:1", dtype=torch.float64, requires_grad=True)
    g = torch.randn(2, 3, 32, 32, device="cuda:1", dtype=torch.float64)
    with torch.cuda.device(0):
        out = up.upsample_bilinear(x, (32, 32))
        grads = {m: bw(g, [16, 16], "half_pixel", m) for m in BACKWARDS}
    assert_property(out.device, x.device, "device", "forward (the current device was cuda:0)")
    assert_close64(out, ref_forward(x, (32, 32), "half_pixel"), "forward on cuda:1")
    for method, grad in grads.items():
        assert_property(grad.device, x.device, "device", f"{method} backward (the current device was cuda:0)")
        assert_close64(grad, ref_backward(g, (16, 16), "half_pixel"), f"{method} backward on cuda:1")


def test_sources_name_only_files_that_exist(chapter_source):
    """The comments in csrc/ point the reader to files of this chapter; each of them must exist."""
    import re

    chapter = Path(chapter_source)
    missing = []
    for path in sorted((chapter / "csrc").iterdir()):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith("#include") or "//" not in line:
                continue
            comment = line.split("//", 1)[1]
            for name in re.findall(r"(?<![\w/.<-])([a-z_][a-z0-9_]*\.(?:h|cpp|cu|py|md|toml))\b", comment):
                if not ((chapter / "csrc" / name).exists() or (chapter / name).exists()):
                    missing.append(f"csrc/{path.name}:{n} names {name}")
    assert not missing, "comments name files that do not exist: " + "; ".join(missing)


@pytest.mark.aot
def test_setup_py_build(tmp_path, chapter_source):
    """The ahead-of-time route: pip install --no-build-isolation ./06_upsample, then the op by name."""
    code = ("import torch, ch06_upsample; x = torch.arange(3.0).reshape(1, 1, 1, 3); "
            "print(torch.ops.ch06.upsample_bilinear2d(x, [1, 5], 'tf_legacy').flatten().tolist())")
    out = install_and_run(chapter_source, tmp_path, code)
    assert [round(v, 4) for v in json.loads(out)] == [0.0, 0.6, 1.2, 1.8, 2.0]


def test_a_gpu_the_build_does_not_cover_gets_the_fix(up, monkeypatch):
    """CUDA's "no kernel image is available" becomes a message that names TORCH_CUDA_ARCH_LIST."""
    def no_image(*args):
        raise RuntimeError("CUDA error: no kernel image is available for execution on the device")

    monkeypatch.setattr(up, "_forward_kernel", no_image)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (12, 0))
    with pytest.raises(RuntimeError, match=r'TORCH_CUDA_ARCH_LIST="12.0"'):
        up._launch(up._forward_kernel, torch.zeros(1, 1, 2, 2), [4, 4], "half_pixel", None, None)


# ---------------------------------------------------------------- the eager path of upsample_bilinear


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last], ids=["nchw", "channels_last"])
def test_eager_path_matches_operator(up, device, layout):
    """upsample_bilinear's eager path (_Resize: the kernel ops under one autograd.Function, no
    torch.library autograd) gives the operator's values and gradients, bit for bit, in every mode,
    both backward methods and both layouts; a double backward goes through the operator."""
    op = torch.ops.ch06.upsample_bilinear2d
    for mode in MODES:
        for method in BACKWARDS:
            x = torch.randn(2, 3, 5, 6, dtype=torch.float64, device=device).contiguous(memory_format=layout)
            a, b = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
            ya, yb = up.upsample_bilinear(a, (9, 4), mode=mode, backward=method), op(b, [9, 4], mode, None, None, method)
            assert ya.grad_fn is not None and type(ya.grad_fn).__name__.startswith("_Resize"), (
                f"{mode}: upsample_bilinear on a plain tensor should take the eager path, got {ya.grad_fn}")
            g = torch.randn_like(ya)
            assert torch.equal(ya, yb) and ya.stride() == yb.stride(), f"{mode}, {method}: forward differs"
            (ga,), (gb,) = torch.autograd.grad(ya, a, g), torch.autograd.grad(yb, b, g)
            if method == "scatter" and device == "cuda":  # atomicAdd: the order of the adds varies from run to run
                assert_close64(ga, gb, f"{mode}, scatter: the eager path's gradient against the operator's")
                assert ga.stride() == gb.stride(), f"{mode}, scatter: gradient strides differ"
            else:
                assert torch.equal(ga, gb) and ga.stride() == gb.stride(), f"{mode}, {method}: gradient differs"
            again = up.upsample_bilinear(a, (9, 4), mode=mode, backward=method)  # the checked-call cache's hit
            assert torch.equal(again, ya) and again.stride() == ya.stride(), f"{mode}, {method}: a second call differs"
    for method in BACKWARDS:  # scale factors reach both backwards (half_pixel keeps them: 5 * 1.9 -> 9, 6 * 0.7 -> 4)
        x = torch.randn(2, 3, 5, 6, dtype=torch.float64, device=device).contiguous(memory_format=layout)
        a, b = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        ya = up.upsample_bilinear(a, scale_factor=(1.9, 0.7), backward=method)
        yb = op(b, [9, 4], "half_pixel", 1.9, 0.7, method)
        g = torch.randn_like(ya)
        (ga,), (gb,) = torch.autograd.grad(ya, a, g), torch.autograd.grad(yb, b, g)
        ref = ref_backward(g, (5, 6), "half_pixel", scales=(1.9, 0.7))
        assert torch.equal(ya, yb), f"{method}, scale_factor=(1.9, 0.7): the forward differs between the two paths"
        assert_close64(ga, ref, f"the eager path's gradient, {method}, scale_factor=(1.9, 0.7)")
        assert_close64(gb, ref, f"the operator's autograd formula, {method}, scales (1.9, 0.7)")
    x = torch.randn(1, 2, 4, 5, dtype=torch.float64, device=device, requires_grad=True)
    up.upsample_bilinear(x, (7, 3))  # checked, then remembered
    with expect_error("size must be integers", ValueError, what="a float size after an equal int size (7.0 == 7)"):
        up.upsample_bilinear(x, (7.0, 3.0))
    assert torch.autograd.gradgradcheck(lambda t: up.upsample_bilinear(t, (7, 3)), (x,))
    with torch.no_grad():
        assert up.upsample_bilinear(x, (7, 3)).grad_fn is None


def test_eager_path_only_for_plain_tensors(up):
    """Fake tensors and dispatch modes must see the operator, not the kernel op behind it."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode
    from torch.overrides import TorchFunctionMode

    seen = []

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    x = torch.randn(1, 2, 4, 5)
    with Record():
        up.upsample_bilinear(x, (7, 3))
    assert any("ch06.upsample_bilinear2d" in s for s in seen), f"a torch function mode saw {seen}"
    with FakeTensorMode() as mode:
        out = up.upsample_bilinear(mode.from_tensor(x), (7, 3))
    assert out.shape == (1, 2, 7, 3)
    with FlopCounterMode(display=False):
        assert up.upsample_bilinear(x, (7, 3)).shape == (1, 2, 7, 3)
    from torch.utils._python_dispatch import TorchDispatchMode

    dispatched = []

    class RecordDispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            dispatched.append(str(func))
            return func(*args, **(kwargs or {}))

    with RecordDispatch():
        up.upsample_bilinear(x, (7, 3))
    assert any("ch06.upsample_bilinear2d" in s for s in dispatched), f"a dispatch mode saw {dispatched}"
    # torch.jit.trace records the kernel op the eager path calls (the public operator, implemented
    # in Python, does not trace); the checks ran when the trace was taken.
    traced = torch.jit.trace(lambda t: up.upsample_bilinear(t, (7, 3)), x)
    assert torch.equal(traced(x), up.upsample_bilinear(x, (7, 3)))
    assert up._plain(x) and up._plain(torch.nn.Parameter(x))

    class Sub(torch.Tensor):
        pass
    assert not up._plain(x.as_subclass(Sub)), "a tensor subclass may override __torch_function__: the operator"


def test_output_too_large_is_a_value_error(up):
    """A size or a scale factor whose output's elements or bytes cannot be counted in int64 gets the
    op's own error, not a schema type error from the dispatcher or torch's overflow (2**62 float32s: 2**64 bytes)."""
    x = torch.randn(1, 2, 3, 4)
    for kwargs in (dict(size=(1, 2**63)), dict(scale_factor=1e300), dict(size=(2**32, 2**31)), dict(size=(1, 2**61))):
        with expect_error(r"more (elements|bytes \(torch.float32\)) than an int64 can count", ValueError, what=str(kwargs)):
            up.upsample_bilinear(x, **kwargs)


# Last, as it is the slowest: a data race that gives right values (a `static` array, a buffer
# declared outside the lambda), which no value test sees.
@pytest.mark.exercise("gather-backward")
def test_backward_cpu_threads_share_nothing(judged_source):
    """The CPU kernels under ThreadSanitizer (coursekit/races.py), their chunks on three threads:
    each task writes only its own outputs and its own locals."""
    assert_no_data_race("06", judged_source)
