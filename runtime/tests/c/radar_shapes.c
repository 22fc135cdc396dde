/*
 * Stand-ins for the radar kernels, written in plain C against kplace.h, for the runtime's
 * tests on the simulated GPU (kplace::cuda::sim). They take the radar graph's ports, shapes,
 * splits and parameters, and do simple, exactly checkable arithmetic instead of the signal
 * processing, so the real graph (workloads/radar/graph.yaml) and the real placements run at full size
 * through the planner's transfers, the executor's streams and fences and the simulated GPU's
 * counters, without a GPU and in milliseconds per frame:
 *
 *   radar.range_fft    ci16 [M, N] -> cf32 [N, M]   out[k, m] = (I, Q) of sample k of chirp m;
 *                                                   splits along axis 0 (chirps)
 *   radar.doppler_fft  cf32 [N, M] -> f32 [N, M]    out = re^2 + im^2
 *   radar.cfar         f32 [N, M]  -> detections    every cell with power > 0, row-major,
 *                                                   the first `capacity` kept, the rest counted
 *   radar.cluster      detections  -> detections    the list, truncated to its capacity
 *
 * Each is offered as a CPU kernel and as a "CUDA" kernel over the simulated device's memory
 * (host memory); on a real GPU they must not be used. Parameters are accepted and ignored.
 *
 * The lists are written through kplace.h's deprecated names (KPLACE_DTYPE_DETECTIONS,
 * kplace_detection_list), as a library built before the record list was named is: this file
 * is also the test that such a library still builds and runs.
 *
 * Build: cc -shared -fPIC -I runtime/include radar_shapes.c -o libradar_shapes.so
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kplace.h"

typedef struct {
    uint64_t rows, cols; /* of input 0 */
    uint64_t capacity;   /* of output 0, for detection lists */
} shape_t;

static kplace_status fail(char *error, size_t len, const char *msg) {
    snprintf(error, len, "%s", msg);
    return KPLACE_ERR_INVALID_ARGUMENT;
}

static kplace_status make(const kplace_kernel_config *c, kplace_dtype in, kplace_dtype out,
                          int splits, void **state, char *error, size_t len) {
    if (c->n_inputs != 1 || c->inputs[0].dtype != in)
        return fail(error, len, "input 0 has the wrong dtype");
    if (c->n_outputs != 1 || c->outputs[0].dtype != out)
        return fail(error, len, "output 0 has the wrong dtype");
    if (c->split_axis != KPLACE_SPLIT_NONE && (!splits || c->split_axis != 0))
        return fail(error, len, "this kernel splits only along axis 0, if at all");
    shape_t *s = malloc(sizeof *s);
    if (!s) return KPLACE_ERR_OUT_OF_MEMORY;
    s->rows = c->inputs[0].shape[0];
    s->cols = c->inputs[0].rank > 1 ? c->inputs[0].shape[1] : 0;
    s->capacity = c->outputs[0].shape[0];
    *state = s;
    return KPLACE_OK;
}

static kplace_status range_create(const kplace_kernel_config *c, void **state, char *error,
                                  size_t len) {
    return make(c, KPLACE_DTYPE_CI16, KPLACE_DTYPE_CF32, 1, state, error, len);
}

static kplace_status doppler_create(const kplace_kernel_config *c, void **state, char *error,
                                    size_t len) {
    return make(c, KPLACE_DTYPE_CF32, KPLACE_DTYPE_F32, 0, state, error, len);
}

static kplace_status cfar_create(const kplace_kernel_config *c, void **state, char *error,
                                 size_t len) {
    return make(c, KPLACE_DTYPE_F32, KPLACE_DTYPE_DETECTIONS, 0, state, error, len);
}

static kplace_status cluster_create(const kplace_kernel_config *c, void **state, char *error,
                                    size_t len) {
    return make(c, KPLACE_DTYPE_DETECTIONS, KPLACE_DTYPE_DETECTIONS, 0, state, error, len);
}

