"""Plausible wrong solutions for chapter 02; each must fail a test of its own exercise
(the exercise whose region holds the change; a change outside every region must fail
some test of the chapter)."""

from coursekit.exercises import Variant

H, CPU, CU, CHK = "csrc/trilinear.h", "csrc/trilinear_cpu.cpp", "csrc/trilinear_cuda.cu", "csrc/trilinear.cpp"

VARIANTS = [
    # ------------------------------------------------------------------ corner-weight
    Variant("swapped-corner-order", "y and z offsets swapped (corner k at (k>>2&1, k&1, k>>1&1))",
            H, "const T wy = (k >> 1) & 1 ? v : T(1) - v;\n  const T wz = k & 1 ? w : T(1) - w;",
            "const T wy = k & 1 ? v : T(1) - v;\n  const T wz = (k >> 1) & 1 ? w : T(1) - w;"),
    Variant("reversed-corner-order", "corner k at offsets (k&1, k>>1&1, k>>2&1): x on the lowest bit",
            H, "const T wx = (k >> 2) & 1 ? u : T(1) - u;", "const T wx = k & 1 ? u : T(1) - u;"),
    Variant("corner-weight-float", "the x factor held in a float: float64 goes through float32",
            H, "const T wx = (k >> 2) & 1 ? u : T(1) - u;", "const float wx = (k >> 2) & 1 ? u : T(1) - u;"),
    Variant("corner-weight-clamped", "clamps the x factor to [0, 1]: points outside the cube do not extrapolate",
            H, "return wx * wy * wz;", "return (wx < T(0) ? T(0) : wx > T(1) ? T(1) : wx) * wy * wz;"),
    Variant("corner-weight-exact-at-corners-only", "a factor squared: right at the corners, wrong inside",
            H, "return wx * wy * wz;", "return wx * wx * wy * wz;"),
    # ------------------------------------------------------------------ outside the exercises
    Variant("no-unit-mapping", "uses x instead of u = (x + 1) / 2",
            H, "return (x + T(1)) * T(0.5);", "return x;"),
    Variant("float32-only-dispatch", "dispatches float32 and float64 only",
            CPU, "AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, feats.scalar_type()",
            "AT_DISPATCH_FLOATING_TYPES(feats.scalar_type()"),
    Variant("feats-not-contiguous", "passes feats on as it came: the kernel's packed offsets read the wrong elements",
            CHK, "const at::Tensor feats = feats_in.contiguous();", "const at::Tensor feats = feats_in;"),
    Variant("points-not-contiguous", "passes points on as they came",
            CHK, "const at::Tensor points = points_in.contiguous();", "const at::Tensor points = points_in;"),
    Variant("no-empty-return", "launches a kernel for empty inputs (a grid of 0 blocks; F = 0 divides by zero)",
            CHK, "if (out.numel() == 0) {", "if (false) {", cuda_only=True),
    # ------------------------------------------------------------------ cpu-kernel
    Variant("cpu-accumulate-in-storage-type", "the sum over k in scalar_t: float16/bfloat16 round after every add",
            CPU, "opmath_t acc = 0;", "scalar_t acc = 0;"),
    Variant("cpu-round-each-product", "each product rounded to scalar_t before it is added",
            CPU, "acc += weight[k] * static_cast<opmath_t>(f_n[k * F + f]);",
            "acc += static_cast<scalar_t>(weight[k] * static_cast<opmath_t>(f_n[k * F + f]));"),
    Variant("cpu-weights-in-storage-type", "the eight weights stored in scalar_t",
            CPU, "opmath_t weight[8];", "scalar_t weight[8];"),
    Variant("cpu-coordinates-in-storage-type", "u = (x + 1) / 2 computed in scalar_t",
            CPU, "const opmath_t u = to_unit<opmath_t>(points[3 * n + 0]);",
            "const opmath_t u = to_unit<scalar_t>(points[3 * n + 0]);"),
    Variant("cpu-float-opmath", "float as the arithmetic type for every dtype: float64 goes through float32",
            CPU, "using opmath_t = at::opmath_type<scalar_t>;", "using opmath_t = float;"),
    Variant("cpu-float-accumulator", "a float accumulator: float64 sums in float32",
            CPU, "opmath_t acc = 0;", "float acc = 0;"),
    Variant("cpu-float-weights", "weights computed with corner_weight<float>: float64 weights in float32",
            CPU, "weight[k] = corner_weight<opmath_t>(k, u, v, w);", "weight[k] = corner_weight<float>(k, u, v, w);"),
    Variant("wrong-feature-stride", "indexes feats[n][k][f] as if F were 8",
            CPU, "acc += weight[k] * static_cast<opmath_t>(f_n[k * F + f]);",
            "acc += weight[k] * static_cast<opmath_t>(f_n[f * 8 + k]);"),
    Variant("cpu-cube-stride", "feats[n] taken at n * F, forgetting the 8 corners",
            CPU, "const scalar_t* f_n = feats + n * 8 * F;", "const scalar_t* f_n = feats + n * F;"),
    Variant("cpu-chunk-from-zero", "every chunk of parallel_for starts at cube 0",
            CPU, "for (int64_t n = begin; n < end; ++n) {", "for (int64_t n = 0; n < end - begin; ++n) {"),
    Variant("cpu-skip-zero-weights", "skips corners whose weight is 0: a NaN or inf feature there no longer makes "
            "the output NaN (0 * NaN and 0 * inf are NaN in the formula)",
            CPU, "acc += weight[k] * static_cast<opmath_t>(f_n[k * F + f]);",
            "if (weight[k] != 0) acc += weight[k] * static_cast<opmath_t>(f_n[k * F + f]);"),
    Variant("cpu-every-chunk-all-cubes", "each chunk of parallel_for loops over every cube [0, N): right values, "
            "every thread writing every output (a data race, and the work done once per thread)",
            CPU, "    for (int64_t n = begin; n < end; ++n) {", "    for (int64_t n = 0; n < N; ++n) {"),
    Variant("cpu-static-weights", "the eight weights declared static: one array for every thread of parallel_for "
            "(right values almost always; a data race)",
            CPU, "      opmath_t weight[8];", "      static opmath_t weight[8];"),
    Variant("cpu-weights-outside-lambda", "the weight array declared once, before parallel_for, and captured by "
            "reference: every task writes the same eight weights (a data race)",
            CPU, "  at::parallel_for(0, N, grain_size, [&](int64_t begin, int64_t end) {\n"
            "    for (int64_t n = begin; n < end; ++n) {\n"
            "      const opmath_t u = to_unit<opmath_t>(points[3 * n + 0]);\n"
            "      const opmath_t v = to_unit<opmath_t>(points[3 * n + 1]);\n"
            "      const opmath_t w = to_unit<opmath_t>(points[3 * n + 2]);\n"
            "      opmath_t weight[8];\n",
            "  opmath_t weight[8];\n"
            "  at::parallel_for(0, N, grain_size, [&](int64_t begin, int64_t end) {\n"
            "    for (int64_t n = begin; n < end; ++n) {\n"
            "      const opmath_t u = to_unit<opmath_t>(points[3 * n + 0]);\n"
            "      const opmath_t v = to_unit<opmath_t>(points[3 * n + 1]);\n"
            "      const opmath_t w = to_unit<opmath_t>(points[3 * n + 2]);\n"),
    # ------------------------------------------------------------------ checks
    Variant("no-dtype-check", "accepts points of another dtype",
            CHK, "  TORCH_CHECK(points.scalar_type() == feats.scalar_type(),",
            "  TORCH_CHECK(true || points.scalar_type() == feats.scalar_type(),"),
    Variant("feats-rank-unchecked", "checks size(1) == 8 but not the rank of feats",
            CHK, "feats.dim() == 3 && feats.size(1) == 8", "feats.size(1) == 8"),
    Variant("feats-rank-at-least-3", "accepts feats of rank 3 or more",
            CHK, "feats.dim() == 3 && feats.size(1) == 8", "feats.dim() >= 3 && feats.size(1) == 8"),
    Variant("points-rank-unchecked", "checks the sizes of points but not its rank",
            CHK, "points.dim() == 2 && points.size(0)", "points.size(0)"),
    Variant("points-count-unchecked", "does not compare the number of points with N",
            CHK, "points.dim() == 2 && points.size(0) == feats.size(0) && points.size(1) == 3",
            "points.dim() == 2 && points.size(1) == 3"),
    Variant("is-floating-type", "at::isFloatingType lets float8 through to the dispatch",
            CHK, "dtype == at::kDouble || dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16",
            "at::isFloatingType(dtype)"),
    Variant("floating-minus-float8", "floating types minus the float8 ones: float4_e2m1fn_x2 still passes",
            CHK, "dtype == at::kDouble || dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16",
            "c10::isFloatingType(dtype) && !c10::isFloat8Type(dtype)"),
    Variant("no-same-device-check", "does not compare the devices of feats and points",
            CHK, "TORCH_CHECK(points.device() == feats.device(),", "TORCH_CHECK(true,"),
    Variant("no-device-type-check", "accepts tensors on any device (meta included)",
            CHK, "TORCH_CHECK(feats.is_cpu() || feats.is_cuda(),", "TORCH_CHECK(true,"),
    # ------------------------------------------------------------------ cuda-kernel (run on a GPU only)
    Variant("missing-bounds-check", "no `n >= N` guard in the CUDA kernel", CU,
            "  if (n >= N) {\n    return;  // the last block", "  if (false) {\n    return;  // the last block",
            cuda_only=True),
    Variant("bounds-check-off-by-one", "`n > N`: the row of threads at n == N runs", CU,
            "if (n >= N) {", "if (n > N) {", cuda_only=True),
    Variant("no-loop-over-f", "one f per thread: F wider than the block leaves outputs unwritten", CU,
            "for (int64_t f = threadIdx.x; f < F; f += blockDim.x) {", "if (const int64_t f = threadIdx.x; f < F) {",
            cuda_only=True),
    Variant("no-bound-on-f", "every thread of the row writes, also at f >= F", CU,
            "for (int64_t f = threadIdx.x; f < F; f += blockDim.x) {",
            "for (int64_t f = threadIdx.x; f < (F + blockDim.x - 1) / blockDim.x * blockDim.x; f += blockDim.x) {",
            cuda_only=True),
    Variant("wrong-row-index", "n = blockIdx.x * blockDim.x + threadIdx.y (the width of the block, not its height)",
            CU, "static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y",
            "static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.y", cuda_only=True),
    Variant("int32-offsets", "feats[n] located with a 32-bit offset", CU,
            "const scalar_t* f_n = feats + n * 8 * F;  // 64-bit offsets",
            "const int offset = n * 8 * F;\n  const scalar_t* f_n = feats + offset;  // 32-bit offsets", cuda_only=True),
    Variant("feature-loop-steps-by-a-warp", "the loop over f steps by 32 where the block has blockDim.x threads along "
            "it: the block's threads redo each other's features (right values, repeated work)",
            CU, "for (int64_t f = threadIdx.x; f < F; f += blockDim.x) {",
            "for (int64_t f = threadIdx.x; f < F; f += 32) {", cuda_only=True),
    Variant("cube-index-32bit-product", "the cube index's product taken in 32 bits, then widened: wraps at 2^32 cubes",
            CU, "static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y",
            "static_cast<int64_t>(blockIdx.x * blockDim.y) + threadIdx.y", cuda_only=True),
    Variant("cuda-accumulate-in-storage-type", "the sum over k in scalar_t", CU,
            "opmath_t acc = 0;", "scalar_t acc = 0;", cuda_only=True),
    Variant("cuda-weights-in-storage-type", "the eight weights stored in scalar_t", CU,
            "opmath_t weight[8];", "scalar_t weight[8];", cuda_only=True),
    Variant("cuda-skip-zero-weights", "skips corners whose weight is 0 (NaN and inf features of those corners vanish)",
            CU, "acc += weight[k] * static_cast<opmath_t>(f_n[k * F + f]);",
            "if (weight[k] != 0) acc += weight[k] * static_cast<opmath_t>(f_n[k * F + f]);", cuda_only=True),
    Variant("cuda-float-opmath", "float as the arithmetic type: float64 goes through float32", CU,
            "using opmath_t = at::opmath_type<scalar_t>;", "using opmath_t = float;", cuda_only=True),
    Variant("cuda-feature-stride", "indexes feats[n][k][f] as if F were 8", CU,
            "acc += weight[k] * static_cast<opmath_t>(f_n[k * F + f]);",
            "acc += weight[k] * static_cast<opmath_t>(f_n[f * 8 + k]);", cuda_only=True),
    Variant("block-too-large", "2048 threads per block, over the limit of 1024: the launch fails", CU,
            "const int ty = 256 / tx;", "const int ty = 2048 / tx;", cuda_only=True),
    Variant("grid-rounded-down", "N / ty blocks: the last cubes get none", CU,
            "const int64_t blocks = (N + ty - 1) / ty;", "const int64_t blocks = N / ty;", cuda_only=True),
    Variant("block-one-row", "a block of one row while the grid counts ty rows per block", CU,
            "const dim3 block(tx, ty);", "const dim3 block(tx);", cuda_only=True),
    Variant("default-stream", "launches on the legacy default stream", CU,
            "<<<static_cast<unsigned>(blocks), block, 0, stream>>>", "<<<static_cast<unsigned>(blocks), block>>>",
            cuda_only=True),
    Variant("cpu-int32-offsets", "feats[n] located with a 32-bit offset: feats with more than 2^31 elements "
            "(4.3 GB of float16) read the wrong cubes",
            CPU, "const scalar_t* f_n = feats + n * 8 * F;",
            "const int offset = n * 8 * F;\n      const scalar_t* f_n = feats + offset;"),
]

