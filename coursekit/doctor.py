"""`./course doctor`: what this machine will build with, and what to fix."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys

from . import toolkit


def _first_line(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if out.returncode == 0 and text else None


def run_doctor() -> int:
    problems: list[str] = []  # stop a build
    notes: list[str] = []

    def row(label: str, value: str) -> None:
        print(f"  {label:22s} {value}")

    print("course doctor")
    row("python", f"{platform.python_version()} ({sys.executable})")
    try:
        import torch
    except ImportError:
        row("torch", "NOT INSTALLED")
        print("\nfix: run ./course (it installs the requirements), or python -m pip install torch")
        return 1
    row("torch", f"{torch.__version__} ({'CUDA ' + torch.version.cuda if torch.version.cuda else 'CPU-only build'})")
    if toolkit.torch_too_old(torch.__version__):
        problems.append(f"torch {torch.__version__} is older than the course's floor, torch "
                        f"{'.'.join(map(str, toolkit.MIN_TORCH))} (chapter 06 builds on its stable ABI).\n"
                        f"  fix: python -m pip install --upgrade 'torch>={'.'.join(map(str, toolkit.MIN_TORCH))}'")

    # CUDA toolkit
    try:
        tk = toolkit.find_toolkit()
    except toolkit.SetupError as e:
        tk = None
        problems.append(str(e))
    if tk:
        match = ""
        if torch.version.cuda and tk.version:
            same = tk.version.split(".")[0] == torch.version.cuda.split(".")[0]
            match = "matches torch" if same else f"DOES NOT MATCH torch's CUDA {torch.version.cuda}"
        row("CUDA toolkit", f"{tk.home}  (nvcc {tk.version or '?'}; {match})")
        path_nvcc = shutil.which("nvcc")
        if path_nvcc and os.path.realpath(path_nvcc) != str(tk.nvcc.resolve()):
            notes.append(f"nvcc on PATH is {path_nvcc}, outside the toolkit; the course uses {tk.nvcc} (torch alone would guess wrong)")
    else:
        row("CUDA toolkit", "not found (CPU-only builds)")

    # ninja and the C++ compiler
    bindir = os.path.dirname(sys.executable)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    ninja = _first_line(["ninja", "--version"])
    row("ninja", ninja or "NOT FOUND")
    if not ninja:
        problems.append("ninja is missing: the builds need it.\n  fix: python -m pip install ninja (./course does this for you)")
    cxx = os.environ.get("CXX", "c++")
    compiler = _first_line([cxx, "--version"])
    row("C++ compiler", f"{cxx}: {compiler}" if compiler else f"{cxx}: NOT FOUND")
    if not compiler:
        problems.append(f"no C++ compiler ({cxx}).\n  fix: install one, e.g. sudo apt install g++ (Debian/Ubuntu)")

    if compiler:  # the thread judge (coursekit/races.py): the CPU exercises' data-race check
        from . import races

        missing = races.unavailable()
        row("ThreadSanitizer", "yes (the CPU kernels' race check runs)" if missing is None else "no")
        if missing:
            notes.append(f"the race check of the CPU exercises (cpu-kernel, points-grad-cpu, gather-backward) is "
                         f"skipped here: {missing}")

    # GPU
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            row(f"GPU {i}", f"{p.name} (compute capability {p.major}.{p.minor}, {p.total_memory / 2**30:.0f} GiB)")
    else:
        row("GPU", "none visible")

    if compiler and toolkit.static_libstdcxx(cxx):
        row("libstdc++", f"static only ({cxx} has no libstdc++.so)")
        notes.append(f"{cxx} links libstdc++ statically; mixed with the shared one torch loads, an extension would crash "
                     f"in its first std::ostringstream. The course's builds keep the copy private "
                     f"({' '.join(toolkit.PRIVATE_LIBSTDCXX)}); so do the chapters' setup.py files")
    elif compiler:
        row("libstdc++", "shared (the one torch loads)")

    # The decision
    try:
        plan = toolkit.plan_build()
        row("build", f"{'CPU + CUDA' if plan.cuda else 'CPU only'} ({plan.reason})")
        if plan.cuda:
            row("TORCH_CUDA_ARCH_LIST", plan.arch_list or "?")
        notes += plan.notes
    except toolkit.SetupError as e:
        row("build", "CANNOT BUILD")
        if str(e) not in problems:
            problems.append(str(e))

    # The GPU code in the chapters' builds (the CUDA builds made so far), and whether this GPU can run it.
    from . import build, chapters

    capability = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    for chapter in chapters.existing():
        built = sorted(build.build_dir(chapter.path, True).glob("*.so"))
        if not built or not any((chapter.path / "csrc").glob("*.cu")):
            continue
        archs = toolkit.gpu_archs(built[0])
        row(f"GPU code, chapter {chapter.number}", ", ".join(archs) or "none")
        problem = toolkit.uncovered_gpu(archs, capability) if capability else None
        if problem:
            problems.append(f"{chapter.dirname} was {problem}")

    for n in notes:
        print(f"  note: {n}")
    if problems:
        print("\nproblems:")
        for p in problems:
            print(f"  - {p}")
        return 1
    print("\nok: every chapter can be built here")
    return 0
