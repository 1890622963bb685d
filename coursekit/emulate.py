"""The GPU-free judge: a chapter's CUDA code, compiled for the CPU and run under emulation.

Without a GPU, a CUDA exercise would only be compiled. Here its kernel and launch code run
on the CPU, thread by thread (emu/cuda_emu.h: fibers that switch at barriers and shuffles,
in a shuffled order; guard-paged tensors; poisoned outputs; the driver's launch limits), so
the exercise's emulated tests give a verdict: correct results, no read or write outside a
tensor, every output written, every barrier reached by every thread, a valid launch (shared
memory starts each block poisoned, so a read of a slot no thread wrote shows), and on x86-64
no race on shared memory (two threads' accesses to one element with no barrier between, one a
write: racecheck's rule, watched in the first blocks of each launch). What a GPU adds: speed,
and the real memory system. build_program runs a whole small program (a main()
with cudaMalloc and a launch: 04_backward/debugging/) the same way.

How: each .cu/.cuh/.h of the chapter's csrc/ (the learner's composite, when grading) is
copied with three changes, and nothing else: CUDA and c10-CUDA includes point at the
emulation headers; emu/cuda_emu_late.h is included after the file's own includes (a
`#line` keeps compiler messages on the learner's line numbers); and each launch
`kernel<<<grid, block, ...>>>(args)` becomes `::emu::launch("kernel", ::emu::config(grid,
block, ...), [&] { kernel(args); })`. The copies and a small binding per chapter
(emu/bind_NN.cpp) are compiled with the host compiler into an extension of their own,
at -O0: every load the learner wrote stays a load (an optimiser would drop a load whose
value is never used, and with it the out-of-bounds read a GPU build may keep); and with
-fsanitize=alignment trapping: a 16-byte pack read from an address that is not a multiple of
16 works on a CPU, and stops a kernel on a GPU ("misaligned address"), so the judge stops it too;
and, where the compiler has it (GCC 12, clang 8), with -ftrivial-auto-var-init=pattern: a local
variable read before it is set (`float acc;` then `acc += ...`) holds 0xFE bytes (-1.7e38 as a
float, -5.3e303 as a double) instead of what the thread's stack held: often 0, which a missing
`= 0` needs to pass, or an earlier thread's value.

    from coursekit import emulate
    mod = emulate.build("02", source_folder)   # None: the chapter itself
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path
from types import ModuleType

from . import ROOT, chapters

EMU = Path(__file__).resolve().parent / "emu"
# A misaligned access (an object read or written at an address that is not a multiple of its
# alignment) executes a trap instruction: SIGILL, which the judge reports with the thread.
ALIGNMENT = ["-fsanitize=alignment", "-fsanitize-undefined-trap-on-error"]
PATTERN = "-ftrivial-auto-var-init=pattern"


@functools.lru_cache(maxsize=None)
def _checks(cxx: str) -> tuple[str, ...]:
    """The compiler flags of the judge's checks: ALIGNMENT, and PATTERN where the compiler `cxx` takes it."""
    import subprocess

    try:
        ok = subprocess.run([cxx, PATTERN, "-x", "c++", "-fsyntax-only", "-"], input="", capture_output=True,
                            text=True).returncode == 0
    except OSError:
        ok = False
    return (*ALIGNMENT, *([PATTERN] if ok else []))


BUILD = ROOT / ".build" / "emu"
INCLUDES = {
    "<cuda_runtime.h>": '"cuda_emu.h"',
    "<cuda.h>": '"cuda_emu.h"',
    "<c10/cuda/CUDAGuard.h>": '"cuda_emu_c10.h"',
    "<c10/cuda/CUDAStream.h>": '"cuda_emu_c10.h"',
    "<c10/cuda/CUDAException.h>": '"cuda_emu_c10.h"',
}
# Names in a chapter's CUDA files that mean the GPU: the emulation's stand-ins (cuda_emu.h).
RENAMES = {"__CUDA_ARCH__": "COURSE_EMU_CUDA_ARCH", "torch::stable::accelerator::DeviceGuard": "::emu::DeviceGuard",
           "torch::stable::new_empty(": "::emu::stable_new_empty("}  # temporaries guarded too (emu/bind_06_tables.cpp)
