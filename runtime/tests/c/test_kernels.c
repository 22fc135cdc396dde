/*
 * A kernel library written in plain C against kplace.h, used by the runtime's tests. It shows
 * that the ABI needs nothing but the header, and exercises the executor without FFTW.
 *
 *   test.magnitude2   ci16 [M, N] -> f32 [M, N]   out = scale * (I^2 + Q^2); splits along axis 0
 *   test.column_sum   f32 [M, N]  -> f32 [N]      out[n] = sum over m of in[m, n]
 *   test.weigh        f32 [M, N], f32 [N] -> f32 [M, N]
 *                                                 out[m, n] = in[m, n] * w[n]; w is meant to be
 *                                                 a constant tensor; splits along axis 0
 *   test.leaky        f32 [...]   -> f64 [...]    y = a * y + x over the whole stream, in
 *                                                 element order, a = 0.999 (ABI 2: stateful);
 *                                                 a lost frame is zero-filled (y decays)
 *   test.leaky_reset  as test.leaky, but a lost frame resets y to 0 (RESET_ON_GAP)
 *
 * The leaky integrators keep y, and the number of the frame they expect next, in their carry,
 * and fail when the runtime's account of the stream (frame, frames_missing, fresh) disagrees
 * with it. Built with TEST_ABI_VERSION=1, the library has a version 1 table of the first four;
 * with LEAKY_CARRY_PAD, the integrators' carry is 32 bytes instead of 16; with
 * LEAKY_FORGETS_LOSSES, they break their own rule: a lost frame leaves y as it was.
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

#ifndef TEST_ABI_VERSION
#define TEST_ABI_VERSION KPLACE_ABI_VERSION
#endif

/* Built with TEST_ABI_VERSION=1, the library reads its tensors in version 1's layout (at most 4
 * dimensions, kplace_tensor_desc_v1 and kplace_tensor_v1), as one compiled against the version 1
 * header does; the runtime must hand it them so. */
#if TEST_ABI_VERSION == 1
typedef kplace_tensor_desc_v1 desc_t;
typedef kplace_tensor_v1 tensor_t;
#else
typedef kplace_tensor_desc desc_t;
typedef kplace_tensor tensor_t;
#endif
#define IN_DESC(c, i) (((const desc_t *)(c)->inputs)[i])
#define OUT_DESC(c, i) (((const desc_t *)(c)->outputs)[i])
#define IN(a, i) (((const tensor_t *)(a)->inputs)[i])
#define OUT(a, i) (((const tensor_t *)(a)->outputs)[i])

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
    if (c->n_inputs != 1 || IN_DESC(c, 0).dtype != KPLACE_DTYPE_CI16 || IN_DESC(c, 0).rank != 2)
        return fail(error, len, "input 0 must be ci16 [rows, cols]");
    if (c->n_outputs != 1 || OUT_DESC(c, 0).dtype != KPLACE_DTYPE_F32 ||
        OUT_DESC(c, 0).shape[0] != IN_DESC(c, 0).shape[0] ||
        OUT_DESC(c, 0).shape[1] != IN_DESC(c, 0).shape[1])
        return fail(error, len, "output 0 must be f32 of the input's shape");
    if (c->split_axis != KPLACE_SPLIT_NONE && c->split_axis != 0)
        return fail(error, len, "only axis 0 can be split");
    state_t *s = malloc(sizeof *s);
    if (!s) return KPLACE_ERR_OUT_OF_MEMORY;
    s->rows = IN_DESC(c, 0).shape[0];
    s->cols = IN_DESC(c, 0).shape[1];
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
    const int16_t *in = IN(a, 0).data;
    float *out = OUT(a, 0).data;
    if (s->has_marker && a->tile.begin == 0 && in[0] == s->marker)
        return fail(error, len, "marker frame seen");
    for (uint64_t r = a->tile.begin; r < a->tile.begin + a->tile.count; r++)
        for (uint64_t c = 0; c < s->cols; c++) {
            float i = in[2 * (r * s->cols + c)], q = in[2 * (r * s->cols + c) + 1];
            out[r * s->cols + c] = s->scale * (i * i + q * q);
        }
    return KPLACE_OK;
}

/* The state of a kernel over input 0's [rows, cols], scale 1 and no marker. */
static kplace_status matrix_state(const desc_t *in, void **state) {
    state_t *s = malloc(sizeof *s);
    if (!s) return KPLACE_ERR_OUT_OF_MEMORY;
    s->rows = in->shape[0];
    s->cols = in->shape[1];
    s->scale = 1.0f;
    s->has_marker = 0;
    *state = s;
    return KPLACE_OK;
}

