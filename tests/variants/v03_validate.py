"""Plausible wrong solutions for chapter 03; each must fail at least one test of its exercise."""

from coursekit.exercises import Variant

# The timer's body, piece by piece, so that the variants below can rewrite several pieces at once.
WARMUP = ("    for _ in range(warmup):  # first calls pay for lazy loading, allocation, caches\n"
          "        fn()\n"
          "    times = []\n")
CUDA_LOOP = ("        for start, end in pairs:\n"
             "            start.record()  # on the current stream: the one fn() queues its kernels on\n"
             "            fn()\n"
             "            end.record()\n"
             "        torch.cuda.synchronize(device)  # wait until the GPU has stamped every event\n"
             "        times = [start.elapsed_time(end) for start, end in pairs]\n")
CPU_LOOP = ("        for _ in range(reps):\n"
            "            start = time.perf_counter()\n"
            "            fn()\n"
            "            times.append((time.perf_counter() - start) * 1e3)\n")
BETWEEN = ("    if cuda:\n"
           "        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]\n")
TIMER = WARMUP + BETWEEN + CUDA_LOOP + "    else:\n" + CPU_LOOP

VARIANTS = [
    # ---- reference: the formula
    Variant("reference-swapped-axes", "the reference pairs offsets with (u, w, v) instead of (u, v, w)",
            "reference.py", "uvw = (points + 1) / 2  # (N, 3)", "uvw = ((points + 1) / 2)[:, [0, 2, 1]]  # (N, 3)"),
    Variant("reference-no-unit-mapping", "the reference uses x in [-1, 1] as the weight instead of u = (x + 1) / 2",
            "reference.py", "uvw = (points + 1) / 2  # (N, 3)", "uvw = points  # (N, 3)"),
    Variant("reference-sum-not-product", "adds the three per-axis factors instead of multiplying them",
            "reference.py", "return factors.prod(dim=2)", "return factors.sum(dim=2) / 3"),
    Variant("reference-not-differentiable", "detaches the weights: no gradient reaches the points",
            "reference.py", "return factors.prod(dim=2)", "return factors.prod(dim=2).detach()"),
    # ---- reference: its precision promise
    Variant("reference-in-storage-type", "computes float16/bfloat16 inputs in their own type, rounding at every step",
            "reference.py", "compute = torch.promote_types(feats.dtype, torch.float32)", "compute = feats.dtype"),
    Variant("reference-always-float32", "computes every dtype in float32, float64 included",
            "reference.py", "compute = torch.promote_types(feats.dtype, torch.float32)", "compute = torch.float32"),
    Variant("reference-weights-in-storage-type", "computes the weights in the half type, only the sum in float",
            "reference.py", "weights = corner_weights(points.to(compute))", "weights = corner_weights(points).to(compute)"),
    Variant("reference-products-in-storage-type", "rounds each weight * feature product to the half type before the sum",
            "reference.py", "out = (weights[:, :, None] * feats.to(compute)).sum(dim=1)",
            "out = (weights[:, :, None].to(feats.dtype) * feats).to(compute).sum(dim=1)"),
    Variant("reference-float32-coordinates", "maps the points to [0, 1] in float32 whatever their dtype",
            "reference.py", "uvw = (points + 1) / 2  # (N, 3)", "uvw = (points.float() + 1) / 2  # (N, 3)"),
    Variant("reference-bmm-squeeze", "a batched matmul, then squeeze(): N = 1 or F = 1 loses a dimension",
            "reference.py", "out = (weights[:, :, None] * feats.to(compute)).sum(dim=1)",
            "out = torch.bmm(weights[:, None, :], feats.to(compute)).squeeze()"),
    Variant("reference-weights-promoted", "corner_weights promotes half-type points to float32 itself: its weights "
            "come back in float32, not in the dtype of points",
            "reference.py", "uvw = (points + 1) / 2  # (N, 3)",
            "uvw = (points.to(torch.promote_types(points.dtype, torch.float32)) + 1) / 2  # (N, 3)"),
    # ---- timer: the statistic and the number of calls
    Variant("timer-mean", "averages the timed calls instead of taking the median",
            "stopwatch.py", "return statistics.median(times)", "return statistics.mean(times)"),
    Variant("timer-upper-median", "sorts the times and takes the middle one: for an even reps (the default 20) the "
            "upper of the two middle values, not their mean",
            "stopwatch.py", "    return statistics.median(times)", "    return sorted(times)[len(times) // 2]"),
    Variant("timer-median-low", "statistics.median_low: for an even reps the lower of the two middle values",
            "stopwatch.py", "    return statistics.median(times)", "    return statistics.median_low(times)"),
    Variant("timer-whole-milliseconds", "perf_counter_ns with integer division by 10**6: each time cut to whole "
            "milliseconds (a 0.3 ms call reads 0 ms)",
            "stopwatch.py",
            "            start = time.perf_counter()\n            fn()\n            times.append((time.perf_counter() - start) * 1e3)",
            "            start = time.perf_counter_ns()\n            fn()\n"
            "            times.append((time.perf_counter_ns() - start) // 1_000_000)"),
    Variant("timer-rounds-to-10us", "each time rounded to 2 decimals of a millisecond: calls under 5 µs read 0",
            "stopwatch.py", "            times.append((time.perf_counter() - start) * 1e3)",
            "            times.append(round((time.perf_counter() - start) * 1e3, 2))"),
    Variant("timer-returns-tensor", "the median by torch.quantile: a 0-dim float32 tensor, not a float",
            "stopwatch.py", "    return statistics.median(times)", "    return torch.tensor(times).quantile(0.5)"),
    Variant("timer-cuda-by-name", "GPU or CPU decided by the string \"cuda\": \"cuda:0\" and torch.device(\"cuda:0\") "
            "are timed with perf_counter and no synchronisation",
            "stopwatch.py", "    cuda = torch.device(device).type == \"cuda\"", "    cuda = str(device) == \"cuda\"",
            cuda_only=True),
    Variant("timer-no-warmup", "skips the warm-up calls",
            "stopwatch.py", "    for _ in range(warmup):  # first calls", "    for _ in range(0):  # first calls"),
    Variant("timer-one-call-too-few", "times reps - 1 calls",
            "stopwatch.py", "        for _ in range(reps):\n", "        for _ in range(reps - 1):\n"),
    Variant("timer-drops-first-timed-call", "treats the first timed call as one more warm-up and leaves it out of the median",
            "stopwatch.py", "return statistics.median(times)", "return statistics.median(times[1:] or times)"),
    Variant("timer-last-warmup-timed", "one warm-up call fewer and one timed call more: the last warm-up is in the median",
            "stopwatch.py", TIMER,
            TIMER.replace("range(warmup)", "range(max(warmup - 1, 0))").replace(
                "        for _ in range(reps):\n", "        for _ in range(reps + min(warmup, 1)):\n")),
    # ---- timer: warm-up leaking into the measurement, on the CPU
    Variant("timer-times-warmup", "times the warm-up calls too and keeps them in the median",
            "stopwatch.py", WARMUP,
            "    times = []\n"
            "    for _ in range(warmup):  # timed like the others\n"
            "        start = time.perf_counter()\n"
            "        fn()\n"
            "        times.append((time.perf_counter() - start) * 1e3)\n"),
    Variant("timer-clock-started-before-warmup", "a lap timer whose clock starts before the warm-up loop",
            "stopwatch.py", TIMER,
            "    lap = time.perf_counter()\n" + TIMER.replace(CPU_LOOP,
                                                           "        for _ in range(reps):\n"
                                                           "            fn()\n"
                                                           "            now = time.perf_counter()\n"
                                                           "            times.append((now - lap) * 1e3)\n"
                                                           "            lap = now\n")),
    Variant("timer-one-block", "times all reps as one block and divides: a mean, not a median",
            "stopwatch.py", CPU_LOOP,
            "        start = time.perf_counter()\n"
            "        for _ in range(reps):\n"
            "            fn()\n"
            "        times = [(time.perf_counter() - start) * 1e3 / reps]\n"),
    # ---- timer: on a GPU
    Variant("timer-no-sync", "reads the CUDA events before the GPU has reached them",
            "stopwatch.py", "        torch.cuda.synchronize(device)  # wait", "        pass  # wait", cuda_only=True),
    Variant("timer-events-before-warmup", "records the first start event before the warm-up calls",
            "stopwatch.py", TIMER,
            "    if cuda:\n"
            "        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]\n"
            "        pairs[0][0].record()\n"
            + WARMUP + "    if cuda:\n"
            + CUDA_LOOP.replace("            start.record()  # on", "            if start is not pairs[0][0]: start.record()  # on")
            + "    else:\n" + CPU_LOOP, cuda_only=True),
    Variant("timer-events-on-a-new-stream", "records the start events on a fresh stream instead of the current one",
            "stopwatch.py", "            start.record()  # on the current", "            start.record(torch.cuda.Stream())  # on the current",
            cuda_only=True),
    Variant("timer-events-on-default-stream", "records the events on the default stream, not the current one",
            "stopwatch.py", CUDA_LOOP,
            CUDA_LOOP.replace("start.record()", "start.record(torch.cuda.default_stream())").replace(
                "end.record()", "end.record(torch.cuda.default_stream())"), cuda_only=True),
    Variant("timer-cuda-no-sync-after-warmup", "perf_counter and a synchronize after each timed call, none before the first",
            "stopwatch.py", CUDA_LOOP,
            "        for _ in range(reps):\n"
            "            start = time.perf_counter()\n"
            "            fn()\n"
            "            torch.cuda.synchronize(device)\n"
            "            times.append((time.perf_counter() - start) * 1e3)\n", cuda_only=True),
    Variant("timer-cuda-one-block", "one pair of events around all reps, divided by reps",
            "stopwatch.py", CUDA_LOOP,
            "        pairs[0][0].record()\n"
            "        for _ in range(reps):\n"
            "            fn()\n"
            "        pairs[0][1].record()\n"
            "        torch.cuda.synchronize(device)\n"
            "        times = [pairs[0][0].elapsed_time(pairs[0][1]) / reps]\n", cuda_only=True),
    # ---- vectorized-kernel: the launch decision (host code, graded on the CPU)
    Variant("pack-ignores-alignment", "uses 16-byte packs on misaligned tensors",
            "csrc/trilinear.cpp", "const bool aligned = feats_address % 16 == 0 && out_address % 16 == 0;",
            "const bool aligned = true;"),
    Variant("pack-ignores-F", "uses packs whatever F: rows start off 16 bytes and end in part packs",
            "csrc/trilinear.cpp", "return F % pack == 0 && aligned ? pack : 0;", "return aligned ? pack : 0;"),
    Variant("pack-F-at-least-one-pack", "asks for F >= pack instead of F % pack == 0",
            "csrc/trilinear.cpp", "return F % pack == 0 && aligned ? pack : 0;", "return F >= pack && aligned ? pack : 0;"),
    Variant("pack-always-4", "4 elements per pack whatever the dtype",
            "csrc/trilinear.cpp", "const int64_t pack = 16 / element_size;", "const int64_t pack = 4;"),
    Variant("pack-in-bytes", "the pack counted in bytes (16) instead of elements",
            "csrc/trilinear.cpp", "const int64_t pack = 16 / element_size;", "const int64_t pack = 16;"),
    Variant("pack-aligned-to-8", "checks 8-byte alignment instead of 16",
            "csrc/trilinear.cpp", "const bool aligned = feats_address % 16 == 0 && out_address % 16 == 0;",
            "const bool aligned = feats_address % 8 == 0 && out_address % 8 == 0;"),
    Variant("pack-only-feats-aligned", "checks the alignment of feats, not of out",
            "csrc/trilinear.cpp", "const bool aligned = feats_address % 16 == 0 && out_address % 16 == 0;",
            "const bool aligned = feats_address % 16 == 0;"),
    Variant("pack-alignment-in-elements", "checks the addresses modulo the pack (in elements) instead of 16 bytes",
            "csrc/trilinear.cpp", "const bool aligned = feats_address % 16 == 0 && out_address % 16 == 0;",
            "const bool aligned = feats_address % pack == 0 && out_address % pack == 0;"),
    Variant("pack-relative-alignment", "asks feats and out to be equally misaligned instead of both on 16 bytes",
            "csrc/trilinear.cpp", "const bool aligned = feats_address % 16 == 0 && out_address % 16 == 0;",
            "const bool aligned = feats_address % 16 == out_address % 16;"),
    Variant("pack-sum-alignment", "asks the two addresses to add up to a multiple of 16",
            "csrc/trilinear.cpp", "const bool aligned = feats_address % 16 == 0 && out_address % 16 == 0;",
            "const bool aligned = (feats_address + out_address) % 16 == 0;"),
    Variant("pack-rows-on-8-bytes", "asks F * element_size to be a multiple of 8 bytes instead of 16",
            "csrc/trilinear.cpp", "return F % pack == 0 && aligned ? pack : 0;",
            "return F * element_size % 8 == 0 && aligned ? pack : 0;"),
    # ---- vectorized-kernel: the kernel (graded on a GPU)
    Variant("vectorized-acc-in-storage-type", "accumulates the pack in scalar_t (half) instead of opmath_t",
            "csrc/trilinear_cuda.cu", "opmath_t acc[P::size] = {};", "scalar_t acc[P::size] = {};", cuda_only=True),
    Variant("vectorized-acc-in-float", "accumulates in float whatever the dtype: float64 loses its precision",
            "csrc/trilinear_cuda.cu", "opmath_t acc[P::size] = {};", "float acc[P::size] = {};", cuda_only=True),
    Variant("vectorized-uninitialised-acc", "declares the pack's accumulators without = {}: each starts with what the "
            "thread's registers (the judge: its stack) held",
            "csrc/trilinear_cuda.cu", "opmath_t acc[P::size] = {};", "opmath_t acc[P::size];", cuda_only=True),
    Variant("vectorized-row-stride-in-elements", "steps from corner row to corner row by F packs instead of F / pack",
            "csrc/trilinear_cuda.cu", "const P x = f_n[k * packs + p];", "const P x = f_n[k * F + p];", cuda_only=True),
    Variant("vectorized-cube-from-blockdim-x", "computes the cube index with blockDim.x instead of blockDim.y",
            "csrc/trilinear_cuda.cu",
            "blockIdx.x) * blockDim.y + threadIdx.y;\n  if (n >= N) {\n    return;\n  }\n  opmath_t weight[8];\n"
            "  weights_of(points, n, weight);\n  const int64_t packs",
            "blockIdx.x) * blockDim.x + threadIdx.y;\n  if (n >= N) {\n    return;\n  }\n  opmath_t weight[8];\n"
            "  weights_of(points, n, weight);\n  const int64_t packs", cuda_only=True),
    Variant("vectorized-one-pack-per-thread", "no loop over the row: packs past blockDim.x are never written",
            "csrc/trilinear_cuda.cu", "for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {",
            "for (int64_t p = threadIdx.x; p < packs && p < blockDim.x; p += blockDim.x) {", cuda_only=True),
    Variant("vectorized-pack-loop-steps-by-a-warp", "the loop over packs steps by 32 where the block has blockDim.x "
            "threads along it: the block's threads redo each other's packs (right values, repeated work)",
            "csrc/trilinear_cuda.cu", "for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {",
            "for (int64_t p = threadIdx.x; p < packs; p += 32) {", cuda_only=True),
    Variant("vectorized-one-pack-past-the-row", "loops to p <= packs: one pack past the end of each row",
            "csrc/trilinear_cuda.cu", "for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {",
            "for (int64_t p = threadIdx.x; p <= packs; p += blockDim.x) {", cuda_only=True),
    Variant("vectorized-packs-rounded-up", "counts the packs of a row rounding up and reads past F",
            "csrc/trilinear_cuda.cu", "const int64_t packs = F / P::size;", "const int64_t packs = F / P::size + 1;",
            cuda_only=True),
    # ---- outside the exercises: the CPU loop, the checks and the layout (the chapter's own tests)
    Variant("cpu-arithmetic-in-storage-type", "the CPU loop computes float16/bfloat16 in their own type",
            "csrc/trilinear_cpu.cpp", "  using opmath_t = at::opmath_type<scalar_t>;", "  using opmath_t = scalar_t;"),
    Variant("cpu-arithmetic-in-float", "the CPU loop computes in float whatever the dtype",
            "csrc/trilinear_cpu.cpp", "  using opmath_t = at::opmath_type<scalar_t>;", "  using opmath_t = float;"),
    Variant("forward-skips-contiguous-feats", "passes feats to the kernels without making it contiguous",
            "csrc/trilinear.cpp", "const at::Tensor feats = feats_in.contiguous();", "const at::Tensor& feats = feats_in;"),
    Variant("forward-skips-contiguous-points", "passes points to the kernels without making them contiguous",
            "csrc/trilinear.cpp", "const at::Tensor points = points_in.contiguous();", "const at::Tensor& points = points_in;"),
    Variant("checks-miss-points-rank", "checks the size of points without checking its rank",
            "csrc/trilinear.cpp", "TORCH_CHECK(points.dim() == 2 && points.size(0)", "TORCH_CHECK(points.size(0)"),
    Variant("checks-miss-feats-rank", "checks the corners of feats without checking its rank",
            "csrc/trilinear.cpp", "TORCH_CHECK(feats.dim() == 3 && feats.size(1) == 8,", "TORCH_CHECK(feats.dim() >= 2 && feats.size(1) == 8,"),
    # ---- outside the exercises: the naive kernel (checked by the chapter's own CUDA tests)
    Variant("naive-missing-bounds-check", "no bounds check in the naive kernel (F not a multiple of 8)",
            "csrc/trilinear_cuda.cu", "  if (n >= N || f >= F) {\n    return;\n  }\n  opmath_t weight[8];\n  weights_of(points, n, weight);\n  opmath_t acc = 0;",
            "  opmath_t weight[8];\n  weights_of(points, n, weight);\n  opmath_t acc = 0;", cuda_only=True),
    Variant("naive-swapped-axes", "n taken from the y index and f from the x index",
            "csrc/trilinear_cuda.cu",
            "const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;\n  const int64_t f = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;",
            "const int64_t f = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;\n  const int64_t n = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;",
            cuda_only=True),
]