# What each chapter's judge compiles: its CUDA files that hold the exercise (and what they
# call), and its binding.
SPECS = {
    "02": {"sources": ["trilinear_cuda.cu"], "bindings": ["bind_02.cpp"]},
    "03": {"sources": ["trilinear_cuda.cu", "trilinear.cpp", "trilinear_cpu.cpp"], "bindings": ["bind_03.cpp"]},
    "04": {"sources": ["trilinear_cuda.cu", "gelu_cuda.cu"], "bindings": ["bind_04.cpp"]},
    "05": {"sources": ["trilinear_cuda.cu"], "bindings": ["bind_05.cpp"]},  # no exercise: the kernels' tests
    "06": {"sources": ["gather_plain.cu", "plan.cu"], "bindings": ["bind_06.cpp", "bind_06_kernels.cpp", "bind_06_tables.cpp"]},
    # every kernel of chapter 06's ladder, through its dispatch (06_upsample/ladder.py --emulated)
    "06-ladder": {"sources": ["*.cu"], "bindings": ["bind_06_ladder.cpp", "bind_06_ladder_kernels.cpp", "bind_06_tables.cpp"]},
}


def _matching(text: str, at: int, step: int) -> int:
    """Index of the bracket that matches the one at text[at], searching forward (step 1) or back (-1)."""
    pairs = {"(": ")", "<": ">", ")": "(", ">": "<"}
    mine, other, depth = text[at], pairs[text[at]], 0
    for i in range(at, len(text) if step > 0 else -1, step):
        depth += (text[i] == mine) - (text[i] == other)
        if depth == 0:
            return i
    raise ValueError("unbalanced")


def rewrite_launches(text: str) -> str:
    """kernel<<<cfg>>>(args) -> ::emu::launch("kernel", ::emu::config(cfg), [&]() { kernel(args); })."""
    out = text
    start = 0
    while True:
        at = out.find("<<<", start)
        if at < 0:
            return out
        if "//" in out[out.rfind("\n", 0, at) + 1:at]:  # in a comment
            start = at + 3
            continue
        # the callee: an identifier (with ::) and template arguments, just before <<<
        j = at - 1
        while j >= 0 and out[j].isspace():
            j -= 1
        if out[j] == ">":
            j = _matching(out, j, -1) - 1
        k = j
        while k >= 0 and (out[k].isalnum() or out[k] in "_:"):
            k -= 1
        callee = out[k + 1:at].rstrip()
        close = out.find(">>>", at)
        cfg = out[at + 3:close]
        p = close + 3
        while out[p].isspace():
            p += 1
        assert out[p] == "(", "a launch's arguments follow >>>"
        q = _matching(out, p, 1)
        args = out[p + 1:q]
        name = " ".join(callee.split())
        new = f'::emu::launch("{name}", ::emu::config({cfg}), [&]() {{ {callee}({args}); }})'
        out = out[:k + 1] + new + out[q + 1:]
        start = k + 1 + len(new)


_DECLARATOR = re.compile(r"\s*(\w+)\s*((?:\[[^\]]*\]\s*)*)")


def _split_top(text: str) -> list[str]:
    """text split at the commas outside brackets (a template's arguments, an array's size)."""
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:k])
            start = k + 1
    return parts + [text[start:]]


