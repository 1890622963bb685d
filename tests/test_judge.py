"""The GPU-free judge's own reports (coursekit/emulate.py, coursekit/emu): a CUDA mistake that a
GPU leaves undefined, or that reads as another bug, stops the emulated run with a message naming
what it is. The chapters' tests run the judge on their exercises; these run it on small kernels
that make one mistake each."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess

import pytest
import torch

from coursekit import ROOT, emulate

X86 = platform.machine() in ("x86_64", "AMD64")


def run_kernel(tmp_path, name: str, body: str, threads: int) -> subprocess.CompletedProcess:
    """`body` as a kernel k(float* out) launched <<<1, threads>>> on an output of `threads` floats,
    compiled and run by the judge (exit 99: the judge stopped it, its report on stderr)."""
    source = tmp_path / f"{name}.cu"
    source.write_text(
        "#include <cstdio>\n"
        f"__global__ void k(float* out) {{ {body} }}\n"
        "int main() {\n"
        "  float* out;\n"
        f"  cudaMalloc(&out, {threads} * sizeof(float));\n"
        f"  k<<<1, {threads}>>>(out);\n"
        "  printf(\"%s\\n\", cudaGetErrorString(cudaDeviceSynchronize()));\n"
        "  return 0;\n"
        "}\n")
    return subprocess.run([str(emulate.build_program(source))], capture_output=True, text=True, timeout=120)


SHUFFLES = {  # shuffle -> (threads, its width, allowed)
    "__shfl_down_sync(0xffffffffu, v, 16, 64)": (64, 64, False),  # a row of 64 threads "as one warp"
    "__shfl_xor_sync(0xffffffffu, v, 1, 24)": (32, 24, False),  # not a power of two
    "__shfl_sync(0xffffffffu, v, 0, 0)": (32, 0, False),
    "__shfl_up_sync(0xffffffffu, v, 1, 33)": (64, 33, False),
    "__shfl_down_sync(0xffffffffu, v, 8, 16)": (32, 16, True),
    "__shfl_xor_sync(0xffffffffu, v, 1)": (64, 32, True),
}


@pytest.mark.parametrize("shuffle", list(SHUFFLES))
def test_shuffle_width_is_a_power_of_two_up_to_32(tmp_path, shuffle):
    """A shuffle moves values between the lanes of one warp: its width is a power of two from 1 to 32.
    A reduction over a row of 64 threads written with width = blockDim.x reads lanes of another warp
    on a GPU (undefined); the judge stops it, naming the call, its width and the thread."""
    threads, width, allowed = SHUFFLES[shuffle]
    r = run_kernel(tmp_path, f"shfl{abs(hash(shuffle))}", f"float v = threadIdx.x; v = {shuffle}; "
                   "out[threadIdx.x] = v;", threads)
    if allowed:
        assert r.returncode == 0, f"{shuffle}: the judge stopped a valid shuffle (exit {r.returncode}):\n{r.stderr}"
        return
    op = shuffle.split("(")[0]
    assert r.returncode == 99, f"{shuffle}: the judge let width {width} pass (exit {r.returncode}):\n{r.stdout}{r.stderr}"
    assert re.search(rf"warp error: {op} with width {width}, in kernel k, block \(0, 0, 0\), thread \(\d+, 0, 0\) "
                     r"\(the width must be a power of two from 1 to 32", r.stderr), r.stderr


def test_output_read_before_written_is_named(tmp_path):
    """An output updated (+=) where it should be assigned reads the judge's fill (NaN) and stores NaN
    again: the judge tells it apart from an element no thread stored, since it notes each store."""
    if not X86:
        pytest.skip("the judge notes stores on x86-64 only")
    chapter = tmp_path / "02_forward_kernel"
    shutil.copytree(ROOT / "02_forward_kernel" / "csrc", chapter / "csrc")
    kernel = chapter / "csrc" / "trilinear_cuda.cu"
    store = "out_n[f] = static_cast<scalar_t>(acc);"
    assert kernel.read_text().count(store) == 1
    kernel.write_text(kernel.read_text().replace(store, "out_n[f] += static_cast<scalar_t>(acc);"))
    judge = emulate.build("02", chapter)
    feats = torch.randn(3, 8, 5, dtype=torch.float32)
    points = torch.rand(3, 3, dtype=torch.float32) * 2 - 1
    with pytest.raises(RuntimeError, match=r"output read before it was written: 15 of 15 elements of out .* the first "
                                           r"at \(n, f\) = \(0, 0\): .*updated \(\+=\) where it should be assigned"):
        judge.forward(feats, points, True, 1)
