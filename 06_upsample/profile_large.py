"""Chapter 06: where the large cases' GPU time goes, from Nsight Compute.

    python 06_upsample/profile_large.py        # a GPU with ncu on PATH: results/06_upsample_profile.json
    python 06_upsample/profile_large.py --list # the cases, without profiling anything
    python 06_upsample/profile_large.py --readme   # SPEED.md's table again, from the results file

sweep.py times the public calls over shapes drawn at random, and measures how far the cases of
64 MiB or more (input + output) stay from the copy floor. This runs each of those cases once
under Nsight Compute (one ncu run a case), through the kernel ops (the forward, and the gather
backward with its plan kernel), and records for every launch the tables of four ncu sections: Speed Of Light (time,
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
import glob
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from coursekit import results, timing  # noqa: E402
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


def target(index: int) -> None:
    """What ncu runs for one large case: its inputs made first, then one forward and one gather
    backward through the kernel ops."""
    load_python(HERE, "upsample")
    fw, bw = torch.ops.ch06._upsample_bilinear2d_kernel, torch.ops.ch06._upsample_bilinear2d_backward_kernel
    case = dict(large_cases())[index]
    dtype = sweep.DTYPES[case["dtype"]]
    x = sweep._make(case["shape"], dtype, case["layout"], "cuda")
    g = sweep._make(case["shape"][:2] + case["size"], dtype, case["layout"], "cuda")
    torch.cuda.synchronize()
    fw(x, case["size"], case["mode"], None, None)
    bw(g, case["shape"][2:], case["mode"], "gather", None, None)
    torch.cuda.synchronize()


def ncu() -> str | None:
    """Nsight Compute's command line tool: on PATH, or where its installer puts it."""
    found = shutil.which("ncu") or sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"))
    return found if isinstance(found, str) else (found[-1] if found else None)


def command(tool: str, csv_path: Path, index: int) -> list[str]:
    """ncu on target(index): only our kernels (namespace ch06; PyTorch's randn is left out), the four
    sections, CSV out. A kernel's direction is in its name (forward_*; plan or gather_* for the backward)."""
    return [tool, "--kernel-name-base", "demangled", "-k", "regex:ch06::", "--clock-control", "none",
            *[a for s in SECTIONS for a in ("--section", s)], "--csv", "--log-file", str(csv_path),
            sys.executable, str(Path(__file__).resolve()), "--target", str(index)]


def read(text: str) -> list[dict]:
    """ncu's CSV (a row per launch, section and metric) as a dict per launch: the kernel and
    {section: {metric: [value, unit]}}."""
    start = text.find('"ID"')  # ncu prints its own lines (==PROF== ...) before the table
    launches: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        entry = launches.setdefault(row["ID"], {"kernel": row["Kernel Name"], "metrics": {}})
        value = row["Metric Value"].replace(",", "")
        try:
            value = float(value)
        except ValueError:
            pass
        entry["metrics"].setdefault(row.get("Section Name", ""), {})[row["Metric Name"]] = [value, row["Metric Unit"]]
    return list(launches.values())


def summarize(launch: dict) -> dict:
    """The figures the lesson reads off a launch, in the units of the other results files (ms)."""
    m = launch["metrics"]
    sol, mem = m.get("GPU Speed Of Light Throughput", {}), m.get("Memory Workload Analysis", {})
    occ, ls = m.get("Occupancy", {}), m.get("Launch Statistics", {})

    def get(section, name):
        value = section.get(name, [None])[0]
        return value if isinstance(value, float) else None

    duration_ns = get(sol, "Duration")
    return {"kernel": re.search(r"(\w+<[^(]*)", launch["kernel"]).group(1),
            "duration_ms": None if duration_ns is None else duration_ns / 1e6,
            "dram_pct": get(sol, "DRAM Throughput"), "l1_pct": get(sol, "L1/TEX Cache Throughput"),
            "l2_pct": get(sol, "L2 Cache Throughput"), "sm_pct": get(sol, "Compute (SM) Throughput"),
            "occupancy_pct": get(occ, "Achieved Occupancy"), "occupancy_limit_pct": get(occ, "Theoretical Occupancy"),
            "registers": get(ls, "Registers Per Thread"), "spill_requests": get(mem, "Local Memory Spilling Requests"),
            "l1_hit_pct": get(mem, "L1/TEX Hit Rate"), "l2_hit_pct": get(mem, "L2 Hit Rate")}


