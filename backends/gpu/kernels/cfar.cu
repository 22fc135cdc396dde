// radar.cfar on the GPU: exact two-dimensional CA-CFAR and deterministic compaction.
//
// The rule is the CPU library's, to the bit (backends/cpu/src/cfar.rs): q(p) = floor(p * 2^8)
// as an integer (0 for NaN and negatives, 2^86 from 2^78 up and for +inf), S = the exact sum
// of q over the training cells (the (2h+1)^2 window minus the (2g+1)^2 guard square, wrapping
// on both axes), detect iff (double)p > RN(S) * scale, RN = round to nearest, ties to even.
//
// Every q is held as two 43-bit limbs (q = hi * 2^43 + lo), and limbs are summed separately
// in 64-bit integers: sums of up to 1023^2 limbs cannot overflow, and integer sums do not
// depend on their order, so the result is exact however the work is split.
//
// The sums are separable:
//   kp_cfar_rows    per cell, the horizontal sums of the limbs over the window's 2h+1
//                   columns ("box") and over the guard's 2g+1 columns ("guard");
//   kp_cfar_detect  per column and strip of rows, the vertical sums of the box sums over the
//                   window's 2h+1 rows minus those of the guard sums over the guard's 2g+1
//                   rows (the training sum), slid down the strip one row at a time; then the
//                   rule, one flag byte per cell.
// Compaction keeps row-major order (range ascending, then Doppler) without atomics:
//   kp_cfar_count   detections per chunk of cells;
//   kp_cfar_groups  detections per group of chunks;
//   kp_cfar_scan    one thread: exclusive scan over the groups, and the list's header;
//   kp_cfar_offsets per group: exclusive scan over its chunks from the group's offset;
//   kp_cfar_scatter per chunk: its detections, in order, at its offset (the first `capacity`
//                   of the frame are written; the header counts the rest as overflow).
//
// Plain CUDA C for NVRTC: no includes, no shared memory, no __syncthreads, so that the host
// simulator (backends/gpu/hostsim) can compile this file as C++ and run every grid as loops.
// The one floating-point product is __dmul_rn: never contracted, whatever --fmad says.

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
extern "C" __global__ void kp_cfar_rows(const kp_u32 *__restrict__ power,
                                        kp_u64 *__restrict__ box_hi,
                                        kp_u64 *__restrict__ box_lo,
                                        kp_u64 *__restrict__ guard_hi,
                                        kp_u64 *__restrict__ guard_lo, kp_u32 rows,
                                        kp_u32 cols, kp_u32 half, kp_u32 guard) {
    kp_u64 i = kp_cfar_index();
    if (i >= (kp_u64)rows * cols) {
        return;
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
// true sum is below 2^64). Writes flags[r * cols + d] = 1 for a detection, else 0.
// Grid: x over the columns, y over the strips.
extern "C" __global__ void kp_cfar_detect(const kp_u64 *__restrict__ box_hi,
                                          const kp_u64 *__restrict__ box_lo,
                                          const kp_u64 *__restrict__ guard_hi,
                                          const kp_u64 *__restrict__ guard_lo,
                                          const float *__restrict__ power,
                                          kp_u8 *__restrict__ flags, kp_u32 rows, kp_u32 cols,
                                          kp_u32 half, kp_u32 guard, kp_u32 strip,
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
        flags[at] = (double)power[at] > threshold ? 1 : 0;
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

// Detections per chunk of `chunk` cells (a multiple of 4; the flags are 4-byte aligned).
// One thread per chunk.
extern "C" __global__ void kp_cfar_count(const kp_u8 *__restrict__ flags,
                                         kp_u32 *__restrict__ counts, kp_u64 cells,
                                         kp_u32 chunk, kp_u32 chunks) {
    kp_u64 c = kp_cfar_index();
    if (c >= chunks) {
        return;
    }
    kp_u64 i = c * chunk;
    kp_u64 end = i + chunk < cells ? i + chunk : cells;
    kp_u32 n = 0;
    // Four flags (each 0 or 1) at a time: multiplying by 0x01010101 adds the four bytes
    // into the top one.
    for (; i + 4 <= end; i += 4) {
        kp_u32 word = *(const kp_u32 *)(flags + i);
        n += (word * 0x01010101u) >> 24;
    }
    for (; i < end; ++i) {
        n += flags[i];
    }
    counts[c] = n;
}

// Detections per group of `group` chunks. One thread per group.
extern "C" __global__ void kp_cfar_groups(const kp_u32 *__restrict__ counts,
                                          kp_u32 *__restrict__ group_sums, kp_u32 chunks,
                                          kp_u32 group, kp_u32 groups) {
    kp_u64 g = kp_cfar_index();
    if (g >= groups) {
        return;
    }
    kp_u64 c = g * group;
    kp_u64 end = c + group < chunks ? c + group : chunks;
    kp_u32 n = 0;
    for (; c < end; ++c) {
        n += counts[c];
    }
    group_sums[g] = n;
}

// One thread: the exclusive scan over the groups, then the list's header (count, capacity,
// overflow, reserved). The total cannot exceed the map's cells, which fit 32 bits.
extern "C" __global__ void kp_cfar_scan(const kp_u32 *__restrict__ group_sums,
                                        kp_u32 *__restrict__ group_offsets, kp_u32 groups,
                                        kp_u32 *__restrict__ list, kp_u32 capacity) {
    if (kp_cfar_index() != 0) {
        return;
    }
    kp_u32 total = 0;
    for (kp_u32 g = 0; g < groups; ++g) {
        group_offsets[g] = total;
        total += group_sums[g];
    }
    kp_u32 count = total < capacity ? total : capacity;
    list[0] = count;
    list[1] = capacity;
    list[2] = total - count;
    list[3] = 0;
}

// Each chunk's offset in the frame's detections: its group's offset plus the counts of the
// chunks before it in the group. One thread per group.
extern "C" __global__ void kp_cfar_offsets(const kp_u32 *__restrict__ counts,
                                           const kp_u32 *__restrict__ group_offsets,
                                           kp_u32 *__restrict__ offsets, kp_u32 chunks,
                                           kp_u32 group, kp_u32 groups) {
    kp_u64 g = kp_cfar_index();
    if (g >= groups) {
        return;
    }
    kp_u64 c = g * group;
    kp_u64 end = c + group < chunks ? c + group : chunks;
    kp_u32 offset = group_offsets[g];
    for (; c < end; ++c) {
        offsets[c] = offset;
        offset += counts[c];
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