# Found by a red-team round.
VARIANTS += [
    Variant("cpu-loop-inclusive-end", "loops n from begin to end inclusive: the last chunk computes cube N, "
            "reading past feats/points and writing F values past the end of out",
            CPU, "    for (int64_t n = begin; n < end; ++n) {", "    for (int64_t n = begin; n <= end; ++n) {"),
    Variant("cpu-uninitialised-acc", "the accumulator is declared without = 0",
            CPU, "        opmath_t acc = 0;", "        opmath_t acc;"),
    Variant("cpu-points-transposed", "reads points as if (3, N): points[i * N + n]",
            CPU, "const opmath_t v = to_unit<opmath_t>(points[3 * n + 1]);",
            "const opmath_t v = to_unit<opmath_t>(points[1 * N + n]);"),
    Variant("cpu-last-feature-skipped", "the loop over f stops at F - 1",
            CPU, "      for (int64_t f = 0; f < F; ++f) {", "      for (int64_t f = 0; f + 1 < F; ++f) {"),
    Variant("checks-dtype-rules-swapped", "checks 'points has the dtype of feats' before 'feats is floating' "
            "(README: check in the order of the table): int feats with float points get the wrong message",
            CHK,
            "  TORCH_CHECK(dtype == at::kDouble || dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16,\n"
            "              \"trilinear: feats must be float64, float32, float16 or bfloat16, got \", dtype);\n"
            "  TORCH_CHECK(points.scalar_type() == feats.scalar_type(),\n"
            "              \"trilinear: points must have the dtype of feats (\", feats.scalar_type(), \"), got \",\n"
            "              points.scalar_type());\n",
            "  TORCH_CHECK(points.scalar_type() == feats.scalar_type(),\n"
            "              \"trilinear: points must have the dtype of feats (\", feats.scalar_type(), \"), got \",\n"
            "              points.scalar_type());\n"
            "  TORCH_CHECK(dtype == at::kDouble || dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16,\n"
            "              \"trilinear: feats must be float64, float32, float16 or bfloat16, got \", dtype);\n"),
    Variant("checks-devices-before-dtypes", "the device rules before the dtype rules (README: shapes, dtypes, devices)",
            CHK,
            "  TORCH_CHECK(points.scalar_type() == feats.scalar_type(),\n"
            "              \"trilinear: points must have the dtype of feats (\", feats.scalar_type(), \"), got \",\n"
            "              points.scalar_type());\n"
            "  TORCH_CHECK(points.device() == feats.device(),\n"
            "              \"trilinear: feats and points must be on the same device, got feats on \", feats.device(),\n"
            "              \" and points on \", points.device());\n"
            "  TORCH_CHECK(feats.is_cpu() || feats.is_cuda(),\n"
            "              \"trilinear: tensors must be on the CPU or a CUDA GPU, got \", feats.device());\n",
            "  TORCH_CHECK(points.device() == feats.device(),\n"
            "              \"trilinear: feats and points must be on the same device, got feats on \", feats.device(),\n"
            "              \" and points on \", points.device());\n"
            "  TORCH_CHECK(feats.is_cpu() || feats.is_cuda(),\n"
            "              \"trilinear: tensors must be on the CPU or a CUDA GPU, got \", feats.device());\n"
            "  TORCH_CHECK(points.scalar_type() == feats.scalar_type(),\n"
            "              \"trilinear: points must have the dtype of feats (\", feats.scalar_type(), \"), got \",\n"
            "              points.scalar_type());\n"),
    Variant("checks-points-rows-message-from-points", "the points message prints points.size(0) as N",
            CHK, "\"trilinear: points must have shape (N, 3) with N = \", feats.size(0),",
            "\"trilinear: points must have shape (N, 3) with N = \", points.size(0),"),
    Variant("corner-weight-bit-and-eq", "`k & 2 == 2` (precedence: k & (2 == 2), i.e. bit 0) for y",
            H, "const T wy = (k >> 1) & 1 ? v : T(1) - v;", "const T wy = k & 2 == 2 ? v : T(1) - v;"),
    Variant("corner-weight-unit-twice", "maps u, v, w to [0, 1] again inside corner_weight",
            H, "  return wx * wy * wz;\n  // END", "  return ((wx + T(1)) * T(0.5)) * wy * wz;\n  // END"),
    Variant("cpu-weights-from-first-cube", "the weights computed once, from cube 0's point, before the loop over n",
            CPU, "      opmath_t weight[8];\n      for (int k = 0; k < 8; ++k) {\n        weight[k] = corner_weight<opmath_t>(k, u, v, w);\n      }",
            "      static thread_local opmath_t weight[8];\n      if (n == begin) for (int k = 0; k < 8; ++k) {\n        weight[k] = corner_weight<opmath_t>(k, u, v, w);\n      }"),
]

