"""Chapter 05 benchmark: what each route costs, forward + backward, and the forward kernel in CUDA and Triton.

    python 05_autograd/bench.py            # full sizes, writes results/05_autograd_<cuda|cpu>.json
    python 05_autograd/bench.py --quick    # tiny sizes (checks the pipeline)
    python 05_autograd/bench.py --readme   # rewrite the lesson's tables from results/05_autograd_cuda.json

Rows, each timing out = f(feats, points) and both gradients by torch.autograd.grad:
  function        autograd.Function around the pybind11 kernels (route 1)
  op              the torch.library operator (route 2), eager
  op_compiled     route 2 inside torch.compile(fullgraph=True)   (CUDA only)
  triton          the triton_op (route 3): Triton forward, route 2's backward   (CUDA only)
  triton_compiled route 3 inside torch.compile(fullgraph=True)   (CUDA only)
  reference       the same formula in plain PyTorch ops, eager
  reference_compiled  that formula compiled by inductor            (CUDA only)
  per-corner_compiled the per-corner formulation compiled (03_validate/peers.py): the
                      strongest plain-PyTorch peer of the forward   (CUDA only)
Then the forward alone, "forward <name>" (no autograd): route 2's CUDA kernel, route 3's
Triton kernel and the two compiled formulations, float32 and bfloat16, each per call
(timing.bench, host included) and, for the two kernels, as CUDA graph replays
("forward <name>, GPU only", timing.bench_graph: the GPU's time alone), with the fraction of
the bandwidth floor (feats, points and out at the copy bandwidth measured in the same run).
On the CPU the compiled and Triton rows are left out: inductor compiles C++ there, which
takes long on a small machine, and Triton runs on the CPU only in its (slow) interpreter.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: coursekit is in the course root
from coursekit import ROOT, timing
from coursekit.build import build, describe, load_python

HERE = Path(__file__).parent
GRAPH = ", GPU only"  # coursekit.results.GRAPH_REPLAY: a graph-replay time is compared only with another
ROUTES = ["function", "op", "op_compiled", "triton", "triton_compiled", "reference", "reference_compiled",
          "per-corner_compiled"]
FORWARD = ["op", "triton", "per-corner_compiled", "reference_compiled"]


def triton_route(device: str):
    """trilinear_triton.py's module, or None (with the reason printed) where it cannot be timed."""
    if device != "cuda":
        return None
    try:
        tri = load_python(HERE, "trilinear_triton")
    except ImportError as e:
        print(f"no Triton rows: {e}")
        return None
    if tri.INTERPRETED:
        print("no Triton rows: TRITON_INTERPRET=1 runs Triton kernels in the interpreter")
        return None
    return tri


def time_routes(device, sizes, min_run_time, op, tri, reference, per_corner) -> list[dict]:
    routes = {"function": load_python(HERE, "trilinear_function").trilinear, "op": op.trilinear,
              "reference": reference.trilinear}
    if device == "cuda":
        routes["op_compiled"] = torch.compile(op.trilinear, fullgraph=True)
        routes["reference_compiled"] = torch.compile(reference.trilinear, fullgraph=True)
        routes["per-corner_compiled"] = torch.compile(per_corner, fullgraph=True)
        if tri is not None:
            routes["triton"] = tri.trilinear
            routes["triton_compiled"] = torch.compile(tri.trilinear, fullgraph=True)
    records = []
    for N, F in sizes:
        torch.manual_seed(0)
        feats = torch.randn(N, 8, F, device=device, requires_grad=True)
        points = (torch.rand(N, 3, device=device) * 2 - 1).requires_grad_()
        grad_out = torch.randn(N, F, device=device)
        for name in [r for r in ROUTES if r in routes]:
            def step(f=routes[name]):
                return torch.autograd.grad(f(feats, points), (feats, points), grad_out)

            t = timing.bench(step, device, min_run_time=min_run_time)
            records.append(timing.record(name, t, N=N, F=F, dtype="float32"))
            print(f"{device} N={N:7d} F={F:3d} {name:20s} {t.median_ms * 1e3:9.1f} us (forward + backward)", flush=True)
    return records


def time_forward(device, cases, min_run_time, op, tri, reference, per_corner) -> tuple[list[dict], float]:
    bandwidth = timing.copy_bandwidth(device)
    records = []
    for N, F, dtype in cases:
        torch.manual_seed(0)
        feats = torch.randn(N, 8, F, device=device, dtype=dtype)
        points = (torch.rand(N, 3, device=device) * 2 - 1).to(dtype)
        expected = reference.trilinear(feats.double(), points.double())
        contenders = {"op": op.trilinear}
        if tri is not None:
            contenders["triton"] = tri.trilinear
        if device == "cuda":
            torch._dynamo.reset()  # a fresh static-shape compile per case, as 03_validate/peers.py does
            contenders["per-corner_compiled"] = torch.compile(per_corner, dynamic=False)
            contenders["reference_compiled"] = torch.compile(reference.trilinear, dynamic=False)
        for name, fn in contenders.items():
            with torch.no_grad():
                out = fn(feats, points)
                err = ((out.double() - expected).abs().max() / expected.abs().max()).item()
                assert err < 1e-2, f"{name}: relative error {err:.3g}"
                moved = timing.nbytes(feats, points, out)
                how = [("", lambda: timing.bench(lambda: fn(feats, points), device, min_run_time=min_run_time))]
                if device == "cuda" and name in ("op", "triton"):
                    how.append((GRAPH, lambda: timing.bench_graph(lambda: fn(feats, points), min_run_time=min_run_time)))
                for suffix, measure in how:
                    t = measure()
                    row = timing.record(f"forward {name}{suffix}", t, moved, bandwidth, N=N, F=F,
                                        dtype=str(dtype).split(".")[-1], max_rel_error=err)
                    records.append(row)
                    print(f"{device} N={N:7d} F={F:3d} {row['dtype']:8s} forward {name + suffix:30s} "
                          f"{t.median_ms * 1e3:9.1f} us {row['fraction_of_floor']:6.1%}", flush=True)
    return records, bandwidth


