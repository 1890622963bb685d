"""Writes notebooks/04_backward.ipynb (run: .venv/bin/python notebooks/make_04_backward.py, then execute the notebook with jupyter nbconvert)."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent

cells = [
    new_markdown_cell("""# 04 · Backward kernels: how fast are they?

This notebook plots `results/04_backward_cuda.json` and `results/04_backward_cpu.json`, written by
`python 04_backward/bench.py` on a GPU machine and on a CPU. Every time is the median of many calls
measured by `coursekit.timing.bench` (`torch.utils.benchmark`: warm-up, synchronisation, repeated
blocks). The *floor* of a kernel is the bytes it must move (every input read once, every output
written once) divided by the copy bandwidth measured in the same run.

With `COURSE_QUICK=1` (what the test suite sets) it also runs the benchmark at tiny sizes on this
machine, to prove the pipeline works; it then writes no figure."""),
    new_code_cell("""import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

ROOT = Path.cwd().parent  # the notebook runs in notebooks/
QUICK = os.environ.get("COURSE_QUICK") == "1"
FIGURES = Path("figures")


def load(name):
    path = ROOT / "results" / name
    return json.loads(path.read_text()) if path.is_file() else None


gpu, cpu = load("04_backward_cuda.json"), load("04_backward_cpu.json")
for doc in (gpu, cpu):
    if doc:
        env = doc["environment"]
        print(f"{env['device_name']}: torch {env['torch']}, CUDA {env.get('torch_cuda')}, driver {env.get('driver')}, "
              f"copy bandwidth {env['bandwidth_Bps'] / 1e9:.0f} GB/s, N = {env['N']}, F = {env['F']}")"""),
    new_markdown_cell("""## The kernels against their floors

