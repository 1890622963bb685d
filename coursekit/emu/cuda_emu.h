#pragma once
// The GPU-free judge: CUDA's execution model, emulated on the CPU, for grading a
// learner's kernel on a machine without a GPU (coursekit/emulate.py says how it is
// built and used).
//
// What it does, so that the mistakes a GPU would punish are punished here too:
//   - a kernel launch runs every block of the grid, one after the other; the threads
//     of a block are fibers (ucontext) that take turns, each running until it
//     reaches a barrier (__syncthreads, __syncwarp), a warp shuffle or vote, or its
//     end. Between two such points the threads run in a shuffled order, so a
//     missing barrier or a race on shared memory gives wrong results;
//   - shuffles and votes exchange values between the lanes of a warp as the
//     hardware does (width, out-of-range lanes keep their own value);
//   - launch configurations are checked as the driver checks them (block size,
//     grid limits), and a bad one is the error a GPU would report;
//   - a barrier must be reached by every thread of the block, at the same
//     __syncthreads(): a thread that ends without it, or waits at another one, is
//     an error naming both threads and lines (compute-sanitizer's synccheck on a GPU);
//   - (x86-64) a __shared__ element that two threads of a block touch between two barriers,
//     one of them writing (a write then a read, a read then a write, or two writes of
//     different values), is an error naming both threads, the variable, the element and the
//     lines (compute-sanitizer's racecheck on a GPU), even when this run's order of the threads
//     gave the right values. Threads of one warp are ordered by a warp operation too
//     (__syncwarp, a shuffle or vote). Every __shared__ page is inaccessible while a block runs,
//     and each access faults once (the first blocks of a launch, kRaceAccesses accesses; the
//     others run unwatched);
//   - each __shared__ variable is a guard-paged buffer of its own (emulate.py rewrites its
//     declaration), so an index past its end is an error naming it; it starts each block
//     poisoned (bytes FE FF repeated), so a read of a slot no thread wrote gives NaN (or
//     -2, -65538 as an integer), as garbage would, instead of the zeros of a fresh static
//     variable; an output computed from such a slot is reported as such (check_written);
//   - tensors the judge hands to a kernel live in guard-paged buffers (guarded_alloc):
//     a read or write past either end stops being silent and names the kernel, the
//     block, the thread and the offset. Outputs start poisoned (every byte 0xFF), so
//     an element no thread wrote is found;
//   - (x86-64) during a launch every tensor's pages are read-only: each plain store
//     faults once, the judge notes the thread that wrote the element and lets the store
//     through. An element written (not by atomics) by threads of two blocks, or by two threads
//     of a block with different values, is an error naming both: a loop whose step is too
//     short, which a GPU hides (right values, more work) and only the time of a large case
//     shows, or a race. The same value from threads of one block (a warp's lanes storing its
//     sum) passes, as it works on a GPU, except under OneStorePerElement (for kernels whose
//     design stores each element once: there a loop stepping by too little repeats work);
//   - a tensor of more than 2^31 elements can be reserved without being filled (sparse_alloc),
//     and a launch sampled (SampledLaunch: its first block and its last ones), so that the
//     blocks where a 32-bit offset wraps run on a laptop;
//   - a launch must be on PyTorch's current stream (current_stream), and where a test asks
//     (NoteStores) the judge says how often neighbouring lanes of a warp store far apart;
//   - a load or store of a 16- or 8-byte type (a pack, uint4, float2) at an address off its
//     alignment stops the launch, as "misaligned address" stops a GPU's: the judge's build
//     traps on misaligned accesses (-fsanitize=alignment, emulate.py), SIGILL here.
// What it does not: speed, caches, the real memory model's subtleties.
// A GPU run adds those. Atomics are plain read-modify-writes (threads take turns
// only at barriers and shuffles, so they cannot interleave).
#include <dlfcn.h>
#include <execinfo.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__ __restrict
#define __align__(n) alignas(n)

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

typedef void* cudaStream_t;
typedef int cudaError_t;
constexpr cudaError_t cudaSuccess = 0;
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char* cudaGetErrorString(cudaError_t) { return "no error"; }
// Stream capture (CUDA graphs): the emulator runs every launch at once and captures nothing.
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2
};
inline cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* status) {
  *status = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
// The judge's GPU has one SM: a launch sized to fill the GPU (1024 threads an SM) takes its
// small-tensor choices on the tests' smallest shapes and its usual ones on the others.
// COURSE_EMU_SMS=n makes it n SMs; 0, a GPU whose count cannot be read (the call fails), on
// which every launch keeps its usual work per thread.
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  const char* env = std::getenv("COURSE_EMU_SMS");
  const int sms = env != nullptr ? std::atoi(env) : 1;
  *value = 0;
  if (attr != cudaDevAttrMultiProcessorCount || sms < 1) {
    return 1;  // cudaErrorInvalidValue
  }
  *value = sms;
  return cudaSuccess;
}
constexpr int warpSize = 32;
// The chapter's `__CUDA_ARCH__` tests read this (coursekit/emulate.py renames them): the judge
// takes the code paths of a GPU without cp.async (compute capability 7.5).
#define COURSE_EMU_CUDA_ARCH 750

