/*
 * spectrogram_contract.h: what the spectrogram's two kernel libraries share, spectrogram.c (the
 * CPU library) and spectrogram_gpu.c (its CUDA variant's host side): the kernels' names, the
 * checks create and launch make, with their error messages, and the FFT's tables. C11 and
 * kplace.h alone; static inline functions only, none of which allocates.
 *
 * Each library includes it once, by `#include "spectrogram_contract.h"` (found beside the .c
 * file), and keeps only what is its own: the memory space its ports must be in (passed to the
 * checks: host for spectrogram.c, device for spectrogram_gpu.c), the FFT's length limit, the
 * states, the launches' work, and the table and entry function.
 *
 * A refusal is KPLACE_ERR_INVALID_ARGUMENT with a message naming the kernel, the port or
 * parameter, and what it expected. The texts are the contract's: the tests of both libraries
 * assert on them, and a GPU refusal reads as the CPU library's one word for word but for the
 * memory space and the FFT's limit.
 */
#ifndef SPECTROGRAM_CONTRACT_H
#define SPECTROGRAM_CONTRACT_H

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kplace.h"

#define FFT_NAME "spectrogram.fft"
#define POWER_NAME "spectrogram.power"
#define AVERAGE_NAME "spectrogram.average"

/* ---------------------------------------------------------------------------------------- */
/* Messages                                                                                  */
/* ---------------------------------------------------------------------------------------- */

/* Writes a message into the runtime's buffer (always NUL-terminated) and returns `status`. */
static inline kplace_status fail(kplace_status status, char *error, size_t error_len,
                                 const char *fmt, ...) {
    if (error != NULL && error_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(error, error_len, fmt, ap); /* truncates and terminates */
        va_end(ap);
    }
    return status;
}

static inline const char *dtype_name(kplace_dtype dtype) {
    switch (dtype) {
    case KPLACE_DTYPE_CI16: return "ci16";
    case KPLACE_DTYPE_CF32: return "cf32";
    case KPLACE_DTYPE_F32: return "f32";
    case KPLACE_DTYPE_RECORDS: return "records";
    case KPLACE_DTYPE_I8: return "i8";
    case KPLACE_DTYPE_I16: return "i16";
    case KPLACE_DTYPE_I32: return "i32";
    case KPLACE_DTYPE_F16: return "f16";
    case KPLACE_DTYPE_F64: return "f64";
    case KPLACE_DTYPE_CI8: return "ci8";
    case KPLACE_DTYPE_CF16: return "cf16";
    case KPLACE_DTYPE_CF64: return "cf64";
    case KPLACE_DTYPE_BF16: return "bf16";
    }
    return "an unknown dtype";
}

static inline uint64_t dtype_bytes(kplace_dtype dtype) {
    switch (dtype) {
    case KPLACE_DTYPE_CI16: return 4;
    case KPLACE_DTYPE_CF32: return 8;
    case KPLACE_DTYPE_F32: return 4;
    case KPLACE_DTYPE_RECORDS: return 0;
    default: break; /* a dtype no spectrogram kernel takes: refused by name before its size matters */
    }
    return 0;
}

/* "host" or "device". */
static inline const char *memory_name(kplace_memory_space memory) {
    return memory == KPLACE_MEMORY_DEVICE ? "device" : "host";
}

/* Writes a shape as "[d0, d1, ...]" into buf (truncated to fit). */
static inline const char *shape_text(const kplace_tensor_desc *d, char *buf, size_t len) {
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

/* ---------------------------------------------------------------------------------------- */
/* create's checks                                                                           */
/* ---------------------------------------------------------------------------------------- */

/*
 * Checks one port's descriptor: dtype, memory space (`memory`, the library's), rank, shape and
 * byte size. `dims` is the expected shape (`rank` entries); `dims_text` says what it is in the
 * graph's terms ("[M, N]").
 */
static inline kplace_status check_port(const char *kernel, const char *port,
                                       const kplace_tensor_desc *d, kplace_dtype dtype,
                                       kplace_memory_space memory, uint32_t rank,
                                       const uint64_t *dims, const char *dims_text, char *error,
                                       size_t error_len) {
    char got[128], want[128];
    if (d->dtype != dtype)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: %s must be %s %s, not %s", kernel, port, dtype_name(dtype), dims_text,
                    dtype_name(d->dtype));
    if (d->memory != memory)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: %s must be in %s memory, not %s memory", kernel, port,
                    memory_name(memory),
                    memory_name(memory == KPLACE_MEMORY_HOST ? KPLACE_MEMORY_DEVICE
                                                             : KPLACE_MEMORY_HOST));
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
static inline kplace_status check_config(const char *kernel, const kplace_kernel_config *config,
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
static inline kplace_status refuse_params(const char *kernel, const kplace_kernel_config *config,
                                          char *error, size_t error_len) {
    if (config->n_params > 0)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: unknown parameter %s; %s takes no parameters", kernel,
                    config->params[0].name, kernel);
    return KPLACE_OK;
}

