"""Command line of the course; `./course <command>` calls this after setting up the environment."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from . import ROOT, chapters


def _fail(message: str, code: int = 1) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def cmd_doctor(args) -> int:
    from .doctor import run_doctor

    return run_doctor()


def cmd_run(args) -> int:
    """Build every chapter and run its demo; print a summary."""
    from . import build, toolkit

    rows = []
    for chapter in chapters.existing():
        print(f"\n=== {chapter.dirname}: {chapter.title}")
        t0 = time.time()
        try:
            module = build.build(chapter.path)
        except (build.BuildError, toolkit.SetupError) as e:
            print(e)
            rows.append((chapter.dirname, "build failed", "see above"))
            continue
        built = build.describe(module)
        proc = subprocess.run([sys.executable, str(chapter.path / "demo.py")], text=True, capture_output=True)
        output = (proc.stdout + proc.stderr).rstrip()
        print("\n".join("  " + line for line in output.splitlines()))
        if proc.returncode != 0:
            rows.append((chapter.dirname, built, f"demo FAILED (exit {proc.returncode})"))
        else:
            last = output.splitlines()[-1].strip() if output else "ok"
            rows.append((chapter.dirname, built, f"{last}  [{time.time() - t0:.0f} s]"))
    print("\n=== summary")
    for name, built, result in rows:
        print(f"  {name:20s} {built:9s} {result}")
    return 0 if all("FAILED" not in r[2] and r[1] != "build failed" for r in rows) else 1


def _pytest(argv: list[str]) -> int:
    code = subprocess.call([sys.executable, "-m", "pytest", *argv], cwd=ROOT)
    if code == 5:
        print("error: pytest collected no tests; that is a failure, not a pass", file=sys.stderr)
        return 1
    return code


def cmd_test(args) -> int:
    # The grader self-check (marker `graders`) has its own command; an explicit -m wins.
    return _pytest(["-m", "not graders", *args.pytest_args])


def _prewarm_nvcc_cache(numbers: list[str] | None = None) -> None:
    """On a GPU: every part builds each chapter's CUDA code once per variant, in a folder of its own.
    With an object cache (coursekit/nvcc_cache.py) filled from the solved chapters first, optimised
    and -G (the memcheck tests), a variant compiles only the file it changes. numbers: only these
    chapters (a run of some chapters' parts)."""
    import torch

    if not torch.cuda.is_available():
        return
    os.environ.setdefault("COURSE_NVCC_CACHE", str(ROOT / ".build" / "nvcc-cache"))
    from . import grading, selfcheck

    t0 = time.time()
    builds = []
    warm = [c for c in chapters.existing() if any(v.cuda_only for v in selfcheck.variants(c))
            and (numbers is None or c.number in numbers)]
    for chapter in warm:
        if not list((chapter.path / "csrc").glob("*.cu")):
            continue
        where = ROOT / ".build" / "selfcheck" / "prewarm" / chapter.number
        folders = [selfcheck.solved_workspace(chapter, where=where)]
        # The stubs case builds each exercise's stub into the solved chapter (grading.composite): a stub
        # in a header every .cu file includes recompiles them all, twice (optimised and -G), which with
        # every part compiling at once took chapter 06's stubs case past a call's time. Its objects too.
        stubs = grading.stub_bodies(chapter)
        for name in grading.exercise_names(chapter):
            folders.append(where / f"stub-{name}" / chapter.dirname)
            grading.composite(chapter, name, stubs[name], folders[-1])
        for ws in folders:
            for debug in (False, True):  # each in a process of its own: a process loads one build of a chapter
                code = f"from coursekit import build; build.build({str(ws)!r}, cuda=True, device_debug={debug})"
                builds.append(subprocess.Popen([sys.executable, "-c", code], cwd=ROOT))
    if any(p.wait() for p in builds):
        print("[course] warning: a build to fill the nvcc object cache failed; the parts build without it", flush=True)
    print(f"[course] nvcc object cache ready ({time.time() - t0:.0f} s): {os.environ['COURSE_NVCC_CACHE']}", flush=True)
    _prewarm_verdicts([c for c in warm if _some_case_grades(c)])


def _some_case_grades(chapter) -> bool:
    """Does some case of this GPU self-check grade the chapter's exercises (a variant that changes
    code inside an exercise; its case grades the others on the solution)? A chapter whose cases
    change only code outside every exercise runs its tests as a whole, and reads no verdict."""
    from . import exercises, selfcheck

    unemulated = os.environ.get("COURSE_SELFCHECK_CUDA_ONLY") == "unemulated"
    for v in selfcheck.variants(chapter):
        if not v.cuda_only or (unemulated and selfcheck.emulated(chapter, v)):
            continue  # not a case of this run (tests/test_graders.py, _cases)
        text = (chapter.path / v.file).read_text()
        outside = text
        for r in exercises.solution_regions(text, Path(v.file)):
            outside = outside.replace("".join(r.body), "\0", 1)
        changed = text.replace(v.old, v.new, 1)
        outside_changed = changed
        for r in exercises.solution_regions(changed, Path(v.file)):
            outside_changed = outside_changed.replace("".join(r.body), "\0", 1)
        if outside == outside_changed:
            return True
    return False


def _prewarm_verdicts(warm: list, root: Path | None = None) -> None:
    """On a GPU: the verdicts of each chapter's own exercises, before the parts start. A case grades
    every exercise alone, and one that its wrong solution leaves untouched is graded on the chapter's
    own code: the same tests and verdict in every case. The grader keeps such verdicts in
    .build/grade/verdicts.json, but the parts start together and each would run those tests for its
    first case. One process per exercise, each with a folder of its own (a process merges the file
    when it ends), merged here (the PASS verdicts)."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    from . import grading, selfcheck

    marker = "cuda" if selfcheck.CUDA_TESTS_ONLY else None  # as check_variant grades the untouched ones
    t0 = time.time()
    jobs = [(c, name) for c in warm for name in grading.exercise_names(c)]
    root = root or ROOT / ".build" / "selfcheck" / "prewarm" / "grade"  # the per-exercise folders

    def run(job):
        chapter, name = job
        where = root / f"{chapter.number}-{name}"
        code = (f"from pathlib import Path; from coursekit import chapters, grading; "
                f"grading.GRADE_ROOT = Path({str(where)!r}); "
                f"grading.grade(chapters.find({chapter.number!r}), None, only=[{name!r}], marker={marker!r})")
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True)
        try:
            return json.loads((where / "verdicts.json").read_text())
        except (OSError, ValueError):
            return {}

    with ThreadPoolExecutor(max(2, (os.cpu_count() or 2) // 2)) as pool:
        merged, others = {}, []
        for (chapter, name), verdicts in zip(jobs, pool.map(run, jobs)):
            # PASS only: a solution's exercise that failed once (a timing test on a busy GPU) is graded
            # again by each case, not reported as every case's misplaced NOT YET
            passed = {key: v for key, v in verdicts.items() if v.get("status") == "PASS"}
            merged.update(passed)
            if not passed:
                got = "; ".join(f"{v.get('status')} ({v.get('summary', '')})" for v in verdicts.values()
                                if "status" in v) or "no verdict"
                others.append(f"{chapter.number} {name}: {got}")
    grading._save_cache(grading.GRADE_ROOT / "verdicts.json", merged)
    print(f"[course] verdicts of the chapters' own exercises ready ({time.time() - t0:.0f} s): {len(merged)} "
          f"of {len(jobs)}" + "".join(f"\n  graded again by each case: {o}" for o in others), flush=True)


def _pending_cases(parts: list) -> list[str]:
    """The self-check's cases of these chapters that its ledger does not record as passed under their key
    now, as tests/test_graders.py names them: the stubs' cases first (on a GPU, one per exercise, each
    running every CUDA test that grades it), then each chapter's variants, largest chapter first."""
    import re

    proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "graders", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "tests/test_graders.py"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "COURSE_SELFCHECK_PENDING": "1"})
    found = re.findall(r"::test_grader\[(.+)\]$", proc.stdout, re.M)
    if proc.returncode not in (0, 5):
        print(proc.stdout[-3000:] + proc.stderr[-3000:], flush=True)
        raise SystemExit("[course] could not list the self-check's cases")
    order = {c.number: i for i, c in enumerate(parts)}
    found = [case for case in found if case[:2] in order]
    return sorted(found, key=lambda case: (not re.match(r"\d\d-stubs(:|$)", case), order[case[:2]]))


