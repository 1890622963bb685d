"""The graders are tested too.

For every chapter: (1) its stubbed workspace builds and fails every graded test
(a test marked with @pytest.mark.exercise), and (2) each plausible wrong
solution in tests/variants/ fails at least one test.

Each case runs the chapter's test file in a subprocess against a copy of the
chapter in .build/selfcheck/. All cases of a chapter share that folder, and
only the files a case changes are rewritten, so ninja recompiles one small
file per case instead of the whole extension. Without a GPU the copies are
built CPU-only (fast) and variants that only touch CUDA code are skipped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch

from coursekit import ROOT, chapters, exercises

pytestmark = pytest.mark.graders

SELFCHECK = ROOT / ".build" / "selfcheck"
GPU = torch.cuda.is_available()


def _variants(chapter: chapters.Chapter) -> list[exercises.Variant]:
    path = ROOT / "tests" / "variants" / f"v{chapter.dirname}.py"
    if not path.is_file():
        return []
    spec = importlib.util.spec_from_file_location(f"variants_{chapter.number}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.VARIANTS


def _cases():
    for chapter in chapters.existing():
        yield pytest.param(chapter, None, id=f"{chapter.number}-stubs")
        for v in _variants(chapter):
            yield pytest.param(chapter, v, id=f"{chapter.number}-{v.name}")


def _run(chapter: chapters.Chapter, source, name: str, stop_at_first_failure: bool) -> dict:
    report = SELFCHECK / f"{chapter.dirname}.{name}.json"
    report.unlink(missing_ok=True)
    env = dict(os.environ)
    if not GPU:
        env.pop("FORCE_CUDA", None)
        env["COURSE_BUILD"] = "cpu"
    cmd = [sys.executable, "-m", "pytest", str(chapter.test_file), "--source", str(source),
           "--course-report", str(report), "-q", "-p", "no:cacheprovider", "-m", "not graders and not aot"]
    if stop_at_first_failure:
        cmd.append("-x")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    log = (proc.stdout + proc.stderr)[-4000:]
    assert report.is_file(), f"the chapter's tests did not run (build failure?):\n{log}"
    doc = json.loads(report.read_text())
    doc["log"] = log
    return doc


@pytest.mark.parametrize("chapter, variant", list(_cases()))
def test_grader(chapter, variant):
    dest = SELFCHECK / chapter.dirname  # the basename names the chapter
    if variant is None:
        _, found = exercises.make_workspace(chapter, dest, force=True)
        assert found, f"{chapter.dirname} has no BEGIN SOLUTION fences"
        doc = _run(chapter, dest, "stubs", stop_at_first_failure=False)
        graded = {nodeid: outcome for rows in doc["exercises"].values() for nodeid, outcome, _ in rows}
        ran = {n: o for n, o in graded.items() if o != "skipped"}
        assert ran, f"no graded test ran against the stubs:\n{doc['log']}"
        passed = sorted(n for n, o in ran.items() if o == "passed")
        assert not passed, "graded tests that pass on the untouched stubs (they grade nothing):\n  " + "\n  ".join(passed)
        names = {ex.name for ex in found}
        ungraded = names - set(doc["exercises"])
        assert not ungraded, f"exercises that no test grades: {sorted(ungraded)}"
    else:
        if variant.cuda_only and not GPU:
            pytest.skip("this wrong variant only changes CUDA code; needs a GPU")
        exercises.apply_variant(chapter, dest, variant)
        doc = _run(chapter, dest, variant.name, stop_at_first_failure=True)
        failed = [n for n, o in doc["outcomes"].items() if o in ("failed", "error")]
        assert failed, f"wrong variant {variant.name!r} ({variant.why}) passes every test:\n{doc['log']}"
