/*
 * A kernel library written in plain C against kplace.h, used by the runtime's tests. It shows
 * that the ABI needs nothing but the header, and exercises the executor without FFTW.
 *
 *   test.magnitude2   ci16 [M, N] -> f32 [M, N]   out = scale * (I^2 + Q^2); splits along axis 0
 *   test.column_sum   f32 [M, N]  -> f32 [N]      out[n] = sum over m of in[m, n]
 *
 * Both are offered twice: as CPU kernels, and as "CUDA" kernels over device memory for the
 * runtime's simulated GPU (kplace::cuda::sim), whose device memory is host memory and which
 * runs a launch when its stream reaches it. They exercise the runtime's transfers, streams
 * and fences without a GPU; on a real GPU they must not be used.
 *
 * Build: cc -shared -fPIC -I runtime/include test_kernels.c -o libtest_kernels.so
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kplace.h"

typedef struct {
    uint64_t rows, cols;
    float scale;
    int has_marker;
    int16_t marker; /* a frame whose first I sample equals this fails, to test failure paths */
} state_t;

static kplace_status fail(char *error, size_t len, const char *msg) {
    snprintf(error, len, "%s", msg);
    return KPLACE_ERR_INVALID_ARGUMENT;
}

static kplace_status magnitude2_create(const kplace_kernel_config *c, void **state, char *error,
                                       size_t len) {
    float scale = 1.0f;
    int has_marker = 0;
    long marker = 0;
    for (uint32_t i = 0; i < c->n_params; i++) {
        if (strcmp(c->params[i].name, "scale") == 0) {
            char *end = NULL;
            scale = strtof(c->params[i].value, &end);
            if (end == c->params[i].value || *end != '\0')
                return fail(error, len, "parameter scale is not a number");
        } else if (strcmp(c->params[i].name, "fail_marker") == 0) {
            has_marker = 1;
            marker = strtol(c->params[i].value, NULL, 10);
        } else {
            snprintf(error, len, "unknown parameter %s", c->params[i].name);
            return KPLACE_ERR_INVALID_ARGUMENT;
        }
    }
    if (c->n_inputs != 1 || c->inputs[0].dtype != KPLACE_DTYPE_CI16 || c->inputs[0].rank != 2)
        return fail(error, len, "input 0 must be ci16 [rows, cols]");
    if (c->n_outputs != 1 || c->outputs[0].dtype != KPLACE_DTYPE_F32 ||
        c->outputs[0].shape[0] != c->inputs[0].shape[0] ||
        c->outputs[0].shape[1] != c->inputs[0].shape[1])
        return fail(error, len, "output 0 must be f32 of the input's shape");
    if (c->split_axis != KPLACE_SPLIT_NONE && c->split_axis != 0)
        return fail(error, len, "only axis 0 can be split");
    state_t *s = malloc(sizeof *s);
    if (!s) return KPLACE_ERR_OUT_OF_MEMORY;
    s->rows = c->inputs[0].shape[0];
    s->cols = c->inputs[0].shape[1];
    s->scale = scale;
    s->has_marker = has_marker;
    s->marker = (int16_t)marker;
    *state = s;
    return KPLACE_OK;
}

static uint64_t no_workspace(const void *state) {
    (void)state;
    return 0;
}

static kplace_status magnitude2_launch(void *state, const kplace_launch_args *a, char *error,
                                       size_t len) {
    const state_t *s = state;
    if (a->tile.begin + a->tile.count > s->rows) return fail(error, len, "tile out of range");
    const int16_t *in = a->inputs[0].data;
    float *out = a->outputs[0].data;
    if (s->has_marker && a->tile.begin == 0 && in[0] == s->marker)
        return fail(error, len, "marker frame seen");
    for (uint64_t r = a->tile.begin; r < a->tile.begin + a->tile.count; r++)
        for (uint64_t c = 0; c < s->cols; c++) {
            float i = in[2 * (r * s->cols + c)], q = in[2 * (r * s->cols + c) + 1];
            out[r * s->cols + c] = s->scale * (i * i + q * q);
        }
    return KPLACE_OK;
}

static kplace_status column_sum_create(const kplace_kernel_config *c, void **state, char *error,
                                       size_t len) {
    if (c->n_params != 0) return fail(error, len, "test.column_sum takes no parameters");
    if (c->inputs[0].dtype != KPLACE_DTYPE_F32 || c->inputs[0].rank != 2)
        return fail(error, len, "input 0 must be f32 [rows, cols]");
    if (c->outputs[0].dtype != KPLACE_DTYPE_F32 || c->outputs[0].rank != 1 ||
        c->outputs[0].shape[0] != c->inputs[0].shape[1])
        return fail(error, len, "output 0 must be f32 [cols]");
    state_t *s = malloc(sizeof *s);
    if (!s) return KPLACE_ERR_OUT_OF_MEMORY;
    s->rows = c->inputs[0].shape[0];
    s->cols = c->inputs[0].shape[1];
    s->scale = 1.0f;
    s->has_marker = 0;
    *state = s;
    return KPLACE_OK;
}

static kplace_status column_sum_launch(void *state, const kplace_launch_args *a, char *error,
                                       size_t len) {
    (void)error;
    (void)len;
    const state_t *s = state;
    const float *in = a->inputs[0].data;
    float *out = a->outputs[0].data;
    for (uint64_t c = 0; c < s->cols; c++) {
        double sum = 0.0; /* rows in order: the result is deterministic */
        for (uint64_t r = 0; r < s->rows; r++) sum += in[r * s->cols + c];
        out[c] = (float)sum;
    }
    return KPLACE_OK;
}

static void destroy(void *state) { free(state); }

static const kplace_kernel kernels[] = {
    {"test.magnitude2", KPLACE_DEVICE_CPU, KPLACE_MEMORY_HOST, 1, 1, magnitude2_create,
     no_workspace, magnitude2_launch, destroy},
    {"test.column_sum", KPLACE_DEVICE_CPU, KPLACE_MEMORY_HOST, 1, 1, column_sum_create,
     no_workspace, column_sum_launch, destroy},
    {"test.magnitude2", KPLACE_DEVICE_CUDA, KPLACE_MEMORY_DEVICE, 1, 1, magnitude2_create,
     no_workspace, magnitude2_launch, destroy},
    {"test.column_sum", KPLACE_DEVICE_CUDA, KPLACE_MEMORY_DEVICE, 1, 1, column_sum_create,
     no_workspace, column_sum_launch, destroy},
};

#ifndef TEST_ABI_VERSION
#define TEST_ABI_VERSION KPLACE_ABI_VERSION
#endif
#ifndef TEST_KERNEL_COUNT
#define TEST_KERNEL_COUNT 4
#endif

static const kplace_library library = {TEST_ABI_VERSION, TEST_KERNEL_COUNT, "test-kernels", kernels};

#ifndef TEST_NO_ENTRY
const kplace_library *kplace_library_entry(void) { return &library; }
#else
const kplace_library *not_the_entry(void) { return &library; }
#endif
