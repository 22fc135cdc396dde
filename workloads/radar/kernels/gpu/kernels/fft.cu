// The element-wise halves of the two FFT stages (the transforms themselves are cuFFT's).
//
// Plain CUDA C for NVRTC: no includes, no shared memory, no __syncthreads, so that the host
// simulator (workloads/radar/kernels/gpu/hostsim) can compile this file as C++ and run every grid as loops
// (it also runs kernels with barriers, block by block, but these need none).
// Every product and sum is an explicitly rounded intrinsic (__fmul_rn, __fadd_rn), which the
// compiler never contracts into a fused multiply-add, whatever --fmad says; the library also
// compiles with --fmad=false, so a plain operator slipped in later cannot contract either.
//
// Addresses are computed in 64 bits (a frame may exceed 4 GiB); element counts fit 32 bits (the
// library refuses larger tensors), so the per-element divisions are 32-bit, which GPUs do far
// faster than 64-bit ones.

typedef unsigned int kp_u32;
typedef unsigned long long kp_u64;

// ci16: I then Q.
struct __align__(4) kp_ci16 {
    short re;
    short im;
};

// cf32: real then imaginary (cufftComplex's layout).
struct __align__(8) kp_cf32 {
    float re;
    float im;
};

// The global index of this thread in a one-dimensional grid.
__device__ __forceinline__ kp_u64 kp_global_index() {
    return (kp_u64)blockIdx.x * blockDim.x + threadIdx.x;
}

// Range stage, step 1 of 2: chirps [first, first + count) of a chirp-major ci16 [M, N] frame,
// converted to f32 (exact) and multiplied by the Hann window over N, written as `count`
// contiguous rows of N complex values: the batch cuFFT then transforms out of place, straight
// into the range-major output's columns (its advanced layout does the corner turn).
// One thread per sample; `total` = count * N.
extern "C" __global__ void kp_range_window(const kp_ci16 *__restrict__ iq,
                                           const float *__restrict__ window,
                                           kp_cf32 *__restrict__ batch,
                                           kp_u32 samples, kp_u32 first, kp_u64 total) {
    kp_u64 i = kp_global_index();
    if (i >= total) {
        return;
    }
    // Chirps are contiguous, so the batch is a contiguous run of the frame.
    kp_ci16 x = iq[(kp_u64)first * samples + i];
    float w = window[(kp_u32)i % samples];
    kp_cf32 y;
    y.re = __fmul_rn((float)x.re, w);
    y.im = __fmul_rn((float)x.im, w);
    batch[i] = y;
}

// Doppler stage, step 1: every row of the range-major cf32 [N, M] map multiplied by the Hann
// window over M, into the workspace the in-place FFT then transforms. One thread per cell;
// `total` = N * M.
extern "C" __global__ void kp_doppler_window(const kp_cf32 *__restrict__ map,
                                             const float *__restrict__ window,
                                             kp_cf32 *__restrict__ batch, kp_u32 chirps,
                                             kp_u64 total) {
    kp_u64 i = kp_global_index();
    if (i >= total) {
        return;
    }
    kp_cf32 x = map[i];
    float w = window[(kp_u32)i % chirps];
    kp_cf32 y;
    y.re = __fmul_rn(x.re, w);
    y.im = __fmul_rn(x.im, w);
    batch[i] = y;
}

// Doppler stage, step 3: power |X|^2 = re * re + im * im, each operation rounded to f32
// (the CPU library's arithmetic, operation for operation). One thread per cell.
extern "C" __global__ void kp_power(const kp_cf32 *__restrict__ spectrum,
                                    float *__restrict__ power, kp_u64 total) {
    kp_u64 i = kp_global_index();
    if (i >= total) {
        return;
    }
    kp_cf32 x = spectrum[i];
    power[i] = __fadd_rn(__fmul_rn(x.re, x.re), __fmul_rn(x.im, x.im));
}
