"""The thread judge: a chapter's CPU kernels run under ThreadSanitizer.

A CPU kernel split by parallel_for over threads can be wrong in a way no value test sees: a
variable that every task writes (declared `static`, global, or outside the lambda and captured by
reference) is shared by the threads, and two tasks that write it at the same moment mix their
values. The window is a few nanoseconds, so the results are almost always right. ThreadSanitizer
does not wait for the bad moment: it records which thread touched which memory, and what orders
the threads (a thread's start and end, a lock), and reports two accesses of one place, one of them
a write, with nothing between them.

How: the chapter's CPU files that hold the exercise (the learner's composite, when grading) are
compiled with -fsanitize=thread, unchanged but for one header included first (tsan/parallel.h),
which makes parallel_for run its chunks on threads of its own (torch's pool synchronises in ways
ThreadSanitizer cannot see). A small main() (tsan/harness_NN.cpp) calls the kernels on inputs of
several chunks, in every dtype; the program is linked against libtorch. Object files are cached
by their sources, so a regrade compiles only the file that changed.

    from coursekit import races
    found = races.check("02", source_folder)   # [] when no race
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import ROOT, chapters

TSAN = Path(__file__).resolve().parent / "tsan"
BUILD = ROOT / ".build" / "tsan"
FLAGS = ["-std=c++20", "-O0", "-g", "-fsanitize=thread", "-fno-omit-frame-pointer", "-fPIC"]
# What each chapter's judge compiles: its CPU files with a parallel_for whose body holds an
# exercise (with what they call), and the harness that calls them.
SPECS = {
    "02": {"sources": ["trilinear_cpu.cpp"], "harness": "harness_02.cpp"},
    "04": {"sources": ["trilinear_cpu.cpp"], "harness": "harness_04.cpp"},
    "06": {"sources": ["ops.cpp", "upsample_cpu.cpp", "upsample_cpu_nhwc.cpp"], "harness": "harness_06.cpp"},
}


@functools.lru_cache(maxsize=None)
def unavailable() -> str | None:
    """Why this machine cannot run the judge, or None."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return f"ThreadSanitizer runs here on Linux x86-64 and AArch64 only (this is {platform.system()} {platform.machine()})"
    cxx = os.environ.get("CXX", "c++")
    # A program with a thread, compiled and run: ThreadSanitizer can also fail at run time (an
    # address-space layout it does not expect: "FATAL: ThreadSanitizer: unexpected memory mapping").
    probe = BUILD / f"probe-{os.getpid()}"
    probe.parent.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run([cxx, "-fsanitize=thread", "-x", "c++", "-", "-o", str(probe), "-lpthread"],
                              input="#include <thread>\nint main() { int x = 0; std::thread t([&] { x = 1; }); "
                                    "t.join(); return x - 1; }\n", capture_output=True, text=True)
        if proc.returncode != 0:
            return f"{cxx} cannot link with -fsanitize=thread (is libtsan installed?): {proc.stderr.strip()[-300:]}"
        run = subprocess.run([str(probe)], capture_output=True, text=True, timeout=60)
        if run.returncode != 0:
            return f"a ThreadSanitizer program does not run here: {run.stderr.strip()[-300:]}"
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"no working C++ compiler or ThreadSanitizer ({e})"
    finally:
        probe.unlink(missing_ok=True)
    return None


def _local_includes(path: Path, folders: list[Path], seen: set[Path]) -> None:
    """path and every file it includes with "..." from `folders`, recursively, into seen."""
    if path in seen:
        return
    seen.add(path)
    for name in re.findall(r'^\s*#\s*include\s*"([^"]+)"', path.read_text(), re.M):
        for folder in (path.parent, *folders):
            if (folder / name).is_file():
                _local_includes((folder / name).resolve(), folders, seen)
                break


