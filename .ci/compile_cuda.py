"""Compile every chapter's CUDA files for the given architectures, compile only (nvcc -c, no link).

    python .ci/compile_cuda.py 7.5            # every .cu of every chapter for sm_75
    python .ci/compile_cuda.py "7.5;8.0" 06   # chapter 06 only, two architectures in one pass
    python .ci/compile_cuda.py 7.5 --json results/nvcc_archs.json   # also record the times there

Each chapter's ninja file is written by torch.utils.cpp_extension, as `coursekit.build` writes it
(the same flags, defines and include paths), into .build/archcheck/<arch>/<chapter>/, and ninja
compiles its .cu objects only, as many at once as there are cores. No GPU is needed: this is how CI
checks that the kernels compile for a GPU older than the one it builds for (a T4 is sm_75).
Exit status 1 if a file does not compile, with the compiler's first errors.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coursekit import build, chapters, toolkit  # noqa: E402


def ninja_file(chapter: chapters.Chapter, archs: str, out: Path) -> list[str]:
    """Write the chapter's CUDA build.ninja into `out`; return the .cu objects' target names."""
    from torch.utils import cpp_extension

    extra_cxx, extra_nvcc, openmp = build.chapter_flags(chapter)
    no_omp = [] if openmp else ["-fopenmp"]
    sources = build._sources(chapter.path, cuda=True)
    os.environ["TORCH_CUDA_ARCH_LIST"] = archs
    out.mkdir(parents=True, exist_ok=True)
    cpp_extension._write_ninja_file_to_build_library(
        path=str(out / "build.ninja"), name=chapter.module, sources=[str(s) for s in sources],
        extra_cflags=[f for f in build.CXX_FLAGS if f not in no_omp] + ["-DWITH_CUDA"] + extra_cxx,
        extra_cuda_cflags=build.NVCC_FLAGS + ["-DWITH_CUDA"] + extra_nvcc, extra_sycl_cflags=[],
        extra_ldflags=[], extra_include_paths=[str(chapter.path / "csrc")], with_cuda=True, with_sycl=False,
        is_standalone=False)
    return [f"{s.stem}.cuda.o" for s in sources if s.suffix == ".cu"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archs", help='TORCH_CUDA_ARCH_LIST, e.g. "7.5" or "7.5;8.0;9.0"')
    parser.add_argument("chapters", nargs="*", help="chapter numbers (default: every chapter with .cu files)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", help="write {chapter: seconds} and the settings to this file")
    args = parser.parse_args(argv)

    plan = toolkit.plan_build()
    if plan.toolkit is None:
        print("no CUDA toolkit found (./course doctor says why)", file=sys.stderr)
        return 2
    toolkit.apply(plan)
    picked = [chapters.find(n) for n in args.chapters] if args.chapters else chapters.existing()
    picked = [c for c in picked if list((c.path / "csrc").glob("*.cu"))]
    times, cpu, failed = {}, {}, []
    for chapter in picked:
        out = build.BUILD_ROOT / "archcheck" / args.archs.replace(";", "_").replace("+", "p") / chapter.dirname
        for obj in out.glob("*.o"):
            obj.unlink()  # compile from scratch: the time is the compile's
        targets = ninja_file(chapter, args.archs, out)
        start, used = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(["ninja", "-C", str(out), f"-j{args.jobs}", *targets], capture_output=True, text=True)
        times[chapter.number] = round(time.time() - start, 1)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the compilers' CPU time: little moved by other load
        cpu[chapter.number] = round(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime, 1)
        status = "ok" if proc.returncode == 0 else "FAILED"
        print(f"{chapter.dirname}: {len(targets)} .cu files for {args.archs}: {status} in {times[chapter.number]} s "
              f"({cpu[chapter.number]} s of CPU)", flush=True)
        if proc.returncode != 0:
            failed.append(chapter.dirname)
            print(build._trim_compiler_output(proc.stdout + proc.stderr, limit=30), file=sys.stderr)
    if args.json:
        import torch

        path = Path(args.json)
        doc = json.loads(path.read_text()) if path.is_file() else {}
        doc["what"] = ("nvcc -c of every .cu file of a chapter (no link), from scratch, ninja -j jobs; seconds: wall "
                       "clock, cpu_seconds: the compilers' CPU time (user + system), little moved by other load; "
                       "written by .ci/compile_cuda.py ARCHS [CHAPTERS] --json FILE")
        doc.setdefault("runs", {}).setdefault(args.archs, {}).update({
            "jobs": args.jobs, "cpu_count": os.cpu_count(), "nvcc": plan.toolkit.version, "torch": torch.__version__,
            "load_average_at_end": round(os.getloadavg()[0], 1)})
        run = doc["runs"][args.archs]
        for key, new in (("seconds", times), ("cpu_seconds", cpu)):
            run[key] = {**run.get(key, {}), **new}
        run["failed"] = sorted(set(run.get("failed", [])) - set(times) | set(failed))
        path.write_text(json.dumps(doc, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
