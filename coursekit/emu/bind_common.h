#pragma once
// The GPU-free judge's bindings: tensors in guard-paged memory, and the check that a
// kernel wrote every output (cuda_emu.h).
#include <torch/extension.h>

#include <string>

#include "cuda_emu.h"

namespace emu {

// A copy of t (contiguous) in a guarded buffer; at_end: it ends where the buffer ends.
// offset: the copy starts that many elements into its buffer (a view whose data is off the
// 16-byte grid: a vector path taken then reads a misaligned pack, which the judge stops).
inline at::Tensor guarded_copy(const at::Tensor& t, bool at_end, const std::string& name, int64_t offset = 0) {
  const at::Tensor c = t.contiguous();
  const size_t n = static_cast<size_t>(c.numel() + offset);
  char* p = static_cast<char*>(guarded_alloc(n * c.element_size(), c.element_size(), at_end, name));
  at::Tensor g = torch::from_blob(p + offset * c.element_size(), c.sizes(), [p](void*) { guarded_free(p); },
                                  c.options());
  g.copy_(c);
  return g;
}

// An uninitialised tensor in a guarded buffer, every byte 0xFF (the poison).
inline at::Tensor guarded_empty(at::IntArrayRef sizes, const at::TensorOptions& options, bool at_end,
                                const std::string& name) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  const size_t elem = c10::elementSize(c10::typeMetaToScalarType(options.dtype()));
  void* p = guarded_alloc(static_cast<size_t>(n) * elem, elem, at_end, name);
  return torch::from_blob(p, sizes, [](void* q) { guarded_free(q); }, options);
}

// A zero tensor of `sizes` in reserved memory (sparse_alloc): only the pages written take memory.
inline at::Tensor sparse_zeros(at::IntArrayRef sizes, const at::TensorOptions& options, const std::string& name) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  const size_t elem = c10::elementSize(c10::typeMetaToScalarType(options.dtype()));
  void* p = sparse_alloc(static_cast<size_t>(n) * elem, elem, name);
  return torch::from_blob(p, sizes, [](void* q) { guarded_free(q); }, options);
}

// The hint of check_written for the tails of the launches over more than 2^31 elements.
inline const std::string kPast2To31 =
    ". These are the last elements of a launch over more than 2^31 elements: is an index or an offset "
    "computed in 32 bits (an int, or a product of ints), so that it wraps there and the value goes "
    "elsewhere, or the loop never reaches them? Offsets past 2^31 need int64_t";

// Throws when some element of out still holds the poison (no thread wrote it), or shared
// memory's poison (a thread wrote it, from a __shared__ slot no thread had written).
// `hint` is appended to the message for unwritten elements.
inline void check_written(const at::Tensor& out, const std::string& name, const std::string& axes,
                          const std::string& hint = "") {
  long long first = -1, count = 0;
  const long long n = out.numel();
  bool shared = false;
  for (int pass = 0; pass < 2 && count == 0; ++pass) {
    shared = pass == 1;
    switch (out.element_size()) {
      case 8: count = unwritten(static_cast<const uint64_t*>(out.data_ptr()), n, &first, shared); break;
      case 4: count = unwritten(static_cast<const uint32_t*>(out.data_ptr()), n, &first, shared); break;
      default: count = unwritten(static_cast<const uint16_t*>(out.data_ptr()), n, &first, shared); break;
    }
  }
  if (count == 0) return;
  std::string at = "(";
  long long rest = first;
  std::vector<long long> idx(out.dim());
  for (int64_t d = out.dim() - 1; d >= 0; --d) {
    idx[d] = rest % out.size(d);
    rest /= out.size(d);
  }
  for (size_t d = 0; d < idx.size(); ++d) at += (d ? ", " : "") + std::to_string(idx[d]);
  if (shared) {
    throw std::runtime_error("read of unwritten shared memory: " + std::to_string(count) + " of " +
                             std::to_string(n) + " elements of " + name + " hold the judge's fill of __shared__ "
                             "memory (NaN, bytes FE FF), the first at " + axes + " = " + at + "): they were "
                             "computed from a __shared__ slot that no thread had written. Is a slot read that no "
                             "thread writes, or read before the __syncthreads() after its write?");
  }
  // Stored by a thread in the last launch, yet holding the fill: the value stored was computed from the
  // element's own unwritten value (x86-64, where the judge notes each store).
  const char* base = static_cast<const char*>(out.data_ptr());
  for (const emu::Guarded& b : emu::st().buffers) {
    if (base < b.data || base >= b.data + b.nbytes || !out.is_contiguous()) continue;
    const size_t at_element = static_cast<size_t>(base - b.data) / b.elem + static_cast<size_t>(first);
    if (at_element < b.stored.size() && b.stored[at_element]) {
      throw std::runtime_error("output read before it was written: " + std::to_string(count) + " of " +
                               std::to_string(n) + " elements of " + name + " hold the judge's fill (NaN, bytes FF) "
                               "although a thread stored to them, the first at " + axes + " = " + at + "): the value "
                               "stored was computed from the element's own old value. Is it updated (+=) where it "
                               "should be assigned (=)? A new tensor's memory holds garbage on a GPU, not zeros");
    }
  }
  throw std::runtime_error("output never written: " + std::to_string(count) + " of " + std::to_string(n) +
                           " elements of " + name + " hold no value from any thread, the first at " + axes + " = " +
                           at + ")" + hint);
}

// The store pattern into the tensor `name` of the launch that `run` makes, under emu::NoteStores:
// (neighbouring-lane store pairs, those more than 16 bytes apart, the first such pair in words).
template <typename Run>
std::tuple<int64_t, int64_t, std::string> stores_into(const std::string& name, Run&& run) {
  NoteStores noting;
  run();
  for (const auto& note : st().stores) {
    if (note.tensor == name) return {note.pairs, note.apart, note.example};
  }
  return {0, 0, ""};
}