# The launch code's row width, which the launch variants change
_TX = "const int tx = static_cast<int>(std::min<int64_t>(256, (F + 31) / 32 * 32));"

# Found by a red-team round of the GPU-free judge (coursekit/emulate.py): mistakes in the exercise
# cuda-kernel, and two correct solutions written otherwise.
VARIANTS += [
    Variant("cuda-points-read-before-bounds-check", "reads the cube's point (u, v, w) before `if (n >= N) return`: "
            "the rows of threads past the last cube read past the end of points", CU,
            "  if (n >= N) {\n    return;  // the last block may have more rows of threads than cubes are left\n  }\n"
            "  // The point is the same for every f: all threads of the row read the same\n"
            "  // three values, which the hardware serves with one broadcast.\n"
            "  const opmath_t u = to_unit<opmath_t>(points[3 * n + 0]);\n"
            "  const opmath_t v = to_unit<opmath_t>(points[3 * n + 1]);\n"
            "  const opmath_t w = to_unit<opmath_t>(points[3 * n + 2]);\n",
            "  const opmath_t u = to_unit<opmath_t>(points[3 * n + 0]);\n"
            "  const opmath_t v = to_unit<opmath_t>(points[3 * n + 1]);\n"
            "  const opmath_t w = to_unit<opmath_t>(points[3 * n + 2]);\n"
            "  if (n >= N) {\n    return;  // the last block may have more rows of threads than cubes are left\n  }\n",
            cuda_only=True),
    Variant("cuda-acc-outside-f-loop", "declares the accumulator once, before the loop over f: a thread's second f "
            "(F wider than the block) starts from the first one's sum", CU,
            "  for (int64_t f = threadIdx.x; f < F; f += blockDim.x) {\n    opmath_t acc = 0;\n",
            "  opmath_t acc = 0;\n  for (int64_t f = threadIdx.x; f < F; f += blockDim.x) {\n", cuda_only=True),
    Variant("cuda-f-grid-stride", "steps over f by blockDim.x * gridDim.x (the textbook grid-stride loop): with "
            "more than one block and F wider than the block, features are skipped", CU,
            "for (int64_t f = threadIdx.x; f < F; f += blockDim.x) {",
            "for (int64_t f = threadIdx.x; f < F; f += blockDim.x * gridDim.x) {", cuda_only=True),
    Variant("launch-tx-uncapped", "rounds F up to a multiple of 32 but forgets the cap at 256: for F > 256, "
            "ty = 256 / tx is 0, an invalid launch", CU,
            _TX,
            "const int tx = static_cast<int>((F + 31) / 32 * 32);", cuda_only=True),
    Variant("launch-blocks-one-cube-per-thread", "counts the blocks as if each thread took one cube, "
            "ceil(N / 256): a block takes only ty cubes, so the last cubes get no block", CU,
            "const int64_t blocks = (N + ty - 1) / ty;", "const int64_t blocks = (N + 255) / 256;", cuda_only=True),
    Variant("launch-block-swapped", "block (ty, tx): the right values, but f along threadIdx.y, so a warp reads "
            "features of different cubes (uncoalesced)", CU,
            "const dim3 block(tx, ty);", "const dim3 block(ty, tx);", cuda_only=True),
    Variant("launch-tx-in-warps", "tx counts warps, not threads ((F + 31) / 32): every f still covered by the "
            "loop, by rows of 1 to 8 threads", CU,
            _TX,
            "const int tx = static_cast<int>(std::min<int64_t>(256, (F + 31) / 32));", cuda_only=True),
    Variant("launch-fixed-block", "a fixed (32, 8) block whatever F: a warp along f, 8 cubes per block, while the "
            "grid still counts ty = 256 / tx cubes per block (right values for F up to 32 only by luck of the "
            "numbers; for F = 40 two blocks compute the same cubes)", CU,
            "const dim3 block(tx, ty);", "const dim3 block(32, 8);", cuda_only=True),
    Variant("launch-cap-before-rounding", "caps F at 256 first, then rounds up to a warp: the same tx, "
            "since 256 is a multiple of 32", CU,
            _TX,
            "const int tx = static_cast<int>((std::min<int64_t>(F, 256) + 31) / 32 * 32);",
            cuda_only=True, correct=True),
    Variant("cuda-weights-per-feature", "computes corner_weight inside the loop over f instead of once per cube: "
            "slower, the same weights and the same bits", CU,
            "acc += weight[k] * static_cast<opmath_t>(f_n[k * F + f]);",
            "acc += corner_weight<opmath_t>(k, u, v, w) * static_cast<opmath_t>(f_n[k * F + f]);",
            cuda_only=True, correct=True),
]