namespace emu {

// The stable ABI's device guard, on the CPU: nothing to switch.
struct DeviceGuard {
  explicit DeviceGuard(int32_t) {}
};

struct Fiber {
  ucontext_t ctx;     // its first start only
  jmp_buf jb;         // where it resumes: switches are _setjmp/_longjmp, no system call
  bool started = false;
  char* stack = nullptr;
  uint3 tid{0, 0, 0};
  int linear = 0;
  bool done = false;
  int waiting = 0;  // 0 runnable, 1 at __syncthreads, 2 at a warp operation
  int line = 0;     // the line of the __syncthreads() it waits at
  // a warp operation: what this lane gives, where it reads, what it gets
  uint64_t give = 0, get = 0;
  int src = 0, op = 0;
  unsigned mask = 0xffffffffu;  // the lanes the warp operation names
};

struct Fault {
  bool set = false;
  std::string what;
  std::string kind;  // the report's label, when not an out-of-bounds access ("a race: ")
};

// An access to a __shared__ element (State::race): the thread of the block (linear id, -1 none),
// the block's barrier epoch and its warp's epoch then, and the instruction's address (for its line).
struct Access {
  int thread = -1;
  uint32_t epoch = 0, warp_epoch = 0;
  uintptr_t pc = 0;
};
struct SharedSlot {
  Access write, read[2];  // the last write, the last two readers (distinct threads)
};

struct Guarded {
  char* map;
  size_t map_len;
  char* data;
  size_t nbytes, elem;
  std::string name;
  bool shared = false;              // a __shared__ array (not watched: its threads share it)
  bool sparse = false;              // reserved, not filled (sparse_alloc): not watched either
  std::vector<long long> owner;     // during a launch: the thread that wrote each element (-1: none)
  std::vector<bool> stored;         // after a launch: the elements some thread stored (x86-64)
  std::vector<SharedSlot> slots;    // a __shared__ array in a watched block: its elements' accesses
  std::vector<size_t> dims;         // a __shared__ array's extents, for its elements' names ([4][0])
};

struct State {
  dim3 grid, block;
  uint3 bidx{0, 0, 0};
  std::vector<Fiber> fibers;  // grows to the largest block seen; a block uses the first n
  int n = 0;
  Fiber* cur = nullptr;
  ucontext_t sched;
  jmp_buf sched_jb;
  const std::function<void()>* body = nullptr;
  std::string kernel;
  std::mt19937 rng{12345};
  std::vector<Guarded> buffers;
  Fault fault;
  bool handler = false;
  struct sigaction previous[4];  // SIGSEGV, SIGBUS, SIGFPE, SIGILL as they were (Python's faulthandler, say)
  sigjmp_buf escape;  // a fault outside every guarded buffer ends the launch here
  bool armed = false;
  std::vector<std::pair<void*, size_t>> shared;  // the __shared__ variables made (shared_alloc)
  // Ownership (x86-64): during a launch every tensor's pages are read-only; a write faults,
  // on_segv notes which thread wrote the element, opens the page and sets the trap flag, and
  // after that one instruction on_trap closes the page again.
  bool watching = false;
  int in_atomic = 0;           // inside an atomic operation: not a plain store
  std::vector<char*> reopen;   // pages to close again after the current instruction
  struct Pending {             // a watched store in flight: its element, its previous owner and value
    Guarded* buffer;
    size_t index;
    long long previous;
    uint64_t before;
  };
  std::vector<Pending> pending;
  struct sigaction previous_trap;
  // A sampled launch (SampledLaunch) runs its first block and its last `sampled` blocks (> 0),
  // or (sampled_z >= 0) its first block and every block of two z slices: the last one, and the
  // one a grid-stride loop over z gives item sampled_z (sampled_z % gridDim.z).
  long long sampled = 0;
  long long sampled_z = -1;
  // Store patterns (NoteStores, x86-64): at a launch's end, for each tensor written, how often two
  // neighbouring lanes of a warp (linear thread ids t, t + 1) wrote their k-th elements more than
  // 16 bytes apart, i.e. not into one contiguous run (uncoalesced).
  bool note_stores = false;
  bool one_store = false;  // OneStorePerElement: a second store of an element, even of the same value, is an error
  struct StoreNote {
    std::string tensor;
    long long pairs = 0, apart = 0;
    std::string example;  // the first such pair, in words
  };
  std::vector<StoreNote> stores;
  // Shared-memory hazards (x86-64): while `race` (a block of the launch's first kRaceAccesses
  // accesses), every __shared__ page is inaccessible; an access faults, on_segv notes it and opens
  // the page for that one instruction, and on_trap judges it (shared_access) and closes the page.
  // epoch counts the block's barriers, warp_epoch[w] warp w's warp operations: two accesses are
  // ordered when a barrier lies between them, or a warp operation of their warp.
  bool race = false;
  long long race_left = 0;
  uint32_t epoch = 0;
  std::vector<uint32_t> warp_epoch;
  struct SharedPending {
    size_t buffer, index;
    bool write;
    uint64_t before;
    uintptr_t pc;
  };
  std::vector<SharedPending> shared_pending;
  std::vector<char*> reshut;  // __shared__ pages to close again after the current instruction
  uintptr_t race_pc[2] = {0, 0};  // a hazard's two instructions, for their lines (with_race_lines)
};

inline State& st() {
  static State s;
  return s;
}

constexpr size_t kStack = 256 * 1024;

// A thread of the launch as one number (block, then thread, in linear order), and back.
inline long long thread_number() {
  const State& s = st();
  const long long block = (static_cast<long long>(s.bidx.z) * s.grid.y + s.bidx.y) * s.grid.x + s.bidx.x;
  return block * s.n + s.cur->linear;
}
inline std::string thread_text(long long number) {
  const State& s = st();
  const long long block = number / s.n, t = number % s.n;
  auto three = [](long long i, long long x, long long y) {
    return "(" + std::to_string(i % x) + ", " + std::to_string(i / x % y) + ", " + std::to_string(i / (x * y)) + ")";
  };
  return "thread " + three(t, s.block.x, s.block.y) + " of block " + three(block, s.grid.x, s.grid.y);
}

inline std::string where() {
  const State& s = st();
  std::string w = "kernel " + s.kernel + ", block (" + std::to_string(s.bidx.x) + ", " + std::to_string(s.bidx.y) +
                  ", " + std::to_string(s.bidx.z) + ")";
  if (s.cur) {
    w += ", thread (" + std::to_string(s.cur->tid.x) + ", " + std::to_string(s.cur->tid.y) + ", " +
         std::to_string(s.cur->tid.z) + ")";
  }
  return w;
}

// Shared-memory hazards (State::race): the accesses a launch watches, in its first blocks (a block
// is watched to its end once started). Each costs two signals and two mprotect calls: the first
// few blocks of a reduction, one or two of a tiled kernel, bound what a launch spends on them.
constexpr long long kRaceAccesses = 2048;

// Element i of buffer b as the code indexes it: a __shared__ array's "name[4][0]" (its extents
// known, shared_alloc_of), else "name element i".
inline std::string element_text(const Guarded& b, size_t i) {
  if (b.dims.empty()) return b.name + (b.nbytes / b.elem > 1 ? " element " + std::to_string(i) : "");
  std::string index;
  for (size_t k = b.dims.size(); k-- > 0;) {
    index = "[" + std::to_string(i % b.dims[k]) + "]" + index;
    i /= b.dims[k];
  }
  return b.name + index;
}

// Thread `linear` of the current block, as (x, y, z).
inline std::string block_thread_text(int linear) {
  const State& s = st();
  return "(" + std::to_string(linear % s.block.x) + ", " + std::to_string(linear / s.block.x % s.block.y) + ", " +
         std::to_string(linear / (s.block.x * s.block.y)) + ")";
}

// Does access a come before one by thread t now, whatever the order the threads run in? When it is
// t's own, or a barrier lies between, or (t's warp) a warp operation.
inline bool ordered(const Access& a, int t) {
  const State& s = st();
  if (a.thread < 0 || a.thread == t || a.epoch != s.epoch) return true;
  return a.thread / 32 == t / 32 && a.warp_epoch != s.warp_epoch[t / 32];
}

// An access by the current thread to element i of __shared__ buffer `buffer`, its instruction just
// done: a write when `write` (changed: it left another value than it found), else a read. With an
// earlier access of another thread that nothing orders (a write, and a read or a write of another
// value), the launch ends in an error: on a GPU their order is luck.
inline void shared_access(size_t buffer, size_t i, bool write, bool changed, uintptr_t pc) {
  State& s = st();
  Guarded& b = s.buffers[buffer];
  if (s.in_atomic || !s.cur || i >= b.slots.size()) return;
  --s.race_left;
  SharedSlot& slot = b.slots[i];
  const int t = s.cur->linear;
  const Access me{t, s.epoch, s.warp_epoch[t / 32], pc};
  auto hazard = [&](const Access& other, const char* did, const char* what) {
    if (s.fault.set) return;
    const bool warp = other.thread / 32 == t / 32;
    const std::string barrier = warp ? "__syncwarp()" : "__syncthreads()";
    s.fault.set = true;
    s.fault.kind = "a race on shared memory: ";
    s.race_pc[0] = other.pc;
    s.race_pc[1] = pc;
    s.fault.what = "thread " + block_thread_text(t) + " " + what + " " + element_text(b, i) + ", which thread " +
                   block_thread_text(other.thread) + " " + did + " " +
                   (s.epoch == 0 ? std::string("since the block's start")
                                 : "since the __syncthreads() on line " + std::to_string(s.cur->line)) +
                   ", in kernel " + s.kernel + ", block (" + std::to_string(s.bidx.x) + ", " +
                   std::to_string(s.bidx.y) + ", " + std::to_string(s.bidx.z) + ")\x01. Nothing orders the two: " +
                   (warp ? "they are lanes of one warp, which need not run in step (since Volta), and no "
                           "__syncwarp() lies between"
                         : "they are in different warps, which a GPU runs at the same time, and no "
                           "__syncthreads() lies between") +
                   ", so which comes first is luck (this run's order may have given the right values). " +
                   (did[0] == 'w' && what[0] == 'w'
                        ? std::string("Which value stays depends on it: do the two compute the same index? Each "
                                      "writer needs a slot of its own.")
                        : "A " + barrier + " between the two orders them (for a slot written again in a loop, one "
                          "at the end of each step too), or each writer gets a slot of its own (one per row, per "
                          "warp).");
  };
  if (write) {
    if (changed && !ordered(slot.write, t)) {
      hazard(slot.write, "wrote", "writes");
    }
    for (const Access& r : slot.read) {
      if (!ordered(r, t)) {
        hazard(r, "read", "writes");
      }
    }
    slot.write = me;
  } else {
    if (!ordered(slot.write, t)) {
      hazard(slot.write, "wrote", "reads");
    }
    if (slot.read[0].thread != t) slot.read[1] = slot.read[0];
    slot.read[0] = me;
  }
}

// "file:line" of an instruction of the judge's build (-g), or "" (addr2line missing, say).
inline std::string source_line(uintptr_t pc) {
  Dl_info info;
  if (pc == 0 || !dladdr(reinterpret_cast<void*>(pc), &info) || !info.dli_fname) return "";
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "addr2line -e '%s' 0x%lx 2>/dev/null", info.dli_fname,
           static_cast<unsigned long>(pc - reinterpret_cast<uintptr_t>(info.dli_fbase)));
  FILE* f = popen(cmd, "r");
  if (!f) return "";
  char line[4096] = {0};
  const bool got = fgets(line, sizeof line, f) != nullptr;
  pclose(f);
  std::string where = got ? std::string(line) : "";
  while (!where.empty() && (where.back() == '\n' || where.back() == ' ')) where.pop_back();
  const size_t paren = where.find(" (");
  if (paren != std::string::npos) where.resize(paren);  // "file:line (discriminator 1)"
  if (where.empty() || where[0] == '?' || where.find(":?") != std::string::npos) return "";
  const size_t slash = where.rfind('/');
  if (slash != std::string::npos) where = where.substr(slash + 1);
  // emulate.py compiles a kernel's X.cu as X.cpp (its lines unchanged up to its #line directive)
  const size_t cpp = where.find(".cpp:");
  if (cpp != std::string::npos) where.replace(cpp, 4, ".cu");
  return where;
}

