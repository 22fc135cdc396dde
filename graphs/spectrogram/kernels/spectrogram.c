/*
 * spectrogram.c: a kernel library computing a Welch-like averaged power spectrum per frame,
 * written against kplace.h alone (C11, libm). Library name "kplace-spectrogram".
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
 *   cc -shared -fPIC -I runtime/include graphs/spectrogram/kernels/spectrogram.c \
 *      -o libspectrogram.so -lm
 *
 * -DSPECTROGRAM_ENTRY=name renames the entry function (the kplace-spectrogram crate exports
 * kplace_library_entry from Rust and calls this one). -DSPECTROGRAM_FAULT_BIN=K builds a
 * deliberately wrong library for tests: spectrogram.average multiplies output bin K by 1.01.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kplace.h"

#ifndef SPECTROGRAM_ENTRY
#define SPECTROGRAM_ENTRY kplace_library_entry
#endif

/* The largest FFT length spectrogram.fft accepts. */
#define FFT_MAX_N 65536u

/* Bins spectrogram.average accumulates per pass over the rows (a stack array of doubles). */
#define AVERAGE_BLOCK 256u

static const double PI = 3.14159265358979323846264338327950288;

/* ---------------------------------------------------------------------------------------- */
/* Helpers shared by the kernels                                                             */
/* ---------------------------------------------------------------------------------------- */

/* Writes a message into the runtime's buffer (always NUL-terminated) and returns `status`. */
static kplace_status fail(kplace_status status, char *error, size_t error_len, const char *fmt,
                          ...) {
    if (error != NULL && error_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(error, error_len, fmt, ap); /* truncates and terminates */
        va_end(ap);
    }
    return status;
}

static const char *dtype_name(kplace_dtype dtype) {
    switch (dtype) {
    case KPLACE_DTYPE_CI16: return "ci16";
    case KPLACE_DTYPE_CF32: return "cf32";
    case KPLACE_DTYPE_F32: return "f32";
    case KPLACE_DTYPE_DETECTIONS: return "detections";
    }
    return "an unknown dtype";
}

static uint64_t dtype_bytes(kplace_dtype dtype) {
    switch (dtype) {
    case KPLACE_DTYPE_CI16: return 4;
    case KPLACE_DTYPE_CF32: return 8;
    case KPLACE_DTYPE_F32: return 4;
    case KPLACE_DTYPE_DETECTIONS: return 0;
    }
    return 0;
}

/* Writes a shape as "[d0, d1, ...]" into buf (truncated to fit). */
static const char *shape_text(const kplace_tensor_desc *d, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    at += (size_t)snprintf(buf, len, "[");
    uint32_t rank = d->rank < KPLACE_MAX_RANK ? d->rank : KPLACE_MAX_RANK;
    for (uint32_t i = 0; i < rank && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%llu", i == 0 ? "" : ", ",
                               (unsigned long long)d->shape[i]);
    if (at < len) snprintf(buf + at, len - at, "]");
    return buf;
}

/*
 * Checks one port's descriptor: dtype, memory space, rank, shape and byte size. `dims` is the
 * expected shape (`rank` entries); `dims_text` says what it is in the graph's terms ("[M, N]").
 */