# Found by a red-team round on the CUDA exercises (the GPU-free judge grades them).
_F_LOOP2 = "for (int64_t f = threadIdx.x; f < F; f += blockDim.x) {"
_ACC2 = "acc += weight[k] * static_cast<opmath_t>(f_n[k * F + f]);"
_UVW2 = ("  const opmath_t u = to_unit<opmath_t>(points[3 * n + 0]);\n"
         "  const opmath_t v = to_unit<opmath_t>(points[3 * n + 1]);\n"
         "  const opmath_t w = to_unit<opmath_t>(points[3 * n + 2]);\n")
# The kernel's body after its cube index and bounds check, up to the end of the loop over f.
_CUBE2 = ("  // The point is the same for every f: all threads of the row read the same\n"
          "  // three values, which the hardware serves with one broadcast.\n" + _UVW2 +
          "  opmath_t weight[8];\n#pragma unroll\n  for (int k = 0; k < 8; ++k) {\n"
          "    weight[k] = corner_weight<opmath_t>(k, u, v, w);\n  }\n"
          "  const scalar_t* f_n = feats + n * 8 * F;  // 64-bit offsets: N * 8 * F may exceed 2^31\n"
          "  scalar_t* out_n = out + n * F;\n"
          "  // F may be larger than the block is wide: step over f in strides of blockDim.x.\n"
          "  for (int64_t f = threadIdx.x; f < F; f += blockDim.x) {\n    opmath_t acc = 0;\n#pragma unroll\n"
          "    for (int k = 0; k < 8; ++k) {\n      " + _ACC2 + "\n    }\n"
          "    out_n[f] = static_cast<scalar_t>(acc);\n  }\n")

