"""Chapter 03 profile: where the time of one call goes, recorded so that a reader without a GPU can read it.

    python 03_validate/record_profiles.py                 # GPU if visible, else CPU
    python 03_validate/record_profiles.py --device cpu  # one thread (--threads N for more)
    python 03_validate/record_profiles.py --no-ncu        # skip Nsight Compute

Writes results/03_validate_profile/<cuda|cpu>/ (or --out DIR):

    summary.json      the machine, and for each case (function, N, F, float32) one call's host time,
                      device time and kernel count (profiling.profile_call; the median of 5 profiles),
                      plus, on a GPU where ncu ran, its metrics for one launch of each mapping
    trace.json.gz     torch.profiler's Chrome trace of 3 calls of each case (open it in ui.perfetto.dev)
    kernels.csv       that profile's key_averages: one row per operator, runtime call or kernel name
    key_averages.txt  the same table as torch prints it
    ncu.csv           Nsight Compute's CSV for one launch of each mapping (GPU, when ncu is on PATH)

`--ncu-target` is the small program that ncu runs: each mapping once at N=65536, F=256.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# Run as a script, this folder is first on sys.path, and this file would stand in for the standard
# library's `profile` module (which cProfile, and so torch, may import): take the folder off first.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: coursekit is in the course root
from coursekit import ROOT, timing  # noqa: E402
from coursekit.build import build, load_python  # noqa: E402

HERE = Path(__file__).resolve().parent
MAPPINGS = {"forward": "forward_coalesced", "forward_naive": "forward_naive", "forward_vectorized": "forward_vectorized"}
NCU_SIZE = (65536, 256)  # N, F: the lesson's target point (section 5 and APPENDIX_profiling.md)
# What ncu collects, one launch of each mapping: the time, DRAM traffic and throughput, the L1 sectors
# per global load/store request, and occupancy (achieved against the most warps an SM could hold).
NCU_METRICS = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__registers_per_thread",
]


def cases(device: str) -> list[tuple[str, int, int]]:
    """(function, N, F): a small and a large call of `forward`, the naive mapping at the large size,
    and the eager reference (many small kernels) at the small size."""
    small, large = ((1024, 256), (131072, 256)) if device == "cuda" else ((256, 64), (8192, 128))
    return [("forward", *small), ("forward", *large), ("forward_naive", *large), ("reference", *small)]


def inputs(N: int, F: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return torch.randn(N, 8, F, device=device), torch.rand(N, 3, device=device) * 2 - 1


def ncu_target() -> None:
    """What ncu profiles: one launch of each mapping at NCU_SIZE, float32, after nothing else."""
    ext = build(HERE)
    feats, points = inputs(*NCU_SIZE, "cuda")
    for name in MAPPINGS:
        getattr(ext, name)(feats, points)
    torch.cuda.synchronize()


def ncu_command(csv_path: Path) -> list[str]:
    """The Nsight Compute command line: the fixed metrics, the three kernels, CSV out."""
    return ["ncu", "--metrics", ",".join(NCU_METRICS), "--clock-control", "none",
            "-k", "regex:forward_(coalesced|naive|vectorized)", "--csv", "--log-file", str(csv_path),
            sys.executable, str(Path(__file__).resolve()), "--ncu-target"]


def read_ncu(csv_path: Path) -> list[dict]:
    """ncu's CSV (one row per kernel and metric) as one dict per kernel: name and metric values."""
    text = csv_path.read_text()
    start = text.find('"ID"')  # ncu may print its own lines (==PROF== ...) before the table
    kernels: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        name = row["Kernel Name"]
        short = next((k for k, v in MAPPINGS.items() if v in name), name)
        entry = kernels.setdefault(row["ID"], {"kernel": short, "name": name})
        value = row["Metric Value"].replace(",", "")
        try:
            entry[row["Metric Name"]] = float(value)
        except ValueError:
            entry[row["Metric Name"]] = value
        entry.setdefault("units", {})[row["Metric Name"]] = row["Metric Unit"]
    out = []
    for entry in kernels.values():
        ld, ld_req = entry.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"), entry.get(
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
        if isinstance(ld, float) and isinstance(ld_req, float) and ld_req:
            entry["sectors_per_load_request"] = ld / ld_req
        st, st_req = entry.get("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"), entry.get(
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")
        if isinstance(st, float) and isinstance(st_req, float) and st_req:
            entry["sectors_per_store_request"] = st / st_req
        out.append(entry)
    return out


def run_ncu(out: Path) -> list[dict] | str:
    """Run ncu on --ncu-target; the per-kernel metrics, or why there are none."""
    if shutil.which("ncu") is None:
        return "ncu is not on PATH"
    csv_path = out / "ncu.csv"
    cmd = ncu_command(csv_path)
    print(" ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    if proc.returncode != 0 or not csv_path.is_file():
        return f"ncu failed ({proc.returncode}): {(proc.stdout + proc.stderr)[-500:]}"
    return read_ncu(csv_path)


def key_average_rows(prof) -> list[dict]:
    rows = []
    for a in prof.key_averages():
        rows.append({"name": a.key, "calls": a.count,
                     "self_cpu_us": round(a.self_cpu_time_total, 3), "cpu_total_us": round(a.cpu_time_total, 3),
                     "self_device_us": round(getattr(a, "self_device_time_total", 0.0), 3),
                     "device_total_us": round(getattr(a, "device_time_total", 0.0), 3)})
    return sorted(rows, key=lambda r: (-r["self_device_us"], -r["self_cpu_us"]))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", help="output folder (default results/03_validate_profile/<device>)")
    ap.add_argument("--no-ncu", action="store_true", help="do not run Nsight Compute")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch.set_num_threads on the CPU (default 1: on a busy machine a thread pool waits for "
                         "its slowest thread, and small ops take milliseconds)")
    ap.add_argument("--ncu-target", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ncu_target:
        return ncu_target()
    device = args.device
    if device == "cpu":
        torch.set_num_threads(args.threads)
    out = Path(args.out or ROOT / "results" / "03_validate_profile" / device)
    out.mkdir(parents=True, exist_ok=True)
    ext = build(HERE)
    reference = load_python(HERE, "reference")
    profiling = load_python(HERE, "profiling")
    functions = {"reference": reference.trilinear, **{name: getattr(ext, name) for name in MAPPINGS}}

    # 1. One call of each case through profile_call: the median of 5 profiles of one call each.
    records = []
    calls = {}
    for name, N, F in cases(device):
        feats, points = inputs(N, F, device)
        fn = functions[name]
        calls[(name, N, F)] = (lambda fn=fn, feats=feats, points=points: fn(feats, points))
        runs = [profiling.profile_call(calls[(name, N, F)], device, warmup=3) for _ in range(5)]
        host, dev = statistics.median(r.host_us for r in runs), statistics.median(r.device_us for r in runs)
        kernels = sorted({r.kernels for r in runs})
        records.append({"name": name, "N": N, "F": F, "dtype": "float32", "host_us": round(host, 2),
                        "device_us": round(dev, 2), "kernels": kernels[0] if len(kernels) == 1 else kernels,
                        "host_over_device": round(host / dev, 2) if dev else None,
                        "bound": ("host" if host > dev else "device") if device == "cuda" else None})
        print(f"{name:19s} N={N:<7d} F={F:<4d} host {host:9.1f} µs  device {dev:9.1f} µs  kernels {kernels}")

    # 2. A trace of 3 calls of each case, each call a labelled range, and its key_averages table.
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    for call in calls.values():
        call()
    timing.sync(device)
    with profile(activities=activities, record_shapes=True) as prof:
        for (name, N, F), call in calls.items():
            for i in range(3):
                with record_function(f"{name} N={N} F={F} #{i}"):
                    call()
            timing.sync(device)
    with tempfile.TemporaryDirectory() as folder:
        raw = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(raw))
        with open(out / "trace.json.gz", "wb") as f, gzip.GzipFile("trace.json", "wb", fileobj=f, mtime=0) as z:
            z.write(raw.read_bytes())
    rows = key_average_rows(prof)
    with open(out / "kernels.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    sort_by = "self_cuda_time_total" if device == "cuda" else "self_cpu_time_total"
    (out / "key_averages.txt").write_text(prof.key_averages().table(sort_by=sort_by, row_limit=25) + "\n")

    # 3. Nsight Compute on the three mappings.
    doc = {"environment": timing.environment(device), "script": "03_validate/record_profiles.py",
           "method": "profiling.profile_call, warmup=3, median of 5 profiles of one call; float32",
           "records": records}
    if device == "cuda" and not args.no_ncu:
        ncu = run_ncu(out)
        if isinstance(ncu, str):
            doc["ncu_error"] = ncu
            print(ncu)
        else:
            command = " ".join(ncu_command(Path("ncu.csv"))).replace(sys.executable, "python")
            doc["ncu"] = {"command": command.replace(str(Path(__file__).resolve()), "03_validate/record_profiles.py"),
                          "N": NCU_SIZE[0], "F": NCU_SIZE[1], "dtype": "float32", "kernels": ncu}
            for k in ncu:
                print(f"ncu {k['kernel']:19s} " + ", ".join(f"{m}={k.get(m)}" for m in (
                    "gpu__time_duration.sum", "sectors_per_load_request", "dram__bytes_read.sum",
                    "sm__warps_active.avg.pct_of_peak_sustained_active")))
    (out / "summary.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
