/*
 * spectrogram.c: a kernel library computing a Welch-like averaged power spectrum per frame,
 * written against kplace.h alone (C11, libm). Library name "kplace-spectrogram". What it shares
 * with its CUDA variant, spectrogram_gpu.c (the checks below and their messages, the FFT's
 * tables), is in spectrogram_contract.h beside it.
 *
 * A frame is M rows of N complex samples (one row per packet). The three kernels, all CPU
 * kernels over host memory with one input and one output:
 *
 *   spectrogram.fft      ci16 [M, N] -> cf32 [M, N]
 *       Each row: I/Q to float, times the periodic Hann window
 *       w[n] = 0.5 - 0.5 cos(2 pi n / N), then the N-point forward DFT, unnormalised, no shift:
 *       X[k] = sum_n x[n] w[n] exp(-2 pi i k n / N). An iterative radix-2 FFT (the windowed
 *       samples are loaded in bit-reversed order, then log2(N) stages of butterflies), done in
 *       place in the output row, with the window, twiddles and bit-reversal table computed in
 *       double by create. N must be a power of two, 2..=65536.
 *       Parameters: none. Split: along axis 0 (rows), any tile dividing M; or none.
 *       Workspace: none.
 *
 *   spectrogram.power    cf32 [M, N] -> f32 [M, N]
 *       out = re * re + im * im (computed in double, rounded once).
 *       Parameters: none. Split: along axis 0 (rows), any tile dividing M; or none.
 *       Workspace: none.
 *
 *   spectrogram.average  f32 [M, N] -> f32 [N]
 *       out[k] = scale * (1 / M) * sum over rows m of in[m, k], summed in double in row order.
 *       Parameter: scale (a finite positive number; default 1). Split: refused (every output
 *       bin reads every row). Workspace: none (bins are accumulated a block at a time in a
 *       small array of doubles on the stack).
 *
 * Every create checks the ports' dtypes, ranks, shapes (the same M and N throughout), memory
 * spaces and byte sizes, the split and the parameters, and refuses anything else with
 * KPLACE_ERR_INVALID_ARGUMENT and a message naming the port or parameter and what it expected.
 * launch only reads the state, allocates nothing and touches only its tile's rows, so tiles of
 * one state may run concurrently.
 *
 * Build it as a loadable library directly:
 *
 *   cc -shared -fPIC -I runtime/include workloads/spectrogram/kernels/spectrogram.c \
 *      -o libspectrogram.so -lm
 *
 * -DSPECTROGRAM_ENTRY=name renames the entry function (the kplace-spectrogram crate exports
 * kplace_library_entry from Rust and calls this one). -DSPECTROGRAM_FAULT_BIN=K builds a
 * deliberately wrong library for tests: spectrogram.average multiplies output bin K by 1.01.
 */
#include <stdlib.h>

/* The kernels' names, create's and launch's checks and messages, and the FFT's tables, shared
 * with spectrogram_gpu.c. */
#include "spectrogram_contract.h"

#ifndef SPECTROGRAM_ENTRY
#define SPECTROGRAM_ENTRY kplace_library_entry
#endif

/* The largest FFT length spectrogram.fft accepts. */
#define FFT_MAX_N 65536u

/* Bins spectrogram.average accumulates per pass over the rows (a stack array of doubles). */
#define AVERAGE_BLOCK 256u

/* ---------------------------------------------------------------------------------------- */
/* spectrogram.fft                                                                           */
/* ---------------------------------------------------------------------------------------- */

/* Written once by create; launch only reads it, so concurrent tiles are safe. */
typedef struct {
    uint64_t rows;      /* M */
    uint64_t n;         /* N, a power of two */
    double *window;     /* N: the periodic Hann window */
    double *twiddle;    /* N/2 pairs (re, im): exp(-2 pi i k / N), k = 0..N/2 */
    uint32_t *bitrev;   /* N: bit-reversed index of each n over log2(N) bits */
} fft_state;

static void fft_destroy(void *state) {
    fft_state *s = state;
    if (s == NULL) return;
    free(s->window);
    free(s->twiddle);
    free(s->bitrev);
    free(s);
}

