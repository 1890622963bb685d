"""Run chapter 04's seeded bugs through the course's two debuggers and keep what they say.

Five small CUDA programs in this folder, each the chapter's reduction over f (warp shuffles,
then shared memory across the warps) with one bug, and the same program fixed (-DFIXED); their
host half (the data, the launch, the check) is one header, row_dot_main.cuh:

    oob_read.cu            a read past the end of an array           compute-sanitizer memcheck
    race.cu                a missing barrier: a race on shared memory compute-sanitizer racecheck
    divergent_barrier.cu   a __syncthreads() not every thread reaches compute-sanitizer synccheck
    uninit_shared.cu       a read of shared memory no thread wrote    (initcheck: global memory only)
    uninit_global.cu       atomics into memory nobody zeroed          compute-sanitizer initcheck

    python 04_backward/debugging/run.py          # the GPU-free judge, on the CPU (any machine)
    python 04_backward/debugging/run.py --gpu    # nvcc and compute-sanitizer, on a CUDA GPU
    python 04_backward/debugging/run.py --gpu --cuda-gdb   # and a cuda-gdb session on race.cu

Without --gpu it compiles each program for the CPU with the GPU-free judge (coursekit/emulate.py,
build_program) and runs it with two thread orders. --gpu compiles it with nvcc -lineinfo and
runs it plainly, then under compute-sanitizer's matching tool (buggy and fixed); with
--cuda-gdb it also records a short cuda-gdb session on race.cu (built with -G). Both write
into results/04_backward_debugging/: one text file per bug and debugger (the report, trimmed:
the judge's message; the sanitizer's first error and its summary) and summary.json (each
part replaces only its own key, "emulated" or "sanitizer").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from anywhere: coursekit is in the course root
from coursekit import ROOT  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = ROOT / "results" / "04_backward_debugging"
# (program, compute-sanitizer tool, the bug in a few words)
BUGS = [
    ("oob_read", "memcheck", "the loop over f runs while f <= F: one read past the end of g and x"),
    ("race", "racecheck", "no __syncthreads() between the warps' stores to shared memory and thread 0's loads"),
    ("divergent_barrier", "synccheck", "__syncthreads() inside `if (lane == 0)`: 31 threads of each warp never reach it"),
    ("uninit_shared", "initcheck", "thread 0 adds 8 shared slots; the 128-thread block wrote 4"),
    ("uninit_global", "initcheck", "atomicAdd into out, which nothing set to zero"),
]
# cuda-gdb on race.cu: stop in the kernel, list it, move to a thread of another block, print
# its shared memory and locals, move to a thread of another warp.
GDB_COMMANDS = """set pagination off
set cuda break_on_launch none
break row_dot
run
info cuda kernels
break race.cu:44
continue
cuda block (2,0,0) thread (0,0,0)
print n
print partial
cuda thread (32,0,0)
print warp
print lane
print sum
delete
continue
"""
SEEDS = ("1", "2")  # two thread orders for the GPU-free judge
TIMEOUT = 60  # seconds for one run: a barrier error may hang a GPU


def _rel(text: str, build: Path | None = None) -> str:
    """Paths in a report, relative to the course root (and the build folder as `.`)."""
    if build is not None:
        text = text.replace(str(build) + "/", "./")
    return text.replace(str(ROOT) + "/", "")


def _update_summary(key: str, value: dict) -> None:
    path = OUT / "summary.json"
    summary = json.loads(path.read_text()) if path.is_file() else {}
    summary["script"] = "04_backward/debugging/run.py"
    summary[key] = value
    path.write_text(json.dumps(summary, indent=1) + "\n")


# ------------------------------------------------------------------------------- the GPU-free judge

def _judge_verdict(runs: list[dict]) -> str:
    """What the judge's runs of one program say, in one line."""
    for r in runs:
        if r["exit"] == 99:
            return "judge error: " + r["stderr"].removeprefix("GPU-free judge: ").splitlines()[0]
    outs = {r["stdout"] for r in runs}
    if any(r["exit"] != 0 for r in runs):
        return "wrong results" + (", different for the two thread orders" if len(outs) > 1 else "")
    return "clean"


