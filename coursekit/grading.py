"""Grading: one verdict per exercise, from that exercise alone.

To grade exercise X of a learner's workspace, the grader builds a *composite*: the
chapter's own solution with only X's regions replaced by the learner's code (see
`exercises.splice`), then runs only the tests that grade X (`--exercise X`, every graded
test belongs to exactly one exercise). A wrong X therefore makes X, and only X, NOT YET,
and an unsolved Y cannot hide X's verdict.

Cost: a composite whose C++ equals the chapter's reuses the chapter's build
(`build.build` notices); the others are built in one folder per workspace under
.build/grade/, incrementally: only the files that differ from the last composite built
there are recompiled. Verdicts are cached by the content of everything they depend on,
so an exercise whose code did not change is not graded again.

On a machine with a CUDA toolkit but no GPU, an exercise whose code nvcc compiles is
also compiled for CUDA, so a syntax error in a .cu file is reported against its
exercise ("compiled; not run: no GPU"). Where the GPU-free judge covers a CUDA exercise
(coursekit/emulate.py), its emulated tests grade it on the CPU ("emulated").
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import ROOT, chapters, exercises

GRADE_ROOT = ROOT / ".build" / "grade"
NVCC_SUFFIXES = {".cu", ".cuh", ".h"}  # headers are included by the .cu files too


@dataclass
class Verdict:
    exercise: str
    status: str  # "PASS", "NOT YET", "compiled", "not checked"
    summary: str = ""  # one line: counts, or why not checked
    first: str = ""  # the failing test shown: the most telling (most_telling)
    message: list[str] = field(default_factory=list)  # its message, a few lines
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    log: str = ""  # the full output, for -v

    def to_json(self) -> dict:
        return asdict(self)  # a copy: the grader amends a verdict after caching it

    @classmethod
    def from_json(cls, doc: dict) -> "Verdict":
        return cls(**doc)


# ----------------------------------------------------------------------------
# Regions: the chapter's, the stubs', the learner's.


def _by_exercise(src: Path, parse) -> dict[str, dict[str, list[list[str]]]]:
    """{exercise: {relative file: [body, ...]}} for every fenced region under `src`."""
    found: dict[str, dict[str, list[list[str]]]] = {}
    for f in exercises.source_files(src):
        rel = str(f.relative_to(src))
        for region in parse(f.read_text(), Path(rel)):
            found.setdefault(region.name, {}).setdefault(rel, []).append(region.body)
    return found


def solution_bodies(chapter: chapters.Chapter) -> dict[str, dict[str, list[list[str]]]]:
    return _by_exercise(chapter.path, exercises.solution_regions)


def stub_bodies(chapter: chapters.Chapter) -> dict[str, dict[str, list[list[str]]]]:
    out: dict[str, dict[str, list[list[str]]]] = {}
    readme = f"{chapter.dirname}/README.md"
    for f in exercises.source_files(chapter.path):
        rel = str(f.relative_to(chapter.path))
        text, _ = exercises.strip_solutions(f.read_text(), Path(rel), readme)
        for region in exercises.workspace_regions(text, Path(rel)):
            out.setdefault(region.name, {}).setdefault(rel, []).append(region.body)
    return out


def learner_bodies(chapter: chapters.Chapter, workspace: Path) -> dict[str, dict[str, list[list[str]]]]:
    """The learner's regions, checked against the chapter's: same exercises, same files, same counts."""
    mine = _by_exercise(workspace, exercises.workspace_regions)
    theirs = solution_bodies(chapter)
    for name, files in theirs.items():
        for rel, bodies in files.items():
            have = len(mine.get(name, {}).get(rel, []))
            if have != len(bodies):
                raise exercises.ExerciseError(
                    f"{workspace.name}/{rel}: expected {len(bodies)} region(s) fenced 'BEGIN EXERCISE {name}' ... "
                    f"'END EXERCISE {name}', found {have}.\n"
                    f"  Put the fence lines back (write your code between them), or start the file over:\n"
                    f"  ./course exercise {chapter.number} --force  (copy your code somewhere first)")
    extra = set(mine) - set(theirs)
    if extra:
        raise exercises.ExerciseError(f"{workspace}: unknown exercises {sorted(extra)}; is this workspace from "
                                      f"another version of the chapter? ./course exercise {chapter.number} --force")
    return mine


def exercise_names(chapter: chapters.Chapter) -> list[str]:
    """The chapter's exercises in the order they appear (files sorted)."""
    names: list[str] = []
    for name in solution_bodies(chapter):
        if name not in names:
            names.append(name)
    return names


