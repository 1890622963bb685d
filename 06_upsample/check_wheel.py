"""What a wheel of this chapter needs at run time: its tags, the libraries its compiled
module links to, the symbols it takes from torch, and the GPU code it carries.

    python check_wheel.py dist/ch06_upsample-0.2.0-cp39-abi3-linux_x86_64.whl

Uses readelf and nm (binutils) and, for the GPU code, cuobjdump (CUDA toolkit:
CUDA_HOME/bin, /usr/local/cuda/bin or PATH; else the copy Triton installs with torch). Exits with status 1 when the module
needs a C++ symbol of libtorch (c10::, at::, torch::): such a library is tied to
the torch it was built with, which is what the stable ABI avoids.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

TORCH_CPP = re.compile(r"^_ZN?K?\d*(?:St)?N?K?\d+(c10|at|torch|caffe2)\d|^_ZN(?:K)?(?:3c10|2at|5torch|6caffe2)")
SHIM = re.compile(r"^(aoti_torch_|torch_)")


def run(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def tool(name: str) -> str | None:
    """A CUDA binary tool: from the toolkit, PATH, or the copy Triton ships with torch."""
    import importlib.util

    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / name).is_file():
            return str(Path(home) / "bin" / name)
    if shutil.which(name):
        return shutil.which(name)
    triton = importlib.util.find_spec("triton")
    if triton is not None and triton.origin:
        bundled = Path(triton.origin).parent / "backends" / "nvidia" / "bin" / name
        if bundled.is_file():
            return str(bundled)
    return None


def main(wheel: str) -> int:
    wheel_path = Path(wheel)
    print(f"wheel: {wheel_path.name} ({wheel_path.stat().st_size / 1024:.0f} KiB)")
    with zipfile.ZipFile(wheel_path) as z, tempfile.TemporaryDirectory() as tmp:
        names = z.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/WHEEL"))
        tags = [ln.split(":", 1)[1].strip() for ln in z.read(meta).decode().splitlines() if ln.startswith("Tag:")]
        print(f"tags: {', '.join(tags)}   (cp39: CPython >= 3.9; abi3: its stable ABI; linux_x86_64: the platform)")
        print("files: " + ", ".join(n for n in names if ".dist-info/" not in n))
        libs = [n for n in names if n.endswith(".so")]
        z.extractall(tmp)
        status = 0
        for lib in libs:
            path = str(Path(tmp) / lib)
            print(f"\n{lib}")
            needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", run("readelf", "-d", path))
            print(f"  links to: {', '.join(needed)}")
            undefined = [ln.split()[-1] for ln in run("nm", "-D", "--undefined-only", path).splitlines() if ln.strip()]
            undefined = [s.split("@")[0] for s in undefined]
            shims = sorted(s for s in undefined if SHIM.match(s))
            cpp = sorted(s for s in undefined if TORCH_CPP.match(s))
            python = sorted(s for s in undefined if s.startswith(("Py", "_Py")))
            cuda = sorted(s for s in undefined if s.startswith(("cuda", "__cuda")))
            other = Counter("libstdc++/libgcc (_Z..., __cxa_..., _Unwind_...)" if s.startswith(("_Z", "__cxa", "_Unwind", "__gxx"))
                            else "C library" for s in undefined if s not in set(shims + cpp + python + cuda))
            print(f"  symbols it needs: {len(undefined)}")
            print(f"    from torch's C shims ({len(shims)}): {', '.join(shims)}")
            print(f"    C++ symbols of libtorch (c10::, at::, torch::): {len(cpp)}" + (f": {', '.join(cpp[:10])}" if cpp else ""))
            print(f"    from Python's limited API ({len(python)}): {', '.join(python)}")
            if cuda:
                print(f"    from the CUDA runtime ({len(cuda)}): {', '.join(cuda)}")
            for what, n in sorted(other.items()):
                print(f"    from the {what}: {n}")
            if cpp:
                status = 1
            cuobjdump = tool("cuobjdump")
            if cuobjdump and cuda:
                elf = re.findall(r"sm_\d+a?", run(cuobjdump, "--list-elf", path))
                ptx = re.findall(r"sm_\d+a?", run(cuobjdump, "--list-ptx", path))
                print(f"  GPU code: machine code (cubin) for {', '.join(sorted(set(elf))) or 'none'}; "
                      f"PTX for {', '.join(sorted(set(ptx))) or 'none'} (compiled by the driver for newer GPUs)")
            elif not cuda:
                print("  GPU code: none (a CPU-only build)")
            else:
                print("  GPU code: not listed (no cuobjdump found: CUDA_HOME/bin, PATH, Triton's copy)")
    return status


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