static kplace_status column_sum_create(const kplace_kernel_config *c, void **state, char *error,
                                       size_t len) {
    if (c->n_params != 0) return fail(error, len, "test.column_sum takes no parameters");
    if (IN_DESC(c, 0).dtype != KPLACE_DTYPE_F32 || IN_DESC(c, 0).rank != 2)
        return fail(error, len, "input 0 must be f32 [rows, cols]");
    if (OUT_DESC(c, 0).dtype != KPLACE_DTYPE_F32 || OUT_DESC(c, 0).rank != 1 ||
        OUT_DESC(c, 0).shape[0] != IN_DESC(c, 0).shape[1])
        return fail(error, len, "output 0 must be f32 [cols]");
    return matrix_state(&IN_DESC(c, 0), state);
}

static kplace_status column_sum_launch(void *state, const kplace_launch_args *a, char *error,
                                       size_t len) {
    (void)error;
    (void)len;
    const state_t *s = state;
    const float *in = IN(a, 0).data;
    float *out = OUT(a, 0).data;
    for (uint64_t c = 0; c < s->cols; c++) {
        double sum = 0.0; /* rows in order: the result is deterministic */
        for (uint64_t r = 0; r < s->rows; r++) sum += in[r * s->cols + c];
        out[c] = (float)sum;
    }
    return KPLACE_OK;
}

#if TEST_ABI_VERSION != 1
static kplace_status weigh_create(const kplace_kernel_config *c, void **state, char *error,
                                  size_t len) {
    if (c->n_params != 0) return fail(error, len, "test.weigh takes no parameters");
    if (IN_DESC(c, 0).dtype != KPLACE_DTYPE_F32 || IN_DESC(c, 0).rank != 2)
        return fail(error, len, "input 0 must be f32 [rows, cols]");
    if (IN_DESC(c, 1).dtype != KPLACE_DTYPE_F32 || IN_DESC(c, 1).rank != 1 ||
        IN_DESC(c, 1).shape[0] != IN_DESC(c, 0).shape[1])
        return fail(error, len, "input 1 must be f32 [cols]");
    if (OUT_DESC(c, 0).bytes != IN_DESC(c, 0).bytes)
        return fail(error, len, "output 0 must be input 0's shape");
    return matrix_state(&IN_DESC(c, 0), state);
}

static kplace_status weigh_launch(void *state, const kplace_launch_args *a, char *error,
                                  size_t len) {
    const state_t *s = state;
    if (a->tile.begin + a->tile.count > s->rows) return fail(error, len, "tile out of range");
    const float *in = IN(a, 0).data, *w = IN(a, 1).data;
    float *out = OUT(a, 0).data;
    for (uint64_t r = a->tile.begin; r < a->tile.begin + a->tile.count; r++)
        for (uint64_t c = 0; c < s->cols; c++) out[r * s->cols + c] = in[r * s->cols + c] * w[c];
    return KPLACE_OK;
}
#endif

static void destroy(void *state) { free(state); }

#if TEST_ABI_VERSION != 1
/* What a leaky integrator carries from frame to frame. */
typedef struct {
    double y;
    uint64_t next_frame; /* the frame it expects next, if no frame is lost */
#ifdef LEAKY_CARRY_PAD
    uint64_t pad[2]; /* another library's layout of the same kernel: its carry cannot move */
#endif
} leaky_carry_t;

typedef struct {
    uint64_t n;
} leaky_t;

static kplace_status leaky_create(const kplace_kernel_config *c, void **state, char *error,
                                  size_t len) {
    if (c->n_params != 0) return fail(error, len, "test.leaky takes no parameters");
    if (c->split_axis != KPLACE_SPLIT_NONE) return fail(error, len, "test.leaky runs whole");
    if (IN_DESC(c, 0).dtype != KPLACE_DTYPE_F32 || OUT_DESC(c, 0).dtype != KPLACE_DTYPE_F64)
        return fail(error, len, "test.leaky takes f32 and writes f64");
    uint64_t n = IN_DESC(c, 0).bytes / 4;
    if (OUT_DESC(c, 0).bytes != n * 8) return fail(error, len, "output must match the input");
    leaky_t *s = malloc(sizeof *s);
    if (!s) return KPLACE_ERR_OUT_OF_MEMORY;
    s->n = n;
    *state = s;
    return KPLACE_OK;
}

static uint64_t leaky_carry_bytes(const void *state) {
    (void)state;
    return sizeof(leaky_carry_t);
}

