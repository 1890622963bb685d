"""Chapter 02: trilinear forward, CPU and CUDA.

Every graded test grades one exercise (its `exercise` marker) and may rely on the rest of
the chapter being right. Outputs are compared with a float64 reference written from the
formula: float64 outputs element by element at 1e-12, float16/bfloat16 outputs to within
one unit in the last place (what computing in float and rounding once gives), float32
outputs by relative error.
"""

import os

import pytest
import torch

from coursekit.testing import (assert_bitwise, assert_close, assert_float64, assert_memcheck_clean, assert_no_data_race,
                               assert_property, assert_rounded, expect_error, memcheck_script, poisoned_empty)

CHAPTER = "02"

LOW = (torch.float16, torch.bfloat16)


def reference(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Trilinear interpolation in float64, written from the formula (corner k at offsets (k>>2&1, k>>1&1, k&1))."""
    feats, points = feats.double().cpu(), points.double().cpu()
    uvw = (points + 1) / 2
    out = torch.zeros(feats.shape[0], feats.shape[2], dtype=torch.float64)
    for k in range(8):
        bits = [(k >> 2) & 1, (k >> 1) & 1, k & 1]
        weight = torch.ones(feats.shape[0], dtype=torch.float64)
        for axis, bit in enumerate(bits):
            weight = weight * (uvw[:, axis] if bit else 1 - uvw[:, axis])
        out += weight[:, None] * feats[:, k, :]
    return out


def inputs(N, F, device="cpu", dtype=torch.float32, spread=1.0):
    """Random feats around 1 (the eight products add up to values that no 16-bit type holds
    exactly) and random points in [-spread, spread] (not on a coarse dyadic grid)."""
    feats = (torch.randn(N, 8, F, dtype=torch.float64) + 1).to(device, dtype)
    points = ((torch.rand(N, 3, dtype=torch.float64) * 2 - 1) * spread).to(device, dtype)
    return feats, points


def assert_matches(out: torch.Tensor, feats: torch.Tensor, points: torch.Tensor, dtype: torch.dtype) -> None:
    """out against the float64 reference of the same (rounded) inputs, as strictly as `dtype` allows."""
    assert out.dtype == dtype, f"output dtype {out.dtype}, expected {dtype} (the dtype of feats)"
    assert out.device == feats.device, f"output on {out.device}, expected {feats.device} (the device of feats)"
    ref = reference(feats, points)

    def inputs(idx):  # what out[n, f] is made of
        n, f = idx
        return (f"points[{n}] = {fmt(points[n])}, feats[{n}, :, {f}] = {fmt(feats[n, :, f])}")

    if dtype == torch.float64:
        assert_float64(out, ref, inputs=inputs)
    elif dtype in LOW:
        assert_rounded(out, ref, inputs=inputs)
    else:
        assert_close(out, ref.to(dtype), dtype, inputs=inputs)


def fmt(t: torch.Tensor) -> str:
    """A few values, short: [0.25, -1, 0.3333]."""
    return "[" + ", ".join(f"{v:.4g}" for v in t.detach().double().cpu().flatten().tolist()) + "]"


def check_forward(ext, device, dtype, N, F, spread=1.0):
    feats, points = inputs(N, F, device, dtype, spread)
    with poisoned_empty():  # every output element the kernel forgets stays NaN
        out = ext.forward(feats, points)
    assert_matches(out, feats, points, dtype)


# ---------------------------------------------------------------------------- corner-weight


@pytest.mark.exercise("corner-weight")
def test_each_corner_returns_its_feature(ext, device, dtype):
    """A point at corner k returns feats[:, k] exactly (one weight is 1, the other seven 0)."""
    feats = inputs(8, 5, device, dtype)[0]
    corners = torch.tensor([[(k >> 2) & 1, (k >> 1) & 1, k & 1] for k in range(8)], dtype=dtype) * 2 - 1
    with poisoned_empty():
        out = ext.forward(feats, corners.to(device))
    wrong = []
    for k in range(8):
        try:
            assert_bitwise(out[k], feats[k, k])
        except AssertionError:
            wrong.append(k)
    assert not wrong, (f"the points at corners {wrong} do not return those corners' features exactly (corner k "
                       f"sits at offsets (k>>2&1, k>>1&1, k&1) along x, y, z: corner 1 at {corners[1].tolist()})")


@pytest.mark.exercise("corner-weight")
def test_interior_points_float64(ext, device):
    """Points inside the cube, in float64: every weight must be computed in T, not float."""
    check_forward(ext, device, torch.float64, 300, 20)


@pytest.mark.exercise("corner-weight")
def test_centre_is_the_mean(ext, device):
    feats = torch.randn(3, 8, 4, device=device, dtype=torch.float64)
    out = ext.forward(feats, torch.zeros(3, 3, device=device, dtype=torch.float64))
    assert_float64(out, feats.mean(dim=1), what="at the centre (every weight 1/8)")


@pytest.mark.exercise("corner-weight")
def test_points_outside_extrapolate(ext, device):
    """Documented behaviour: no clamping; the same formula continues linearly."""
    feats, points = inputs(200, 16, device, torch.float64, spread=3.0)
    assert points.abs().max() > 1
    with poisoned_empty():
        out = ext.forward(feats, points)
    assert_float64(out, reference(feats, points), what="points up to 3 away from the centre (extrapolation)")


# ---------------------------------------------------------------------------- cpu-kernel

# (N, F): one cube, one feature; F larger than any vector width; F and N odd; a size
# that at::parallel_for splits over threads.
SIZES = [(1, 1), (1, 300), (37, 33), (500, 64), (1000, 257)]


@pytest.mark.exercise("cpu-kernel")
@pytest.mark.parametrize("N, F", SIZES)
def test_forward_cpu(ext, dtype, N, F):
    check_forward(ext, "cpu", dtype, N, F)


@pytest.mark.exercise("cpu-kernel")
@pytest.mark.parametrize("threads", [3, 4])
def test_forward_cpu_threads(ext, threads):
    """With several threads at::parallel_for hands each one a chunk [begin, end) of the cubes."""
    was = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        check_forward(ext, "cpu", torch.float64, 1001, 96)  # chunks of 341 cubes or more: begin > 0
        check_forward(ext, "cpu", torch.float32, 4001, 24)
    finally:
        torch.set_num_threads(was)


@pytest.mark.exercise("cpu-kernel")
@pytest.mark.parametrize("dtype", LOW, ids=["float16", "bfloat16"])
def test_forward_cpu_rounds_once(ext, dtype):
    """Larger values: computing in the 16-bit type instead of float shows here as well."""
    feats = (torch.randn(400, 8, 96, dtype=torch.float64) * 3 + 20).to(dtype)
    points = (torch.rand(400, 3, dtype=torch.float64) * 2 - 1).to(dtype)
    with poisoned_empty():
        out = ext.forward(feats, points)
    assert_rounded(out, reference(feats, points))


# ---------------------------------------------------------------------------- cuda-kernel

# Launch-configuration sizes: N = 1 and N not a multiple of the rows per block; F = 1,
# F not a multiple of 32, F = 256 and 512 (exactly one or two block widths), F > 256.
CUDA_SIZES = SIZES + [(7, 5), (45, 100), (33, 256), (9, 512), (3000, 1000)]


@pytest.mark.cuda
@pytest.mark.exercise("cuda-kernel")
@pytest.mark.parametrize("N, F", CUDA_SIZES)
def test_forward_cuda(ext, device, dtype, N, F):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_forward(ext, "cuda", dtype, N, F)


@pytest.mark.cuda
@pytest.mark.exercise("cuda-kernel")
def test_forward_cuda_outside(ext, device, dtype):
    """Points up to 3 away from the centre: extrapolated, as on the CPU."""
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_forward(ext, "cuda", dtype, 300, 40, spread=3.0)


# cuda-kernel without a GPU: the GPU-free judge (coursekit/emulate.py) compiles the kernel and its
# launch for the CPU and runs them thread by thread, each tensor in guard-paged memory (a read or
# write outside it is an error naming the kernel, block, thread and offset), the output poisoned
# (an element no thread writes is an error), the launch checked as a GPU's driver checks it. Each
# case runs twice: the tensors ending where their memory ends, then starting where it starts.
# Sizes: one thread's worth, partial blocks along both axes, F past one block's width.
EMULATED_SIZES = [(1, 1), (3, 5), (7, 33), (9, 257), (33, 100), (130, 300), (2, 600)]


@pytest.fixture(scope="module")
def emulated(judged_source):
    from coursekit import emulate
    return emulate.build("02", judged_source)


@pytest.mark.exercise("cuda-kernel")
@pytest.mark.parametrize("N, F", EMULATED_SIZES)
def test_forward_cuda_emulated(emulated, dtype, N, F):
    feats, points = inputs(N, F, dtype=dtype)
    for at_end in (True, False):
        out = emulated.forward(feats, points, at_end, N * F)
        assert_matches(out, feats, points, dtype)


@pytest.mark.exercise("cuda-kernel")
@pytest.mark.parametrize("N, F", [(5, 1), (5, 32), (4, 64), (5, 40), (9, 100), (3, 256), (2, 600)])
def test_forward_cuda_launch_is_the_design(emulated, N, F):
    """The launch puts f on threadIdx.x in whole warps (a warp's 32 threads read 32 neighbouring
    features of one cube: coalesced) and the cubes on threadIdx.y: right values from another
    mapping (f on threadIdx.y, or a row of fewer than 32 threads) read memory the way this
    chapter teaches to avoid. F = 32 and 64 are whole warps already: a rounding off by one doubles
    or widens their blocks. The launch is checked before what it computed: a launch of the wrong
    shape often leaves outputs unwritten, and the shape is then the telling message."""
    feats, points = inputs(N, F, dtype=torch.float32)
    failure = None
    try:
        emulated.forward(feats, points, True, 1)
    except RuntimeError as e:  # a launch refused as a GPU refuses it was not recorded: that error is the message
        if "invalid configuration" in str(e) or "stream" in str(e):
            raise
        failure = e
    gx, gy, gz, bx, by, bz = emulated.last_launch()
    assert bx % 32 == 0 and bz == 1, (
        f"N={N}, F={F}: block ({bx}, {by}, {bz}); blockDim.x must be a multiple of 32 (f along threadIdx.x, "
        f"whole warps: F rounded up to a warp, at most 256) and the cubes along threadIdx.y (block (tx, ty) "
        f"with tx threads along f, not (ty, tx)?)")
    # The design's numbers: a block shaped otherwise may still give right values (the cubes along x and
    # f along y in a (32, 8) block, say), with a warp reading one feature of 32 cubes.
    tx = min(256, (F + 31) // 32 * 32)
    ty = 256 // tx
    assert (bx, by, gx, gy, gz) == (tx, ty, -(-N // ty), 1, 1), (
        f"N={N}, F={F}: grid ({gx}, {gy}, {gz}), block ({bx}, {by}, {bz}); the design's launch is block ({tx}, {ty}) "
        f"(tx = F rounded up to a multiple of 32, at most 256; ty = 256 / tx) and {-(-N // ty)} blocks along x "
        f"(ceil(N / ty))")
    if failure is not None:
        raise failure


@pytest.mark.exercise("cuda-kernel")
@pytest.mark.parametrize("N, F", [(33, 100), (7, 33)])
def test_forward_cuda_emulated_outside(emulated, dtype, N, F):
    """Points up to 3 away from the centre: the kernel extrapolates as the lesson's formula does (no
    clamp to the cube, weights that go negative), like the CPU kernel (test_points_outside_extrapolate)."""
    feats, points = inputs(N, F, dtype=dtype, spread=3.0)
    assert points.abs().max() > 1
    out = emulated.forward(feats, points, True, N + F)
    assert_matches(out, feats, points, dtype)


@pytest.mark.exercise("cuda-kernel")
def test_forward_cuda_emulated_stores_along_f(emulated):
    """F wider than a block (2000 features, 256 threads along f): a thread takes the features
    threadIdx.x, + blockDim.x, + 2 * blockDim.x, ..., so that at each step a warp's 32 stores are 32
    neighbouring features (coalesced). A thread that takes a run of ceil(F / blockDim.x) neighbouring
    features instead gives the same values, with each lane's store a transaction of its own. The judge
    notes which thread wrote each element of out (x86-64 only)."""
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the judge notes stores on x86-64 only")
    feats, points = inputs(2, 2000, dtype=torch.float32)
    pairs, apart, example = emulated.forward_stores(feats, points)
    assert pairs > 0, "no two neighbouring lanes of a warp both wrote out (N=2, F=2000): f should run along threadIdx.x"
    assert apart <= pairs // 4, (
        f"neighbouring lanes of a warp write out values far apart ({apart} of {pairs} pairs of stores, N=2, F=2000): "
        f"{example}. Each thread should step through f by blockDim.x (f = threadIdx.x; f < F; f += blockDim.x), so "
        "that at each step the warp's lanes store neighbouring features, not a run of features per thread")


def _emulated_tail(emulated, N: int, F: int, T: int = 64):
    """The emulated forward on N cubes of F float16 features (reserved, not filled: zero but for the
    last T cubes), the launch sampled to its first block and its last T: (the last T cubes' outputs,
    their reference). Skips where the machine does not lend the address space. A kernel already wrong
    on a small input fails here with a pointer to the tests that show how, not with this test's
    question about 64-bit offsets, which would send the learner after the wrong bug."""
    small = inputs(37, F, dtype=torch.float16)
    try:
        assert_matches(emulated.forward(*small, True, 1), *small, torch.float16)
    except (AssertionError, RuntimeError):
        pytest.fail(f"the kernel is wrong on a small input already (N = 37, F = {F}); the other failing tests "
                    f"show where. This test, about offsets past 2^31, means something once they pass.")
    torch.manual_seed(0)
    tail = torch.randn(T, 8, F, dtype=torch.float16)
    points = torch.rand(T, 3, dtype=torch.float16) * 2 - 1
    try:
        out = emulated.forward_tail(tail, points, N, 1)
    except RuntimeError as e:
        if "cannot reserve" in str(e):
            pytest.skip(f"this machine does not lend {N * (9 * F + 3) * 2 >> 30} GiB of address space: {e}")
        raise
    return out, reference(tail, points)


@pytest.mark.exercise("cuda-kernel")
def test_more_than_2_31_elements_emulated(emulated):
    """check_more_than_2_31_elements through the GPU-free judge: feats of more than 2^31 elements in
    reserved memory (only the pages written take memory), zero but for the last 64 cubes, and of the
    launch only the first block and the last 64 run: there a 32-bit offset wraps."""
    F, T = 256, 64
    N = 2**31 // (8 * F) + T
    assert N * 8 * F > 2**31
    out, ref = _emulated_tail(emulated, N, F, T)
    assert_rounded(out, ref, what=f"the last {T} cubes of N = {N}, F = {F} (feats has more than "
                   "2^31 elements: are the offsets 64-bit?)")


@pytest.mark.exercise("cuda-kernel")
def test_more_than_2_32_cubes_emulated(emulated):
    """N = 2^32 + 64 cubes (F = 1, float16: 96 GiB of tensors reserved, not filled) through the
    GPU-free judge, the launch sampled to its first block and its last 64: the cube index
    blockIdx.x * blockDim.y passes 2^32 there. A product of two 32-bit unsigned values wraps before
    any cast to 64 bits (static_cast<int64_t>(blockIdx.x * blockDim.y)), and the last cubes' outputs
    go to the first cubes."""
    T = 64
    out, ref = _emulated_tail(emulated, 2**32 + T, 1, T)
    assert_rounded(out, ref, what=f"the last {T} cubes of N = 2^32 + {T} (the cube index passes "
                   "2^32: is it computed in 64 bits, blockIdx.x cast before the multiplication? And the block "
                   "count: ceil(N / ty) in integers, since a float holds whole numbers exactly only up to 2^24)")


@pytest.mark.exercise("cuda-kernel")
def test_forward_cuda_emulated_nan_and_inf(emulated, dtype):
    check_nonfinite(_Emulated(emulated), "cpu", dtype)


class _Emulated:
    """The emulated judge with the extension's forward(feats, points) signature."""

    def __init__(self, module):
        self.module = module

    def forward(self, feats, points):
        return self.module.forward(feats, points, True, 0)