static kplace_status fft_create(const kplace_kernel_config *config, void **state, char *error,
                                size_t error_len) {
    uint64_t rows = 0, n = 0;
    kplace_status st = check_fft_create(config, state, KPLACE_MEMORY_HOST, FFT_MAX_N, NULL, &rows,
                                        &n, error, error_len);
    if (st != KPLACE_OK) return st;

    fft_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return fail(KPLACE_ERR_OUT_OF_MEMORY, error, error_len, "%s: cannot allocate the state",
                    FFT_NAME);
    s->rows = rows;
    s->n = n;
    s->window = malloc((size_t)n * sizeof *s->window);
    s->twiddle = malloc((size_t)n * sizeof *s->twiddle); /* N/2 complex values */
    s->bitrev = malloc((size_t)n * sizeof *s->bitrev);
    if (s->window == NULL || s->twiddle == NULL || s->bitrev == NULL) {
        fft_destroy(s);
        return fail(KPLACE_ERR_OUT_OF_MEMORY, error, error_len,
                    "%s: cannot allocate the tables for N = %llu", FFT_NAME,
                    (unsigned long long)n);
    }
    fft_fill_tables(n, s->window, s->twiddle, s->bitrev);
    *state = s;
    return KPLACE_OK;
}

/* One row: window, load in bit-reversed order, then the radix-2 butterflies, in place in y. */
static void fft_row(const fft_state *s, const int16_t *x, float *y) {
    const uint64_t n = s->n;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = s->bitrev[i];
        y[2 * r] = (float)((double)x[2 * i] * s->window[i]);
        y[2 * r + 1] = (float)((double)x[2 * i + 1] * s->window[i]);
    }
    for (uint64_t len = 2; len <= n; len <<= 1) {
        const uint64_t half = len / 2, stride = n / len;
        for (uint64_t start = 0; start < n; start += len) {
            for (uint64_t j = 0; j < half; j++) {
                const double wr = s->twiddle[2 * j * stride], wi = s->twiddle[2 * j * stride + 1];
                float *a = y + 2 * (start + j), *b = y + 2 * (start + j + half);
                const double br = b[0], bi = b[1];
                const double tr = br * wr - bi * wi, ti = br * wi + bi * wr;
                const double ar = a[0], ai = a[1];
                a[0] = (float)(ar + tr);
                a[1] = (float)(ai + ti);
                b[0] = (float)(ar - tr);
                b[1] = (float)(ai - ti);
            }
        }
    }
}

static kplace_status fft_launch(void *state, const kplace_launch_args *args, char *error,
                                size_t error_len) {
    const fft_state *s = state;
    if (s == NULL) return null_state(FFT_NAME, error, error_len);
    kplace_status st = check_launch(FFT_NAME, s, args, s->rows * s->n * 4, s->rows * s->n * 8,
                                    error, error_len);
    if (st != KPLACE_OK) return st;
    st = check_tile(FFT_NAME, &args->tile, s->rows, error, error_len);
    if (st != KPLACE_OK) return st;
    /* Only this tile's rows: other tiles may run at the same time, and input rows past the
     * tile of a streamed stage may still be arriving. */
    const int16_t *x = (const int16_t *)args->inputs[0].data;
    float *y = (float *)args->outputs[0].data;
    for (uint64_t m = args->tile.begin; m < args->tile.begin + args->tile.count; m++)
        fft_row(s, x + 2 * m * s->n, y + 2 * m * s->n);
    return KPLACE_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* spectrogram.power                                                                         */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    uint64_t rows; /* M */
    uint64_t n;    /* N */
} power_state;

static kplace_status power_create(const kplace_kernel_config *config, void **state, char *error,
                                  size_t error_len) {
    uint64_t rows = 0, n = 0;
    kplace_status st =
        check_power_create(config, state, KPLACE_MEMORY_HOST, &rows, &n, error, error_len);
    if (st != KPLACE_OK) return st;

    power_state *s = malloc(sizeof *s);
    if (s == NULL)
        return fail(KPLACE_ERR_OUT_OF_MEMORY, error, error_len, "%s: cannot allocate the state",
                    POWER_NAME);
    s->rows = rows;
    s->n = n;
    *state = s;
    return KPLACE_OK;
}

static kplace_status power_launch(void *state, const kplace_launch_args *args, char *error,
                                  size_t error_len) {
    const power_state *s = state;
    if (s == NULL) return null_state(POWER_NAME, error, error_len);
    kplace_status st = check_launch(POWER_NAME, s, args, s->rows * s->n * 8,
                                    s->rows * s->n * 4, error, error_len);
    if (st != KPLACE_OK) return st;
    st = check_tile(POWER_NAME, &args->tile, s->rows, error, error_len);
    if (st != KPLACE_OK) return st;
    const float *x = (const float *)args->inputs[0].data;
    float *y = (float *)args->outputs[0].data;
    const uint64_t end = (args->tile.begin + args->tile.count) * s->n;
    for (uint64_t i = args->tile.begin * s->n; i < end; i++) {
        const double re = x[2 * i], im = x[2 * i + 1];
        y[i] = (float)(re * re + im * im);
    }
    return KPLACE_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* spectrogram.average                                                                       */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    uint64_t rows;  /* M */
    uint64_t n;     /* N */
    double factor;  /* scale / M */
} average_state;

