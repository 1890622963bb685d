"""The one build helper: compile a chapter's extension from a source folder.

Every demo, test, notebook and grading run builds through `build()`, so a
chapter is compiled the same way everywhere. It uses PyTorch's JIT builder,
`torch.utils.cpp_extension.load`, which writes a ninja file into a build folder
and only recompiles what changed.

Layout a chapter follows (the source folder may be the chapter itself or a
learner's workspace copy of it):

    csrc/*.cpp   always compiled (bindings, checks, CPU kernels)
    csrc/*.cu    compiled only for a CUDA build; the C++ side sees WITH_CUDA
    *.py         optional Python layer; it imports the extension by its module name
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import runpy
import sys
import time
from pathlib import Path
from types import ModuleType

from . import ROOT, chapters, toolkit

BUILD_ROOT = ROOT / ".build"

# Each chapter's setup.py (the pip route, which must not import this package) repeats
# these flags as constants of the same names; tests/test_packaging.py checks they agree.
CXX_FLAGS = ["-O3"]  # torch adds the C++ standard it was built with
NVCC_FLAGS = ["-O3", "-lineinfo"]
LD_FLAGS: list[str] = []
if sys.platform.startswith("linux"):
    # at::parallel_for is a header template: with torch's OpenMP backend it expands to
    # `#pragma omp parallel` in *our* object files. Without -fopenmp, _OPENMP is
    # undefined, the header takes its serial branch without a word, and every CPU
    # kernel runs on one thread. Linking with -fopenmp records a need for
    # libgomp.so.1, which resolves to the copy torch has already loaded.
    CXX_FLAGS.append("-fopenmp")
    LD_FLAGS.append("-fopenmp")


class BuildError(RuntimeError):
    """The compiler rejected the sources; the message is the compiler's, trimmed."""


def chapter_flags(chapter: chapters.Chapter) -> tuple[list[str], list[str], bool]:
    """(C++ flags, nvcc flags, OpenMP?) that a chapter adds to the flags above.

    A chapter that needs more (06: the LibTorch stable ABI) declares them in its
    own build_flags.py, which its setup.py reads too. Read from the chapter, not
    from a learner's copy: the flags are the chapter's, not an exercise.
    """
    path = chapter.path / "build_flags.py"
    if not path.is_file():
        return [], [], True
    flags = runpy.run_path(str(path))
    return list(flags.get("CXX_FLAGS", [])), list(flags.get("NVCC_FLAGS", [])), bool(flags.get("OPENMP", True))


def _sources(src: Path, cuda: bool) -> list[Path]:
    csrc = src / "csrc"
    files = sorted(csrc.glob("*.cpp"))
    if cuda:
        files += sorted(csrc.glob("*.cu"))
    if not files:
        raise BuildError(f"no C++ sources in {csrc}")
    return files


def build_dir(src: Path, cuda: bool, device_debug: bool = False) -> Path:
    tag = hashlib.sha1(str(src.resolve()).encode()).hexdigest()[:8]
    return BUILD_ROOT / f"{src.name}-{tag}-{'cuda' if cuda else 'cpu'}{'-G' if cuda and device_debug else ''}"


def _trim_compiler_output(text: str, limit: int = 60) -> str:
    """The compiler's first errors: drop the long command lines ninja echoes, start at the first error."""
    lines = [ln for ln in text.splitlines() if not (len(ln) > 400 and (" -I" in ln or " -isystem " in ln))]
    first = next((i for i, ln in enumerate(lines) if "error" in ln.lower() and "Error building" not in ln), 0)
    shown = lines[max(first - 4, 0): first + limit]
    more = len(lines) - (first + limit)
    return "\n".join(shown + ([f"... ({more} more lines; build with verbose=True for all)"] if more > 0 else []))


def _same_csrc(a: Path, b: Path) -> bool:
    """Do two chapter folders hold the same C++/CUDA sources, byte for byte?"""
    fa = sorted(p.relative_to(a) for p in (a / "csrc").rglob("*") if p.is_file())
    fb = sorted(p.relative_to(b) for p in (b / "csrc").rglob("*") if p.is_file())
    return fa == fb and all((a / p).read_bytes() == (b / p).read_bytes() for p in fa)


class _Progress:
    """Says what is being compiled and how long it has taken, every few seconds, while ninja runs."""

    def __init__(self, say, what: str, out: Path, sources: list[Path], every: float = 10.0):
        import threading

        self.say, self.what, self.out, self.every = say, what, out, every
        self.total = len(sources)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _objects(self) -> int:
        return sum(1 for p in self.out.glob("*.o") if p.stat().st_mtime >= self.start)

    def _run(self):
        while not self.done.wait(self.every):
            self.say(f"[course] {self.what}: {self._objects()} of {self.total} files compiled, "
                     f"{time.time() - self.start:.0f} s")

    def __enter__(self):
        self.start = time.time()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()
        elapsed = time.time() - self.start
        if elapsed > 2 and exc[0] is None:  # a no-op rebuild says nothing
            self.say(f"[course] {self.what}: done in {elapsed:.0f} s")


