"""The results tables, generated from the committed timing data in results/.

    python -m coursekit.results            print both blocks
    python -m coursekit.results --write    rewrite them: the full tables in results/README.md,
                                           the summary in README.md (each between its markers)

A test checks that both files hold exactly what this prints, so every number in them
comes from a results/*.json file written by a benchmark run.

Like with like: a "GPU only" record (replays of a CUDA graph, coursekit.timing.bench_graph)
is compared only with another "GPU only" record; a row with no like-for-like peer in the
data gets no ratio.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from . import ROOT

RESULTS = ROOT / "results"
# the full tables, in results/README.md
START, END = "<!-- results:start -->", "<!-- results:end -->"
# the summary, in README.md
SUMMARY_START, SUMMARY_END = "<!-- results-summary:start -->", "<!-- results-summary:end -->"

# results/<stem>_<device>.json: the script that writes it
WRITERS = {
    "02_forward_kernel": "03_validate/bench.py",
    "03_validate": "03_validate/bench.py",
    "03_validate_peers": "03_validate/peers.py",
    "04_backward": "04_backward/bench.py",
    "05_autograd": "05_autograd/bench.py",
    "06_upsample": "06_upsample/bench.py",
    "06_upsample_sweep": "06_upsample/sweep.py",
    "06_upsample_host": "06_upsample/sweep.py",  # --host-only
}
GRAPH_REPLAY = ", GPU only"  # the suffix of the records timed as CUDA graph replays

# The kernels table: (kernel, chapter, our record, {column: the record it is compared with})
SPECS = [
    ("trilinear forward", "02_forward_kernel", "chapter02", {"eager": "eager", "torch.compile": "compiled"}),
    ("trilinear backward, grad_feats", "04_backward", "backward grad_feats", {}),
    ("trilinear backward, both gradients", "04_backward", "backward both", {}),
    ("trilinear backward, through autograd", "04_backward", "ours backward",
     {"eager": "eager backward", "torch.compile": "torch.compile backward"}),
    ("trilinear forward + backward", "04_backward", "ours forward+backward",
     {"eager": "eager forward+backward", "torch.compile": "torch.compile forward+backward"}),
    ("GELU forward", "04_backward", "gelu forward (ours)", {"torch": "gelu forward (F.gelu)"}),
    ("GELU backward", "04_backward", "gelu backward (ours)", {"torch": "gelu backward (aten)"}),
    ("upsample forward", "06_upsample", "forward ours",
     {"torch.compile": "forward torch.compile", "torch": "forward F.interpolate"}),
    ("upsample backward (gather)", "06_upsample", "backward gather", {"torch": "backward F.interpolate"}),
    ("upsample backward (scatter)", "06_upsample", "backward scatter", {"torch": "backward F.interpolate"}),
    ("upsample forward, GPU only", "06_upsample", "forward ours" + GRAPH_REPLAY, {}),
    ("upsample backward (gather), GPU only", "06_upsample", "backward gather" + GRAPH_REPLAY, {}),
    ("copy of the same bytes", "06_upsample", "copy of the same bytes", {}),
    ("upsample forward + backward", "06_upsample", "forward+backward ours (gather)",
     {"torch": "forward+backward F.interpolate"}),
    ("upsample forward + backward, deterministic", "06_upsample", "forward+backward ours (gather), deterministic mode",
     {"torch": "forward+backward F.interpolate deterministic"}),
]
SIZE_KEYS = ("N", "F", "numel", "shape", "factor", "mode", "dtype", "layout")

TRILINEAR_PEERS = {"reference eager": "eager reference", "reference compiled": "`torch.compile` of the reference",
                   "per-corner eager": "eager per-corner formulation",
                   "per-corner compiled": "`torch.compile` of the per-corner formulation"}
# The README's summary, GPU only: (chapter, what is ours, results stem,
#   [(case prefix, our record, {peer record: how the summary names it})])
HEADLINES = [
    # the trilinear forward against both formulations, eager and compiled (03_validate/peers.py): the
    # per-corner one, compiled, is the strongest plain-PyTorch peer
    ("02_forward_kernel", "trilinear forward (chapter 02's kernel)", "03_validate_peers",
     [("", "chapter02", TRILINEAR_PEERS)]),
    ("03_validate", "trilinear forward, 16-byte loads (`forward_vectorized`)", "03_validate_peers",
     [("", "vectorized", TRILINEAR_PEERS)]),
    ("04_backward", "trilinear forward + backward through autograd", "04_backward",
     [("", "ours forward+backward", {"eager forward+backward": "eager reference",
                                     "torch.compile forward+backward": "`torch.compile` of the reference"})]),
    ("04_backward", "GELU forward and backward, four dtypes", "04_backward",
     [("forward, ", "gelu forward (ours)", {"gelu forward (F.gelu)": "`F.gelu`"}),
      ("backward, ", "gelu backward (ours)", {"gelu backward (aten)": "PyTorch's GELU backward"})]),
    ("05_autograd", "the `torch.library` op, eager, forward + backward", "05_autograd",
     [("", "op", {"reference": "eager reference", "reference_compiled": "`torch.compile` of the reference",
                  "per-corner_compiled": "`torch.compile` of the per-corner formulation"})]),
    ("06_upsample", "bilinear upsample forward", "06_upsample",
     [("", "forward ours", {"forward F.interpolate": "`F.interpolate`",
                            "forward torch.compile": "`torch.compile(F.interpolate)`"})]),
    ("06_upsample", "bilinear upsample backward (gather)", "06_upsample",
     [("", "backward gather", {"backward F.interpolate": "PyTorch's backward"})]),
    # what a user calls, on shapes drawn at random (06_upsample/sweep.py): the public function, autograd
    ("06_upsample", "`upsample_bilinear`, 48 random shapes, forward", "06_upsample_sweep",
     [("", "forward ours", {"forward F.interpolate": "`F.interpolate`",
                            "forward torch.compile": "`torch.compile(F.interpolate)`"})]),
    ("06_upsample", "`upsample_bilinear`, 48 random shapes, backward through autograd", "06_upsample_sweep",
     [("", "backward ours (autograd)", {"backward F.interpolate (autograd)": "`F.interpolate`'s backward"})]),
]


def is_replay(name: str) -> bool:
    return name.endswith(GRAPH_REPLAY)


def like_for_like(ours: str, other: str) -> bool:
    """Graph replays are compared only with graph replays."""
    return is_replay(ours) == is_replay(other)


def ms(x: float) -> str:
    """A time in ms: at least 3 decimals, and at least 3 significant digits."""
    decimals = max(3, 2 - math.floor(math.log10(abs(x)))) if x else 3
    return f"{x:.{decimals}f}"


def ratio(x: float) -> str:
    """A speed-up: two decimals below 2 (so that 0.97× does not read as 1.0×), one above."""
    return f"{x:.2f}×" if x < 2 else f"{x:.1f}×"


def _key(row: dict) -> tuple:
    return tuple((k, json.dumps(row.get(k))) for k in SIZE_KEYS)


def _sizes(row: dict) -> str:
    parts = []
    if "N" in row:
        parts.append(f"N={row['N']}, F={row['F']}")
    if "numel" in row:
        parts.append(f"{row['numel']:,} elements")
    if "shape" in row:
        parts.append("×".join(map(str, row["shape"])) + (f", ×{row['factor']}" if "factor" in row else "")
                     + (" → " + "×".join(map(str, row["size"])) if "size" in row and "case" in row else ""))
    if row.get("layout") == "channels_last":
        parts.append("channels_last")
    if "mode" in row:
        parts.append(row["mode"])
    if row.get("dtype", "float32") != "float32":
        parts.append(row["dtype"])
    return ", ".join(parts)


def _group(row: dict) -> tuple:
    return (row.get("N"), row.get("F"), row.get("numel"), json.dumps(row.get("shape")), json.dumps(row.get("factor")),
            row.get("mode"), row.get("dtype", "float32"), row.get("layout"), row.get("case"))


def _device(env: dict) -> str:
    return env.get("device_name", env.get("device_type", "?"))


def _load(stem: str, device: str, results: Path = RESULTS) -> tuple[Path, dict] | None:
    path = results / f"{stem}_{device}.json"
    return (path, json.loads(path.read_text())) if path.is_file() else None


def _table(head: list[str], body: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in body]


# ---------------------------------------------------------------------------------------- the full tables

def rows(results: Path = RESULTS) -> list[list[str]]:
    """The kernels table: one row per kernel, device and size; the last cell names the data file."""
    table = []
    for device in ("cuda", "cpu"):
        for label, chapter, ours, compare in SPECS:
            loaded = _load(chapter, device, results)
            if loaded is None:
                continue
            path, doc = loaded
            records = [r for r in doc["records"] if "median_ms" in r]
            by_key: dict[tuple, dict[str, dict]] = {}
            for r in records:
                by_key.setdefault(_key(r), {}).setdefault(r["name"], r)
            # rows measured in another group (e.g. eager autograd) share N and F but not the group
            by_size: dict[tuple, dict[str, dict]] = {}
            for r in records:
                by_size.setdefault(_group(r), {}).setdefault(r["name"], r)
            for key, named in by_key.items():
                if ours not in named or (label.endswith("(scatter)") and named[ours].get("mode") != "half_pixel"):
                    continue  # scatter: one mode is enough to show it
                r = named[ours]
                peers = by_size.get(_group(r), {})
                cells = {}
                for column, other in compare.items():
                    o = named.get(other) or peers.get(other)
                    if o and o.get("median_ms") and like_for_like(ours, other):
                        cells[column] = ratio(o["median_ms"] / r["median_ms"])
                frac = r.get("fraction_of_floor")
                table.append([label, _device(doc["environment"]), _sizes(r), ms(r["median_ms"]),
                              f"{frac:.0%}" if frac is not None else "",
                              cells.get("eager", ""), cells.get("torch.compile", ""), cells.get("torch", ""),
                              f"`{path.name}`"])
    return table


def _files(results: Path = RESULTS) -> list[list[str]]:
    out = []
    for path in sorted(results.glob("*_c*.json")):
        stem, device = path.stem.rsplit("_", 1)
        if stem not in WRITERS:
            continue
        doc = json.loads(path.read_text())
        env = doc["environment"]
        where = _device(env)
        if env.get("device_type") == "cuda":
            where += f" (sm {env.get('capability', '?')}, driver {env.get('driver', '?')})"
        else:
            where += f" of {env.get('os_cpus', '?')} CPUs"
        bw = env.get("bandwidth_Bps")
        bw = bw / 1e9 if bw else env.get("copy_bandwidth_GBps")
        how = ["`timing.bench`" + (f", at least {env['min_run_time_s']:g} s a row" if "min_run_time_s" in env else "")]
        if any(is_replay(r.get("name", "")) for r in doc["records"]):
            how.append("*GPU only* rows: `timing.bench_graph`")
        if "timing_methods" in env:
            how.append(f"{len(env['timing_methods'])} timing methods compared (`environment.timing_methods`)")
        if env.get("what"):
            how.append(f"each row: {env['what']}")
        if env.get("quick"):
            how.append("**quick run: tiny sizes**")
        out.append([f"[`{path.name}`]({path.name})", f"`{WRITERS[stem]}`", where, env.get("torch", "?"),
                    f"{bw:.1f} GB/s" if bw else "", "; ".join(how), str(len(doc["records"]))])
    return out


def _sweep_rows(results: Path = RESULTS) -> list[list[str]]:
    """Chapter 03: the three thread mappings and the reference, over N, F and dtype."""
    names = ["naive", "coalesced", "vectorized", "eager", "compiled"]
    out = []
    for device in ("cuda", "cpu"):
        loaded = _load("03_validate", device, results)
        if loaded is None:
            continue
        path, doc = loaded
        cases: dict[tuple, dict[str, dict]] = {}
        for r in doc["records"]:
            cases.setdefault((r.get("sweep"), r["N"], r["F"], r["dtype"]), {}).setdefault(r["name"], r)
        for (sweep, n, f, dtype), named in cases.items():
            out.append([_device(doc["environment"]), str(sweep), f"N={n}, F={f}", dtype]
                       + [ms(named[k]["median_ms"]) if k in named else "" for k in names] + [f"`{path.name}`"])
    return out


def _route_rows(results: Path = RESULTS) -> list[list[str]]:
    """Chapter 05: forward + backward through each route."""
    names = ["function", "op", "op_compiled", "triton", "triton_compiled", "reference", "reference_compiled",
             "per-corner_compiled"]
    out = []
    for device in ("cuda", "cpu"):
        loaded = _load("05_autograd", device, results)
        if loaded is None:
            continue
        path, doc = loaded
        cases: dict[tuple, dict[str, dict]] = {}
        for r in doc["records"]:
            cases.setdefault((r["N"], r["F"], r["dtype"]), {}).setdefault(r["name"], r)
        for (n, f, dtype), named in cases.items():
            out.append([_device(doc["environment"]), f"N={n}, F={f}" + ("" if dtype == "float32" else f", {dtype}")]
                       + [ms(named[k]["median_ms"]) if k in named else "" for k in names] + [f"`{path.name}`"])
    return out


HARNESS = """\
Every time is a median in milliseconds from `coursekit/timing.py`: `timing.bench` warms up,
synchronises the GPU, repeats the call in blocks with `torch.utils.benchmark`'s
`blocked_autorange` and keeps the median over the blocks of the mean time per call.
`timing.bench_graph` (the *GPU only* rows) captures 10 calls in a CUDA graph and times its
replays: the GPU's time without the host's per-call work. Those rows are compared only with
other graph replays, and have no ratio where the data holds none."""

KERNELS_NOTE = """\
*Of floor*: the time it takes to move the kernel's bytes (inputs read, outputs written) at the
copy bandwidth measured in the same run, over the kernel's time (100%: the speed of memory).
*vs* columns: the other implementation's time over ours, same device, sizes and layout (above
1: ours is faster). *Eager* and *torch.compile*: the chapter's pure-PyTorch reference;
*PyTorch's op*: `F.gelu`, `F.interpolate`, and their backward. Upsample scatter rows: `half_pixel` only."""


