// blocks.fir's three steps: the history in, the filter, the history out.
//
// Plain CUDA C++ for NVRTC, as elementwise.cu (no includes, no barriers, kb_ names).
//
// A frame's extended stream is the history (the last K - 1 time steps of every lane, `kept`
// scalars) followed by the frame (`frame_len` scalars), `step` scalars per time step. The
// history lives in the workspace while the launch runs and in the carry between frames; the
// frame is read where it lies, so nothing is copied but the history.
//
// The filter sums in single precision, k from 0 up, one rounded product and one rounded
// addition at a time: the CPU library's order (blocks/src/fir.rs), so the output is equal bit
// for bit.

typedef unsigned int kb_u32;
typedef unsigned long long kb_u64;

// The global index of this thread in a one-dimensional grid.
__device__ __forceinline__ kb_u64 kb_fir_index() {
    return (kb_u64)blockIdx.x * blockDim.x + threadIdx.x;
}

// Scalar `at` of the extended stream.
__device__ __forceinline__ float kb_extended(const float *history, const float *x, kb_u64 kept,
                                             kb_u64 at) {
    return at < kept ? history[at] : x[at - kept];
}

// Step 1: history[i] = carry[i + shift] while that lies within the carry, else 0: the carried
// history with `shift` scalars of lost frames' zeros shifted in; all zeros without a carry
// (null). One thread per scalar of history.
extern "C" __global__ void kb_fir_history(const float *__restrict__ carry,
                                          float *__restrict__ history, kb_u64 kept,
                                          kb_u64 shift) {
    kb_u64 i = kb_fir_index();
    if (i >= kept) {
        return;
    }
    history[i] = (carry != 0 && i + shift < kept) ? carry[i + shift] : 0.0f;
}

// Step 2: y[m * step + j] = sum over k < n_taps of taps[k] * e[(n_taps - 1 + m * decimation -
// k) * step + j], e the extended stream. One thread per output scalar; `count` = output steps
// * step.
extern "C" __global__ void kb_fir(const float *__restrict__ history, const float *__restrict__ x,
                                  float *__restrict__ y, const float *__restrict__ taps,
                                  kb_u64 n_taps, kb_u64 kept, kb_u64 step, kb_u64 decimation,
                                  kb_u64 count) {
    kb_u64 i = kb_fir_index();
    if (i >= count) {
        return;
    }
    kb_u64 m = i / step;
    kb_u64 j = i % step;
    kb_u64 newest = n_taps - 1 + m * decimation;
    float sum = 0.0f;
    for (kb_u64 k = 0; k < n_taps; ++k) {
        float v = kb_extended(history, x, kept, (newest - k) * step + j);
        sum = __fadd_rn(sum, __fmul_rn(taps[k], v));
    }
    y[i] = sum;
}

// Step 3: the carry for the next frame, the extended stream's last `kept` scalars. One thread
// per scalar of history.
extern "C" __global__ void kb_fir_keep(const float *__restrict__ history,
                                       const float *__restrict__ x, float *__restrict__ carry,
                                       kb_u64 kept, kb_u64 frame_len) {
    kb_u64 i = kb_fir_index();
    if (i < kept) {
        carry[i] = kb_extended(history, x, kept, frame_len + i);
    }
}