// A fault's text with the lines of a shared-memory hazard's two accesses where shared_access left
// their place (\x01): ", the earlier access at FILE:LINE, the later at FILE:LINE", or nothing.
inline std::string with_race_lines(std::string what) {
  State& s = st();
  const size_t at = what.find('\x01');
  if (at == std::string::npos) return what;
  const std::string a = source_line(s.race_pc[0]), b = source_line(s.race_pc[1]);
  s.race_pc[0] = s.race_pc[1] = 0;
  return what.replace(at, 1, a.empty() || b.empty() ? "" : ", the earlier access at " + a + ", the later at " + b);
}

// SIGSEGV on a guard page: record what and where (the first fault only), open the page
// and return, so the instruction completes and the launch can end cleanly; the launch
// then reports the fault as an error.
inline void on_segv(int sig, siginfo_t* info, void* uc) {
  State& s = st();
  char* a = static_cast<char*>(info->si_addr);
  const long page = sysconf(_SC_PAGESIZE);
  for (Guarded& b : s.buffers) {
    if (a >= b.map && a < b.map + b.map_len) {
      bool write = false;
#if defined(__x86_64__)
      write = (static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
      if (s.race && b.shared && s.cur && a >= b.map + page && a < b.map + b.map_len - page) {
        // a __shared__ page of a watched block: note the access (inside the variable), let this one
        // instruction through, close the page after it (judged in on_trap, which sees the value)
        char* p = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(a) & ~static_cast<uintptr_t>(page - 1));
        mprotect(p, page, PROT_READ | PROT_WRITE);
        s.reshut.push_back(p);
        if (a >= b.data && a < b.data + b.nbytes) {
          const size_t i = static_cast<size_t>(a - b.data) / b.elem;
          State::SharedPending w{static_cast<size_t>(&b - s.buffers.data()), i, write, 0,
                                 static_cast<uintptr_t>(static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RIP])};
          memcpy(&w.before, b.data + i * b.elem, std::min<size_t>(b.elem, 8));  // (an element within one page)
          s.shared_pending.push_back(w);
        }
        static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_EFL] |= 0x100;  // trap after this instruction
        return;
      }
      if (s.watching && write && !b.shared && s.cur && a >= b.data && a < b.data + b.nbytes) {
        // a write inside the tensor: note its thread, let this one instruction write, close the page after it
        // (judged after it, in on_trap, which sees the value written)
        const size_t i = static_cast<size_t>(a - b.data) / b.elem;
        if (!s.in_atomic && i < b.owner.size()) {
          State::Pending w{&b, i, b.owner[i], 0};
          memcpy(&w.before, b.data + i * b.elem, std::min<size_t>(b.elem, 8));
          s.pending.push_back(w);
          b.owner[i] = thread_number();
        }
        char* p = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(a) & ~static_cast<uintptr_t>(page - 1));
        mprotect(p, page, PROT_READ | PROT_WRITE);
        s.reopen.push_back(p);
        static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_EFL] |= 0x100;  // trap after this instruction
        return;
      }
#endif
      if (!s.fault.set) {
        const long long off = static_cast<long long>((a - b.data) / static_cast<long long>(b.elem));
        const long long n = static_cast<long long>(b.nbytes / b.elem);
        s.fault.set = true;
        s.fault.what = std::string(write ? "a write" : "a read") + " outside " + b.name + ": element " +
                       std::to_string(off) + (off < 0 ? " (before its start)" : " (past its end: it has " +
                       std::to_string(n) + ")") + ", in " + where();
      }
      char* p = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(a) & ~static_cast<uintptr_t>(page - 1));
      mprotect(p, page, PROT_READ | PROT_WRITE);
      return;
    }
  }
  if (s.armed && s.cur) {  // a wild address, a division by zero or a misaligned access inside a kernel: an error
    s.fault.set = true;
    s.fault.what = sig == SIGFPE ? "an integer division by zero (a GPU gives garbage, no error), in " + where()
                   : sig == SIGILL
                       ? "a misaligned access: a load or store of a 16- or 8-byte type (a pack, uint4, float2...) at "
                         "an address that is not a multiple of its alignment (a GPU stops the kernel: \"misaligned "
                         "address\"; is the pointer's alignment checked before the vector path is taken?), in " +
                             where()
                       : "an access at an address outside every tensor (a wild index: a value read past "
                         "the end of a table, computed from garbage, or computed in 32 bits and wrapped past 2^31?), in " + where();
    siglongjmp(s.escape, 1);
  }
  // Not ours: say where it happened (the native stack, which Python's faulthandler does not
  // show), hand the signal back to whoever had it (faulthandler prints the Python stack, then the
  // process crashes as usual); the instruction runs again and faults again.
  char line[160];
  const int len = snprintf(line, sizeof line, "emulator: signal %d at address %p, %s; native stack:\n", sig,
                           info->si_addr, s.cur ? "in a kernel's thread" : "outside every kernel's thread");
  if (len > 0) (void)!write(2, line, static_cast<size_t>(len));
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
  sigaction(sig, &s.previous[sig == SIGSEGV ? 0 : sig == SIGBUS ? 1 : sig == SIGFPE ? 2 : 3], nullptr);
}

