"""`./course gpu-report`: the whole course, end to end, on a machine with a CUDA GPU.

Steps (each one logged to results/gpu_report/<step>.log, summarised in
results/gpu_report.json with the device, driver, torch and CUDA versions):

1. doctor, then build every chapter with CUDA and run its demo;
2. the whole test suite with CUDA (grader self-checks included, unless --skip-graders);
3. every CUDA kernel (coursekit/kernel_tour.py) under compute-sanitizer: memcheck, racecheck,
   initcheck and synccheck (PyTorch's caching allocator is switched off so that
   memcheck sees each tensor as its own allocation);
4. every chapter's benchmark (NN_chapter/bench.py; each writes results/<chapter>_cuda.json);
5. the notebooks, re-executed where nbclient is installed (they plot results/).

Exit status 0 only if every step passed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

from . import ROOT, chapters, toolkit

RESULTS = ROOT / "results"
LOGS = RESULTS / "gpu_report"
SANITIZER_TOOLS = ["memcheck", "racecheck", "initcheck", "synccheck"]


def _step(name: str, cmd: list[str], env: dict | None = None, timeout: float | None = None) -> dict:
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{name}.log"
    print(f"[gpu-report] {name}: {' '.join(cmd)}", flush=True)
    t0 = time.time()
    with log.open("w") as f:
        try:
            code = subprocess.run(cmd, cwd=ROOT, env=env or os.environ.copy(), stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    seconds = round(time.time() - t0, 1)
    tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
    print(f"[gpu-report] {name}: exit {code} in {seconds} s  | {tail[0][:160]}", flush=True)
    return {"step": name, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), "exit": code, "seconds": seconds, "last_line": tail[0][:300], "log": str(log.relative_to(ROOT))}


def _pytest_summary(text: str) -> str:
    lines = [l for l in text.splitlines() if re.search(r"\b(passed|failed|error|skipped)\b", l) and " in " in l]
    return lines[-1].strip("= ") if lines else ""


def _sanitizer_summary(text: str) -> str:
    found = re.findall(r"========= (ERROR SUMMARY: \d+ errors?|RACECHECK SUMMARY: .*)", text)
    return found[-1] if found else "no summary (did the run start?)"


def run(skip_graders: bool = False, skip_sanitizer: bool = False, only: list[str] | None = None,
        sanitizer_timeout: float | None = None) -> int:
    import torch

    from . import timing

    if not torch.cuda.is_available():
        print("gpu-report needs a CUDA GPU; none is visible (./course doctor says more)", file=sys.stderr)
        return 1
    py = sys.executable
    numbers = {c.number for c in chapters.CHAPTERS}
    only_chapters = {x for x in only or [] if x in numbers}
    only_steps = {x for x in only or [] if x not in numbers}
    present = [c for c in chapters.existing() if not only_chapters or c.number in only_chapters]
    steps = []
    want = lambda name: not only_steps or name in only_steps  # noqa: E731

    steps.append(_step("doctor", [py, "-m", "coursekit", "doctor"]))
    if want("run"):
        steps.append(_step("run", [py, "-m", "coursekit", "run"]))
    if want("test"):
        marker = ["-m", "not graders"] if skip_graders else []
        files = [str(c.test_file) for c in present] if only_chapters else []
        steps.append(_step("test", [py, "-m", "pytest", "-q", "-ra", *marker, *files]))
        steps[-1]["summary"] = _pytest_summary((ROOT / steps[-1]["log"]).read_text(errors="replace"))

    sanitizer = toolkit.compute_sanitizer()
    if want("sanitizer") and not skip_sanitizer and sanitizer is not None:
        # Every tensor its own allocation (toolkit.sanitizer_env), so memcheck sees an access
        # past a tensor's end. Kernels run 10-100x slower under the sanitizers, so they run
        # the kernel tour (every kernel, small odd shapes), not the suite.
        env = toolkit.sanitizer_env()
        for tool in SANITIZER_TOOLS:
            extra = ["--racecheck-report", "all"] if tool == "racecheck" else []
            cmd = [sanitizer, "--tool", tool, "--error-exitcode", "99", "--print-limit", "20", *extra,
                   py, "-m", "coursekit.kernel_tour"]
            s = _step(f"sanitizer-{tool}", cmd, env=env, timeout=sanitizer_timeout)
            text = (ROOT / s["log"]).read_text(errors="replace")
            s["summary"] = _sanitizer_summary(text)
            s["tour"] = text.strip().splitlines()[-2] if text.strip() else ""
            steps.append(s)

    if want("bench"):
        for c in present:
            bench = c.path / "bench.py"
            if bench.is_file():
                steps.append(_step(f"bench-{c.dirname}", [py, str(bench)]))  # writes results/<chapter>_cuda.json

    if want("notebooks"):
        try:
            import nbclient  # noqa: F401
            steps.append(_step("notebooks", [py, "-m", "pytest", "-q", str(ROOT / "tests" / "test_notebooks.py")]))
        except ImportError:
            steps.append({"step": "notebooks", "exit": "skipped", "last_line": "nbclient is not installed here; "
                          "run ./course test tests/test_notebooks.py where it is (the notebooks plot results/)"})

    path = RESULTS / "gpu_report.json"
    if only and path.is_file():  # a partial run updates the steps it ran, keeps the others
        done = {s["step"] for s in steps}
        steps = [s for s in json.loads(path.read_text())["steps"] if s["step"] not in done] + steps
    ok = all(s["exit"] in (0, "skipped") for s in steps)
    report = {"environment": timing.environment("cuda"), "ok": ok, "steps": steps}
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\n[gpu-report] {'all steps passed' if ok else 'SOME STEPS FAILED'}; summary in {path.relative_to(ROOT)}")
    for s in steps:
        print(f"  {s['step']:34s} {str(s['exit']):8s} {s.get('summary') or s.get('last_line', '')}"[:200])
    return 0 if ok else 1