# Found by a red-team round.
VARIANTS += [
    Variant("reference-mutates-points", "maps the points to [0, 1] in place: the caller's float32/float64 points change",
            "reference.py", "uvw = (points + 1) / 2  # (N, 3)", "uvw = points.add_(1).div_(2)  # (N, 3)"),
    Variant("reference-mutates-feats", "multiplies the features in place (saves a temporary): float32/float64 feats change",
            "reference.py", "out = (weights[:, :, None] * feats.to(compute)).sum(dim=1)",
            "out = feats.to(compute).mul_(weights[:, :, None]).sum(dim=1)"),
    Variant("reference-half-sum-dtype", "sums the products with dtype=feats.dtype (in the half type)",
            "reference.py", "out = (weights[:, :, None] * feats.to(compute)).sum(dim=1)",
            "out = (weights[:, :, None] * feats.to(compute)).sum(dim=1, dtype=feats.dtype)"),
    Variant("reference-float16-only", "promotes float16 to float32 but leaves bfloat16 in its own type",
            "reference.py", "compute = torch.promote_types(feats.dtype, torch.float32)",
            "compute = torch.float32 if feats.dtype == torch.float16 else feats.dtype"),
    Variant("reference-offsets-reversed", "the corner table read bottom-up",
            "reference.py", "offsets = torch.tensor(CORNER_OFFSETS,", "offsets = torch.tensor(CORNER_OFFSETS[::-1],"),
    Variant("timer-process-time", "times with time.process_time(): CPU time of this process, not wall time",
            "stopwatch.py", "            start = time.perf_counter()\n            fn()\n            times.append((time.perf_counter() - start) * 1e3)",
            "            start = time.process_time()\n            fn()\n            times.append((time.process_time() - start) * 1e3)"),
    Variant("timer-median-by-hand", "the median by hand as the mean of the two middle values, for odd counts too",
            "stopwatch.py", "    return statistics.median(times)",
            "    s = sorted(times)\n    m = len(s) // 2\n    return (s[m - 1] + s[m]) / 2 if len(s) > 1 else s[0]"),
    Variant("timer-min", "returns the fastest call",
            "stopwatch.py", "    return statistics.median(times)", "    return min(times)"),
    Variant("timer-torch-median", "torch.tensor(times).median().item(): the lower middle value for even counts",
            "stopwatch.py", "    return statistics.median(times)", "    return torch.tensor(times, dtype=torch.float64).median().item()"),
    Variant("timer-seconds", "returns seconds instead of milliseconds",
            "stopwatch.py", "            times.append((time.perf_counter() - start) * 1e3)",
            "            times.append(time.perf_counter() - start)"),
    Variant("pack-precedence", "`feats_address & 15 == 0`: & binds looser than ==",
            "csrc/trilinear.cpp", "const bool aligned = feats_address % 16 == 0 && out_address % 16 == 0;",
            "const bool aligned = (feats_address & 15 == 0) && (out_address & 15 == 0);"),
    Variant("pack-two-packs", "asks F to be a multiple of two packs (32 bytes)",
            "csrc/trilinear.cpp", "return F % pack == 0 && aligned ? pack : 0;", "return F % (2 * pack) == 0 && aligned ? pack : 0;"),
    Variant("pack-no-doubles", "no packs for float64",
            "csrc/trilinear.cpp", "return F % pack == 0 && aligned ? pack : 0;",
            "return element_size < 8 && F % pack == 0 && aligned ? pack : 0;"),
    Variant("pack-aligned-32", "asks for 32-byte alignment",
            "csrc/trilinear.cpp", "const bool aligned = feats_address % 16 == 0 && out_address % 16 == 0;",
            "const bool aligned = feats_address % 32 == 0 && out_address % 32 == 0;"),
]