static kplace_status leaky_launch(void *state, const kplace_launch_args *a, char *error,
                                  size_t len) {
    const leaky_t *s = state;
    leaky_carry_t *carry = a->carry;
    if (!carry || a->carry_bytes < sizeof *carry) return fail(error, len, "no carry");
    const double alpha = 0.999;
    if (a->carry_flags & KPLACE_CARRY_FRESH) {
        if (carry->y != 0.0 || carry->next_frame != 0)
            return fail(error, len, "a fresh carry is not zeroed");
    } else if (a->frame != carry->next_frame + a->frames_missing) {
        snprintf(error, len, "frame %llu arrived, %llu expected with %llu missing",
                 (unsigned long long)a->frame, (unsigned long long)carry->next_frame,
                 (unsigned long long)a->frames_missing);
        return KPLACE_ERR_INVALID_ARGUMENT;
    }
    double y = carry->y;
#ifndef LEAKY_FORGETS_LOSSES
    for (uint64_t k = 0; k < a->frames_missing * s->n; k++) y = alpha * y; /* zero-filled */
#endif
    const float *in = IN(a, 0).data;
    double *out = OUT(a, 0).data;
    for (uint64_t i = 0; i < s->n; i++) {
        y = alpha * y + (double)in[i];
        out[i] = y;
    }
    carry->y = y;
    carry->next_frame = a->frame + 1;
    return KPLACE_OK;
}
#endif

#if TEST_ABI_VERSION == 1
static const kplace_kernel_v1 kernels[] = {
#else
static const kplace_kernel kernels[] = {
#endif
    {"test.magnitude2", KPLACE_DEVICE_CPU, KPLACE_MEMORY_HOST, 1, 1, magnitude2_create,
     no_workspace, magnitude2_launch, destroy},
    {"test.column_sum", KPLACE_DEVICE_CPU, KPLACE_MEMORY_HOST, 1, 1, column_sum_create,
     no_workspace, column_sum_launch, destroy},
    {"test.magnitude2", KPLACE_DEVICE_CUDA, KPLACE_MEMORY_DEVICE, 1, 1, magnitude2_create,
     no_workspace, magnitude2_launch, destroy},
    {"test.column_sum", KPLACE_DEVICE_CUDA, KPLACE_MEMORY_DEVICE, 1, 1, column_sum_create,
     no_workspace, column_sum_launch, destroy},
#if TEST_ABI_VERSION != 1
    {"test.weigh", KPLACE_DEVICE_CPU, KPLACE_MEMORY_HOST, 2, 1, weigh_create, no_workspace,
     weigh_launch, destroy},
    {"test.weigh", KPLACE_DEVICE_CUDA, KPLACE_MEMORY_DEVICE, 2, 1, weigh_create, no_workspace,
     weigh_launch, destroy},
    {"test.leaky", KPLACE_DEVICE_CPU, KPLACE_MEMORY_HOST, 1, 1, leaky_create, no_workspace,
     leaky_launch, destroy, KPLACE_KERNEL_STATEFUL, 0, leaky_carry_bytes},
    {"test.leaky_reset", KPLACE_DEVICE_CPU, KPLACE_MEMORY_HOST, 1, 1, leaky_create, no_workspace,
     leaky_launch, destroy, KPLACE_KERNEL_STATEFUL | KPLACE_KERNEL_RESET_ON_GAP, 0,
     leaky_carry_bytes},
    /* For the simulated GPU, whose device memory is host memory and which runs a launch when
     * its stream reaches it: the carry is device memory, used in turn by each slot's stream. */
    {"test.leaky", KPLACE_DEVICE_CUDA, KPLACE_MEMORY_DEVICE, 1, 1, leaky_create, no_workspace,
     leaky_launch, destroy, KPLACE_KERNEL_STATEFUL, 0, leaky_carry_bytes},
    {"test.leaky_reset", KPLACE_DEVICE_CUDA, KPLACE_MEMORY_DEVICE, 1, 1, leaky_create,
     no_workspace, leaky_launch, destroy, KPLACE_KERNEL_STATEFUL | KPLACE_KERNEL_RESET_ON_GAP, 0,
     leaky_carry_bytes},
#endif
};

#ifndef TEST_KERNEL_COUNT
#define TEST_KERNEL_COUNT (sizeof kernels / sizeof kernels[0])
#endif

static const kplace_library library = {TEST_ABI_VERSION, TEST_KERNEL_COUNT, "test-kernels",
                                       (const kplace_kernel *)kernels};

#ifndef TEST_NO_ENTRY
const kplace_library *kplace_library_entry(void) { return &library; }
#else
const kplace_library *not_the_entry(void) { return &library; }
#endif
