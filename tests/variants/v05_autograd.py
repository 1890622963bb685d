"""Plausible wrong solutions for chapter 05; each must fail a test of its own exercise
(the exercise whose region holds the change; a change outside every region must fail
some test of the chapter)."""

from coursekit.exercises import Variant

FN, OP, STE, MOD = "trilinear_function.py", "trilinear_op.py", "ste.py", "module.py"
TRI = "trilinear_triton.py"
OPS, QH = "csrc/ops.cpp", "csrc/quantize.h"
CPU, CU, CHK, QCPU = "csrc/trilinear_cpu.cpp", "csrc/trilinear_cuda.cu", "csrc/trilinear.cpp", "csrc/quantize_cpu.cpp"

SAVE = "ctx.save_for_backward(feats if ctx.needs_input_grad[1] else None, points)"
FN_RETURN = "return ext.backward(grad_out, feats, points, need_feats, need_points)"
GUARD = "        if torch.is_grad_enabled():\n            raise RuntimeError(DOUBLE_BACKWARD)\n"
OP_RETURN = "    return (grad_feats if need_feats else None), (grad_points if need_points else None)"
ROUND = "const T q = ::rint(x * g.inv_scale) + g.zero_point;"
CLAMP = "const T c = q < g.quant_min ? g.quant_min : (q > g.quant_max ? g.quant_max : q);"

# The fake forward's checks (trilinear_op.py): its size checks on the points, all its size checks, its dtype checks.
FAKE_POINTS = ("    torch._check(points.dim() == 2, bad_points)\n"
               "    torch._check(points.shape[0] == feats.shape[0], bad_points)\n"
               "    torch._check(points.shape[1] == 3, bad_points)\n")
FAKE_SHAPES = ('    torch._check(feats.dim() == 3, bad_feats)\n'
               '    torch._check(feats.shape[1] == 8, bad_feats)\n'
               '    bad_points = lambda: (f"trilinear: points must have shape (N, 3) with N = {feats.shape[0]} as feats, "  # noqa: E731\n'
               '                          f"got {list(points.shape)}")\n' + FAKE_POINTS)
FAKE_DTYPES = ('    torch._check(feats.dtype in DTYPES,\n'
               '                 lambda: f"trilinear: feats must be float64, float32, float16 or bfloat16, got {feats.dtype}")\n'
               '    torch._check(points.dtype == feats.dtype,\n'
               '                 lambda: f"trilinear: points must have the dtype of feats ({feats.dtype}), got {points.dtype}")\n')

