// Just enough of CUDA C for the Rust GPU libraries' kernels (build.rs) to compile as host C++.
//
// A kernel runs as loops over its grid (see hostsim.cpp): blockIdx, threadIdx, blockDim and
// gridDim are thread-local variables the launcher sets before each simulated thread. A kernel
// that calls __syncthreads runs block by block, each of its threads a fiber on this OS thread
// that yields to the next at every barrier, so every thread of the block reaches barrier k
// before any passes it, as on the device; a kernel without barriers runs its threads one
// after another, which is a faithful schedule for it. `__shared__` arrays are thread-local
// statics: shared by the fibers of the block being run (blocks run one at a time), private to
// each test thread. atomicAdd is an atomic read-modify-write (the simulated threads of a
// launch run on one OS thread, so any interleaving of them is one the device allows).
//
// The intrinsics are the plain IEEE operations they denote: compiled with -ffp-contract=off on
// x86-64 (SSE2), each is one correctly rounded operation.
#ifndef KPLACE_CUDA_HOSTSIM_SHIM_H
#define KPLACE_CUDA_HOSTSIM_SHIM_H

#include <cstring>

#define __global__
#define __device__
#define __forceinline__ inline
#define __align__(n) alignas(n)
#define __shared__ static thread_local

struct kp_hostsim_dim3 {
    unsigned int x, y, z;
};

static thread_local kp_hostsim_dim3 threadIdx;
static thread_local kp_hostsim_dim3 blockIdx;
static thread_local kp_hostsim_dim3 blockDim;
static thread_local kp_hostsim_dim3 gridDim;

// The block barrier: yields this simulated thread to the launcher (hostsim.cpp).
void kp_hostsim_syncthreads();

static inline void __syncthreads() { kp_hostsim_syncthreads(); }

static inline unsigned int atomicAdd(unsigned int *address, unsigned int value) {
    return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
}

static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dsqrt_rn(double a) { return __builtin_sqrt(a); }
static inline int __clzll(long long x) { return __builtin_clzll((unsigned long long)x); }
static inline double __longlong_as_double(long long x) {
    double d;
    std::memcpy(&d, &x, sizeof d);
    return d;
}

#endif
