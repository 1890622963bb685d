"""The grading machinery itself: fences, one verdict per exercise, short reports, the CLI.

The cheap checks run with the suite; the ones that build composites are marked
`graders` and run with `./course selfcheck`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

from coursekit import ROOT, chapters, exercises, grading, hints, selfcheck, toolkit

CHAPTERS = [pytest.param(c, id=c.number) for c in chapters.existing()]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_workspace_fences_round_trip(chapter, tmp_path):
    """A fresh workspace has one fenced region per solution region, holding the stub."""
    ws = tmp_path / chapter.dirname
    exercises.make_workspace(chapter, ws)
    mine = grading.learner_bodies(chapter, ws)
    assert mine == grading.stub_bodies(chapter)
    assert set(mine) == set(grading.solution_bodies(chapter))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_solved_workspace_is_the_solution(chapter):
    ws = selfcheck.solved_workspace(chapter)
    assert grading.learner_bodies(chapter, ws) == grading.solution_bodies(chapter)
    assert selfcheck.touched(chapter, ws) == []


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_exercise_is_graded(chapter):
    """Each exercise has at least one test marked with its name (and, by conftest, no test has two)."""
    text = chapter.test_file.read_text()
    marked = set(re.findall(r"""pytest\.mark\.exercise\(["']([\w.-]+)["']\)""", text))
    names = set(grading.exercise_names(chapter))
    assert names <= marked, f"exercises no test grades: {sorted(names - marked)}"
    assert marked <= names, f"tests grade exercises the chapter does not have: {sorted(marked - names)}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_variant_applies(chapter):
    """Each wrong solution in tests/variants/ finds its text exactly once in the chapter's file. The
    self-check applies them (on a GPU for the CUDA ones); checked here, on every machine, a variant
    whose text a later edit of the chapter removed fails at once instead of on the next GPU run."""
    stale = []
    for v in selfcheck.variants(chapter):
        count = (chapter.path / v.file).read_text().count(v.old)
        if count != 1:
            stale.append(f"{v.name}: its text is in {v.file} {count} times")
    assert not stale, "variants to update: " + "; ".join(stale)


def test_ledger_key_names_the_case():
    """COURSE_SELFCHECK_LEDGER's key: the same for the same case, another for another variant, the stubs, or
    the same variant with one character changed (a record made for other code is stale)."""
    chapter = chapters.find("02")
    first, second = selfcheck.variants(chapter)[:2]
    key = selfcheck.case_key(chapter, first)
    assert key == selfcheck.case_key(chapter, first)
    edited = exercises.Variant(first.name, first.why, first.file, first.old, first.new + " ", first.cuda_only)
    others = {selfcheck.case_key(chapter, v) for v in (second, None, edited)}
    assert key not in others and len(others) == 3


def test_each_case_lists_what_is_left(monkeypatch, tmp_path):
    """COURSE_SELFCHECK_SHARDS=each (a lent GPU's self-check, spread over calls): `./course selfcheck` lists
    the cases its ledger does not record as passed under their key now, the stubs first (one case per
    exercise where they are split), and runs each alone. Chapter 01, with an empty ledger, then with a stub's
    and a variant's records passed (not listed), one passed under another key and one failed (listed)."""
    import importlib.util
    import json

    from coursekit import __main__ as cli

    spec = importlib.util.spec_from_file_location("graders_for_keys", ROOT / "tests" / "test_graders.py")
    graders = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(graders)  # its _case_key: the key the listing compares
    ledger = tmp_path / "ledger.json"
    monkeypatch.setenv("COURSE_SELFCHECK_LEDGER", str(ledger))
    monkeypatch.setenv("COURSE_SELFCHECK_STUBS_BY_EXERCISE", "1")
    for name in ("COURSE_SELFCHECK_CUDA_ONLY", "COURSE_SELFCHECK_SEED", "COURSE_SELFCHECK_SHARD", "COURSE_SELFCHECK_CASE"):
        monkeypatch.delenv(name, raising=False)
    chapter = chapters.find("01")
    variants = selfcheck.variants(chapter)
    stubs = [f"01-stubs:{name}" for name in grading.exercise_names(chapter)]
    everything = stubs + [f"01-{v.name}" for v in variants]
    assert len(stubs) >= 2 and len(variants) >= 3
    assert cli._pending_cases([chapter]) == everything

    def record(variant, outcome="passed", key=None):
        return {"key": key or graders._case_key(chapter, variant), "outcome": outcome, "device": "CPU",
                "torch": "", "date": "", "seconds": 0}

    ledger.write_text(json.dumps({stubs[0]: record(None), everything[len(stubs)]: record(variants[0]),
                                  everything[len(stubs) + 1]: record(variants[1], key="another"),
                                  everything[len(stubs) + 2]: record(variants[2], outcome="failed")}))
    assert cli._pending_cases([chapter]) == [c for c in everything if c not in (stubs[0], everything[len(stubs)])]


def test_prewarmed_verdicts_are_the_ones_a_case_reads(monkeypatch, tmp_path):
    """The GPU self-check grades each chapter's own exercises once before its parts start
    (coursekit.__main__._prewarm_verdicts): a grade of the solution afterwards must find every
    verdict in the cache, or the prewarm is silently wasted. Chapter 01 (quick), on this machine."""
    from coursekit import __main__ as cli

    monkeypatch.setattr(grading, "GRADE_ROOT", tmp_path / "grade")  # where a case reads them
    chapter = chapters.find("01")
    cli._prewarm_verdicts([chapter], root=tmp_path / "parts")
    graded = []
    verdicts = grading.grade(chapter, None, progress=graded.append, marker="cuda" if selfcheck.CUDA_TESTS_ONLY else None)
    assert not graded, f"graded again after the prewarm: {graded}"
    assert [v.status for v in verdicts] == ["PASS"] * len(grading.exercise_names(chapter))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_lesson_does_not_print_the_solution(chapter):
    """No line of a solution (code, 25 characters or more) appears in the chapter's README."""
    readme = (chapter.path / "README.md").read_text()
    readme_lines = {ln.strip() for ln in readme.splitlines()}
    leaked = []
    for name, files in grading.solution_bodies(chapter).items():
        for bodies in files.values():
            for body in bodies:
                for line in body:
                    code = line.strip()
                    if len(code) >= 25 and not code.startswith(("//", "#")) and code in readme_lines:
                        leaked.append(f"{name}: {code}")
    assert not leaked, "the README prints graded code:\n  " + "\n  ".join(leaked)


@pytest.mark.parametrize("chapter", [c for c in chapters.existing() if c.number != "01"], ids=lambda c: c.number)
def test_every_exercise_has_hints(chapter):
    missing = [n for n in grading.exercise_names(chapter) if not hints.hints(chapter, n)]
    assert not missing, f"exercises without a hint in {chapter.dirname}/README.md: {missing}"


def test_broken_fence_names_the_fix(tmp_path):
    chapter = chapters.find("01")
    ws = tmp_path / chapter.dirname
    exercises.make_workspace(chapter, ws)
    hello = ws / "csrc" / "hello.cpp"
    hello.write_text(re.sub(r".*END EXERCISE scale\n", "", hello.read_text()))
    with pytest.raises(exercises.ExerciseError, match=r"BEGIN EXERCISE scale has no END EXERCISE"):
        grading.learner_bodies(chapter, ws)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_fresh_stubs_report_is_short(chapter, tmp_path):
    """On fresh stubs every exercise is NOT YET at once (nothing to build), in a short report."""
    ws = tmp_path / chapter.dirname
    exercises.make_workspace(chapter, ws)
    verdicts = grading.grade(chapter, ws, compile_cuda=False)
    assert [v.exercise for v in verdicts] == grading.exercise_names(chapter)
    assert all(v.status == "NOT YET" for v in verdicts)
    report = grading.format_table(chapter, verdicts)
    assert len(report.splitlines()) <= 40, report


def test_cached_verdict_is_a_snapshot():
    """The grader adds "CUDA code compiled, not run" to a verdict after caching it; the cached copy
    must not change with it, or every later grade repeats the note once more."""
    verdict = grading.Verdict("source-coordinate", "PASS", "272 tests")
    cached = verdict.to_json()
    verdict.summary += "; CUDA code compiled, not run: no GPU"
    assert grading.Verdict.from_json(cached).summary == "272 tests"


def test_course_test_passes_options_to_pytest(monkeypatch):
    import coursekit.__main__ as cli

    seen = []
    monkeypatch.setenv("COURSE_LIBSTDCXX_CHECKED", "1")
    monkeypatch.setattr(cli, "_pytest", lambda argv: seen.append(argv) or 0)
    assert cli.main(["test", "-k", "corner", "-x", "--lf", "tests/test_02_forward_kernel.py"]) == 0
    assert seen[-1][-4:] == ["-k", "corner", "-x", "--lf", "tests/test_02_forward_kernel.py"][-4:]
    assert "-k" in seen[-1] and "--lf" in seen[-1]
    cli.main(["test", "-m", "graders"])  # an explicit -m comes last and wins
    assert seen[-1][-2:] == ["-m", "graders"]


def test_hint_command(capsys, monkeypatch):
    import coursekit.__main__ as cli

    chapter = next((c for c in chapters.existing() if c.number != "01" and grading.exercise_names(c)
                    and hints.hints(c, grading.exercise_names(c)[0])), None)
    if chapter is None:
        pytest.skip("no chapter with hints")
    name = grading.exercise_names(chapter)[0]
    assert cli.main(["hint", chapter.number, name]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Hint 1 of {len(hints.hints(chapter, name))} for {name}")
    assert cli.main(["hint", chapter.number, "no-such-exercise"]) == 1


# ---------------------------------------------------------------------------- slow: builds composites


def _course(*args, env=None):
    env = dict(os.environ if env is None else env, COURSE_PYTHON=sys.executable)
    return subprocess.run([str(ROOT / "course"), *args], cwd=ROOT, env=env, capture_output=True, text=True)


@pytest.mark.graders
def test_one_wrong_exercise_is_the_only_not_yet():
    """`./course grade 01` with describe solved and scale wrong: exactly scale is NOT YET, in a short report."""
    chapter = chapters.find("01")
    variant = next(v for v in selfcheck.variants(chapter) if v.name == "scale-ignores-inplace")
    # a fixed folder of its own: later runs rebuild incrementally
    ws = selfcheck.solved_workspace(chapter, variant, where=selfcheck.SELFCHECK / "cli")
    proc = _course("grade", "01", "--workspace", str(ws))
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    table = {m.group(1): m.group(2) for m in re.finditer(r"^(\w[\w.-]*)\s+(PASS|NOT YET)\s", out, re.M)}
    assert table == {"describe": "PASS", "scale": "NOT YET"}, out
    assert len(out.splitlines()) <= 40, out


def _cuda_compile_possible() -> bool:
    try:
        return torch.version.cuda is not None and toolkit.find_toolkit() is not None
    except toolkit.SetupError:
        return False


@pytest.mark.graders
@pytest.mark.skipif(torch.cuda.is_available() or not _cuda_compile_possible(),
                    reason="for a machine with a CUDA toolkit and no GPU")
def test_cuda_syntax_error_without_gpu_is_reported(tmp_path):
    """No GPU, but a toolkit: a syntax error in a .cu exercise is NOT YET, with the compiler's line."""
    chapter = chapters.find("02")
    files = grading.solution_bodies(chapter)
    name = next(n for n, by_file in files.items() if any(rel.endswith(".cu") for rel in by_file))
    ws = selfcheck.solved_workspace(chapter, where=tmp_path)
    rel = next(rel for rel in files[name] if rel.endswith(".cu"))
    text = (ws / rel).read_text()
    begin = text.index(f"BEGIN EXERCISE {name}")
    line_end = text.index("\n", begin) + 1
    (ws / rel).write_text(text[:line_end] + "  this is not C++\n" + text[line_end:])
    (verdict,) = grading.grade(chapter, ws, only=[name], compile_cuda=True)
    assert verdict.status == "NOT YET" and "compile" in verdict.summary, verdict
    assert any(rel in ln and "error" in ln for ln in verdict.message), verdict.message


def test_first_message_is_wrapped_not_cut():
    """A long first message (the GPU-free judge's name the kernel, block, thread and element) reaches the
    learner whole: wrapped over lines of at most 110 characters, every word kept, in order."""
    message = ("RuntimeError: out-of-bounds access: a read outside points: element 21 (past its end: it has 21), "
               "in kernel forward_cuda_kernel<scalar_t>, block (0, 0, 0), thread (16, 7, 0); " * 2).strip()
    lines = grading._message_lines(message + "\nassert False\n+  where False = f()")
    assert all(len(line) <= 110 for line in lines), lines
    assert " ".join(" ".join(lines).split()) == " ".join(message.split()), lines
    many = grading._message_lines("\n".join(f"line {i}" for i in range(40)))
    assert len(many) == 12 and "-v" in many[-1], many


def test_compile_message_is_the_first_error_whole():
    """A compile error reaches the learner whole (wrapped, not cut at 200 characters): g++'s and nvcc's
    first error with its source line; for an error inside a header template (the GPU-free judge's
    __ldg, say), the learner's line that instantiated it first."""
    advice = "nvcc's __ldg takes built-in types and CUDA vector types, not c10::Half: go through the bits " * 3
    gcc = ("In file included from ws/csrc/k.h:16,\n"
           "/x/coursekit/emu/cuda_emu.h: In instantiation of 'T __ldg(const T*) [with T = c10::Half]':\n"
           "ws/csrc/k.cu:49:53:   required from \u2018void kernel(const scalar_t*) [with scalar_t = c10::Half]\u2019\n"
           "ws/csrc/k.cu:73:3:   required from here\n"
           f"/x/coursekit/emu/cuda_emu.h:948:24: error: static assertion failed: {advice}\n"
           "  948 |   static_assert(::emu::cache_hint_type<T>,\n"
           "ws/csrc/k.cu:49:53:   required from \u2018void kernel(const scalar_t*) [with scalar_t = c10::BFloat16]\u2019\n"
           "ninja: build stopped: subcommand failed.")
    lines = grading._compile_message(gcc)
    assert lines[0].startswith("ws/csrc/k.cu:49:53:") and "c10::Half" in " ".join(lines), lines
    assert " ".join(advice.split()) in " ".join(" ".join(lines).split()), lines
    assert all(len(line) <= 110 for line in lines) and "948 |" not in " ".join(lines), lines
    nvcc = ("ws/csrc/k.cu(49): error: no instance of overloaded function \"__ldg\" matches the argument list\n"
            "            argument types are: (const c10::Half *)\n"
            "1 error detected in the compilation of \"ws/csrc/k.cu\".")
    lines = grading._compile_message(nvcc)
    assert lines[0].startswith("ws/csrc/k.cu(49): error:") and "(const c10::Half *)" in lines[1], lines


def test_report_shows_the_first_message_whole():
    """The grade report prints a NOT YET exercise's first message in full (it is at most 12 wrapped
    lines already), not its first 6 lines: a compiler's advice ends past the sixth."""
    message = [f"line {i} of the advice" for i in range(9)]
    report = grading.format_table(chapters.find("02"), [grading.Verdict("cuda-kernel", "NOT YET", "does not compile",
                                                                        message=message)])
    assert all(line in report for line in message), report


# ---------------------------------------------------------------------------- advice sized to the error


def _failure(check) -> str:
    with pytest.raises(AssertionError) as e:
        check()
    return str(e.value)


PRECISION_WORDS = ("opmath", "through float32", "Off by", "near miss")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16],
                         ids=lambda d: str(d).replace("torch.", ""))
def test_advice_is_sized_to_the_error(dtype):
    """A rounding-sized miss gets precision advice and the worst element; a large one never does: it
    gets 'far off' with the first wrong position, got vs expected and the inputs."""
    from coursekit import testing

    torch.manual_seed(0)
    ref = torch.randn(4, 50, dtype=torch.float64) + 3
    inputs = lambda idx: f"x[{idx[0]}, {idx[1]}]"  # noqa: E731
    check = {torch.float64: lambda out: testing.assert_float64(out, ref, inputs=inputs),
             torch.float32: lambda out: testing.assert_close(out, ref, inputs=inputs),
             }.get(dtype, lambda out: testing.assert_rounded(out, ref, inputs=inputs))
    # rounding-sized: one element a few roundings of the suspect precision off
    near = ref.clone()
    step = {torch.float64: 2.0**-20, torch.float32: 2.0**-12, torch.float16: 2.0**-8, torch.bfloat16: 2.0**-5}[dtype]
    near[:, 7] *= 1 + step  # a column: enough for a relative-norm check to fail too
    small = _failure(lambda: check(near.to(dtype)))
    assert testing.PRECISION_ADVICE[dtype] in small and testing.FAR_ADVICE not in small, small
    assert "worst at (" in small, small
    # large: wrong values from element (1, 3) on
    far = near.clone()
    far[1, 3:] = -ref[1, 3:]
    large = _failure(lambda: check(far.to(dtype)))
    assert testing.FAR_ADVICE in large, large
    assert not any(w in large for w in PRECISION_WORDS), large
    assert "First wrong at (1, 3): got " in large and "expected " in large and "inputs: x[1, 3]" in large, large


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=lambda d: str(d).replace("torch.", ""))
def test_unset_local_gets_its_own_advice(dtype):
    """A first wrong value as large as the GPU-free judge's fill of an unset local variable (0xFE bytes:
    -1.7e38 as a float, -5.3e303 as a double) says so; a plainly wrong value does not."""
    from coursekit import testing

    ref = torch.rand(2, 30, dtype=torch.float64) + 1
    check = {torch.float64: lambda out: testing.assert_float64(out, ref),
             torch.float32: lambda out: testing.assert_close(out, ref)}.get(dtype, lambda out: testing.assert_rounded(out, ref))
    unset = ref.clone()
    unset[1, 4:] = -5.3e303 if dtype == torch.float64 else -1.7e38
    message = _failure(lambda: check(unset.to(dtype)))
    assert testing.FAR_ADVICE in message and testing.UNSET_ADVICE in message, message
    wrong = ref.clone()
    wrong[1, 4:] += 7
    message = _failure(lambda: check(wrong.to(dtype)))
    assert testing.FAR_ADVICE in message and testing.UNSET_ADVICE not in message, message