// Chapters 02 and 03: the trilinear forward on N cubes (N * 8 * F past 2^31 elements), all zero
// but the last T = tail_feats.size(0) cubes, in reserved memory; launch(feats, points, out) runs
// with only its first block and its last T blocks emulated (each holds one cube or more, so they
// cover the last T cubes, where a 32-bit offset wraps). Returns out's last T rows.
template <typename Launch>
at::Tensor trilinear_tail(const at::Tensor& tail_feats, const at::Tensor& tail_points, int64_t N, int64_t seed,
                          Launch&& launch) {
  st().rng.seed(static_cast<unsigned>(seed));
  const int64_t T = tail_feats.size(0), F = tail_feats.size(2);
  at::Tensor feats = sparse_zeros({N, 8, F}, tail_feats.options(), "feats");
  at::Tensor points = sparse_zeros({N, 3}, tail_points.options(), "points");
  at::Tensor out = sparse_zeros({N, F}, tail_feats.options(), "out");
  feats.narrow(0, N - T, T).copy_(tail_feats);
  points.narrow(0, N - T, T).copy_(tail_points);
  at::Tensor tail = out.narrow(0, N - T, T);
  memset(tail.data_ptr(), 0xFF, static_cast<size_t>(tail.numel()) * tail.element_size());  // the poison
  {
    SampledLaunch sampled(T);
    launch(feats, points, out);
  }
  check_written(tail, "out's last cubes", "(n - (N - " + std::to_string(T) + "), f)", kPast2To31);
  return tail.clone();
}

// Chapter 04: the backward's points gradient on N cubes (3 * N past 2^31), all zero but the last
// T = tail_feats.size(0) cubes, in reserved memory, the launch sampled as in trilinear_tail: the
// last cubes' grad_points index 3 * n + d passes 2^31, where a 32-bit index wraps. Returns
// grad_points' last T rows.
template <typename Backward>
at::Tensor points_grad_tail(Backward&& backward, const at::Tensor& tail_grad_out, const at::Tensor& tail_feats,
                            const at::Tensor& tail_points, int64_t N, int64_t seed) {
  st().rng.seed(static_cast<unsigned>(seed));
  const int64_t T = tail_feats.size(0), F = tail_feats.size(2);
  at::Tensor grad_out = sparse_zeros({N, F}, tail_grad_out.options(), "grad_out");
  at::Tensor feats = sparse_zeros({N, 8, F}, tail_feats.options(), "feats");
  at::Tensor points = sparse_zeros({N, 3}, tail_points.options(), "points");
  at::Tensor grad_points = sparse_zeros({N, 3}, tail_points.options(), "grad_points");
  grad_out.narrow(0, N - T, T).copy_(tail_grad_out);
  feats.narrow(0, N - T, T).copy_(tail_feats);
  points.narrow(0, N - T, T).copy_(tail_points);
  at::Tensor tail = grad_points.narrow(0, N - T, T);
  memset(tail.data_ptr(), 0xFF, static_cast<size_t>(tail.numel()) * tail.element_size());  // the poison
  {
    SampledLaunch sampled(T);
    at::Tensor no_grad_feats;  // undefined: only the points' gradient
    backward(grad_out, feats, points, no_grad_feats, grad_points);
  }
  check_written(tail, "grad_points' last cubes", "(n - (N - " + std::to_string(T) + "), d)", kPast2To31);
  return tail.clone();
}

// Chapters 04 and 05: backward(grad_out, feats, points, grad_feats, grad_points), their
// trilinear_backward_cuda, on guarded copies. grad_out and feats start grad_out_offset and
// feats_offset elements into their buffers; with feats_for_points_only, feats is passed only when
// the points' gradient is needed (an undefined tensor otherwise, as chapter 05's trilinear.cpp
// does). Each gradient is allocated (poisoned) only when needed; returns those asked for,
// grad_feats then grad_points, each checked for elements no thread wrote.
template <typename Backward>
std::vector<at::Tensor> trilinear_backward(Backward&& backward, const at::Tensor& grad_out, const at::Tensor& feats,
                                           const at::Tensor& points, bool need_feats, bool need_points, bool at_end,
                                           int64_t seed, int64_t grad_out_offset, int64_t feats_offset,
                                           bool feats_for_points_only) {
  st().rng.seed(static_cast<unsigned>(seed));
  const at::Tensor g = guarded_copy(grad_out, at_end, "grad_out", grad_out_offset);
  const at::Tensor f = need_points || !feats_for_points_only ? guarded_copy(feats, at_end, "feats", feats_offset)
                                                             : at::Tensor();
  const at::Tensor p = guarded_copy(points, at_end, "points");
  at::Tensor grad_feats, grad_points;
  if (need_feats) grad_feats = guarded_empty(feats.sizes(), feats.options(), at_end, "grad_feats");
  if (need_points) grad_points = guarded_empty(points.sizes(), points.options(), at_end, "grad_points");
  {
    OneStorePerElement one;  // the design: each gradient element written by exactly one thread, once
    backward(g, f, p, grad_feats, grad_points);
  }
  std::vector<at::Tensor> out;
  if (need_feats) {
    check_written(grad_feats, "grad_feats", "(n, k, f)");
    out.push_back(grad_feats.clone());
  }
  if (need_points) {
    check_written(grad_points, "grad_points", "(n, d)");
    out.push_back(grad_points.clone());
  }
  return out;
}

}  // namespace emu