VARIANTS = [
    # ------------------------------------------------------------------ function-forward
    Variant("function-saves-output", "saves the output instead of the points",
            FN, SAVE, "ctx.save_for_backward(feats if ctx.needs_input_grad[1] else None, out)"),
    Variant("function-saves-feats-always", "keeps feats alive for backward even when only feats need a gradient",
            FN, SAVE, "ctx.save_for_backward(feats, points)"),
    Variant("function-saves-on-wrong-flag", "keeps feats when feats (not the points) need a gradient",
            FN, SAVE, "ctx.save_for_backward(feats if ctx.needs_input_grad[0] else None, points)"),
    # ------------------------------------------------------------------ function-backward
    Variant("function-grads-swapped", "returns (grad_points, grad_feats): the order of forward's inputs matters",
            FN, FN_RETURN, FN_RETURN + "[::-1]"),
    Variant("function-drops-none", "returns only grad_feats when the points need no gradient (one value, not two)",
            FN, FN_RETURN, f"grads = {FN_RETURN[7:]}\n        return grads if need_points else grads[0]"),
    Variant("function-ignores-needs-input-grad", "always asks for both gradients",
            FN, "need_feats, need_points = ctx.needs_input_grad", "need_feats, need_points = True, True"),
    Variant("function-once-differentiable-only", "refuses a second derivative only when grad_out requires grad "
            "(what @once_differentiable checks): with out.sum() as the loss a gradient penalty is silently wrong",
            FN, GUARD, "        if torch.is_grad_enabled() and grad_out.requires_grad:\n"
                       "            raise RuntimeError(DOUBLE_BACKWARD)\n"),
    Variant("function-double-backward-silent", "no guard at all: the gradient has no history, a penalty drops its term",
            FN, GUARD, ""),
    # ------------------------------------------------------------------ op-register
    Variant("schema-mutable-argument", "marks grad_out as written to, Tensor(a!): the op is no longer functional",
            OPS, '"trilinear_backward(Tensor grad_out,', '"trilinear_backward(Tensor(a!) grad_out,'),
    Variant("schema-return-aliases-input", "declares the forward's output a view of feats",
            OPS, '"trilinear(Tensor feats, Tensor points) -> Tensor"', '"trilinear(Tensor(a) feats, Tensor points) -> Tensor(a)"'),
    Variant("schema-default-flag", "gives need_points a default: the schema is not the one asked for",
            OPS, 'bool need_points)"', 'bool need_points=True)"'),
    Variant("schema-feats-required", "declares feats a plain Tensor: None cannot be passed",
            OPS, "Tensor? feats", "Tensor feats"),
    Variant("schema-args-renamed", "names the backward's flags differently from the spec",
            OPS, "bool need_feats, bool need_points)", "bool feats_grad, bool points_grad)"),
    Variant("def-with-kernel", "m.def(schema, fn) registers a CompositeImplicitAutograd kernel, for every device",
            OPS, 'm.def("trilinear(Tensor feats, Tensor points) -> Tensor");',
            'm.def("trilinear(Tensor feats, Tensor points) -> Tensor", &trilinear_forward);'),
    Variant("no-cuda-kernel", "registers the backward op for the CPU only",
            OPS, 'TORCH_LIBRARY_IMPL(ch05, CUDA, m) {\n  // BEGIN SOLUTION op-register\n'
                 '  // STUB: (void)m;  // no kernel registered yet\n  m.impl("trilinear", &trilinear_forward);\n'
                 '  m.impl("trilinear_backward", &trilinear_backward_op);\n',
            'TORCH_LIBRARY_IMPL(ch05, CUDA, m) {\n  // BEGIN SOLUTION op-register\n'
            '  // STUB: (void)m;  // no kernel registered yet\n  m.impl("trilinear", &trilinear_forward);\n'),
    Variant("backward-op-undefined-grad", "returns an undefined tensor for a gradient that was not asked for",
            OPS, "    grad_feats = at::empty({0}, grad_out.options());\n", ""),
    Variant("backward-op-empty-float32", "the empty gradient made without options: float32 on the CPU, whatever the input",
            OPS, "grad_points = at::empty({0}, points.options());", "grad_points = at::empty({0});"),
    Variant("backward-op-zeros", "a full tensor of zeros instead of an empty one for a gradient not asked for",
            OPS, "grad_feats = at::empty({0}, grad_out.options());",
            "grad_feats = at::zeros({grad_out.size(0), 8, grad_out.size(1)}, grad_out.options());"),
    # ------------------------------------------------------------------ fake-impl
    Variant("fake-wrong-shape", "the fake forward returns (N, 8) instead of (N, F)",
            OP, "return feats.new_empty(feats.shape[0], feats.shape[2])",
            "return feats.new_empty(feats.shape[0], feats.shape[1])"),
    Variant("fake-wrong-device", "the fake forward allocates on the default device, not on feats' device",
            OP, "return feats.new_empty(feats.shape[0], feats.shape[2])",
            "return torch.empty(feats.shape[0], feats.shape[2], dtype=feats.dtype)"),
    Variant("fake-calls-kernel", "the fake forward runs the real kernel: there is no data under FakeTensor",
            OP, "return feats.new_empty(feats.shape[0], feats.shape[2])", "return ext.forward(feats, points)"),
    Variant("fake-skips-rank-check", "checks feats.shape[1] == 8 but not the rank", OP,
            "    torch._check(feats.dim() == 3, bad_feats)\n    torch._check(feats.shape[1] == 8, bad_feats)\n",
            "    torch._check(feats.shape[1] == 8, bad_feats)\n"),
    Variant("fake-skips-points-check", "never checks the points' shape", OP, FAKE_POINTS, ""),
    Variant("fake-lets-float8-through", "dtype.is_floating_point: the float8 types pass, the C++ op refuses them",
            OP, "torch._check(feats.dtype in DTYPES,", "torch._check(feats.dtype.is_floating_point,"),
    Variant("fake-skips-dtype-match", "never compares the points' dtype with feats'", OP,
            "torch._check(points.dtype == feats.dtype,", "torch._check(True,"),
    Variant("fake-skips-device-check", "never compares the devices (checked under FakeTensorMode without a GPU)",
            OP, "torch._check(points.device == feats.device,", "torch._check(True,"),
    Variant("fake-backward-ignores-need", "the fake backward always returns a full-size grad_feats",
            OP, "grad_feats = grad_out.new_empty(N, 8, F) if need_feats else grad_out.new_empty(0)",
            "grad_feats = grad_out.new_empty(N, 8, F)"),
    Variant("fake-backward-empty-shape", "an unneeded gradient as (0, 3) instead of (0,)",
            OP, "points.new_empty(0)", "points.new_empty(0, 3)"),
    Variant("fake-backward-shape-from-feats", "takes grad_feats' shape from feats, which may be None",
            OP, "grad_out.new_empty(N, 8, F) if need_feats", "feats.new_empty(feats.shape) if need_feats"),
    Variant("fake-backward-feats-check-if-needed", "checks feats' shape only when the points need a gradient",
            OP, "    if feats is not None:\n        bad_feats = lambda",
            "    if feats is not None and need_points:\n        bad_feats = lambda"),
    Variant("fake-backward-skips-none-check", "accepts feats = None with need_points", OP,
            "torch._check(feats is not None or not need_points,", "torch._check(True,"),
    Variant("fake-backward-skips-grad-rank", "never checks grad_out's rank", OP,
            "torch._check(grad_out.dim() == 2, lambda", "torch._check(True, lambda"),
    Variant("fake-backward-skips-grad-dtype", "never checks grad_out's dtype", OP,
            "torch._check(grad_out.dtype in DTYPES,", "torch._check(True,"),
    Variant("fake-backward-skips-feats-dtype", "never compares feats' dtype with grad_out's", OP,
            "torch._check(feats is None or feats.dtype == grad_out.dtype,", "torch._check(True,"),
    Variant("fake-backward-skips-device", "never compares the devices of the backward's arguments", OP,
            "torch._check(points.device == grad_out.device and", "torch._check(True or"),
    # ------------------------------------------------------------------ op-autograd
    Variant("op-saves-output", "saves the output instead of the points",
            OP, SAVE, "ctx.save_for_backward(feats if ctx.needs_input_grad[1] else None, output)"),
    Variant("op-saves-feats-always", "keeps feats alive for backward even when only feats need a gradient",
            OP, SAVE, "ctx.save_for_backward(feats, points)"),
    Variant("op-saves-on-wrong-flag", "keeps feats when feats (not the points) need a gradient",
            OP, SAVE, "ctx.save_for_backward(feats if ctx.needs_input_grad[0] else None, points)"),
    Variant("op-backward-swapped", "returns the two gradients in the wrong order",
            OP, OP_RETURN, "    return (grad_points if need_points else None), (grad_feats if need_feats else None)"),
    Variant("op-backward-ignores-needs-input-grad", "asks the backward op for both gradients every time",
            OP, "need_feats, need_points = ctx.needs_input_grad", "need_feats, need_points = True, True"),
    Variant("op-backward-calls-pybind", "calls ext.backward: eager works, torch.compile cannot trace it",
            OP, "grad_feats, grad_points = trilinear_backward_op(grad_out,", "grad_feats, grad_points = ext.backward(grad_out,"),
    Variant("op-double-backward-zeros", "the backward op's formula returns no gradients: a silent zero",
            OP, '    raise RuntimeError("trilinear: double backward (a gradient of the gradient) is not implemented; "\n'
                '                       "the backward op ch05::trilinear_backward is not differentiable")\n',
            "    return None, None, None, None, None\n"),
    # ------------------------------------------------------------------ fake-quantize
    Variant("quantize-half-away-from-zero", "std::round: 2.5 -> 3, unlike torch.round and PyTorch's quantiser",
            QH, ROUND, "const T q = ::round(x * g.inv_scale) + g.zero_point;"),
    Variant("quantize-floor-plus-half", "floor(y + 0.5): every tie rounds up",
            QH, ROUND, "const T q = ::floor(x * g.inv_scale + T(0.5)) + g.zero_point;"),
    Variant("quantize-divides", "x / scale instead of x * inv_scale: the last bit differs, and at a tie it decides",
            QH, ROUND, "const T q = ::rint(x / g.scale) + g.zero_point;"),
    Variant("quantize-zero-point-before-rounding", "rint(y + zero_point): ties go to the even level, not the even y",
            QH, ROUND, "const T q = ::rint(x * g.inv_scale + g.zero_point);"),
    Variant("quantize-fmin-fmax", "clamps with fmin/fmax: NaN becomes quant_min",
            QH, CLAMP, "const T c = ::fmin(::fmax(q, g.quant_min), g.quant_max);"),
    Variant("quantize-std-min-max", "clamps with a min/max pair written as comparisons that drop NaN",
            QH, CLAMP, "const T c = g.quant_min < (q < g.quant_max ? q : g.quant_max) ? "
                       "(q < g.quant_max ? q : g.quant_max) : g.quant_min;"),
    Variant("quantize-zero-point-folded", "clamps rint(y) to [min - zp, max - zp] and scales it: -0.0 for small negatives",
            QH, ROUND + "\n  in_range = q >= g.quant_min && q <= g.quant_max;  // false for NaN\n",
            "const T r = ::rint(x * g.inv_scale);\n  const T q = r + g.zero_point;\n"
            "  in_range = q >= g.quant_min && q <= g.quant_max;  // false for NaN\n"
            "  if (q == q) return (r < g.quant_min - g.zero_point ? g.quant_min - g.zero_point : "
            "r > g.quant_max - g.zero_point ? g.quant_max - g.zero_point : r) * g.scale;\n"),
    Variant("quantize-mask-after-clamp", "tests the clamped level: the mask is always true",
            QH, "in_range = q >= g.quant_min && q <= g.quant_max;",
            "const T cq = q < g.quant_min ? g.quant_min : (q > g.quant_max ? g.quant_max : q);\n"
            "  in_range = cq >= g.quant_min && cq <= g.quant_max;"),
    Variant("quantize-mask-before-rounding", "tests x * inv_scale + zero_point against the range +- 1/2",
            QH, "in_range = q >= g.quant_min && q <= g.quant_max;",
            "in_range = x * g.inv_scale + g.zero_point >= g.quant_min - T(0.5) && "
            "x * g.inv_scale + g.zero_point <= g.quant_max + T(0.5);"),
    Variant("quantize-scale-last-step", "q * scale - zero_point * scale: two roundings instead of one",
            QH, "return (c - g.zero_point) * g.scale;", "return c * g.scale - g.zero_point * g.scale;"),
    Variant("quantize-inv-scale-in-float", "1.0f / scale: a float64 input's inv_scale passes through float32",
            QH, "return {s, T(1) / s,", "return {s, static_cast<T>(1.0f / static_cast<float>(scale)),"),
    Variant("quantize-scale-in-float", "scale kept in a float: float64 results pass through float32",
            QH, "const T s = static_cast<T>(scale);", "const T s = static_cast<float>(scale);"),
    # ------------------------------------------------------------------ quantize-ste
    Variant("ste-where", "torch.where(mask, grad_out, 0): +0.0 where the product gives -0.0, and NaN is dropped",
            STE, "return grad_out * mask, None, None, None, None", "return torch.where(mask, grad_out, 0.0), None, None, None, None"),
    Variant("ste-no-clipping", "the plain STE (gradient 1 everywhere): clamped values keep learning",
            STE, "return grad_out * mask, None, None, None, None", "return grad_out.clone(), None, None, None, None"),
    Variant("ste-zero", "the true derivative of rounding (zero) instead of the straight-through one",
            STE, "return grad_out * mask, None, None, None, None",
            "return torch.zeros_like(grad_out), None, None, None, None"),
    Variant("ste-detached", "the gradient detached: a gradient penalty through fake_quantize loses its term",
            STE, "return grad_out * mask, None, None, None, None", "return (grad_out * mask).detach(), None, None, None, None"),
    Variant("ste-in-place", "multiplies grad_out in place: the gradient of .sum() is an expanded tensor",
            STE, "return grad_out * mask, None, None, None, None", "return grad_out.mul_(mask), None, None, None, None"),
    Variant("ste-one-gradient", "returns one value: forward had five inputs",
            STE, "return grad_out * mask, None, None, None, None", "return grad_out * mask"),
    Variant("ste-saves-float-mask", "saves the mask as x's dtype: four or eight times the memory",
            STE, "ctx.save_for_backward(mask)", "ctx.save_for_backward(mask.to(x.dtype))"),
    Variant("ste-saves-x", "saves x as well, though backward never reads it",
            STE, "ctx.save_for_backward(mask)", "ctx.save_for_backward(mask, x)"),
    # ------------------------------------------------------------------ grid-lookup
    Variant("grid-no-clamp", "points on the far face (x = 1) index past the grid",
            MOD, ".clamp_(0, R - 1)", ""),
    Variant("grid-clamp-to-R", "clamps the lower vertex to R: the far face's cell has no upper vertices",
            MOD, ".clamp_(0, R - 1)", ".clamp_(0, R)"),
    Variant("grid-corner-order", "gathers the corners in (x, z, y) order",
            MOD, "[(k >> 2) & 1, (k >> 1) & 1, k & 1]", "[(k >> 2) & 1, k & 1, (k >> 1) & 1]"),
    Variant("grid-index-z-major", "flattens vertex (i, j, k) as (k * (R+1) + j) * (R+1) + i",
            MOD, "index = (vertex[..., 0] * (R + 1) + vertex[..., 1]) * (R + 1) + vertex[..., 2]",
            "index = (vertex[..., 2] * (R + 1) + vertex[..., 1]) * (R + 1) + vertex[..., 0]"),
    Variant("grid-local-detached", "computes local coordinates from detached points: no gradient to the points",
            MOD, "local = (s - cell) * 2 - 1", "local = (s.detach() - cell) * 2 - 1"),
    Variant("grid-local-unclamped-floor", "local coordinates from floor(s), not from the clamped cell: -1 on the far face",
            MOD, "local = (s - cell) * 2 - 1", "local = (s - s.detach().floor()) * 2 - 1"),
    Variant("grid-lookup-in-storage-type", "the grid coordinate computed in float16/bfloat16",
            MOD, "p = points if points.dtype in (torch.float64, torch.float32) else points.float()", "p = points"),
    Variant("grid-lookup-in-float32", "the grid coordinate always in float32: float64 points lose precision",
            MOD, "p = points if points.dtype in (torch.float64, torch.float32) else points.float()", "p = points.float()"),
    # ------------------------------------------------------------------ outside the exercises
    Variant("forward-skips-last-feature", "the CPU forward never writes out[n, F-1]",
            CPU, "        out_n[f] = static_cast<scalar_t>(acc);",
            "        if (f + 1 < F) out_n[f] = static_cast<scalar_t>(acc);"),
    Variant("forward-accumulates-in-storage-type", "the CPU forward sums in scalar_t (float16/bfloat16)",
            CPU, "opmath_t acc = 0;", "scalar_t acc = 0;"),
    Variant("backward-points-sum-in-storage-type", "the CPU points gradient sums in scalar_t",
            CPU, "opmath_t gx = 0, gy = 0, gz = 0;", "scalar_t gx = 0, gy = 0, gz = 0;"),
    Variant("forward-weights-in-float", "the CPU forward's weights in float: float64 passes through float32",
            CPU, "weight[k] = corner_weight<opmath_t>(k, u, v, w);\n      }\n      const scalar_t* f_n",
            "weight[k] = corner_weight<float>(k, u, v, w);\n      }\n      const scalar_t* f_n"),
    Variant("backward-feats-not-contiguous", "the backward passes feats on as it came",
            CHK, "need_points ? feats_in->contiguous() : at::Tensor()", "need_points ? *feats_in : at::Tensor()"),
    Variant("backward-grad-out-not-contiguous", "the backward passes grad_out on as it came (an expanded gradient!)",
            CHK, "const at::Tensor grad_out = grad_out_in.contiguous();", "const at::Tensor grad_out = grad_out_in;"),
    Variant("backward-skips-feats-F-check", "the backward compares feats with grad_out in N only",
            CHK, "feats->size(1) == 8 && feats->size(2) == F,", "feats->size(1) == 8,"),
    Variant("backward-lets-float8-through", "the backward takes any floating dtype",
            CHK, "TORCH_CHECK(is_kernel_dtype(grad_out.scalar_type()),", "TORCH_CHECK(at::isFloatingType(grad_out.scalar_type()),"),
    Variant("quantize-kernel-in-storage-type", "the CPU fake-quantize kernel computes in scalar_t",
            QCPU, "using opmath_t = at::opmath_type<scalar_t>;\n    const QuantGrid<opmath_t>",
            "using opmath_t = scalar_t;\n    const QuantGrid<opmath_t>"),
    Variant("no-double-backward-registration", "no autograd formula for the backward op: a silent zero second derivative",
            OP, 'torch.library.register_autograd("ch05::trilinear_backward", _backward_of_backward,\n'
                '                                setup_context=lambda ctx, inputs, output: None)\n', ""),
    Variant("cuda-forward-accumulates-in-storage-type", "the CUDA forward sums in scalar_t", CU,
            "    opmath_t acc[VEC] = {};", "    scalar_t acc[VEC] = {};", cuda_only=True),
    Variant("cuda-backward-points-sum-in-storage-type", "the CUDA points gradient sums a corner's products in scalar_t",
            CU, "          opmath_t dot = 0;", "          scalar_t dot = 0;", cuda_only=True),
    Variant("cuda-backward-packs-read-feats-unneeded", "the 16-byte path checks feats' alignment when feats is None",
            CU, "(!grad_points.defined() || aligned16(feats.const_data_ptr()))", "aligned16(feats.const_data_ptr())",
            cuda_only=True),
    # ------------------------------------------------------------------ autocast (csrc/ops.cpp)
    Variant("autocast-cuda-only", "an Autocast kernel for CUDA only: CPU autocast still refuses mixed dtypes",
            OPS, "TORCH_LIBRARY_IMPL(ch05, AutocastCPU, m) {\n  m.impl(\"trilinear\", &trilinear_autocast<c10::DeviceType::CPU>);\n}\n",
            ""),
    Variant("autocast-lower-precision", "casts every input to autocast's low type: the coordinates lose precision",
            OPS, "to_type = to_type ? c10::promoteTypes(*to_type, t->scalar_type()) : t->scalar_type();",
            "to_type = at::autocast::get_lower_precision_fp_from_device_type(kDevice);"),
    Variant("autocast-always-float32", "casts every input to float32: two float16 inputs are copied and come back float32",
            OPS, "to_type = to_type ? c10::promoteTypes(*to_type, t->scalar_type()) : t->scalar_type();",
            "to_type = at::kFloat;"),
    Variant("quantize-inv-scale-double", "inv_scale as double 1/scale rounded to T, not T(1) / T(scale)",
            "csrc/quantize.h", "return {s, T(1) / s,", "return {s, static_cast<T>(1.0 / scale),"),
    # second round of learner mistakes: empty gradients, double backward in feats, fake strides, ranks, grid types
    Variant("op-backward-none-by-numel", "turns an empty gradient into None by numel: with N = 0 (or F = 0) an input "
            "that requires grad gets no .grad",
            OP, "    return (grad_feats if need_feats else None), (grad_points if need_points else None)",
            "    return (grad_feats if grad_feats.numel() else None), (grad_points if grad_points.numel() else None)"),
    Variant("function-double-backward-only-points", "refuses create_graph only when the points need a gradient: "
            "with feats alone, a penalty on feats.grad silently loses its term",
            FN, "        if torch.is_grad_enabled():\n", "        if torch.is_grad_enabled() and ctx.needs_input_grad[1]:\n"),
    Variant("fake-backward-empty-like-points", "the fake grad_points as torch.empty_like(points): it keeps the points' "
            "strides (column-major for transposed points), the C++ op returns a packed (N, 3)",
            OP, "grad_points = points.new_empty(N, 3) if need_points", "grad_points = torch.empty_like(points) if need_points"),
    Variant("fake-backward-empty-like-feats", "the fake grad_feats as torch.empty_like(feats) when feats is given: it "
            "keeps feats' strides, the C++ op returns a packed (N, 8, F)",
            OP, "grad_feats = grad_out.new_empty(N, 8, F) if need_feats",
            "grad_feats = (torch.empty_like(feats) if feats is not None else grad_out.new_empty(N, 8, F)) if need_feats"),
    Variant("fake-forward-empty-like-corner", "the fake output as torch.empty_like(feats[:, 0]): it keeps the strides "
            "of a corner slice (column-major when n is feats' innermost dimension)",
            OP, "return feats.new_empty(feats.shape[0], feats.shape[2])", "return torch.empty_like(feats[:, 0])"),
    Variant("fake-size-before-rank", "tests feats.shape[1] before feats.dim(): a rank-0 or rank-1 feats raises "
            "IndexError under FakeTensor/meta instead of the C++ op's RuntimeError",
            OP, "    torch._check(feats.dim() == 3, bad_feats)\n    torch._check(feats.shape[1] == 8, bad_feats)\n",
            "    torch._check(feats.shape[1] == 8, bad_feats)\n    torch._check(feats.dim() == 3, bad_feats)\n"),
    Variant("fake-joins-size-checks", "the fake forward joins the points' size conditions with `and` in one "
            "torch._check, as C++ joins them with &&: Python asks the first symbolic comparison for a plain bool, "
            "which a size that depends on data (after nonzero()) does not have",
            OP, FAKE_POINTS,
            "    torch._check(points.dim() == 2 and points.shape[0] == feats.shape[0] and points.shape[1] == 3,"
            " bad_points)\n"),
    Variant("grid-local-in-points-dtype", "returns the local coordinates in the points' dtype: float16/bfloat16 "
            "points get their local coordinates rounded to 16 bits before a float32 grid uses them",
            MOD, "local = (s - cell) * 2 - 1", "local = ((s - cell) * 2 - 1).to(points.dtype)"),
    Variant("grid-index-int32", "returns the vertex indices as int32, not int64",
            MOD, "index = (vertex[..., 0] * (R + 1) + vertex[..., 1]) * (R + 1) + vertex[..., 2]",
            "index = ((vertex[..., 0] * (R + 1) + vertex[..., 1]) * (R + 1) + vertex[..., 2]).int()"),
    Variant("grid-index-in-float", "keeps the cell and the flat index in the coordinate type and converts to long "
            "at the end: float32 index arithmetic is exact only below 2^24, (R+1)^3 > 2^24 from R = 256",
            MOD,
            '    cell = s.detach().floor().clamp_(0, R - 1).long()\n'
            '    local = (s - cell) * 2 - 1  # [0, 1] within the cell -> [-1, 1]; differentiable in points\n'
            '    vertex = cell[:, None, :] + CORNERS.to(points.device)  # (N, 8, 3)\n'
            '    index = (vertex[..., 0] * (R + 1) + vertex[..., 1]) * (R + 1) + vertex[..., 2]\n',
            '    cell = s.detach().floor().clamp_(0, R - 1)\n'
            '    local = (s - cell) * 2 - 1  # [0, 1] within the cell -> [-1, 1]; differentiable in points\n'
            '    vertex = cell[:, None, :] + CORNERS.to(points.device)  # (N, 8, 3)\n'
            '    index = ((vertex[..., 0] * (R + 1) + vertex[..., 1]) * (R + 1) + vertex[..., 2]).long()\n'),
    Variant("fake-forward-dtype-checks-first", "the fake forward checks the dtypes before the shapes: an input wrong "
            "in both gets another error under torch.compile than in eager",
            OP, FAKE_SHAPES + FAKE_DTYPES, FAKE_DTYPES + FAKE_SHAPES),
]