# Found by a red-team round: a wall-clock timer, a timer under no_grad, a floor without the output;
# and two correct timers (timeit) that the scripted clock did not reach.
VARIANTS += [
    Variant("timer-time-time", "times the CPU calls with time.time(): the wall clock, which steps with NTP and, "
            "as a double of seconds since 1970, resolves only ~0.24 µs",
            "stopwatch.py", "            start = time.perf_counter()\n            fn()\n            times.append((time.perf_counter() - start) * 1e3)",
            "            start = time.time()\n            fn()\n            times.append((time.time() - start) * 1e3)"),
    Variant("timer-no-grad", "runs every call under torch.no_grad() (\"benchmarks need no graph\"): a call that "
            "needs autograd fails or is timed without its graph",
            "stopwatch.py", "    cuda = torch.device(device).type == \"cuda\"\n",
            "    cuda = torch.device(device).type == \"cuda\"\n    _fn = fn\n\n    def fn():\n        with torch.no_grad():\n            return _fn()\n\n"),
    Variant("timer-timeit-default-timer", "timeit.default_timer, which is time.perf_counter",
            "stopwatch.py", "            start = time.perf_counter()\n            fn()\n            times.append((time.perf_counter() - start) * 1e3)",
            "            import timeit\n            start = timeit.default_timer()\n            fn()\n"
            "            times.append((timeit.default_timer() - start) * 1e3)", correct=True),
    Variant("timer-timeit-repeat", "timeit.repeat(fn, number=1, repeat=reps): reps calls, each timed on its own "
            "with time.perf_counter", "stopwatch.py", CPU_LOOP,
            "        import timeit\n        times = [t * 1e3 for t in timeit.repeat(fn, number=1, repeat=reps)]\n",
            correct=True),
    Variant("bench-floor-omits-output", "counts the bytes moved as feats + points only (the output's writes left "
            "out): every fraction of the floor comes out too low",
            "bench.py", "moved = timing.nbytes(feats, points, out)", "moved = timing.nbytes(feats, points)"),
    Variant("bench-dtype-sweep-ignores-dtype", "the dtype sweep makes float32 inputs whatever dtype it records",
            "bench.py", "    feats, points = inputs(N, F, device, dtype)\n    expected",
            "    feats, points = inputs(N, F, device)\n    expected"),
]