`grad_feats` alone reads `grad_out` and `points` and writes `grad_feats` (8× the size of `grad_out`);
`grad_points` alone reads `grad_out`, `feats` and `points`; *both* does the two in one pass. This
chapter's targets on an H100 (float32): grad_feats alone ≥ 85 % of its floor, both ≥ 70 %."""),
    new_code_cell("""KERNELS = ["forward", "backward grad_feats", "backward grad_points", "backward both"]
DTYPES = ["float32", "float64", "float16", "bfloat16"]


def table(doc):
    rows = [r for r in doc["records"] if r.get("group") == "kernels"]
    print(f"{'kernel':22s} {'dtype':9s} {'ms':>9s} {'floor ms':>9s} {'of floor':>9s}")
    for r in rows:
        print(f"{r['name']:22s} {r['dtype']:9s} {r['median_ms']:9.4f} {r['floor_ms']:9.4f} {r['fraction_of_floor']:9.0%}")


def plot_kernels(doc, ax):
    env = doc["environment"]
    rows = {(r["name"], r["dtype"]): r for r in doc["records"] if r.get("group") == "kernels"}
    width = 0.2
    for i, dtype in enumerate(DTYPES):
        values = [rows[(k, dtype)]["fraction_of_floor"] * 100 for k in KERNELS]
        bars = ax.bar([x + (i - 1.5) * width for x in range(len(KERNELS))], values, width, label=dtype)
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_xticks(range(len(KERNELS)), [k.replace("backward ", "bwd ") for k in KERNELS])
    ax.set_ylabel("% of the bandwidth floor (higher is better)")
    ax.set_ylim(0, 130)
    ax.set_title(f"{env['device_name']}\\nN = {env['N']}, F = {env['F']}; "
                 f"copy bandwidth {env['bandwidth_Bps'] / 1e9:.0f} GB/s", fontsize=10)
    ax.legend(fontsize=8, ncol=4, loc="upper center")


if gpu:
    table(gpu)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    plot_kernels(gpu, ax)
    ax.axhline(85, color="grey", ls=":", lw=1)
    ax.axhline(70, color="grey", ls="--", lw=1)
    fig.tight_layout()
    if not QUICK:
        FIGURES.mkdir(exist_ok=True)
        fig.savefig(FIGURES / "04_backward_kernels_gpu.png", dpi=120)
    plt.show()"""),
    new_code_cell("""if cpu:
    table(cpu)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    plot_kernels(cpu, ax)
    fig.tight_layout()
    if not QUICK:
        fig.savefig(FIGURES / "04_backward_kernels_cpu.png", dpi=120)
    plt.show()"""),
    new_markdown_cell("""On the CPU, most of `grad_feats`'s time is not the kernel: a fresh 64 MiB output is new
pages from the operating system, and the first write to each page faults. The benchmark times
writing into an existing tensor of that size and allocating one before writing it:"""),
    new_code_cell("""for doc in (gpu, cpu):
    for r in (doc or {}).get("records", []):
        if r.get("group") == "allocation":
            print(f"{doc['environment']['device_name']:28s} {r['name']:42s} {r['median_ms']:8.3f} ms")"""),
    new_markdown_cell("""## The points gradient: a fixed-order reduction against atomicAdd

`points_grad_atomic` runs the same backward kernel (same loads, same weights, same partial sums per
thread) with another last step: every thread `atomicAdd`s its partial sum, or each warp (each row, when
rows are shorter than a warp) reduces with shuffles and its first lane adds once. The chapter's kernel
reduces in a fixed order (shuffles, then shared memory for rows of several warps) and writes once. The last column counts how many of 9 reruns gave bit-identical results to the first."""),
    new_code_cell("""if gpu:
    print(f"{'version':36s} {'dtype':8s} {'N, F':>12s} {'ms':>8s} {'of floor':>9s} {'identical reruns':>17s}")
    for r in gpu["records"]:
        if r.get("group") == "reduction":
            size = f"{r.get('N', '?')}, {r.get('F', '?')}"
            print(f"{r['name']:36s} {r['dtype']:8s} {size:>12s} {r['median_ms']:8.3f} {r['fraction_of_floor']:9.0%} "
                  f"{str(r.get('bitwise_identical_reruns', '-')):>13s} of 9")"""),
    new_markdown_cell("""## Against autograd of the PyTorch formula

The same gradients from `torch.autograd.grad` of `04_backward/reference.py` (chapter 03's
formulation: the (N, 8) corner weights, then one weighted sum), eager and through `torch.compile`, float32. *forward+backward* runs the op and
both gradients; *backward* keeps one forward graph and times the backward pass alone."""),
    new_code_cell("""def plot_vs_autograd(doc, ax):
    env = doc["environment"]
    rows = [r for r in doc["records"] if r.get("group") == "vs_autograd" and "median_ms" in r]
    names = [r["name"] for r in rows]
    ms = [r["median_ms"] for r in rows]
    colors = ["tab:green" if n.startswith("ours") else "tab:blue" if n.startswith("eager") else "tab:orange" for n in names]
    bars = ax.barh(names, ms, color=colors)
    ax.bar_label(bars, fmt="%.3g ms", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("median time per call, ms (lower is better)")
    ax.set_title(f"{env['device_name']}, float32, N = {env['N']}, F = {env['F']}", fontsize=10)
    for r in doc["records"]:
        if r.get("group") == "vs_autograd" and "error" in r:
            print("not timed:", r["name"], "-", r["error"][:200])


docs = [d for d in (gpu, cpu) if d]
if docs:
    fig, axes = plt.subplots(len(docs), 1, figsize=(8, 3.2 * len(docs)), squeeze=False)
    for doc, ax in zip(docs, axes[:, 0]):
        plot_vs_autograd(doc, ax)
    fig.tight_layout()
    if not QUICK:
        fig.savefig(FIGURES / "04_backward_vs_autograd.png", dpi=120)
    plt.show()"""),
    new_markdown_cell("""## GELU, the elementwise warm-up

Forward reads x and writes the result (2 × the tensor's bytes); backward reads `grad_out` and x and
writes the gradient (3 ×). Ours against PyTorch's own kernels (`F.gelu`, `aten.gelu_backward`)."""),
    new_code_cell("""def plot_gelu(doc, ax):
    env = doc["environment"]
    rows = {(r["name"], r["dtype"]): r for r in doc["records"] if r.get("group") == "gelu"}
    names = ["gelu forward (ours)", "gelu forward (F.gelu)", "gelu backward (ours)", "gelu backward (aten)"]
    width = 0.2
    for i, name in enumerate(names):
        values = [rows[(name, d)]["fraction_of_floor"] * 100 for d in DTYPES]
        bars = ax.bar([x + (i - 1.5) * width for x in range(len(DTYPES))], values, width, label=name)
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_xticks(range(len(DTYPES)), DTYPES)
    ax.set_ylabel("% of the bandwidth floor")
    ax.set_ylim(0, 130)
    ax.set_title(f"GELU on {env['device_name']}, {env['gelu_numel']:,} elements", fontsize=10)
    ax.legend(fontsize=8, ncol=2, loc="upper center")


if docs:
    fig, axes = plt.subplots(1, len(docs), figsize=(6.5 * len(docs), 4), squeeze=False)
    for doc, ax in zip(docs, axes[0]):
        plot_gelu(doc, ax)
    fig.tight_layout()
    if not QUICK:
        fig.savefig(FIGURES / "04_gelu.png", dpi=120)
    plt.show()"""),
    new_markdown_cell("""## The pipeline at tiny sizes (only with COURSE_QUICK=1)

Builds the chapter on this machine and runs the benchmark with `--quick` into a temporary file:
nothing in `results/` or `figures/` changes."""),
    new_code_cell("""if QUICK:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "quick.json"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        subprocess.run([sys.executable, str(ROOT / "04_backward" / "bench.py"), "--quick", "--out", str(out)],
                       check=True, env=env, cwd=ROOT)
        quick = json.loads(out.read_text())
        table(quick)
        fig, ax = plt.subplots(figsize=(8, 4))
        plot_kernels(quick, ax)
        plt.show()"""),
]

nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
path = ROOT / "notebooks" / "04_backward.ipynb"
path.parent.mkdir(exist_ok=True)
nbformat.write(nb, path)
print(f"wrote {path}")