def test_advice_in_the_chapter_checks():
    """The chapters' own float64 and GELU checks size their advice the same way."""
    import importlib

    from coursekit import testing

    sys.path.insert(0, str(ROOT / "tests"))
    try:
        t06 = importlib.import_module("test_06_upsample")
        t05 = importlib.import_module("test_05_autograd")
    finally:
        sys.path.remove(str(ROOT / "tests"))
    ref = torch.rand(3, 40, dtype=torch.float64) + 1
    for check in (lambda o: t06.assert_close64(o, ref, "out"), lambda o: t05.assert_f64(o, ref, "out")):
        small = _failure(lambda: check(ref.float().double()))
        assert testing.PRECISION_ADVICE[torch.float64] in small and testing.FAR_ADVICE not in small, small
        large = _failure(lambda: check(ref + 0.59))
        assert testing.FAR_ADVICE in large and not any(w in large for w in PRECISION_WORDS), large


def test_most_telling_failure_is_shown_first():
    """Of an exercise's failures, the report shows one that names a place with got and expected, on the
    smallest case, before a bare relative error over a whole tensor, whatever the test order."""
    failed = [("t.py::test_big[float32]", "failed", "AssertionError: gather: relative error 0.38 > tolerance 1e-05"),
              ("t.py::test_big[float64]", "failed", "AssertionError: gather: 900 of 1200 elements are off by more "
               "than 1e-12: the values are far off ... First wrong at (0, 1, 2, 3): got 0.5, expected 0.25"),
              ("t.py::test_worked_example", "failed", "AssertionError: grad_in: 1 of 4 elements differ; worst at (0,): "
               "got -0.2, expected 0.0"),
              ("t.py::test_checks", "failed", "AssertionError: the call returned normally")]
    messages = {row[0]: row[2] for row in failed}
    assert grading.most_telling(failed, messages)[0] == "t.py::test_worked_example"
    assert grading.most_telling(failed[:2], messages)[0] == "t.py::test_big[float64]"
    assert grading.most_telling([failed[0], failed[3]], messages)[0] == "t.py::test_big[float32]"  # test order
    doc = {"exercises": {"x": [(r[0], r[1], r[2].splitlines()[0]) for r in failed]}, "messages": messages}
    verdict = grading._verdict_from("x", doc, "", gpu=False)
    assert verdict.first == "test_worked_example" and "at (0,)" in " ".join(verdict.message), verdict


