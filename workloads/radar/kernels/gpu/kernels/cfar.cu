// radar.cfar on the GPU: exact two-dimensional CA-CFAR and deterministic compaction.
//
// The rule is the CPU library's, to the bit (workloads/radar/kernels/cpu/src/cfar.rs): q(p) = floor(p * 2^8)
// as an integer (0 for NaN and negatives, 2^86 from 2^78 up and for +inf), S = the exact sum
// of q over the training cells (the (2h+1)^2 window minus the (2g+1)^2 guard square, wrapping
// on both axes), detect iff (double)p > RN(S) * scale, RN = round to nearest, ties to even.
//
// Every q is held as two 43-bit limbs (q = hi * 2^43 + lo), and limbs are summed separately
// in 64-bit integers: sums of up to 1023^2 limbs cannot overflow, and integer sums do not
// depend on their order, so the result is exact however the work is split.
//
// Four kernels, in stream order:
//   kp_cfar_rows    per cell, the horizontal sums of the limbs over the window's 2h+1
//                   columns ("box") and over the guard's 2g+1 columns ("guard"); it also
//                   zeroes the per-chunk detection counts;
//   kp_cfar_detect  per column and strip of rows, the vertical sums of the box sums over the
//                   window's 2h+1 rows minus those of the guard sums over the guard's 2g+1
//                   rows (the training sum), slid down the strip one row at a time; then the
//                   rule: one flag byte per cell, and each detection counted in its chunk of
//                   cells with an integer atomicAdd (exact, so the counts do not depend on the
//                   order the threads run in);
//   kp_cfar_scan    one block: the exclusive scan of the chunk counts, in parallel (each
//                   thread sums a run of chunks, the block scans the runs' sums in shared
//                   memory, each thread writes its run's offsets), and the list's header;
//   kp_cfar_scatter per chunk: its detections, in row-major order, at its offset (the first
//                   `capacity` of the frame are written; the header counts the rest as
//                   overflow).
// The list is therefore the same bytes on every run, and the CPU library's.
//
// Plain CUDA C for NVRTC, no includes. Only kp_cfar_scan uses shared memory and
// __syncthreads; the host simulator (workloads/radar/kernels/gpu/hostsim) compiles this file as C++ and runs
// every grid as loops, and a block of a kernel with barriers as cooperative threads that
// switch at each barrier. The one floating-point product is __dmul_rn: never contracted,
// whatever --fmad says.

typedef unsigned char kp_u8;
typedef unsigned int kp_u32;
typedef unsigned long long kp_u64;
typedef long long kp_i64;

// Bits of the low limb: q = hi * 2^43 + lo.
#define KP_LO_BITS 43
#define KP_LO_MASK ((1ull << KP_LO_BITS) - 1)
// The f32 bit pattern of +inf: larger patterns are NaNs or have the sign bit set.
#define KP_INF_BITS 0x7f800000u
// The f32 bit pattern of 2^78 (= 2^(86 - 8)), the smallest power whose q saturates.
#define KP_SATURATING_BITS ((127u + 86u - 8u) << 23)
// Fraction bits of q.
#define KP_FRACTION_BITS 8
// Threads of kp_cfar_scan's one block (the library's cfar::SCAN_THREADS).
#define KP_SCAN_THREADS 1024

// Limbs of one fixed-point power.
struct kp_limbs {
    kp_u64 hi;
    kp_u64 lo;
};

// x << n, or 0 when n is negative or at least 64 (C leaves such shifts undefined).
__device__ __forceinline__ kp_u64 kp_shl_or_zero(kp_u64 x, kp_i64 n) {
    return (kp_u64)n < 64 ? x << n : 0;
}

// x >> n, or 0 when n is negative or at least 64.
__device__ __forceinline__ kp_u64 kp_shr_or_zero(kp_u64 x, kp_i64 n) {
    return (kp_u64)n < 64 ? x >> n : 0;
}