# Found by a red-team round: fakes that compare device types, a chunk indexed from 0, an output kept on ctx.
VARIANTS += [
    Variant("fake-device-type-only", "the fake forward compares device types, not devices: cuda:0 with cuda:1 "
            "passes under torch.compile, eager refuses it",
            OP, "torch._check(points.device == feats.device,", "torch._check(points.device.type == feats.device.type,"),
    Variant("fake-backward-device-type-only", "the fake backward compares device types, not devices",
            OP, "torch._check(points.device == grad_out.device and (feats is None or feats.device == grad_out.device),",
            "torch._check(points.device.type == grad_out.device.type and "
            "(feats is None or feats.device.type == grad_out.device.type),"),
    Variant("fake-device-before-dtype", "the fake forward checks the devices before the dtypes: an input wrong in "
            "both gets another error under torch.compile than in eager",
            OP,
            '    torch._check(feats.dtype in DTYPES,\n'
            '                 lambda: f"trilinear: feats must be float64, float32, float16 or bfloat16, got {feats.dtype}")\n'
            '    torch._check(points.dtype == feats.dtype,\n'
            '                 lambda: f"trilinear: points must have the dtype of feats ({feats.dtype}), got {points.dtype}")\n'
            '    torch._check(points.device == feats.device,\n'
            '                 lambda: f"trilinear: feats and points must be on the same device, got feats on {feats.device} "\n'
            '                         f"and points on {points.device}")\n',
            '    torch._check(points.device == feats.device,\n'
            '                 lambda: f"trilinear: feats and points must be on the same device, got feats on {feats.device} "\n'
            '                         f"and points on {points.device}")\n'
            '    torch._check(feats.dtype in DTYPES,\n'
            '                 lambda: f"trilinear: feats must be float64, float32, float16 or bfloat16, got {feats.dtype}")\n'
            '    torch._check(points.dtype == feats.dtype,\n'
            '                 lambda: f"trilinear: points must have the dtype of feats ({feats.dtype}), got {points.dtype}")\n'),
    Variant("function-stashes-output", "keeps the output on ctx as an attribute (ctx.out = out): a reference cycle "
            "output -> grad_fn -> ctx -> output that keeps it alive until the garbage collector runs",
            FN, SAVE, SAVE + "\n        ctx.out = out"),
    Variant("function-backward-zeros-for-unneeded", "returns zeros instead of None for a gradient nobody asked for "
            "(an (N, 8, F) allocation and a fill per step, then thrown away by autograd)",
            FN, FN_RETURN,
            "grad_feats, grad_points = ext.backward(grad_out, feats, points, need_feats, need_points)\n"
            "        return (grad_feats if need_feats else grad_out.new_zeros(grad_out.shape[0], 8, grad_out.shape[1]),\n"
            "                grad_points if need_points else torch.zeros_like(points))"),
    Variant("op-backward-returns-placeholders", "returns the backward op's empty placeholders instead of None for "
            "gradients nobody asked for",
            OP, OP_RETURN, "    return grad_feats, grad_points"),
    Variant("quantize-skip-zero-shift", "adds the zero point only when it is not 0: rint(-0.3) stays -0.0",
            QH, ROUND, "const T r = ::rint(x * g.inv_scale);\n  const T q = g.zero_point != T(0) ? r + g.zero_point : r;"),
    Variant("quantize-divides-by-inv-scale", "scales the level back by dividing by inv_scale instead of multiplying "
            "by scale", QH, "return (c - g.zero_point) * g.scale;", "return (c - g.zero_point) / g.inv_scale;"),
    Variant("quantize-cpu-chunk-not-offset", "the CPU loop indexes each parallel_for chunk from 0 instead of from "
            "begin: every chunk but the first rewrites the first elements (only tensors of more than 32768 values)",
            QCPU, "      for (int64_t i = begin; i < end; ++i) {\n        bool in_range;\n"
                  "        o[i] = static_cast<scalar_t>(fake_quantize_one<opmath_t>(static_cast<opmath_t>(in[i]), grid, in_range));\n"
                  "        m[i] = in_range;",
            "      for (int64_t i = 0; i < end - begin; ++i) {\n        bool in_range;\n"
            "        o[i] = static_cast<scalar_t>(fake_quantize_one<opmath_t>(static_cast<opmath_t>(in[i]), grid, in_range));\n"
            "        m[i] = in_range;"),
    Variant("backward-f0-not-zeroed", "with F = 0 the points' gradient is left uninitialised",
            CHK, "    if (need_points) grad_points.zero_();  // F = 0: out does not depend on the points\n", ""),
    Variant("grid-clamp-upper-only", "clamps the lower vertex to R - 1 but not to 0: a point below -1 gets a "
            "negative index, which Python's indexing wraps to the far end of the grid",
            MOD, ".clamp_(0, R - 1)", ".clamp_(max=R - 1)"),
    Variant("ste-masked-fill", "grad_out.masked_fill(~mask, 0): +0.0 where the product gives -0.0, NaN dropped",
            STE, "return grad_out * mask, None, None, None, None",
            "return grad_out.masked_fill(~mask, 0), None, None, None, None"),
]