// The instruction after a watched write: close the pages it opened (see State::watching).
inline void on_trap(int sig, siginfo_t*, void* uc) {
  State& s = st();
  if (s.reopen.empty() && s.reshut.empty()) {  // not ours (a debugger's breakpoint?): as if we were not here
    sigaction(SIGTRAP, &s.previous_trap, nullptr);
    raise(sig);
    return;
  }
  // The element written by another thread before: an error if that thread is in another block
  // (two blocks do the same element: a loop's step too short, or a wrong index), or if it wrote
  // another value (a race in the block: which value stays depends on the order). The same value
  // from the same block (every lane of a warp storing the warp's sum) is what a GPU does too.
  // Under OneStorePerElement, a thread storing its own element again is an error too.
  for (const State::Pending& w : s.pending) {
    const long long me = w.buffer->owner[w.index];
    if (w.previous < 0 || s.fault.set) continue;
    if (w.previous == me) {
      if (s.one_store) {
        s.fault.set = true;
        s.fault.kind = "a repeated store: ";
        s.fault.what = thread_text(me) + " writes " + w.buffer->name + " element " + std::to_string(w.index) +
                       " twice, in kernel " + s.kernel +
                       " (in this kernel's design each element is stored once, when its sum is complete: is the "
                       "store inside a loop, over the corners say, that it should follow? Right values, repeated "
                       "stores)";
      }
      continue;
    }
    uint64_t after = 0;
    memcpy(&after, w.buffer->data + w.index * w.buffer->elem, std::min<size_t>(w.buffer->elem, 8));
    const bool same_block = w.previous / s.n == me / s.n, same_value = after == w.before;
    if (same_block && same_value && !s.one_store) continue;
    s.fault.set = true;
    s.fault.kind = "a race: ";
    s.fault.what = "two threads write " + w.buffer->name + " element " + std::to_string(w.index) + ": " +
                   thread_text(w.previous) + ", then " + thread_text(me) + ", in kernel " + s.kernel +
                   (!same_block ? " (an element has one owner: does a loop step by blockDim where it should step "
                                  "by gridDim * blockDim, or do two threads compute the same index?)"
                    : !same_value ? " (another value: a race, the value that stays depends on their order; one thread "
                                    "per element, or combine the values first)"
                                  : " (the same value again: in this kernel's design each element is stored once, by "
                                    "one thread; does a loop step by less than the threads that share it, e.g. 32 "
                                    "where the block has blockDim.x threads along it, or leave out a thread index, "
                                    "threadIdx.y say? Right values, repeated work)");
  }
  s.pending.clear();
  for (const State::SharedPending& w : s.shared_pending) {
    const Guarded& b = s.buffers[w.buffer];
    uint64_t after = 0;
    memcpy(&after, b.data + w.index * b.elem, std::min<size_t>(b.elem, 8));
    shared_access(w.buffer, w.index, w.write || after != w.before, after != w.before, w.pc);
  }
  s.shared_pending.clear();
  const long page = sysconf(_SC_PAGESIZE);
  for (char* p : s.reopen) mprotect(p, page, s.watching ? PROT_READ : PROT_READ | PROT_WRITE);
  s.reopen.clear();
  for (char* p : s.reshut) mprotect(p, page, s.race ? PROT_NONE : PROT_READ | PROT_WRITE);
  s.reshut.clear();
#if defined(__x86_64__)
  static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_EFL] &= ~0x100;
#endif
}

// After a launch under NoteStores: the store pattern of each watched tensor (State::stores).
inline void note_stores() {
  State& s = st();
  s.stores.clear();
  for (const Guarded& b : s.buffers) {
    if (b.owner.empty()) continue;
    std::vector<std::pair<long long, size_t>> by;  // (thread, element), by thread, then element
    for (size_t i = 0; i < b.owner.size(); ++i) {
      if (b.owner[i] >= 0) by.emplace_back(b.owner[i], i);
    }
    if (by.empty()) continue;
    std::sort(by.begin(), by.end());
    State::StoreNote note{b.name};
    for (size_t a = 0, next = 0; a < by.size(); a = next) {
      const long long t = by[a].first;
      while (next < by.size() && by[next].first == t) ++next;
      const long long lane = t % s.n;
      if ((lane + 1) % 32 == 0 || lane + 1 >= s.n) continue;  // t + 1 is in another warp
      size_t c = next, c_end = next;
      while (c_end < by.size() && by[c_end].first == t + 1) ++c_end;
      if (c == c_end || c_end - c != next - a) continue;  // the neighbour wrote none, or another count
      for (size_t k = 0; k < next - a; ++k) {
        ++note.pairs;
        const long long d = static_cast<long long>(by[c + k].second) - static_cast<long long>(by[a + k].second);
        if (std::llabs(d) * static_cast<long long>(b.elem) > 16 && note.apart++ == 0) {
          note.example = thread_text(t) + " writes element " + std::to_string(by[a + k].second) + ", its neighbour " +
                         thread_text(t + 1) + " element " + std::to_string(by[c + k].second);
        }
      }
    }
    s.stores.push_back(note);
  }
}

// While one lives, an element of a watched tensor stored by two threads is an error even when they
// are of one block and store the same value: for kernels whose design stores each element once.
struct OneStorePerElement {
  OneStorePerElement() { st().one_store = true; }
  ~OneStorePerElement() { st().one_store = false; }
};

struct NoteStores {
  NoteStores() {
    st().note_stores = true;
    st().stores.clear();
  }
  ~NoteStores() { st().note_stores = false; }
};

// A launch's start and end: every tensor's pages read-only (writes noted, see on_segv), and back.
inline void watch(bool on) {
#if defined(__x86_64__)
  State& s = st();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (Guarded& b : s.buffers) {
    if (b.shared || b.sparse) continue;
    if (on) {
      b.owner.assign(b.nbytes / b.elem, -1);
      b.stored.clear();
    } else {
      b.stored.assign(b.owner.size(), false);
      for (size_t i = 0; i < b.owner.size(); ++i) b.stored[i] = b.owner[i] >= 0;
      std::vector<long long>().swap(b.owner);
    }
    mprotect(b.map + page, b.map_len - 2 * page, on ? PROT_READ : PROT_READ | PROT_WRITE);
  }
  s.watching = on;
#else
  (void)on;
#endif
}

