"""Chapter 03: the reference, the three thread mappings, the timing harness and the benchmark.

Every graded test grades one exercise (its `exercise` marker) and may rely on the rest of
the chapter being right. Results are compared with the op computed in float64 from the
same (already rounded) inputs by `by_formula` below, which shares no code with
`reference.py`: float64 results element by element at 1e-12, float16/bfloat16 results to
within one unit in the last place (what computing in float and rounding once gives),
float32 results by relative error. Kernel outputs start as NaN (`poisoned_empty`), so an
element a kernel never writes fails.

The timer tests call `median_time_ms` with functions that know how often and in which
order they were called and that take a different, known time on each call (a sleep on
the CPU, `torch.cuda._sleep` on the GPU): slow warm-up calls, one slow call in three,
timed calls of distinct lengths whose median is off as soon as one call too many or too
few is counted.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F_

from coursekit import ROOT, timing
from coursekit.build import load_python
from coursekit.testing import (assert_close, assert_float64, assert_memcheck_clean, assert_rounded, expect_error,
                               memcheck_script, poisoned_empty)

CHAPTER = "03"
MAPPINGS = ["forward", "forward_naive", "forward_vectorized"]
DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
LOW = [torch.float16, torch.bfloat16]
PACK = {torch.float64: 2, torch.float32: 4, torch.float16: 8, torch.bfloat16: 8}  # scalars per 16 bytes


def name_of(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


@pytest.fixture(scope="module")
def reference(ext, chapter_source):
    return load_python(chapter_source, "reference")


@pytest.fixture(scope="module")
def stopwatch(ext, chapter_source):
    return load_python(chapter_source, "stopwatch")


def inputs(N, F, device="cpu", dtype=torch.float32, spread=1.0):
    """Values drawn in float64 and rounded to dtype: features ~ N(0, 1), points in [-spread, spread]^3."""
    feats = torch.randn(N, 8, F, dtype=torch.float64).to(device, dtype)
    points = ((torch.rand(N, 3, dtype=torch.float64) * 2 - 1) * spread).to(device, dtype)
    return feats, points


def by_formula(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """The op from its formula, in float64, written apart from reference.py: corner k at
    offsets (k>>2 & 1, k>>1 & 1, k & 1) weighs (u or 1-u)(v or 1-v)(w or 1-w)."""
    f64, p64 = feats.double(), points.double()
    u, v, w = ((p64 + 1) * 0.5).unbind(dim=1)
    out = torch.zeros(f64.shape[0], f64.shape[2], dtype=torch.float64, device=f64.device)
    for k in range(8):
        wx = u if (k >> 2) & 1 else 1 - u
        wy = v if (k >> 1) & 1 else 1 - v
        wz = w if k & 1 else 1 - w
        out += (wx * wy * wz)[:, None] * f64[:, k]
    return out


def by_grid_sample(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Another formulation: each cube as a 2x2x2 volume, sampled by F.grid_sample.

    grid_sample's grid holds (x, y, z) for the volume's (W, H, D) axes, and with
    align_corners=True the coordinates -1 and 1 are the centres of the end voxels:
    so voxel [d, h, w] is the corner with offsets (w, h, d), i.e. k = 4w + 2h + d.
    """
    N, _, F = feats.shape
    volume = feats.reshape(N, 2, 2, 2, F)  # [n, x-offset, y-offset, z-offset, f]
    volume = volume.permute(0, 4, 3, 2, 1)  # [n, f, d = z, h = y, w = x]
    grid = points.reshape(N, 1, 1, 1, 3)
    out = F_.grid_sample(volume, grid, mode="bilinear", align_corners=True)  # (N, F, 1, 1, 1)
    return out.reshape(N, F)


def check(out, feats, points, what="output"):
    """`out` against by_formula, as exact as its dtype allows (see the module docstring)."""
    dtype = feats.dtype
    N, _, F = feats.shape
    assert out.shape == (N, F), f"{what}: shape {tuple(out.shape)}, expected {(N, F)}"
    assert out.dtype == dtype, f"{what}: dtype {out.dtype}, expected {dtype}"
    assert out.device == feats.device, f"{what}: on {out.device}, expected {feats.device}"
    expected = by_formula(feats, points)
    if dtype == torch.float64:
        assert_float64(out, expected, what=what)
    elif dtype == torch.float32:
        assert_close(out, expected, torch.float32, what)
    else:
        assert_rounded(out, expected, what=what)