VARIANTS += [
    Variant("cuda-ldg-on-scalar", "reads feats through __ldg (the read-only cache, as tutorials do): nvcc has no "
            "__ldg for c10::Half / c10::BFloat16, so the kernel does not compile for the half types", CU,
            _ACC2, "acc += weight[k] * static_cast<opmath_t>(__ldg(&f_n[k * F + f]));", cuda_only=True),
    Variant("cuda-f-contiguous-chunk", "each thread takes a contiguous chunk of ceil(F / blockDim.x) features "
            "instead of striding by blockDim.x: right values, but for F > 256 neighbouring lanes read and write "
            "2-3 elements apart (uncoalesced), the mapping the chapter teaches to avoid", CU,
            _F_LOOP2,
            "const int64_t per = (F + blockDim.x - 1) / blockDim.x;  // features per thread\n"
            "  for (int64_t f = threadIdx.x * per; f < F && f < (threadIdx.x + 1) * per; ++f) {", cuda_only=True),
    Variant("cuda-uninitialised-acc", "declares the accumulator without = 0", CU,
            "    opmath_t acc = 0;\n#pragma unroll", "    opmath_t acc;\n#pragma unroll", cuda_only=True),
    Variant("cuda-coordinates-in-storage-type", "u, v, w mapped to [0, 1] in scalar_t (half types round "
            "(x + 1) / 2 before the weights)", CU,
            _UVW2, _UVW2.replace("to_unit<opmath_t>", "to_unit<scalar_t>"), cuda_only=True),
    Variant("launch-tx-not-warp-rounded", "tx = min(256, F): rows of F threads, not whole warps (F = 5: "
            "a block (5, 51), warps straddling cubes)", CU,
            _TX,
            "const int tx = static_cast<int>(std::min<int64_t>(256, F));", cuda_only=True),
    Variant("cuda-out-row-stride-block-width", "row n of out taken at n * blockDim.x (the row of threads) "
            "instead of n * F", CU,
            "scalar_t* out_n = out + n * F;", "scalar_t* out_n = out + n * blockDim.x;", cuda_only=True),
    Variant("launch-ty-from-F", "ty = 256 / F (F not rounded to the row width): F = 5 gives 32 x 51 = "
            "1632 threads per block, over the limit", CU,
            "const int ty = 256 / tx; ", "const int ty = static_cast<int>(std::max<int64_t>(1, 256 / F)); ",
            cuda_only=True),
    # correct alternatives
    Variant("cuda-fma", "accumulates with fma(weight, feature, acc): one rounding per corner instead of two, "
            "what nvcc's contraction gives anyway", CU,
            _ACC2, "acc = fma(weight[k], static_cast<opmath_t>(f_n[k * F + f]), acc);",
            cuda_only=True, correct=True),
]
VARIANTS.append(Variant("cuda-cube-grid-stride", "a grid-stride loop over the cubes (n += gridDim.x * blockDim.y): "
                        "with the design's grid every thread still takes one cube", CU,
                        "  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;\n"
                        "  if (n >= N) {\n    return;  // the last block may have more rows of threads than cubes are "
                        "left\n  }\n" + _CUBE2,
                        "  for (int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; n < N;\n"
                        "       n += static_cast<int64_t>(gridDim.x) * blockDim.y) {\n" + _CUBE2 +
                        "  }  // the loop over cubes\n", cuda_only=True, correct=True))

