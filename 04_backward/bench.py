"""Chapter 04 benchmark: the backward kernels against their bandwidth floors, against
autograd of the PyTorch reference (eager and torch.compile), and GELU against F.gelu.

    python 04_backward/bench.py                  # GPU if there is one, else CPU
    python 04_backward/bench.py --device cpu
    python 04_backward/bench.py --quick --out /tmp/q.json

Writes results/04_backward_<cuda|cpu>.json.
"""

from __future__ import annotations

import argparse
import time
import sys
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as Fn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: coursekit is in the course root
from coursekit import ROOT, timing
from coursekit.build import build, load_python
from coursekit.testing import rel_error

HERE = Path(__file__).resolve().parent
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def sizes(device: str, quick: bool) -> tuple[int, int, int]:
    """(N, F) of the trilinear runs and the element count of the GELU runs."""
    if quick:
        return 256, 32, 1 << 14
    if device == "cuda":
        return 65536, 256, 1 << 26
    return 8192, 256, 1 << 24


def inputs(N: int, F: int, device: str, dtype: torch.dtype):
    grad_out = torch.randn(N, F, device=device, dtype=dtype)
    feats = torch.randn(N, 8, F, device=device, dtype=dtype)
    points = (torch.rand(N, 3, device=device) * 2 - 1).to(dtype)
    return grad_out, feats, points