def test_a_crash_names_the_signal_and_the_test():
    """A test process killed inside compiled code (a segfault, faulthandler's report in the log) gets
    a verdict naming the signal and the test that was running, with what usually causes it, not the
    last lines of the stack (pytest's own frames)."""
    log = ("F..Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n"
           '  File "/x/06_upsample/upsample.py", line 175 in _launch\n'
           '  File "/x/tests/test_06_upsample.py", line 249 in check_backward\n'
           '  File "/x/tests/test_06_upsample.py", line 802 in test_backward_cpu\n'
           '  File "/x/site-packages/_pytest/python.py", line 187 in pytest_pyfunc_call\n')
    verdict = grading._verdict_from("x", None, log, gpu=False)
    assert verdict.status == "NOT YET", verdict
    assert verdict.summary == ("the tests crashed (Segmentation fault) in test_backward_cpu "
                               "(tests/test_06_upsample.py, line 802)"), verdict.summary
    assert "outside a tensor or a buffer" in " ".join(verdict.message), verdict.message
    build = grading._verdict_from("x", None, "error: expected ';' before '}' token\n", gpu=False)
    assert build.summary.startswith("the build failed") and "expected ';'" in " ".join(build.message), build


def test_property_and_mask_messages_show_the_values():
    """A string or layout comparison shows what the code produced, whole, naming the property; a mask
    comparison shows the first wrong element, its values and the input there."""
    from coursekit import testing

    got, want = "Tensor(Double, shape=(7,), device=cpu)", "Tensor(Double, shape=(7), device=cpu)"
    text = _failure(lambda: testing.assert_property(got, want, "the string", "describe"))
    assert repr(got) in text and repr(want) in text and "character 23" in text, text
    text = _failure(lambda: testing.assert_property((1, 4), (6, 1), "strides", "echo"))
    assert "echo: strides (1, 4), expected (6, 1)" in text, text
    x = torch.tensor([0.5, 1.5, 2.5, 3.5])
    text = _failure(lambda: testing.assert_mask(x > 2, x > 1, "mask", inputs=x))
    assert "1 of 4 elements wrong; first at (1,): got False, expected True (input 1.5)" in text, text