def run_emulated() -> dict:
    from coursekit import emulate

    part = {"debugger": "the GPU-free judge (coursekit/emulate.py build_program)", "seeds": list(SEEDS),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "bugs": {}}
    for name, tool, what in BUGS:
        entry = {"file": f"04_backward/debugging/{name}.cu", "bug": what, "gpu_tool": tool}
        lines = [f"# {name}.cu under the GPU-free judge (04_backward/debugging/run.py): {what}", ""]
        for label, defines in (("buggy", ()), ("fixed", ("FIXED",))):
            exe = emulate.build_program(HERE / f"{name}.cu", defines)
            runs = []
            for seed in SEEDS:
                proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=TIMEOUT,
                                      env=dict(os.environ, COURSE_EMU_SEED=seed))
                runs.append({"seed": seed, "exit": proc.returncode, "stdout": _rel(proc.stdout.strip()),
                             "stderr": _rel(proc.stderr.strip())})
                lines += [f"$ COURSE_EMU_SEED={seed} ./{name}" + (" (-DFIXED)" if defines else ""),
                          *([proc.stdout.strip()] if proc.stdout.strip() else []),
                          *([_rel(proc.stderr.strip())] if proc.stderr.strip() else []),
                          f"[exit status {proc.returncode}]", ""]
            entry[label] = {"verdict": _judge_verdict(runs), "runs": runs}
            print(f"[emulated] {name:18s} {label}: {entry[label]['verdict']}", flush=True)
        (OUT / f"{name}.emulated.txt").write_text("\n".join(lines))
        part["bugs"][name] = entry
    return part


# --------------------------------------------------------------------------- nvcc and compute-sanitizer

def _trim(report: str, build: Path) -> str:
    """A compute-sanitizer report, trimmed: the first error (its block of ========= lines, host
    backtrace left out) and the summary line."""
    lines = [_rel(line, build) for line in report.splitlines()]
    tagged = [line for line in lines if line.startswith("=========")]
    first, block = None, []
    for i, line in enumerate(tagged):
        if first is None and re.search(r"(Invalid|Error|Race|Uninitialized|Barrier|hazard|Divergent)", line) \
                and "SUMMARY" not in line and "COMPUTE-SANITIZER" not in line:
            first = i
        if first is not None and i >= first:
            if i > first and (line.strip() == "=========" or re.match(r"========= (Invalid|Error|Warning|Race|"
                                                                      r"Uninitialized|Barrier)", line)):
                break
            block.append(line)
    block = [b for b in block if "Host Frame" not in b and not re.match(r"=========\s+#\d+ ", b)
             and "Saved host backtrace" not in b]
    summary = [line for line in tagged if "SUMMARY" in line]
    return "\n".join(block[:30] + summary[-1:])


def _tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "not found"
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return lines[-1] if lines else "not found"