// A watched block's start and end (State::race): every __shared__ page closed, its elements'
// accesses forgotten; and open again.
inline void watch_shared(bool on) {
#if defined(__x86_64__)
  State& s = st();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (Guarded& b : s.buffers) {
    if (!b.shared) continue;
    if (on) b.slots.assign(b.nbytes / b.elem, SharedSlot{});
    mprotect(b.map + page, b.map_len - 2 * page, on ? PROT_NONE : PROT_READ | PROT_WRITE);
  }
  s.race = on;
#else
  (void)on;
#endif
}

inline void install_handler() {
  State& s = st();
  if (s.handler) return;
  void* warm[1];
  backtrace(warm, 1);  // loads the unwinder now, not first inside a signal handler
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(SIGSEGV, &sa, &s.previous[0]);
  sigaction(SIGBUS, &sa, &s.previous[1]);
  sigaction(SIGFPE, &sa, &s.previous[2]);
  sigaction(SIGILL, &sa, &s.previous[3]);  // -fsanitize=alignment's trap (coursekit/emulate.py)
  struct sigaction trap;
  memset(&trap, 0, sizeof(trap));
  trap.sa_sigaction = on_trap;
  trap.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(SIGTRAP, &trap, &s.previous_trap);
  s.handler = true;
}

// nbytes in pages of their own, between two inaccessible pages; at_end: the data ends
// where the accessible pages end (a read one element past it faults), else it starts
// where they start (a read one element before it faults). The bytes are poisoned (0xFF).
inline void* guarded_alloc(size_t nbytes, size_t elem, bool at_end, const std::string& name) {
  install_handler();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t body = (std::max<size_t>(nbytes, 1) + page - 1) / page * page;
  const size_t len = body + 2 * page;
  void* m = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::runtime_error("emulator: out of memory");
  char* map = static_cast<char*>(m);
  mprotect(map + page, body, PROT_READ | PROT_WRITE);
  char* data = at_end ? map + page + body - nbytes : map + page;
  memset(map + page, 0xFF, body);
  st().buffers.push_back({map, len, data, nbytes, elem, name, false, {}});
  return data;
}

// nbytes reserved, not filled: pages a thread never touches take no memory, so a tensor of more
// than 2^31 elements costs what its used part holds. Zeros (not poisoned); guarded like the others
// (its data ends where its pages end, a guard page on either side); not watched (no owner table).
inline void* sparse_alloc(size_t nbytes, size_t elem, const std::string& name) {
  install_handler();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t body = (std::max<size_t>(nbytes, 1) + page - 1) / page * page;
  const size_t len = body + 2 * page;
  void* m = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) throw std::runtime_error("emulator: cannot reserve " + std::to_string(len >> 20) + " MiB");
  char* map = static_cast<char*>(m);
  if (mprotect(map + page, body, PROT_READ | PROT_WRITE) != 0) {
    munmap(m, len);
    throw std::runtime_error("emulator: cannot reserve " + std::to_string(len >> 20) + " MiB");
  }
  char* data = map + page + body - nbytes;
  st().buffers.push_back({map, len, data, nbytes, elem, name, false, {}});
  st().buffers.back().sparse = true;
  return data;
}

// While one lives, a launch runs its first block and its last `blocks` blocks only (z_item >= 0:
// every block of the last z slice and of the slice that takes item z_item, the last plane, in a
// grid-stride loop over z): a grid over a tensor of more than 2^31 elements, whose last blocks are
// where 32-bit offsets wrap.
struct SampledLaunch {
  explicit SampledLaunch(long long blocks, long long z_item = -1) {
    st().sampled = blocks;
    st().sampled_z = z_item;
  }
  ~SampledLaunch() {
    st().sampled = 0;
    st().sampled_z = -1;
  }
};

inline void guarded_free(void* data) {
  auto& v = st().buffers;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it->data == data) {
      munmap(it->map, it->map_len);
      v.erase(it);
      return;
    }
  }
}

inline Fiber& self() { return *st().cur; }

inline void yield() {
  State& s = st();
  if (!_setjmp(s.cur->jb)) _longjmp(s.sched_jb, 1);
}

// A fiber runs threads one after the other: when its thread is done it waits, and the
// scheduler hands it the next (the same stack, no new context).
inline void trampoline() {
  for (;;) {
    State& s = st();
    (*s.body)();
    s.cur->done = true;
    yield();
  }
}

// Run fiber f until it yields or its thread ends.
inline void resume(Fiber& f) {
  State& s = st();
  s.cur = &f;
  if (!_setjmp(s.sched_jb)) {
    if (!f.started) {
      f.started = true;
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = f.stack;
      f.ctx.uc_stack.ss_size = kStack;
      f.ctx.uc_link = nullptr;
      makecontext(&f.ctx, trampoline, 0);
      swapcontext(&s.sched, &f.ctx);  // never returns here: the fiber comes back by _longjmp
    } else {
      _longjmp(f.jb, 1);
    }
  }
  s.cur = nullptr;
}

inline void syncthreads(int line) {
  self().waiting = 1;
  self().line = line;
  yield();
}

// Shared memory holds no value until a thread of the block writes one: poison it at each
// block's start, with bytes FE FF repeated from an even address: NaN in every floating type
// (0xFFFE, 0xFFFEFFFE, 0xFFFEFFFEFFFEFFFE), and another NaN than the outputs' poison (every
// byte 0xFF), so that an output computed from an unwritten slot (x86 keeps a NaN's bits through
// arithmetic) is told apart from one that no thread wrote.
inline void poison_bytes(void* where, size_t n) {
  static unsigned char pattern[4097];  // FE FF FE FF ..., one byte more: a copy may start at the FF
  static const bool ready = [] {
    for (size_t i = 0; i < sizeof pattern; ++i) pattern[i] = i % 2 ? 0xFF : 0xFE;
    return true;
  }();
  (void)ready;
  unsigned char* p = static_cast<unsigned char*>(where);
  const size_t odd = reinterpret_cast<uintptr_t>(p) & 1;  // an even address starts a pair
  for (size_t done = 0; done < n; done += 4096) {
    memcpy(p + done, pattern + odd, std::min<size_t>(4096, n - done));
  }
}
inline void poison_shared() {
  for (const auto& v : st().shared) {
    poison_bytes(v.first, v.second);
  }
}
// A __shared__ variable (emulate.py turns `__shared__ T name[...];` into a static reference to
// one): a guard-paged buffer, so that an index past its end stops the launch with the variable's
// name instead of writing over its neighbours, registered to be poisoned at each block's start.
// It is made once per variable (per instantiation of a template kernel) and kept.
inline void* shared_alloc(size_t n, size_t align, size_t elem, const char* name) {
  const size_t padded = (n + align - 1) / align * align;  // its end on the page's end, its start aligned
  void* p = guarded_alloc(padded, elem, true, std::string("__shared__ ") + name);
  st().buffers.back().shared = true;
  st().shared.emplace_back(p, padded);
  poison_bytes(p, padded);  // made by the first thread that reaches it, after its block's start: poisoned now
#if defined(__x86_64__)
  if (st().race) {  // and watched from now on, as its block's others are
    Guarded& b = st().buffers.back();
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    b.slots.assign(b.nbytes / b.elem, SharedSlot{});
    mprotect(b.map + page, b.map_len - 2 * page, PROT_NONE);
  }
#endif
  return p;
}

