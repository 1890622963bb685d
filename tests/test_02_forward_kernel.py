"""Chapter 02: trilinear forward, CPU and CUDA."""

import pytest
import torch

from coursekit.testing import assert_close, poisoned_empty

CHAPTER = "02"


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
    feats = torch.randn(N, 8, F, device=device, dtype=dtype)
    points = ((torch.rand(N, 3, device=device, dtype=torch.float64) * 2 - 1) * spread).to(dtype)
    return feats, points


def check_forward(ext, device, dtype, N, F):
    feats, points = inputs(N, F, device, dtype)
    with poisoned_empty():  # every output element the kernel forgets stays NaN
        out = ext.forward(feats, points)
    assert out.device == feats.device
    assert_close(out, reference(feats, points).to(dtype), dtype)


SIZES = [(1, 1), (1, 300), (37, 33), (500, 64), (1000, 257)]


@pytest.mark.exercise("corner-weight")
@pytest.mark.exercise("cpu-loop")
@pytest.mark.exercise("dispatch")
@pytest.mark.parametrize("N, F", SIZES)
def test_forward_cpu(ext, dtype, N, F):
    check_forward(ext, "cpu", dtype, N, F)


@pytest.mark.cuda
@pytest.mark.exercise("corner-weight")
@pytest.mark.exercise("cuda-index")
@pytest.mark.parametrize("N, F", SIZES + [(3000, 1000)])
def test_forward_cuda(ext, device, dtype, N, F):
    if device != "cuda":
        pytest.skip("the CUDA kernel's test")
    check_forward(ext, "cuda", dtype, N, F)


@pytest.mark.exercise("corner-weight")
def test_each_corner_returns_its_feature(ext, device):
    feats = torch.randn(8, 8, 5, device=device, dtype=torch.float64)
    corners = torch.tensor([[(k >> 2) & 1, (k >> 1) & 1, k & 1] for k in range(8)], dtype=torch.float64) * 2 - 1
    out = ext.forward(feats, corners.to(device))
    for k in range(8):
        torch.testing.assert_close(out[k], feats[k, k], msg=f"the point at corner {k} {corners[k].tolist()} "
                                   f"should return feats[:, {k}] (corner k sits at offsets (k>>2&1, k>>1&1, k&1))")


def test_centre_is_the_mean(ext, device):
    feats = torch.randn(3, 8, 4, device=device, dtype=torch.float64)
    out = ext.forward(feats, torch.zeros(3, 3, device=device, dtype=torch.float64))
    torch.testing.assert_close(out, feats.mean(dim=1))


def test_points_outside_extrapolate(ext, device):
    # Documented behaviour: no clamping; the same formula continues linearly.
    feats, points = inputs(200, 16, device, torch.float64, spread=3.0)
    assert points.abs().max() > 1
    assert_close(ext.forward(feats, points), reference(feats, points), torch.float64)


def test_non_contiguous_inputs(ext, device):
    feats, points = inputs(64, 24, device, torch.float32)
    feats_t = feats.transpose(0, 2).contiguous().transpose(0, 2)  # same values, other strides
    points_t = points.t().contiguous().t()
    assert not feats_t.is_contiguous() and not points_t.is_contiguous()
    torch.testing.assert_close(ext.forward(feats_t, points_t), ext.forward(feats, points))
    sliced = torch.randn(64, 8, 48, device=device)[:, :, ::2]  # every other feature
    assert_close(ext.forward(sliced, points), reference(sliced, points).float(), torch.float32)


@pytest.mark.parametrize("N, F", [(0, 16), (16, 0), (0, 0)])
def test_empty(ext, device, N, F):
    feats, points = inputs(N, F, device)
    out = ext.forward(feats, points)
    assert out.shape == (N, F) and out.device == feats.device


def _bad(device):
    f, p = inputs(4, 5, device)
    return {
        "feats-rank": (f[0], p, r"feats must have shape \(N, 8, F\), got \[8, 5\]"),
        "feats-corners": (f[:, :7], p, r"feats must have shape \(N, 8, F\), got \[4, 7, 5\]"),
        "points-width": (f, p[:, :2], r"points must have shape \(N, 3\) with N = 4 as feats, got \[4, 2\]"),
        "points-count": (f, p[:3], r"points must have shape \(N, 3\) with N = 4 as feats, got \[3, 3\]"),
        "points-rank": (f, p.reshape(-1), r"points must have shape \(N, 3\)"),
        "integer-dtype": (f.int(), p.int(), r"feats must be float64, float32, float16 or bfloat16, got Int"),
        "dtype-mismatch": (f, p.double(), r"points must have the dtype of feats \(Float\), got Double"),
        "meta-device": (f.to("meta"), p.to("meta"), r"tensors must be on the CPU or a CUDA GPU, got meta"),
    }


@pytest.mark.exercise("checks")
@pytest.mark.parametrize("case", list(_bad("cpu")))
def test_bad_inputs(ext, device, case):
    feats, points, message = _bad(device)[case]
    with pytest.raises(RuntimeError, match="trilinear: " + message):
        ext.forward(feats, points)


@pytest.mark.cuda
@pytest.mark.exercise("checks")
def test_cpu_cuda_mix(ext, device):
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    feats, points = inputs(4, 5, "cuda")
    with pytest.raises(RuntimeError, match=r"trilinear: feats and points must be on the same device, got feats on cuda:0 and points on cpu"):
        ext.forward(feats, points.cpu())


@pytest.mark.cuda
def test_two_gpus(ext, device):
    if device != "cuda" or torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    feats, points = inputs(100, 40, "cuda:1")
    with torch.cuda.device(0):  # current device differs from the tensors' device
        out = ext.forward(feats, points)
    assert out.device == feats.device
    assert_close(out, reference(feats, points).float(), torch.float32)
    with pytest.raises(RuntimeError, match="same device"):
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


@pytest.mark.cuda
@pytest.mark.exercise("cuda-index")
def test_no_write_past_the_output(ext, device):
    """A missing bounds check writes past `out` into whatever the caching allocator put next."""
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    feats, points = inputs(1, 100, "cuda")  # block (128, 2): the second row of threads has no cube
    placeholder = torch.empty(128, device="cuda")  # a 512-byte block; `out` will reuse it
    canary = torch.full((1024,), 42.0, device="cuda")  # allocated right after the placeholder
    del placeholder
    out = ext.forward(feats, points)
    torch.cuda.synchronize()
    assert (canary == 42.0).all(), "the kernel wrote past the end of its output (missing bounds check?)"
    assert_close(out, reference(feats, points).float(), torch.float32)


@pytest.mark.cuda
def test_more_than_2_31_elements(ext, device):
    """feats with more than 2^31 elements: offsets must be 64-bit (4.3 GB of float16)."""
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    import os

    if os.environ.get("COURSE_SANITIZER"):
        pytest.skip("too large to run under compute-sanitizer")
    F = 256
    N = 2**31 // (8 * F) + 64
    feats = torch.empty(N, 8, F, device="cuda", dtype=torch.float16)
    feats[:-128].fill_(0)
    tail = torch.randn(128, 8, F, device="cuda", dtype=torch.float16)
    feats[-128:] = tail
    points = torch.rand(N, 3, device="cuda", dtype=torch.float16) * 2 - 1
    out = ext.forward(feats, points)
    assert feats.numel() > 2**31
    assert_close(out[-128:], reference(tail, points[-128:]).half(), torch.float16)
    assert (out[:-128] == 0).all()