# Found by a red-team round of the GPU-free judge (coursekit/emulate.py): mistakes in the kernel of
# vectorized-kernel, and a correct kernel that steps its pointers in Packs.
_VCU = "csrc/trilinear_cuda.cu"
VARIANTS += [
    Variant("vectorized-offset-after-cast", "casts feats to a Pack pointer first and then adds n * 8 * F: the offset "
            "counts Packs, not elements, and cube n >= 1 reads pack-size times too far", _VCU,
            "const P* f_n = reinterpret_cast<const P*>(feats + n * 8 * F);",
            "const P* f_n = reinterpret_cast<const P*>(feats) + n * 8 * F;", cuda_only=True),
    Variant("vectorized-stride-in-elements", "steps over the packs of a row by blockDim.x * P::size (elements, not "
            "packs): rows of more packs than threads lose packs", _VCU,
            "for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {",
            "for (int64_t p = threadIdx.x; p < packs; p += blockDim.x * P::size) {", cuda_only=True),
    Variant("vectorized-acc-uninitialised", "declares the pack's accumulators without = {}: they start from "
            "whatever the registers (the stack) held", _VCU,
            "opmath_t acc[P::size] = {};", "opmath_t acc[P::size];", cuda_only=True),
    Variant("vectorized-weights-before-bounds-check", "computes the weights (reads points) before "
            "`if (n >= N) return`: rows past the last cube read past the end of points", _VCU,
            "  if (n >= N) {\n    return;\n  }\n  opmath_t weight[8];\n  weights_of(points, n, weight);\n  const int64_t packs",
            "  opmath_t weight[8];\n  weights_of(points, n, weight);\n  if (n >= N) {\n    return;\n  }\n  const int64_t packs",
            cuda_only=True),
    Variant("vectorized-four-lanes", "accumulates 4 lanes per pack (16 bytes of float) whatever the dtype: half "
            "types lose lanes 4..7, float64 writes past acc[2]", _VCU,
            "      for (int i = 0; i < P::size; ++i) {\n        acc[i] +=",
            "      for (int i = 0; i < 4; ++i) {  // 4 floats in 16 bytes\n        acc[i] +=", cuda_only=True),
    Variant("vectorized-int32-cube-index", "the cube index in 32 bits: n * 8 wraps from N = 2^28 cubes (32 GiB of "
            "float16 feats with F = 8, which a large GPU holds)", _VCU,
            "const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;\n  if (n >= N) {\n    return;\n"
            "  }\n  opmath_t weight[8];\n  weights_of(points, n, weight);\n  const int64_t packs",
            "const int n = blockIdx.x * blockDim.y + threadIdx.y;\n  if (n >= N) {\n    return;\n"
            "  }\n  opmath_t weight[8];\n  weights_of(points, n, weight);\n  const int64_t packs", cuda_only=True),
    Variant("vectorized-offsets-in-packs", "casts the base pointers first and steps in Packs (8 * packs per cube, "
            "packs per output row): the same addresses", _VCU,
            "const P* f_n = reinterpret_cast<const P*>(feats + n * 8 * F);\n  P* out_n = reinterpret_cast<P*>(out + n * F);",
            "const P* f_n = reinterpret_cast<const P*>(feats) + n * 8 * packs;\n"
            "  P* out_n = reinterpret_cast<P*>(out) + n * packs;", cuda_only=True, correct=True),
]