// The extents of array type A, outermost first ({} for a scalar).
template <typename A>
inline void array_extents(std::vector<size_t>& dims) {
  if constexpr (std::rank_v<A> > 0) {
    dims.push_back(std::extent_v<A>);
    array_extents<std::remove_extent_t<A>>(dims);
  }
}

// shared_alloc for a __shared__ variable of type A (emulate.py's rewrite of its declaration),
// its extents kept for the judge's messages.
template <typename A>
inline void* shared_alloc_of(const char* name) {
  void* p = shared_alloc(sizeof(A), alignof(A), sizeof(std::remove_all_extents_t<A>), name);
  array_extents<A>(st().buffers.back().dims);
  return p;
}

inline std::string tid_text(const Fiber& f) {
  return "(" + std::to_string(f.tid.x) + ", " + std::to_string(f.tid.y) + ", " + std::to_string(f.tid.z) + ")";
}

// Warp operations: op 1 shuffle, 2 ballot, 3 syncwarp. src < 0: keep your own value.
inline uint64_t warp_op(int op, uint64_t give, int src, unsigned mask) {
  Fiber& f = self();
  f.waiting = 2;
  f.op = op;
  f.give = give;
  f.src = src;
  f.mask = mask;
  yield();
  return f.get;
}

inline int lane() { return self().linear % 32; }

// A shuffle's width: a power of two from 1 to 32 (warpSize). Anything else is undefined on a GPU
// (a shuffle moves values between the lanes of one warp): the launch stops, naming the thread.
inline void check_width(const char* op, int width) {
  if (width >= 1 && width <= 32 && (width & (width - 1)) == 0) return;
  State& s = st();
  s.fault.set = true;
  s.fault.kind = "warp error: ";
  s.fault.what = std::string(op) + " with width " + std::to_string(width) + ", in " + where() +
                 " (the width must be a power of two from 1 to 32: a shuffle moves values between the lanes of "
                 "one warp. A row of more than 32 threads is summed warp by warp, width 32 at most, then across "
                 "its warps through shared memory)";
  siglongjmp(s.escape, 1);
}

template <typename T>
inline uint64_t to_bits(T v) {
  uint64_t b = 0;
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
  memcpy(&b, &v, sizeof(T));
  return b;
}
template <typename T>
inline T from_bits(uint64_t b) {
  T v;
  memcpy(&v, &b, sizeof(T));
  return v;
}

// The mask of a *_sync warp operation names the lanes taking part (CUDA C++ Programming Guide,
// warp shuffle and vote functions): each calling lane must be in it, every lane it names that has
// not exited must make the same call with the same mask, and a shuffle must read from a lane in
// it; anything else is undefined on a GPU. The lanes of a warp may take part in different calls
// with disjoint masks at once (each row's segment with its own, as cooperative groups' tiles do).
inline void check_masks(int w0, int w1) {
  State& s = st();
  static const char* names[] = {"", "a __shfl*_sync", "a __ballot_sync/__any_sync/__all_sync", "a __syncwarp"};
  auto hex = [](unsigned mask) {
    char m[16];
    snprintf(m, sizeof(m), "0x%08x", mask);
    return std::string(m);
  };
  for (int i = w0; i < w1; ++i) {
    const Fiber& f = s.fibers[i];
    if (f.done) continue;
    auto fail = [&](const std::string& what) {
      throw std::runtime_error("warp error in " + s.kernel + ", block (" + std::to_string(s.bidx.x) + ", " +
                               std::to_string(s.bidx.y) + ", " + std::to_string(s.bidx.z) + "), thread " +
                               tid_text(f) + " (lane " + std::to_string(i - w0) + "): " + names[f.op] +
                               " with mask " + hex(f.mask) + " " + what + " (undefined on a GPU: a mask names "
                               "the lane that calls with it, every other lane that makes the same call with the "
                               "same mask, and every lane a shuffle reads; 0xffffffff when the whole warp does)");
    };
    if (!(f.mask >> (i - w0) & 1u)) fail("leaves out its own lane");
    for (int j = w0; j < w1; ++j) {
      const Fiber& g = s.fibers[j];
      if (j == i || g.done || !(f.mask >> (j - w0) & 1u)) continue;
      if (g.mask != f.mask || g.op != f.op) {
        fail("names lane " + std::to_string(j - w0) + ", which calls " + names[g.op] + " with mask " + hex(g.mask));
      }
    }
    if (f.op == 1 && f.src >= 0 && !(f.mask >> f.src & 1u)) fail("reads lane " + std::to_string(f.src) + ", outside it");
  }
}

// Resolve the warps whose live lanes all wait at a warp operation, and the block
// barrier when every live thread waits there. False: nothing could move.
inline bool release() {
  State& s = st();
  const int n = s.n;
  std::vector<int> ready;  // warps whose live lanes all wait at a warp operation
  for (int w0 = 0; w0 < n; w0 += 32) {
    const int w1 = std::min(n, w0 + 32);
    bool all = true, any = false;
    for (int i = w0; i < w1; ++i) {
      if (s.fibers[i].done) continue;
      any = true;
      all = all && s.fibers[i].waiting == 2;
    }
    if (any && all) ready.push_back(w0);
  }
  if (!ready.empty()) {
    // One ready warp goes on, the others stay parked: warps run ahead of each other as on a GPU,
    // so a race between warps that only a block barrier orders (a __syncwarp for a
    // __syncthreads) shows.
    const int w0 = ready[std::uniform_int_distribution<size_t>(0, ready.size() - 1)(s.rng)];
    const int w1 = std::min(n, w0 + 32);
    check_masks(w0, w1);
    uint64_t ballot = 0;
    for (int i = w0; i < w1; ++i) {
      const Fiber& f = s.fibers[i];
      if (!f.done && f.op == 2 && f.give) ballot |= uint64_t(1) << (i - w0);
    }
    for (int i = w0; i < w1; ++i) {
      Fiber& f = s.fibers[i];
      if (f.done) continue;
      if (f.op == 1) {
        const int j = f.src < 0 ? i : w0 + f.src;
        // a lane that has exited gives garbage, as on a GPU: all bits set
        f.get = j < w1 && !s.fibers[j].done ? s.fibers[j].give : ~uint64_t(0);
      } else if (f.op == 2) {
        f.get = ballot & f.mask;  // the lanes of its own mask (all of them when every lane passes the same)
      }
      f.waiting = 0;
    }
    ++s.warp_epoch[w0 / 32];  // the warp's accesses before this and after it are ordered
    return true;
  }
  bool all = true, any = false;
  for (int i = 0; i < n; ++i) {
    const Fiber& f = s.fibers[i];
    if (f.done) continue;
    any = true;
    all = all && f.waiting == 1;
  }
  if (any && all) {
    // Every thread of the block at one and the same barrier (CUDA C++ Programming Guide,
    // __syncthreads(): in conditional code only if the condition is the same for the whole
    // block). A thread that ended, or waits at another barrier, breaks it.
    const Fiber* first = nullptr;
    for (int i = 0; i < n && !first; ++i) {
      if (!s.fibers[i].done) first = &s.fibers[i];
    }
    for (int i = 0; i < n; ++i) {
      const Fiber& f = s.fibers[i];
      if (!f.done && f.line == first->line) continue;
      throw std::runtime_error(
          "barrier error in " + s.kernel + ", block (" + std::to_string(s.bidx.x) + ", " +
          std::to_string(s.bidx.y) + ", " + std::to_string(s.bidx.z) + "): thread " + tid_text(*first) +
          " waits at the __syncthreads() on line " + std::to_string(first->line) + ", thread " + tid_text(f) +
          (f.done ? " ended without reaching it" : " waits at the one on line " + std::to_string(f.line)) +
          " (a barrier inside a branch that not every thread takes, or after a return? Every thread of the "
          "block must reach the same __syncthreads(), or none)");
    }
    for (int i = 0; i < n; ++i) s.fibers[i].waiting = 0;
    ++s.epoch;  // the block's accesses before this barrier and after it are ordered
    return true;
  }
  return false;
}