/* The row split the fft and power kernels accept: none, or axis 0 with a tile dividing M. */
static inline kplace_status check_row_split(const char *kernel,
                                            const kplace_kernel_config *config, uint64_t rows,
                                            char *error, size_t error_len) {
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

/* Parses a finite positive number, allowing surrounding whitespace. */
static inline int parse_positive(const char *text, double *value) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno != 0) return 0;
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r') end++;
    if (*end != '\0' || !isfinite(v) || !(v > 0.0)) return 0;
    *value = v;
    return 1;
}

/*
 * The checks of spectrogram.fft's create, in order: the config, no parameters, input 0 (ci16
 * [M, N]), N a power of two from 2 to `max_n`, output 0 (cf32 [M, N]), the row split. Ports in
 * `memory`. `max_n_why`, when not NULL, is added to the refusal of N: "(<max_n> is <why>)".
 * On success *rows is M and *n is N.
 */
static inline kplace_status check_fft_create(const kplace_kernel_config *config, void **state,
                                             kplace_memory_space memory, uint32_t max_n,
                                             const char *max_n_why, uint64_t *rows,
                                             uint64_t *n, char *error, size_t error_len) {
    kplace_status st = check_config(FFT_NAME, config, state, error, error_len);
    if (st != KPLACE_OK) return st;
    st = refuse_params(FFT_NAME, config, error, error_len);
    if (st != KPLACE_OK) return st;

    const kplace_tensor_desc *in = &config->inputs[0], *out = &config->outputs[0];
    /* The input fixes M and N; the checks below then hold both ports to them. */
    uint64_t dims[2] = {in->shape[0], in->shape[1]};
    st = check_port(FFT_NAME, "input 0", in, KPLACE_DTYPE_CI16, memory, 2, dims, "[M, N]", error,
                    error_len);
    if (st != KPLACE_OK) return st;
    if (dims[1] < 2 || dims[1] > max_n || (dims[1] & (dims[1] - 1)) != 0) {
        if (max_n_why == NULL)
            return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                        "%s: N (input 0's row length) must be a power of two from 2 to %u, "
                        "not %llu",
                        FFT_NAME, (unsigned)max_n, (unsigned long long)dims[1]);
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: N (input 0's row length) must be a power of two from 2 to %u, not "
                    "%llu (%u is %s)",
                    FFT_NAME, (unsigned)max_n, (unsigned long long)dims[1], (unsigned)max_n,
                    max_n_why);
    }
    st = check_port(FFT_NAME, "output 0", out, KPLACE_DTYPE_CF32, memory, 2, dims,
                    "[M, N], input 0's M and N", error, error_len);
    if (st != KPLACE_OK) return st;
    st = check_row_split(FFT_NAME, config, dims[0], error, error_len);
    if (st != KPLACE_OK) return st;
    *rows = dims[0];
    *n = dims[1];
    return KPLACE_OK;
}

/*
 * The checks of spectrogram.power's create: the config, no parameters, input 0 (cf32 [M, N]),
 * output 0 (f32 [M, N]), the row split. Ports in `memory`. On success *rows is M, *n is N.
 */
static inline kplace_status check_power_create(const kplace_kernel_config *config, void **state,
                                               kplace_memory_space memory, uint64_t *rows,
                                               uint64_t *n, char *error, size_t error_len) {
    kplace_status st = check_config(POWER_NAME, config, state, error, error_len);
    if (st != KPLACE_OK) return st;
    st = refuse_params(POWER_NAME, config, error, error_len);
    if (st != KPLACE_OK) return st;

    const kplace_tensor_desc *in = &config->inputs[0], *out = &config->outputs[0];
    uint64_t dims[2] = {in->shape[0], in->shape[1]};
    st = check_port(POWER_NAME, "input 0", in, KPLACE_DTYPE_CF32, memory, 2, dims, "[M, N]",
                    error, error_len);
    if (st != KPLACE_OK) return st;
    st = check_port(POWER_NAME, "output 0", out, KPLACE_DTYPE_F32, memory, 2, dims,
                    "[M, N], input 0's M and N", error, error_len);
    if (st != KPLACE_OK) return st;
    st = check_row_split(POWER_NAME, config, dims[0], error, error_len);
    if (st != KPLACE_OK) return st;
    *rows = dims[0];
    *n = dims[1];
    return KPLACE_OK;
}