// q(p) for the f32 bit pattern `bits`, as limbs (the CPU library's `limbs`).
__device__ __forceinline__ kp_limbs kp_fixed_point(kp_u32 bits) {
    kp_limbs q;
    if (bits > KP_INF_BITS) {
        // NaN, or the sign bit set (negative values, -0): 0.
        q.hi = 0;
        q.lo = 0;
        return q;
    }
    if (bits >= KP_SATURATING_BITS) {
        // 2^78 and up, +inf included: 2^86.
        q.hi = 1ull << KP_LO_BITS;
        q.lo = 0;
        return q;
    }
    // p * 2^8 = mantissa * 2^s, subnormals taking the exponent of the smallest normal.
    kp_i64 biased = (kp_i64)((bits >> 23) & 0xffu);
    kp_u64 mantissa = (kp_u64)(bits & 0x7fffffu) | ((kp_u64)(biased != 0) << 23);
    kp_i64 s = (biased > 1 ? biased : 1) - 150 + KP_FRACTION_BITS;
    q.lo = (kp_shl_or_zero(mantissa, s) & KP_LO_MASK) | kp_shr_or_zero(mantissa, -s);
    q.hi = kp_shl_or_zero(mantissa, s - KP_LO_BITS) | kp_shr_or_zero(mantissa, KP_LO_BITS - s);
    return q;
}

// Leading zeros of a non-zero 64-bit value.
__device__ __forceinline__ int kp_clz64(kp_u64 x) {
    return __clzll((long long)x);
}

// The 128-bit integer w1 * 2^64 + w0 rounded to the nearest double, ties to even (what Rust's
// `u128 as f64` does). Built from integer operations only, so it cannot depend on a rounding
// mode or a conversion instruction.
__device__ __forceinline__ double kp_u128_to_f64(kp_u64 w1, kp_u64 w0) {
    if (w1 == 0 && w0 == 0) {
        return 0.0;
    }
    int lz = w1 != 0 ? kp_clz64(w1) : 64 + kp_clz64(w0);
    // Normalise: shift left until bit 127 is set; t1 holds the top 64 bits, t0 the rest.
    kp_u64 t1;
    kp_u64 t0;
    if (lz >= 64) {
        t1 = w0 << (lz - 64);
        t0 = 0;
    } else if (lz == 0) {
        t1 = w1;
        t0 = w0;
    } else {
        t1 = (w1 << lz) | (w0 >> (64 - lz));
        t0 = w0 << lz;
    }
    // 53 significant bits, then round on the 11 below them and the sticky rest.
    kp_u64 mantissa = t1 >> 11;
    kp_u64 round = t1 & 0x7ffu;
    int up = round > 0x400u || (round == 0x400u && (t0 != 0 || (mantissa & 1u) != 0));
    mantissa += (kp_u64)up;
    // The value's top bit is 2^(127 - lz); rounding may carry into the next power of two.
    kp_i64 exponent = 127 - lz;
    if ((mantissa >> 53) != 0) {
        mantissa >>= 1;
        exponent += 1;
    }
    kp_u64 bits = ((kp_u64)(exponent + 1023) << 52) | (mantissa & ((1ull << 52) - 1));
    return __longlong_as_double((long long)bits);
}

// The global index of this thread in a one-dimensional grid.
__device__ __forceinline__ kp_u64 kp_cfar_index() {
    return (kp_u64)blockIdx.x * blockDim.x + threadIdx.x;
}