def check_nonfinite(ext, device, dtype):
    """NaN and inf in feats reach the output as the formula sends them: every corner adds
    weight * feature, and 0 * NaN and 0 * inf are NaN. Points at the 8 corners (one weight 1, seven
    exactly 0): feature 0 holds a NaN and feature 1 an inf at a corner of weight 0, feature 2 a -inf
    at the point's own corner. A kernel that skips the corners of weight 0 turns the first two into
    numbers; one that clamps or tests for finiteness changes the third."""
    feats = inputs(8, 5, "cpu", dtype)[0]
    for k in range(8):
        feats[k, (k + 1) % 8, 0] = float("nan")
        feats[k, (k + 3) % 8, 1] = float("inf")
        feats[k, k, 2] = -float("inf")
    points = torch.tensor([[(k >> 2) & 1, (k >> 1) & 1, k & 1] for k in range(8)], dtype=dtype) * 2 - 1
    feats, points = feats.to(device), points.to(device)
    with poisoned_empty():
        out = ext.forward(feats, points)
    ref = reference(feats, points)
    nan_wrong = (out.double().cpu().isnan() != ref.isnan()).nonzero().tolist()
    assert not nan_wrong, (f"NaN where the formula has none or none where it has one, at (point, feature) "
                           f"{nan_wrong[:6]}: a corner of weight 0 still adds 0 * feature, and 0 * NaN and "
                           f"0 * inf are NaN (does the kernel skip corners whose weight is 0?)")
    torch.testing.assert_close(out.double().cpu(), ref, rtol=0, atol=0, equal_nan=True,
                               msg=lambda m: f"points at the corners, with NaN and inf in feats: {m}")


