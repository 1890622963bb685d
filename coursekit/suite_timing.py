"""How long the README's two commands take on this machine, from a clean clone.

Clones the repository's HEAD into a temporary folder that reuses this checkout's .venv (the
packages are installed once per machine; the README's first call installs them), then times
`./course run`, `./course test` (the chapters' first builds are in the first one; the GPU-free
judge's builds and the two packaging venvs in the first test run) and `./course test` again
(everything built). Writes results/suite_times.json:

    python -m coursekit.suite_timing --write      # about 25 minutes on a 2-core machine
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import ROOT

OUT = ROOT / "results" / "suite_times.json"
STEPS = [("./course run", ["./course", "run"]), ("./course test (first)", ["./course", "test", "-q"]),
         ("./course test (again)", ["./course", "test", "-q"])]


def measure() -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="course-timing-"))
    clone = work / "course"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    (clone / ".venv").symlink_to(ROOT / ".venv")
    rows = []
    try:
        for name, cmd in STEPS:
            t0 = time.time()
            proc = subprocess.run(cmd, cwd=clone, capture_output=True, text=True)
            seconds = time.time() - t0
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
            rows.append({"step": name, "seconds": round(seconds), "exit_code": proc.returncode, "last_line": tail[0]})
            print(f"{name:24s} {seconds:6.0f} s  exit {proc.returncode}  {tail[0]}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    import torch

    return {"script": "coursekit/suite_timing.py", "commit": commit, "torch": torch.__version__, "machine": {
                "cpu_count": os.cpu_count(), "processor": platform.machine(), "gpu": torch.cuda.is_available()},
            "date": time.strftime("%Y-%m-%d"), "records": rows}


def main(argv: list[str]) -> int:
    doc = measure()
    if "--write" in argv:
        OUT.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0 if all(r["exit_code"] == 0 for r in doc["records"]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