def _shared_declaration(line: str) -> str | None:
    """A one-line __shared__ declaration as the judge compiles it (see transform), or None."""
    m = re.fullmatch(r"(\s*)((?:volatile\s+|static\s+)*)__shared__\s+([^;]*);(.*)", line)
    if not m:
        return None
    indent, before, declaration, rest = m.groups()
    parts = _split_top(declaration)
    first = re.fullmatch(r"(.*?)\b(\w+)\s*((?:\[[^\]]*\]\s*)*)", parts[0].strip())
    if not first or not first.group(1).strip():
        return None
    type_ = " ".join(before.replace("static", "").split() + [first.group(1).strip()])
    names = [(first.group(2), first.group(3))]
    for part in parts[1:]:
        d = _DECLARATOR.fullmatch(part)
        if not d:
            return None
        names.append((d.group(1), d.group(2)))
    out = []
    for name, dims in names:
        out.append(f"using emu_shared_{name} = {type_}{dims.strip()}; static emu_shared_{name}& {name} = "
                   f"*static_cast<emu_shared_{name}*>(::emu::shared_alloc_of<emu_shared_{name}>(\"{name}\"));")
    return indent + " ".join(out) + rest


def transform(text: str, path: str) -> str:
    """A CUDA source as the emulator compiles it (see the module's docstring)."""
    lines = text.splitlines(keepends=True)
    last = -1
    for i, line in enumerate(lines):
        m = re.match(r"\s*#\s*include\s*(<[^>]+>|\"[^\"]+\")", line)
        if m:
            last = i
            if m.group(1) in INCLUDES:
                lines[i] = f"#include {INCLUDES[m.group(1)]}\n"
    if last >= 0:
        stable = '#include "cuda_emu_stable.h"\n' if "torch::stable::new_empty(" in text else ""
        lines.insert(last + 1, f'#include "cuda_emu_late.h"\n{stable}#line {last + 2} "{path}"\n')
    # nvcc refuses an initializer on a __shared__ variable; here __shared__ is `static`, which
    # would take it: refuse it on its own line, with nvcc's message. A declaration on one line,
    # `__shared__ T name[...];` (qualifiers such as volatile before or after __shared__, and
    # several names, `__shared__ T a[8], b[8];`), gives each name a reference to a guard-paged
    # buffer of its own, poisoned at each block's start (shared_alloc in cuda_emu.h), on the same
    # line. A declaration this does not read keeps `static` (cuda_emu.h): shared, not guarded.
    for i, line in enumerate(lines):
        code = line.split("//", 1)[0]
        if re.search(r"__shared__[^;]*=", code):
            lines[i] = '#error "initializer not allowed for __shared__ variable (nvcc refuses it too)"\n'
            continue
        if not code.lstrip().startswith("#"):
            rewritten = _shared_declaration(line.rstrip("\n"))
            if rewritten is not None:
                lines[i] = rewritten + "\n"
    text = "".join(lines)
    # A temporary assigned to a name (`p.index = torch::stable::new_empty(...)`) is named so in the
    # judge's messages: "a read outside p.index (torch::stable::new_empty in plan.cu)".
    text = re.sub(r"([\w.\[\]>-]*\w)\s*=\s*torch::stable::new_empty\(",
                  lambda m: f'{m.group(1)} = ::emu::stable_new_empty_named('
                            f'"{m.group(1)} (torch::stable::new_empty in {Path(path).name})", ', text)
    for old, new in RENAMES.items():
        text = text.replace(old, new)
    return rewrite_launches(text)


