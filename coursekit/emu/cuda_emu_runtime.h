#pragma once
// The GPU-free judge (cuda_emu.h) for a whole program: the CUDA runtime calls a small
// main() makes (cudaMalloc, cudaMemcpy, cudaMemset, cudaFree, cudaDeviceSynchronize),
// answered on the CPU. coursekit/emulate.py's build_program compiles a .cu file with
// this header first.
//   - cudaMalloc returns a guard-paged buffer (guarded_alloc) that ends where its pages
//     end, poisoned; the judge names it by the pointer's name in the call (d_x for
//     cudaMalloc(&d_x, ...)), so a read one element past it names d_x, the kernel, the
//     block and the thread;
//   - an error in a launch (an access outside every buffer, a barrier error, a deadlock)
//     ends the program with the judge's report on stderr and exit status 99, as
//     compute-sanitizer's --error-exitcode 99 would;
//   - the environment variable COURSE_EMU_SEED picks the threads' order (default 1).
#define COURSE_EMU_PROGRAM 1  // no PyTorch here: a launch on the default stream is right (cuda_emu.h)
#include <exception>
#include <string>

#include "cuda_emu.h"

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};

namespace emu {

template <typename T>
inline cudaError_t device_malloc(T** p, size_t bytes, const char* expr) {
  std::string name(expr);  // "&d_x" or "(void**)&d_x": keep what follows the last '&' or ')'
  const size_t cut = name.find_last_of("&)");
  if (cut != std::string::npos) name = name.substr(cut + 1);
  size_t elem = 1;
  if constexpr (!std::is_void_v<T>) elem = sizeof(T);
  *p = static_cast<T*>(guarded_alloc(bytes, elem, true, name));
  return cudaSuccess;
}

inline void report_and_exit() {
  try {
    if (std::exception_ptr e = std::current_exception()) std::rethrow_exception(e);
    std::fputs("GPU-free judge: the program ended abnormally\n", stderr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "GPU-free judge: %s\n", e.what());
  } catch (...) {
    std::fputs("GPU-free judge: the program ended abnormally\n", stderr);
  }
  std::fflush(stdout);
  _exit(99);
}

inline const bool program_setup = [] {
  const char* seed = std::getenv("COURSE_EMU_SEED");
  st().rng.seed(seed ? static_cast<unsigned>(std::strtoul(seed, nullptr, 10)) : 1u);
  std::set_terminate(report_and_exit);
  return true;
}();

}  // namespace emu

#define cudaMalloc(p, bytes) ::emu::device_malloc((p), (bytes), #p)
inline cudaError_t cudaFree(void* p) {
  ::emu::guarded_free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind) {
  memcpy(dst, src, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* dst, int value, size_t n) {
  memset(dst, value, n);
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