# ----------------------------------------------------------------------------
# Composites.


def composite(chapter: chapters.Chapter, name: str, bodies: dict[str, list[list[str]]], dest: Path) -> dict:
    """Write the chapter with exercise `name`'s regions replaced by `bodies` into `dest`.

    Returns {relative file: [(first line, number of lines, index)]}, where the learner's code landed.
    """
    spans: dict[str, list] = {}

    def transform(rel: Path, text: str) -> str:
        key = str(rel)
        if key not in bodies:
            return text
        new, where = exercises.splice(text, rel, name, bodies[key])
        spans[key] = where
        return new

    exercises.copy_chapter(chapter.path, dest, transform)
    return spans


def _digest(paths: list[Path], extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for p in paths:
        h.update(str(p.name).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def _verdict_key(chapter: chapters.Chapter, source: Path, name: str, mode: str) -> str:
    import torch

    files = exercises.source_files(source)
    deps = [chapter.test_file, ROOT / "tests" / "conftest.py", ROOT / "coursekit" / "testing.py",
            ROOT / "coursekit" / "build.py", ROOT / "coursekit" / "emulate.py"]
    deps += sorted((ROOT / "coursekit" / "emu").iterdir())  # the GPU-free judge grades too
    return _digest(files + deps, f"{chapter.dirname}|{name}|{mode}|{torch.__version__}|"
                                 + "|".join(str(f.relative_to(source)) for f in files))


# ----------------------------------------------------------------------------
# Running.


def _python_env(cuda_build: bool) -> dict:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if not cuda_build:
        env.pop("FORCE_CUDA", None)
        env["COURSE_BUILD"] = "cpu"
    return env


def _map_lines(text: str, src: Path, workspace: Path | None, name: str, spans: dict) -> str:
    """Rewrite `composite/file:LINE` in compiler output to the learner's `workspace/file:LINE`."""
    if workspace is None or not spans:
        return text
    shown = workspace.relative_to(ROOT) if workspace.is_relative_to(ROOT) else workspace

    def fix(m):
        rel, line = m.group(1), int(m.group(2))
        for start, count, k in spans.get(rel, []):
            if start <= line < start + count:
                mine = [r for r in exercises.workspace_regions((workspace / rel).read_text(), Path(rel)) if r.name == name]
                return f"{shown}/{rel}:{mine[k].line + line - start}"
        return f"{shown}/{rel}:{line} (in the chapter's code, outside exercise {name})"

    return re.sub(re.escape(str(src)) + r"/([\w./-]+):(\d+)", fix, text)


def build_in_subprocess(source: Path, cuda: bool, quiet: bool = False) -> tuple[bool, str]:
    """Build `source` in a fresh Python (a module of the same name may be loaded here). Returns (ok, message)."""
    env = _python_env(cuda)
    if cuda:
        env["FORCE_CUDA"] = "1"
        env.pop("COURSE_BUILD", None)
    code = ("import sys; from coursekit import build, toolkit\n"
            "try:\n    build.build(sys.argv[1], progress=True)\n"
            "except (build.BuildError, toolkit.SetupError) as e:\n    print(e); sys.exit(3)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(source)], cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=None if not quiet else subprocess.DEVNULL)
    return proc.returncode == 0, proc.stdout


def emulated_build_in_subprocess(chapter: chapters.Chapter, source: Path) -> tuple[bool, str]:
    """Build the GPU-free judge of `source` (coursekit/emulate.py) in a fresh Python. Returns (ok, message)."""
    code = ("import sys; from coursekit import emulate\n"
            "try:\n    emulate.build(sys.argv[1], sys.argv[2])\n"
            "except Exception as e:\n    print(e); sys.exit(3)\n")
    proc = subprocess.run([sys.executable, "-c", code, chapter.number, str(source)], cwd=ROOT, env=_python_env(False),
                          text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return proc.returncode == 0, proc.stdout


def _emulated(chapter: chapters.Chapter, bodies: dict) -> bool:
    """Does the GPU-free judge compile a file of this exercise?"""
    from . import emulate

    spec = emulate.SPECS.get(chapter.number)
    return spec is not None and any(Path(rel).name in spec["sources"] for rel in bodies)


def _build_failed(log: str) -> bool:
    """Did this test run stop because the extension did not build (coursekit.build.BuildError)?"""
    return re.search(r"building \S+ failed:", log) is not None or "Error building extension" in log


def run_tests(chapter: chapters.Chapter, source: Path, name: str | None, report: Path, *,
              cuda_build: bool, stop_first: bool = False, marker: str | None = None,
              keyword: str | None = None) -> tuple[dict | None, str]:
    """Run the chapter's tests (those of exercise `name`, or all; with `marker`, only those it marks;
    with `keyword`, only those pytest's -k selects) against `source`."""
    report.parent.mkdir(parents=True, exist_ok=True)
    report.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", str(chapter.test_file), "--source", str(source),
           "--course-report", str(report), "-q", "-p", "no:cacheprovider", "-m", "not graders and not aot" + (f" and {marker}" if marker else ""),
           "--tb=short", "-rN"]
    if name:
        cmd += ["--exercise", name]
    if keyword:
        cmd += ["-k", keyword]
    if stop_first:
        cmd.append("-x")
    proc = subprocess.run(cmd, cwd=ROOT, env=_python_env(cuda_build), capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    if not report.is_file():
        if _build_failed(log) or "Traceback" not in log:
            return None, log
        raise RuntimeError(f"the tests of {chapter.dirname} did not run (exit {proc.returncode}):\n{log[-3000:]}")
    doc = json.loads(report.read_text())
    if proc.returncode not in (0, 5) and not doc["outcomes"]:
        if _build_failed(log):
            return None, log  # stopped before any test ran: the build failed
        raise RuntimeError(f"the tests of {chapter.dirname} did not run (exit {proc.returncode}):\n{log[-3000:]}")
    return doc, log


def _message_lines(message: str, limit: int = 12, width: int = 110) -> list[str]:
    """The first message, whole: long lines wrapped (never cut mid-sentence), at most `limit` lines."""
    import textwrap

    lines = [ln.rstrip() for ln in message.splitlines() if ln.strip()]
    # pytest's assertion rewriting appends "assert ..." introspection after our own message; keep ours.
    keep = []
    for ln in lines:
        if keep and ln.lstrip().startswith(("assert ", "+  where", "where ", "+")):
            break
        indent = ln[:len(ln) - len(ln.lstrip())]
        keep += textwrap.wrap(ln, width, subsequent_indent=indent + "  ", break_on_hyphens=False) or [ln]
    if len(keep) > limit:
        keep = keep[:limit - 1] + ["  ... (./course grade -v shows the whole report)"]
    return keep


_LOCATED = re.compile(r"\bat \(|\bat x = |first at |flat index \d|, thread \(")
_SIZE = re.compile(r"\b\d+ of (\d+)\b")


def telling_rank(message: str) -> tuple[int, int]:
    """How well a failure message points at the bug, smaller first: (kind, size).

    kind 0: a place (an index, a thread) and what was got there; 1: a place; 2: got and expected,
    no place; 3: the rest (a relative error over a whole tensor, an exception). size: the number of
    elements of the case ("3 of 40 elements ..."), the smallest case being the easiest to follow."""
    text = message.lower()
    place, got = _LOCATED.search(message) is not None, "got" in text
    kind = 0 if place and got else 1 if place else 2 if got and "expected" in text else 3
    sizes = [int(m.group(1)) for m in _SIZE.finditer(message)]
    return kind, min(sizes) if sizes else 1 << 62


def most_telling(failed: list, messages: dict) -> list:
    """The failure to show first, of rows (nodeid, outcome, first line) in test order: the one whose
    message names a place with got and expected, then the smallest case, then the earliest test."""
    def key(item):
        i, row = item
        return telling_rank(messages.get(row[0], row[2])), i

    return min(enumerate(failed), key=key)[1]


_FATAL = re.compile(r"Fatal Python error: ([^\n]+)")
_TEST_FRAME = re.compile(r'File "[^"]*[/\\](tests[/\\]test_\w+\.py)", line (\d+) in (test_\w+)')


def _crash(log: str) -> tuple[str, list[str]] | None:
    """A test process killed by a signal (faulthandler's report in the log): the summary and message
    naming the signal and the test that was running, or None."""
    fatal = _FATAL.search(log)
    if fatal is None:
        return None
    frame = _TEST_FRAME.search(log, fatal.end())
    where = f" in {frame.group(3)} ({frame.group(1)}, line {frame.group(2)})" if frame else ""
    signal = fatal.group(1).strip()
    return (f"the tests crashed ({signal}){where}",
            [f"{signal}{where}: the process died inside compiled code, so no test could report.",
             "A read or write outside a tensor or a buffer of your code (an index or a range past its end, "
             "a table indexed the wrong way round) is the usual cause; ./course grade -v shows the stack."])


def _verdict_from(name: str, doc: dict | None, log: str, gpu: bool) -> Verdict:
    if doc is None:
        crash = _crash(log)
        if crash is not None:
            return Verdict(name, "NOT YET", crash[0], message=_message_lines("\n".join(crash[1])), log=log)
        build_error = log.strip().splitlines()
        return Verdict(name, "NOT YET", "the build failed, or the tests crashed before they could report",
                       message=build_error[-12:], log=log)
    rows = doc["exercises"].get(name, [])
    passed = [r[0] for r in rows if r[1] == "passed"]
    failed = [r for r in rows if r[1] in ("failed", "error")]
    skipped = [r for r in rows if r[1] == "skipped"]
    if failed:
        nodeid, _, message = most_telling(failed, doc.get("messages", {}))[:3]
        full = doc.get("messages", {}).get(nodeid, message)
        return Verdict(name, "NOT YET", f"{len(failed)} of {len(failed) + len(passed)} tests fail",
                       first=nodeid.split("::", 1)[-1], message=_message_lines(full),
                       passed=passed, failed=[r[0] for r in failed], log=log)
    if passed:
        extra = f", {len(skipped)} skipped (need a GPU)" if skipped and not gpu else ""
        if not gpu and any("emulated" in p for p in passed):
            extra += ("; CUDA code emulated on the CPU (results, bounds, unwritten outputs and the launch checked; "
                      "a GPU adds speed and the real memory system)")
        return Verdict(name, "PASS", f"{len(passed)} tests pass{extra}", passed=passed, log=log)
    why = skipped[0][2] if skipped else "no test grades it here"
    return Verdict(name, "not checked", why, log=log)


def grade(chapter: chapters.Chapter, workspace: Path | None, *, only: list[str] | None = None,
          run_stubs: bool = False, compile_cuda: bool | None = None, progress=None,
          stop_first: bool = False, marker: str | None = None) -> list[Verdict]:
    """Grade each exercise of `workspace` (None: the chapter's own solution) alone.

    stop_first: stop an exercise's tests at its first failure (the self-check only needs one).
    marker: only the tests it marks ("cuda": the GPU self-check, whose CPU half CI checks)."""
    import torch

    from . import toolkit

    say = progress or (lambda msg: None)
    gpu = torch.cuda.is_available()
    plan = toolkit.plan_build()
    cuda_build = plan.cuda and gpu  # tests run on what the machine can run
    if compile_cuda is None:  # a toolkit but no GPU: still compile the CUDA code
        compile_cuda = not gpu and torch.version.cuda is not None and toolkit.find_toolkit() is not None
    names = exercise_names(chapter)
    if only:
        unknown = [n for n in only if n not in names]
        if unknown:
            raise exercises.ExerciseError(f"chapter {chapter.number} has no exercise {', '.join(unknown)}; "
                                          f"its exercises: {', '.join(names)}")
        names = [n for n in names if n in only]
    solution = solution_bodies(chapter)
    stubs = stub_bodies(chapter)
    mine = solution if workspace is None else learner_bodies(chapter, workspace)
    tag = hashlib.sha1(str((workspace or chapter.path).resolve()).encode()).hexdigest()[:8]
    cache_path = GRADE_ROOT / "verdicts.json"
    try:
        cache = json.loads(cache_path.read_text())
    except (OSError, ValueError):
        cache = {}
    verdicts = []
    for name in names:
        bodies = mine[name]
        if bodies == stubs[name] and not run_stubs:
            verdicts.append(Verdict(name, "NOT YET", "not started: the region still holds the TODO stub",
                                    message=[f"write your code between BEGIN EXERCISE {name} and END EXERCISE "
                                             f"(spec: {chapter.dirname}/README.md, exercise {name})"]))
            continue
        if bodies == solution[name]:
            source, spans = chapter.path, {}
        else:
            # One folder for all composites of this workspace: going from one exercise's
            # composite to another's rewrites only the files that differ, so ninja
            # recompiles one or two files instead of building a fresh folder per exercise.
            source = GRADE_ROOT / tag / chapter.dirname
            spans = composite(chapter, name, bodies, source)
        mode = (("cuda" if cuda_build else "cpu") + ("-x" if stop_first and source != chapter.path else "")
                + (f"-m {marker}" if marker else ""))
        key = _verdict_key(chapter, source, name, mode)
        if key in cache:
            verdict = Verdict.from_json(cache[key])
        else:
            say(f"grading {name}")
            # Build first, in its own process, to show progress and map compile errors to the
            # learner's file; the self-check (stop_first) lets the test run build instead.
            ok, build_log = build_in_subprocess(source, cuda_build) if not stop_first else (True, "")
            what = "does not compile"
            if ok and not gpu and _emulated(chapter, bodies) and source != chapter.path:
                # the GPU-free judge's build of the CUDA code for the CPU: its errors, on the learner's lines
                say(f"compiling {name} for the GPU-free judge")
                ok, build_log = emulated_build_in_subprocess(chapter, source)
                what = "does not compile (the CUDA code, built for the GPU-free judge)"
            if not ok:
                verdict = Verdict(name, "NOT YET", what,
                                  message=_compile_message(_map_lines(build_log, source, workspace, name, spans)),
                                  log=build_log)
            else:
                doc, log = run_tests(chapter, source, name, GRADE_ROOT / tag / f"{name}.json", cuda_build=cuda_build,
                                     stop_first=stop_first and source != chapter.path, marker=marker)
                verdict = _verdict_from(name, doc, log, gpu)
            cache[key] = verdict.to_json()
        # nvcc without a GPU: for CUDA files (.cu, .cuh) the GPU-free judge does not compile already;
        # a header exercise (.h) is compiled by the CPU build, and its CUDA users are the chapter's.
        nvcc_files = [rel for rel in bodies if Path(rel).suffix in NVCC_SUFFIXES - {".h"}]
        if _emulated(chapter, bodies):
            nvcc_files = []
        if compile_cuda and nvcc_files and source != chapter.path and verdict.status != "NOT YET":
            ckey = _verdict_key(chapter, source, name, "nvcc")
            if ckey not in cache:
                say(f"compiling {name} with nvcc (no GPU to run it)")
                ok, build_log = build_in_subprocess(source, cuda=True)
                cache[ckey] = {"ok": ok, "log": build_log}
            if not cache[ckey]["ok"]:
                log = cache[ckey]["log"]
                verdict = Verdict(name, "NOT YET", "the CUDA code does not compile",
                                  message=_compile_message(_map_lines(log, source, workspace, name, spans)), log=log)
            elif verdict.status == "not checked":
                verdict = Verdict(name, "compiled", "compiled for CUDA; not run: no GPU", log=verdict.log)
            elif "emulated" in verdict.summary:
                verdict.summary += "; nvcc compiles it too"
            else:
                verdict.summary += "; CUDA code compiled, not run: no GPU"
        verdicts.append(verdict)
    _save_cache(cache_path, cache)
    return verdicts


def _save_cache(path: Path, cache: dict) -> None:
    """Merge into the file and replace it atomically: several graders may run at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        merged = json.loads(path.read_text())
    except (OSError, ValueError):
        merged = {}
    merged.update(cache)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(merged))
    os.replace(tmp, path)


# A compiler's diagnostic: g++ "file:LINE:COL: error: ...", nvcc "file(LINE): error: ...".
_DIAGNOSTIC = re.compile(r"(:\d+(:\d+)?: (fatal )?error:|\(\d+\): error)")


def _compile_message(text: str) -> list[str]:
    """The first compiler error, whole (wrapped, not cut). An error inside a header that the
    learner's code instantiated (a template of the GPU-free judge, say) comes after the first
    "required from" line, which names the learner's line."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    first = next((i for i, ln in enumerate(lines) if _DIAGNOSTIC.search(ln)), None)
    if first is None:  # no diagnostic: a linker or build-system error, at the end
        errors = [i for i, ln in enumerate(lines) if re.search(r"\berror\b", ln) and "Error building" not in ln]
        start = errors[0] if errors else max(len(lines) - 6, 0)
        return _message_lines("\n".join(lines[start:start + 6]), limit=12)
    shown = [lines[first]]
    context = [ln for ln in lines[max(0, first - 12):first] if "required from" in ln]
    if context:
        shown.insert(0, context[0].split("’")[0] + ("’" if "’" in context[0] else ""))
    if not re.search(r"coursekit[/\\]emu[/\\]", lines[first]):  # the source line and caret, where they are the learner's
        shown += [ln for ln in lines[first + 1:first + 4] if ln.startswith(" ") and not _DIAGNOSTIC.search(ln)][:3]
    return _message_lines("\n".join(shown), limit=12)


def format_table(chapter: chapters.Chapter, verdicts: list[Verdict], verbose: bool = False) -> str:
    """The grade report: one line per exercise, then the first message of each that is not done."""
    width = max([len(v.exercise) for v in verdicts] + [8])
    out = [f"{'exercise':{width}s}  {'verdict':11s}  details"]
    for v in verdicts:
        out.append(f"{v.exercise:{width}s}  {v.status:11s}  {v.summary}")
    todo = [v for v in verdicts if v.status == "NOT YET" and (v.message or v.first) and not v.summary.startswith("not started")]
    for v in todo:
        out.append("")
        out.append(f"{v.exercise}: " + (f"failing test: {v.first}" if v.first else v.summary))
        out += ["  " + ln for ln in v.message]  # at most 12 lines, never cut mid-sentence (_message_lines)
    if verbose:
        for v in verdicts:
            if v.log:
                out += ["", f"---- {v.exercise}: full output", v.log.rstrip()]
    done = sum(v.status == "PASS" for v in verdicts)
    fresh = [v.exercise for v in verdicts if v.summary.startswith("not started")]
    if fresh:
        out.append("")
        out.append(f"Not started: each exercise's spec is in {chapter.dirname}/README.md (section Exercises); "
                   f"hints: ./course hint {chapter.number} {fresh[0]}")
    out.append("")
    out.append(f"{done} of {len(verdicts)} exercises pass." + ("" if verbose else "  More detail: add -v."))
    return "\n".join(out)
