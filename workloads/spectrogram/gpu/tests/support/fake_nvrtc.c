/*
 * A stand-in for NVRTC, built by the tests as a shared object whose soname is libnvrtc.so.13,
 * so that a test process that loads it first has the library's dlopen("libnvrtc.so.13")
 * resolve to it. It compiles nothing: it records the source, name and options it is given
 * (fake_nvrtc_last), and returns a placeholder CUBIN (an ELF magic number and the target) or
 * PTX text (naming the target), which the fake driver (fake_cuda.cpp) accepts and which the
 * tests read back. Its supported architectures are 7.5, 8.0, 8.6, 8.9, 9.0 and 10.0.
 * fake_nvrtc_fail_next_compile makes the next compilation on this thread fail with a log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvrtcResult;

#define NVRTC_SUCCESS 0
#define NVRTC_ERROR_INVALID_INPUT 3
#define NVRTC_ERROR_INVALID_PROGRAM 4
#define NVRTC_ERROR_COMPILATION 6

typedef struct fake_program {
    char *source;
    char *name;
    char target[64];
    int native;
    const char *log;
} fake_program;

typedef fake_program *nvrtcProgram;

static const int archs[] = {75, 80, 86, 89, 90, 100};

/* The last compilation's source, name and options (one per line); guarded by being written
 * only by compilations, which the library serializes under its own lock. */
static char *last_source;
static char last_name[256];
static char last_options[1024];
static long compiles;

static _Thread_local int fail_next;

const char *nvrtcGetErrorString(nvrtcResult result) {
    switch (result) {
    case NVRTC_SUCCESS: return "NVRTC_SUCCESS";
    case NVRTC_ERROR_INVALID_INPUT: return "NVRTC_ERROR_INVALID_INPUT";
    case NVRTC_ERROR_INVALID_PROGRAM: return "NVRTC_ERROR_INVALID_PROGRAM";
    case NVRTC_ERROR_COMPILATION: return "NVRTC_ERROR_COMPILATION";
    }
    return "NVRTC_ERROR unknown";
}

nvrtcResult nvrtcVersion(int *major, int *minor) {
    *major = 13;
    *minor = 0;
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetNumSupportedArchs(int *count) {
    *count = (int)(sizeof archs / sizeof archs[0]);
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetSupportedArchs(int *out) {
    memcpy(out, archs, sizeof archs);
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram *program, const char *source, const char *name,
                               int n_headers, const char *const *headers,
                               const char *const *include_names) {
    (void)headers;
    (void)include_names;
    if (program == NULL || source == NULL || n_headers != 0) return NVRTC_ERROR_INVALID_INPUT;
    fake_program *p = calloc(1, sizeof *p);
    if (p == NULL) return NVRTC_ERROR_INVALID_INPUT;
    p->source = strdup(source);
    p->name = strdup(name != NULL ? name : "default_program");
    p->log = "";
    *program = p;
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram p, int n_options, const char *const *options) {
    if (p == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
    free(last_source);
    last_source = strdup(p->source);
    snprintf(last_name, sizeof last_name, "%s", p->name);
    size_t at = 0;
    last_options[0] = '\0';
    for (int i = 0; i < n_options && at < sizeof last_options; i++) {
        at += (size_t)snprintf(last_options + at, sizeof last_options - at, "%s\n", options[i]);
        const char *sm = "--gpu-architecture=sm_", *compute = "--gpu-architecture=compute_";
        if (strncmp(options[i], sm, strlen(sm)) == 0) {
            p->native = 1;
            snprintf(p->target, sizeof p->target, "sm_%s", options[i] + strlen(sm));
        } else if (strncmp(options[i], compute, strlen(compute)) == 0) {
            p->native = 0;
            snprintf(p->target, sizeof p->target, "compute_%s", options[i] + strlen(compute));
        }
    }
    compiles++;
    if (fail_next) {
        fail_next = 0;
        p->log = "spectrogram.cu(1): error: a compilation error the test asked for";
        return NVRTC_ERROR_COMPILATION;
    }
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram p, size_t *size) {
    *size = strlen(p->log) + 1;
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram p, char *log) {
    memcpy(log, p->log, strlen(p->log) + 1);
    return NVRTC_SUCCESS;
}

/* "// fake PTX for compute_90\n" and a NUL. */
static void ptx_text(const fake_program *p, char *out, size_t len) {
    snprintf(out, len, "// fake PTX for %s\n", p->target);
}

nvrtcResult nvrtcGetPTXSize(nvrtcProgram p, size_t *size) {
    char text[128];
    ptx_text(p, text, sizeof text);
    *size = strlen(text) + 1;
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetPTX(nvrtcProgram p, char *ptx) {
    char text[128];
    ptx_text(p, text, sizeof text);
    memcpy(ptx, text, strlen(text) + 1);
    return NVRTC_SUCCESS;
}

/* 128 bytes: the ELF magic number, then "fake CUBIN for sm_90", then zeros. */
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram p, size_t *size) {
    *size = p->native ? 128 : 0;
    return p->native ? NVRTC_SUCCESS : NVRTC_ERROR_INVALID_PROGRAM;
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram p, char *cubin) {
    if (!p->native) return NVRTC_ERROR_INVALID_PROGRAM;
    memset(cubin, 0, 128);
    memcpy(cubin, "\x7f" "ELF", 4);
    snprintf(cubin + 4, 124, "fake CUBIN for %s", p->target);
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram *program) {
    if (program == NULL || *program == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
    free((*program)->source);
    free((*program)->name);
    free(*program);
    *program = NULL;
    return NVRTC_SUCCESS;
}

/* ---- For the tests ------------------------------------------------------------------- */

/* The next compilation on this thread fails (NVRTC_ERROR_COMPILATION, with a log). */
void fake_nvrtc_fail_next_compile(void) { fail_next = 1; }

long fake_nvrtc_compiles(void) { return compiles; }

/* Copies the last compilation's source, name and options (each NUL-terminated, truncated to
 * fit) into the buffers; returns the source's full length. */
size_t fake_nvrtc_last(char *source, size_t source_len, char *name, size_t name_len,
                       char *options, size_t options_len) {
    const char *s = last_source != NULL ? last_source : "";
    snprintf(source, source_len, "%s", s);
    snprintf(name, name_len, "%s", last_name);
    snprintf(options, options_len, "%s", last_options);
    return strlen(s);
}