def cmd_selfcheck(args) -> int:
    """The grader self-check. With arguments: one pytest run with them. Without: one run per
    chapter (and one for the grading machinery), a few at a time, since most of the work is
    compiling one file at a time and a machine has more than one core."""
    if args.pytest_args:
        return _pytest(["-m", "graders", *args.pytest_args])
    import re
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from .selfcheck import variants

    # Largest chapters first, so that the last part to finish is a short one.
    parts = sorted(chapters.existing(), key=lambda c: -len(variants(c)))
    # COURSE_SELFCHECK_CHAPTERS="03 06": only these chapters (a run that finishes what an earlier one left)
    only = os.environ.get("COURSE_SELFCHECK_CHAPTERS", "").replace(",", " ").split()
    if only:
        unknown = sorted(set(only) - {c.number for c in parts})
        if unknown:
            return _fail(f"COURSE_SELFCHECK_CHAPTERS: no chapter {', '.join(unknown)}")
        parts = [c for c in parts if c.number in only]
    # The grading machinery's own tests, not budgeted: first, so that it ends in time (not in a run
    # of some chapters)
    jobs = [] if only else [("grading", ["tests/test_grading.py"], {})]
    # COURSE_SELFCHECK_SHARDS=K splits each chapter's cases into K parts run side by side (each in
    # its own folder; the stubs alone in the first, which starts first): for a machine with many cores.
    # COURSE_SELFCHECK_SHARDS=each: a part for each case still to check (tests/test_graders.py), the
    # stubs first: a lent GPU's calls are shorter than the whole, and a part cut short records nothing.
    each = os.environ.get("COURSE_SELFCHECK_SHARDS") == "each"
    if each:
        cases = _pending_cases(parts)
        if not cases and not jobs:
            print("[course] grader self-check: the ledger records every case as passed under its key now", flush=True)
            return 0
        jobs += [(case, ["tests/test_graders.py"],
                  {"COURSE_SELFCHECK_CASE": case, "COURSE_SELFCHECK_DIR": str(ROOT / ".build" / "selfcheck" / f"case-{case}")})
                 for case in cases]
    else:
        shards = max(1, int(os.environ.get("COURSE_SELFCHECK_SHARDS") or 1))
        jobs += [(c.dirname + (f" part {i + 1}/{shards}" if shards > 1 else ""),
                  ["tests/test_graders.py", "-k", f"{c.number}-"], {"COURSE_SELFCHECK_SHARD": f"{i}/{shards}"})
                 for c in parts for i in range(shards)]
    budget = float(os.environ.get("COURSE_SELFCHECK_BUDGET") or 0)
    if budget and not os.environ.get("COURSE_SELFCHECK_DEADLINE"):
        os.environ["COURSE_SELFCHECK_DEADLINE"] = str(time.time() + budget)  # one deadline for every part
    workers = int(os.environ.get("COURSE_SELFCHECK_WORKERS") or 0) or max(2, (os.cpu_count() or 2) // 3)
    _prewarm_nvcc_cache([c.number for c in parts] if only else None)
    print(f"[course] grader self-check: {len(jobs)} parts, {workers} at a time", flush=True)

    deadline = float(os.environ.get("COURSE_SELFCHECK_DEADLINE") or 0)

    def run(job):
        name, argv, env = job
        t0 = time.time()
        if each and deadline and t0 > deadline and not re.match(r"\d\d-stubs(:|$)", name):
            return name, None, 0.0  # skipped as the case would skip itself (tests/test_graders.py), unstarted
        proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "graders", "-q", "-ra", "-p", "no:cacheprovider",
                               *argv], cwd=ROOT, capture_output=True, text=True, env={**os.environ, **env})
        return name, proc, time.time() - t0

    totals = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
    worst = unstarted = 0
    # Each part is reported as it ends, so a run stopped early (a machine's time limit) still
    # shows every part that finished.
    with ThreadPoolExecutor(workers) as pool:
        for future in as_completed([pool.submit(run, job) for job in jobs]):
            name, proc, seconds = future.result()
            if proc is None:
                totals["skipped"] += 1
                unstarted += 1
                continue
            out = (proc.stdout + proc.stderr).rstrip()
            last = out.splitlines()[-1] if out else ""
            for count, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)", last):
                totals["error" if word.startswith("error") else word] += int(count)
            code = 0 if proc.returncode == 5 and "deselected" in last else proc.returncode
            worst = max(worst, code)
            print(f"\n=== {name} ({seconds:.0f} s, exit {proc.returncode})", flush=True)
            print(out if code else last, flush=True)
    failed = totals["failed"] + totals["error"]
    if unstarted:
        print(f"\n{unstarted} cases not started: the time budget was spent (skipped; the ledger keeps them to check)")
    print(f"\nselfcheck: {totals['passed']} passed, {failed} failed, {totals['skipped']} skipped")
    return 1 if worst or failed or not totals["passed"] else 0


