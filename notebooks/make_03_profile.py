"""Writes notebooks/03_profile.ipynb (run: .venv/bin/python notebooks/make_03_profile.py)."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

cells = [
    new_markdown_cell("""# 03 · Where the time of one call goes

The data comes from `03_validate/record_profiles.py`, saved in `../results/03_validate_profile/<device>/`:
`summary.json` (one call of each case through `profiling.profile_call`: host time, device time,
kernels; on a GPU also Nsight Compute's counters for the three mappings) and `trace.json.gz`
(torch.profiler's trace of three calls of each case: open it in https://ui.perfetto.dev). With
`COURSE_QUICK=1` the notebook also profiles this machine's CPU into a temporary folder, to show
the pipeline works (nothing is saved then)."""),
    new_code_cell("""import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

QUICK = os.environ.get("COURSE_QUICK") == "1"
ROOT = Path.cwd().parent
PROFILES = ROOT / "results" / "03_validate_profile"
DATA = {}
for dev in ("cuda", "cpu"):
    if (PROFILES / dev / "summary.json").is_file():
        summary = json.loads((PROFILES / dev / "summary.json").read_text())
        with gzip.open(PROFILES / dev / "trace.json.gz") as f:
            trace = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and "dur" in e]
        DATA[dev] = (summary, trace)
        env = summary["environment"]
        print(f"{dev}: {env['device_name']}, torch {env['torch']}, {len(trace)} trace events")"""),
    new_code_cell("""if QUICK:  # prove the pipeline on this machine: the CPU, into a temporary folder
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, str(ROOT / "03_validate" / "record_profiles.py"), "--device", "cpu", "--out", tmp]
        subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True, text=True)
        quick = json.loads(Path(tmp, "summary.json").read_text())
    print([(r["name"], r["N"], r["F"], r["kernels"]) for r in quick["records"]])"""),
    new_code_cell("""def label(r):
    return f"{r['name']}\\nN={r['N']}\\nF={r['F']}"


def bars(ax, summary):
    \"\"\"Host and device time of one call of each case: above the diagonal, the host is the bottleneck.\"\"\"
    rows = summary["records"]
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["host_us"] for r in rows], 0.4, color="C1", label="host (the call on the CPU)")
    ax.bar([x + 0.2 for x in xs], [r["device_us"] for r in rows], 0.4, color="C0",
           label="device (kernels)" if summary["environment"]["device_type"] == "cuda" else "top-level operators")
    for x, r in zip(xs, rows):
        what = f"{r['kernels']} kernel{'s' * (r['kernels'] != 1)}" if r["bound"] else f"{r['kernels']} op{'s' * (r['kernels'] != 1)}"
        bound = f"\\n{r['bound']}-bound" if r["bound"] else ""
        ax.text(x, max(r["host_us"], r["device_us"]) * 1.15, what + bound, ha="center", fontsize=7)
    ax.set_xticks(list(xs), [label(r) for r in rows], fontsize=6)
    ax.set(yscale="log", ylabel="µs per call", title="one call: host vs device time")
    ax.set_ylim(top=ax.get_ylim()[1] * 4)
    ax.legend(fontsize=7, loc="upper left")


