"""How long a regrade takes after an edit: results/regrade_times.json.

    python -m coursekit.regrade_timing            # measure, print
    python -m coursekit.regrade_timing --write    # and write results/regrade_times.json

For each case, a workspace with every exercise solved is graded once (the composite build is made),
then the exercise's region in the named file is edited (a comment line changes) and the exercise
is graded again, timed: the build (a header change recompiles every file that includes it), the
GPU-free judge's build where it grades the exercise, the tests. What recompiled is listed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import time
from pathlib import Path

from . import ROOT, build, chapters, emulate, grading, selfcheck

# (chapter, exercise, the file edited): the header exercises, whose edit recompiles most
CASES = [("04", "gelu-derivative", "csrc/gelu.h"), ("06", "gather-backward", "csrc/upsample.h")]
WHERE = ROOT / ".build" / "regrade-timing"


def _edit(path: Path, name: str, k: int) -> None:
    """Put the comment `edit k` as the first line of exercise `name`'s first region in `path`."""
    comment = "#" if path.suffix == ".py" else "//"
    lines = path.read_text().splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if f"BEGIN EXERCISE {name}" in ln)
    if lines[start + 1].strip().startswith(f"{comment} edit "):
        del lines[start + 1]
    lines.insert(start + 1, f"{comment} edit {k} {time.time_ns()}\n")  # new text: no cached verdict
    path.write_text("".join(lines))


def _objects(folders: list[Path]) -> dict[str, float]:
    return {f"{d.name}/{p.relative_to(d)}": p.stat().st_mtime for d in folders if d.is_dir() for p in d.rglob("*.o")}


def measure(number: str, name: str, rel: str) -> dict:
    chapter = chapters.find(number)
    ws = selfcheck.solved_workspace(chapter, where=WHERE / number)
    stages: dict[str, float] = {}

    def timed(key, fn):
        def run(*args, **kwargs):
            start = time.time()
            try:
                return fn(*args, **kwargs)
            finally:
                stages[key] = stages.get(key, 0.0) + time.time() - start
        return run

    saved = grading.build_in_subprocess, grading.emulated_build_in_subprocess, grading.run_tests
    grading.build_in_subprocess = timed("build", saved[0])
    grading.emulated_build_in_subprocess = timed("judge_build", saved[1])
    grading.run_tests = timed("tests", saved[2])
    try:
        _edit(ws / rel, name, 0)
        first = grading.grade(chapter, ws, only=[name])[0]  # the composite's first build: not timed
        stages.clear()
        # the composite's CPU build (grading.grade's folder for this workspace) and the judge's builds
        composite = grading.GRADE_ROOT / hashlib.sha1(str(ws.resolve()).encode()).hexdigest()[:8] / chapter.dirname
        tag_dirs = [build.build_dir(composite, False)]
        if grading._emulated(chapter, {rel: None}):  # the judge compiles this exercise's file too
            tag_dirs += list(emulate.BUILD.glob(f"{number}-*"))
        before = _objects(tag_dirs)
        _edit(ws / rel, name, 1)
        start = time.time()
        verdict = grading.grade(chapter, ws, only=[name])[0]
        total = time.time() - start
    finally:
        grading.build_in_subprocess, grading.emulated_build_in_subprocess, grading.run_tests = saved
    after = _objects(tag_dirs)
    recompiled = sorted(k for k, t in after.items() if before.get(k) != t)
    return {"chapter": chapter.dirname, "exercise": name, "edited": rel, "seconds": round(total, 1),
            "stages_seconds": {k: round(v, 1) for k, v in stages.items()}, "recompiled": recompiled,
            "verdict": verdict.status, "summary": verdict.summary, "first_grade": first.status}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="time a regrade after an edit of a header exercise")
    parser.add_argument("--write", action="store_true", help="write results/regrade_times.json")
    args = parser.parse_args(argv)
    import torch

    load_before = os.getloadavg()[0]
    cases = []
    for number, name, rel in CASES:
        case = measure(number, name, rel)
        print(json.dumps(case), flush=True)
        cases.append(case)
    doc = {"what": "./course grade NN EXERCISE after an edit of the exercise's header, the composite built before; "
                   "written by python -m coursekit.regrade_timing --write",
           "machine": {"cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                       "gpu": torch.cuda.is_available(), "load_average_before": round(load_before, 1),
                       "load_average_after": round(os.getloadavg()[0], 1)},
           "torch": torch.__version__, "cases": cases}
    if args.write:
        (ROOT / "results" / "regrade_times.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