def layouts(N, F, device, dtype):
    """Inputs with the same kind of values as `inputs`, laid out in memory in unusual ways:
    name -> (feats, points)."""
    feats, points = inputs(N, F, device, dtype)
    pack = PACK[dtype]

    def offset(t, by):  # the same values, starting `by` elements into a larger storage
        base = torch.empty(t.numel() + by, device=device, dtype=dtype)
        base[by:] = t.flatten()
        return base[by:].view(t.shape)

    return {
        "feats-offset-1": (offset(feats, 1), points),  # contiguous, misaligned for 16-byte loads
        "feats-offset-half-pack": (offset(feats, max(1, pack // 2)), points),  # 8 bytes off
        "feats-offset-pack": (offset(feats, pack), points),  # 16 bytes in: aligned again
        "feats-transposed": (feats.transpose(0, 2).contiguous().transpose(0, 2), points),
        "feats-every-other-f": (torch.stack([feats, feats], dim=3).flatten(2)[:, :, ::2], points),
        "feats-every-other-corner": (torch.stack([feats, feats], dim=2).flatten(1, 2)[:, ::2], points),
        "feats-expanded": (feats[:1].expand(N, 8, F), points),  # stride 0 along N
        "feats-expanded-f": (feats[:, :, :1].expand(N, 8, F), points),  # stride 0 along F
        "points-offset-1": (feats, offset(points, 1)),
        "points-transposed": (feats, points.t().contiguous().t()),
        "points-every-other": (feats, torch.stack([points, points], dim=2).flatten(1)[:, ::2]),
        "points-expanded": (feats, points[:1].expand(N, 3)),
    }


LAYOUTS = list(layouts(2, 8, "cpu", torch.float32))

# ---------------------------------------------------------------------------------------
# The reference (exercise `reference`)


@pytest.mark.exercise("reference")
def test_reference_matches_grid_sample(reference):
    feats, points = inputs(300, 17, dtype=torch.float64)
    assert_float64(reference.trilinear(feats, points), by_grid_sample(feats, points), what="reference (float64)")


@pytest.mark.exercise("reference")
@pytest.mark.parametrize("spread", [1.0, 3.0], ids=["inside", "outside"])
def test_reference_float64_element_by_element(reference, spread):
    """float64 in, float64 arithmetic all the way: 1e-12 per element, inside and outside the cube."""
    feats, points = inputs(500, 24, dtype=torch.float64, spread=spread)
    assert_float64(reference.trilinear(feats, points), by_formula(feats, points), what="reference (float64)")


@pytest.mark.exercise("reference")
def test_reference_mixed_dtypes(reference):
    """The features' dtype decides the arithmetic: float64 features with float32 points are computed
    in float64 (the points converted, exactly), not in the points' float32."""
    feats, points = inputs(400, 12, dtype=torch.float64)
    points32 = points.float()
    out = reference.trilinear(feats, points32)
    assert out.dtype == torch.float64, f"reference.trilinear(float64 feats, float32 points) returned {out.dtype}"
    assert_float64(out, by_formula(feats, points32.double()),
                   what="reference (float64 feats, float32 points: computed in float64)")


@pytest.mark.exercise("reference")
def test_reference_weights(reference):
    points = torch.rand(50, 3, dtype=torch.float64) * 4 - 2  # inside and outside the cube
    w = reference.corner_weights(points)
    assert w.shape == (50, 8) and w.dtype == torch.float64, f"corner_weights: {tuple(w.shape)} {w.dtype}"
    eye = torch.eye(8, dtype=torch.float64)
    expected = torch.stack([by_formula(eye[None].expand(50, 8, 8)[:, :, k:k + 1], points)[:, 0] for k in range(8)], 1)
    assert_float64(w, expected, what="corner_weights (float64)")
    assert_float64(w.sum(dim=1), torch.ones(50, dtype=torch.float64), what="sum of the 8 weights")
    corners = torch.tensor([[(k >> 2) & 1, (k >> 1) & 1, k & 1] for k in range(8)], dtype=torch.float64) * 2 - 1
    assert_float64(reference.corner_weights(corners), eye, what="weights at the 8 corners (row k should be e_k)")


@pytest.mark.exercise("reference")
def test_reference_extrapolates_linearly(reference):
    """Outside [-1, 1] the formula goes on: along x, out is affine in x."""
    feats = torch.randn(1, 8, 4, dtype=torch.float64)
    xs = torch.tensor([-3.0, -1.0, 0.5, 2.0], dtype=torch.float64)
    points = torch.stack([xs, torch.full_like(xs, 0.3), torch.full_like(xs, -0.6)], dim=1)
    out = reference.trilinear(feats.expand(4, 8, 4), points)
    slope = (out[1] - out[0]) / (xs[1] - xs[0])
    assert_float64(out[3], out[0] + slope * (xs[3] - xs[0]), what="out at x = 2 (affine in x)")


@pytest.mark.exercise("reference")
@pytest.mark.parametrize("dtype", LOW, ids=name_of)
def test_reference_rounds_once_in_half_types(reference, device, dtype):
    """The reference's promise: float16/bfloat16 inputs are computed in float32 and rounded once,
    so every output is within one ulp of the exact (float64) answer. Arithmetic in the half type
    rounds at every step and lands several ulps away on many elements."""
    feats, points = inputs(2000, 32, device, dtype)
    out = reference.trilinear(feats, points)
    assert out.dtype == dtype and out.device == feats.device, f"reference: {out.dtype} on {out.device}"
    assert_rounded(out, by_formula(feats, points), what=f"reference in {name_of(dtype)}")


@pytest.mark.exercise("reference")
@pytest.mark.parametrize("dtype", DTYPES, ids=name_of)
def test_reference_keeps_dtype_and_device(reference, device, dtype):
    feats, points = inputs(64, 9, device, dtype)
    check(reference.trilinear(feats, points), feats, points, f"reference in {name_of(dtype)}")


@pytest.mark.exercise("reference")
@pytest.mark.parametrize("N, F", [(1, 5), (4, 1), (1, 1), (0, 3), (3, 0)])
def test_reference_one_and_zero_sizes(reference, N, F):
    """N or F of 1 (or 0) keeps the (N, F) shape: no squeeze() that drops a dimension of size 1."""
    feats, points = inputs(N, F, dtype=torch.float64)
    check(reference.trilinear(feats, points), feats, points, f"reference with N = {N}, F = {F}")


@pytest.mark.exercise("reference")
@pytest.mark.parametrize("dtype", DTYPES, ids=name_of)
def test_reference_weights_keep_the_dtype_of_points(reference, device, dtype):
    """corner_weights returns its (N, 8) weights in the dtype (and on the device) of points, as the
    README says; trilinear is the one that picks the compute type, and converts points before."""
    points = (torch.rand(20, 3, dtype=torch.float64) * 2 - 1).to(device, dtype)
    w = reference.corner_weights(points)
    assert w.shape == (20, 8) and w.dtype == dtype and w.device == points.device, (
        f"corner_weights of {name_of(dtype)} points on {points.device}: {tuple(w.shape)} {w.dtype} on {w.device}")


@pytest.mark.exercise("reference")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_reference_any_layout(reference, layout):
    feats, points = layouts(40, 12, "cpu", torch.float64)[layout]
    check(reference.trilinear(feats, points), feats, points, f"reference on {layout} inputs")


@pytest.mark.exercise("reference")
def test_reference_is_differentiable(reference):
    """Chapter 04 checks its gradients against autograd through this reference: first and second order."""
    feats, points = inputs(4, 3, dtype=torch.float64)
    feats.requires_grad_(True)
    points.requires_grad_(True)
    assert torch.autograd.gradcheck(reference.trilinear, (feats, points))
    assert torch.autograd.gradgradcheck(reference.trilinear, (feats, points))


# ---------------------------------------------------------------------------------------
# The three mappings: results on every device, dtype, size and layout (the chapter as a whole)

SIZES = [(1, 1), (1, 300), (37, 33), (257, 64), (1000, 259)]


@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize("N, F", SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=name_of)
def test_mappings_cpu(ext, dtype, mapping, N, F):
    feats, points = inputs(N, F, "cpu", dtype)
    with poisoned_empty():
        out = getattr(ext, mapping)(feats, points)
    check(out, feats, points, mapping)


@pytest.mark.cuda
@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize("N, F", SIZES + [(3000, 1000), (70, 40), (33, 8), (5, 2060)])
@pytest.mark.parametrize("dtype", DTYPES, ids=name_of)
def test_mappings_cuda(ext, device, dtype, mapping, N, F):
    if device != "cuda":
        pytest.skip("the CUDA kernels' test")
    feats, points = inputs(N, F, "cuda", dtype)
    with poisoned_empty():
        out = getattr(ext, mapping)(feats, points)
    check(out, feats, points, mapping)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize("dtype", DTYPES, ids=name_of)
def test_mappings_any_layout(ext, device, dtype, mapping, layout):
    """Offset (misaligned), transposed, sliced and expanded (stride-0) arguments, one at a time."""
    feats, points = layouts(45, 40, device, dtype)[layout]
    with poisoned_empty():
        out = getattr(ext, mapping)(feats, points)
    check(out, feats, points, f"{mapping} on {layout} inputs")


def test_tolerances_hold_at_a_larger_size(ext, reference):
    """Relative error is a norm over all elements: it does not grow with N * F like a max error would."""
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        feats, points = inputs(20000, 64, "cpu", dtype)
        out = ext.forward(feats, points)
        assert_close(out, reference.trilinear64(feats, points), dtype)
        if dtype in LOW:
            assert_rounded(out, by_formula(feats, points), what=f"forward in {name_of(dtype)}")


@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize("N, F", [(0, 8), (8, 0), (0, 0)])
def test_mappings_empty(ext, device, mapping, N, F):
    feats, points = inputs(N, F, device)
    out = getattr(ext, mapping)(feats, points)
    assert out.shape == (N, F) and out.dtype == feats.dtype and out.device == feats.device


def bad_inputs(device):
    """name -> (feats, points, message): every rank and every dimension of each argument, dtypes, devices."""
    f, p = inputs(4, 5, device)
    feats_shape = r"feats must have shape \(N, 8, F\), got "
    points_shape = r"points must have shape \(N, 3\) with N = 4 as feats, got "
    return {
        "feats-rank-0": (f[0, 0, 0], p, feats_shape + r"\[\]"),
        "feats-rank-1": (f[0, 0], p, feats_shape + r"\[5\]"),
        "feats-rank-2": (f[0], p, feats_shape + r"\[8, 5\]"),
        "feats-rank-4": (f[..., None], p, feats_shape + r"\[4, 8, 5, 1\]"),
        "feats-7-corners": (f[:, :7], p, feats_shape + r"\[4, 7, 5\]"),
        "feats-9-corners": (torch.cat([f, f[:, :1]], dim=1), p, feats_shape + r"\[4, 9, 5\]"),
        "points-rank-0": (f, p[0, 0], points_shape + r"\[\]"),
        "points-rank-1": (f, p.reshape(-1), points_shape + r"\[12\]"),
        "points-rank-3": (f, p[..., None], points_shape + r"\[4, 3, 1\]"),
        "points-3-cubes": (f, p[:3], points_shape + r"\[3, 3\]"),
        "points-5-cubes": (f, torch.cat([p, p[:1]]), points_shape + r"\[5, 3\]"),
        "points-width-2": (f, p[:, :2], points_shape + r"\[4, 2\]"),
        "points-width-4": (f, torch.cat([p, p[:, :1]], dim=1), points_shape + r"\[4, 4\]"),
        "integer-feats": (f.int(), p.int(), r"feats must be float64, float32, float16 or bfloat16, got Int"),
        "float8-feats": (f.to(torch.float8_e4m3fn), p.to(torch.float8_e4m3fn),
                         r"feats must be float64, float32, float16 or bfloat16, got Float8_e4m3fn"),
        "integer-points": (f, p.int(), r"points must have the dtype of feats \(Float\), got Int"),
        "dtype-mismatch": (f, p.double(), r"points must have the dtype of feats \(Float\), got Double"),
        "meta-device": (f.to("meta"), p.to("meta"), r"tensors must be on the CPU or a CUDA GPU, got meta"),
    }


@pytest.mark.parametrize("case", list(bad_inputs("cpu")))
@pytest.mark.parametrize("mapping", MAPPINGS)
def test_bad_inputs(ext, device, mapping, case):
    feats, points, message = bad_inputs(device)[case]
    with expect_error("trilinear: " + message, what=f"{mapping} on {case}"):
        getattr(ext, mapping)(feats, points)


@pytest.mark.cuda
@pytest.mark.parametrize("mapping", MAPPINGS)
def test_bad_inputs_cpu_cuda_mix(ext, device, mapping):
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    feats, points = inputs(4, 5, "cuda")
    fn = getattr(ext, mapping)
    with expect_error(r"trilinear: feats and points must be on the same device, got feats on cuda:0 and points on cpu"):
        fn(feats, points.cpu())
    with expect_error(r"trilinear: feats and points must be on the same device, got feats on cpu and points on cuda:0"):
        fn(feats.cpu(), points)


# ---------------------------------------------------------------------------------------
# The vectorized kernel (exercise `vectorized-kernel`): the launch decision, graded on the
# CPU through ext.pack_size, and the kernel, graded on a GPU.

FEATS_AT, OUT_AT = 0x7F3A_1C00_0000, 0x7F3A_2000_0100  # 256-byte aligned, as fresh tensors are


def pack_cases():
    """(id, F, dtype, feats byte offset, out byte offset, expected pack, why)."""
    for dtype, pack in PACK.items():
        e, d = 16 // pack, name_of(dtype)
        yes = f"{pack} {d} values fill 16 bytes; F = {{F}} is a whole number of packs and both rows start on 16 bytes"
        no_f = f"F = {{F}} is not a multiple of the pack ({pack} {d} values): rows would start off 16 bytes, or end in a part pack"
        yield f"{d}-F=pack", pack, dtype, 0, 0, pack, yes
        yield f"{d}-F=3packs", 3 * pack, dtype, 0, 0, pack, yes
        yield f"{d}-F=257packs", 257 * pack, dtype, 0, 0, pack, yes
        yield f"{d}-F=1", 1, dtype, 0, 0, 0, no_f
        if pack > 2:
            yield f"{d}-F=pack-1", pack - 1, dtype, 0, 0, 0, no_f
            yield f"{d}-F=half-pack", pack // 2, dtype, 0, 0, 0, no_f
            yield f"{d}-F=3half-packs", 3 * pack // 2, dtype, 0, 0, 0, no_f
        yield f"{d}-F=pack+1", pack + 1, dtype, 0, 0, 0, no_f
        yield f"{d}-F=5packs+1", 5 * pack + 1, dtype, 0, 0, 0, no_f
        for where in ("feats", "out"):
            off = {"feats": (1, 0), "out": (0, 1)}[where]
            yield (f"{d}-{where}-1-element-in", 4 * pack, dtype, off[0] * e, off[1] * e, 0,
                   f"{where} starts {e} bytes past a 16-byte boundary")
            yield (f"{d}-{where}-8-bytes-in", 4 * pack, dtype, off[0] * 8, off[1] * 8, 0,
                   f"{where} starts 8 bytes past a 16-byte boundary")
            yield (f"{d}-{where}-16-bytes-in", 4 * pack, dtype, off[0] * 16, off[1] * 16, pack,
                   f"{where} starts 16 bytes into its storage: still on a 16-byte boundary")
        yield f"{d}-both-48-bytes-in", 2 * pack, dtype, 48, 48, pack, "both start on 16-byte boundaries"
        # misaligned alike, or by offsets that add up to 16: each address must be on 16 bytes by itself
        yield (f"{d}-both-8-bytes-in", 4 * pack, dtype, 8, 8, 0,
               "both start 8 bytes past a 16-byte boundary: misaligned alike is still misaligned")
        if e < 8:
            yield (f"{d}-{e}-and-{16 - e}-bytes-in", 4 * pack, dtype, e, 16 - e, 0,
                   f"feats starts {e} and out {16 - e} bytes past a 16-byte boundary: their offsets add up "
                   f"to 16, but neither address is on a boundary")


PACK_CASES = list(pack_cases())


@pytest.mark.exercise("vectorized-kernel")
@pytest.mark.parametrize("F, dtype, feats_off, out_off, expected, why", [c[1:] for c in PACK_CASES],
                         ids=[c[0] for c in PACK_CASES])
def test_pack_size(ext, F, dtype, feats_off, out_off, expected, why):
    e = torch.empty(0, dtype=dtype).element_size()
    got = ext.pack_size(F, e, FEATS_AT + feats_off, OUT_AT + out_off)
    assert got == expected, (
        f"pack_size(F={F}, element_size={e}, feats at 16-byte boundary + {feats_off % 16} bytes, out at + "
        f"{out_off % 16} bytes) gave {got}, expected {expected}: " + why.format(F=F))


def test_pack_size_checks_its_arguments(ext):
    for size in (1, 3, 16):
        with expect_error(r"pack_size: element_size must be 2, 4 or 8 bytes, got " + str(size)):
            ext.pack_size(8, size, FEATS_AT, OUT_AT)
    with expect_error(r"pack_size: F must be >= 0, got -4"):
        ext.pack_size(-4, 4, FEATS_AT, OUT_AT)


def vectorized_shapes():
    """(id, dtype, N, F): every path of forward_vectorized for each dtype."""
    for dtype, pack in PACK.items():
        d = name_of(dtype)
        shapes = {
            "one-pack": (1, pack),  # 1 pack per row; 7 of 8 cubes in the block past N
            "two-packs": (37, 2 * pack),
            "33-packs": (300, 33 * pack),  # 33 packs: 64 threads per row, 31 of them idle
            "257-packs": (20, 257 * pack),  # 257 packs > 256 threads: the row loop goes round twice
            "large": (3000, 32 * pack),
            "F=1": (5, 1),  # fallback: F < pack
            "F=pack-1": (41, pack - 1 if pack > 2 else 3),  # fallback: F < pack, or F odd for float64
            "F=pack+1": (41, pack + 1),  # fallback: F % pack != 0
            "F=3packs+1": (300, 3 * pack + 1),  # fallback: F % pack != 0
        }
        for name, (N, F) in shapes.items():
            yield f"{d}-{name}", dtype, N, F


VEC_SHAPES = list(vectorized_shapes())


# vectorized-kernel without a GPU: the GPU-free judge (coursekit/emulate.py) compiles the chapter's
# launch (with the learner's pack_size) and kernel for the CPU and runs them thread by thread, each
# tensor in guard-paged memory (a read or write outside it names the kernel, block, thread and
# offset), the output poisoned (an element no thread writes is an error). Each case runs twice:
# the tensors ending where their memory ends, then starting there. Not the "large" shapes.
@pytest.fixture(scope="module")
def emulated(judged_source):
    from coursekit import emulate
    return emulate.build("03", judged_source)


@pytest.mark.exercise("vectorized-kernel")
@pytest.mark.parametrize("dtype, N, F", [c[1:] for c in VEC_SHAPES if not c[0].endswith("large")],
                         ids=[c[0] for c in VEC_SHAPES if not c[0].endswith("large")])
def test_vectorized_emulated(emulated, dtype, N, F):
    feats, points = inputs(N, F, "cpu", dtype)
    for at_end in (True, False):
        out = emulated.forward(feats, points, "vectorized", at_end, N + F)
        check(out, feats, points, what=f"forward_vectorized (emulated), N={N}, F={F}")


@pytest.mark.exercise("vectorized-kernel")
def test_vectorized_emulated_stores_along_the_row(emulated):
    """A row of 257 packs, more than a block's 256 threads along it: a thread takes the packs
    threadIdx.x, + blockDim.x, ..., so that at each step a warp's lanes store neighbouring packs (one
    contiguous run of 512 bytes). A thread that takes a run of ceil(packs / blockDim.x) neighbouring
    packs gives the same values, with lanes storing 32 bytes or more apart. The judge notes which
    thread wrote each element of out (x86-64 only)."""
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the judge notes stores on x86-64 only")
    F = 257 * 4
    feats, points = inputs(2, F, "cpu", torch.float32)
    pairs, apart, example = emulated.forward_stores(feats, points)
    assert pairs > 0, f"no two neighbouring lanes of a warp both wrote out (N=2, F={F}): packs should run along threadIdx.x"
    assert apart <= pairs // 4, (
        f"neighbouring lanes of a warp store into out far apart ({apart} of {pairs} pairs of stores, N=2, F={F} "
        f"float32, 257 packs): {example}. Each thread should step through the row's packs by blockDim.x "
        "(p = threadIdx.x; p < packs; p += blockDim.x), so that at each step the warp's lanes store neighbouring "
        "packs, not a run of packs per thread")


# The exercise's point is the width of each access: one 16-byte load per corner and one 16-byte
# store per pack. The values cannot show it (element by element gives the same numbers, and the
# judge runs on a CPU), so where a CUDA toolkit is found the kernel's file is compiled to PTX (device
# code only, a few seconds) and each instantiation of forward_vectorized must load and store 16
# bytes at once: ld.global / st.global of 4 32-bit or 2 64-bit values.
WIDE_LOAD = re.compile(r"\bld\.global(?:\.[\w:]+)*\.(?:v4\.[bfsu]32|v2\.[bfsu]64)\b")
WIDE_STORE = re.compile(r"\bst\.global(?:\.[\w:]+)*\.(?:v4\.[bfsu]32|v2\.[bfsu]64)\b")


def device_ptx(source) -> str:
    """The PTX of source/csrc/trilinear_cuda.cu for sm_80, with the flags torch gives a CUDA extension."""
    from coursekit import toolkit
    from torch.utils import cpp_extension

    kit = toolkit.find_toolkit()
    if kit is None:
        pytest.skip("no CUDA toolkit (nvcc) here: the width of the kernel's loads is checked where there is one")
    flags = [*cpp_extension.COMMON_NVCC_FLAGS, "-O3", "-DWITH_CUDA", "-arch=sm_80", "-ptx", "-I", str(source / "csrc")]
    flags += [f for d in cpp_extension.include_paths(device_type="cuda") for f in ("-isystem", d)]
    with tempfile.TemporaryDirectory() as tmp:
        ptx = Path(tmp) / "trilinear_cuda.ptx"
        errors = ""
        for std in ("-std=c++20", "-std=c++17"):  # torch's headers ask for C++20 from torch 2.10 on
            r = subprocess.run([str(kit.nvcc), *flags, std, str(source / "csrc" / "trilinear_cuda.cu"), "-o", str(ptx)],
                               capture_output=True, text=True)
            if r.returncode == 0:
                return ptx.read_text()
            errors = (r.stdout + r.stderr)[-3000:]
    pytest.fail(f"nvcc could not compile csrc/trilinear_cuda.cu to PTX:\n{errors}")


def ptx_entries(ptx: str, name: str) -> dict[str, str]:
    """The body of every .entry whose (mangled) name contains `name`, by that name."""
    found = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\(", ptx):
        if name in m.group(1):
            start = ptx.index("{", m.end())
            depth, i = 0, start
            while True:
                depth += {"{": 1, "}": -1}.get(ptx[i], 0)
                i += 1
                if depth == 0:
                    break
            found[m.group(1)] = ptx[start:i]
    return found


@pytest.mark.exercise("vectorized-kernel")
def test_vectorized_moves_16_bytes_at_once(judged_source):
    entries = ptx_entries(device_ptx(judged_source), "forward_vectorized")
    assert len(entries) == 4, f"expected forward_vectorized for 4 dtypes in the PTX, found {sorted(entries)}"
    dtypes = {"IdE": "float64", "IfE": "float32", "IN3c104HalfEE": "float16", "IN3c108BFloat16EE": "bfloat16"}
    for mangled, body in entries.items():
        dtype = next((d for k, d in dtypes.items() if k in mangled), mangled)
        loads, stores = len(WIDE_LOAD.findall(body)), len(WIDE_STORE.findall(body))
        assert loads and stores, (
            f"forward_vectorized<{dtype}> compiles to {loads} 16-byte loads and {stores} 16-byte stores of global "
            f"memory (nvcc -ptx): the values are right, but {'the features are read' if not loads else 'out is written'} "
            f"element by element, which is what this kernel exists to avoid. A Pack moves as 16 bytes only when it "
            f"is copied whole, in one statement: into a local Pack before its lanes are read, and from a local Pack "
            f"whose lanes are filled. A lane read or written in place through the Pack pointer, or a scalar_t "
            f"pointer into the row, moves one element at a time (the lesson's last pitfall).")


@pytest.mark.parametrize("mapping", ["naive", "coalesced"])
def test_given_kernels_emulated(emulated, mapping):
    """The chapter's other two kernels through the GPU-free judge too, on shapes whose last block is
    partial along both axes (N and F not multiples of the block)."""
    for dtype, N, F in [(torch.float32, 37, 5), (torch.float64, 9, 70), (torch.bfloat16, 300, 33)]:
        feats, points = inputs(N, F, "cpu", dtype)
        for at_end in (True, False):
            out = emulated.forward(feats, points, mapping, at_end, N + F)
            check(out, feats, points, what=f"forward_{mapping} (emulated), N={N}, F={F}")


@pytest.mark.exercise("vectorized-kernel")
def test_vectorized_past_2_29_cubes_emulated(emulated):
    """The vectorized kernel through the GPU-free judge on N = 2^29 + 64 cubes of one float16 pack
    (F = 8: 64 GiB of feats, reserved, not filled: only the pages written take memory), zero but the
    last 64 cubes; of the launch only the first block and the last 64 run. There n * 8 passes 2^32:
    an index computed in 32 bits wraps, signed (past 2^31) or unsigned."""
    F, T = 8, 64
    N = 2**29 + T
    small = inputs(37, F, "cpu", torch.float16)
    try:  # a kernel wrong on a small input: those tests tell how; a question about 64-bit indices here would mislead
        check(emulated.forward(*small, "vectorized", True, 1), *small, what="forward_vectorized (emulated), N=37")
    except (AssertionError, RuntimeError):
        pytest.fail(f"forward_vectorized is wrong on a small input already (N = 37, F = {F}); the other failing "
                    "tests show where. This test, about cube indices past 2^29, means something once they pass.")
    torch.manual_seed(0)
    tail = torch.randn(T, 8, F, dtype=torch.float16)
    points = torch.rand(T, 3, dtype=torch.float16) * 2 - 1
    try:
        out = emulated.forward_tail(tail, points, N, 1)
    except RuntimeError as e:
        if "cannot reserve" in str(e):
            pytest.skip(f"this machine does not lend {N * 8 * F * 2 >> 30} GiB of address space: {e}")
        raise
    check(out, tail, points, what=f"forward_vectorized (emulated), the last {T} cubes of N = {N} (n * 8 passes 2^32: "
          "is the cube index 64-bit, and signed?)")


@pytest.mark.cuda
@pytest.mark.exercise("vectorized-kernel")
@pytest.mark.parametrize("dtype, N, F", [c[1:] for c in VEC_SHAPES], ids=[c[0] for c in VEC_SHAPES])
def test_vectorized_cuda(ext, device, dtype, N, F):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    feats, points = inputs(N, F, "cuda", dtype)
    with poisoned_empty():
        out = ext.forward_vectorized(feats, points)
    torch.cuda.synchronize()
    path = "16-byte packs" if F % PACK[dtype] == 0 else "the coalesced fallback"
    check(out, feats, points, f"forward_vectorized (N={N}, F={F}, {name_of(dtype)}: {path})")


@pytest.mark.cuda
@pytest.mark.exercise("vectorized-kernel")
def test_vectorized_cuda_stays_inside_its_tensors(ext, device, chapter_source):
    """Every path of forward_vectorized on small shapes, each dtype, under compute-sanitizer's
    memcheck, every tensor its own allocation: each load and store must stay inside its tensor,
    also one whose value is never used, which no comparison of results can see. Then the same
    shapes' values (a kernel that touches nothing is memcheck-clean too)."""
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    cases = [(dtype, N, F) for dtype, pack in PACK.items()
             for N, F in [(1, pack), (3, 2 * pack), (5, 33 * pack), (2, 257 * pack), (3, pack + 1), (5, 1)]]
    assert_memcheck_clean(memcheck_script(chapter_source, f"""
for dtype, N, F in {cases!r}:
    feats = torch.randn(N, 8, F, device="cuda", dtype=dtype)
    points = torch.rand(N, 3, device="cuda", dtype=dtype) * 2 - 1
    ext.forward_vectorized(feats, points)
    ext.forward_vectorized(torch.randn(N * 8 * F + 1, device="cuda", dtype=dtype)[1:].view(N, 8, F), points)
"""), "forward_vectorized on small shapes")
    for dtype, N, F in cases:
        feats, points = inputs(N, F, "cuda", dtype)
        shifted = torch.empty(feats.numel() + 1, device="cuda", dtype=dtype)[1:].view_as(feats)
        shifted.copy_(feats)
        for name, f in [("aligned", feats), ("one element off", shifted)]:
            with poisoned_empty():
                out = ext.forward_vectorized(f, points)
            check(out, f, points, f"forward_vectorized (N={N}, F={F}, {name_of(dtype)}, {name})")


@pytest.mark.cuda
@pytest.mark.exercise("vectorized-kernel")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=name_of)
def test_vectorized_cuda_any_layout(ext, device, dtype, layout):
    """Misaligned slices must take the fallback, a slice 16 bytes in the packs, copies of
    transposed and expanded inputs the packs."""
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    feats, points = layouts(45, 4 * PACK[dtype], "cuda", dtype)[layout]
    with poisoned_empty():
        out = ext.forward_vectorized(feats, points)
    torch.cuda.synchronize()
    check(out, feats, points, f"forward_vectorized on {layout} inputs")


# ---------------------------------------------------------------------------------------
# The timer (exercise `median-timer`)


class Script:
    """A function to time: call i sleeps durations_ms[i] (the last value repeats) and is logged."""

    def __init__(self, durations_ms, sleep=lambda ms: time.sleep(ms / 1e3)):
        self.durations, self.sleep, self.calls = list(durations_ms), sleep, 0

    def __call__(self):
        ms = self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1
        self.sleep(ms)


class FakeClock:
    """Time that passes only when a scripted call says so: exact, whatever else the machine is doing.

    The CPU timer reads time.perf_counter() (the README's spec); the fixture `clock` below puts
    it in place of every monotonic high-resolution clock, so a timer built on any of those is
    measured the same way."""

    def __init__(self):
        self.now = 1000.0

    def seconds(self) -> float:
        return self.now

    def nanoseconds(self) -> int:
        return int(round(self.now * 1e9))

    def advance(self, ms: float) -> None:
        self.now += ms / 1e3


@pytest.fixture
def clock(monkeypatch, stopwatch):
    """The scripted clock in place of the monotonic high-resolution clocks a timer may read:
    time.perf_counter (the README's), perf_counter_ns, monotonic, monotonic_ns and
    timeit.default_timer, also where stopwatch.py imported one by name (from time import
    perf_counter). Not the wall clock (time.time: it jumps when the system time is set, and a
    float of seconds since 1970 resolves only about 0.2 us) and not the CPU-time clocks
    (process_time: a call that waits is not charged): a timer on those reads the real clock
    and these tests see through it."""
    import timeit

    c = FakeClock()
    real = {}
    for name in ("perf_counter", "monotonic"):
        real[getattr(time, name)] = c.seconds
        monkeypatch.setattr(time, name, c.seconds)
    for name in ("perf_counter_ns", "monotonic_ns"):
        real[getattr(time, name)] = c.nanoseconds
        monkeypatch.setattr(time, name, c.nanoseconds)
    monkeypatch.setattr(timeit, "default_timer", c.seconds)
    # timeit.Timer, timeit.timeit and timeit.repeat took default_timer as a default when timeit was imported
    for fn in (timeit.Timer.__init__, timeit.timeit, timeit.repeat):
        monkeypatch.setattr(fn, "__defaults__", tuple(real.get(d, d) if callable(d) else d for d in fn.__defaults__))
    for name, value in list(vars(stopwatch).items()):
        if callable(value) and value in real:
            monkeypatch.setattr(stopwatch, name, real[value])
    return c


def timed(stopwatch, fn, device, warmup, reps):
    ms = stopwatch.median_time_ms(fn, device, warmup=warmup, reps=reps)
    scripted = isinstance(fn, Script) and isinstance(getattr(fn.sleep, "__self__", None), FakeClock)
    if scripted and isinstance(ms, (int, float)) and 0 < min(fn.durations) and ms < min(fn.durations) / 2:
        pytest.fail(f"time the calls with time.perf_counter(), not time.time() (the wall clock) or "
                    f"time.process_time() (CPU time): on the tests' scripted perf_counter every call takes at least "
                    f"{min(fn.durations):g} ms, and the timer gave {ms:.6g} ms")
    return ms


@pytest.mark.exercise("median-timer")
def test_timer_keeps_autograd(stopwatch):
    """The timer calls fn as the caller would: a call that needs autograd (a backward pass) runs
    under the timer as outside it, not under torch.no_grad()."""
    x = torch.ones(5, requires_grad=True)
    ms = stopwatch.median_time_ms(lambda: (x * x).sum().backward(), "cpu", warmup=1, reps=3)
    assert ms >= 0 and x.grad is not None and torch.equal(x.grad, torch.full((5,), 8.0)), (
        "timing a backward pass (1 warm-up call + 3 timed ones) should accumulate x.grad = 4 * 2x = 8")


@pytest.mark.exercise("median-timer")
def test_timer_measures_a_sleep(stopwatch):
    """Real time, on the real clock: a sleep never returns early, but a busy machine may make it late."""
    ms = timed(stopwatch, Script([4]), "cpu", 1, 5)
    assert 3.9 <= ms < 200, f"timing a 4 ms sleep gave {ms:.3g} ms"


@pytest.mark.exercise("median-timer")
@pytest.mark.parametrize("warmup, reps", [(0, 1), (1, 1), (4, 7), (3, 20)])
def test_timer_calls_warmup_plus_reps_times(stopwatch, warmup, reps):
    fn = Script([0])
    stopwatch.median_time_ms(fn, torch.device("cpu"), warmup=warmup, reps=reps)
    assert fn.calls == warmup + reps, f"expected {warmup} warm-up calls + {reps} timed calls, got {fn.calls} calls"


@pytest.mark.exercise("median-timer")
@pytest.mark.parametrize("warmup, reps", [(3, 1), (3, 2), (5, 4), (2, 9)])
def test_timer_leaves_out_slow_warmup_calls(stopwatch, clock, warmup, reps):
    """The first `warmup` calls take 30 ms (a cold start), every later call 2 ms: the timer must say 2 ms."""
    ms = timed(stopwatch, Script([30] * warmup + [2], clock.advance), "cpu", warmup, reps)
    assert ms == pytest.approx(2.0, abs=1e-6), (
        f"warmup={warmup}, reps={reps}: the warm-up calls take 30 ms, the timed calls 2 ms; "
        f"the timer gave {ms:.6g} ms (warm-up time leaking into the measurement?)")


@pytest.mark.exercise("median-timer")
def test_timer_takes_the_median_of_exactly_the_timed_calls(stopwatch, clock):
    """Warm-up calls take 80 ms, the five timed calls 30, 4, 60, 15 and 8 ms: median 15. One call
    left out gives 11.5, 19 or 22.5, one call more 22.5, the mean 23.4."""
    ms = timed(stopwatch, Script([80, 80, 30, 4, 60, 15, 8], clock.advance), "cpu", 2, 5)
    assert ms == pytest.approx(15.0, abs=1e-6), (
        f"timed calls of 30, 4, 60, 15 and 8 ms (after two 80 ms warm-ups) should give their median, 15 ms; "
        f"got {ms:.6g} ms")


@pytest.mark.exercise("median-timer")
def test_timer_median_of_an_even_count_and_fractions(stopwatch, clock):
    """Four timed calls of 0.25, 7.5, 3.25 and 60 ms after two 80 ms warm-ups: the median of an even
    count is the mean of the two middle values, 5.375. The upper or lower middle value gives 7.5 or
    3.25; times cut to whole milliseconds give 5.0."""
    ms = timed(stopwatch, Script([80, 80, 0.25, 7.5, 3.25, 60], clock.advance), "cpu", 2, 4)
    assert ms == pytest.approx(5.375, abs=1e-6), (
        f"timed calls of 0.25, 7.5, 3.25 and 60 ms should give their median, (3.25 + 7.5) / 2 = 5.375 ms; "
        f"got {ms:.6g} ms (one middle value instead of their mean, or times rounded to whole milliseconds?)")


@pytest.mark.exercise("median-timer")
def test_timer_keeps_full_precision_and_returns_a_float(stopwatch, clock):
    """Calls of 1.234 µs (a small kernel launch, a tiny op): the timer returns 0.001234 ms as a
    Python float, not 0 (times rounded to whole milliseconds, to 10 µs or to microseconds) and not a
    tensor or an array (bench.py writes the result to JSON)."""
    ms = timed(stopwatch, Script([0.001234], clock.advance), "cpu", 1, 5)
    assert isinstance(ms, float) and not isinstance(ms, bool), (
        f"the timer returned a {type(ms).__module__}.{type(ms).__name__}; it should return a float (ms)")
    assert ms == pytest.approx(0.001234, rel=1e-3), (
        f"calls of 1.234 µs gave {ms:.6g} ms: keep the clock's full precision (no rounding of the times)")


@pytest.mark.exercise("median-timer")
def test_timer_ignores_outliers(stopwatch, clock):
    """One call in three is slow (another process, a page fault...): the median does not move, a mean does."""
    ms = timed(stopwatch, Script([60, 1, 1] * 3, clock.advance), "cpu", 0, 9)
    assert ms == pytest.approx(1.0, abs=1e-6), (
        f"median of calls of 1 ms with one of 60 ms in three was {ms:.6g} ms (a mean instead of a median?)")


# On a GPU: torch.cuda._sleep(cycles) queues a kernel that spins for `cycles` clock ticks and
# returns at once, like any launch. The tests measure how long a cycle takes first. A GPU's clock
# moves with its load and temperature, so each sleep is also bracketed by CUDA events of its own:
# a test compares a timer with what the GPU took (`took_ms`), not with what was asked.


class GpuSleep:
    """sleep(ms): queue about `ms` milliseconds of GPU work on the current stream, between two
    events of its own (not inside a CUDA graph's capture)."""

    def __init__(self, cycles_per_ms: float):
        self.cycles_per_ms, self.spans = cycles_per_ms, []

    def __call__(self, ms: float) -> None:
        if torch.cuda.is_current_stream_capturing():
            torch.cuda._sleep(int(ms * self.cycles_per_ms))
            return
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(int(ms * self.cycles_per_ms))
        end.record()
        self.spans.append((start, end))

    def took_ms(self, last: int) -> float:
        """The median of what the last `last` sleeps took on the GPU, in ms; forgets every sleep."""
        torch.cuda.synchronize()
        spans, self.spans = self.spans[-last:], []
        return statistics.median(start.elapsed_time(end) for start, end in spans)


@pytest.fixture(scope="module")
def gpu_cycles_per_ms():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    cycles, times = 20_000_000, []
    torch.cuda._sleep(cycles)  # warm-up
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return cycles / statistics.median(times)


@pytest.fixture
def gpu_sleep(gpu_cycles_per_ms):
    return GpuSleep(gpu_cycles_per_ms)


@pytest.mark.cuda
@pytest.mark.exercise("median-timer")
@pytest.mark.parametrize("spelling", ["cuda", "torch.device(cuda)", "cuda:N", "torch.device(cuda:N)"])
def test_timer_cuda_waits_for_the_gpu(stopwatch, gpu_sleep, spelling):
    """Every way of naming the GPU: "cuda", "cuda:0", torch.device(...): all are CUDA devices
    (torch.device(device).type), not only the string "cuda"."""
    name = "cuda" if "N" not in spelling else f"cuda:{torch.cuda.current_device()}"
    device = torch.device(name) if spelling.startswith("torch.device") else name
    ms = timed(stopwatch, Script([8], gpu_sleep), device, 1, 5)
    took = gpu_sleep.took_ms(last=5)
    assert 0.8 * took <= ms < 1.25 * took, (
        f"timing about 8 ms of GPU work ({took:.3g} ms a call by the GPU's own events) gave {ms:.3g} ms: the events "
        f"must bracket each call on the stream it queues its work on, and be read once the GPU has reached them")


@pytest.mark.cuda
@pytest.mark.exercise("median-timer")
def test_timer_cuda_on_a_side_stream(stopwatch, gpu_sleep):
    """Under `with torch.cuda.stream(s)`, fn queues its work on s: so must the events be recorded."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ms = timed(stopwatch, Script([8], gpu_sleep), "cuda", 1, 5)
    took = gpu_sleep.took_ms(last=5)
    assert 0.8 * took <= ms < 1.25 * took, (f"timing about 8 ms of GPU work queued on a side stream ({took:.3g} ms a "
                                            f"call by the GPU's own events) gave {ms:.3g} ms")


@pytest.mark.cuda
@pytest.mark.exercise("median-timer")
@pytest.mark.parametrize("warmup, reps", [(3, 1), (3, 2), (4, 3)])
def test_timer_cuda_leaves_out_slow_warmup_calls(stopwatch, gpu_sleep, warmup, reps):
    """The warm-up calls queue 40 ms of GPU work each, the timed calls 4 ms: the warm-up work is
    still running when the first timed call is queued."""
    ms = timed(stopwatch, Script([40] * warmup + [4], gpu_sleep), "cuda", warmup, reps)
    took = gpu_sleep.took_ms(last=reps)
    assert 0.8 * took <= ms < 1.375 * took, (
        f"warmup={warmup}, reps={reps}: warm-up calls of 40 ms and timed calls of about 4 ms of GPU work ({took:.3g} ms "
        f"by the GPU's own events) gave {ms:.3g} ms (warm-up work leaking into the first timed call?)")


@pytest.mark.cuda
@pytest.mark.exercise("median-timer")
def test_timer_cuda_takes_the_median_of_exactly_the_timed_calls(stopwatch, gpu_sleep):
    """Warm-ups of 40 ms, then timed calls of 15, 2, 30, 7.5 and 4 ms of GPU work: median 7.5
    (one call too few gives 5.75 or 11.25 or more, one too many 11.25, the mean 11.7)."""
    fn = Script([40, 40, 15, 2, 30, 7.5, 4], gpu_sleep)
    ms = timed(stopwatch, fn, "cuda", 2, 5)
    took = gpu_sleep.took_ms(last=5)
    assert fn.calls == 7, f"expected 2 warm-up calls + 5 timed calls, got {fn.calls} calls"
    assert 0.92 * took <= ms < 1.147 * took, (f"GPU calls of about 15, 2, 30, 7.5 and 4 ms should give their median, "
                                              f"{took:.3g} ms by the GPU's own events; got {ms:.3g} ms")


@pytest.mark.cuda
def test_bench_graph_times_the_gpu_not_the_host(gpu_sleep):
    """A call that spends 2 ms on the host and queues 0.2 ms of GPU work: bench() sees the host's
    2 ms, bench_graph() the GPU's 0.2 ms (the host code runs at capture only)."""
    def call():
        time.sleep(0.002)
        gpu_sleep(0.2)

    host = timing.bench(call, "cuda", min_run_time=0.1)
    gpu = timing.bench_graph(call, reps=5, min_run_time=0.1)
    assert host.median_ms >= 1.9, f"bench() of 2 ms of host work per call gave {host.median_ms:.3g} ms"
    assert 0.15 <= gpu.median_ms < 0.4, f"bench_graph() of 0.2 ms of GPU work per call gave {gpu.median_ms:.3g} ms"


@pytest.mark.cuda
def test_time_once_wrong_sees_only_the_launch(stopwatch, gpu_sleep):
    torch.cuda.synchronize()
    wrong = stopwatch.time_once_wrong(lambda: gpu_sleep(20))
    torch.cuda.synchronize()
    assert wrong < 5, f"time.time() without synchronize should only see the launch, got {wrong:.3g} ms"


# ---------------------------------------------------------------------------------------
# Profiling one call (exercise `profile-call`)
#
# Workloads with known answers. On the CPU: a number of top-level operators each with nested
# operators inside (x.sum() runs aten::sum inside aten::sum, with aten::as_strided and
# aten::fill_); two custom operators that sleep a known time, one calling the other (so
# their ranges nest); a host sleep inside nested record_function ranges. On a GPU: k small
# kernels with their launches, a copy and a record_function range around them;
# torch.cuda._sleep kernels of a known length; large fills whose time CUDA events measure.


@pytest.fixture(scope="module")
def profiling(ext, chapter_source):
    return load_python(chapter_source, "profiling")


@torch.library.custom_op("course_profile_check::nap", mutates_args=())
def _nap(x: torch.Tensor, ms: float) -> torch.Tensor:
    """An operator that takes `ms` milliseconds (a sleep) and returns a copy of x."""
    time.sleep(ms / 1e3)
    return x.clone()


@torch.library.custom_op("course_profile_check::nap_twice", mutates_args=())
def _nap_twice(x: torch.Tensor, ms: float) -> torch.Tensor:
    """An operator that sleeps `ms` milliseconds, then calls the nap operator: 2 * ms in all, one range inside another."""
    time.sleep(ms / 1e3)
    return torch.ops.course_profile_check.nap(x, ms)


class Calls:
    """A function to profile: call i runs plan[i] (the last one repeats), and the calls are counted."""

    def __init__(self, *plan):
        self.plan, self.calls = plan, 0

    def __call__(self):
        step = self.plan[min(self.calls, len(self.plan) - 1)]
        self.calls += 1
        step()


def sums(k, x):
    """k top-level operators (x.sum()), each with 3 operators nested inside it."""
    def run():
        for _ in range(k):
            x.sum()
    return run


def profiled(profiling, fn, device, warmup=1):
    result = profiling.profile_call(fn, device, warmup=warmup)
    assert isinstance(result, profiling.CallProfile), f"profile_call returned a {type(result).__name__}, not a CallProfile"
    assert type(result.kernels) is int, f"kernels should be an int, got {type(result.kernels).__name__}"
    for field in ("device_us", "host_us"):
        value = getattr(result, field)
        assert isinstance(value, float), f"{field} should be a float (µs), got {type(value).__name__}"
        assert value >= 0, f"{field} = {value}: a time is never negative"
    return result


@pytest.mark.exercise("profile-call")
@pytest.mark.parametrize("k", [1, 3, 8])
def test_profile_cpu_counts_top_level_operators(profiling, k):
    """k calls of x.sum(): k top-level operators (each has aten::sum, aten::as_strided and aten::fill_
    inside it: counting those too gives 4k; counting operator names gives 1; the profiler's and your
    own record_function ranges are no operators)."""
    p = profiled(profiling, sums(k, torch.ones(64)), "cpu")
    assert p.kernels == k, (f"a call running x.sum() {k} times has {k} top-level operators; profile_call counted "
                            f"{p.kernels} (nested operators, ranges or other events counted, or names instead of calls?)")
    assert p.device_us <= p.host_us * 1.05 + 5, (
        f"device_us = {p.device_us:.0f} µs > host_us = {p.host_us:.0f} µs: on the CPU the top-level operators run "
        f"inside the call, so their durations cannot add up to more than the call (a range counted twice?)")


@pytest.mark.exercise("profile-call")
@pytest.mark.parametrize("warmup", [0, 1, 3])
def test_profile_cpu_leaves_out_the_warmup(profiling, warmup):
    """The warm-up calls run 6 operators, the profiled call 2: profile_call must see exactly the 2,
    after exactly `warmup` warm-up calls."""
    x = torch.ones(64)
    fn = Calls(*([sums(6, x)] * warmup), sums(2, x))
    p = profiled(profiling, fn, torch.device("cpu"), warmup=warmup)
    assert fn.calls == warmup + 1, f"warmup={warmup}: expected {warmup} warm-up calls and 1 profiled call, got {fn.calls} calls"
    assert p.kernels == 2, (f"warmup={warmup}: each warm-up call runs 6 operators, the profiled call 2; profile_call "
                            f"counted {p.kernels} (warm-up calls inside the profile, or the first call profiled?)")


@pytest.mark.exercise("profile-call")
def test_profile_cpu_nested_operators_count_once(profiling):
    """One operator that sleeps 20 ms and then calls another that sleeps 20 ms: one top-level operator
    of 40 ms. Summing the inner operator's range too gives 60 ms, only the innermost (leaf) 20 ms."""
    x = torch.ones(4)
    p = profiled(profiling, lambda: torch.ops.course_profile_check.nap_twice(x, 20.0), "cpu")
    assert p.kernels == 1, f"one top-level operator (with operators inside it), profile_call counted {p.kernels}"
    assert p.host_us >= 40_000, f"the call sleeps 20 ms twice, so host_us >= 40000 µs; got {p.host_us:.0f}"
    # A busy machine stretches the sleeps (a thread that wakes waits for a core), so the bounds follow the
    # call's own length: the top-level operator spans the whole call.
    assert 0.9 * p.host_us <= p.device_us <= 1.02 * p.host_us + 100, (
        f"the top-level operator sleeps 20 ms and calls one that sleeps 20 ms, so it spans the call: device_us "
        f"should be about host_us = {p.host_us:.0f} µs, got {p.device_us:.0f} (host_us + 20000: nested ranges "
        f"added twice; about half of host_us: only the innermost operator)")


def profiled_with_operators(profiling, monkeypatch, ops):
    """profile_call of a short sleep whose trace's cpu_op events are replaced by `ops`: (name, start
    after the call's range begins + 50 µs, duration µs, on another thread than the call's?). The
    call's other events are real. Skips when profile_call does not read the trace through
    trace_events."""
    real = profiling.trace_events
    seen = []

    def crafted(prof):
        events = [e for e in real(prof) if e["cat"] != "cpu_op"]
        ranges = [e for e in events if e["cat"] == "user_annotation" and not e["name"].startswith("ProfilerStep")]
        call = max(ranges or events, key=lambda e: e["ts"])  # the call's own range: the last to start
        t0, tid, pid = call["ts"] + 50.0, call["tid"], call["pid"]
        other = (tid + 1) if isinstance(tid, int) else f"{tid}-worker"
        seen.append(True)
        return events + [{"name": n, "cat": "cpu_op", "ts": t0 + at, "dur": d, "pid": pid, "tid": other if apart else tid}
                         for n, at, d, apart in ops]

    monkeypatch.setattr(profiling, "trace_events", crafted)
    p = profiled(profiling, lambda: time.sleep(0.002), "cpu")
    if not seen:
        pytest.skip("profile_call does not read the profile through trace_events; this case feeds it one")
    return p


@pytest.mark.exercise("profile-call")
def test_profile_cpu_operators_starting_together(profiling, monkeypatch):
    """A trace gives times in microseconds, and a thin operator starts the one inside it at once: two
    operators (and a third inside both) can share a start time, the inner ones listed first. The longer
    is the top-level one. An operator that starts exactly where the previous top-level one ends is
    top-level too. The call's events are real; its operators are these, placed inside its range."""
    p = profiled_with_operators(profiling, monkeypatch, [("aten::leaf", 0.0, 5.0, False), ("aten::inner", 0.0, 20.0, False),
                                                         ("aten::outer", 0.0, 500.0, False),
                                                         ("aten::next", 500.0, 100.0, False)])
    assert (p.kernels, p.device_us) == (2, 600.0), (
        f"operators of 5, 20 and 500 µs starting together (listed shortest first), then one of 100 µs starting "
        f"where they end: 2 top-level operators, 600 µs; profile_call gave kernels={p.kernels}, "
        f"device_us={p.device_us:g} (sorted by start time only, the shortest taken for the outer one? "
        f"or an operator that starts at the previous one's end taken as inside it?)")


@pytest.mark.exercise("profile-call")
def test_profile_cpu_operators_on_two_threads(profiling, monkeypatch):
    """Top-level is per thread: an operator of another thread that runs while one of this thread does
    is top-level on its own (intra-op threads, a DataLoader's worker). The call's events are real;
    its operators are these, on its thread and on another."""
    p = profiled_with_operators(profiling, monkeypatch, [("aten::outer", 0.0, 500.0, False),
                                                         ("aten::inner", 10.0, 50.0, False),
                                                         ("aten::worker", 100.0, 200.0, True)])
    assert (p.kernels, p.device_us) == (2, 700.0), (
        f"an operator of 500 µs (with one of 50 µs inside it) on the call's thread, and one of 200 µs on another "
        f"thread while it runs: 2 top-level operators, 700 µs; profile_call gave kernels={p.kernels}, "
        f"device_us={p.device_us:g} (is 'inside another operator' decided across threads instead of per thread?)")


@pytest.mark.exercise("profile-call")
def test_profile_cpu_host_time(profiling):
    """A call that sleeps 30 ms in Python inside two nested record_function ranges, then runs one small
    operator: the host's time is 30 ms (once, not once per range), the operators' time small."""
    from torch.profiler import record_function

    x = torch.ones(64)

    def fn():
        with record_function("outer"):
            with record_function("inner"):
                time.sleep(0.03)
        x.sum()

    p = profiled(profiling, fn, "cpu")
    assert 30_000 <= p.host_us < 45_000, (
        f"the call sleeps 30 ms on the host: host_us should be about 30000 µs, got {p.host_us:.0f} "
        f"(about 60000 or 90000: nested ranges added up; below 30000: not the whole call)")
    assert p.kernels == 1, f"one operator (x.sum()) at the top level; record_function ranges are none; got {p.kernels}"
    assert p.device_us < 5_000, (f"device_us = {p.device_us:.0f} µs for one small x.sum(): the sleep is host time outside "
                                 f"every operator, not the operators' time (the call's whole time used?)")


# On a GPU (gpu_sleep, above: a kernel that spins a known number of milliseconds).


@pytest.mark.cuda
@pytest.mark.exercise("profile-call")
@pytest.mark.parametrize("spelling", ["cuda", "cuda:N", "torch.device(cuda:N)"])
def test_profile_cuda_counts_kernels(profiling, gpu_sleep, spelling):
    """Inside a record_function range: 3 small kernels (x.add_), one gpu_sleep kernel and a host-to-device
    copy (not a kernel): 4 kernels. Counted with their cudaLaunchKernel calls: 8; with the copy or the
    range's GPU row: 5 or 6."""
    from torch.profiler import record_function

    name = "cuda" if "N" not in spelling else f"cuda:{torch.cuda.current_device()}"
    device = torch.device(name) if spelling.startswith("torch.device") else name
    x = torch.zeros(1 << 16, device="cuda")

    def fn():
        with record_function("work"):
            for _ in range(3):
                x.add_(1)
            gpu_sleep(0.2)
            torch.ones(4).to("cuda")

    p = profiled(profiling, fn, device)
    torch.cuda.synchronize()
    assert p.kernels == 4, (f"3 x.add_ kernels and one sleep kernel (a copy is not a kernel): 4 kernels, profile_call "
                            f"counted {p.kernels} (launch calls, copies or the range on the GPU counted?)")
    assert 150 <= p.device_us < 600, (f"about 0.2 ms of GPU sleep and 3 tiny kernels: device_us should be about 200 µs, "
                                      f"got {p.device_us:.0f}")


@pytest.mark.cuda
@pytest.mark.exercise("profile-call")
def test_profile_cuda_device_time_is_the_gpus(profiling, gpu_sleep):
    """One kernel of 5 ms of GPU work: device_us about 5000. The host only queues it: host_us is the
    launch, well under the 5 ms (a synchronize inside the host's time makes it 5 ms)."""
    p = profiled(profiling, lambda: gpu_sleep(5), "cuda")
    took = gpu_sleep.took_ms(last=1) * 1e3
    assert p.kernels == 1, f"one kernel, profile_call counted {p.kernels}"
    assert 0.8 * took <= p.device_us < 1.3 * took, (f"about 5 ms of GPU work ({took:.0f} µs by the GPU's own events): "
                                                    f"device_us should be about that, got {p.device_us:.0f}")
    assert p.host_us < 1_000, (f"the call returns once its kernel is queued: host_us should be the launch (tens of µs), "
                               f"got {p.host_us:.0f} µs (a synchronize inside the call's host time, or the profiler's "
                               f"start-up: the first launch it watches is slow, so let its warm-up steps take it)")


@pytest.mark.cuda
@pytest.mark.exercise("profile-call")
def test_profile_cuda_host_time_is_the_hosts(profiling, gpu_sleep):
    """20 ms asleep on the host, then 1 ms of GPU work: host_us about 20000, device_us about 1000
    (the wall time of the call and its synchronize would be about 21000 for both)."""
    def fn():
        time.sleep(0.02)
        gpu_sleep(1)

    p = profiled(profiling, fn, "cuda")
    took = gpu_sleep.took_ms(last=1) * 1e3
    assert 20_000 <= p.host_us < 35_000, f"the call sleeps 20 ms on the host: host_us should be about 20000, got {p.host_us:.0f}"
    assert 0.7 * took <= p.device_us < 1.6 * took, (f"about 1 ms of GPU work ({took:.0f} µs by the GPU's own events): "
                                                    f"device_us should be about that, got {p.device_us:.0f} "
                                                    f"(the wall time of the call used for the GPU's?)")


@pytest.mark.cuda
@pytest.mark.exercise("profile-call")
def test_profile_cuda_nested_operators_count_once(profiling):
    """x.zero_() three times on a 1 GiB tensor, inside a record_function range: 3 kernels (aten::zero_
    calls aten::fill_, which launches one). Their time is 3 fills as CUDA events measure one; adding
    the device time of both operators, or the range's GPU row, gives twice that."""
    from torch.profiler import record_function

    x = torch.empty(1 << 28, device="cuda")
    x.zero_()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        x.zero_()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    one = statistics.median(times)

    def fn():
        with record_function("fills"):
            for _ in range(3):
                x.zero_()

    p = profiled(profiling, fn, "cuda")
    torch.cuda.synchronize()
    assert p.kernels == 3, f"three fills, one kernel each; profile_call counted {p.kernels}"
    assert 0.8 * 3 * one <= p.device_us < 1.25 * 3 * one, (
        f"three fills of {one:.0f} µs each (CUDA events): device_us should be about {3 * one:.0f}, got {p.device_us:.0f} "
        f"(about twice: a kernel counted under each operator that encloses it, or the range's GPU row added)")


@pytest.mark.cuda
@pytest.mark.exercise("profile-call")
@pytest.mark.parametrize("warmup", [1, 2])
def test_profile_cuda_leaves_out_the_warmup(profiling, gpu_sleep, warmup):
    """Warm-up calls queue 40 ms of GPU work and 3 more kernels, the profiled call one kernel of 2 ms."""
    x = torch.zeros(1 << 16, device="cuda")

    def cold():
        gpu_sleep(40)
        for _ in range(3):
            x.add_(1)

    fn = Calls(*([cold] * warmup), lambda: gpu_sleep(2))
    p = profiled(profiling, fn, "cuda", warmup=warmup)
    took = gpu_sleep.took_ms(last=1) * 1e3
    assert fn.calls == warmup + 1, f"warmup={warmup}: expected {warmup} warm-up calls and 1 profiled call, got {fn.calls}"
    assert p.kernels == 1 and 0.8 * took <= p.device_us < 1.3 * took, (
        f"warmup={warmup}: the profiled call runs one kernel of about 2 ms ({took:.0f} µs by the GPU's own events); "
        f"profile_call gave {p.kernels} kernels, {p.device_us:.0f} µs (warm-up work inside the profile?)")


# ---------------------------------------------------------------------------------------
# The harness and the benchmark


def test_harness_sanity():
    t = timing.bench(lambda: time.sleep(0.002), "cpu", min_run_time=0.05)
    assert 1.9 <= t.median_ms < 20 and t.runs >= 5
    assert timing.copy_bandwidth("cpu", nbytes=1 << 22) > 1e8  # > 0.1 GB/s on any machine
    assert timing.floor_ms(2_000_000, 1e9) == pytest.approx(2.0)


def test_bench_quick_writes_json(ext, chapter_source, tmp_path):
    out, out02 = tmp_path / "q.json", tmp_path / "q02.json"
    proc = subprocess.run([sys.executable, str(chapter_source / "bench.py"), "--quick", "--device", "cpu",
                           "--out", str(out), "--ch02-out", str(out02)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    names = {r["name"] for r in doc["records"]}
    assert {"coalesced", "naive", "vectorized", "eager"} <= names
    assert doc["environment"]["device_type"] == "cpu" and doc["environment"]["bandwidth_Bps"] > 0
    assert all(r["median_ms"] > 0 and 0 < r["fraction_of_floor"] for r in doc["records"])
    assert len(doc["environment"]["timing_methods"]) == 5
    assert {r["name"] for r in json.loads(out02.read_text())["records"]} == {"chapter02", "eager"}
    # the floor counts every byte the op must move, in the dtype it was timed in: feats, points and out
    size = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
    for r in doc["records"]:
        if "N" in r and "bytes" in r:
            N, F = r["N"], r["F"]
            assert r["bytes"] == (N * 8 * F + 3 * N + N * F) * size[r["dtype"]], (
                f"{r['name']} at N={N} F={F} {r['dtype']}: {r['bytes']} bytes counted, the op reads feats (N, 8, F) and "
                f"points (N, 3) and writes out (N, F): {(N * 8 * F + 3 * N + N * F) * size[r['dtype']]}")
    assert {r["dtype"] for r in doc["records"] if r.get("sweep") == "dtype"} == set(size)