def full_markdown(results: Path = RESULTS) -> str:
    head = ["kernel", "device", "sizes (float32 unless named)", "median ms", "of floor", "vs eager", "vs torch.compile",
            "vs PyTorch's op", "data"]
    parts = [
        "## The files",
        "",
        *_table(["file", "written by", "device", "torch", "copy bandwidth", "timing", "records"], _files(results)),
        "",
        HARNESS,
        "",
        "## Kernels: against the bandwidth floor and against PyTorch",
        "",
        KERNELS_NOTE,
        "",
        *_table(head, rows(results)),
        "",
        "## Chapter 03: three thread mappings and the reference, median ms",
        "",
        *_table(["device", "sweep", "sizes", "dtype", "naive", "coalesced", "vectorized", "eager reference",
                 "torch.compile of it", "data"], _sweep_rows(results)),
        "",
        "## Chapter 05: forward + backward through each route, median ms",
        "",
        *_table(["device", "sizes", "autograd.Function", "torch.library op", "op, torch.compile", "Triton op",
                 "Triton op, torch.compile", "reference", "reference, torch.compile",
                 "per-corner, torch.compile", "data"], _route_rows(results)),
    ]
    return "\n".join(parts)


def results_block(results: Path = RESULTS) -> str:
    return f"{START}\n{full_markdown(results)}\n{END}"