def cmd_exercise(args) -> int:
    from .exercises import ExerciseError, make_workspace

    chapter = chapters.find(args.chapter)
    try:
        dest, found = make_workspace(chapter, force=args.force)
    except ExerciseError as e:
        return _fail(str(e))
    print(f"Workspace ready: {dest.relative_to(ROOT)}  ({len({ex.name for ex in found})} exercises)")
    for ex in found:
        print(f"  {ex.name:24s} {ex.file}:{ex.line}")
    print(f"\nWrite your code between the BEGIN EXERCISE and END EXERCISE lines, then: ./course grade {chapter.number}"
          f"\nStuck? ./course hint {chapter.number} EXERCISE")
    return 0


def cmd_grade(args) -> int:
    from .exercises import ExerciseError
    from .grading import format_table, grade

    chapter = chapters.find(args.chapter)
    workspace = None if args.solution else (Path(args.workspace).resolve() if args.workspace else chapter.workspace)
    if workspace is not None and not workspace.is_dir():
        return _fail(f"no workspace at {workspace.relative_to(ROOT)}.\n  first run: ./course exercise {chapter.number}")
    shown = chapter.dirname if workspace is None else (workspace.relative_to(ROOT) if workspace.is_relative_to(ROOT) else workspace)
    print(f"Grading {shown}: each exercise alone, with the chapter's solution for the others")
    t0 = time.time()
    try:
        verdicts = grade(chapter, workspace, only=args.exercises or None,
                         compile_cuda=False if args.cpu_only else None,
                         progress=lambda line: print(f"  {line}", flush=True))
    except ExerciseError as e:
        return _fail(str(e))
    print()
    print(format_table(chapter, verdicts, verbose=args.verbose))
    print(f"({time.time() - t0:.0f} s)")
    return 0 if all(v.status in ("PASS", "compiled") for v in verdicts) else 1


