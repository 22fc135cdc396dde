// The block library's element-wise kernels: blocks.convert, blocks.power, blocks.magnitude,
// blocks.window, the gather and scatter around blocks.fft's cuFFT transforms, blocks.add and
// blocks.multiply.
//
// Plain CUDA C++ for NVRTC: no includes, no shared memory, no barriers, so that the host
// simulator (runtime/cudakit/hostsim) compiles this file as C++ and runs every grid as loops.
// Every name is prefixed kb_ (the simulator compiles every library's kernels together).
// Each value is computed as the CPU library computes it (blocks/src: in double, rounded once;
// the FFT's scale in single precision), with explicitly rounded intrinsics the compiler never
// contracts into a fused multiply-add; the library also compiles with --fmad=false. So a
// block's output here equals the CPU library's bit for bit (the FFT's within cuFFT's error).
//
// One thread per output value; indices and counts are 64-bit.

typedef unsigned int kb_u32;
typedef unsigned long long kb_u64;

// cf32: real then imaginary (cufftComplex's layout).
struct __align__(8) kb_cf32 {
    float re;
    float im;
};

// The global index of this thread in a one-dimensional grid.
__device__ __forceinline__ kb_u64 kb_index() {
    return (kb_u64)blockIdx.x * blockDim.x + threadIdx.x;
}

// ---------------------------------------------------------------------------------------------
// blocks.convert: y = x * scale, each part in double, rounded once.
// ---------------------------------------------------------------------------------------------

// An IEEE binary16 value, exactly, as a double (built from its bits: no half type needed).
__device__ __forceinline__ double kb_from_f16(unsigned short h) {
    kb_u64 sign = (kb_u64)(h >> 15) << 63;
    kb_u32 e = (h >> 10) & 0x1f;
    kb_u64 m = h & 0x3ff;
    if (e == 0x1f) {
        return __longlong_as_double((long long)(sign | 0x7ff0000000000000ull | (m << 42)));
    }
    if (e == 0) {
        // Subnormal: m * 2^-24.
        double v = __dmul_rn((double)m, __longlong_as_double((long long)((kb_u64)(1023 - 24) << 52)));
        return sign ? -v : v;
    }
    return __longlong_as_double((long long)(sign | ((kb_u64)(e - 15 + 1023) << 52) | (m << 42)));
}

// A bfloat16 value (the upper half of an IEEE binary32), exactly, as a double.
__device__ __forceinline__ double kb_from_bf16(unsigned short b) {
    kb_u64 sign = (kb_u64)(b >> 15) << 63;
    kb_u32 e = (b >> 7) & 0xff;
    kb_u64 m = b & 0x7f;
    if (e == 0xff) {
        return __longlong_as_double((long long)(sign | 0x7ff0000000000000ull | (m << 45)));
    }
    if (e == 0) {
        // Subnormal: m * 2^-133.
        double v = __dmul_rn((double)m, __longlong_as_double((long long)((kb_u64)(1023 - 133) << 52)));
        return sign ? -v : v;
    }
    return __longlong_as_double((long long)(sign | ((kb_u64)(e - 127 + 1023) << 52) | (m << 45)));
}

__device__ __forceinline__ double kb_part(signed char v) { return (double)v; }
__device__ __forceinline__ double kb_part(short v) { return (double)v; }
__device__ __forceinline__ double kb_part(int v) { return (double)v; }
__device__ __forceinline__ double kb_part(float v) { return (double)v; }
__device__ __forceinline__ double kb_part(double v) { return v; }

// Converts `parts` scalars of x. With `to_complex` (a real input to cf32) value i becomes
// y[2i] with y[2i + 1] = 0; otherwise y[i]. One thread per input scalar.
template <class T>
__device__ __forceinline__ void kb_convert(const T *__restrict__ x, float *__restrict__ y,
                                           kb_u64 parts, kb_u32 to_complex, double scale) {
    kb_u64 i = kb_index();
    if (i >= parts) {
        return;
    }
    float v = (float)__dmul_rn(kb_part(x[i]), scale);
    if (to_complex) {
        y[2 * i] = v;
        y[2 * i + 1] = 0.0f;
    } else {
        y[i] = v;
    }
}

// The same for the two half types, whose bits are read as unsigned shorts.
template <double (*From)(unsigned short)>
__device__ __forceinline__ void kb_convert_half(const unsigned short *__restrict__ x,
                                                float *__restrict__ y, kb_u64 parts,
                                                kb_u32 to_complex, double scale) {
    kb_u64 i = kb_index();
    if (i >= parts) {
        return;
    }
    float v = (float)__dmul_rn(From(x[i]), scale);
    if (to_complex) {
        y[2 * i] = v;
        y[2 * i + 1] = 0.0f;
    } else {
        y[i] = v;
    }
}