def first_call_ms(fn: Callable, device: str):
    """Run fn once (this compiles, for torch.compile) and return (result, milliseconds)."""
    t0 = time.perf_counter()
    result = fn()
    timing.sync(device)
    return result, (time.perf_counter() - t0) * 1e3


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--quick", action="store_true", help="tiny sizes and short timings: checks the pipeline")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (the slowest part on a CPU)")
    ap.add_argument("--out", help="results JSON (default results/04_backward_<device>.json)")
    args = ap.parse_args(argv)
    device = args.device
    min_run_time = 0.05 if args.quick else (0.3 if device == "cuda" else 0.5)
    out_path = Path(args.out or ROOT / "results" / f"04_backward_{device}.json")
    with_compile = not (args.quick or args.no_compile)

    ext = build(HERE)
    reference = load_python(HERE, "reference")
    N, F, n_gelu = sizes(device, args.quick)
    bw = timing.copy_bandwidth(device, nbytes=(1 << 24) if args.quick else None)
    print(f"{device}: copy bandwidth {bw / 1e9:.1f} GB/s (read + write); N={N} F={F}", flush=True)
    records: list[dict] = []

    def add(name: str, fn: Callable, moved: int | None, **fields) -> dict:
        t = timing.bench(fn, device, min_run_time)
        row = timing.record(name, t, moved, bw if moved else None, **fields)
        records.append(row)
        floor = f"  ({row['fraction_of_floor']:.0%} of floor)" if moved else ""
        print(f"  {name:34s} {fields.get('dtype', ''):9s} {t.median_ms:9.4f} ms{floor}", flush=True)
        return row

    def kernels(n: int, f: int, dtype: torch.dtype, group: str) -> None:
        """The forward and the backward kernels at (n, f), each against the bytes it must move."""
        dname = str(dtype).replace("torch.", "")
        grad_out, feats, points = inputs(n, f, device, dtype)
        gf, gp = ext.backward(grad_out, feats, points, True, True)
        fields = dict(N=n, F=f, dtype=dname, group=group)
        out = ext.forward(feats, points)
        add("forward", lambda: ext.forward(feats, points), timing.nbytes(feats, points, out), **fields)
        add("backward grad_feats", lambda: ext.backward(grad_out, feats, points, True, False),
            timing.nbytes(grad_out, points, gf), **fields)
        add("backward grad_points", lambda: ext.backward(grad_out, feats, points, False, True),
            timing.nbytes(grad_out, feats, points, gp), **fields)
        add("backward both", lambda: ext.backward(grad_out, feats, points, True, True),
            timing.nbytes(grad_out, feats, points, gf, gp), **fields)

    # --- the kernels at one size, every dtype
    for dtype in DTYPES:
        kernels(N, F, dtype, "kernels")

    # --- short rows: below 32 packs a row is a power of two wide, several cubes to a warp (lesson section 5),
    # which F = 256 above never shows: F = 16 and 32 in float32 (4 and 8 packs), 32 and 64 in 16-bit types.
    if device == "cuda":
        scale = 64 if args.quick else 1
        for n, f, dtype in ((1 << 18, 16, torch.float32), (1 << 18, 32, torch.float32), (1 << 20, 32, torch.float32),
                            (1 << 18, 32, torch.bfloat16), (1 << 18, 64, torch.bfloat16), (1 << 18, 64, torch.float16)):
            kernels(n // scale, f, dtype, "short_rows")

    # --- the points gradient: one kernel, three ways for a row's partial sums to reach grad_points.
    # The same loads (16-byte packs), the same weights per cube, the same partial sums per thread; only
    # the last step differs: the fixed-order reduction (ours), atomicAdd per thread, or the warp's
    # shuffles and then atomicAdd per warp. Two shapes with the same bytes: F = 256 (rows of 2 warps
    # in float32, 4 in float64) and F = 1024 (rows of 8 warps), so the number of atomics per address varies.
    if device == "cuda":
        writes = {
            "grad_points, fixed-order reduction": lambda g, f, p: ext.backward(g, f, p, False, True)[1],
            "grad_points, atomicAdd per thread": lambda g, f, p: ext.points_grad_atomic(g, f, p, False),
            "grad_points, atomicAdd per warp": lambda g, f, p: ext.points_grad_atomic(g, f, p, True),
        }
        for n_red, f_red in ((N, F), (N * F // 1024, 1024)):
            for dtype in (torch.float32, torch.float64):
                dname = str(dtype).replace("torch.", "")
                grad_out, feats, points = inputs(n_red, f_red, device, dtype)
                packs = f_red // (16 // feats.element_size())
                warps = min(256, (packs + 31) // 32 * 32) // 32
                mine = ext.backward(grad_out, feats, points, False, True)[1]
                fields = dict(N=n_red, F=f_red, dtype=dname, group="reduction", warps_per_row=warps)
                for name, write in writes.items():
                    runs = [write(grad_out, feats, points) for _ in range(10)]
                    identical = sum(torch.equal(r, runs[0]) for r in runs[1:])
                    add(name, lambda: write(grad_out, feats, points), timing.nbytes(grad_out, feats, points, mine),
                        bitwise_identical_reruns=identical,
                        rel_error_vs_reduction=max(rel_error(r, mine) for r in runs), **fields)  # the worst of 10 runs
                    print(f"    N={n_red} F={f_red} ({warps} warps a row): 9 reruns bitwise identical to the first: "
                          f"{identical}", flush=True)
                del grad_out, feats, points, mine, runs

    # --- what a fresh output costs: allocate and write a grad_feats-sized tensor, against writing one that exists.
    # On a CPU a large fresh allocation is new pages from the OS, and the first write to each page faults.
    shape, fields = (N, 8, F), dict(N=N, F=F, dtype="float32", group="allocation")
    buffer = torch.empty(shape, device=device)
    add("fill an existing grad_feats-sized tensor", lambda: buffer.fill_(1.0), timing.nbytes(buffer), **fields)
    add("allocate and fill one", lambda: torch.empty(shape, device=device).fill_(1.0), timing.nbytes(buffer), **fields)
    del buffer

    # --- ours against autograd of the reference formula (float32)
    grad_out, feats, points = inputs(N, F, device, torch.float32)
    fields = dict(N=N, F=F, dtype="float32", group="vs_autograd")
    feats_r, points_r = feats.clone().requires_grad_(), points.clone().requires_grad_()

    def ours_fwd_bwd():
        ext.forward(feats, points)
        return ext.backward(grad_out, feats, points, True, True)

    def autograd_fwd_bwd(fn: Callable) -> Callable:
        return lambda: torch.autograd.grad(fn(feats_r, points_r), (feats_r, points_r), grad_out)

    candidates = {"eager": reference.trilinear}
    if with_compile:
        torch._dynamo.reset()
        # Compiled backward graphs may reuse ("donate") saved buffers, which forbids
        # the retain_graph=True that the backward-only timing below needs.
        torch._functorch.config.donated_buffer = False
        candidates["torch.compile"] = torch.compile(reference.trilinear, dynamic=False)
    expected, _ = first_call_ms(autograd_fwd_bwd(reference.trilinear), device)
    add("ours forward+backward", ours_fwd_bwd, None, **fields)
    add("ours backward", lambda: ext.backward(grad_out, feats, points, True, True), None, **fields)
    for name, fn in candidates.items():
        try:
            got, first_ms = first_call_ms(autograd_fwd_bwd(fn), device)
            err = max(rel_error(a, b) for a, b in zip(got, expected))
            add(f"{name} forward+backward", autograd_fwd_bwd(fn), None, first_call_ms=first_ms, rel_error=err, **fields)
            out = fn(feats_r, points_r)  # keep the graph: time the backward pass alone
            add(f"{name} backward", lambda: torch.autograd.grad(out, (feats_r, points_r), grad_out, retain_graph=True),
                None, **fields)
            del out
        except Exception as e:  # torch.compile needs a working compiler toolchain (Triton on GPUs, a C++ compiler on CPUs)
            print(f"  {name}: failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
            records.append({"name": f"{name} forward+backward", "error": f"{type(e).__name__}: {e}"[:500], **fields})
    mine = ext.backward(grad_out, feats, points, True, True)
    err = max(rel_error(a, b) for a, b in zip(mine, expected))
    print(f"  ours vs eager autograd (float32): max relative error {err:.2g}", flush=True)
    del grad_out, feats, points, feats_r, points_r, expected, mine, candidates

    # --- GELU, elementwise: ours against PyTorch's own kernels
    for dtype in DTYPES:
        dname = str(dtype).replace("torch.", "")
        x = torch.randn(n_gelu, device=device, dtype=dtype) * 3
        g = torch.randn_like(x)
        fields = dict(numel=n_gelu, dtype=dname, group="gelu")
        add("gelu forward (ours)", lambda: ext.gelu_forward(x), 2 * timing.nbytes(x), **fields)
        add("gelu forward (F.gelu)", lambda: Fn.gelu(x), 2 * timing.nbytes(x), **fields)
        add("gelu backward (ours)", lambda: ext.gelu_backward(g, x), 3 * timing.nbytes(x), **fields)
        add("gelu backward (aten)", lambda: torch.ops.aten.gelu_backward(g, x), 3 * timing.nbytes(x), **fields)
        del x, g

    # --- the CPU GELU forward across sizes (in L2, in the last-level cache, past it) and thread counts,
    # float32 and bfloat16: ours against F.gelu. Row names of their own ("gelu forward, ...") keep these
    # rows out of the one-size table above (group "gelu"), which results/README.md and the notebook show.
    if device == "cpu":
        threads_before = torch.get_num_threads()
        for threads in sorted({1, min(2, threads_before)}):
            torch.set_num_threads(threads)
            for dtype in (torch.float32, torch.bfloat16):
                dname = str(dtype).replace("torch.", "")
                for n in ((1 << 12, 1 << 14) if args.quick else (100_000, 1_000_000, 10_000_000)):
                    x = torch.randn(n, device=device, dtype=dtype) * 3
                    fields = dict(numel=n, dtype=dname, threads=threads, group="gelu_sizes")
                    # Both, in turns, before either is timed: whether a fresh 2-20 MB output faults its pages in
                    # depends on what the allocator was last given back (APPENDIX_memory.md), and the first one
                    # timed would otherwise pay for it alone.
                    for _ in range(3):
                        ext.gelu_forward(x), Fn.gelu(x)
                    add("gelu forward, ours", lambda: ext.gelu_forward(x), 2 * timing.nbytes(x), **fields)
                    add("gelu forward, F.gelu", lambda: Fn.gelu(x), 2 * timing.nbytes(x), **fields)
                    del x
        torch.set_num_threads(threads_before)

    timing.save(out_path, records, device, extra={"bandwidth_Bps": bw, "quick": args.quick, "N": N, "F": F,
                                                   "gelu_numel": n_gelu, "min_run_time_s": min_run_time})
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