def build_program(source: str | Path, defines: tuple[str, ...] = ()) -> Path:
    """A whole CUDA program (a .cu file with a main() that calls cudaMalloc, cudaMemcpy, a kernel
    launch ...) compiled for the CPU: the executable's path. Its device memory is guard-paged
    (emu/cuda_emu_runtime.h); an error the judge finds in a launch ends it with the judge's
    report on stderr and exit status 99; COURSE_EMU_SEED picks the order of the threads."""
    import os
    import subprocess

    source = Path(source).resolve()
    text = transform(source.read_text(), str(source))
    digest = hashlib.sha1(text.encode() + " ".join((*defines, *_checks("c++"))).encode())
    headers = sorted(p for p in source.parent.iterdir() if p.suffix in (".h", ".cuh"))  # its own includes
    for f in sorted(EMU.iterdir()) + headers:
        digest.update(f.name.encode() + f.read_bytes())
    out = BUILD / "programs" / f"{source.stem}-{digest.hexdigest()[:10]}"
    exe = out / source.stem
    if not exe.is_file():
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{source.stem}.cpp").write_text(text)
        tmp = Path(f"{exe}.{os.getpid()}")  # then renamed: a parallel build of the same program is harmless
        cmd = ["c++", "-std=c++17", "-O0", "-g", *_checks("c++"), "-DCOURSE_EMULATE", *(f"-D{d}" for d in defines), f"-I{EMU}", f"-I{source.parent}",
               "-include", "cuda_emu_runtime.h", str(out / f"{source.stem}.cpp"), "-o", str(tmp)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"the GPU-free judge could not compile {source.name}:\n{proc.stderr[-4000:]}")
        tmp.rename(exe)
    return exe


def build(number: str, source: str | Path | None = None) -> ModuleType:
    """The emulated judge module `number` (a key of SPECS: a chapter, or "06-ladder"), built from
    `source` (default: the chapter)."""
    import logging

    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # "No CUDA runtime is found"
    import torch.utils.cpp_extension as cpp

    spec = SPECS[number]
    chapter = chapters.find(number.split("-")[0])
    src = Path(source or chapter.path).resolve() / "csrc"
    files = {}
    for f in sorted(src.iterdir()):
        if f.suffix in (".cu", ".cuh", ".h"):
            files[f.name] = transform(f.read_text(), str(f))
        elif f.name in spec["sources"]:
            files[f.name] = f.read_text()
    if spec["sources"] == ["*.cu"]:
        spec = dict(spec, sources=sorted(name for name in files if name.endswith(".cu")))
    checks = _checks(os.environ.get("CXX", "c++"))  # the compiler torch.utils.cpp_extension uses
    digest = hashlib.sha1(" ".join(checks).encode())
    for name, text in sorted(files.items()):
        digest.update(name.encode() + text.encode())
    for f in sorted(EMU.iterdir()):
        digest.update(f.name.encode() + f.read_bytes())
    tag = digest.hexdigest()[:10]
    out = BUILD / f"{number}-{tag}"
    module = f"emu{number.replace('-', '_')}_{tag}"
    if os.environ.get("COURSE_EMU_SLOT"):
        # One folder for a run of builds that differ in a file or two (the self-check's variants, one
        # process each): ninja recompiles only what changed. The name, part of every object's command
        # line, stays the same so that the other objects are reused.
        out = Path(os.environ["COURSE_EMU_SLOT"]) / number
        module = f"emu{number.replace('-', '_')}_slot"
    staged = out / "src"
    staged.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        target = staged / (name[:-3] + ".cpp" if name.endswith(".cu") else name)
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
    sources = [str(staged / (s[:-3] + ".cpp" if s.endswith(".cu") else s)) for s in spec["sources"]]
    sources += [str(EMU / b) for b in spec["bindings"]]
    return cpp.load(name=module, sources=sources, build_directory=str(out),
                    extra_include_paths=[str(staged), str(EMU)],
                    # Hidden: its calls between its own functions stay inside it, since the chapter's
                    # real CUDA build, loaded in the same process, defines the same names
                    # (upsample_forward_cuda, ...). Not -Bsymbolic: that would also bind the C++
                    # library's template statics it instantiates (a locale facet's id) to its own
                    # copies, and a stream's output then crashes.
                    # -g: a shared-memory race names its two lines (addr2line, cuda_emu.h)
                    extra_cflags=["-O0", "-g", *checks, "-DCOURSE_EMULATE", "-Wno-unused-variable",
                                  "-fvisibility=hidden"],
                    verbose=False)