// Horizontal sums: for cell (r, d), the limbs of q summed over columns d - h .. d + h (box)
// and d - g .. d + g (guard), wrapping. One thread per cell; `power` is the map's f32 bits.
// The first `chunks` threads also zero the chunk counts kp_cfar_detect adds to (there are
// fewer chunks than cells).
extern "C" __global__ void kp_cfar_rows(const kp_u32 *__restrict__ power,
                                        kp_u64 *__restrict__ box_hi,
                                        kp_u64 *__restrict__ box_lo,
                                        kp_u64 *__restrict__ guard_hi,
                                        kp_u64 *__restrict__ guard_lo,
                                        kp_u32 *__restrict__ counts, kp_u32 rows,
                                        kp_u32 cols, kp_u32 half, kp_u32 guard,
                                        kp_u32 chunks) {
    kp_u64 i = kp_cfar_index();
    if (i >= (kp_u64)rows * cols) {
        return;
    }
    if (i < chunks) {
        counts[i] = 0;
    }
    // Cells fit 32 bits (the library refuses larger maps): a 32-bit division.
    kp_u64 r = (kp_u32)i / cols;
    kp_u64 d = (kp_u32)i % cols;
    const kp_u32 *row = power + r * cols;
    // The window fits the map (half < cols), so this is the column d - h, wrapped.
    kp_u64 c = (d + cols - half) % cols;
    kp_u64 bh = 0, bl = 0, gh = 0, gl = 0;
    for (kp_u32 j = 0; j <= 2 * half; ++j) {
        kp_limbs q = kp_fixed_point(row[c]);
        bh += q.hi;
        bl += q.lo;
        if (j + guard >= half && j <= half + guard) {
            gh += q.hi;
            gl += q.lo;
        }
        if (++c == cols) {
            c = 0;
        }
    }
    box_hi[i] = bh;
    box_lo[i] = bl;
    guard_hi[i] = gh;
    guard_lo[i] = gl;
}

// Vertical sums and the rule. Thread (d, s) handles column d for rows [s * strip, s * strip +
// strip): it sums the window's rows once, then slides down one row at a time (adding the row
// entering, subtracting the row leaving: exact in wrapping 64-bit arithmetic, since every
// true sum is below 2^64). Writes flags[r * cols + d] = 1 for a detection, else 0, and adds
// each detection to counts[(r * cols + d) / chunk] (zeroed by kp_cfar_rows).
// Grid: x over the columns, y over the strips.
extern "C" __global__ void kp_cfar_detect(const kp_u64 *__restrict__ box_hi,
                                          const kp_u64 *__restrict__ box_lo,
                                          const kp_u64 *__restrict__ guard_hi,
                                          const kp_u64 *__restrict__ guard_lo,
                                          const float *__restrict__ power,
                                          kp_u8 *__restrict__ flags,
                                          kp_u32 *__restrict__ counts, kp_u32 rows, kp_u32 cols,
                                          kp_u32 half, kp_u32 guard, kp_u32 strip, kp_u32 chunk,
                                          double scale) {
    kp_u64 d = (kp_u64)blockIdx.x * blockDim.x + threadIdx.x;
    kp_u64 first = ((kp_u64)blockIdx.y * blockDim.y + threadIdx.y) * strip;
    if (d >= cols || first >= rows) {
        return;
    }
    kp_u64 end = first + strip < rows ? first + strip : rows;
    kp_u64 bh = 0, bl = 0, gh = 0, gl = 0;
    kp_u64 r = (first + rows - half) % rows;
    for (kp_u32 j = 0; j <= 2 * half; ++j) {
        kp_u64 at = r * cols + d;
        bh += box_hi[at];
        bl += box_lo[at];
        if (j + guard >= half && j <= half + guard) {
            gh += guard_hi[at];
            gl += guard_lo[at];
        }
        if (++r == rows) {
            r = 0;
        }
    }
    for (r = first; r < end; ++r) {
        // S = (box - guard) as hi * 2^43 + lo, in 128 bits: w1 * 2^64 + w0.
        kp_u64 hi = bh - gh;
        kp_u64 lo = bl - gl;
        kp_u64 w1 = hi >> (64 - KP_LO_BITS);
        kp_u64 w0 = hi << KP_LO_BITS;
        w0 += lo;
        w1 += (kp_u64)(w0 < lo);
        double threshold = __dmul_rn(kp_u128_to_f64(w1, w0), scale);
        kp_u64 at = r * cols + d;
        // float -> double is exact; NaN compares false.
        kp_u8 detected = (double)power[at] > threshold ? 1 : 0;
        flags[at] = detected;
        if (detected) {
            // Cells fit 32 bits: a 32-bit division.
            atomicAdd(counts + (kp_u32)at / chunk, 1u);
        }
        if (r + 1 < end) {
            kp_u64 box_in = ((r + half + 1) % rows) * cols + d;
            kp_u64 box_out = ((r + rows - half) % rows) * cols + d;
            kp_u64 guard_in = ((r + guard + 1) % rows) * cols + d;
            kp_u64 guard_out = ((r + rows - guard) % rows) * cols + d;
            bh += box_hi[box_in] - box_hi[box_out];
            bl += box_lo[box_in] - box_lo[box_out];
            gh += guard_hi[guard_in] - guard_hi[guard_out];
            gl += guard_lo[guard_in] - guard_lo[guard_out];
        }
    }
}