# ------------------------------------------------------------------------------------ the lesson's tables

BLOCKS = {"routes": ("<!-- routes:start -->", "<!-- routes:end -->"),
          "forward": ("<!-- forward:start -->", "<!-- forward:end -->")}


def _us(row: dict | None) -> str:
    return "" if row is None else f"{row['median_ms'] * 1e3:.1f}"


def tables(doc: dict) -> dict[str, str]:
    """The two generated tables of README.md section 7, from a results file of this script."""
    env, records = doc["environment"], doc["records"]
    where = f"{env.get('device_name', env['device_type'])}, torch {env['torch']}"
    named: dict[tuple, dict[str, dict]] = {}
    for r in records:
        named.setdefault((r["N"], r["F"], r["dtype"]), {}).setdefault(r["name"], r)
    routes = [n for n in ROUTES if any(n in rows for rows in named.values())]
    lines = [f"`bench.py` on an {where}: median µs per forward + both gradients, float32 "
             f"(`{Path(doc.get('path', 'results/05_autograd_cuda.json')).name}`).", "",
             "| N, F | " + " | ".join(routes) + " |", "|---" * (len(routes) + 1) + "|"]
    for (n, f, _), rows in named.items():
        if any(r in rows for r in routes):
            lines.append(f"| {n}, {f} | " + " | ".join(_us(rows.get(r)) for r in routes) + " |")
    out = {"routes": "\n".join(lines) + "\n"}
    forward = [n for n in FORWARD if any(f"forward {n}" in rows for rows in named.values())]
    if not forward:
        out["forward"] = ("No forward-only records in the results file yet: `bench.py` on a GPU, then "
                          "`bench.py --readme`, fill this table.\n")
        return out
    graph = [n for n in forward if any(f"forward {n}{GRAPH}" in rows for rows in named.values())]
    head = [f"`{n}`" for n in forward] + [f"`{n}`, GPU only" for n in graph]
    lines = [f"`bench.py` on an {where}: the forward alone, median µs per call (and the fraction of the "
             "bandwidth floor: a read-mostly kernel can pass the copy it is measured with); *GPU only*: replays of a "
             "CUDA graph of 10 calls, the kernel without the host's share.",
             "", "| N, F, dtype | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]

    def cell(row):
        return "" if row is None else f"{_us(row)} ({row['fraction_of_floor']:.0%})"

    for (n, f, dtype), rows in named.items():
        cells = [rows.get(f"forward {x}") for x in forward] + [rows.get(f"forward {x}{GRAPH}") for x in graph]
        if any(cells):
            lines.append(f"| {n}, {f}, {dtype} | " + " | ".join(cell(c) for c in cells) + " |")
    out["forward"] = "\n".join(lines) + "\n"
    return out


def write_readme(results: Path, readme: Path = HERE / "README.md") -> None:
    doc = timing.load(results) | {"path": str(results)}
    text = readme.read_text()
    for name, block in tables(doc).items():
        start, end = BLOCKS[name]
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        assert pattern.search(text), f"{readme} has no {start} ... {end} block"
        text = pattern.sub(lambda _: f"{start}\n{block}{end}", text)
    readme.write_text(text)
    print(f"rewrote the tables in {readme} from {results}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check that everything runs")
    parser.add_argument("--out", type=Path, default=None, help="the JSON file to write")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when built for it and visible)")
    parser.add_argument("--readme", nargs="?", const=ROOT / "results" / "05_autograd_cuda.json", type=Path,
                        metavar="RESULTS", help="only rewrite README.md's tables from this results file")
    args = parser.parse_args()
    if args.readme:
        write_readme(args.readme)
        return

    ext = build(HERE)
    device = args.device or ("cuda" if describe(ext) == "CPU+CUDA" and torch.cuda.is_available() else "cpu")
    op = load_python(HERE, "trilinear_op")
    reference = load_python(HERE, "reference")
    per_corner = load_python(ROOT / "03_validate", "peers").per_corner  # chapter 03's strongest peer
    tri = triton_route(device)

    if args.quick:
        sizes = [(64, 8), (256, 16)]
        cases = [(256, 16, torch.float32), (300, 24, torch.bfloat16)]
    elif device == "cuda":
        sizes = [(1024, 8), (262144, 32)]
        cases = [(1024, 8, torch.float32), (262144, 32, torch.float32), (65536, 256, torch.float32),
                 (262144, 32, torch.bfloat16), (2**20, 32, torch.float32)]
    else:
        sizes = [(1024, 8), (32768, 32)]
        cases = [(1024, 8, torch.float32), (32768, 32, torch.float32)]
    min_run_time = 0.05 if args.quick else 0.5

    records = time_routes(device, sizes, min_run_time, op, tri, reference, per_corner)
    forward, bandwidth = time_forward(device, cases, min_run_time, op, tri, reference, per_corner)

    out = args.out or ROOT / "results" / f"05_autograd_{device}.json"
    extra = {"what": "forward + backward (torch.autograd.grad), float32; forward-only rows named 'forward ...'",
             "copy_bandwidth_GBps": bandwidth / 1e9}
    if args.quick:
        extra["quick"] = True
    if tri is not None:
        import triton

        extra["triton"] = triton.__version__
    timing.save(out, records + forward, device, extra)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