START, END = "<!-- profile:start -->", "<!-- profile:end -->"


def table(doc: dict) -> str:
    """SPEED.md's table of the profile: a row per launch of ours (the plan kernel left out)."""
    env = doc["environment"]
    out = [f"`06_upsample/profile_large.py` on an {env['device_name']} (torch {env['torch']}, Nsight Compute, "
           "`--clock-control none`, one launch of each kernel op per case). DRAM, SM: throughput as a share "
           "of the peak (Speed Of Light); occupancy: achieved of the theoretical limit; spills: requests to "
           "local memory (registers that did not fit).", "",
           "| case | kernel | time | DRAM | SM | L1 hit | occupancy | registers | spills |",
           "|---|---|---|---|---|---|---|---|---|"]
    for launch in doc["launches"]:
        s = launch["summary"]
        if s["kernel"].startswith("plan_kernel"):
            continue
        case = doc["cases"][str(launch["case"])]
        what = (f"{case['shape']} -> {case['size']} {case['dtype']}, "
                f"{'NCHW' if case['layout'] == 'nchw' else 'channels_last'}, {case['mode']}")
        out.append(f"| {launch['case']}: {what} | `{s['kernel']}` | {s['duration_ms'] * 1e3:.1f} µs | "
                   f"{s['dram_pct']:.0f}% | {s['sm_pct']:.0f}% | {s['l1_hit_pct']:.0f}% | "
                   f"{s['occupancy_pct']:.0f}% of {s['occupancy_limit_pct']:.0f}% | {s['registers']:.0f} | "
                   f"{s['spill_requests']:,.0f} |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="print the cases and stop")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--readme", action="store_true", help="only rewrite SPEED.md's table from --out")
    ap.add_argument("--target", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.target is not None:
        return target(args.target)
    if args.readme:
        return results.write_block(HERE / "SPEED.md", START, END, table(json.loads(args.out.read_text())))
    cases = large_cases()
    for index, case in cases:
        print(f"case {index:2d}: {case['shape']} -> {case['size']} {case['dtype']} {case['layout']} {case['mode']}")
    if args.list:
        return
    tool = ncu()
    if not torch.cuda.is_available() or tool is None:
        sys.exit("needs a CUDA GPU and Nsight Compute (ncu)")
    launches = []
    with tempfile.TemporaryDirectory() as folder:
        for index, _ in cases:  # one ncu run a case: each launch is known to be that case's
            csv_path = Path(folder) / f"case{index}.csv"
            proc = subprocess.run(command(tool, csv_path, index), capture_output=True, text=True, timeout=600)
            if proc.returncode != 0 or not csv_path.is_file():
                sys.exit(f"ncu failed on case {index} ({proc.returncode}): {(proc.stdout + proc.stderr)[-2000:]}")
            for launch in read(csv_path.read_text()):
                launch["summary"] = summarize(launch)  # its kernel: e.g. gather_kernel<float, 8, 2, 1>
                launch |= {"case": index,
                           "direction": "forward" if launch["summary"]["kernel"].startswith("forward") else "backward"}
                launches.append(launch)
                sol = launch["metrics"].get("GPU Speed Of Light Throughput", {})
                print(f"case {index:2d} {launch['direction']:8s} {launch['kernel'][:60]:60s} " + ", ".join(
                    f"{k} {v[0]} {v[1]}" for k, v in sol.items() if k in (
                        "Duration", "DRAM Throughput", "L1/TEX Cache Throughput", "Compute (SM) Throughput")),
                    flush=True)
    doc = {"environment": timing.environment("cuda"), "script": "06_upsample/profile_large.py",
           "command": " ".join(command("ncu", Path("caseN.csv"), 0)).replace(sys.executable, "python")
           .replace(str(Path(__file__).resolve()), "06_upsample/profile_large.py").replace("--target 0", "--target N"),
           "cases": {str(index): case for index, case in cases}, "launches": launches}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}")
    if args.out == OUT:
        results.write_block(HERE / "SPEED.md", START, END, table(doc))


if __name__ == "__main__":
    main()
