// Chapter 04 warm-up: GELU entry points and CPU kernels (elementwise).
#include "gelu.h"

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <atomic>
#include <string>

static void check_gelu_input(const at::Tensor& x, const char* name) {
  // Named one by one: at::isFloatingType would also let the float8 types through.
  const at::ScalarType dtype = x.scalar_type();
  TORCH_CHECK(dtype == at::kDouble || dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16, "gelu: ",
              name, " must be float64, float32, float16 or bfloat16, got ", dtype);
  TORCH_CHECK(x.is_cpu() || x.is_cuda(), "gelu: tensors must be on the CPU or a CUDA GPU, got ", x.device());
}

at::Tensor gelu_forward(const at::Tensor& x_in) {
  check_gelu_input(x_in, "x");
  const at::Tensor x = x_in.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) return out;
  if (x.is_cuda()) {
#ifdef WITH_CUDA
    gelu_forward_cuda(x, out);
#else
    TORCH_CHECK(false, "gelu: this extension was built without CUDA, so it cannot take tensors on ", x.device(),
                "; run ./course doctor to see why");
#endif
  } else {
    gelu_forward_cpu(x, out);
  }
  return out;
}

at::Tensor gelu_backward(const at::Tensor& grad_out_in, const at::Tensor& x_in) {
  check_gelu_input(x_in, "x");
  TORCH_CHECK(grad_out_in.sizes() == x_in.sizes(), "gelu_backward: grad_out must have the shape of x (",
              x_in.sizes(), "), got ", grad_out_in.sizes());
  TORCH_CHECK(grad_out_in.scalar_type() == x_in.scalar_type(), "gelu_backward: grad_out must have the dtype of x (",
              x_in.scalar_type(), "), got ", grad_out_in.scalar_type());
  TORCH_CHECK(grad_out_in.device() == x_in.device(), "gelu_backward: grad_out must be on the device of x (",
              x_in.device(), "), got ", grad_out_in.device());
  const at::Tensor x = x_in.contiguous();
  const at::Tensor grad_out = grad_out_in.contiguous();
  at::Tensor grad_in = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) return grad_in;
  if (x.is_cuda()) {
#ifdef WITH_CUDA
    gelu_backward_cuda(grad_out, x, grad_in);
#else
    TORCH_CHECK(false, "gelu_backward: this extension was built without CUDA, so it cannot take tensors on ",
                x.device(), "; run ./course doctor to see why");
#endif
  } else {
    gelu_backward_cpu(grad_out, x, grad_in);
  }
  return grad_in;
}

// Every type goes through the vectorised loops of gelu_cpu_vec.cpp, for the widest
// instruction set the CPU has (asked once): AVX-512 with AVX512_BF16, else AVX-512,
// else AVX2 + FMA. CPUs with none of them take the plain loop below: one value at a
// time, in opmath_t, rounded once (the vector loops do the same, 8 or 16 at a time).
enum class VecLoops { None, Avx2, Avx512, Avx512Bf16 };  // each can run the ones before it
static const char* const kLoopNames[] = {"plain", "avx2", "avx512", "avx512_bf16"};

static VecLoops widest_loops() {
  static const VecLoops widest = gelu_avx512_bf16::available() ? VecLoops::Avx512Bf16
                                 : gelu_avx512::available()    ? VecLoops::Avx512
                                 : gelu_avx2::available()      ? VecLoops::Avx2
                                                               : VecLoops::None;
  return widest;
}

// gelu_cpu_loops("plain") switches the vector loops off, and "avx2" / "avx512" pick a
// narrower build than the CPU's widest, so that the tests can grade every loop this
// CPU can run.
static std::atomic<int> chosen{-1};  // -1: the widest

static VecLoops vec_loops() {
  const int c = chosen.load(std::memory_order_relaxed);
  return c < 0 ? widest_loops() : static_cast<VecLoops>(c);
}