@pytest.mark.exercise("cpu-kernel")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16],
                         ids=["float64", "float32", "float16", "bfloat16"])
def test_forward_cpu_nan_and_inf(ext, dtype):
    check_nonfinite(ext, "cpu", dtype)


@pytest.mark.cuda
@pytest.mark.exercise("cuda-kernel")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16],
                         ids=["float64", "float32", "float16", "bfloat16"])
def test_forward_cuda_nan_and_inf(ext, device, dtype):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_nonfinite(ext, "cuda", dtype)


@pytest.mark.cuda
@pytest.mark.exercise("cuda-kernel")
@pytest.mark.parametrize("dtype", LOW, ids=["float16", "bfloat16"])
def test_forward_cuda_rounds_once(ext, device, dtype):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    feats = (torch.randn(400, 8, 96, dtype=torch.float64) * 3 + 20).to("cuda", dtype)
    points = (torch.rand(400, 3, dtype=torch.float64) * 2 - 1).to("cuda", dtype)
    with poisoned_empty():
        out = ext.forward(feats, points)
    assert_rounded(out, reference(feats, points))


def _forward_with_canary(ext, feats, points):
    """Run the forward with a canary tensor right behind `out`; return (out, canary).

    The caching allocator rounds sizes up to 512 bytes and gives a freed block of the
    right size to the next request of that size. So: allocate a placeholder of out's size
    and the canary just behind it, free the placeholder, and `out` takes its place. Free
    blocks left by earlier tests can spoil the layout, so every step is verified through
    data_ptr(), and a spoilt attempt is kept alive (to use up that block) and retried.
    """
    nbytes = feats.shape[0] * feats.shape[2] * feats.element_size()
    keep = []
    for _ in range(64):
        placeholder = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        canary = torch.full((1024,), 42.0, device="cuda")
        if canary.data_ptr() != placeholder.data_ptr() + (nbytes + 511) // 512 * 512:
            keep += [placeholder, canary]
            continue
        where = placeholder.data_ptr()
        del placeholder
        out = ext.forward(feats, points)
        if out.data_ptr() == where:
            return out, canary
        keep += [out, canary]
    pytest.skip("could not place a canary right behind the output")