def run_sanitizer(with_gdb: bool = False) -> dict:
    from coursekit import toolkit

    sanitizer = toolkit.compute_sanitizer()
    kit = toolkit.find_toolkit()
    if sanitizer is None or kit is None:
        raise SystemExit("--gpu needs nvcc and compute-sanitizer (the CUDA toolkit); none found")
    part = {"debugger": "compute-sanitizer", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "compute_sanitizer": _tool_version([sanitizer, "--version"]),
            "nvcc": _tool_version([str(kit.nvcc), "--version"]),
            "device": _tool_version(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]),
            "nvcc_flags": "-lineinfo -arch=native", "bugs": {}}
    with tempfile.TemporaryDirectory(prefix="course_debugging_") as tmp:
        build = Path(tmp)
        for name, tool, what in BUGS:
            entry = {"file": f"04_backward/debugging/{name}.cu", "bug": what, "tool": tool}
            text = [f"# {name}.cu on {part['device']}, compute-sanitizer --tool {tool} "
                    f"(04_backward/debugging/run.py --gpu): {what}", f"# {part['compute_sanitizer']}", ""]
            for label, defines in (("buggy", []), ("fixed", ["-DFIXED"])):
                exe = build / (name + ("_fixed" if defines else ""))
                subprocess.run([str(kit.nvcc), "-lineinfo", "-arch=native", *defines, "-o", str(exe),
                                str(HERE / f"{name}.cu")], check=True, cwd=HERE)
                result = {}
                for run_label, cmd in (("plain", [str(exe)]),
                                       ("sanitizer", [sanitizer, "--tool", tool, "--error-exitcode", "99",
                                                      "--print-limit", "10", str(exe)])):
                    try:
                        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=build)
                        code, out = proc.returncode, proc.stdout + proc.stderr
                    except subprocess.TimeoutExpired as e:  # a barrier error may hang a GPU
                        code = "timeout"
                        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
                    program = "\n".join(line for line in out.splitlines() if line.startswith("row_dot"))
                    result[run_label] = {"exit": code, "program_says": program.splitlines()[-1:] or [""]}
                    if run_label == "sanitizer":
                        trimmed = _trim(out, build)
                        result[run_label]["report"] = trimmed
                        text += [f"$ compute-sanitizer --tool {tool} --error-exitcode 99 ./{exe.name}", trimmed,
                                 f"[exit status {code}]", ""]
                    else:
                        text += [f"$ ./{exe.name}", program or "(no output)", f"[exit status {code}]", ""]
                entry[label] = result
                print(f"[sanitizer] {name:18s} {label}: plain exit {result['plain']['exit']}, {tool} exit "
                      f"{result['sanitizer']['exit']}", flush=True)
            (OUT / f"{name}.{tool}.txt").write_text("\n".join(text))
            part["bugs"][name] = entry
        gdb = kit.home / "bin" / "cuda-gdb"
        if with_gdb and gdb.is_file():
            part["cuda_gdb"] = _cuda_gdb_session(gdb, kit.nvcc, build)
    return part


def _cuda_gdb_session(gdb: Path, nvcc: Path, build: Path) -> dict:
    """race.cu built with -G (device debug information), run under cuda-gdb with GDB_COMMANDS."""
    exe = build / "race_debug"
    subprocess.run([str(nvcc), "-G", "-g", "-arch=native", "-o", str(exe), str(HERE / "race.cu")], check=True, cwd=HERE)
    (build / "commands.gdb").write_text(GDB_COMMANDS)
    try:
        proc = subprocess.run([str(gdb), "-batch", "-x", str(build / "commands.gdb"), str(exe)], capture_output=True,
                              text=True, timeout=TIMEOUT, cwd=build, stdin=subprocess.DEVNULL)
        code, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        code, out = "timeout", ""
    lines = [_rel(line, build) for line in out.splitlines()
             if line.strip() and not line.startswith(("[New Thread", "[Thread debugging", "Using host libthread",
                                                      "[Detaching", "[Inferior"))]
    text = ["# race.cu (nvcc -G -g) under cuda-gdb -batch (04_backward/debugging/run.py --gpu); the commands:",
            *("#   " + c for c in GDB_COMMANDS.strip().splitlines()), "", *lines, f"[exit status {code}]", ""]
    (OUT / "race.cuda-gdb.txt").write_text("\n".join(text))
    print(f"[cuda-gdb] race: exit {code}", flush=True)
    return {"file": "04_backward/debugging/race.cu", "exit": code, "transcript": "race.cuda-gdb.txt"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", action="store_true", help="nvcc and compute-sanitizer (needs a CUDA GPU)")
    parser.add_argument("--cuda-gdb", action="store_true", help="with --gpu: a cuda-gdb session on race.cu too")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.gpu:
        _update_summary("sanitizer", run_sanitizer(args.cuda_gdb))
    else:
        _update_summary("emulated", run_emulated())
    print(f"wrote {OUT.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
