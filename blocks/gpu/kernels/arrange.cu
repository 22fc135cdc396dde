// blocks.transpose: every element copied to its place in the output, bits unchanged.
//
// Plain CUDA C++ for NVRTC, as elementwise.cu (no includes, no barriers, kb_ names).
//
// `table` holds the output's `rank` dimensions, then the input's stride (in elements) along
// each of them: output element i, its index read off the dimensions from the last, is input
// element sum over a of index[a] * stride[a]. One thread per element, `count` in all; one
// kernel per element size (1, 2, 4, 8 and 16 bytes), since only the bits move.

typedef unsigned int kb_u32;
typedef unsigned long long kb_u64;

// 16 bytes: a cf64 element.
struct __align__(16) kb_bytes16 {
    kb_u64 lo;
    kb_u64 hi;
};

template <class T>
__device__ __forceinline__ void kb_transpose(const T *__restrict__ x, T *__restrict__ y,
                                             const kb_u64 *__restrict__ table, kb_u64 rank,
                                             kb_u64 count) {
    kb_u64 i = (kb_u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) {
        return;
    }
    kb_u64 rest = i;
    kb_u64 from = 0;
    for (kb_u64 a = rank; a-- > 0;) {
        kb_u64 d = table[a];
        from += (rest % d) * table[rank + a];
        rest /= d;
    }
    y[i] = x[from];
}

extern "C" __global__ void kb_transpose_1(const unsigned char *x, unsigned char *y,
                                          const kb_u64 *table, kb_u64 rank, kb_u64 count) {
    kb_transpose(x, y, table, rank, count);
}

extern "C" __global__ void kb_transpose_2(const unsigned short *x, unsigned short *y,
                                          const kb_u64 *table, kb_u64 rank, kb_u64 count) {
    kb_transpose(x, y, table, rank, count);
}

extern "C" __global__ void kb_transpose_4(const kb_u32 *x, kb_u32 *y, const kb_u64 *table,
                                          kb_u64 rank, kb_u64 count) {
    kb_transpose(x, y, table, rank, count);
}

extern "C" __global__ void kb_transpose_8(const kb_u64 *x, kb_u64 *y, const kb_u64 *table,
                                          kb_u64 rank, kb_u64 count) {
    kb_transpose(x, y, table, rank, count);
}

extern "C" __global__ void kb_transpose_16(const kb_bytes16 *x, kb_bytes16 *y,
                                           const kb_u64 *table, kb_u64 rank, kb_u64 count) {
    kb_transpose(x, y, table, rank, count);
}