@pytest.mark.cuda
@pytest.mark.exercise("cuda-kernel")
@pytest.mark.parametrize("N, F", [(1, 100), (2, 64), (8, 48), (32, 100)])
def test_no_write_past_the_output(ext, device, N, F):
    """A missing bound (on n or on f) writes past `out` into whatever the caching allocator put next.

    N * F * 4 bytes is a multiple of 512, the allocator's rounding, so `out` ends exactly where the
    canary begins. (1, 100) and (2, 64) leave rows of threads without a cube in the last block;
    (8, 48) and (32, 100) leave threads beyond F in the last row, if the block is wider than F.
    """
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    feats, points = inputs(N, F, "cuda")
    with poisoned_empty():
        out, canary = _forward_with_canary(ext, feats, points)
    torch.cuda.synchronize()
    assert (canary == 42.0).all(), "the kernel wrote past the end of its output (a missing bounds check?)"
    assert_close(out, reference(feats, points).float(), torch.float32)


@pytest.mark.cuda
@pytest.mark.exercise("cuda-kernel")
def test_cuda_kernel_stays_inside_its_tensors(ext, device, chapter_source):
    """Small shapes whose last block has rows of threads without a cube, under compute-sanitizer's
    memcheck, every tensor its own allocation: each load and store must stay inside its tensor,
    also one whose value is never used, which no comparison of results can see. Then the same
    shapes' values (a kernel that touches nothing is memcheck-clean too)."""
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    shapes, dtypes = [(1, 1), (3, 33), (5, 100), (37, 257), (2, 64), (1, 300)], (torch.float32, torch.float16, torch.float64)
    assert_memcheck_clean(memcheck_script(chapter_source, f"""
for N, F in {shapes!r}:
    for dtype in {dtypes!r}:
        ext.forward(torch.randn(N, 8, F, device="cuda", dtype=dtype), torch.rand(N, 3, device="cuda", dtype=dtype) * 2 - 1)
"""), "the forward kernel on small shapes")
    for N, F in shapes:
        for dtype in dtypes:
            check_forward(ext, "cuda", dtype, N, F)