# profile-call: profiling one call (03_validate/profiling.py). The mistakes of reading a profile:
# nested ranges added twice, the profiler's and the runtime's events taken for work, wall time for
# device time, a synchronize in the host's time, the warm-up inside the recorded step, the profiler's
# own start-up inside it.
_PROF = "profiling.py"
_PROF_OPEN = "    with profile(activities=activities, schedule=schedule(wait=0, warmup=warmup, active=1)) as prof:\n"
_PROF_WARMUP = ("        for _ in range(warmup):  # lazy loading, allocation, the profiler's own start: not what a call costs\n"
                "            fn()\n"
                "            if cuda:\n"
                "                torch.cuda.synchronize(dev)  # no warm-up kernel may finish inside the recorded step\n"
                "            prof.step()\n")
_PROF_CALL = ("        with record_function(\"profile_call\"):  # the call itself, on the host\n"
              "            fn()\n")
_PROF_SYNC = ("        if cuda:\n"
              "            torch.cuda.synchronize(dev)  # every kernel of the call has run before the profile ends\n")
_PROF_HOST = ("    host_us = next(e[\"dur\"] for e in events if e[\"cat\"] == \"user_annotation\" "
              "and e[\"name\"] == \"profile_call\")\n")
_PROF_DEVICE = "device_us=float(sum(e[\"dur\"] for e in work))"
_PROF_KERNELS = "work = [e for e in events if e[\"cat\"] == \"kernel\"]"
VARIANTS += [
    Variant("profile-all-cpu-ops", "counts every operator on the CPU, the ones nested inside others too",
            _PROF, "            if e[\"ts\"] >= ends.get(e[\"tid\"], float(\"-inf\")):", "            if True:"),
    Variant("profile-ranges-as-operators", "takes record_function ranges (user_annotation) for operators: the "
            "call's own range encloses everything and is the one top-level event",
            _PROF, "(e for e in events if e[\"cat\"] == \"cpu_op\")",
            "(e for e in events if e[\"cat\"] in (\"cpu_op\", \"user_annotation\"))"),
    Variant("profile-sort-start-only", "sorts the operators by start time only: of two starting together, the "
            "one the trace lists first (an inner one) is taken for the top-level one",
            _PROF, "key=lambda e: (e[\"ts\"], -e[\"dur\"])", "key=lambda e: e[\"ts\"]"),
    Variant("profile-end-is-inside", "an operator starting exactly where the previous top-level one ends is "
            "taken as inside it",
            _PROF, "            if e[\"ts\"] >= ends.get(", "            if e[\"ts\"] > ends.get("),
    Variant("profile-count-names", "counts operator names (the rows of key_averages), not calls",
            _PROF, "kernels=len(work))", "kernels=len({e[\"name\"] for e in work}))"),
    Variant("profile-nested-time-twice", "counts the top-level operators but sums the durations of all of them, "
            "nested ranges included",
            _PROF, _PROF_DEVICE,
            "device_us=float(sum(e[\"dur\"] for e in events if e[\"cat\"] == (\"kernel\" if cuda else \"cpu_op\")))"),
    Variant("profile-key-averages-device-total", "device time as the sum of key_averages' device_time_total over "
            "every row: operators count the kernels they enclose, nested ones again (and 0 on the CPU)",
            _PROF, _PROF_DEVICE, "device_us=float(sum(a.device_time_total for a in prof.key_averages()))"),
    Variant("profile-host-sums-host-events", "host time as the sum of every host range in the call (operators "
            "and record_function ranges): nested ranges added up",
            _PROF, _PROF_HOST,
            "    host_us = sum(e[\"dur\"] for e in events if e[\"cat\"] in (\"cpu_op\", \"user_annotation\"))\n"),
    Variant("profile-device-is-wall-time", "device time as the wall time of the whole profile (its \"Trace\" "
            "event): the call and its synchronize",
            _PROF, _PROF_DEVICE, "device_us=float(next(e[\"dur\"] for e in events if e[\"cat\"] == \"Trace\"))"),
    Variant("profile-warmup-recorded", "records every step: the warm-up calls are in the profile",
            _PROF, "schedule=schedule(wait=0, warmup=warmup, active=1)", "schedule=schedule(wait=0, warmup=0, active=warmup + 1)"),
    Variant("profile-no-warmup", "profiles the first call: no warm-up",
            _PROF, "        for _ in range(warmup):  # lazy", "        for _ in range(0):  # lazy"),
    Variant("profile-one-warmup-too-many", "warmup + 1 calls before the profiled one",
            _PROF, "        for _ in range(warmup):  # lazy", "        for _ in range(warmup + 1):  # lazy"),
    # on a GPU
    Variant("profile-cuda-counts-launches", "counts the cudaLaunchKernel calls (cuda_runtime) as well as the "
            "kernels: each kernel twice",
            _PROF, _PROF_KERNELS, "work = [e for e in events if e[\"cat\"] in (\"kernel\", \"cuda_runtime\")]",
            cuda_only=True),
    Variant("profile-cuda-every-gpu-row", "counts every event on the GPU's rows: copies, memsets and the GPU "
            "copy of each record_function range",
            _PROF, _PROF_KERNELS,
            "work = [e for e in events if e[\"cat\"] in (\"kernel\", \"gpu_memcpy\", \"gpu_memset\", \"gpu_user_annotation\")]",
            cuda_only=True),
    Variant("profile-cuda-sync-in-host-time", "synchronizes inside the call's host range: host time includes "
            "waiting for the GPU",
            _PROF, _PROF_CALL + _PROF_SYNC,
            "        with record_function(\"profile_call\"):\n            fn()\n            if cuda:\n"
            "                torch.cuda.synchronize(dev)\n", cuda_only=True),
    Variant("profile-cuda-by-name", "GPU or CPU decided by the string \"cuda\": \"cuda:0\" and torch.device are "
            "profiled without CUDA activity",
            _PROF, "    cuda = dev.type == \"cuda\"", "    cuda = str(device) == \"cuda\"", cuda_only=True),
    Variant("profile-cuda-no-sync-after-warmup", "no synchronize after the warm-up calls: their kernels still "
            "run when the recorded step starts",
            _PROF, _PROF_WARMUP, "        for _ in range(warmup):  # lazy\n            fn()\n            prof.step()\n",
            cuda_only=True),
    Variant("profile-warmup-outside-profiler", "warms up before starting the profiler, then records its first "
            "call: the profiler's start-up (its first kernel launch) lands in the host's time",
            _PROF, _PROF_OPEN + _PROF_WARMUP,
            "    for _ in range(warmup):\n        fn()\n    if cuda:\n        torch.cuda.synchronize(dev)\n"
            "    with profile(activities=activities) as prof:\n", cuda_only=True),
    # correct: the host's time on the host's clock
    Variant("profile-host-perf-counter", "host time with time.perf_counter() around the call, inside the profile",
            _PROF, _PROF_CALL + _PROF_SYNC + "    events = trace_events(prof)\n" + _PROF_HOST,
            "        start = time.perf_counter()\n        fn()\n        host_us = (time.perf_counter() - start) * 1e6\n"
            + _PROF_SYNC + "    events = trace_events(prof)\n", correct=True),
]

