// Just enough of CUDA C for the kernels in backends/gpu/kernels to compile as host C++.
//
// A kernel runs as loops over its grid (see hostsim.cpp): blockIdx, threadIdx, blockDim and
// gridDim are thread-local variables the launcher sets before each simulated thread. The
// kernels use no shared memory and no __syncthreads, so running threads one after another is
// a faithful schedule. The intrinsics are the plain IEEE operations they denote: compiled
// with -ffp-contract=off on x86-64 (SSE2), each is one correctly rounded operation.
#ifndef KPLACE_GPU_HOSTSIM_SHIM_H
#define KPLACE_GPU_HOSTSIM_SHIM_H

#include <cstring>

#define __global__
#define __device__
#define __forceinline__ inline
#define __align__(n) alignas(n)

struct kp_hostsim_dim3 {
    unsigned int x, y, z;
};

static thread_local kp_hostsim_dim3 threadIdx;
static thread_local kp_hostsim_dim3 blockIdx;
static thread_local kp_hostsim_dim3 blockDim;
static thread_local kp_hostsim_dim3 gridDim;

static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline int __clzll(long long x) { return __builtin_clzll((unsigned long long)x); }
static inline double __longlong_as_double(long long x) {
    double d;
    std::memcpy(&d, &x, sizeof d);
    return d;
}

#endif
