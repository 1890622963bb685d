"""The graders are tested too (`./course selfcheck`; slow, CI runs it).

For every chapter: (1) each exercise's untouched stub fails every test that grades
it, and (2) each plausible wrong solution in tests/variants/ makes exactly the
exercise(s) whose code it changes NOT YET, graded the way `./course grade` grades a
learner (each exercise alone, the chapter's solution for the others); a change outside
every exercise must fail some test of the chapter; and each correct alternative there
(correct=True: another right answer, such as a lesson hint's kernel) PASSES everything. Without a GPU the builds are
CPU-only; a variant that changes CUDA code is graded through the GPU-free judge where the judge runs that
code (selfcheck.how_checked), and skipped only where a GPU is needed. See coursekit/selfcheck.py.

Time budget: with COURSE_SELFCHECK_BUDGET=S (seconds), variants that would start after S
seconds are skipped with that reason (the stubs always run), and COURSE_SELFCHECK_SEED=N shuffles the order of
each chapter's variants (the stubs always come first), so that a budgeted run (CI's)
checks a different sample each time it changes N. Without them every case runs.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import time
from pathlib import Path

import pytest

from coursekit import ROOT, chapters, grading, selfcheck

pytestmark = pytest.mark.graders

BUDGET = float(os.environ.get("COURSE_SELFCHECK_BUDGET") or 0)
# `./course selfcheck` runs its parts a few at a time and gives them one deadline.
DEADLINE = float(os.environ.get("COURSE_SELFCHECK_DEADLINE") or 0) or (time.time() + BUDGET if BUDGET else 0)
SEED = os.environ.get("COURSE_SELFCHECK_SEED")
# COURSE_SELFCHECK_CUDA_ONLY=1 (on a GPU machine): only the variants that change CUDA code, the
# ones a machine without a GPU cannot check; the others are checked on every machine.
# COURSE_SELFCHECK_CUDA_ONLY=unemulated: only those the GPU-free judge does not grade either.
CUDA_ONLY = os.environ.get("COURSE_SELFCHECK_CUDA_ONLY") in ("1", "unemulated")
UNEMULATED = os.environ.get("COURSE_SELFCHECK_CUDA_ONLY") == "unemulated"


# COURSE_SELFCHECK_LEDGER=FILE: a self-check spread over several runs (a GPU's, which takes longer than
# one run may: results/selfcheck_gpu.json), or one that CI reads (results/selfcheck_nogpu.json: CI runs
# again only the cases whose code changed). Each case's outcome is recorded in FILE (JSON) with a digest
# of everything that decides it (_case_key); a case recorded as passed under the same key is skipped,
# with the record.
LEDGER = Path(os.environ["COURSE_SELFCHECK_LEDGER"]) if os.environ.get("COURSE_SELFCHECK_LEDGER") else None


def _ledger_read() -> dict:
    try:
        return json.loads(LEDGER.read_text())
    except (OSError, ValueError):
        return {}


def _ledger_write(case: str, record: dict) -> None:
    """Merge one record into the ledger under a lock: the parts of a run write side by side."""
    LEDGER.parent.mkdir(parents=True, exist_ok=True)
    with open(LEDGER.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ledger = _ledger_read()
        ledger[case] = record
        tmp = LEDGER.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(dict(sorted(ledger.items())), indent=1) + "\n")
        os.replace(tmp, LEDGER)


def _case_key(chapter, variant) -> str:
    """selfcheck.case_key, and where CPU tests run, the thread judge's code too (its tests are CPU tests:
    a GPU's CUDA-only self-check runs none, and its records keep their keys)."""
    key = selfcheck.case_key(chapter, variant)
    if selfcheck.CUDA_TESTS_ONLY:
        return key
    judge = [ROOT / "coursekit" / "races.py", *sorted((ROOT / "coursekit" / "tsan").glob("*.[ch]*"))]
    digest = hashlib.sha256(key.encode())
    for path in judge:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