static kplace_status check_port(const char *kernel, const char *port,
                                const kplace_tensor_desc *d, kplace_dtype dtype, uint32_t rank,
                                const uint64_t *dims, const char *dims_text, char *error,
                                size_t error_len) {
    char got[128], want[128];
    if (d->dtype != dtype)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: %s must be %s %s, not %s", kernel, port, dtype_name(dtype), dims_text,
                    dtype_name(d->dtype));
    if (d->memory != KPLACE_MEMORY_HOST)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: %s must be in host memory, not device memory", kernel, port);
    if (d->rank != rank)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: %s must have rank %u (%s %s), not rank %u", kernel, port,
                    (unsigned)rank, dtype_name(dtype), dims_text, (unsigned)d->rank);
    uint64_t elements = 1;
    for (uint32_t i = 0; i < rank; i++) {
        if (d->shape[i] != dims[i]) {
            kplace_tensor_desc expected = *d;
            for (uint32_t j = 0; j < rank; j++) expected.shape[j] = dims[j];
            return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                        "%s: %s must have shape %s (%s), not %s", kernel, port,
                        shape_text(&expected, want, sizeof want), dims_text,
                        shape_text(d, got, sizeof got));
        }
        if (dims[i] == 0 || elements > UINT64_MAX / dims[i])
            return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                        "%s: %s has shape %s, which is empty or too large", kernel, port,
                        shape_text(d, got, sizeof got));
        elements *= dims[i];
    }
    uint64_t per = dtype_bytes(dtype);
    if (per == 0 || elements > UINT64_MAX / per)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: %s has shape %s, which is too large", kernel, port,
                    shape_text(d, got, sizeof got));
    if (d->bytes < elements * per)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: %s holds %llu bytes, fewer than the %llu its dtype and shape imply",
                    kernel, port, (unsigned long long)d->bytes,
                    (unsigned long long)(elements * per));
    return KPLACE_OK;
}

/* What every create checks first: the pointers and the port counts. */
static kplace_status check_config(const char *kernel, const kplace_kernel_config *config,
                                  void **state, char *error, size_t error_len) {
    if (config == NULL || state == NULL)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: create got a null config or state pointer", kernel);
    if (config->n_inputs != 1 || config->n_outputs != 1 || config->inputs == NULL ||
        config->outputs == NULL)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: expected 1 input and 1 output, got %u and %u", kernel,
                    (unsigned)config->n_inputs, (unsigned)config->n_outputs);
    if (config->n_params > 0 && config->params == NULL)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: %u parameters but a null parameter array", kernel,
                    (unsigned)config->n_params);
    for (uint32_t i = 0; i < config->n_params; i++)
        if (config->params[i].name == NULL || config->params[i].value == NULL)
            return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                        "%s: parameter %u has a null name or value", kernel, (unsigned)i);
    return KPLACE_OK;
}

/* Refuses every parameter: for the kernels that take none. */
static kplace_status refuse_params(const char *kernel, const kplace_kernel_config *config,
                                   char *error, size_t error_len) {
    if (config->n_params > 0)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: unknown parameter %s; %s takes no parameters", kernel,
                    config->params[0].name, kernel);
    return KPLACE_OK;
}

/* The row split the fft and power kernels accept: none, or axis 0 with a tile dividing M. */
static kplace_status check_row_split(const char *kernel, const kplace_kernel_config *config,
                                     uint64_t rows, char *error, size_t error_len) {
    if (config->split_axis == KPLACE_SPLIT_NONE) return KPLACE_OK;
    if (config->split_axis != 0)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s splits only along axis 0 (rows), not axis %u", kernel,
                    (unsigned)config->split_axis);
    if (config->tile == 0 || rows % config->tile != 0)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: a split tile of %llu rows does not divide M = %llu", kernel,
                    (unsigned long long)config->tile, (unsigned long long)rows);
    return KPLACE_OK;
}

/* What every launch checks: the arguments, and that the tensors are the ones create saw. */
static kplace_status check_launch(const char *kernel, const void *state,
                                  const kplace_launch_args *args, uint64_t in_bytes,
                                  uint64_t out_bytes, char *error, size_t error_len) {
    if (state == NULL || args == NULL)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: launch got a null state or args pointer", kernel);
    if (args->n_inputs != 1 || args->n_outputs != 1 || args->inputs == NULL ||
        args->outputs == NULL || args->inputs[0].data == NULL || args->outputs[0].data == NULL)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: launch needs 1 input and 1 output with data, got %u and %u", kernel,
                    (unsigned)args->n_inputs, (unsigned)args->n_outputs);
    if (args->inputs[0].desc.bytes < in_bytes || args->outputs[0].desc.bytes < out_bytes)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: launch got tensors smaller than the ones create checked", kernel);
    return KPLACE_OK;
}

