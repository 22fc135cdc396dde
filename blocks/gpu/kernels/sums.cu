// The block library's sums: blocks.mean, blocks.beamform and blocks.combine.
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

// blocks.mean: y[j] = factor * sum over m < rows of x[m * row_len + j], summed in the order of
// m. One thread per output value.
extern "C" __global__ void kb_mean(const float *__restrict__ x, float *__restrict__ y,
                                   kb_u64 rows, kb_u64 row_len, double factor) {
    kb_u64 j = kb_sum_index();
    if (j >= row_len) {
        return;
    }
    double sum = 0.0;
    for (kb_u64 m = 0; m < rows; ++m) {
        sum = __dadd_rn(sum, (double)x[m * row_len + j]);
    }
    y[j] = (float)__dmul_rn(sum, factor);
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