// The exclusive scan of the `chunks` counts into `offsets`, and the list's header (count,
// capacity, overflow, reserved). One block of KP_SCAN_THREADS threads: thread t owns the run
// of consecutive chunks [t * per, t * per + per) (per = chunks / KP_SCAN_THREADS, rounded up;
// runs past the end are empty), sums it, the block scans the runs' sums (Hillis-Steele,
// double-buffered in shared memory: one barrier per step), and each thread writes its run's
// offsets from its exclusive prefix. Every sum is of detection counts, at most the map's
// cells, so 32 bits hold them.
extern "C" __global__ void kp_cfar_scan(const kp_u32 *__restrict__ counts,
                                        kp_u32 *__restrict__ offsets, kp_u32 chunks,
                                        kp_u32 *__restrict__ list, kp_u32 capacity) {
    __shared__ kp_u32 sums[2][KP_SCAN_THREADS];
    kp_u32 t = threadIdx.x;
    kp_u32 per = chunks / KP_SCAN_THREADS + (chunks % KP_SCAN_THREADS != 0);
    kp_u64 begin = (kp_u64)t * per < chunks ? (kp_u64)t * per : chunks;
    kp_u64 end = begin + per < chunks ? begin + per : chunks;
    kp_u32 own = 0;
    for (kp_u64 c = begin; c < end; ++c) {
        own += counts[c];
    }
    int in = 0;
    sums[in][t] = own;
    __syncthreads();
    // After the step of distance d, sums[in][t] holds the runs' sums over (t - 2d, t].
    for (kp_u32 d = 1; d < KP_SCAN_THREADS; d <<= 1) {
        kp_u32 v = sums[in][t];
        if (t >= d) {
            v += sums[in][t - d];
        }
        // Into the other buffer: no thread still reads it (all passed the last barrier).
        sums[1 - in][t] = v;
        in = 1 - in;
        __syncthreads();
    }
    kp_u32 offset = sums[in][t] - own;
    for (kp_u64 c = begin; c < end; ++c) {
        offsets[c] = offset;
        offset += counts[c];
    }
    if (t == KP_SCAN_THREADS - 1) {
        kp_u32 total = sums[in][t];
        kp_u32 count = total < capacity ? total : capacity;
        list[0] = count;
        list[1] = capacity;
        list[2] = total - count;
        list[3] = 0;
    }
}

// Writes each chunk's detections, in row-major order, from its offset; records at or past
// `capacity` are not written (the header already counts them as overflow). A record is
// (range bin, Doppler bin, power bits), three 32-bit words after the 4-word header.
// One thread per chunk.
extern "C" __global__ void kp_cfar_scatter(const kp_u8 *__restrict__ flags,
                                           const kp_u32 *__restrict__ power,
                                           const kp_u32 *__restrict__ counts,
                                           const kp_u32 *__restrict__ offsets,
                                           kp_u32 *__restrict__ list, kp_u64 cells,
                                           kp_u32 cols, kp_u32 chunk, kp_u32 chunks,
                                           kp_u32 capacity) {
    kp_u64 c = kp_cfar_index();
    if (c >= chunks || counts[c] == 0) {
        return;
    }
    kp_u32 slot = offsets[c];
    kp_u64 i = c * chunk;
    kp_u64 end = i + chunk < cells ? i + chunk : cells;
    kp_u32 *records = list + 4;
    for (; i < end && slot < capacity; ++i) {
        if (flags[i] != 0) {
            kp_u32 *record = records + (kp_u64)slot * 3;
            record[0] = (kp_u32)(i / cols);
            record[1] = (kp_u32)(i % cols);
            record[2] = power[i];
            ++slot;
        }
    }
}
