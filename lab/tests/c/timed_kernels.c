/*
 * A kernel library whose CPU kernels take a stated time, for the tests of `kplace tune` on the
 * runtime's simulated GPU (kplace::cuda::sim with a timing model).
 *
 *   timed.front, timed.middle, timed.back   f32 [M, N] -> f32 [M, N]   out = in + 1
 *
 * Each kernel is offered twice. The CPU kernel computes, then sleeps until `cpu_us`
 * microseconds per frame (scaled to the launched tile's share of axis 0) have passed since it
 * began: a stage of known cost that holds a worker as a real kernel does, on any machine,
 * however loaded. The "CUDA" kernel computes on the host when the simulated device's stream
 * reaches it; the simulation's timing model decides how long it takes. Front may be split
 * along axis 0; the others are not. Never use the CUDA kernels on a real GPU.
 *
 * Build: cc -shared -fPIC -I runtime/include timed_kernels.c -o libtimed_kernels.so
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kplace.h"

typedef struct {
    uint64_t rows, cols;
    double cpu_us; /* per frame, on the CPU */
} state_t;

static kplace_status fail(char *error, size_t len, const char *msg) {
    snprintf(error, len, "%s", msg);
    return KPLACE_ERR_INVALID_ARGUMENT;
}

static kplace_status create(const kplace_kernel_config *c, void **state, char *error,
                            size_t len) {
    double cpu_us = 0.0;
    for (uint32_t i = 0; i < c->n_params; i++) {
        if (strcmp(c->params[i].name, "cpu_us") == 0) {
            char *end = NULL;
            cpu_us = strtod(c->params[i].value, &end);
            if (end == c->params[i].value || *end != '\0' || cpu_us < 0.0 || cpu_us > 1e6)
                return fail(error, len, "parameter cpu_us must be 0..1000000 microseconds");
        } else {
            snprintf(error, len, "unknown parameter %s", c->params[i].name);
            return KPLACE_ERR_INVALID_ARGUMENT;
        }
    }
    if (c->n_inputs != 1 || c->inputs[0].dtype != KPLACE_DTYPE_F32 || c->inputs[0].rank != 2)
        return fail(error, len, "input 0 must be f32 [rows, cols]");
    if (c->n_outputs != 1 || c->outputs[0].dtype != KPLACE_DTYPE_F32 ||
        c->outputs[0].rank != 2 || c->outputs[0].shape[0] != c->inputs[0].shape[0] ||
        c->outputs[0].shape[1] != c->inputs[0].shape[1])
        return fail(error, len, "output 0 must be f32 of the input's shape");
    if (c->split_axis != KPLACE_SPLIT_NONE && c->split_axis != 0)
        return fail(error, len, "only axis 0 can be split");
    state_t *s = malloc(sizeof *s);
    if (!s) return KPLACE_ERR_OUT_OF_MEMORY;
    s->rows = c->inputs[0].shape[0];
    s->cols = c->inputs[0].shape[1];
    s->cpu_us = cpu_us;
    *state = s;
    return KPLACE_OK;
}

static uint64_t no_workspace(const void *state) {
    (void)state;
    return 0;
}

static kplace_status add_one(const state_t *s, const kplace_launch_args *a, char *error,
                             size_t len) {
    if (a->tile.begin + a->tile.count > s->rows) return fail(error, len, "tile out of range");
    const float *in = a->inputs[0].data;
    float *out = a->outputs[0].data;
    for (uint64_t i = a->tile.begin * s->cols; i < (a->tile.begin + a->tile.count) * s->cols;
         i++)
        out[i] = in[i] + 1.0f;
    return KPLACE_OK;
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static kplace_status cpu_launch(void *state, const kplace_launch_args *a, char *error,
                                size_t len) {
    const state_t *s = state;
    double until = now_us() + s->cpu_us * (double)a->tile.count / (double)s->rows;
    kplace_status status = add_one(s, a, error, len);
    for (double left = until - now_us(); left > 0.0; left = until - now_us()) {
        struct timespec nap = {(time_t)(left / 1e6), (long)(((long long)left % 1000000) * 1000)};
        if (nanosleep(&nap, NULL) != 0 && errno != EINTR) break;
    }
    return status;
}

static kplace_status gpu_launch(void *state, const kplace_launch_args *a, char *error,
                                size_t len) {
    return add_one(state, a, error, len);
}

static void destroy(void *state) { free(state); }

#define OFFER(name)                                                                          \
    {name, KPLACE_DEVICE_CPU, KPLACE_MEMORY_HOST, 1, 1, create, no_workspace, cpu_launch,    \
     destroy},                                                                               \
    {                                                                                        \
        name, KPLACE_DEVICE_CUDA, KPLACE_MEMORY_DEVICE, 1, 1, create, no_workspace,          \
            gpu_launch, destroy                                                              \
    }

static const kplace_kernel kernels[] = {OFFER("timed.front"), OFFER("timed.middle"),
                                        OFFER("timed.back")};

static const kplace_library library = {KPLACE_ABI_VERSION, sizeof kernels / sizeof kernels[0],
                                       "timed-kernels", kernels};

const kplace_library *kplace_library_entry(void) { return &library; }