# Found by a third red-team round (and two correct alternatives the graders refused).
_BACKWARD_TO_FORMULA = (
    "    return (grad_feats if need_feats else None), (grad_points if need_points else None)\n    # END SOLUTION\n\n\n"
    'torch.library.register_autograd("ch05::trilinear", _backward, setup_context=_setup_context)\n\n\n'
    "# The backward op has no derivative of its own. Without a formula registered,\n"
    "# autograd would differentiate *through* it anyway (with a warning) and return\n"
    "# wrong zeros for a second derivative.\n"
    "def _backward_of_backward(ctx, grad_grad_feats, grad_grad_points):\n    # BEGIN SOLUTION op-autograd\n")
_IMPL_BLOCKS = (
    "  // END SOLUTION\n}\n\n// One function serves both keys: trilinear_forward already checks the inputs\n"
    "// and picks the CPU or the CUDA kernel by device (and, in a build without\n"
    "// CUDA, refuses CUDA tensors with a message that says so).\nTORCH_LIBRARY_IMPL(ch05, CPU, m) {\n"
    "  // BEGIN SOLUTION op-register\n  // STUB: (void)m;  // no kernel registered yet\n")
VARIANTS += [
    Variant("function-saves-points-first", "saves (points, feats or None): the order the spec fixes, (feats, points), "
            "swapped; function-forward's tests compare the saved tensors as a set, and the chapter's backward then "
            "unpacks points as feats",
            FN, SAVE, "ctx.save_for_backward(points, feats if ctx.needs_input_grad[1] else None)"),
    Variant("op-guard-in-backward-formula-returns-none", "refuses create_graph inside _backward (route 1's guard), "
            "and the backward op's own formula returns Nones: torch.ops.ch05.trilinear_backward differentiated "
            "directly gives a silent zero",
            OP,
            "    grad_feats, grad_points = trilinear_backward_op(grad_out, feats, points, need_feats, need_points)\n"
            + _BACKWARD_TO_FORMULA
            + '    raise RuntimeError("trilinear: double backward (a gradient of the gradient) is not implemented; "\n'
              '                       "the backward op ch05::trilinear_backward is not differentiable")\n',
            "    if torch.is_grad_enabled():  # create_graph=True: refuse, as route 1 does\n"
            '        raise RuntimeError("trilinear: double backward (a gradient of the gradient) is not implemented")\n'
            "    grad_feats, grad_points = trilinear_backward_op(grad_out, feats, points, need_feats, need_points)\n"
            + _BACKWARD_TO_FORMULA + "    return None, None, None, None, None\n"),
    Variant("fake-backward-feats-device-if-needed", "the fake backward compares feats' device only when the points "
            "need a gradient (feats is read only then); the C++ op compares it always",
            OP, "torch._check(points.device == grad_out.device and (feats is None or feats.device == grad_out.device),",
            "torch._check(points.device == grad_out.device and (feats is None or not need_points "
            "or feats.device == grad_out.device),"),
    Variant("schema-named-returns", "names the backward's two returns as the spec table does: "
            "-> (Tensor grad_feats, Tensor grad_points)",
            OPS, '" -> (Tensor, Tensor)");', '" -> (Tensor grad_feats, Tensor grad_points)");', correct=True),
    Variant("grid-trunc-clamp-upper-only", "the lower vertex by truncation (.long()) clamped only above: correct for "
            "s > -1 (truncation gives 0 there), a negative index (wrapped by Python's indexing) from one cell "
            "outside the cube on (p <= -1 - 2/R)",
            MOD, "cell = s.detach().floor().clamp_(0, R - 1).long()", "cell = s.detach().long().clamp_(max=R - 1)"),
    Variant("function-double-backward-only-feats", "refuses create_graph only when feats need a gradient: with the "
            "points alone requiring one, a gradient penalty on points.grad silently loses its term",
            FN, "        if torch.is_grad_enabled():\n", "        if torch.is_grad_enabled() and ctx.needs_input_grad[0]:\n"),
    Variant("op-backward-calls-torch-ops", "calls the backward operator as torch.ops.ch05.trilinear_backward (the "
            "same operator that trilinear_backward_op names)",
            OP, "grad_feats, grad_points = trilinear_backward_op(grad_out,",
            "grad_feats, grad_points = torch.ops.ch05.trilinear_backward(grad_out,", correct=True),
    # ------------------------------------------------------------------ triton-forward
    Variant("triton-mask-features-only", "masks the feature axis only: the rows of the last tile past N are "
            "read and stored too", TRI, "mask = n_ok[:, None] & (f < F)[None, :]", "mask = (f < F)[None, :]"),
    Variant("triton-store-unmasked", "loads with the mask, stores the whole tile: a partial tile writes past out",
            TRI, "acc.to(out_ptr.dtype.element_ty), mask=mask)", "acc.to(out_ptr.dtype.element_ty))"),
    Variant("triton-corner-order-swapped", "y and z offsets swapped: corner k's y factor from bit 0, z from bit 1",
            TRI, "wy = v if (k >> 1) & 1 else 1 - v\n        wz = w if k & 1 else 1 - w",
            "wy = v if k & 1 else 1 - v\n        wz = w if (k >> 1) & 1 else 1 - w"),
    Variant("triton-contiguous-strides", "assumes contiguous feats (offsets n*8*F + k*F + f) instead of its strides",
            TRI, "corner = feats_ptr + n64[:, None] * stride_fn + f[None, :] * stride_ff",
            "corner = feats_ptr + n64[:, None] * 8 * F + f[None, :]"),
    Variant("triton-storage-type-math", "computes in the storage type: float16/bfloat16 products and sums round "
            "at every step", TRI, "compute: tl.constexpr = tl.float64 if feats_ptr.dtype.element_ty == tl.float64 "
            "else tl.float32", "compute: tl.constexpr = feats_ptr.dtype.element_ty"),
    Variant("triton-float32-always", "computes in float32 for every dtype: float64 loses its precision",
            TRI, "compute: tl.constexpr = tl.float64 if feats_ptr.dtype.element_ty == tl.float64 else tl.float32",
            "compute: tl.constexpr = tl.float32"),
    Variant("triton-other-and-fma-form", "loads with other=0 and maps [-1, 1] to [0, 1] as x/2 + 1/2 (the same "
            "value: halving is exact)", TRI, "u = (tl.load(p, mask=n_ok).to(compute) + 1) * 0.5",
            "u = tl.load(p, mask=n_ok, other=0.0).to(compute) * 0.5 + 0.5", correct=True),
]