def check_more_than_2_31_elements(ext, device):
    """feats with more than 2^31 elements: offsets must be 64-bit (4.3 GB of float16)."""
    F = 256
    N = 2**31 // (8 * F) + 64
    feats = torch.empty(N, 8, F, device=device, dtype=torch.float16)
    feats[:-128].fill_(0)
    tail = torch.randn(128, 8, F, device=device, dtype=torch.float16)
    feats[-128:] = tail
    points = torch.rand(N, 3, device=device, dtype=torch.float16) * 2 - 1
    with poisoned_empty():
        out = ext.forward(feats, points)
    assert feats.numel() > 2**31
    assert_rounded(out[-128:], reference(tail, points[-128:]), what="the last 128 cubes")
    assert (out[:-128] == 0).all(), "cubes of all-zero features came out nonzero (an offset wrapped around?)"


@pytest.mark.cuda
@pytest.mark.exercise("cuda-kernel")
def test_more_than_2_31_elements(ext, device):
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    if os.environ.get("COURSE_SANITIZER"):
        pytest.skip("too large to run under compute-sanitizer")
    check_more_than_2_31_elements(ext, "cuda")


def available_memory_gb() -> float:
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f)
        return int(fields["MemAvailable"].split()[0]) / 2**20
    except (OSError, KeyError, ValueError):
        return 0.0


