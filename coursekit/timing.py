"""The one timing harness: time a callable properly, measure the copy bandwidth, save results.

Why not `time.time()` around one call? The first call pays for lazy
initialisation, and a CUDA launch returns before the GPU has done the work.
`bench()` uses `torch.utils.benchmark.Timer`, which warms up, synchronises the
GPU around its measurements, repeats the call in blocks until enough time has
passed, and reports the median over those blocks of the mean time per call
(a block averages several calls, so the spread between single calls is
larger than the IQR reported here).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import logging

import torch

# torch.utils.benchmark imports cpp_extension, which warns "No CUDA runtime is found" without a GPU.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
from torch.utils import benchmark  # noqa: E402


@dataclass
class Timing:
    median_ms: float
    iqr_ms: float
    runs: int


def sync(device: str | torch.device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def bench(fn: Callable[[], object], device: str | torch.device = "cpu", min_run_time: float = 0.5) -> Timing:
    """Median time of one call of `fn`, in milliseconds."""
    fn()  # warm-up: first-call costs (allocation, lazy init, compilation) stay out of the numbers
    sync(device)
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return Timing(m.median * 1e3, m.iqr * 1e3, len(m.times) * m.number_per_run)


def bench_in_turns(fns: Sequence[Callable[[], object]], device: str | torch.device = "cpu", turns: int = 3,
                   min_run_time: float = 0.5) -> list[Timing]:
    """bench() of each of `fns`, in `turns` rounds one after the other, each keeping its lowest median.

    A burst of other work on a shared machine then slows one turn of one call, not the only
    measurement of one side of a ratio; and the call timed first does not pay alone for the
    allocator's first requests of new sizes (fresh pages, faulted in).
    """
    best: list[Timing | None] = [None] * len(fns)
    for _ in range(turns):
        for i, fn in enumerate(fns):
            t = bench(fn, device, min_run_time=min_run_time)
            if best[i] is None or t.median_ms < best[i].median_ms:
                best[i] = t
    return best


def bench_graph(fn: Callable[[], object], reps: int = 10, min_run_time: float = 0.5) -> Timing:
    """GPU time of one call of `fn` on the current CUDA device, without the host's share.

    bench() times calls as a program makes them: when a call's host work (Python, dispatch,
    allocation, launches) takes longer than its kernels, the host sets the pace and the GPU
    idles between kernels. Here `reps` calls are captured once in a CUDA graph, and bench()
    times replays of the graph, which launch all their kernels at once. `fn` must be capturable
    (no synchronisation, no host reads of GPU values); its host code runs during the capture only.
    """
    graph, _ = capture_graph(fn, calls=reps)
    t = bench(graph.replay, "cuda", min_run_time=min_run_time)
    return Timing(t.median_ms / reps, t.iqr_ms / reps, t.runs * reps)


def capture_graph(fn: Callable[[], object], calls: int = 1, warmup: int = 3) -> tuple[torch.cuda.CUDAGraph, object]:
    """(graph, what the last captured call returned): `warmup` calls on a side stream first, as
    torch.cuda.graph asks, then `calls` calls captured into one CUDA graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    result = None
    with torch.cuda.graph(graph):
        for _ in range(calls):
            result = fn()
    return graph, result


def copy_bandwidth(device: str | torch.device = "cpu", nbytes: int | None = None) -> float:
    """Achievable memory bandwidth in bytes/s: a large device-to-device copy, bytes read plus bytes written."""
    device = torch.device(device)
    if nbytes is None:
        nbytes = (1 << 30) if device.type == "cuda" else (1 << 28)
    src = torch.rand(nbytes // 4, device=device)  # random data, never zeros
    dst = torch.empty_like(src)
    t = bench(lambda: dst.copy_(src), device, min_run_time=0.5)
    return 2 * nbytes / (t.median_ms * 1e-3)


def floor_ms(nbytes: int, bandwidth: float) -> float:
    """The least time a kernel that must move `nbytes` can take at `bandwidth` bytes/s."""
    return nbytes / bandwidth * 1e3


def nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _driver_version() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        ).stdout.strip()
        return out.splitlines()[0] if out else None
    except (OSError, subprocess.SubprocessError):
        return None


def environment(device: str | torch.device = "cpu") -> dict:
    """What the numbers were measured on: saved next to every result."""
    device = torch.device(device)
    env = {
        "device_type": device.type,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_threads": torch.get_num_threads(),
        "os_cpus": os.cpu_count(),
    }
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        env.update(
            device_name=p.name,
            capability=f"{p.major}.{p.minor}",
            sm_count=p.multi_processor_count,
            memory_gib=round(p.total_memory / 2**30, 1),
            driver=_driver_version(),
        )
    else:
        env["device_name"] = f"CPU ({env['cpu']}, {env['cpu_threads']} threads)"
    return env


def save(path: str | Path, records: list[dict], device: str | torch.device, extra: dict | None = None) -> Path:
    """Write results as JSON: {"environment": {...}, "records": [...]}."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"environment": environment(device) | (extra or {}), "records": records}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def load(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def record(name: str, timing: Timing, moved_bytes: int | None = None, bandwidth: float | None = None, **fields) -> dict:
    """One result row: time, spread and, when bytes and bandwidth are known, the fraction of the floor."""
    row = {"name": name, **fields, **asdict(timing)}
    if moved_bytes is not None and bandwidth:
        row["bytes"] = moved_bytes
        row["floor_ms"] = floor_ms(moved_bytes, bandwidth)
        row["fraction_of_floor"] = row["floor_ms"] / timing.median_ms
        row["achieved_GBps"] = moved_bytes / (timing.median_ms * 1e-3) / 1e9
    return row