def test_thread_judge_reads_thread_sanitizer_reports(tmp_path):
    """coursekit/races.py turns ThreadSanitizer's reports into one message per pair of places: the
    learner's file, line and code, what the shared memory is (a static, a buffer allocated before
    the threads, the caller's local), the same pair once however many dtypes repeat it."""
    from coursekit import races

    csrc = tmp_path / "csrc"
    csrc.mkdir()
    (csrc / "k.cpp").write_text("int a;\nvoid f() {\n  w[0] = 1;\n  x = w[0];\n}\n")
    frame = "    #0 operator() {path}:{line} (prog+0x12)\n    #1 std::thread::_M_run /usr/include/c++/12/thread:10 (prog+0x3)\n"

    def report(first, second, location):
        return ("==================\nWARNING: ThreadSanitizer: data race (pid=1)\n"
                f"  Write of size 4 at 0x7f00 by thread T2:\n{frame.format(path=csrc / 'k.cpp', line=first)}\n"
                f"  Previous {second[0]} of size 4 at 0x7f00 by thread T1:\n{frame.format(path=csrc / 'k.cpp', line=second[1])}\n"
                f"  Location is {location}\n\nSUMMARY: ThreadSanitizer: data race\n==================\n")

    text = (report(3, ("write", 3), "global 'f()::{lambda(long, long)#1}::w' of size 32 at 0x55 (prog+0x9)")
            + report(3, ("write", 3), "global 'f<double>()::w' of size 64 at 0x56 (prog+0x9)")  # another dtype
            + report(3, ("read", 4), "heap block of size 800 at 0x7b00 allocated by main thread:")
            + report(3, ("write", 3), "stack of main thread."))
    found = races.parse(text, csrc)
    assert len(found) == 2, found  # the first two are one pair of places; the fourth is the same pair too
    assert "two threads write `w` (a static or global variable) at k.cpp:3 (`w[0] = 1;`) at once" in found[0].message()
    assert found[1].memory.startswith("a heap block of 800 bytes allocated before parallel_for")
    assert "while another reads it at k.cpp:4 (`x = w[0];`)" in found[1].message()
    assert races.parse("no report", csrc) == []
    # An access made in a library (no frame in the chapter's sources): its place is not taken from the
    # report's later sections, such as the stack that created a thread (the call of parallel_for).
    library = ("==================\nWARNING: ThreadSanitizer: data race (pid=1)\n"
               f"  Read of size 2 at 0x7f00 by thread T2:\n{frame.format(path=csrc / 'k.cpp', line=4)}\n"
               "  Previous write of size 8 at 0x7f00 by thread T9:\n    #0 memcpy /src/tsan_interceptors.cpp:80 (libtsan+0x1)\n"
               "    #1 at::native::copy_kernel /src/Copy.cpp:12 (libtorch_cpu.so+0x2)\n\n"
               "  Location is heap block of size 800 at 0x7b00 allocated by main thread:\n    #0 malloc x.cpp:1 (libtsan+0x3)\n\n"
               f"  Thread T2 (tid=3, running) created by main thread at:\n{frame.format(path=csrc / 'k.cpp', line=2)}\n"
               "SUMMARY: ThreadSanitizer: data race\n==================\n")
    (race,) = races.parse(library, csrc)
    message = race.message()
    assert "k.cpp:2" not in message and "tsan_interceptors.cpp:80 (outside the chapter's code, in memcpy)" in message, message