/* The rows [begin, begin + count) a launch covers, checked against M. */
static kplace_status check_tile(const char *kernel, const kplace_tile *tile, uint64_t rows,
                                char *error, size_t error_len) {
    if (tile->begin > rows || tile->count > rows - tile->begin)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: tile [%llu, +%llu) is outside axis 0 (M = %llu)", kernel,
                    (unsigned long long)tile->begin, (unsigned long long)tile->count,
                    (unsigned long long)rows);
    return KPLACE_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* spectrogram.fft                                                                           */
/* ---------------------------------------------------------------------------------------- */

#define FFT_NAME "spectrogram.fft"

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
    kplace_status st = check_config(FFT_NAME, config, state, error, error_len);
    if (st != KPLACE_OK) return st;
    st = refuse_params(FFT_NAME, config, error, error_len);
    if (st != KPLACE_OK) return st;

    const kplace_tensor_desc *in = &config->inputs[0], *out = &config->outputs[0];
    /* The input fixes M and N; the checks below then hold both ports to them. */
    uint64_t dims[2] = {in->shape[0], in->shape[1]};
    st = check_port(FFT_NAME, "input 0", in, KPLACE_DTYPE_CI16, 2, dims, "[M, N]", error,
                    error_len);
    if (st != KPLACE_OK) return st;
    uint64_t rows = dims[0], n = dims[1];
    if (n < 2 || n > FFT_MAX_N || (n & (n - 1)) != 0)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: N (input 0's row length) must be a power of two from 2 to %u, not %llu",
                    FFT_NAME, FFT_MAX_N, (unsigned long long)n);
    st = check_port(FFT_NAME, "output 0", out, KPLACE_DTYPE_CF32, 2, dims,
                    "[M, N], input 0's M and N", error, error_len);
    if (st != KPLACE_OK) return st;
    st = check_row_split(FFT_NAME, config, rows, error, error_len);
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
    unsigned bits = 0;
    while ((1ull << bits) < n) bits++;
    for (uint64_t i = 0; i < n; i++) {
        s->window[i] = 0.5 - 0.5 * cos(2.0 * PI * (double)i / (double)n);
        uint32_t r = 0;
        for (unsigned b = 0; b < bits; b++) r |= (uint32_t)((i >> b) & 1u) << (bits - 1 - b);
        s->bitrev[i] = r;
    }
    for (uint64_t k = 0; k < n / 2; k++) {
        double angle = -2.0 * PI * (double)k / (double)n;
        s->twiddle[2 * k] = cos(angle);
        s->twiddle[2 * k + 1] = sin(angle);
    }
    *state = s;
    return KPLACE_OK;
}