static uint64_t no_workspace(const void *state) {
    (void)state;
    return 0;
}

/* Chirp-major samples [M, N] to range-major pairs [N, M], for the tile's chirps. */
static kplace_status range_launch(void *state, const kplace_launch_args *a, char *error,
                                  size_t len) {
    const shape_t *s = state;
    uint64_t chirps = s->rows, samples = s->cols;
    if (a->tile.begin + a->tile.count > chirps) return fail(error, len, "tile out of range");
    const int16_t *in = a->inputs[0].data;
    float *out = a->outputs[0].data;
    for (uint64_t m = a->tile.begin; m < a->tile.begin + a->tile.count; m++)
        for (uint64_t k = 0; k < samples; k++) {
            out[2 * (k * chirps + m)] = in[2 * (m * samples + k)];
            out[2 * (k * chirps + m) + 1] = in[2 * (m * samples + k) + 1];
        }
    return KPLACE_OK;
}

static kplace_status doppler_launch(void *state, const kplace_launch_args *a, char *error,
                                    size_t len) {
    (void)error;
    (void)len;
    const shape_t *s = state;
    const float *in = a->inputs[0].data;
    float *out = a->outputs[0].data;
    for (uint64_t i = 0; i < s->rows * s->cols; i++)
        out[i] = in[2 * i] * in[2 * i] + in[2 * i + 1] * in[2 * i + 1];
    return KPLACE_OK;
}

static kplace_status cfar_launch(void *state, const kplace_launch_args *a, char *error,
                                 size_t len) {
    (void)error;
    (void)len;
    const shape_t *s = state;
    const float *power = a->inputs[0].data;
    kplace_detection_list *list = a->outputs[0].data;
    uint32_t count = 0, overflow = 0;
    for (uint64_t r = 0; r < s->rows; r++)
        for (uint64_t c = 0; c < s->cols; c++) {
            float p = power[r * s->cols + c];
            if (!(p > 0.0f)) continue;
            if (count < s->capacity) {
                list->records[count].range_bin = (uint32_t)r;
                list->records[count].doppler_bin = (uint32_t)c;
                list->records[count].power = p;
                count++;
            } else {
                overflow++;
            }
        }
    list->count = count;
    list->capacity = (uint32_t)s->capacity;
    list->overflow = overflow;
    list->reserved = 0;
    return KPLACE_OK;
}

static kplace_status cluster_launch(void *state, const kplace_launch_args *a, char *error,
                                    size_t len) {
    const shape_t *s = state;
    const kplace_detection_list *in = a->inputs[0].data;
    kplace_detection_list *out = a->outputs[0].data;
    if (in->count > s->rows) return fail(error, len, "input count exceeds its capacity");
    uint32_t kept = in->count < s->capacity ? in->count : (uint32_t)s->capacity;
    memcpy(out->records, in->records, kept * sizeof(kplace_detection));
    out->count = kept;
    out->capacity = (uint32_t)s->capacity;
    out->overflow = in->overflow + (in->count - kept);
    out->reserved = 0;
    return KPLACE_OK;
}

static void destroy(void *state) { free(state); }

#define BOTH(name, create, launch)                                                             \
    {name, KPLACE_DEVICE_CPU, KPLACE_MEMORY_HOST, 1, 1, create, no_workspace, launch, destroy}, \
    {                                                                                          \
        name, KPLACE_DEVICE_CUDA, KPLACE_MEMORY_DEVICE, 1, 1, create, no_workspace, launch,    \
            destroy                                                                            \
    }

static const kplace_kernel kernels[] = {
    BOTH("radar.range_fft", range_create, range_launch),
    BOTH("radar.doppler_fft", doppler_create, doppler_launch),
    BOTH("radar.cfar", cfar_create, cfar_launch),
    BOTH("radar.cluster", cluster_create, cluster_launch),
};

static const kplace_library library = {KPLACE_ABI_VERSION, 8, "radar-shapes", kernels};

const kplace_library *kplace_library_entry(void) { return &library; }
