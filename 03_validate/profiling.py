"""Where the time of one call goes: torch.profiler, read by a program.

`profile_call(fn, device)` runs `fn` once under torch.profiler, after warm-up calls, and
returns three numbers: the device's time, the host's time and the number of kernels
(section 7 of the lesson gives the exact contract). `trace_events` is the reading
helper: the profile as the list of complete events that `export_chrome_trace` writes,
the same rows Perfetto (ui.perfetto.dev) draws.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule


@dataclass(frozen=True)
class CallProfile:
    """One call, profiled. Times in microseconds.

    device_us: on a GPU, the summed durations of the kernels the call ran (events of
        category "kernel"); on the CPU, the summed durations of its top-level operators
        (events of category "cpu_op" inside no other "cpu_op" of their thread).
    host_us: the call on the host, from just before fn() to its return (no synchronize).
    kernels: how many events device_us sums: kernels on a GPU, top-level operators on the CPU.
    """

    device_us: float
    host_us: float
    kernels: int

    @property
    def host_bound(self) -> bool:
        """The host takes longer to issue the call than the device takes to run it: back to back,
        such calls leave the GPU waiting for work."""
        return self.host_us > self.device_us


def trace_events(prof: profile) -> list[dict]:
    """The complete events (Chrome trace "ph": "X") of a finished profile, as dicts with
    "name", "cat" (category), "ts" (start, µs), "dur" (duration, µs), "pid" and "tid".

    Categories: on the host "cpu_op" (an operator: aten::add, ...), "user_annotation" (a
    torch.profiler.record_function range), "cuda_runtime" (a CUDA runtime call, such as
    cudaLaunchKernel), "overhead" (the profiler's own work); on a GPU stream "kernel",
    "gpu_memcpy", "gpu_memset" and "gpu_user_annotation" (a record_function range drawn
    again over the GPU work it launched)."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            doc = json.load(f)
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and "dur" in e]


def profile_call(fn: Callable[[], object], device: str | torch.device = "cpu", warmup: int = 1) -> CallProfile:
    """Profile one call of `fn` on `device` ("cpu", "cuda", "cuda:0" or a torch.device).

    `fn` is called exactly warmup + 1 times, all inside torch.profiler (CPU activity, and
    CUDA activity on a GPU) with a schedule of `warmup` warm-up steps and one recorded step:
    the warm-up calls, one step each, then the call it measures. See CallProfile for what
    the three numbers count.
    """
    # BEGIN SOLUTION profile-call
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, schedule=schedule(wait=0, warmup=warmup, active=1)) as prof:
        for _ in range(warmup):  # lazy loading, allocation, the profiler's own start: not what a call costs
            fn()
            if cuda:
                torch.cuda.synchronize(dev)  # no warm-up kernel may finish inside the recorded step
            prof.step()
        with record_function("profile_call"):  # the call itself, on the host
            fn()
        if cuda:
            torch.cuda.synchronize(dev)  # every kernel of the call has run before the profile ends
    events = trace_events(prof)
    host_us = next(e["dur"] for e in events if e["cat"] == "user_annotation" and e["name"] == "profile_call")
    if cuda:
        work = [e for e in events if e["cat"] == "kernel"]  # not the cudaLaunchKernel calls, copies or ranges
    else:
        work, ends = [], {}  # ends: thread -> end of its last top-level operator
        for e in sorted((e for e in events if e["cat"] == "cpu_op"), key=lambda e: (e["ts"], -e["dur"])):
            if e["ts"] >= ends.get(e["tid"], float("-inf")):  # not inside the previous top-level operator
                work.append(e)
                ends[e["tid"]] = e["ts"] + e["dur"]
    return CallProfile(device_us=float(sum(e["dur"] for e in work)), host_us=float(host_us), kernels=len(work))
    # END SOLUTION