static uint64_t fft_workspace_bytes(const void *state) {
    (void)state;
    return 0;
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
    if (s == NULL)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: launch got a null state", FFT_NAME);
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

#define POWER_NAME "spectrogram.power"

typedef struct {
    uint64_t rows; /* M */
    uint64_t n;    /* N */
} power_state;

static kplace_status power_create(const kplace_kernel_config *config, void **state, char *error,
                                  size_t error_len) {
    kplace_status st = check_config(POWER_NAME, config, state, error, error_len);
    if (st != KPLACE_OK) return st;
    st = refuse_params(POWER_NAME, config, error, error_len);
    if (st != KPLACE_OK) return st;

    const kplace_tensor_desc *in = &config->inputs[0], *out = &config->outputs[0];
    uint64_t dims[2] = {in->shape[0], in->shape[1]};
    st = check_port(POWER_NAME, "input 0", in, KPLACE_DTYPE_CF32, 2, dims, "[M, N]", error,
                    error_len);
    if (st != KPLACE_OK) return st;
    st = check_port(POWER_NAME, "output 0", out, KPLACE_DTYPE_F32, 2, dims,
                    "[M, N], input 0's M and N", error, error_len);
    if (st != KPLACE_OK) return st;
    st = check_row_split(POWER_NAME, config, dims[0], error, error_len);
    if (st != KPLACE_OK) return st;

    power_state *s = malloc(sizeof *s);
    if (s == NULL)
        return fail(KPLACE_ERR_OUT_OF_MEMORY, error, error_len, "%s: cannot allocate the state",
                    POWER_NAME);
    s->rows = dims[0];
    s->n = dims[1];
    *state = s;
    return KPLACE_OK;
}

static uint64_t power_workspace_bytes(const void *state) {
    (void)state;
    return 0;
}

static kplace_status power_launch(void *state, const kplace_launch_args *args, char *error,
                                  size_t error_len) {
    const power_state *s = state;
    if (s == NULL)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: launch got a null state", POWER_NAME);
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

#define AVERAGE_NAME "spectrogram.average"

typedef struct {
    uint64_t rows;  /* M */
    uint64_t n;     /* N */
    double factor;  /* scale / M */
} average_state;

/* Parses a finite positive number, allowing surrounding whitespace. */
static int parse_positive(const char *text, double *value) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno != 0) return 0;
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r') end++;
    if (*end != '\0' || !isfinite(v) || !(v > 0.0)) return 0;
    *value = v;
    return 1;
}

static kplace_status average_create(const kplace_kernel_config *config, void **state,
                                    char *error, size_t error_len) {
    kplace_status st = check_config(AVERAGE_NAME, config, state, error, error_len);
    if (st != KPLACE_OK) return st;
    double scale = 1.0;
    for (uint32_t i = 0; i < config->n_params; i++) {
        const kplace_param *p = &config->params[i];
        if (strcmp(p->name, "scale") != 0)
            return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                        "%s: unknown parameter %s; %s takes only scale", AVERAGE_NAME, p->name,
                        AVERAGE_NAME);
        if (!parse_positive(p->value, &scale))
            return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                        "%s: parameter scale: \"%s\" is not a finite positive number",
                        AVERAGE_NAME, p->value);
    }

    const kplace_tensor_desc *in = &config->inputs[0], *out = &config->outputs[0];
    uint64_t dims[2] = {in->shape[0], in->shape[1]};
    st = check_port(AVERAGE_NAME, "input 0", in, KPLACE_DTYPE_F32, 2, dims, "[M, N]", error,
                    error_len);
    if (st != KPLACE_OK) return st;
    st = check_port(AVERAGE_NAME, "output 0", out, KPLACE_DTYPE_F32, 1, &dims[1],
                    "[N], input 0's N", error, error_len);
    if (st != KPLACE_OK) return st;
    if (config->split_axis != KPLACE_SPLIT_NONE)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s cannot be split (every output bin sums all M rows), but the stage "
                    "splits axis %u",
                    AVERAGE_NAME, (unsigned)config->split_axis);

    average_state *s = malloc(sizeof *s);
    if (s == NULL)
        return fail(KPLACE_ERR_OUT_OF_MEMORY, error, error_len, "%s: cannot allocate the state",
                    AVERAGE_NAME);
    s->rows = dims[0];
    s->n = dims[1];
    s->factor = scale * (1.0 / (double)dims[0]);
    *state = s;
    return KPLACE_OK;
}

static uint64_t average_workspace_bytes(const void *state) {
    (void)state;
    return 0;
}

static kplace_status average_launch(void *state, const kplace_launch_args *args, char *error,
                                    size_t error_len) {
    const average_state *s = state;
    if (s == NULL)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: launch got a null state", AVERAGE_NAME);
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
        .workspace_bytes = fft_workspace_bytes,
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
        .workspace_bytes = power_workspace_bytes,
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
        .workspace_bytes = average_workspace_bytes,
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