# ---------------------------------------------------------------------------------------- the README's summary

def headline_cases(stem: str, pairs: list, results: Path = RESULTS) -> tuple[dict, list[dict]]:
    """(environment, cases): per case, ours and the fastest like-for-like peer recorded in the same group."""
    loaded = _load(stem, "cuda", results)
    if loaded is None:
        return {}, []
    _, doc = loaded
    by_group: dict[tuple, dict[str, dict]] = {}
    for r in doc["records"]:
        if "median_ms" in r:
            by_group.setdefault(_group(r), {}).setdefault(r["name"], r)
    cases = []
    for prefix, ours, peers in pairs:
        for named in by_group.values():
            if ours not in named:
                continue
            found = [(named[p]["median_ms"], label) for p, label in peers.items()
                     if p in named and like_for_like(ours, p)]
            r = named[ours]
            case = {"what": prefix + _sizes(r), "ours": r["median_ms"], "pass": prefix}
            if found:
                case["peer_ms"], case["peer"] = min(found)
                case["ratio"] = case["peer_ms"] / case["ours"]
            cases.append(case)
    return doc["environment"], cases


def summary_rows(results: Path = RESULTS) -> tuple[list[list[str]], list[dict]]:
    table, envs = [], []
    for chapter, what, stem, pairs in HEADLINES:
        env, cases = headline_cases(stem, pairs, results)
        if not cases:
            continue
        envs.append(env)
        compared = [c for c in cases if "ratio" in c]
        link = f"[{chapter[:2]}]({chapter}/README.md)"
        if not compared:  # no like-for-like peer: no ratio
            table.append([link, what, "none recorded", str(len(cases)), "", ""])
            continue
        compared.sort(key=lambda c: c["ratio"])
        order = [p for p, _, _ in pairs]
        strongest = list(dict.fromkeys(c["peer"] for c in sorted(compared, key=lambda c: order.index(c["pass"]))))
        # name the peer in a cell only where one pass has several strongest peers
        several_peers = any(len({c["peer"] for c in compared if c["pass"] == p}) > 1 for p, _, _ in pairs)

        def cell(c):
            peer = f" {c['peer']}" if several_peers else ""
            return f"**{ratio(c['ratio'])}**: {ms(c['ours'])} vs {ms(c['peer_ms'])} ms{peer} ({c['what']})"

        worst, best = compared[0], compared[-1]
        table.append([link, what, " / ".join(strongest), str(len(compared)), cell(worst),
                      cell(best) if len(compared) > 1 else "(one case)"])
    return table, envs