@pytest.mark.parametrize("depflag", [["-MD", "-MF"], ["--generate-dependencies-with-compile", "--dependency-output"]])
def test_nvcc_cache_hit_names_the_headers(tmp_path, depflag):
    """coursekit/nvcc_cache.py (the GPU self-check's object cache): a hit writes the dependency file
    ninja asked for, naming the source and the headers it includes from its folder. Without it ninja
    records no header for the object, and a composite whose only change is a header (a header
    exercise's stub) linked the object of the previous composite."""
    fake = tmp_path / "nvcc"  # a stand-in compiler: the object is the source and its header, as text
    fake.write_text("#!/bin/sh\nwhile [ $# -gt 0 ]; do case $1 in -o) o=$2; shift;; -c) c=$2; shift;; esac; shift; done\n"
                    'cat "$c" "$(dirname "$c")/k.h" > "$o"\n')
    fake.chmod(0o755)
    env = dict(os.environ, COURSE_NVCC_CACHE=str(tmp_path / "cache"))
    objects = []
    for folder, header in (("a", "first"), ("b", "first"), ("c", "second")):
        csrc = tmp_path / folder / "csrc"
        csrc.mkdir(parents=True)
        (csrc / "k.cu").write_text('#include "k.h"\n')
        (csrc / "k.h").write_text(header + "\n")
        out, dep = tmp_path / folder / "k.o", tmp_path / folder / "k.o.d"
        subprocess.run([sys.executable, str(ROOT / "coursekit" / "nvcc_cache.py"), str(fake), depflag[0], depflag[1],
                        str(dep), f"-I{csrc}", "-c", str(csrc / "k.cu"), "-o", str(out)], env=env, check=True)
        objects.append(out.read_text())
    assert objects == ['#include "k.h"\nfirst\n'] * 2 + ['#include "k.h"\nsecond\n']  # b: a hit; c: the header differs
    assert (tmp_path / "b" / "k.o.d").read_text().split() == [str(tmp_path / "b" / "k.o") + ":",
                                                              str(tmp_path / "b" / "csrc" / "k.cu"),
                                                              str(tmp_path / "b" / "csrc" / "k.h")]


