"""Chapter 03: the reference, the three thread mappings, the timing harness and the benchmark."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import torch
import torch.nn.functional as F_

from coursekit import ROOT, timing
from coursekit.build import load_python
from coursekit.testing import TOLERANCE, assert_close, poisoned_empty

CHAPTER = "03"
MAPPINGS = ["forward", "forward_naive", "forward_vectorized"]


@pytest.fixture(scope="module")
def reference(ext, chapter_source):
    return load_python(chapter_source, "reference")


@pytest.fixture(scope="module")
def stopwatch(ext, chapter_source):
    return load_python(chapter_source, "stopwatch")


def inputs(N, F, device="cpu", dtype=torch.float32, spread=1.0):
    feats = torch.randn(N, 8, F, device=device, dtype=dtype)
    points = ((torch.rand(N, 3, device=device, dtype=torch.float64) * 2 - 1) * spread).to(dtype)
    return feats, points


def by_grid_sample(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """An independent formulation: each cube as a 2x2x2 volume, sampled by F.grid_sample.

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


@pytest.mark.exercise("reference")
def test_reference_matches_grid_sample(reference):
    feats, points = inputs(300, 17, dtype=torch.float64)
    torch.testing.assert_close(reference.trilinear(feats, points), by_grid_sample(feats, points))


@pytest.mark.exercise("reference")
def test_reference_weights(reference):
    points = torch.rand(50, 3, dtype=torch.float64) * 4 - 2  # inside and outside the cube
    w = reference.corner_weights(points)
    assert w.shape == (50, 8)
    torch.testing.assert_close(w.sum(dim=1), torch.ones(50, dtype=torch.float64))  # a partition of unity
    corners = torch.tensor(reference.CORNER_OFFSETS, dtype=torch.float64) * 2 - 1
    torch.testing.assert_close(reference.corner_weights(corners), torch.eye(8, dtype=torch.float64))


@pytest.mark.exercise("reference")
def test_reference_extrapolates_linearly(reference):
    """Outside [-1, 1] the formula goes on: along x, out is affine in x."""
    feats = torch.randn(1, 8, 4, dtype=torch.float64)
    xs = torch.tensor([-3.0, -1.0, 0.5, 2.0], dtype=torch.float64)
    points = torch.stack([xs, torch.full_like(xs, 0.3), torch.full_like(xs, -0.6)], dim=1)
    out = reference.trilinear(feats.expand(4, 8, 4), points)
    slope = (out[1] - out[0]) / (xs[1] - xs[0])
    torch.testing.assert_close(out[3], out[0] + slope * (xs[3] - xs[0]))


@pytest.mark.exercise("reference")
def test_reference_keeps_dtype_and_device(reference, device, dtype):
    feats, points = inputs(64, 9, device, dtype)
    out = reference.trilinear(feats, points)
    assert out.dtype == dtype and out.device == feats.device
    assert_close(out, reference.trilinear64(feats, points).to(dtype), dtype, "reference in " + str(dtype))


SIZES = [(1, 1), (1, 300), (37, 33), (257, 64), (1000, 259)]


@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize("N, F", SIZES)
def test_mappings_cpu(ext, reference, dtype, mapping, N, F):
    feats, points = inputs(N, F, "cpu", dtype)
    with poisoned_empty():
        out = getattr(ext, mapping)(feats, points)
    assert_close(out, reference.trilinear64(feats, points).to(dtype), dtype, mapping)


@pytest.mark.cuda
@pytest.mark.exercise("naive-index")
@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize("N, F", SIZES + [(3000, 1000), (70, 40), (33, 8)])
def test_mappings_cuda(ext, reference, device, dtype, mapping, N, F):
    if device != "cuda":
        pytest.skip("the CUDA kernels' test")
    feats, points = inputs(N, F, "cuda", dtype)
    with poisoned_empty():
        out = getattr(ext, mapping)(feats, points)
    assert_close(out, reference.trilinear64(feats, points).to(dtype), dtype, mapping)


@pytest.mark.cuda
@pytest.mark.parametrize("mapping", MAPPINGS)
def test_mappings_cuda_misaligned(ext, reference, device, mapping):
    """A slice that starts 4 bytes into its storage: the vectorized kernel must not use 16-byte loads on it."""
    if device != "cuda":
        pytest.skip("needs the CUDA build")
    base = torch.randn(1 + 40 * 8 * 64, device="cuda")
    feats = base[1:].view(40, 8, 64)
    points = torch.rand(40, 3, device="cuda") * 2 - 1
    assert feats.data_ptr() % 16 != 0
    assert_close(getattr(ext, mapping)(feats, points), reference.trilinear64(feats, points).float(), torch.float32)


@pytest.mark.parametrize("mapping", MAPPINGS)
def test_mappings_empty_and_checked(ext, device, mapping):
    fn = getattr(ext, mapping)
    for N, F in [(0, 8), (8, 0)]:
        feats, points = inputs(N, F, device)
        assert fn(feats, points).shape == (N, F)
    feats, points = inputs(4, 5, device)
    with pytest.raises(RuntimeError, match=r"trilinear: points must have shape \(N, 3\) with N = 4 as feats, got \[4, 2\]"):
        fn(feats, points[:, :2])


def test_tolerances_hold_at_a_larger_size(ext, reference):
    """Relative error is a norm over all elements: it does not grow with N * F like a max error would."""
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        feats, points = inputs(20000, 64, "cpu", dtype)
        assert_close(ext.forward(feats, points), reference.trilinear64(feats, points).to(dtype), dtype)


# ---- timing


@pytest.mark.exercise("median-timer")
def test_median_timer_measures_a_sleep(stopwatch):
    ms = stopwatch.median_time_ms(lambda: time.sleep(0.004), "cpu", warmup=1, reps=5)
    assert 3.9 <= ms < 40, f"timing a 4 ms sleep gave {ms:.3g} ms"


@pytest.mark.exercise("median-timer")
def test_median_timer_warms_up_and_repeats(stopwatch):
    calls = []
    stopwatch.median_time_ms(lambda: calls.append(1), "cpu", warmup=4, reps=7)
    assert len(calls) == 11, f"expected 4 warm-up calls + 7 timed calls, got {len(calls)} calls"


@pytest.mark.exercise("median-timer")
def test_median_timer_ignores_outliers(stopwatch):
    """Every 4th call is slow (another process, a page fault...): the median does not move, a mean does."""
    count = [0]

    def spiky():
        count[0] += 1
        time.sleep(0.04 if count[0] % 4 == 0 else 0.001)

    ms = stopwatch.median_time_ms(spiky, "cpu", warmup=0, reps=8)
    assert ms < 10, f"median of mostly 1 ms calls was {ms:.3g} ms (a mean instead of a median?)"


@pytest.mark.cuda
@pytest.mark.exercise("median-timer")
def test_median_timer_waits_for_the_gpu(stopwatch, device):
    if device != "cuda":
        pytest.skip("needs a GPU")
    cycles = 20_000_000  # ~10 ms at ~2 GHz; the launch itself takes microseconds
    ms = stopwatch.median_time_ms(lambda: torch.cuda._sleep(cycles), "cuda", warmup=1, reps=5)
    wrong = stopwatch.time_once_wrong(lambda: torch.cuda._sleep(cycles))
    torch.cuda.synchronize()
    assert ms > 3, f"timing a ~10 ms GPU sleep gave {ms:.3g} ms: the timer does not wait for the GPU"
    assert wrong < ms / 3, "time.time() without synchronize should only see the launch"


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