@pytest.mark.exercise("cpu-kernel")
def test_more_than_2_31_elements_cpu(ext):
    """The CPU kernel at the same size: feats[n] located with an int offset reads the wrong cubes."""
    if available_memory_gb() < 10:
        pytest.skip(f"needs about 6 GB of free memory ({available_memory_gb():.1f} GB available)")
    check_more_than_2_31_elements(ext, "cpu")


# ---------------------------------------------------------------------------- checks


def _bad(device):
    """name -> (feats, points, message): each input has one thing wrong."""
    f, p = inputs(4, 5, device)
    dev = str(f.device)
    shape_f = r"feats must have shape \(N, 8, F\), got "
    shape_p = r"points must have shape \(N, 3\) with N = 4 as feats, got "
    floating = r"feats must be float64, float32, float16 or bfloat16, got "
    rows = {
        # feats: every rank but 3, and dim 1 other than 8
        "feats-rank-0": (f[0, 0, 0], p, shape_f + r"\[\]"),
        "feats-rank-1": (f[0, :, 0], p, shape_f + r"\[8\]"),
        "feats-rank-2": (f[:, :, 0], p, shape_f + r"\[4, 8\]"),
        "feats-rank-2-8F": (f[0], p, shape_f + r"\[8, 5\]"),
        "feats-rank-4": (f[..., None], p, shape_f + r"\[4, 8, 5, 1\]"),
        "feats-rank-4-lead": (f[None], p, shape_f + r"\[1, 4, 8, 5\]"),
        "feats-corners-7": (f[:, :7], p, shape_f + r"\[4, 7, 5\]"),
        "feats-corners-9": (torch.cat([f, f[:, :1]], 1), p, shape_f + r"\[4, 9, 5\]"),
        "feats-corners-1": (f[:, :1], p, shape_f + r"\[4, 1, 5\]"),
        # points: every rank but 2, the count N and the width 3
        "points-rank-0": (f, p[0, 0], shape_p + r"\[\]"),
        "points-rank-1": (f, p[:, 0], shape_p + r"\[4\]"),
        "points-rank-1-3": (f[:3], p[0], r"points must have shape \(N, 3\) with N = 3 as feats, got \[3\]"),
        "points-rank-3": (f, p[:, :, None], shape_p + r"\[4, 3, 1\]"),
        "points-rank-3-lead": (f, p[None], shape_p + r"\[1, 4, 3\]"),
        "points-width-2": (f, p[:, :2], shape_p + r"\[4, 2\]"),
        "points-width-4": (f, torch.cat([p, p[:, :1]], 1), shape_p + r"\[4, 4\]"),
        "points-count-3": (f, p[:3], shape_p + r"\[3, 3\]"),
        "points-count-5": (f, torch.cat([p, p[:1]]), shape_p + r"\[5, 3\]"),
        "points-count-empty": (f[:0], p, r"points must have shape \(N, 3\) with N = 0 as feats, got \[4, 3\]"),
        "points-width-empty": (f[:0], p[:0, :2], r"points must have shape \(N, 3\) with N = 0 as feats, got \[0, 2\]"),
        # dtypes: only the four floating types, and the same for both
        "int32": (f.int(), p.int(), floating + "Int"),
        "int64": (f.long(), p.long(), floating + "Long"),
        "uint8": (f.to(torch.uint8), p.to(torch.uint8), floating + "Byte"),
        "bool": (f > 0, p > 0, floating + "Bool"),
        "complex64": (f.to(torch.complex64), p.to(torch.complex64), floating + "ComplexFloat"),
        "complex128": (f.to(torch.complex128), p.to(torch.complex128), floating + "ComplexDouble"),
        "float8": (f.to(torch.float8_e4m3fn), p.to(torch.float8_e4m3fn), floating + "Float8_e4m3fn"),
        "points-double": (f, p.double(), r"points must have the dtype of feats \(Float\), got Double"),
        "points-float": (f.double(), p, r"points must have the dtype of feats \(Double\), got Float"),
        "points-half-bfloat16": (f.bfloat16(), p.half(), r"points must have the dtype of feats \(BFloat16\), got Half"),
        "points-int": (f, p.int(), r"points must have the dtype of feats \(Float\), got Int"),
        # two rules broken at once: the first in the table's order (shapes, dtypes, devices) reports
        "feats-corners-7-int32": (f[:, :7].int(), p.int(), shape_f + r"\[4, 7, 5\]"),
        "points-width-2-double": (f, p[:, :2].double(), shape_p + r"\[4, 2\]"),
        "int32-feats-float-points": (f.int(), p, floating + "Int"),
        "points-double-feats-meta": (f.to("meta"), p.double(), r"points must have the dtype of feats \(Float\), got Double"),
        "points-int-on-meta": (f, p.int().to("meta"), r"points must have the dtype of feats \(Float\), got Int"),
        # devices: one device for both, and only the CPU or a CUDA GPU
        "meta": (f.to("meta"), p.to("meta"), r"tensors must be on the CPU or a CUDA GPU, got meta"),
        "points-meta": (f, p.to("meta"), rf"feats and points must be on the same device, got feats on {dev} and points on meta"),
        "feats-meta": (f.to("meta"), p, rf"feats and points must be on the same device, got feats on meta and points on {dev}"),
    }
    return rows