static kplace_status average_create(const kplace_kernel_config *config, void **state,
                                    char *error, size_t error_len) {
    uint64_t rows = 0, n = 0;
    double scale = 1.0;
    kplace_status st = check_average_create(config, state, KPLACE_MEMORY_HOST, &rows, &n, &scale,
                                            error, error_len);
    if (st != KPLACE_OK) return st;

    average_state *s = malloc(sizeof *s);
    if (s == NULL)
        return fail(KPLACE_ERR_OUT_OF_MEMORY, error, error_len, "%s: cannot allocate the state",
                    AVERAGE_NAME);
    s->rows = rows;
    s->n = n;
    s->factor = scale * (1.0 / (double)rows);
    *state = s;
    return KPLACE_OK;
}

static kplace_status average_launch(void *state, const kplace_launch_args *args, char *error,
                                    size_t error_len) {
    const average_state *s = state;
    if (s == NULL) return null_state(AVERAGE_NAME, error, error_len);
    kplace_status st = check_launch(AVERAGE_NAME, s, args, s->rows * s->n * 4, s->n * 4, error,
                                    error_len);
    if (st != KPLACE_OK) return st;
    /* Not split: the tile is the whole of axis 0 and is ignored. */
    const float *x = (const float *)args->inputs[0].data;
    float *y = (float *)args->outputs[0].data;
    double acc[AVERAGE_BLOCK];
    for (uint64_t k0 = 0; k0 < s->n; k0 += AVERAGE_BLOCK) {
        const uint64_t width = s->n - k0 < AVERAGE_BLOCK ? s->n - k0 : AVERAGE_BLOCK;
        for (uint64_t j = 0; j < width; j++) acc[j] = 0.0;
        for (uint64_t m = 0; m < s->rows; m++) {
            const float *row = x + m * s->n + k0;
            for (uint64_t j = 0; j < width; j++) acc[j] += (double)row[j];
        }
        for (uint64_t j = 0; j < width; j++) {
            double v = acc[j] * s->factor;
#ifdef SPECTROGRAM_FAULT_BIN
            /* A deliberately wrong kernel, for tests of reference checks. */
            if (k0 + j == (uint64_t)(SPECTROGRAM_FAULT_BIN)) v *= 1.01;
#endif
            y[k0 + j] = (float)v;
        }
    }
    return KPLACE_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* The table                                                                                 */
/* ---------------------------------------------------------------------------------------- */

static void plain_destroy(void *state) { free(state); /* free(NULL) is a no-op */ }

static const kplace_kernel kernels[] = {
    {
        .name = FFT_NAME,
        .device = KPLACE_DEVICE_CPU,
        .memory = KPLACE_MEMORY_HOST,
        .n_inputs = 1,
        .n_outputs = 1,
        .create = fft_create,
        .workspace_bytes = no_workspace_bytes,
        .launch = fft_launch,
        .destroy = fft_destroy,
    },
    {
        .name = POWER_NAME,
        .device = KPLACE_DEVICE_CPU,
        .memory = KPLACE_MEMORY_HOST,
        .n_inputs = 1,
        .n_outputs = 1,
        .create = power_create,
        .workspace_bytes = no_workspace_bytes,
        .launch = power_launch,
        .destroy = plain_destroy,
    },
    {
        .name = AVERAGE_NAME,
        .device = KPLACE_DEVICE_CPU,
        .memory = KPLACE_MEMORY_HOST,
        .n_inputs = 1,
        .n_outputs = 1,
        .create = average_create,
        .workspace_bytes = no_workspace_bytes,
        .launch = average_launch,
        .destroy = plain_destroy,
    },
};

static const kplace_library library = {
    .abi_version = KPLACE_ABI_VERSION,
    .n_kernels = sizeof kernels / sizeof kernels[0],
    .name = "kplace-spectrogram",
    .kernels = kernels,
};

const kplace_library *SPECTROGRAM_ENTRY(void) { return &library; }