// PyTorch's current stream as the judge hands it out (c10's getCurrentCUDAStream, the stable
// ABI's aoti_torch_get_current_cuda_stream): not 0, so that a launch on the legacy default
// stream (no stream in <<<...>>>, or 0) is told apart from one on the current stream.
inline cudaStream_t current_stream() { return reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(0x5eed)); }

struct Config {
  dim3 grid, block;
  cudaStream_t stream = nullptr;  // nullptr: the legacy default stream
};

template <typename S>
inline cudaStream_t as_stream(S s) {
  if constexpr (std::is_integral_v<S>) return reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(s));
  else return static_cast<cudaStream_t>(s);
}

template <typename G, typename B>
inline Config config(G grid, B block) {
  return {dim3(grid), dim3(block), nullptr};
}
template <typename G, typename B, typename M>
inline Config config(G grid, B block, M) {
  return {dim3(grid), dim3(block), nullptr};
}
template <typename G, typename B, typename M, typename S>
inline Config config(G grid, B block, M, S stream) {
  return {dim3(grid), dim3(block), as_stream(stream)};
}

inline void check_config(const Config& c, const std::string& kernel) {
  const unsigned long long threads = 1ULL * c.block.x * c.block.y * c.block.z;
  std::string bad;
  if (threads == 0 || c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0) bad = "a grid or block dimension is 0";
  else if (threads > 1024) bad = "a block of " + std::to_string(threads) + " threads (at most 1024)";
  else if (c.block.x > 1024 || c.block.y > 1024 || c.block.z > 64) bad = "block dimensions past (1024, 1024, 64)";
  else if (c.grid.y > 65535 || c.grid.z > 65535) bad = "gridDim.y or gridDim.z past 65535";
  else if (c.grid.x > 2147483647u) bad = "gridDim.x past 2^31 - 1";
#ifndef COURSE_EMU_PROGRAM  // a program of its own (cuda_emu_runtime.h) has no PyTorch stream to be on
  if (bad.empty() && c.stream != current_stream()) {
    // Not a CUDA error: the launch works, on another stream than PyTorch's work, and races with it.
    throw std::runtime_error("the launch of " + kernel + " is on " +
                             (c.stream ? std::string("a stream that is not PyTorch's current one")
                                       : std::string("the legacy default stream (no stream in <<<...>>>, or 0)")) +
                             ": PyTorch queues its work (the inputs' writes, the output's reads) on the current "
                             "stream, and a kernel on another one runs in no order with them. Launch with "
                             "<<<grid, block, 0, stream>>>, stream the current one (c10::cuda::getCurrentCUDAStream(), "
                             "or the stable ABI's aoti_torch_get_current_cuda_stream)");
  }
#endif
  if (!bad.empty()) {
    throw std::runtime_error("CUDA error: invalid configuration argument (launch of " + kernel + " with grid (" +
                             std::to_string(c.grid.x) + ", " + std::to_string(c.grid.y) + ", " +
                             std::to_string(c.grid.z) + "), block (" + std::to_string(c.block.x) + ", " +
                             std::to_string(c.block.y) + ", " + std::to_string(c.block.z) + "): " + bad + ")");
  }
}

// Runs body() as every thread of every block of the launch.
inline void launch(const char* kernel, const Config& c, const std::function<void()>& body) {
  struct Disarm {
    ~Disarm() {
      st().armed = false;
      if (st().race) watch_shared(false);
      st().shared_pending.clear();
      if (st().note_stores) note_stores();
      watch(false);
    }
  } disarm;
  State& s = st();
  check_config(c, kernel);
  s.kernel = kernel;
  s.grid = c.grid;
  s.block = c.block;
  s.body = &body;
  const int n = static_cast<int>(c.block.x * c.block.y * c.block.z);
  if (static_cast<int>(s.fibers.size()) < n) s.fibers.resize(n);  // (moving a parked fiber's jmp_buf is safe)
  s.n = n;
  for (Fiber& f : s.fibers) {
    if (!f.stack) f.stack = static_cast<char*>(malloc(kStack));
  }
  // A launch that ended in an error left threads in the middle of its kernel: start afresh.
  struct Restart {
    bool clean = false;
    ~Restart() {
      if (!clean) for (Fiber& f : st().fibers) f.started = false;
    }
  } restart;
  std::vector<int> order(n);
  if (sigsetjmp(s.escape, 1)) {
    s.armed = false;
    s.cur = nullptr;
    const std::string what = with_race_lines(s.fault.what), kind = s.fault.kind;
    s.fault = Fault{};
    throw std::runtime_error((!kind.empty() ? kind : what.rfind("an integer division", 0) == 0 ? "arithmetic error: "
                                                                                            : "invalid memory access: ") + what);
  }
  s.armed = true;
  watch(true);
  s.race_left = kRaceAccesses;
  for (unsigned bz = 0; bz < c.grid.z; ++bz) {
    for (unsigned by = 0; by < c.grid.y; ++by) {
      for (unsigned bx = 0; bx < c.grid.x; ++bx) {
        if (s.sampled > 0) {
          const long long linear = (static_cast<long long>(bz) * c.grid.y + by) * c.grid.x + bx;
          const long long total = static_cast<long long>(c.grid.x) * c.grid.y * c.grid.z;
          if (linear != 0 && linear < total - s.sampled) continue;
        }
        if (s.sampled_z >= 0 && (bx | by | bz) != 0 && bz + 1 != c.grid.z && bz != s.sampled_z % c.grid.z) continue;
        s.bidx = {bx, by, bz};
        poison_shared();
        s.epoch = 0;
        s.warp_epoch.assign((n + 31) / 32, 0);
#if defined(__x86_64__)
        if (s.race_left > 0) watch_shared(true);
#endif
        for (int i = 0; i < n; ++i) {
          Fiber& f = s.fibers[i];
          f.linear = i;
          f.tid = {static_cast<unsigned>(i % c.block.x), static_cast<unsigned>(i / c.block.x % c.block.y),
                   static_cast<unsigned>(i / (c.block.x * c.block.y))};
          f.done = false;
          f.waiting = 0;
        }
        for (;;) {
          for (int i = 0; i < n; ++i) order[i] = i;
          std::shuffle(order.begin(), order.end(), s.rng);
          bool ran = false;
          for (int i : order) {
            Fiber& f = s.fibers[i];
            if (f.done || f.waiting) continue;
            resume(f);
            ran = true;
          }
          if (ran) continue;
          bool left = false;
          for (int i = 0; i < n; ++i) left = left || !s.fibers[i].done;
          if (!left) break;
          if (!release()) {
            s.armed = false;
            throw std::runtime_error("deadlock in " + std::string(kernel) + ", block (" + std::to_string(bx) + ", " +
                                     std::to_string(by) + ", " + std::to_string(bz) + "): some threads wait at "
                                     "__syncthreads() or a warp operation that others never reach (a barrier "
                                     "inside a branch, or after a return?)");
          }
        }
        if (s.race) watch_shared(false);
        if (s.fault.set) {
          const std::string what =
              (s.fault.kind.empty() ? "out-of-bounds access: " : s.fault.kind) + with_race_lines(s.fault.what);
          s.fault = Fault{};
          s.armed = false;
          throw std::runtime_error(what);
        }
      }
    }
  }
  restart.clean = true;
}

