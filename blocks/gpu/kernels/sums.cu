// The block library's sums: blocks.mean (and blocks.power and blocks.magnitude given an axis),
// blocks.beamform and blocks.combine.
//
// Plain CUDA C++ for NVRTC, as elementwise.cu (no includes, no barriers, kb_ names). One
// thread per output value, which sums its terms itself in double, in the CPU library's order
// (blocks/src), rounding once at the end: so the output equals the CPU library's bit for bit.

typedef unsigned int kb_u32;
typedef unsigned long long kb_u64;

// The global index of this thread in a one-dimensional grid.
__device__ __forceinline__ kb_u64 kb_sum_index() {
    return (kb_u64)blockIdx.x * blockDim.x + threadIdx.x;
}

// blocks.mean along an axis: the input is blocks of `count` indices of the axis, each
// `inner` values; output value i (of `n`) is factor * the sum over m < count of
// v(x[(i / inner * count + m) * inner + i % inner]), summed in double in the order of m and
// rounded once. One thread per output value.
template <class T, double (*V)(T)>
__device__ __forceinline__ void kb_reduce(const T *__restrict__ x, float *__restrict__ y,
                                          kb_u64 count, kb_u64 inner, double factor,
                                          kb_u64 n) {
    kb_u64 i = kb_sum_index();
    if (i >= n) {
        return;
    }
    const T *column = x + (i / inner) * count * inner + i % inner;
    double sum = 0.0;
    for (kb_u64 m = 0; m < count; ++m) {
        sum = __dadd_rn(sum, V(column[m * inner]));
    }
    y[i] = (float)__dmul_rn(sum, factor);
}

// cf32: real then imaginary.
struct __align__(8) kb_sum_cf32 {
    float re;
    float im;
};

__device__ __forceinline__ double kb_sum_value(float v) { return (double)v; }

__device__ __forceinline__ double kb_sum_norm(kb_sum_cf32 v) {
    double re = (double)v.re;
    double im = (double)v.im;
    return __dadd_rn(__dmul_rn(re, re), __dmul_rn(im, im));
}

__device__ __forceinline__ double kb_sum_magnitude(kb_sum_cf32 v) {
    return __dsqrt_rn(kb_sum_norm(v));
}

extern "C" __global__ void kb_mean(const float *x, float *y, kb_u64 count, kb_u64 inner,
                                   double factor, kb_u64 n) {
    kb_reduce<float, kb_sum_value>(x, y, count, inner, factor, n);
}

// blocks.power with an axis: the mean of re² + im² (each in double) along it.
extern "C" __global__ void kb_power_mean(const kb_sum_cf32 *x, float *y, kb_u64 count,
                                         kb_u64 inner, double factor, kb_u64 n) {
    kb_reduce<kb_sum_cf32, kb_sum_norm>(x, y, count, inner, factor, n);
}

// blocks.magnitude with an axis: the mean of sqrt(re² + im²) along it.
extern "C" __global__ void kb_magnitude_mean(const kb_sum_cf32 *x, float *y, kb_u64 count,
                                             kb_u64 inner, double factor, kb_u64 n) {
    kb_reduce<kb_sum_cf32, kb_sum_magnitude>(x, y, count, inner, factor, n);
}

// A weight's parts in double, from the steering weights (double) or given ones (float).
__device__ __forceinline__ double kb_weight(const double *w, kb_u64 i) { return w[i]; }
__device__ __forceinline__ double kb_weight(const float *w, kb_u64 i) { return (double)w[i]; }

// y[s, b] = sum over c < channels of w[b, c] * x[s, c], complex, in the order of c: one
// thread per (snapshot s, beam b) of `count` = snapshots * beams. x, y and w hold (re, im)
// pairs; w is beam-major.
template <class W>
__device__ __forceinline__ void kb_beams(const float *__restrict__ x, float *__restrict__ y,
                                         const W *__restrict__ w, kb_u64 channels,
                                         kb_u64 beams, kb_u64 count) {
    kb_u64 i = kb_sum_index();
    if (i >= count) {
        return;
    }
    kb_u64 s = i / beams;
    kb_u64 b = i % beams;
    double re = 0.0;
    double im = 0.0;
    for (kb_u64 c = 0; c < channels; ++c) {
        double wr = kb_weight(w, 2 * (b * channels + c));
        double wi = kb_weight(w, 2 * (b * channels + c) + 1);
        double xr = (double)x[2 * (s * channels + c)];
        double xi = (double)x[2 * (s * channels + c) + 1];
        re = __dadd_rn(re, __dsub_rn(__dmul_rn(wr, xr), __dmul_rn(wi, xi)));
        im = __dadd_rn(im, __dadd_rn(__dmul_rn(wr, xi), __dmul_rn(wi, xr)));
    }
    y[2 * i] = (float)re;
    y[2 * i + 1] = (float)im;
}

// blocks.beamform: the steering weights, computed in double at create.
extern "C" __global__ void kb_beamform(const float *x, float *y, const double *w,
                                       kb_u64 channels, kb_u64 beams, kb_u64 count) {
    kb_beams(x, y, w, channels, beams, count);
}

// blocks.combine: the weights of input 1, cf32 [B, C].
extern "C" __global__ void kb_combine(const float *x, float *y, const float *w,
                                      kb_u64 channels, kb_u64 beams, kb_u64 count) {
    kb_beams(x, y, w, channels, beams, count);
}