std::string gelu_cpu_loops(const std::string& choice) {
  if (choice == "auto") {
    chosen.store(-1);
  } else {
    int c = 0;
    while (c < 4 && choice != kLoopNames[c]) {
      ++c;
    }
    TORCH_CHECK(c < 4, "gelu_cpu_loops: \"auto\", \"plain\", \"avx2\", \"avx512\" or \"avx512_bf16\", got \"",
                choice, "\"");
    TORCH_CHECK(c <= static_cast<int>(widest_loops()), "gelu_cpu_loops: this CPU cannot run the \"", choice,
                "\" loops; the widest it can run is \"", kLoopNames[static_cast<int>(widest_loops())], "\"");
    chosen.store(c);
  }
  return kLoopNames[static_cast<int>(vec_loops())];
}

// [begin, end) by a vector loop if this CPU can run one; false if not.
template <typename scalar_t>
static bool forward_vec(const scalar_t* in, scalar_t* out, int64_t begin, int64_t end) {
  switch (vec_loops()) {
    case VecLoops::Avx512Bf16: gelu_avx512_bf16::forward(in, out, begin, end); return true;
    case VecLoops::Avx512: gelu_avx512::forward(in, out, begin, end); return true;
    case VecLoops::Avx2: gelu_avx2::forward(in, out, begin, end); return true;
    default: return false;
  }
}

template <typename scalar_t>
static bool backward_vec(const scalar_t* grad, const scalar_t* in, scalar_t* grad_in, int64_t begin, int64_t end) {
  switch (vec_loops()) {
    case VecLoops::Avx512Bf16: gelu_avx512_bf16::backward(grad, in, grad_in, begin, end); return true;
    case VecLoops::Avx512: gelu_avx512::backward(grad, in, grad_in, begin, end); return true;
    case VecLoops::Avx2: gelu_avx2::backward(grad, in, grad_in, begin, end); return true;
    default: return false;
  }
}

// A large output comes straight from the operating system: its pages are mapped on
// their first write, one fault at a time, and faults in the middle of the vector loop
// cost more than the same faults taken together (APPENDIX_gelu_speed.md, "Fresh pages").
// So where a thread's range is 1 MiB or more and its first page is not mapped yet, Linux
// maps the whole range in one call first. Best effort: elsewhere this does nothing.
template <typename T>
static void map_fresh_pages(T* p, int64_t begin, int64_t end) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(p + begin) + page - 1) & ~(page - 1);
  const uintptr_t last = reinterpret_cast<uintptr_t>(p + end) & ~(page - 1);
  unsigned char mapped = 1;
  if (last >= first + (uintptr_t{1} << 20) && mincore(reinterpret_cast<void*>(first), page, &mapped) == 0 &&
      !(mapped & 1)) {
    madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);  // Linux 5.14+; else EINVAL
  }
#endif
}

void gelu_forward_cpu(const at::Tensor& x, at::Tensor& out) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "gelu_forward_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* in = x.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, x.numel(), 16384, [&](int64_t begin, int64_t end) {
      map_fresh_pages(o, begin, end);
      if (forward_vec(in, o, begin, end)) {
        return;
      }
      for (int64_t i = begin; i < end; ++i) {
        o[i] = static_cast<scalar_t>(gelu_value<opmath_t>(static_cast<opmath_t>(in[i])));
      }
    });
  });
}

void gelu_backward_cpu(const at::Tensor& grad_out, const at::Tensor& x, at::Tensor& grad_in) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "gelu_backward_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* in = x.const_data_ptr<scalar_t>();
    const scalar_t* g = grad_out.const_data_ptr<scalar_t>();
    scalar_t* gi = grad_in.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, x.numel(), 16384, [&](int64_t begin, int64_t end) {
      map_fresh_pages(gi, begin, end);
      if (backward_vec(g, in, gi, begin, end)) {
        return;
      }
      for (int64_t i = begin; i < end; ++i) {
        // The chain rule: dL/dx = dL/dgelu * gelu'(x).
        gi[i] = static_cast<scalar_t>(static_cast<opmath_t>(g[i]) * gelu_derivative<opmath_t>(static_cast<opmath_t>(in[i])));
      }
    });
  });
}
