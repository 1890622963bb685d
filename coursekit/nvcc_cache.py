"""A compile cache for nvcc, for the grader self-check on a GPU machine.

The self-check builds a chapter once per wrong variant, in a folder per part, and a variant
changes one file: every other file compiles to the same object. With COURSE_NVCC_CACHE=DIR,
coursekit.build points torch's ninja rule at this wrapper (torch reads PYTORCH_NVCC):

    python coursekit/nvcc_cache.py NVCC [nvcc arguments...]

It keys an object on nvcc's arguments (with the chapter folder's path taken out), the source
file and every header it includes from its own folder, recursively; a hit copies the object
and writes the dependency file ninja asked for (-MF, or --dependency-output, as torch's ninja rule names it),
naming those files, a miss runs nvcc and keeps the result. Without that file ninja records no
header for the object, and a later edit of a header alone would not recompile it.
Headers outside the folder (torch's, CUDA's) are the same for every build of one machine.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def local_files(source: Path) -> list[Path]:
    """The source and the headers it includes from its own folder, recursively, in a fixed order."""
    seen, todo = [], [source]
    while todo:
        f = todo.pop()
        if f in seen or not f.is_file():
            continue
        seen.append(f)
        todo += [f.parent / name for name in INCLUDE.findall(f.read_text(errors="replace"))]
    return [source] + sorted(set(seen) - {source})


def main(argv: list[str]) -> int:
    nvcc, args = argv[0], argv[1:]
    value = lambda flag: args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None  # noqa: E731
    out, depfile, source = value("-o"), value("-MF") or value("--dependency-output"), value("-c")
    cache = os.environ.get("COURSE_NVCC_CACHE")
    if not (cache and out and source):
        return subprocess.call([nvcc, *args])
    src = Path(source).resolve()
    files = local_files(src)
    key = hashlib.sha256()
    for a in args:
        if a not in (out, depfile, source):
            key.update(a.replace(str(src.parent), "<csrc>").encode() + b"\0")
    for f in files:
        key.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    entry = Path(cache) / (key.hexdigest() + ".o")
    if entry.is_file():
        shutil.copyfile(entry, out)
        if depfile:
            Path(depfile).write_text(f"{out}: " + " ".join(str(f) for f in files) + "\n")
        return 0
    code = subprocess.call([nvcc, *args])
    if code == 0:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(out, tmp)
        os.replace(tmp, entry)  # atomic: parts running side by side never see half an object
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