extern "C" __global__ void kb_convert_i8(const signed char *x, float *y, kb_u64 parts,
                                         kb_u32 to_complex, double scale) {
    kb_convert(x, y, parts, to_complex, scale);
}

extern "C" __global__ void kb_convert_i16(const short *x, float *y, kb_u64 parts,
                                          kb_u32 to_complex, double scale) {
    kb_convert(x, y, parts, to_complex, scale);
}

extern "C" __global__ void kb_convert_i32(const int *x, float *y, kb_u64 parts,
                                          kb_u32 to_complex, double scale) {
    kb_convert(x, y, parts, to_complex, scale);
}

extern "C" __global__ void kb_convert_f16(const unsigned short *x, float *y, kb_u64 parts,
                                          kb_u32 to_complex, double scale) {
    kb_convert_half<kb_from_f16>(x, y, parts, to_complex, scale);
}

extern "C" __global__ void kb_convert_bf16(const unsigned short *x, float *y, kb_u64 parts,
                                           kb_u32 to_complex, double scale) {
    kb_convert_half<kb_from_bf16>(x, y, parts, to_complex, scale);
}

extern "C" __global__ void kb_convert_f32(const float *x, float *y, kb_u64 parts,
                                          kb_u32 to_complex, double scale) {
    kb_convert(x, y, parts, to_complex, scale);
}

extern "C" __global__ void kb_convert_f64(const double *x, float *y, kb_u64 parts,
                                          kb_u32 to_complex, double scale) {
    kb_convert(x, y, parts, to_complex, scale);
}

// ---------------------------------------------------------------------------------------------
// blocks.power and blocks.magnitude: re² + im² and its square root, in double, rounded once.
// ---------------------------------------------------------------------------------------------

__device__ __forceinline__ double kb_norm(kb_cf32 x) {
    double re = (double)x.re;
    double im = (double)x.im;
    return __dadd_rn(__dmul_rn(re, re), __dmul_rn(im, im));
}

extern "C" __global__ void kb_power(const kb_cf32 *__restrict__ x, float *__restrict__ y,
                                    kb_u64 count) {
    kb_u64 i = kb_index();
    if (i < count) {
        y[i] = (float)kb_norm(x[i]);
    }
}

extern "C" __global__ void kb_magnitude(const kb_cf32 *__restrict__ x, float *__restrict__ y,
                                        kb_u64 count) {
    kb_u64 i = kb_index();
    if (i < count) {
        y[i] = (float)__dsqrt_rn(kb_norm(x[i]));
    }
}

// ---------------------------------------------------------------------------------------------
// blocks.window: y[.., n] = x[.., n] * w[n], each part in double, rounded once. `count`
// complex values from the start of a row; w holds `last` doubles.
// ---------------------------------------------------------------------------------------------

extern "C" __global__ void kb_window(const kb_cf32 *__restrict__ x, kb_cf32 *__restrict__ y,
                                     const double *__restrict__ w, kb_u64 last, kb_u64 count) {
    kb_u64 i = kb_index();
    if (i >= count) {
        return;
    }
    double c = w[i % last];
    kb_cf32 v = x[i];
    kb_cf32 out;
    out.re = (float)__dmul_rn((double)v.re, c);
    out.im = (float)__dmul_rn((double)v.im, c);
    y[i] = out;
}

// ---------------------------------------------------------------------------------------------
// blocks.fft around cuFFT: transform t of a launch is column t % inner of group t / inner,
// N values `inner` apart. Gather copies them into row t of a contiguous batch (which cuFFT
// transforms in place); scatter writes them back, times `scale` in single precision, as the
// CPU library does. One thread per value of the batch; `count` = transforms * N.
// ---------------------------------------------------------------------------------------------

__device__ __forceinline__ kb_u64 kb_strided(kb_u64 i, kb_u64 n, kb_u64 inner) {
    kb_u64 t = i / n;
    kb_u64 k = i % n;
    return (t / inner) * n * inner + t % inner + k * inner;
}

extern "C" __global__ void kb_fft_gather(const kb_cf32 *__restrict__ x,
                                         kb_cf32 *__restrict__ batch, kb_u64 n, kb_u64 inner,
                                         kb_u64 count) {
    kb_u64 i = kb_index();
    if (i < count) {
        batch[i] = x[kb_strided(i, n, inner)];
    }
}