def build(source: str | Path, *, cuda: bool | None = None, verbose: bool = False, progress=None,
          device_debug: bool = False) -> ModuleType:
    """Build (or reuse) the extension in `source` and return it as a module.

    cuda=None lets `toolkit.plan_build()` decide; True/False force it.
    The module is also placed in sys.modules under its name, so the chapter's
    Python files can simply `import` it. progress: a function that takes a line of
    text (True: print to stderr), told what is compiled and for how long.
    A folder whose csrc/ equals the chapter's own (a learner's workspace that differs
    only in Python files) reuses the chapter's build.
    device_debug: CUDA code compiled with nvcc -G, unoptimised, in a build folder of its own: every
    load and store where the source puts it (the memcheck tests; optimised code may move a load
    whose value a thread never uses past the bounds check, or drop it, and memcheck sees none).
    """
    src = Path(source).resolve()
    chapter = chapters.find(src)
    if src != chapter.path.resolve() and chapter.path.is_dir() and _same_csrc(src, chapter.path):
        src = chapter.path.resolve()
    every = 10.0
    if progress is True:
        if sys.stderr.isatty():  # one line, rewritten in place
            progress = lambda line: print("\r" + line + "\033[K", end="" if ": done" not in line else "\n",  # noqa: E731
                                          file=sys.stderr, flush=True)
            every = 2.0
        else:
            progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
            every = 30.0
    plan = toolkit.plan_build()
    if cuda is None:
        cuda = plan.cuda
    elif cuda and not plan.cuda and plan.toolkit is None:
        raise toolkit.SetupError("a CUDA build was asked for but no CUDA toolkit was found: run ./course doctor")
    toolkit.apply(plan)

    from torch.utils import cpp_extension

    if not cpp_extension.is_ninja_available():
        raise toolkit.SetupError("ninja is not installed in this Python.\n  fix: python -m pip install ninja")

    if cuda and os.environ.get("COURSE_NVCC_CACHE"):  # the self-check on a GPU: see coursekit/nvcc_cache.py
        os.environ["PYTORCH_NVCC"] = " ".join([sys.executable, str(Path(__file__).with_name("nvcc_cache.py")),
                                               os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc")])
    out = build_dir(src, cuda, device_debug)
    nvcc_flags = NVCC_FLAGS if not (cuda and device_debug) else [f for f in NVCC_FLAGS if f != "-lineinfo"] + ["-G"]
    out.mkdir(parents=True, exist_ok=True)
    defines = ["-DWITH_CUDA"] if cuda else []
    extra_cxx, extra_nvcc, openmp = chapter_flags(chapter)
    no_omp = [] if openmp else ["-fopenmp"]
    sources = _sources(src, cuda)
    what = f"building {src.parent.name + '/' if src != chapter.path.resolve() else ''}{src.name} ({'CPU+CUDA' if cuda else 'CPU'})"
    ticker = _Progress(progress, what, out, sources, every) if progress else contextlib.nullcontext()
    try:
        with ticker:
            module = cpp_extension.load(
                name=chapter.module,
                sources=[str(p) for p in sources],
                extra_cflags=[f for f in CXX_FLAGS if f not in no_omp] + defines + extra_cxx,
                extra_cuda_cflags=nvcc_flags + defines + extra_nvcc,
                # a copy: torch appends its own libraries to this list
                extra_ldflags=[f for f in LD_FLAGS if f not in no_omp] + toolkit.libstdcxx_link_flags(),
                extra_include_paths=[str(src / "csrc")],
                build_directory=str(out),
                with_cuda=cuda,
                verbose=verbose,
            )
    except RuntimeError as e:
        text = str(e)
        if "Error building extension" in text or "error" in text.lower():
            raise BuildError(f"building {src} failed:\n{_trim_compiler_output(text)}") from None
        raise
    if cuda:
        _check_gpu_code(Path(module.__file__))
    module.__course_build__ = {"cuda": cuda, "source": str(src), "build_dir": str(out), "device_debug": device_debug}
    sys.modules[chapter.module] = module
    return module


def _check_gpu_code(library: Path) -> None:
    """Refuse, with the fix, a CUDA build that has no code for the visible GPU (TORCH_CUDA_ARCH_LIST
    set for another GPU), instead of "no kernel image is available" at the first launch."""
    import torch

    if not torch.cuda.is_available():
        return
    problem = toolkit.uncovered_gpu(toolkit.gpu_archs(library), torch.cuda.get_device_capability())
    if problem:
        raise toolkit.SetupError(f"{library.name} was {problem}")


def load_python(source: str | Path, name: str) -> ModuleType:
    """Import `<source>/<name>.py` (after `build(source)`), without touching sys.path."""
    path = Path(source).resolve() / f"{name}.py"
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) and Path(loaded.__file__).resolve() == path:
        return loaded  # once per process: its fake kernels and autograd formulas cannot be registered twice
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def describe(module: ModuleType) -> str:
    info = getattr(module, "__course_build__", {})
    return "CPU+CUDA" if info.get("cuda") else "CPU"