@pytest.mark.exercise("checks")
@pytest.mark.parametrize("case", list(_bad("cpu")))
def test_bad_inputs(ext, device, case):
    feats, points, message = _bad(device)[case]
    with expect_error("trilinear: " + message, what=f"forward with {case}"):
        ext.forward(feats, points)


ACCEPTED = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
OTHER_DTYPES = sorted({d for d in vars(torch).values() if isinstance(d, torch.dtype)} - set(ACCEPTED), key=str)


@pytest.mark.exercise("checks")
def test_every_other_dtype_is_refused(ext, device):
    """Not only the dtypes in the table above: every dtype this torch has besides the four (complex,
    integer, unsigned, float8, float4, ...) is refused with the message, for feats and points alike.
    A check written as "floating, minus float8" lets float4_e2m1fn_x2 through."""
    refused, made = [], 0
    for dtype in OTHER_DTYPES:
        try:
            feats = torch.empty(4, 8, 5, dtype=dtype, device=device)
            points = torch.empty(4, 3, dtype=dtype, device=device)
        except Exception:  # noqa: BLE001  (quantized and bit types need more than torch.empty)
            continue
        made += 1
        try:
            ext.forward(feats, points)
        except RuntimeError as e:
            if "trilinear: feats must be float64, float32, float16 or bfloat16, got " in str(e):
                refused.append(dtype)
                continue
            pytest.fail(f"forward with feats and points of {dtype}: the error should be the dtype check's "
                        f"('trilinear: feats must be float64, float32, float16 or bfloat16, got ...'), got: "
                        f"{str(e).splitlines()[0]}")
        except Exception as e:  # noqa: BLE001
            pytest.fail(f"forward with feats and points of {dtype}: expected the dtype check's RuntimeError, got "
                        f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        else:
            pytest.fail(f"forward accepted feats and points of {dtype}: only float64, float32, float16 and "
                        f"bfloat16 may pass the checks")
    assert made >= 10 and len(refused) == made


@pytest.mark.cuda
@pytest.mark.exercise("checks")
def test_cpu_cuda_mix(ext, device):
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    feats, points = inputs(4, 5, "cuda")
    with expect_error(r"trilinear: feats and points must be on the same device, got feats on cuda:0 and points on cpu"):
        ext.forward(feats, points.cpu())
    with expect_error(r"trilinear: feats and points must be on the same device, got feats on cpu and points on cuda:0"):
        ext.forward(feats.cpu(), points)


@pytest.mark.exercise("checks")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16],
                         ids=["float64", "float32", "float16", "bfloat16"])
def test_good_inputs_pass_the_checks(ext, device, dtype):
    """The checks refuse what they must and nothing else: every floating dtype, any N and F."""
    for N, F in [(4, 5), (1, 1), (0, 3), (3, 0)]:
        feats, points = inputs(N, F, device, dtype)
        assert ext.forward(feats, points).shape == (N, F)
    feats, points = inputs(4, 5, device, dtype)
    for name, (f, p) in _layouts(feats, points).items():  # strides are the entry point's business
        assert ext.forward(f, p).shape == (4, 5), name


# ---------------------------------------------------------------------------- the chapter as a whole