extern "C" __global__ void kb_fft_scatter(const kb_cf32 *__restrict__ batch,
                                          kb_cf32 *__restrict__ y, kb_u64 n, kb_u64 inner,
                                          float scale, kb_u64 count) {
    kb_u64 i = kb_index();
    if (i >= count) {
        return;
    }
    kb_cf32 v = batch[i];
    kb_cf32 out;
    out.re = __fmul_rn(v.re, scale);
    out.im = __fmul_rn(v.im, scale);
    y[kb_strided(i, n, inner)] = out;
}

// ---------------------------------------------------------------------------------------------
// blocks.add and blocks.multiply: element i of a launch (element first + i of input 0) meets
// element (first + i) % len of input 1, each part in double, rounded once. With `conjugate`
// input 1's imaginary parts are negated. One thread per output element.
// ---------------------------------------------------------------------------------------------

// Input 1's element k as a complex double, its imaginary part negated when `conjugate`.
__device__ __forceinline__ void kb_other(const kb_cf32 *w, kb_u64 k, kb_u32 conjugate,
                                         double *re, double *im) {
    kb_cf32 v = w[k];
    *re = (double)v.re;
    *im = conjugate ? -(double)v.im : (double)v.im;
}

extern "C" __global__ void kb_add_complex(const kb_cf32 *__restrict__ x,
                                          const kb_cf32 *__restrict__ w,
                                          kb_cf32 *__restrict__ y, kb_u64 first, kb_u64 len,
                                          kb_u32 conjugate, kb_u64 count) {
    (void)conjugate;  // a sum, or a real factor, has nothing to conjugate
    kb_u64 i = kb_index();
    if (i >= count) {
        return;
    }
    double wr, wi;
    kb_other(w, (first + i) % len, 0, &wr, &wi);
    kb_cf32 v = x[i];
    kb_cf32 out;
    out.re = (float)__dadd_rn((double)v.re, wr);
    out.im = (float)__dadd_rn((double)v.im, wi);
    y[i] = out;
}

extern "C" __global__ void kb_add_real(const float *__restrict__ x, const float *__restrict__ w,
                                       float *__restrict__ y, kb_u64 first, kb_u64 len,
                                       kb_u32 conjugate, kb_u64 count) {
    (void)conjugate;  // a sum, or a real factor, has nothing to conjugate
    kb_u64 i = kb_index();
    if (i < count) {
        y[i] = (float)__dadd_rn((double)x[i], (double)w[(first + i) % len]);
    }
}

extern "C" __global__ void kb_multiply_complex(const kb_cf32 *__restrict__ x,
                                               const kb_cf32 *__restrict__ w,
                                               kb_cf32 *__restrict__ y, kb_u64 first,
                                               kb_u64 len, kb_u32 conjugate, kb_u64 count) {
    kb_u64 i = kb_index();
    if (i >= count) {
        return;
    }
    double wr, wi;
    kb_other(w, (first + i) % len, conjugate, &wr, &wi);
    double xr = (double)x[i].re;
    double xi = (double)x[i].im;
    kb_cf32 out;
    out.re = (float)__dsub_rn(__dmul_rn(xr, wr), __dmul_rn(xi, wi));
    out.im = (float)__dadd_rn(__dmul_rn(xr, wi), __dmul_rn(xi, wr));
    y[i] = out;
}

// A complex input 0 times a real input 1: no terms of an imaginary part.
extern "C" __global__ void kb_multiply_by_real(const kb_cf32 *__restrict__ x,
                                               const float *__restrict__ w,
                                               kb_cf32 *__restrict__ y, kb_u64 first,
                                               kb_u64 len, kb_u32 conjugate, kb_u64 count) {
    (void)conjugate;  // a sum, or a real factor, has nothing to conjugate
    kb_u64 i = kb_index();
    if (i >= count) {
        return;
    }
    double c = (double)w[(first + i) % len];
    kb_cf32 out;
    out.re = (float)__dmul_rn((double)x[i].re, c);
    out.im = (float)__dmul_rn((double)x[i].im, c);
    y[i] = out;
}

extern "C" __global__ void kb_multiply_real(const float *__restrict__ x,
                                            const float *__restrict__ w, float *__restrict__ y,
                                            kb_u64 first, kb_u64 len, kb_u32 conjugate,
                                            kb_u64 count) {
    (void)conjugate;  // a sum, or a real factor, has nothing to conjugate
    kb_u64 i = kb_index();
    if (i < count) {
        y[i] = (float)__dmul_rn((double)x[i], (double)w[(first + i) % len]);
    }
}