# COURSE_SELFCHECK_SHARD=I/K (set by `./course selfcheck` with COURSE_SELFCHECK_SHARDS=K): part 0
# checks the stubs alone (the longest case on a GPU: every CUDA test of the chapter, against each
# stub), parts 1 to K-1 every (K-1)-th variant; one part (K = 1) checks everything.
PART, PARTS = (int(x) for x in selfcheck.SHARD.split("/"))
# COURSE_SELFCHECK_SHARDS=each: `./course selfcheck` lists the cases left to check (COURSE_SELFCHECK_PENDING=1:
# a case the ledger records as passed under the same key is not collected), then runs each in a process
# and folder of its own (COURSE_SELFCHECK_CASE=its id), the longest first. A GPU's CUDA-only self-check
# splits the stubs into one case per exercise (NN-stubs:NAME; COURSE_SELFCHECK_STUBS_BY_EXERCISE=1 on any
# machine): as one case, every CUDA test of chapter 06 against each of its stubs in turn took longer than
# a call on a lent GPU lasts, and a case cut short records nothing.
CASE = os.environ.get("COURSE_SELFCHECK_CASE")
PENDING = os.environ.get("COURSE_SELFCHECK_PENDING") == "1"
STUBS_BY_EXERCISE = selfcheck.CUDA_TESTS_ONLY or os.environ.get("COURSE_SELFCHECK_STUBS_BY_EXERCISE") == "1"


def _stub_cases(chapter):
    if not STUBS_BY_EXERCISE:
        return [(f"{chapter.number}-stubs", None)]
    return [(f"{chapter.number}-stubs:{name}", name) for name in grading.exercise_names(chapter)]


def _passed(case: str, chapter, variant) -> dict | None:
    """The ledger's record of this case if it passed under the key it has now."""
    record = _ledger_read().get(case) if LEDGER is not None else None
    if record is not None and record["key"] == _case_key(chapter, variant) and record["outcome"] == "passed":
        return record
    return None


def _cases():
    for chapter in chapters.existing():
        cases = []
        if PART == 0:
            cases += [(case, chapter, None, exercise) for case, exercise in _stub_cases(chapter)]
        found = list(selfcheck.variants(chapter))
        if CUDA_ONLY:  # the others are not collected (not skipped), so that the parts are even
            found = [v for v in found if v.cuda_only and not (UNEMULATED and selfcheck.emulated(chapter, v))]
        if SEED:
            random.Random(f"{SEED}-{chapter.number}").shuffle(found)
        for v in found if PARTS == 1 else (found[PART - 1::PARTS - 1] if PART else []):
            cases.append((f"{chapter.number}-{v.name}", chapter, v, None))
        for case, chapter_, variant, exercise in cases:
            if CASE is not None and case != CASE:
                continue
            if PENDING and _passed(case, chapter_, variant) is not None:
                continue
            yield pytest.param(chapter_, variant, exercise, id=case)


@pytest.mark.parametrize("chapter, variant, exercise", list(_cases()))
def test_grader(chapter, variant, exercise, monkeypatch):
    if DEADLINE and time.time() > DEADLINE and variant is not None:  # the stubs always run
        pytest.skip("not checked in this run: the self-check's time budget is spent; "
                    "`./course selfcheck` with no budget checks every case")
    case = f"{chapter.number}-{'stubs' if variant is None else variant.name}" + (f":{exercise}" if exercise else "")
    if LEDGER is not None:
        key = _case_key(chapter, variant)
        record = _passed(case, chapter, variant)
        if record is not None:
            pytest.skip(f"passed on {record['device']} on {record['date']} (ledger {LEDGER.name}, same key)")
        started = time.time()
    if variant is None:
        if exercise is not None:  # this exercise's stub alone (the grader grades each exercise alone anyway)
            monkeypatch.setattr(grading, "exercise_names", lambda _chapter: [exercise])
        problems = selfcheck.check_stubs(chapter)
    else:
        how = selfcheck.how_checked(chapter, variant)
        if how is None:
            pytest.skip("this variant changes CUDA code that the GPU-free judge does not run; needs a GPU")
        problems = selfcheck.check_variant(chapter, variant, how == "emulated tests")
        if problems == [selfcheck.NOT_CAUGHT_WITHOUT_GPU]:
            pytest.skip("a CUDA change outside every exercise that the emulated tests do not notice; a GPU run checks it")
    if LEDGER is not None:
        import torch

        _ledger_write(case, {"key": key, "outcome": "failed" if problems else "passed",
                             "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU",
                             "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
                             "seconds": round(time.time() - started)})
    assert not problems, "\n".join(problems)