def test_ledger_status_counts_what_holds(monkeypatch):
    """`python -m coursekit.ledger_status` (which GPU records still hold, on a machine without one): in a
    ledger of chapter 01's GPU cases, a record passed under the key a GPU computes holds; one under
    another key, a failed one and a missing one are left, each said why."""
    from coursekit import ledger_status

    chapter = chapters.find("01")
    cases = ledger_status.gpu_cases(chapter)
    assert len(cases) >= 3 and cases[0][0].startswith("01-stubs:")
    saved = selfcheck.GPU, selfcheck.CUDA_TESTS_ONLY
    with monkeypatch.context() as gpu:  # the keys as a GPU's run computes them
        gpu.setattr(selfcheck, "GPU", True)
        gpu.setattr(selfcheck, "CUDA_TESTS_ONLY", True)
        keys = [selfcheck.case_key(chapter, variant) for _, variant in cases]
    ledger = {cases[0][0]: {"key": keys[0], "outcome": "passed"},
              cases[1][0]: {"key": "0" * 16, "outcome": "passed"},
              cases[2][0]: {"key": keys[2], "outcome": "failed"}}
    held, left = ledger_status.status(ledger)["01"]
    assert held == 1
    assert left[:2] == [f"{cases[1][0]} (recorded for other code)", f"{cases[2][0]} (failed)"]
    assert all(case.endswith("(no record)") for case in left[2:]) and len(left) == len(cases) - 1
    assert (selfcheck.GPU, selfcheck.CUDA_TESTS_ONLY) == saved
