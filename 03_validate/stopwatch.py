"""Two ways to time a call: the one that lies and the one to use.

`coursekit.timing.bench` (torch.utils.benchmark) is what the course's benchmarks
use; `median_time_ms` below is the same idea written out, so you can see every
step.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch


def time_once_wrong(fn: Callable[[], object]) -> float:
    """The common mistake, in milliseconds: one call, wall clock, no synchronisation. Do not use."""
    start = time.time()
    fn()  # on a GPU this returns once the kernel is queued, not when it is done
    return (time.time() - start) * 1e3


def median_time_ms(fn: Callable[[], object], device: str | torch.device = "cpu", warmup: int = 3, reps: int = 20) -> float:
    """Median time of one call of `fn` in milliseconds, after `warmup` untimed calls.

    `fn` is called exactly warmup + reps times: first the warm-up calls, none of
    them timed, then `reps` calls each timed on its own; the result is the median
    of those `reps` times. On CUDA each timed call is bracketed by two events
    recorded on the current stream; the GPU stamps them when it reaches them, so
    the time is the GPU's. On the CPU it is time.perf_counter() around each call.
    """
    # BEGIN SOLUTION median-timer
    cuda = torch.device(device).type == "cuda"
    for _ in range(warmup):  # first calls pay for lazy loading, allocation, caches
        fn()
    times = []
    if cuda:
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for start, end in pairs:
            start.record()  # on the current stream: the one fn() queues its kernels on
            fn()
            end.record()
        torch.cuda.synchronize(device)  # wait until the GPU has stamped every event
        times = [start.elapsed_time(end) for start, end in pairs]
    else:
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)  # one slow outlier (a page fault, another process) moves a mean, not the median
    # END SOLUTION