# Found by a red-team round on the CUDA exercises (the GPU-free judge grades them).
CPP3 = "csrc/trilinear.cpp"
_N3 = "const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;\n  if (n >= N) {\n    return;\n  }\n  opmath_t weight[8];\n  weights_of(points, n, weight);\n  const int64_t packs"
_LOAD3 = "      const P x = f_n[k * packs + p];  // one 16-byte load\n"
_STORE3 = ("    P y;\n#pragma unroll\n    for (int i = 0; i < P::size; ++i) {\n"
           "      y.v[i] = static_cast<scalar_t>(acc[i]);\n    }\n    out_n[p] = y;  // one 16-byte store\n")

VARIANTS += [
    Variant("vectorized-ldg-pack", "loads each Pack with __ldg (the read-only cache): nvcc has no __ldg for a "
            "user struct, so the kernel does not compile for any dtype", _VCU,
            _LOAD3, "      const P x = __ldg(&f_n[k * packs + p]);  // one 16-byte load, read-only cache\n",
            cuda_only=True),
    Variant("vectorized-unsigned-cube-index", "the cube index in 32-bit unsigned (blockIdx.x and blockDim.y are "
            "unsigned): n * 8 wraps from N = 2^29 cubes (64 GiB of float16 feats with F = 8, which an H200 holds)", _VCU,
            _N3, _N3.replace("const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;",
                             "const unsigned n = blockIdx.x * blockDim.y + threadIdx.y;"), cuda_only=True),
    Variant("vectorized-store-inside-corner-loop", "stores the Pack inside the loop over corners (a brace in the "
            "wrong place): the last store holds the full sum, but each Pack is stored 8 times", _VCU,
            "      }\n    }\n" + _STORE3, "      }\n" + _STORE3 + "    }\n", cuda_only=True),
    Variant("vectorized-weight-by-lane", "weighs lane i by weight[i] instead of weight[k] (k and i mixed up)", _VCU,
            "        acc[i] += weight[k] * static_cast<opmath_t>(x.v[i]);",
            "        acc[i] += weight[i % 8] * static_cast<opmath_t>(x.v[i]);", cuda_only=True),
    Variant("vectorized-acc-per-corner", "declares the accumulators inside the loop over corners: only the last "
            "corner's products reach the store", _VCU,
            "    opmath_t acc[P::size] = {};\n#pragma unroll\n    for (int k = 0; k < 8; ++k) {\n",
            "    opmath_t acc[P::size];\n#pragma unroll\n    for (int k = 0; k < 8; ++k) {\n"
            "      for (int i = 0; i < P::size; ++i) acc[i] = 0;\n", cuda_only=True),
    # correct alternatives
    Variant("pack-size-in-bytes", "asks the row's bytes, F * element_size, to be a multiple of 16: the same as "
            "F % pack == 0 since element_size divides 16", CPP3,
            "return F % pack == 0 && aligned ? pack : 0;",
            "return (F * element_size) % 16 == 0 && aligned ? pack : 0;", correct=True),
    Variant("vectorized-scalar-tail", "adds a scalar loop for a tail of F % pack features (never taken: "
            "pack_size sends such F to the fallback)", _VCU,
            "    out_n[p] = y;  // one 16-byte store\n  }\n",
            "    out_n[p] = y;  // one 16-byte store\n  }\n"
            "  for (int64_t f = packs * P::size + threadIdx.x; f < F; f += blockDim.x) {\n"
            "    opmath_t a = 0;\n"
            "    for (int k = 0; k < 8; ++k) {\n"
            "      a += weight[k] * static_cast<opmath_t>(feats[n * 8 * F + k * F + f]);\n"
            "    }\n"
            "    out[n * F + f] = static_cast<scalar_t>(a);\n"
            "  }\n", cuda_only=True, correct=True),
]

