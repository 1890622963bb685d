"""Shared test machinery: builds, devices, dtypes, the `cuda` marker and exercise feedback.

A chapter's test file sets `CHAPTER = "NN"` and asks for the `ext` fixture. By
default `ext` is built from the chapter folder; with `--source DIR` (what
`./course grade NN` passes) it is built from a learner's workspace instead.
Tests that check an exercise carry `@pytest.mark.exercise("name")`.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest
import torch

GPU = torch.cuda.is_available()
# Without a GPU, Triton kernels (chapter 05's route 3) run in Triton's interpreter. triton reads
# TRITON_INTERPRET when a kernel is decorated, and for its own library functions when it is
# imported; torch.compile imports it: so here, first.
if not GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")

from coursekit import build, chapters, toolkit  # noqa: E402
from coursekit.testing import DTYPES  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--source", default=None, help="build the chapter under test from this folder (a learner workspace)")
    parser.addoption("--course-report", default=None, help="write test outcomes and their exercises as JSON to this file")
    parser.addoption("--exercise", default=None, help="run only the tests that grade this exercise")
    parser.addoption("--installed", action="store_true",
                     help="test the chapter's installed package (import it from sys.path / PYTHONPATH, e.g. a wheel "
                          "installed with pip install --target DIR) instead of building it")


def pytest_configure(config):
    config._course_results = defaultdict(list)  # exercise -> [(nodeid, outcome, message)]
    config._course_outcomes = {}
    config._course_messages = {}  # nodeid -> the whole failure message, for the grade report


def exercise_of(item) -> str | None:
    """The exercise a test grades: the one name on its @pytest.mark.exercise, or None."""
    names = [m.args[0] for m in item.iter_markers("exercise")]
    return names[0] if names else None


def pytest_collection_modifyitems(config, items):
    # One verdict per exercise, from that exercise alone: a graded test belongs to exactly one.
    shared = [f"{item.nodeid}: {names}" for item in items
              if len(names := [m.args[0] for m in item.iter_markers("exercise")]) > 1]
    if shared:
        raise pytest.UsageError("tests marked with more than one exercise (each graded test grades one):\n  "
                                + "\n  ".join(shared))
    wanted = config.getoption("--exercise")
    if wanted:
        keep = [item for item in items if exercise_of(item) == wanted]
        config.hook.pytest_deselected(items=[item for item in items if exercise_of(item) != wanted])
        items[:] = keep
    if GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none visible)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def build_chapter(request):
    """build_chapter("NN") -> the extension module for chapter NN, built once per session."""
    source = request.config.getoption("--source")
    cache = {}

    def _build(number: str):
        if number not in cache and request.config.getoption("--installed"):
            cache[number] = _installed(chapters.find(number))
        if number not in cache:
            chapter = chapters.find(number)
            src = Path(source) if source and chapters.find(source) == chapter else chapter.path
            capture = request.config.pluginmanager.getplugin("capturemanager")
            terminal = request.config.pluginmanager.getplugin("terminalreporter")

            def progress(line: str) -> None:
                if terminal is not None and request.config.getoption("verbose") >= 0:
                    with capture.global_and_fixture_disabled():
                        terminal.write_line(line)

            try:
                cache[number] = (build.build(src, progress=progress), src)
            except (build.BuildError, toolkit.SetupError) as e:
                pytest.exit(f"\n{e}\n", returncode=1)
        return cache[number]

    return _build


def _installed(chapter):
    """(module, folder) of the chapter's installed package, for --installed."""
    import importlib

    try:
        module = importlib.import_module(chapter.module)
    except ImportError as e:
        pytest.exit(f"\n--installed: cannot import {chapter.module} ({e}); install the chapter and put it on "
                    "PYTHONPATH\n", returncode=1)
    where = Path(module.__file__).resolve().parent
    if where.is_relative_to(build.BUILD_ROOT.resolve()) or where.is_relative_to(chapter.path.resolve()):
        pytest.exit(f"\n--installed: {chapter.module} was imported from {where}, not from an installed package\n",
                    returncode=1)
    module.__course_build__ = {"cuda": bool(getattr(module, "with_cuda", False)), "source": str(where),
                               "installed": True}
    return module, chapter.path


@pytest.fixture(scope="module")
def ext(request, build_chapter):
    return build_chapter(request.module.CHAPTER)[0]


@pytest.fixture(scope="module")
def chapter_source(request, build_chapter):
    """The folder the chapter under test was built from (the chapter, or a workspace)."""
    return build_chapter(request.module.CHAPTER)[1]


@pytest.fixture(scope="module")
def judged_source(request, chapter_source):
    """chapter_source, for the tests that compile the chapter's sources themselves (the GPU-free
    judge, the thread judge). With --installed they would test those sources again, not the
    installed package: skipped there (the run without --installed has them)."""
    if request.config.getoption("--installed"):
        pytest.skip("compiles the chapter's sources, not the installed package: the run without --installed has it")
    return chapter_source


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def device(request, ext):
    if request.param == "cuda" and not build.describe(ext) == "CPU+CUDA":
        pytest.skip("the extension was built without CUDA (run ./course doctor to see why)")
    return request.param


@pytest.fixture(params=DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def dtype(request):
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# ----------------------------------------------------------------------------
# Exercise feedback: which exercise a failing test points at.


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.when != "call" and report.passed:
        return  # setup and teardown that went well say nothing
    if report.failed:
        outcome = "failed" if report.when == "call" else "error"
        crash = getattr(report.longrepr, "reprcrash", None)
        message = (crash.message if crash else str(report.longrepr)).strip()
    elif report.skipped:
        outcome = "skipped"
        message = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
    else:
        outcome, message = "passed", ""
    config = item.config
    if config._course_outcomes.get(report.nodeid) in ("failed", "error"):
        return  # keep the first failure of a test
    config._course_outcomes[report.nodeid] = outcome
    if outcome in ("failed", "error"):
        config._course_messages[report.nodeid] = message[:3000]
    first_line = message.splitlines()[0] if message else ""
    for marker in item.iter_markers("exercise"):
        config._course_results[marker.args[0]].append((report.nodeid, outcome, first_line))


def pytest_terminal_summary(terminalreporter, config):
    results = config._course_results
    path = config.getoption("--course-report")
    if path:
        Path(path).write_text(json.dumps({
            "outcomes": config._course_outcomes,
            "messages": config._course_messages,
            "exercises": {k: [list(r) for r in v] for k, v in results.items()},
        }, indent=1))
    if not config.getoption("--source") or not results:
        return
    tr = terminalreporter
    tr.section("exercises")
    for name in sorted(results):
        rows = results[name]
        failed = [r for r in rows if r[1] in ("failed", "error")]
        ran = [r for r in rows if r[1] != "skipped"]
        if not ran:
            tr.write_line(f"  {name:32s} not checked: {rows[0][2]}")
        elif failed:
            from coursekit.grading import most_telling

            nodeid, _, message = most_telling(failed, config._course_messages)
            tr.write_line(f"  {name:32s} NOT YET  {len(failed)} of {len(ran)} tests fail", red=True)
            tr.write_line(f"      shown: {nodeid.split('::', 1)[-1]}")
            tr.write_line(f"      {message[:300]}")
        else:
            tr.write_line(f"  {name:32s} PASS     {len(ran)} tests", green=True)
