"""The graders are graded: stubs fail, every wrong variant fails exactly its own exercise.

    python -m coursekit.selfcheck 02                 # the stubs and every variant of chapter 02
    python -m coursekit.selfcheck 02 stubs           # only the stubs
    python -m coursekit.selfcheck 02 NAME [NAME...]  # only these variants

A variant (tests/variants/vNN_*.py) is one textual change to the chapter's solution.
Without a GPU, a variant that changes CUDA code only is graded when the GPU-free judge
covers its exercise (coursekit/emulate.py), and skipped otherwise.
It is turned into a learner's workspace (every exercise solved, the change applied)
and graded exactly as `./course grade` grades a learner: the exercises whose code the
change touches must be NOT YET, every other exercise PASS. A change outside every
exercise region must make some test of the chapter fail. A variant marked
correct=True is another right answer instead, and every exercise must PASS.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import sys
from pathlib import Path

import torch

from . import ROOT, chapters, exercises, grading

# COURSE_SELFCHECK_SHARD=I/K: this process checks part I of K (tests/test_graders.py), in its own folder.
SHARD = os.environ.get("COURSE_SELFCHECK_SHARD", "0/1")
SELFCHECK = ROOT / ".build" / "selfcheck" / ("" if SHARD == "0/1" else "part-" + SHARD.replace("/", "-of-"))
if os.environ.get("COURSE_SELFCHECK_DIR"):  # several self-checks side by side, each in its own folder
    SELFCHECK = Path(os.environ["COURSE_SELFCHECK_DIR"])
GPU = torch.cuda.is_available()
# COURSE_SELFCHECK_CUDA_ONLY (a GPU's self-check): the stubs and the CUDA-only wrong variants are
# graded by the CUDA tests alone. A CUDA-only change cannot fail a CPU test, and the stubs' CPU
# tests are checked on every machine (CI's self-check); this leaves a GPU the part only it can do.
CUDA_TESTS_ONLY = GPU and os.environ.get("COURSE_SELFCHECK_CUDA_ONLY") in ("1", "unemulated")


def variants(chapter: chapters.Chapter) -> list[exercises.Variant]:
    path = ROOT / "tests" / "variants" / f"v{chapter.dirname}.py"
    if not path.is_file():
        return []
    spec = importlib.util.spec_from_file_location(f"variants_{chapter.number}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.VARIANTS


def solved_workspace(chapter: chapters.Chapter, variant: exercises.Variant | None = None,
                     where: Path | None = None) -> Path:
    """A workspace with every exercise solved as the chapter solves it, and `variant` applied.

    It is written to `where`/ws/NN_chapter (default .build/selfcheck/NN/), the changed
    chapter to `where`/staged/NN_chapter."""
    where = where or SELFCHECK / chapter.number
    dest = where / "ws" / chapter.dirname
    staged = where / "staged" / chapter.dirname
    if variant is not None:
        exercises.apply_variant(chapter, staged, variant)
    else:
        exercises.copy_chapter(chapter.path, staged)
    exercises.copy_chapter(staged, dest, lambda rel, text: exercises.as_workspace(text, rel))
    return dest


NOT_CAUGHT_WITHOUT_GPU = "not caught by the emulated tests"


def emulated(chapter: chapters.Chapter, variant: exercises.Variant) -> bool:
    """Does the GPU-free judge (coursekit/emulate.py) grade this CUDA variant without a GPU? Yes when
    its change lies inside exercise regions (one, or several of one file) of a file the judge compiles:
    the text outside them is the same before and after."""
    if not grading._emulated(chapter, {variant.file: None}):
        return False
    text = (chapter.path / variant.file).read_text()
    if variant.old not in text:
        return False

    def outside(source: str) -> str:
        for r in exercises.solution_regions(source, Path(variant.file)):
            source = source.replace("".join(r.body), "\0", 1)
        return source

    return outside(text) == outside(text.replace(variant.old, variant.new, 1))


def judged(chapter: chapters.Chapter, variant: exercises.Variant) -> bool:
    """Does some module of the GPU-free judge compile the file this CUDA variant changes (an exercise's
    module, or chapter 06's ladder of every .cu file)? Then its emulated tests can run the change."""
    from . import emulate

    name = Path(variant.file).name
    for key, spec in emulate.SPECS.items():
        if key.split("-")[0] != chapter.number:
            continue
        if name in spec["sources"] or (spec["sources"] == ["*.cu"] and name.endswith((".cu", ".cuh"))):
            return True
    return False


def how_checked(chapter: chapters.Chapter, variant: exercises.Variant) -> str | None:
    """How this machine checks a variant: "graded" (as ./course grade grades a learner: on a GPU, or
    without one through the GPU-free judge when the change lies inside an exercise it runs),
    "emulated tests" (no GPU, a CUDA change outside every exercise in a file the judge compiles: the
    chapter's emulated tests must notice), or None (only a GPU can)."""
    if not variant.cuda_only or GPU:
        return "graded"
    if variant.gpu_only:
        return None
    if emulated(chapter, variant):
        return "graded"
    return None if variant.correct or not judged(chapter, variant) else "emulated tests"


# What decides a GPU self-check case's outcome, for its record in a ledger (tests/test_graders.py,
# COURSE_SELFCHECK_LEDGER): the variant, the chapter's sources and tests, and the grading code.
# The course's code that builds, grades or tests a case (the tests import testing.py and emulate.py;
# emulate.py builds with the headers in emu/).
_GRADING_CODE = ("build.py", "chapters.py", "emulate.py", "exercises.py", "grading.py", "nvcc_cache.py", "selfcheck.py",
                 "testing.py", "toolkit.py")


def case_key(chapter: chapters.Chapter, variant: exercises.Variant | None) -> str:
    """A digest of everything a case's outcome depends on (a GPU or not too): a record under another key
    is stale."""
    digest = hashlib.sha256(repr((GPU, None if variant is None else dataclasses.astuple(variant))).encode())
    sources = [p for p in chapter.path.rglob("*") if p.is_file() and p.suffix in (".py", ".cpp", ".cu", ".cuh", ".h")
               and not any(part in ("build", "dist", "__pycache__") or part.endswith(".egg-info")  # not sources
                           for part in p.relative_to(chapter.path).parts)]
    sources += [chapter.test_file, ROOT / "tests" / "conftest.py", *(ROOT / "coursekit" / f for f in _GRADING_CODE)]
    if not CUDA_TESTS_ONLY:  # a GPU's CUDA-only self-check runs no emulated test: the judge's headers cannot decide it
        sources += [p for p in (ROOT / "coursekit" / "emu").iterdir() if p.suffix in (".h", ".cpp")]
    for path in sorted(sources):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def touched(chapter: chapters.Chapter, workspace: Path) -> list[str]:
    """The exercises whose code in `workspace` differs from the chapter's solution."""
    mine = grading.learner_bodies(chapter, workspace)
    theirs = grading.solution_bodies(chapter)
    return [name for name in theirs if mine[name] != theirs[name]]


def check_stubs(chapter: chapters.Chapter) -> list[str]:
    """Problems with the stubs: an exercise whose stub passes a graded test, or that no test grades."""
    dest = SELFCHECK / chapter.number / "ws" / chapter.dirname  # shared with the variants: incremental builds
    exercises.make_workspace(chapter, dest, force=True)
    problems = []
    marker = "cuda" if CUDA_TESTS_ONLY else None
    for v in grading.grade(chapter, dest, run_stubs=True, compile_cuda=False, marker=marker):
        if v.passed:
            problems.append(f"{v.exercise}: graded tests pass on the untouched stub: {v.passed[:5]}")
        if v.status == "PASS" or (v.status == "not checked" and GPU and not marker):  # marker: no CUDA test
            problems.append(f"{v.exercise}: {v.status} on the stub ({v.summary})")
        if v.status == "NOT YET" and v.summary.startswith("does not compile"):
            problems.append(f"{v.exercise}: the stub does not compile:\n    " + "\n    ".join(v.message))
    return problems


def check_variant(chapter: chapters.Chapter, variant: exercises.Variant, emulated_only: bool = False) -> list[str]:
    """Problems with one variant: it passes, or its verdict lands on another exercise (a correct
    variant: any exercise NOT YET). emulated_only (a CUDA change outside every exercise, on a machine
    without a GPU): only the chapter's emulated tests run; every test passing is then reported as
    NOT_CAUGHT_WITHOUT_GPU, not as a problem."""
    ws = solved_workspace(chapter, variant)
    names = touched(chapter, ws)
    if not names:  # outside every exercise: the chapter's tests as a whole must notice
        staged = SELFCHECK / chapter.number / "staged" / chapter.dirname
        report = SELFCHECK / chapter.number / f"{variant.name}.json"
        cuda_first = variant.cuda_only and GPU and not variant.correct  # the CUDA tests first: the likely catch
        if cuda_first:
            doc, log = grading.run_tests(chapter, staged, None, report, cuda_build=True, stop_first=True, marker="cuda")
        if emulated_only:  # the judge's builds in one folder for the chapter's variants: incremental
            os.environ["COURSE_EMU_SLOT"] = str(SELFCHECK / chapter.number / "emu")
            try:
                # chapter 06's table's choice (seconds) and ladder first (most such variants change a rung
                # or its row's condition), then the other emulated tests
                ladder = "def test_every_rung_emulated(" in chapter.test_file.read_text()
                keywords = (["dispatch_emulated", "every_rung_emulated",
                             "emulated and not dispatch_emulated and not every_rung_emulated"] if ladder else ["emulated"])
                for keyword in keywords:
                    doc, log = grading.run_tests(chapter, staged, None, report, cuda_build=False, stop_first=True,
                                                 keyword=keyword)
                    if doc is None or any(o in ("failed", "error") for o in doc["outcomes"].values()):
                        break
            finally:
                del os.environ["COURSE_EMU_SLOT"]
        elif not cuda_first or (doc is not None and not any(o in ("failed", "error") for o in doc["outcomes"].values())):
            doc, log = grading.run_tests(chapter, staged, None, report, cuda_build=GPU, stop_first=True)
        if emulated_only and (doc is None or "Error building extension" in log):
            # the judge's build, not the variant's (which builds with nvcc): not a catch
            return [f"{variant.name} ({variant.why}): the GPU-free judge's build failed:\n" + log[-2000:]]
        if doc is None:  # it does not build: caught (a correct variant must build)
            return [f"{variant.name} ({variant.why}) is correct, and does not build"] if variant.correct else []
        failed = [n for n, o in doc["outcomes"].items() if o in ("failed", "error")]
        if variant.correct:
            return [f"{variant.name} ({variant.why}) is correct, and fails {failed[:5]}"] if failed else []
        if emulated_only and not failed:
            return [NOT_CAUGHT_WITHOUT_GPU]
        return [] if failed else [f"{variant.name} ({variant.why}): outside every exercise, and every test passes"]
    marker = "cuda" if CUDA_TESTS_ONLY and variant.cuda_only and not variant.correct else None
    verdicts = grading.grade(chapter, ws, compile_cuda=False, stop_first=not variant.correct, marker=marker)
    not_yet = sorted(v.exercise for v in verdicts if v.status == "NOT YET")
    problems = []
    if variant.correct:
        if not_yet:
            detail = "; ".join(f"{v.exercise}: {v.status} ({v.summary})" for v in verdicts if v.status == "NOT YET")
            problems.append(f"{variant.name} ({variant.why}) is a correct solution of {names}, graded NOT YET: {detail}")
        return problems
    if not_yet != sorted(names):
        detail = "; ".join(f"{v.exercise}: {v.status} ({v.summary})" for v in verdicts)
        problems.append(f"{variant.name} ({variant.why}) touches {names} but NOT YET is {not_yet}: {detail}")
    return problems


def main(argv: list[str]) -> int:
    chapter = chapters.find(argv[0])
    wanted = argv[1:]
    problems = []
    if not wanted or "stubs" in wanted:
        found = check_stubs(chapter)
        print(f"stubs: {'ok' if not found else 'PROBLEMS'}")
        problems += found
    for v in variants(chapter):
        if wanted and v.name not in wanted:
            continue
        how = how_checked(chapter, v)
        if how is None:
            print(f"{v.name}: skipped (changes CUDA code only; needs a GPU)")
            continue
        found = check_variant(chapter, v, how == "emulated tests")
        if found == [NOT_CAUGHT_WITHOUT_GPU]:
            print(f"{v.name}: not caught by the emulated tests (a GPU run checks it)", flush=True)
            continue
        print(f"{v.name}: {'ok' if not found else 'PROBLEM'}", flush=True)
        problems += found
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
