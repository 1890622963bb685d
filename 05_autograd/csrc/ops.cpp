// Chapter 05: the trilinear kernels registered as PyTorch operators.
//
// TORCH_LIBRARY declares operators (name + schema) in a namespace, here
// `ch05`; TORCH_LIBRARY_IMPL gives each one a kernel per dispatch key (CPU,
// CUDA, ...). Python then calls them as torch.ops.ch05.trilinear(...), and the
// dispatcher routes each call by the tensors' device. Unlike a pybind11
// function, a registered operator is visible to torch.compile, torch.export
// and FakeTensor: they all go through the dispatcher. The Python side
// (trilinear_op.py) adds what the dispatcher still needs: a fake
// implementation (shapes without data) and the autograd formula.
//
// These registrations run when the shared library is loaded (static
// initialisers), so importing the extension is enough. A namespace can be
// defined by one TORCH_LIBRARY only, once per process: loading a second copy
// of this library (a workspace build beside the chapter's) fails.
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "trilinear.h"

// The backward operator's kernel: trilinear_backward, with "not needed" said the
// way a schema can say it (see the README, exercise op-register).
static std::tuple<at::Tensor, at::Tensor> trilinear_backward_op(const at::Tensor& grad_out,
                                                                const std::optional<at::Tensor>& feats,
                                                                const at::Tensor& points, bool need_feats,
                                                                bool need_points) {
  // BEGIN SOLUTION op-register
  // STUB: TORCH_CHECK(false, "exercise op-register is not done yet (see 05_autograd/README.md)");
  // STUB: return {};
  auto [grad_feats, grad_points] = trilinear_backward(grad_out, feats, points, need_feats, need_points);
  // A schema has a fixed number of returns, and each `Tensor` return must be a
  // real tensor: a gradient nobody asked for comes back empty (numel 0), with
  // the dtype and device of the others. The Python side turns it into None.
  if (!need_feats) {
    grad_feats = at::empty({0}, grad_out.options());
  }
  if (!need_points) {
    grad_points = at::empty({0}, points.options());
  }
  return {grad_feats, grad_points};
  // END SOLUTION
}

TORCH_LIBRARY(ch05, m) {
  // BEGIN SOLUTION op-register
  // STUB: (void)m;  // no operator defined yet
  // Schemas use the language of native_functions.yaml. Both ops are functional:
  // they return new tensors and write to none of their inputs, so no argument
  // carries an alias annotation such as (a!), which register_autograd requires.
  // `Tensor?` is an optional tensor (None from Python, std::optional in C++).
  m.def("trilinear(Tensor feats, Tensor points) -> Tensor");
  m.def("trilinear_backward(Tensor grad_out, Tensor? feats, Tensor points, bool need_feats, bool need_points)"
        " -> (Tensor, Tensor)");
  // END SOLUTION
}

// One function serves both keys: trilinear_forward already checks the inputs
// and picks the CPU or the CUDA kernel by device (and, in a build without
// CUDA, refuses CUDA tensors with a message that says so).
TORCH_LIBRARY_IMPL(ch05, CPU, m) {
  // BEGIN SOLUTION op-register
  // STUB: (void)m;  // no kernel registered yet
  m.impl("trilinear", &trilinear_forward);
  m.impl("trilinear_backward", &trilinear_backward_op);
  // END SOLUTION
}

TORCH_LIBRARY_IMPL(ch05, CUDA, m) {
  // BEGIN SOLUTION op-register
  // STUB: (void)m;  // no kernel registered yet
  m.impl("trilinear", &trilinear_forward);
  m.impl("trilinear_backward", &trilinear_backward_op);
  // END SOLUTION
}

// Autocast (torch.autocast("cuda", dtype=torch.float16), or "cpu" with bfloat16).
// Inside such a region PyTorch's own ops cast their inputs by a per-op policy;
// an op without an Autocast kernel gets its inputs as they come, and ours would
// refuse float16 feats with float32 points ("points must have the dtype of
// feats"). The policy here is PyTorch's "promote", the one it applies to
// grid_sampler on CUDA, the closest op it has to ours: run in the widest
// floating type among the inputs. So float16 feats with float32 points run in
// float32 (the coordinates keep their precision), two float16 inputs stay
// float16 (the kernels compute in float and round once anyway), and float32
// inputs are not lowered.
//
// The kernel sits in front of Autograd: the casts are recorded by autograd, so
// the gradient of a float16 feats comes back as float16. It turns its own key
// off (ExcludeDispatchKeyGuard) and calls the operator again, which then goes
// on to the Autograd, CPU or CUDA kernels. No Autocast kernel for the backward
// op: backward passes run outside autocast, on tensors that already agree.
//
// "Widest" is c10::promoteTypes, the rule of torch.promote_types, over the
// inputs autocast may cast: float32, float16 or bfloat16, on this device type.
// ATen's own helper, at::autocast::promote_type, starts from autocast's low
// type and knows only that type and float32: for float16 under a bfloat16
// region (or the reverse), even two float16 inputs, it throws "Unexpected
// floating ScalarType in at::autocast::prioritize". Here two inputs of one type
// stay in it, whichever 16-bit type the region was given, and float16 with
// bfloat16 run in float32, the narrowest type that holds both exactly. Other
// inputs (float64, float8, integers, another device) are passed as they come,
// so the op's own checks answer for them, as outside autocast.
static bool autocast_may_cast(const at::Tensor& t, c10::DeviceType device) {
  const at::ScalarType s = t.scalar_type();
  return at::autocast::is_autocast_eligible(t, device) && (s == at::kFloat || s == at::kHalf || s == at::kBFloat16);
}

template <c10::DeviceType kDevice>
static at::Tensor trilinear_autocast(const at::Tensor& feats, const at::Tensor& points) {
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(at::autocast::get_autocast_dispatch_key_from_device_type(kDevice));
  std::optional<at::ScalarType> to_type;
  for (const at::Tensor* t : {&feats, &points}) {
    if (autocast_may_cast(*t, kDevice)) {
      to_type = to_type ? c10::promoteTypes(*to_type, t->scalar_type()) : t->scalar_type();
    }
  }
  const auto cast = [&](const at::Tensor& t) {
    return autocast_may_cast(t, kDevice) ? at::autocast::cached_cast(*to_type, t, kDevice) : t;
  };
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("ch05::trilinear", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(cast(feats), cast(points));
}

TORCH_LIBRARY_IMPL(ch05, AutocastCUDA, m) {
  m.impl("trilinear", &trilinear_autocast<c10::DeviceType::CUDA>);
}

TORCH_LIBRARY_IMPL(ch05, AutocastCPU, m) {
  m.impl("trilinear", &trilinear_autocast<c10::DeviceType::CPU>);
}