def _compile(cxx: str, source: Path, flags: list[str], folders: list[Path]) -> Path:
    """The object file of `source`, compiled unless the cache holds one of the same sources and flags."""
    files: set[Path] = set()
    _local_includes(source.resolve(), folders, files)
    files.update(TSAN.iterdir())  # the judge's own headers (parallel.h comes in through -include)
    digest = hashlib.sha1(" ".join([cxx, *flags]).encode())
    for f in sorted(files):
        digest.update(f.name.encode() + f.read_bytes())
    obj = BUILD / "objects" / f"{source.stem}-{digest.hexdigest()[:12]}.o"
    if not obj.is_file():
        obj.parent.mkdir(parents=True, exist_ok=True)
        tmp = obj.with_suffix(f".{os.getpid()}.tmp")  # renamed when done: parallel builds are harmless
        proc = subprocess.run([cxx, *flags, "-c", str(source), "-o", str(tmp)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"the thread judge could not compile {source.name}:\n{proc.stderr[-4000:]}")
        tmp.rename(obj)
    return obj


def build(number: str, source: str | Path | None = None) -> Path:
    """The judge's program for chapter `number` (a key of SPECS), from `source` (default: the chapter)."""
    import logging

    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # "No CUDA runtime is found"
    from torch.utils import cpp_extension

    from .build import chapter_flags

    spec = SPECS[number]
    chapter = chapters.find(number)
    csrc = Path(source or chapter.path).resolve() / "csrc"
    cxx = os.environ.get("CXX", "c++")
    extra, _, _ = chapter_flags(chapter)
    common = [*FLAGS, *(f"-isystem{p}" for p in cpp_extension.include_paths()), f"-I{csrc}", f"-I{TSAN}", *extra]
    jobs = [(csrc / name, [*common, "-include", str(TSAN / "parallel.h")]) for name in spec["sources"]]
    jobs.append((TSAN / spec["harness"], common))
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        objects = list(pool.map(lambda job: _compile(cxx, job[0], job[1], [csrc, TSAN]), jobs))
    digest = hashlib.sha1("".join(o.name for o in objects).encode()).hexdigest()[:12]
    exe = BUILD / f"{number}-{digest}"
    if not exe.is_file():
        lib = cpp_extension.library_paths()[0]  # torch's lib/: libtorch_cpu, libc10
        tmp = exe.with_suffix(f".{os.getpid()}.tmp")
        proc = subprocess.run([cxx, "-fsanitize=thread", *map(str, objects), "-o", str(tmp), f"-L{lib}",
                               f"-Wl,-rpath,{lib}", "-ltorch_cpu", "-ltorch", "-lc10", "-lpthread"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"the thread judge could not link chapter {number}'s program:\n{proc.stderr[-4000:]}")
        tmp.rename(exe)
    return exe


@dataclass
class Race:
    """One report: the two accesses (read or write, and where) and the memory they share."""

    first: tuple[str, str]   # ("write", "trilinear_cpu.cpp:27")
    second: tuple[str, str]
    memory: str              # "weight (a static or global variable)", ...

    def message(self) -> str:
        if self.first == self.second:
            what = f"two threads {self.first[0]} {self.memory} at {self.first[1]} at once"
        else:
            what = (f"one thread {self.first[0]}s {self.memory} at {self.first[1]} while another "
                    f"{self.second[0]}s it at {self.second[1]}")
        return (f"data race: {what}, with nothing ordering them (ThreadSanitizer; parallel_for's chunks on 3 "
                "threads). Such a race can give right values run after run, so value tests need not see it. Each task "
                "of parallel_for may write only the outputs of its own chunk [begin, end) and variables of its own: a "
                "loop over more than [begin, end) writes other tasks' outputs, and a variable declared static or "
                "global, or outside the lambda and captured by [&], is one for every thread (declare it inside the "
                "lambda).")


_ACCESS = re.compile(r"^\s*(Previous )?(?P<kind>[Aa]tomic )?(?P<op>[Rr]ead|[Ww]rite) of size (?P<size>\d+) at \S+ by "
                     r"(?P<who>main thread|thread T\d+)", re.M)
_FRAME = re.compile(r"^\s*#\d+ (?P<func>.+?) (?P<file>/\S+?):(?P<line>\d+)(?::\d+)? \(", re.M)


def _where(block: str, csrc: Path) -> str:
    """The first frame of an access in the chapter's sources: file:line and the line's code (the line
    number is the graded copy's, which can differ from the learner's file; the code is the same)."""
    frames = list(_FRAME.finditer(block))
    for m in frames:
        path = Path(m["file"])
        if csrc in path.parents:
            lines = path.read_text().splitlines()
            line = int(m["line"])
            code = f" (`{lines[line - 1].strip()}`)" if 0 < line <= len(lines) else ""
            return f"{path.relative_to(csrc)}:{line}{code}"
    if frames:  # no frame in the chapter's sources: a library's code (torch, the C library)
        return f"{Path(frames[0]['file']).name}:{frames[0]['line']} (outside the chapter's code, in {frames[0]['func']})"
    return "an unknown place (no source line in ThreadSanitizer's report: outside the chapter's code)"


def _memory(report: str) -> str:
    """What ThreadSanitizer says the shared memory is, in the message's words."""
    location = re.search(r"^\s*Location is (.+)$", report, re.M)
    if location is None:
        return "the same memory"
    text = location[1]
    if text.startswith("global '"):
        name = text[len("global '"):].split("' of size")[0].split("::")[-1]
        return f"`{name}` (a static or global variable)"
    if text.startswith("heap block of size"):
        size = text.split()[4]
        return f"a heap block of {size} bytes allocated before parallel_for (an output, or a buffer declared outside the lambda)"
    if text.startswith("stack of main thread"):
        return "a local variable of the function that calls parallel_for (captured by [&])"
    return "the same memory"


def parse(stderr: str, csrc: Path) -> list[Race]:
    """The data races of a ThreadSanitizer run's output, each pair of places once."""
    found: dict[tuple, Race] = {}
    for report in stderr.split("WARNING: ThreadSanitizer: data race")[1:]:
        report = report.split("==================")[0]
        accesses = list(_ACCESS.finditer(report))
        if len(accesses) < 2:
            continue
        pieces = []
        for i, m in enumerate(accesses[:2]):
            end = accesses[i + 1].start() if i + 1 < len(accesses) else len(report)
            op = ("atomically " if m["kind"] else "") + m["op"].lower()
            # the access's own stack ends at the first blank line: the report's later sections (where the
            # memory was allocated, where each thread was created) hold frames of other moments
            stack = report[m.end():end].split("\n\n")[0]
            pieces.append((op, _where(stack, csrc)))
        found.setdefault(tuple(sorted(pieces)), Race(pieces[0], pieces[1], _memory(report)))
    return list(found.values())


def check(number: str, source: str | Path | None = None, timeout: float = 600) -> list[Race]:
    """The data races that chapter `number`'s CPU kernels (from `source`) show under the harness.
    RuntimeError when the harness cannot run or a kernel raises."""
    exe = build(number, source)
    csrc = Path(source or chapters.find(number).path).resolve() / "csrc"
    # torch's own pool on one thread: what libtorch computes for the harness (a dtype conversion of an
    # input) then runs on the thread that asks for it, ordered as ThreadSanitizer sees it, whatever the
    # machine's core count; the chapter's parallel_for has threads of its own (tsan/parallel.h)
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=0 exitcode=66 report_signal_unsafe=0 history_size=4",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=timeout)
    raised = re.search(r"^COURSE_TSAN_RAISED (.*)$", proc.stderr, re.M)
    if raised:
        raise RuntimeError(f"the CPU kernel raised, run by the thread judge: {raised[1]}")
    races = parse(proc.stderr, csrc)
    if proc.returncode not in (0, 66) or (proc.returncode == 66 and not races):
        raise RuntimeError(f"the thread judge's program for chapter {number} ended with status {proc.returncode}:\n"
                           f"{proc.stderr[-3000:]}")
    return races