def timeline(ax, trace, name):
    \"\"\"One call (the second of three, back to back) as Perfetto draws it: on the host, the call's range and the
    top-level operators and runtime calls inside it; on the GPU, the kernels launched inside it (they start once
    the kernels queued before them are done).\"\"\"
    host = next(e for e in trace if e["cat"] == "user_annotation" and e["name"] == name)
    t0 = host["ts"]
    gpu = next((e for e in trace if e["cat"] == "gpu_user_annotation" and e["name"] == name), None)
    end = max(host["ts"] + host["dur"], gpu["ts"] + gpu["dur"] if gpu else 0)
    tid = host["tid"]
    ops, last = [], -1.0
    stop = host["ts"] + host["dur"]
    for e in sorted((e for e in trace if e["cat"] == "cpu_op" and e["tid"] == tid and host["ts"] <= e["ts"] <= stop),
                    key=lambda e: e["ts"]):
        if e["ts"] >= last:  # top-level operators only
            ops.append(e)
            last = e["ts"] + e["dur"]
    runtime = [e for e in trace if e["cat"] == "cuda_runtime" and e["tid"] == tid and host["ts"] <= e["ts"] <= stop]
    kernels = [e for e in trace if e["cat"] == "kernel" and gpu and gpu["ts"] <= e["ts"] <= gpu["ts"] + gpu["dur"]]
    rows = [("call (host)", [host], "C1"), ("operators", ops, "C2"), ("CUDA runtime", runtime, "C4"), ("kernels (GPU)", kernels, "C0")]
    rows = [r for r in rows if r[1]]
    for y, (what, evs, color) in enumerate(rows):
        ax.broken_barh([(e["ts"] - t0, max(e["dur"], (end - t0) * 0.002)) for e in evs], (y - 0.35, 0.7), color=color)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel="µs from the call's start", title=name.rsplit(" #", 1)[0] + ", call 2 of 3", xlim=(0, (end - t0) * 1.02))
    ax.grid(True, axis="x", alpha=0.3)


def ncu_panel(ax, summary):
    kernels = summary.get("ncu", {}).get("kernels", [])
    if not kernels:
        ax.text(0.5, 0.5, summary.get("ncu_error", "no ncu data"), ha="center", va="center", wrap=True, fontsize=7)
        ax.set_axis_off()
        return
    names = [k["kernel"] for k in kernels]
    metrics = [("sectors_per_load_request", "L1 sectors per load request"),
               ("dram__bytes_read.sum", "DRAM bytes read (GB)"),
               ("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy (%)"),
               ("gpu__time_duration.sum", "time under ncu (µs)")]
    scale = {"dram__bytes_read.sum": 1e-9, "gpu__time_duration.sum": 1e-3}
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [kernels[i].get(m, 0) * scale.get(m, 1.0) for m, _ in metrics]
        xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(metrics))]
        ax.bar(xs, values, width, label=name)
        for x, v in zip(xs, values):
            ax.text(x, v, f"{v:.3g}", ha="center", va="bottom", fontsize=6)
    ax.set_xticks(range(len(metrics)), [m[1] for m in metrics], fontsize=7)
    ax.set(yscale="log", title=f"Nsight Compute, one launch (N={summary['ncu']['N']}, F={summary['ncu']['F']})")
    ax.legend(fontsize=7)


def plot(dev):
    summary, trace = DATA[dev]
    cuda = dev == "cuda"
    cases = [f"{r['name']} N={r['N']} F={r['F']} #1" for r in summary["records"]]
    small, large = cases[0], cases[1]
    fig = plt.figure(figsize=(12, 7.5 if cuda else 4.5))
    grid = fig.add_gridspec(2 if cuda else 1, 3)
    bars(fig.add_subplot(grid[0, 0]), summary)
    timeline(fig.add_subplot(grid[0, 1]), trace, small)
    timeline(fig.add_subplot(grid[0, 2]), trace, large if cuda else cases[3])
    if cuda:
        ncu_panel(fig.add_subplot(grid[1, :]), summary)
    env = summary["environment"]
    fig.suptitle(f"trilinear forward, float32, profiled on {env['device_name']} (torch {env['torch']})")
    fig.tight_layout()
    if not QUICK:
        fig.savefig(Path("figures") / f"03_profile_{dev}.png", dpi=110)
    plt.show()


for dev in DATA:
    plot(dev)"""),
    new_markdown_cell("""Reading it: a bar pair per case, host time (the call on the CPU: Python, checks, allocation,
launch) against device time (the kernels on the GPU; on the CPU, the top-level operators the
profiler sees). When the host bar is the taller one, a loop of such calls keeps the GPU waiting:
fewer, larger calls (or a CUDA graph) help, a faster kernel does not. The timelines draw one call
of the small and one of the large case as Perfetto would. The Nsight Compute panel sets the
three mappings side by side: the naive one asks the L1 for many more sectors per load request,
and reads DRAM more than once."""),
]

nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
nbformat.write(nb, Path(__file__).with_name("03_profile.ipynb"))