def _layouts(feats, points):
    """Views of the same values (or of values made for the purpose) with other strides."""
    N, _, F = feats.shape
    f, p = feats, points
    big_f = torch.randn(N + 1, 8, F + 3, dtype=f.dtype, device=f.device)
    big_p = torch.rand(N + 1, 5, dtype=p.dtype, device=p.device) * 2 - 1
    return {
        "feats-transposed": (f.transpose(0, 2).contiguous().transpose(0, 2), p),
        "feats-corner-major": (f.transpose(0, 1).contiguous().transpose(0, 1), p),
        "feats-sliced": (torch.randn(N, 8, 2 * F, dtype=f.dtype, device=f.device)[:, :, ::2], p),
        "feats-offset": (big_f[1:, :, 3:], p),  # storage offset, row stride F + 3
        "feats-offset-contiguous": (torch.randn(N * 8 * F + 7, dtype=f.dtype, device=f.device)[7:].view(N, 8, F), p),
        "feats-expanded-cube": (f[:1].expand(N, 8, F), p),  # stride 0 along n
        "feats-expanded-feature": (f[:, :, :1].expand(N, 8, F), p),  # stride 0 along f
        "feats-expanded-corner": (f[:, :1].expand(N, 8, F), p),  # stride 0 along k
        "points-transposed": (f, p.t().contiguous().t()),
        "points-sliced": (f, (torch.rand(N, 6, dtype=p.dtype, device=p.device) * 2 - 1)[:, ::2]),
        "points-offset": (f, big_p[1:, 2:]),
        "points-offset-contiguous": (f, torch.rand(3 * N + 5, dtype=p.dtype, device=p.device)[5:].view(N, 3)),
        "points-expanded-cube": (f, p[:1].expand(N, 3)),  # stride 0 along n
        "points-expanded-axis": (f, p[:, :1].expand(N, 3)),  # x = y = z
        "both-expanded": (f[:1].expand(N, 8, F), p[:1].expand(N, 3)),
    }


@pytest.mark.parametrize("case", list(_layouts(*inputs(2, 3))))
def test_strided_inputs(ext, device, case):
    """Any strides, storage offset or stride 0: the same result as for a contiguous copy."""
    feats, points = _layouts(*inputs(50, 24, device, torch.float64))[case]
    assert not (feats.is_contiguous() and points.is_contiguous()) or "offset" in case
    out = ext.forward(feats, points)
    assert_float64(out, reference(feats, points), what=case)
    assert_bitwise(out, ext.forward(feats.contiguous(), points.contiguous()), what=f"{case} against a contiguous copy")


@pytest.mark.parametrize("N, F", [(0, 16), (16, 0), (0, 0)])
def test_empty(ext, device, dtype, N, F):
    feats, points = inputs(N, F, device, dtype)
    out = ext.forward(feats, points)
    assert out.shape == (N, F) and out.device == feats.device and out.dtype == dtype


def test_output_is_new(ext, device):
    """The output is a fresh contiguous tensor, not a view of an input."""
    feats, points = inputs(6, 8, device)
    out = ext.forward(feats, points)
    assert out.is_contiguous(), f"output strides {out.stride()} for shape {tuple(out.shape)}: expected contiguous"
    assert out.untyped_storage().data_ptr() not in (feats.untyped_storage().data_ptr(), points.untyped_storage().data_ptr())


@pytest.mark.cuda
@pytest.mark.exercise("checks")
def test_two_gpus(ext, device):
    if device != "cuda" or torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    feats, points = inputs(100, 40, "cuda:1")
    with torch.cuda.device(0):  # current device differs from the tensors' device
        out = ext.forward(feats, points)
    assert_property(out.device, feats.device, "device", "output (the current device was cuda:0)")
    assert_close(out, reference(feats, points).float(), torch.float32)
    with expect_error("same device"):
        ext.forward(feats, points.to("cuda:0"))


@pytest.mark.cuda
def test_runs_on_the_current_stream(ext, device):
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    feats, points = inputs(20000, 256, "cuda")
    stream = torch.cuda.Stream()  # PyTorch's streams do not synchronise with the legacy default stream
    stream.wait_stream(torch.cuda.current_stream())  # the inputs are ready
    torch.cuda._sleep(50_000_000)  # keep the default stream busy (~25 ms)
    with torch.cuda.stream(stream):
        out = ext.forward(feats, points)
        out.add_(1)  # queued on `stream`: must run after the forward
    stream.synchronize()
    torch.cuda.synchronize()
    assert_close(out - 1, reference(feats, points).float(), torch.float32, what="forward on a side stream")


# Last, as it is the slowest: a data race that gives right values (a `static` weight array, a
# buffer declared outside the lambda), which no value test sees.
@pytest.mark.exercise("cpu-kernel")
def test_forward_cpu_threads_share_nothing(judged_source):
    """The CPU forward under ThreadSanitizer (coursekit/races.py), its chunks on three threads:
    each task writes only its own outputs and its own locals."""
    assert_no_data_race("02", judged_source)