def summary_markdown(results: Path = RESULTS) -> str:
    table, envs = summary_rows(results)
    machines = sorted({f"{_device(e)} (driver {e.get('driver', '?')}, torch {e.get('torch', '?')})" for e in envs})
    lines = [
        f"On {'; '.join(machines)}. Median ms per call, ours vs the fastest like-for-like peer in the data;",
        "× is the peer's time over ours (above 1: ours is faster); cases are sizes, dtypes, layouts and modes.",
        "",
        *_table(["chapter", "ours", "strongest peer", "cases", "worst case", "best case"], table),
    ]
    return "\n".join(lines)


def summary_block(results: Path = RESULTS) -> str:
    return f"{SUMMARY_START}\n{summary_markdown(results)}\n{SUMMARY_END}"


# ---------------------------------------------------------------------------------------- writing

def _replace(path: Path, start: str, end: str, block: str) -> bool:
    text = path.read_text() if path.is_file() else ""
    if start not in text or end not in text:
        print(f"{path.relative_to(ROOT)} has no {start} ... {end} block", file=sys.stderr)
        return False
    before, rest = text.split(start, 1)
    after = rest.split(end, 1)[1]
    path.write_text(before + block + after)
    return True


def write_block(path: Path, start: str, end: str, body: str) -> None:
    """Put generated text between the markers `start` and `end` of a file (the scripts that write
    tables into lessons use this: ladder.py, sweep.py, bench.py)."""
    if not _replace(Path(path), start, end, f"{start}\n{body}{end}"):
        raise SystemExit(f"{path} has no {start} ... {end} block")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true",
                        help="rewrite the full tables in results/README.md and the summary in README.md")
    args = parser.parse_args(argv)
    if not args.write:
        print(results_block())
        print()
        print(summary_block())
        return 0
    ok = _replace(RESULTS / "README.md", START, END, results_block())
    ok = _replace(ROOT / "README.md", SUMMARY_START, SUMMARY_END, summary_block()) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