// The number of elements of [data, data + n) still holding the poison (never written),
// and the index of the first. shared: those holding shared memory's poison instead (computed
// from a __shared__ slot no thread wrote).
template <typename T>
inline long long unwritten(const T* data, long long n, long long* first, bool shared = false) {
  long long count = 0;
  *first = -1;
  const unsigned char* b = reinterpret_cast<const unsigned char*>(data);
  for (long long i = 0; i < n; ++i) {
    bool all = true;
    for (size_t k = 0; k < sizeof(T) && all; ++k) all = b[i * sizeof(T) + k] == (shared && k % 2 == 0 ? 0xFE : 0xFF);
    if (all) {
      if (*first < 0) *first = i;
      ++count;
    }
  }
  return count;
}

}  // namespace emu

#define threadIdx (::emu::st().cur->tid)
#define blockIdx (::emu::st().bidx)
#define blockDim (::emu::st().block)
#define gridDim (::emu::st().grid)

#define __syncthreads() ::emu::syncthreads(__LINE__)
inline void __syncwarp(unsigned m = 0xffffffffu) { ::emu::warp_op(3, 0, -1, m); }

template <typename T>
inline T __shfl_sync(unsigned m, T v, int src, int width = 32) {
  ::emu::check_width("__shfl_sync", width);
  const int lane = ::emu::lane(), base = lane / width * width;
  return ::emu::from_bits<T>(::emu::warp_op(1, ::emu::to_bits(v), base + ((src % width) + width) % width, m));
}
template <typename T>
inline T __shfl_up_sync(unsigned m, T v, unsigned delta, int width = 32) {
  ::emu::check_width("__shfl_up_sync", width);
  const int lane = ::emu::lane(), base = lane / width * width;
  const int j = lane - static_cast<int>(delta);
  return ::emu::from_bits<T>(::emu::warp_op(1, ::emu::to_bits(v), j >= base ? j : -1, m));
}
template <typename T>
inline T __shfl_down_sync(unsigned m, T v, unsigned delta, int width = 32) {
  ::emu::check_width("__shfl_down_sync", width);
  const int lane = ::emu::lane(), base = lane / width * width;
  const int j = lane + static_cast<int>(delta);
  return ::emu::from_bits<T>(::emu::warp_op(1, ::emu::to_bits(v), j < base + width ? j : -1, m));
}
template <typename T>
inline T __shfl_xor_sync(unsigned m, T v, int mask, int width = 32) {
  ::emu::check_width("__shfl_xor_sync", width);
  const int lane = ::emu::lane(), base = lane / width * width;
  const int j = lane ^ mask;
  return ::emu::from_bits<T>(::emu::warp_op(1, ::emu::to_bits(v), j >= base && j < base + width ? j : -1, m));
}
inline unsigned __ballot_sync(unsigned m, int pred) {
  return static_cast<unsigned>(::emu::warp_op(2, pred ? 1 : 0, -1, m));
}
inline int __any_sync(unsigned m, int pred) { return __ballot_sync(m, pred) != 0; }
inline int __all_sync(unsigned m, int pred) {
  const unsigned b = __ballot_sync(m, pred);
  unsigned live = 0;
  auto& s = ::emu::st();
  const int w0 = s.cur->linear / 32 * 32;
  for (int i = w0; i < std::min<int>(w0 + 32, s.n); ++i) {
    if (!s.fibers[i].done) live |= 1u << (i - w0);
  }
  return (b & live) == live;
}

// An atomic operation's store is not a plain one: two threads may both add to an element.
namespace emu {
struct AtomicScope {
  AtomicScope() { ++st().in_atomic; }
  ~AtomicScope() { --st().in_atomic; }
};
}  // namespace emu

template <typename T, typename U>
inline T atomicAdd(T* p, U v) {
  ::emu::AtomicScope atomic_scope;
  const T old = *p;
  *p = static_cast<T>(old + v);
  return old;
}

// nvcc's __ldg and __stcs take built-in types and CUDA's vector types only: c10::Half, BFloat16 or a
// struct of the course's own does not compile there, so it does not compile here either.
namespace emu {
template <typename T>
constexpr bool cache_hint_type = (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) || std::is_same_v<T, float4> ||
                                 std::is_same_v<T, float2> || std::is_same_v<T, uint4> || std::is_same_v<T, uint2>;
}  // namespace emu
#define EMU_CACHE_HINT_TYPES                                                                                   \
  "takes built-in types and CUDA vector types (float, int, unsigned short, float4, uint4...), not c10::Half, " \
  "BFloat16 or a struct: go through the bits (reinterpret_cast to a type it takes), or use a plain access "    \
  "(a const __restrict__ pointer lets nvcc choose the read-only path itself)"

template <typename T>
inline T __ldg(const T* p) {
  static_assert(::emu::cache_hint_type<T>,
                "no instance of overloaded function \"__ldg\" matches the argument list: nvcc's __ldg " EMU_CACHE_HINT_TYPES);
  return *p;
}
template <typename T>
inline void __stcs(T* p, T v) {
  static_assert(::emu::cache_hint_type<T>,
                "no instance of overloaded function \"__stcs\" matches the argument list: nvcc's __stcs " EMU_CACHE_HINT_TYPES);
  *p = v;
}

// Device functions a kernel may call, with their CUDA meaning on the CPU.
inline void __threadfence() {}
inline void __threadfence_block() {}
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanhf(float x) { return std::tanh(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __saturatef(float x) { return x < 0.f ? 0.f : x > 1.f ? 1.f : x; }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
inline float __int_as_float(int i) { float x; memcpy(&x, &i, 4); return x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }

template <typename T>
inline T atomicSub(T* p, T v) { ::emu::AtomicScope atomic_scope; const T old = *p; *p = old - v; return old; }
template <typename T>
inline T atomicMax(T* p, T v) { ::emu::AtomicScope atomic_scope; const T old = *p; *p = old < v ? v : old; return old; }
template <typename T>
inline T atomicMin(T* p, T v) { ::emu::AtomicScope atomic_scope; const T old = *p; *p = v < old ? v : old; return old; }
template <typename T>
inline T atomicExch(T* p, T v) { ::emu::AtomicScope atomic_scope; const T old = *p; *p = v; return old; }
template <typename T>
inline T atomicCAS(T* p, T compare, T v) { ::emu::AtomicScope atomic_scope; const T old = *p; if (old == compare) *p = v; return old; }