# A reviewer's mistakes (a set written without these variants at hand), each a class the tests close.
VARIANTS += [
    Variant("reference-compute-type-from-points", "the arithmetic type from the points' dtype: float64 features "
            "with float32 points are computed in float32",
            "reference.py", "compute = torch.promote_types(feats.dtype, torch.float32)",
            "compute = torch.promote_types(points.dtype, torch.float32)"),
    Variant("profile-top-level-across-threads", "decides 'inside another operator' across all threads: an "
            "operator of another thread during one of this thread is dropped",
            _PROF, 'if e["ts"] >= ends.get(e["tid"], float("-inf")):', 'if e["ts"] >= ends.get(0, float("-inf")):'),
]

# Right values without the 16-byte accesses the exercise is about: what the PTX check
# (test_vectorized_moves_16_bytes_at_once, where nvcc is found) closes.
_LANES3 = ("      const P x = f_n[k * packs + p];  // one 16-byte load\n#pragma unroll\n"
           "      for (int i = 0; i < P::size; ++i) {\n"
           "        acc[i] += weight[k] * static_cast<opmath_t>(x.v[i]);\n      }\n")
VARIANTS += [
    Variant("vectorized-lanes-through-pack-pointer", "reads each lane as f_n[...].v[i] (no local Pack): nvcc loads one "
            "element at a time", _VCU, _LANES3,
            "#pragma unroll\n      for (int i = 0; i < P::size; ++i) {\n"
            "        acc[i] += weight[k] * static_cast<opmath_t>(f_n[k * packs + p].v[i]);\n      }\n",
            cuda_only=True),
    Variant("vectorized-scalar-loads", "no Pack for the loads: a scalar_t pointer to the pack's first element",
            _VCU, _LANES3,
            "      const scalar_t* x = feats + (n * 8 + k) * F + p * P::size;\n#pragma unroll\n"
            "      for (int i = 0; i < P::size; ++i) {\n"
            "        acc[i] += weight[k] * static_cast<opmath_t>(x[i]);\n      }\n", cuda_only=True),
    Variant("vectorized-store-lane-by-lane", "writes out_n[p].v[i] lane by lane instead of one Pack", _VCU, _STORE3,
            "#pragma unroll\n    for (int i = 0; i < P::size; ++i) {\n"
            "      out_n[p].v[i] = static_cast<scalar_t>(acc[i]);\n    }\n", cuda_only=True),
    Variant("vectorized-scalar-store", "stores through a scalar_t pointer, one element at a time", _VCU, _STORE3,
            "    scalar_t* y = out + n * F + p * P::size;\n#pragma unroll\n    for (int i = 0; i < P::size; ++i) {\n"
            "      y[i] = static_cast<scalar_t>(acc[i]);\n    }\n", cuda_only=True),
]

# Right values, the wrong mapping or the wrong index: closed by the store-pattern check
# (test_vectorized_emulated_stores_along_the_row) and by tests that name the small case first.
VARIANTS += [
    Variant("vectorized-run-of-packs-per-thread", "each thread takes a run of ceil(packs / blockDim.x) neighbouring "
            "packs instead of striding by blockDim.x: right values, lanes 32 bytes or more apart past 256 packs",
            _VCU, "  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {",
            "  const int64_t per = (packs + blockDim.x - 1) / blockDim.x;  // packs per thread\n"
            "  for (int64_t p = threadIdx.x * per; p < packs && p < (threadIdx.x + 1) * per; ++p) {",
            cuda_only=True),
    Variant("vectorized-out-pointer-in-packs", "steps to row n of out in Packs, not elements: reinterpret_cast<P*>(out) "
            "+ n * F", _VCU, "P* out_n = reinterpret_cast<P*>(out + n * F);",
            "P* out_n = reinterpret_cast<P*>(out) + n * F;", cuda_only=True),
]