# A reviewer's mistakes (a set written without these variants at hand), each a class the tests close.
VARIANTS += [
    Variant("fake-message-shape-repr", "the fake's message prints torch.Size([4, 8]) where the C++ op prints [4, 8]",
            OP, "(N, 8, F), got {list(feats.shape)}\"  # noqa", "(N, 8, F), got {feats.shape}\"  # noqa"),
]

# A second reviewer's mistakes (a red team's, with these variants at hand), each closed by a test.
VARIANTS += [
    Variant("triton-points-loads-unmasked", "loads the three coordinates without the row mask: rows past N read "
            "past points (never stored, so the output is right; on a GPU another allocation or a fault)", TRI,
            "    u = (tl.load(p, mask=n_ok).to(compute) + 1) * 0.5  # [-1, 1] -> [0, 1]\n"
            "    v = (tl.load(p + stride_pd, mask=n_ok).to(compute) + 1) * 0.5\n"
            "    w = (tl.load(p + 2 * stride_pd, mask=n_ok).to(compute) + 1) * 0.5\n",
            "    u = (tl.load(p).to(compute) + 1) * 0.5  # [-1, 1] -> [0, 1]\n"
            "    v = (tl.load(p + stride_pd).to(compute) + 1) * 0.5\n"
            "    w = (tl.load(p + 2 * stride_pd).to(compute) + 1) * 0.5\n"),
    Variant("triton-feats-load-row-mask-only", "masks the feats loads by row only: features past F are read "
            "(past the end of feats on the last rows)", TRI,
            "tl.load(corner + k * stride_fk, mask=mask)", "tl.load(corner + k * stride_fk, mask=n_ok[:, None])"),
    Variant("op-register-cuda-raw-backward", "registers the raw C++ backward for the CUDA key: a gradient not "
            "asked for comes back undefined (None) on a GPU instead of the (0,) placeholder", OPS,
            "TORCH_LIBRARY_IMPL(ch05, CUDA, m) {\n  // BEGIN SOLUTION op-register\n  // STUB: (void)m;  // no kernel "
            "registered yet\n  m.impl(\"trilinear\", &trilinear_forward);\n  m.impl(\"trilinear_backward\", "
            "&trilinear_backward_op);",
            "TORCH_LIBRARY_IMPL(ch05, CUDA, m) {\n  // BEGIN SOLUTION op-register\n  // STUB: (void)m;  // no kernel "
            "registered yet\n  m.impl(\"trilinear\", &trilinear_forward);\n  m.impl(\"trilinear_backward\", "
            "&trilinear_backward);"),
    Variant("fake-device-message-swapped", "the fake forward's device message names feats' device for points and "
            "points' for feats", OP,
            "lambda: f\"trilinear: feats and points must be on the same device, got feats on {feats.device} \"\n"
            "                         f\"and points on {points.device}\")",
            "lambda: f\"trilinear: feats and points must be on the same device, got feats on {points.device} \"\n"
            "                         f\"and points on {feats.device}\")"),
    Variant("fake-backward-device-message-without-feats", "the fake backward's device message leaves out feats' "
            "device, which the C++ op prints", OP,
            "                         f\"on {grad_out.device}, points on {points.device}\"\n"
            "                         + (f\", feats on {feats.device}\" if feats is not None else \"\"))",
            "                         f\"on {grad_out.device}, points on {points.device}\")"),
    Variant("fake-output-on-device-type", "makes the fake output on feats' device type: inputs on cuda:1 give an "
            "output on the current GPU", OP, "return feats.new_empty(feats.shape[0], feats.shape[2])",
            "return torch.empty(feats.shape[0], feats.shape[2], dtype=feats.dtype, device=feats.device.type)"),
]