def cmd_hint(args) -> int:
    from .hints import hints

    chapter = chapters.find(args.chapter)
    found = hints(chapter, args.exercise)
    if not found:
        return _fail(f"no hints for {args.exercise!r} in {chapter.dirname}/README.md")
    n = min(args.number or 1, len(found))
    print(f"Hint {n} of {len(found)} for {args.exercise}:\n")
    print(found[n - 1])
    if n < len(found):
        print(f"\nNext: ./course hint {chapter.number} {args.exercise} {n + 1}")
    return 0


def cmd_gpu_report(args) -> int:
    from .gpu_report import run

    return run(skip_graders=args.skip_graders, skip_sanitizer=args.skip_sanitizer, only=args.only,
               sanitizer_timeout=args.sanitizer_timeout)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="./course", description="PyTorch C++/CUDA extensions course")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="check torch, the CUDA toolkit, ninja, the compiler and the GPU").set_defaults(fn=cmd_doctor)
    sub.add_parser("run", help="build every chapter and run its demo").set_defaults(fn=cmd_run)
    p = sub.add_parser("test", help="run the test suite (every argument goes to pytest)")
    p.set_defaults(fn=cmd_test, pytest_args=[])
    p = sub.add_parser("selfcheck", help="test the graders: stubs and wrong variants (slow; CI runs it)")
    p.set_defaults(fn=cmd_selfcheck, pytest_args=[])
    p = sub.add_parser("exercise", help="make a workspace for chapter NN with the solutions taken out")
    p.add_argument("chapter")
    p.add_argument("--force", action="store_true", help="replace an existing workspace (your edits are lost)")
    p.set_defaults(fn=cmd_exercise)
    p = grade = sub.add_parser("grade", help="grade your workspace for chapter NN, each exercise alone")
    p.add_argument("chapter")
    p.add_argument("exercises", nargs="*", help="only these exercises")
    p.add_argument("--solution", action="store_true", help="grade the chapter's own solution instead")
    p.add_argument("-v", "--verbose", action="store_true", help="all messages and the full test output")
    p.add_argument("--cpu-only", action="store_true", help="without a GPU, skip compiling the CUDA code")
    p.add_argument("--workspace", help="grade this folder instead of workspace/NN_chapter (its name must be the chapter's)")
    p.set_defaults(fn=cmd_grade)
    p = sub.add_parser("hint", help="the next hint for an exercise: ./course hint 02 corner-weight [N]")
    p.add_argument("chapter")
    p.add_argument("exercise")
    p.add_argument("number", nargs="?", type=int)
    p.set_defaults(fn=cmd_hint)
    p = sub.add_parser("gpu-report", help="on a CUDA machine: build, test, sanitize, benchmark, plot; write results/")
    p.add_argument("--skip-graders", action="store_true", help="leave out the grader self-check (the slowest part)")
    p.add_argument("--skip-sanitizer", action="store_true", help="leave out the compute-sanitizer runs")
    p.add_argument("--only", nargs="+", help="only these steps (run test sanitizer bench notebooks) and/or chapters (02 ...)")
    p.add_argument("--sanitizer-timeout", type=float, default=None, help="seconds allowed per compute-sanitizer tool")
    p.set_defaults(fn=cmd_gpu_report)
    if argv and argv[0] in {"test", "selfcheck"}:
        # Everything after the command goes to pytest as it is (-k, -x, --lf, paths).
        args = parser.parse_args(argv[:1])
        args.pytest_args = list(argv[1:])
    elif argv and argv[0] == "grade":
        # Options and exercise names in any order: grade 06 --cpu-only gather-backward.
        args = grade.parse_intermixed_args(argv[1:])
    else:
        args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except KeyError as e:
        return _fail(e.args[0])


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
