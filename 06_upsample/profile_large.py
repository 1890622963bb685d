"""Chapter 06: where the large cases' GPU time goes, from Nsight Compute.

    python 06_upsample/profile_large.py        # a GPU with ncu on PATH: results/06_upsample_profile.json
    python 06_upsample/profile_large.py --list # the cases, without profiling anything

sweep.py times the public calls over shapes drawn at random, and measures how far the cases of
64 MiB or more (input + output) stay from the copy floor. This runs each of those cases once
under Nsight Compute, through the kernel ops (the forward, and the gather backward with its plan
kernel), and records for every launch the tables of four ncu sections: Speed Of Light (time,
DRAM and L1/L2 throughput against their peaks, SM throughput), Memory Workload Analysis (the
bytes each level moved), Occupancy (achieved against theoretical) and Launch Statistics (grid,
block, registers per thread). What a kernel lacks (bandwidth, loads in flight, issue slots) is
then read from data, not guessed: a kernel at a small fraction of DRAM's peak with low L1 or
issue throughput and low occupancy is waiting on latency; one at a high L1 or issue throughput is
limited by its instructions.

The cases are sweep.py's own (the same seed), so the profile and the sweep's floor fractions
describe the same calls.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from coursekit import timing  # noqa: E402
from coursekit.build import load_python  # noqa: E402
import sweep  # noqa: E402

SECTIONS = ["SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats"]
OUT = HERE.parent / "results" / "06_upsample_profile.json"


def large_cases() -> list[tuple[int, dict]]:
    """(index, case) for sweep.py's cases of 64 MiB or more of input + output."""
    out = []
    for index, case in enumerate(sweep.draw_cases(sweep.CASES)):
        item = sweep.DTYPES[case["dtype"]].itemsize
        n, c, h, w = case["shape"]
        if n * c * (h * w + case["size"][0] * case["size"][1]) * item >= sweep.LARGE:
            out.append((index, case))
    return out


def target() -> None:
    """What ncu runs: for each large case, its inputs made first, then one forward and one gather
    backward through the kernel ops, each launch of ours inside an NVTX range named after the case."""
    load_python(HERE, "upsample")
    fw, bw = torch.ops.ch06._upsample_bilinear2d_kernel, torch.ops.ch06._upsample_bilinear2d_backward_kernel
    for index, case in large_cases():
        dtype = sweep.DTYPES[case["dtype"]]
        x = sweep._make(case["shape"], dtype, case["layout"], "cuda")
        g = sweep._make(case["shape"][:2] + case["size"], dtype, case["layout"], "cuda")
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(f"case{index} forward")
        fw(x, case["size"], case["mode"], None, None)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push(f"case{index} backward")
        bw(g, case["shape"][2:], case["mode"], "gather", None, None)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        del x, g


def command(csv_path: Path) -> list[str]:
    """ncu on target(): every kernel launched inside a case's NVTX range, the four sections, CSV out."""
    return ["ncu", "--nvtx", "--nvtx-include", "regex:case[0-9]+ (forward|backward)/", "--clock-control", "none",
            *[a for s in SECTIONS for a in ("--section", s)], "--csv", "--log-file", str(csv_path),
            sys.executable, str(Path(__file__).resolve()), "--target"]


def read(text: str) -> list[dict]:
    """ncu's CSV (a row per launch, section and metric) as a dict per launch: the kernel, the NVTX
    range it ran in, and {section: {metric: [value, unit]}}."""
    start = text.find('"ID"')  # ncu prints its own lines (==PROF== ...) before the table
    launches: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        entry = launches.setdefault(row["ID"], {"kernel": row["Kernel Name"], "metrics": {}})
        for key in row:  # the NVTX range a launch ran in has a column of its own
            if key.startswith("thread Domain") or key.startswith("NVTX"):
                if row[key]:
                    entry["range"] = row[key]
        value = row["Metric Value"].replace(",", "")
        try:
            value = float(value)
        except ValueError:
            pass
        entry["metrics"].setdefault(row.get("Section Name", ""), {})[row["Metric Name"]] = [value, row["Metric Unit"]]
    return list(launches.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="print the cases and stop")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--target", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.target:
        return target()
    cases = large_cases()
    for index, case in cases:
        print(f"case {index:2d}: {case['shape']} -> {case['size']} {case['dtype']} {case['layout']} {case['mode']}")
    if args.list:
        return
    if not torch.cuda.is_available() or shutil.which("ncu") is None:
        sys.exit("needs a CUDA GPU and Nsight Compute (ncu) on PATH")
    with tempfile.TemporaryDirectory() as folder:
        csv_path = Path(folder) / "ncu.csv"
        proc = subprocess.run(command(csv_path), capture_output=True, text=True, timeout=1200)
        if proc.returncode != 0 or not csv_path.is_file():
            sys.exit(f"ncu failed ({proc.returncode}): {(proc.stdout + proc.stderr)[-2000:]}")
        launches = read(csv_path.read_text())
    doc = {"environment": timing.environment("cuda"), "script": "06_upsample/profile_large.py",
           "command": " ".join(command(Path("ncu.csv"))).replace(sys.executable, "python")
           .replace(str(Path(__file__).resolve()), "06_upsample/profile_large.py"),
           "cases": {str(index): case for index, case in cases}, "launches": launches}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    for launch in launches:
        sol = launch["metrics"].get("GPU Speed Of Light Throughput", {})
        print(f"{launch.get('range', '?'):22s} {launch['kernel'][:40]:40s} "
              + ", ".join(f"{k} {v[0]} {v[1]}" for k, v in sol.items() if k in (
                  "Duration", "DRAM Throughput", "L1/TEX Cache Throughput", "Compute (SM) Throughput")))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