/*
 * The checks of spectrogram.average's create: the config, the parameters (scale only, a finite
 * positive number, default 1), input 0 (f32 [M, N]), output 0 (f32 [N]), no split. Ports in
 * `memory`. On success *rows is M, *n is N and *scale the scale.
 */
static inline kplace_status check_average_create(const kplace_kernel_config *config,
                                                 void **state, kplace_memory_space memory,
                                                 uint64_t *rows, uint64_t *n, double *scale,
                                                 char *error, size_t error_len) {
    kplace_status st = check_config(AVERAGE_NAME, config, state, error, error_len);
    if (st != KPLACE_OK) return st;
    double value = 1.0;
    for (uint32_t i = 0; i < config->n_params; i++) {
        const kplace_param *p = &config->params[i];
        if (strcmp(p->name, "scale") != 0)
            return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                        "%s: unknown parameter %s; %s takes only scale", AVERAGE_NAME, p->name,
                        AVERAGE_NAME);
        if (!parse_positive(p->value, &value))
            return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                        "%s: parameter scale: \"%s\" is not a finite positive number",
                        AVERAGE_NAME, p->value);
    }

    const kplace_tensor_desc *in = &config->inputs[0], *out = &config->outputs[0];
    uint64_t dims[2] = {in->shape[0], in->shape[1]};
    st = check_port(AVERAGE_NAME, "input 0", in, KPLACE_DTYPE_F32, memory, 2, dims, "[M, N]",
                    error, error_len);
    if (st != KPLACE_OK) return st;
    st = check_port(AVERAGE_NAME, "output 0", out, KPLACE_DTYPE_F32, memory, 1, &dims[1],
                    "[N], input 0's N", error, error_len);
    if (st != KPLACE_OK) return st;
    if (config->split_axis != KPLACE_SPLIT_NONE)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s cannot be split (every output bin sums all M rows), but the stage "
                    "splits axis %u",
                    AVERAGE_NAME, (unsigned)config->split_axis);
    *rows = dims[0];
    *n = dims[1];
    *scale = value;
    return KPLACE_OK;
}

/* No kernel of either library needs a workspace. */
static inline uint64_t no_workspace_bytes(const void *state) {
    (void)state;
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* launch's checks                                                                           */
/* ---------------------------------------------------------------------------------------- */

/* A launch with a null state. */
static inline kplace_status null_state(const char *kernel, char *error, size_t error_len) {
    return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len, "%s: launch got a null state",
                kernel);
}

/* What every launch checks: the arguments, and that the tensors are the ones create saw. */
static inline kplace_status check_launch(const char *kernel, const void *state,
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
static inline kplace_status check_tile(const char *kernel, const kplace_tile *tile,
                                       uint64_t rows, char *error, size_t error_len) {
    if (tile->begin > rows || tile->count > rows - tile->begin)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: tile [%llu, +%llu) is outside axis 0 (M = %llu)", kernel,
                    (unsigned long long)tile->begin, (unsigned long long)tile->count,
                    (unsigned long long)rows);
    return KPLACE_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* spectrogram.fft's tables                                                                  */
/* ---------------------------------------------------------------------------------------- */

/*
 * Fills the FFT's tables for N = `n` (a power of two), in double: `window` (N values, the
 * periodic Hann window), `twiddle` (N/2 pairs re, im: exp(-2 pi i k / N)) and `bitrev` (N
 * values: the bit-reversed index of each n over log2(N) bits). Both libraries compute them
 * here, so that their FFTs use the same values bit for bit.
 */
static inline void fft_fill_tables(uint64_t n, double *window, double *twiddle,
                                   uint32_t *bitrev) {
    const double pi = 3.14159265358979323846264338327950288;
    unsigned bits = 0;
    while ((1ull << bits) < n) bits++;
    for (uint64_t i = 0; i < n; i++) {
        window[i] = 0.5 - 0.5 * cos(2.0 * pi * (double)i / (double)n);
        uint32_t r = 0;
        for (unsigned b = 0; b < bits; b++) r |= (uint32_t)((i >> b) & 1u) << (bits - 1 - b);
        bitrev[i] = r;
    }
    for (uint64_t k = 0; k < n / 2; k++) {
        double angle = -2.0 * pi * (double)k / (double)n;
        twiddle[2 * k] = cos(angle);
        twiddle[2 * k + 1] = sin(angle);
    }
}

#endif /* SPECTROGRAM_CONTRACT_H */
