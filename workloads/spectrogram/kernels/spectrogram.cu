// spectrogram.cu: the CUDA C kernels of the spectrogram's GPU library, kplace-spectrogram-gpu.
//
// spectrogram_gpu.c embeds this text and compiles it with NVRTC at the first create on a
// device (options: --fmad=false --ftz=false --prec-div=true --prec-sqrt=true), then launches
// these functions with cuLaunchKernel. Their contract is spectrogram_gpu.c's header comment;
// the arithmetic is spectrogram.c's, operation for operation: the same tables (computed in
// double by create on the host), the same order of butterflies within a row, every product and
// sum in double and rounded to float where the C file rounds. With --fmad=false nothing is
// contracted into a fused multiply-add (the tests check the PTX), so the results are the CPU
// library's bit for bit.
//
// Plain CUDA C: no includes, no dynamic shared memory, no intrinsics, so that the tests can
// compile this file as host C++ with workloads/radar/kernels/gpu/hostsim's shim and run every grid as loops
// (the FFT's barriers as fibers). Names are prefixed spectrogram_, unique across the repository.
//
// Indices of elements are 64-bit (a frame may exceed 4 GiB); the FFT's indices within a row are
// 32-bit (N <= 4096).

typedef unsigned int spectrogram_u32;
typedef unsigned long long spectrogram_u64;

// The largest N spectrogram_fft takes: one row of cf32 in static shared memory (32 KiB).
// spectrogram_gpu.c refuses larger N (SPECTROGRAM_GPU_FFT_MAX_N there, the same value).
#define SPECTROGRAM_FFT_MAX_N 4096

// spectrogram.fft over rows [begin, begin + count) of a ci16 [M, N] frame, into the same rows
// of the cf32 [M, N] output. One block per row (rows past the grid are taken by the same blocks
// in turn); blockDim.x threads, any number from 1 to N / 2.
//
// Each row: the samples to double, times the periodic Hann window, rounded to float and stored
// in bit-reversed order in shared memory; then log2(N) stages of radix-2 butterflies in place,
// each butterfly one thread's (a block-wide barrier between stages); then the row is copied out.
// window: N doubles; twiddle: N / 2 pairs (re, im) of exp(-2 pi i k / N); bitrev: N indices.
extern "C" __global__ void spectrogram_fft(const short *__restrict__ iq,
                                           float *__restrict__ spectra,
                                           const double *__restrict__ window,
                                           const double *__restrict__ twiddle,
                                           const spectrogram_u32 *__restrict__ bitrev,
                                           spectrogram_u32 n, spectrogram_u64 begin,
                                           spectrogram_u64 count) {
    __shared__ float row[2 * SPECTROGRAM_FFT_MAX_N];
    const spectrogram_u32 butterflies = n / 2;
    // The loop's bounds are the same for every thread of the block, so every thread reaches
    // every barrier.
    for (spectrogram_u64 r = blockIdx.x; r < count; r += gridDim.x) {
        const spectrogram_u64 m = begin + r;
        const short *x = iq + 2 * m * n;
        for (spectrogram_u32 i = threadIdx.x; i < n; i += blockDim.x) {
            const spectrogram_u32 b = bitrev[i];
            const double w = window[i];
            row[2 * b] = (float)((double)x[2 * i] * w);
            row[2 * b + 1] = (float)((double)x[2 * i + 1] * w);
        }
        __syncthreads();
        for (spectrogram_u32 len = 2; len <= n; len <<= 1) {
            const spectrogram_u32 half = len / 2, stride = n / len;
            for (spectrogram_u32 j = threadIdx.x; j < butterflies; j += blockDim.x) {
                // Butterfly j of the stage: group j / half, position j % half within it.
                const spectrogram_u32 pos = j & (half - 1);
                const spectrogram_u32 a = 2 * (j - pos) + pos, b = a + half;
                const double wr = twiddle[2 * pos * stride], wi = twiddle[2 * pos * stride + 1];
                const double br = row[2 * b], bi = row[2 * b + 1];
                const double tr = br * wr - bi * wi, ti = br * wi + bi * wr;
                const double ar = row[2 * a], ai = row[2 * a + 1];
                row[2 * a] = (float)(ar + tr);
                row[2 * a + 1] = (float)(ai + ti);
                row[2 * b] = (float)(ar - tr);
                row[2 * b + 1] = (float)(ai - ti);
            }
            __syncthreads();
        }
        float *y = spectra + 2 * m * n;
        for (spectrogram_u32 i = threadIdx.x; i < 2 * n; i += blockDim.x) {
            y[i] = row[i];
        }
        // Every thread has copied its part before the next row overwrites the buffer.
        __syncthreads();
    }
}

// spectrogram.power over the cf32 elements [first, first + total) (the tile's rows times N),
// into the same elements of the f32 output: re * re + im * im in double, rounded once.
// Any one-dimensional grid: each thread takes every (gridDim.x * blockDim.x)-th element.
extern "C" __global__ void spectrogram_power(const float *__restrict__ spectra,
                                             float *__restrict__ power, spectrogram_u64 first,
                                             spectrogram_u64 total) {
    const spectrogram_u64 step = (spectrogram_u64)gridDim.x * blockDim.x;
    for (spectrogram_u64 i = (spectrogram_u64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += step) {
        const spectrogram_u64 e = first + i;
        const double re = spectra[2 * e], im = spectra[2 * e + 1];
        power[e] = (float)(re * re + im * im);
    }
}

// spectrogram.average: bin k of the f32 [N] output is factor (= scale / M) times the sum of
// column k of the f32 [M, N] input, summed in double in row order from 0. One thread per bin
// (any one-dimensional grid; each thread takes every (gridDim.x * blockDim.x)-th bin); the
// threads of a warp read consecutive floats of each row.
extern "C" __global__ void spectrogram_average(const float *__restrict__ power,
                                               float *__restrict__ psd, spectrogram_u64 rows,
                                               spectrogram_u64 n, double factor) {
    const spectrogram_u64 step = (spectrogram_u64)gridDim.x * blockDim.x;
    for (spectrogram_u64 k = (spectrogram_u64)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += step) {
        double acc = 0.0;
        for (spectrogram_u64 m = 0; m < rows; m++) {
            acc += (double)power[m * n + k];
        }
        psd[k] = (float)(acc * factor);
    }
}
