"""Chapter 03 benchmark: the three thread mappings, the PyTorch reference (eager and
torch.compile) and the bandwidth floor, over N and F; plus wrong and right ways to time.

    python 03_validate/bench.py                 # GPU if there is one, else CPU
    python 03_validate/bench.py --device cpu
    python 03_validate/bench.py --quick --out /tmp/q.json --ch02-out /tmp/q02.json

Writes results/03_validate_<cuda|cpu>.json, and chapter 02's target point
(N = 65536, F = 256, float32) to results/02_forward_kernel_<cuda|cpu>.json.
"""

from __future__ import annotations

import argparse
import time
import sys
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: coursekit is in the course root
from coursekit import ROOT, timing
from coursekit.build import build, load_python
from coursekit.testing import rel_error

HERE = Path(__file__).resolve().parent
TARGET = (65536, 256)  # chapter 02's speed target: N, F


def sizes(device: str, quick: bool) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(N sweep, F sweep) as lists of (N, F)."""
    if quick:
        return [(2**k, 32) for k in (6, 8)], [(256, f) for f in (16, 48)]
    if device == "cuda":
        return [(2**k, 256) for k in range(10, 18)], [(65536, 2**k) for k in range(4, 11)]
    return [(2**k, 128) for k in range(8, 15)], [(8192, 2**k) for k in range(4, 10)]


def inputs(N: int, F: int, device: str, dtype: torch.dtype = torch.float32):
    feats = torch.randn(N, 8, F, device=device, dtype=dtype)
    points = (torch.rand(N, 3, device=device) * 2 - 1).to(dtype)
    return feats, points


def compiled(fn: Callable) -> Callable:
    """A fresh torch.compile of `fn`: reset dynamo so each shape gets its own static-shape kernel."""
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False)


def time_variants(variants: dict[str, Callable], N: int, F: int, device: str, bw: float, min_run_time: float,
                  reference: Callable, dtype: torch.dtype = torch.float32, **fields) -> list[dict]:
    feats, points = inputs(N, F, device, dtype)
    expected = reference(feats.double(), points.double())
    rows = []
    for name, fn in variants.items():
        t0 = time.perf_counter()
        out = fn(feats, points)  # first call: checks the result (and compiles, for torch.compile)
        timing.sync(device)
        first_ms = (time.perf_counter() - t0) * 1e3
        err = rel_error(out, expected)
        assert err < 1e-2, f"{name} at N={N} F={F} {dtype}: relative error {err:.2g}"
        t = timing.bench(lambda: fn(feats, points), device, min_run_time)
        moved = timing.nbytes(feats, points, out)
        rows.append(timing.record(name, t, moved, bw, N=N, F=F, dtype=str(dtype).replace("torch.", ""),
                                  first_call_ms=first_ms, rel_error=err, **fields))
        print(f"  {name:11s} N={N:7d} F={F:5d} {rows[-1]['dtype']:8s} {t.median_ms:9.4f} ms "
              f"({rows[-1]['fraction_of_floor']:.0%} of floor)", flush=True)
    return rows


def timing_methods(fn: Callable, device: str, stopwatch, min_run_time: float) -> list[dict]:
    """The same call timed four ways. Must run before anything else calls `fn`: the first row is the cold call."""
    rows = [{"method": "one cold call, time.time(), no synchronize", "ms": stopwatch.time_once_wrong(fn)}]
    timing.sync(device)
    rows.append({"method": "one warm call, time.time(), no synchronize", "ms": stopwatch.time_once_wrong(fn)})
    timing.sync(device)
    t0 = time.perf_counter()
    fn()
    timing.sync(device)
    rows.append({"method": "one warm call, synchronized", "ms": (time.perf_counter() - t0) * 1e3})
    rows.append({"method": "median of 20 after 3 warm-up calls (stopwatch.median_time_ms)",
                 "ms": stopwatch.median_time_ms(fn, device)})
    t = timing.bench(fn, device, min_run_time)
    rows.append({"method": f"torch.utils.benchmark, {t.runs} runs (coursekit.timing.bench)", "ms": t.median_ms,
                 "iqr_ms": t.iqr_ms})
    for r in rows:
        print(f"  {r['ms']:10.4f} ms  {r['method']}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--quick", action="store_true", help="tiny sizes and short timings: checks the pipeline")
    ap.add_argument("--out", help="results JSON (default results/03_validate_<device>.json)")
    ap.add_argument("--ch02-out", help="chapter 02's target point (default results/02_forward_kernel_<device>.json, "
                    "or <out>_ch02.json with --out)")
    ap.add_argument("--compile", choices=["all", "target", "none"], default=None,
                    help="where to time torch.compile(reference) (default: all on cuda, target on cpu)")
    ap.add_argument("--threads", type=int, help="torch.set_num_threads for the CPU (default: torch's choice)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device
    compile_where = args.compile or ("all" if device == "cuda" else "target")
    if args.quick and args.compile is None:
        compile_where = "none"
    min_run_time = 0.05 if args.quick else (0.2 if device == "cuda" else 0.5)
    out_path = Path(args.out or ROOT / "results" / f"03_validate_{device}.json")
    # --out elsewhere keeps chapter 02's committed file too: its point goes beside the given file.
    ch02_default = (out_path.with_name(out_path.stem + "_ch02.json") if args.out
                    else ROOT / "results" / f"02_forward_kernel_{device}.json")
    ch02_path = Path(args.ch02_out or ch02_default)

    ext = build(HERE)
    reference = load_python(HERE, "reference")
    stopwatch = load_python(HERE, "stopwatch")
    target = (1024, 64) if args.quick else TARGET

    print(f"timing methods at N={target[0]} F={target[1]} float32, {device}:")
    feats, points = inputs(*target, device)
    methods = timing_methods(lambda: ext.forward(feats, points), device, stopwatch, min_run_time)

    bw = timing.copy_bandwidth(device, nbytes=(1 << 24) if args.quick else None)
    print(f"copy bandwidth: {bw / 1e9:.1f} GB/s (read + write)")

    ours = {"coalesced": ext.forward, "naive": ext.forward_naive, "vectorized": ext.forward_vectorized}
    ref = {"eager": reference.trilinear}

    def with_compiled(at_target: bool) -> dict[str, Callable]:
        if (compile_where == "all" or (compile_where == "target" and at_target)):
            return ref | {"compiled": compiled(reference.trilinear)}
        return ref

    def save(records: list[dict]) -> None:  # after each stage, so an interrupted run keeps what it measured
        timing.save(out_path, records, device, extra={"bandwidth_Bps": bw, "timing_methods": methods,
                                                       "quick": args.quick, "compile": compile_where})

    print("chapter 02's kernel at the target point:")
    ext02 = build(ROOT / "02_forward_kernel")
    # On the CPU one eager call takes 0.25-0.5 s: give the median at least a handful of runs.
    target_time = min_run_time if device == "cuda" or args.quick else max(min_run_time, 3.0)
    rows = time_variants({"chapter02": ext02.forward} | with_compiled(True), *target, device, bw, target_time,
                         reference.trilinear, sweep="target")
    timing.save(ch02_path, rows, device, extra={"bandwidth_Bps": bw, "quick": args.quick})
    print(f"wrote {ch02_path}")

    n_sweep, f_sweep = sizes(device, args.quick)
    records: list[dict] = []
    for sweep, shapes in (("N", n_sweep), ("F", f_sweep)):
        print(f"sweep over {sweep}:")
        for N, F in shapes:
            variants = ours | with_compiled((N, F) == target)
            records += time_variants(variants, N, F, device, bw, min_run_time, reference.trilinear, sweep=sweep)
            save(records)
    print("dtypes at the target point:")
    for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        records += time_variants(ours, *target, device, bw, min_run_time, reference.trilinear, dtype, sweep="dtype")
    save(records)
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
