"""Plausible wrong solutions for chapter 05; each must fail at least one test."""

from coursekit.exercises import Variant

VARIANTS = [
    # Route 1: autograd.Function
    Variant("function-grads-swapped", "returns (grad_points, grad_feats): the order of forward's inputs matters",
            "trilinear_function.py", "        return grad_feats, grad_points\n", "        return grad_points, grad_feats\n"),
    Variant("function-drops-none", "returns only grad_feats when the points need no gradient (one value, not two)",
            "trilinear_function.py", "        return grad_feats, grad_points\n",
            "        return (grad_feats, grad_points) if need_points else grad_feats\n"),
    Variant("function-saves-output", "saves the output instead of the points",
            "trilinear_function.py", "ctx.save_for_backward(feats, points)", "ctx.save_for_backward(feats, out)"),
    Variant("function-ignores-needs-input-grad", "always computes both gradients",
            "trilinear_function.py", "need_feats, need_points = ctx.needs_input_grad", "need_feats, need_points = True, True"),
    Variant("function-not-once-differentiable", "drops @once_differentiable: a second derivative is silently missing",
            "trilinear_function.py", "    @once_differentiable\n", ""),
    # Route 2: torch.library
    Variant("fake-wrong-shape", "the fake forward returns (N, 8) instead of (N, F)",
            "trilinear_op.py", "return feats.new_empty(feats.shape[0], feats.shape[2])",
            "return feats.new_empty(feats.shape[0], feats.shape[1])"),
    Variant("fake-backward-ignores-need", "the fake backward always returns full-size gradients",
            "trilinear_op.py", "grad_feats = feats.new_empty(feats.shape) if need_feats else feats.new_empty(0)",
            "grad_feats = feats.new_empty(feats.shape)"),
    Variant("op-backward-swapped", "returns the two gradients in the wrong order",
            "trilinear_op.py", "    return (grad_feats if need_feats else None), (grad_points if need_points else None)",
            "    return (grad_points if need_points else None), (grad_feats if need_feats else None)"),
    Variant("op-backward-ignores-needs-input-grad", "asks the backward op for both gradients every time",
            "trilinear_op.py", "need_feats, need_points = ctx.needs_input_grad", "need_feats, need_points = True, True"),
    # The straight-through round
    Variant("ste-backward-zero", "the true derivative of round (zero) instead of the straight-through one",
            "ste.py", "        return grad_out\n", "        return torch.zeros_like(grad_out)\n"),
    Variant("round-half-away-from-zero", "std::round: 2.5 -> 3, unlike torch.round",
            "csrc/round.h", "  return ::rint(x);", "  return ::round(x);"),
    Variant("round-floor-plus-half", "floor(x + 0.5): ties go up, and 0.49999997 becomes 1",
            "csrc/round.h", "  return ::rint(x);", "  return ::floor(x + T(0.5));"),
    # The kernels (the outputs are poisoned with NaN, so an unwritten element shows)
    Variant("forward-skips-last-feature", "the CPU forward never writes out[n, F-1]",
            "csrc/trilinear_cpu.cpp", "        out_n[f] = static_cast<scalar_t>(acc);",
            "        if (f + 1 < F) out_n[f] = static_cast<scalar_t>(acc);"),
    # FeatureGrid
    Variant("grid-no-clamp", "points on the far face (x = 1) index past the grid",
            "module.py", ".clamp_(0, R - 1)", ""),
    Variant("grid-corner-order", "gathers the corners in (x, z, y) order",
            "module.py", "[(k >> 2) & 1, (k >> 1) & 1, k & 1]", "[(k >> 2) & 1, k & 1, (k >> 1) & 1]"),
    Variant("grid-local-detached", "computes local coordinates from detached points: no gradient to the points",
            "module.py", "local = (s - cell) * 2 - 1", "local = (s.detach() - cell) * 2 - 1"),
]