# Mistakes whose values are right on points inside the cube, or on the launch sizes a first test list
# drew: extrapolated points and whole-warp widths below 256 reach the CUDA kernel's tests too.
VARIANTS += [
    Variant("launch-tx-rounds-one-too-far", "rounds F up to a warp with (F + 32) / 32 * 32: a whole warp's "
            "F (32, 64, ...) gets a block a warp wider than it needs, its last warp idle", CU,
            "(F + 31) / 32 * 32", "(F + 32) / 32 * 32", cuda_only=True),
    Variant("cuda-clamps-points-to-the-cube", "clamps u to [0, 1] before the weights (grid_sample's border "
            "padding): points outside the cube no longer extrapolate", CU,
            "weight[k] = corner_weight<opmath_t>(k, u, v, w);",
            "weight[k] = corner_weight<opmath_t>(k, u < opmath_t(0) ? opmath_t(0) : u > opmath_t(1) ? opmath_t(1) : u, "
            "v, w);", cuda_only=True),
    Variant("cuda-tent-weights", "weights as 1 - |u - offset| per axis (the tent form): equal inside the cube, "
            "wrong outside it, where the lesson's formula extrapolates", CU,
            "weight[k] = corner_weight<opmath_t>(k, u, v, w);",
            "weight[k] = (opmath_t(1) - std::abs(u - opmath_t((k >> 2) & 1))) *\n"
            "                (opmath_t(1) - std::abs(v - opmath_t((k >> 1) & 1))) * (opmath_t(1) - std::abs(w - opmath_t(k & 1)));",
            cuda_only=True),
    Variant("launch-blocks-in-float", "the block count as ceil(float(N) / ty): exact below 2^24 cubes, short of "
            "the last blocks beyond", CU,
            "const int64_t blocks = (N + ty - 1) / ty;",
            "const int64_t blocks = static_cast<int64_t>(std::ceil(static_cast<float>(N) / ty));", cuda_only=True),
    Variant("launch-blocks-by-tx", "the block count from the row width: ceil(N / tx) blocks where a block holds "
            "ty cubes", CU,
            "const int64_t blocks = (N + ty - 1) / ty;", "const int64_t blocks = (N + tx - 1) / tx;", cuda_only=True),
]
