/*
 * spectrogram_gpu.c: the spectrogram's kernels on CUDA, written against kplace.h alone (C11,
 * POSIX dlopen and pthreads, libm). Library name "kplace-spectrogram-gpu".
 *
 * The same three kernels as spectrogram.c (the CPU library), with the same names, ports,
 * shapes, parameters, split rules, numerics and error messages, as CUDA kernels
 * (KPLACE_DEVICE_CUDA) whose inputs and outputs live in device memory (KPLACE_MEMORY_DEVICE).
 * The checks and their messages, and the FFT's tables, are the same code as spectrogram.c's:
 * both include spectrogram_contract.h (beside this file), each passing its memory space.
 *
 *   spectrogram.fft      ci16 [M, N] -> cf32 [M, N]
 *       Each row times the periodic Hann window w[n] = 0.5 - 0.5 cos(2 pi n / N), then the
 *       N-point forward DFT, unnormalised, no shift, by the same radix-2 FFT as spectrogram.c.
 *       N must be a power of two, 2..=4096: the GPU variant's limit (one row in a block's
 *       shared memory); the CPU library goes to 65536. create computes the window, twiddles and
 *       bit-reversal table in double and uploads them once (cuMemAlloc + cuMemcpyHtoD, then
 *       cuStreamSynchronize of the legacy stream, which the copy's DMA may still be on).
 *       Parameters: none. Split: along axis 0 (rows), any tile dividing M; or none.
 *   spectrogram.power    cf32 [M, N] -> f32 [M, N]
 *       re * re + im * im in double, rounded once. Parameters: none. Split: as fft.
 *   spectrogram.average  f32 [M, N] -> f32 [N]
 *       scale * (1 / M) * the sum over rows, in double in row order. Parameter: scale (a
 *       finite positive number; default 1). Split: refused.
 *   Workspace: none for any of them.
 *
 * The kernels themselves are CUDA C in spectrogram.cu, embedded here as text (see Building)
 * and compiled by NVRTC at the first create on a device: for that device's architecture
 * (sm_XY, loaded from the CUBIN) when this NVRTC knows it, otherwise as PTX for the newest
 * architecture below it that NVRTC knows (compute_XY), which the driver compiles forward.
 * Options: --fmad=false --ftz=false --prec-div=true --prec-sqrt=true, so that no product and
 * sum fuse and the results equal the CPU library's bit for bit.
 *
 * What create does, in order:
 *  1. Every check that needs no GPU, spectrogram_contract.h's as in spectrogram.c (dtypes,
 *     ranks, shapes, bytes, split, parameters; N's limit), except that every port must be in
 *     device memory. A refusal is KPLACE_ERR_INVALID_ARGUMENT and happens before any CUDA
 *     call.
 *  2. Once per process, under a mutex: dlopen("libcuda.so.1") and cuInit(0). Without a driver:
 *     KPLACE_ERR_BACKEND, "<kernel>: no CUDA driver (libcuda.so.1): <dlerror>".
 *  3. cuDeviceGet(config->device_ordinal) (a device that does not exist is
 *     KPLACE_ERR_INVALID_ARGUMENT) and cuDevicePrimaryCtxRetain: the state holds a reference
 *     on the device's primary context until destroy. The context is pushed (cuCtxPushCurrent)
 *     around everything that needs it, here and in launch and destroy, and popped after.
 *  4. Once per device and process, under the same mutex: dlopen NVRTC (libnvrtc.so.13, then
 *     libnvrtc.so), compile spectrogram.cu, cuModuleLoadData into the primary context and
 *     cuModuleGetFunction for the three kernels. The module is never unloaded: the cache keeps
 *     its own reference on the primary context, as the radar GPU library does.
 *  5. spectrogram.fft only: its tables, in one device allocation.
 * Every failure of a CUDA or NVRTC call is reported as "<kernel>: <call> failed: <error name>:
 * <error string>" (cuGetErrorName/cuGetErrorString, nvrtcGetErrorString; an NVRTC compile
 * error carries NVRTC's log), with KPLACE_ERR_OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY and
 * KPLACE_ERR_BACKEND otherwise.
 *
 * launch checks its arguments and tile as spectrogram.c does, then enqueues one kernel with
 * cuLaunchKernel on (CUstream)args->stream and returns: it never synchronizes and allocates
 * nothing, and only reads its state, so tiles of one state may be enqueued from several threads
 * at once. Grids: fft one block per row of the tile (at most 65535, looping over the rest),
 * min(N / 2, 256) threads; power and average 256 threads per block, one element (bin) per
 * thread, at most 65535 blocks. destroy frees the fft tables (cuMemFree, in the pushed context,
 * from any thread) and releases the primary context.
 *
 * Building. The CUDA source is included as the bytes of a C array initializer from
 * "spectrogram_cu.inc" (found on the include path), ending with a 0 byte. The crate
 * workloads/spectrogram/gpu (kplace-spectrogram-gpu) generates it and builds
 * target/<profile>/libkplace_spectrogram_gpu.so. By hand:
 *
 *   { xxd -i < workloads/spectrogram/kernels/spectrogram.cu; echo ', 0x00'; } > spectrogram_cu.inc
 *   cc -std=c11 -shared -fPIC -I runtime/include -I . \
 *      workloads/spectrogram/kernels/spectrogram_gpu.c -o libspectrogram_gpu.so -ldl -lpthread -lm
 *
 * -DSPECTROGRAM_GPU_ENTRY=name renames the entry function (the crate exports
 * kplace_library_entry from Rust and calls this one). No CUDA header or library is needed to
 * build: the few driver and NVRTC types and functions used are declared below and looked up
 * with dlsym at the first create.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The kernels' names, create's and launch's checks and messages, and the FFT's tables, shared
 * with spectrogram.c; the ports' memory space is this library's (device memory). */
#include "spectrogram_contract.h"

#ifndef SPECTROGRAM_GPU_ENTRY
#define SPECTROGRAM_GPU_ENTRY kplace_library_entry
#endif

/* The largest FFT length spectrogram.fft accepts on the GPU (SPECTROGRAM_FFT_MAX_N in
 * spectrogram.cu: one row of cf32 in a block's static shared memory). */
#define FFT_MAX_N 4096u

/* Threads per block: the FFT's at most (fewer for N < 512), the element-wise kernels'. */
#define FFT_THREADS 256u
#define ELEMENT_THREADS 256u

/* Blocks per grid at most; the kernels loop over what lies beyond. */
#define MAX_BLOCKS 65535u

/* The CUDA C source (spectrogram.cu), NUL-terminated. */
static const unsigned char cu_source[] = {
#include "spectrogram_cu.inc"
};

/* ---------------------------------------------------------------------------------------- */
/* The CUDA driver and NVRTC, declared here and resolved with dlsym                          */
/* ---------------------------------------------------------------------------------------- */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

/* The driver's functions this library calls, each under its exported (versioned) name. */
typedef struct {
    void *handle;
    CUresult (*init)(unsigned int flags);
    CUresult (*get_error_name)(CUresult error, const char **name);
    CUresult (*get_error_string)(CUresult error, const char **text);
    CUresult (*device_get_count)(int *count);
    CUresult (*device_get)(CUdevice *device, int ordinal);
    CUresult (*device_get_attribute)(int *value, int attribute, CUdevice device);
    CUresult (*primary_ctx_retain)(CUcontext *context, CUdevice device);
    CUresult (*primary_ctx_release)(CUdevice device);
    CUresult (*ctx_push_current)(CUcontext context);
    CUresult (*ctx_pop_current)(CUcontext *context);
    CUresult (*module_load_data)(CUmodule *module, const void *image);
    CUresult (*module_get_function)(CUfunction *function, CUmodule module, const char *name);
    CUresult (*mem_alloc)(CUdeviceptr *ptr, size_t bytes);
    CUresult (*mem_free)(CUdeviceptr ptr);
    CUresult (*memcpy_htod)(CUdeviceptr dst, const void *src, size_t bytes);
    CUresult (*stream_synchronize)(CUstream stream);
    CUresult (*launch_kernel)(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                              unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                              unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                              void **params, void **extra);
} cuda_api;

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
#define NVRTC_SUCCESS 0

typedef struct {
    void *handle;
    const char *file; /* the name it was opened by */
    const char *(*get_error_string)(nvrtcResult result);
    nvrtcResult (*get_num_supported_archs)(int *count);
    nvrtcResult (*get_supported_archs)(int *archs);
    nvrtcResult (*create_program)(nvrtcProgram *program, const char *source, const char *name,
                                  int n_headers, const char *const *headers,
                                  const char *const *include_names);
    nvrtcResult (*compile_program)(nvrtcProgram program, int n_options,
                                   const char *const *options);
    nvrtcResult (*get_program_log_size)(nvrtcProgram program, size_t *size);
    nvrtcResult (*get_program_log)(nvrtcProgram program, char *log);
    nvrtcResult (*get_ptx_size)(nvrtcProgram program, size_t *size);
    nvrtcResult (*get_ptx)(nvrtcProgram program, char *ptx);
    nvrtcResult (*get_cubin_size)(nvrtcProgram program, size_t *size);
    nvrtcResult (*get_cubin)(nvrtcProgram program, char *cubin);
    nvrtcResult (*destroy_program)(nvrtcProgram *program);
} nvrtc_api;

/* Guards everything below: loading the libraries and the module cache. */
static pthread_mutex_t gpu_lock = PTHREAD_MUTEX_INITIALIZER;

/* Filled once (under gpu_lock) by the first create that finds a driver, never changed after:
 * states exist only once it is, and launch and destroy read it through them. */
static cuda_api cu;
static int cu_initialized; /* cuInit succeeded */
static nvrtc_api nv;

/* One device's loaded kernels, keyed by its primary context; never freed. */
typedef struct module_entry {
    struct module_entry *next;
    CUcontext context;
    CUfunction fft, power, average;
} module_entry;

static module_entry *modules;

/* ---------------------------------------------------------------------------------------- */
/* launch's check of its own                                                                 */
/* ---------------------------------------------------------------------------------------- */

/* spectrogram_contract.h's check_launch, and that the tensors are in device memory. */
static kplace_status check_device_launch(const char *kernel, const void *state,
                                         const kplace_launch_args *args, uint64_t in_bytes,
                                         uint64_t out_bytes, char *error, size_t error_len) {
    kplace_status st = check_launch(kernel, state, args, in_bytes, out_bytes, error, error_len);
    if (st != KPLACE_OK) return st;
    if (args->inputs[0].desc.memory != KPLACE_MEMORY_DEVICE ||
        args->outputs[0].desc.memory != KPLACE_MEMORY_DEVICE)
        return fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                    "%s: launch got a tensor in host memory; its tensors are in device memory",
                    kernel);
    return KPLACE_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* The driver, NVRTC and the module                                                          */
/* ---------------------------------------------------------------------------------------- */

/* A failed driver call: "<kernel>: <call> failed: CUDA_ERROR_X: <text>". */
static kplace_status cuda_fail(const char *kernel, const char *call, CUresult result,
                               char *error, size_t error_len) {
    const char *name = NULL, *text = NULL;
    if (cu.get_error_name == NULL || cu.get_error_name(result, &name) != CUDA_SUCCESS ||
        name == NULL)
        name = "an unknown CUDA error";
    if (cu.get_error_string == NULL || cu.get_error_string(result, &text) != CUDA_SUCCESS ||
        text == NULL)
        text = "no description";
    return fail(result == CUDA_ERROR_OUT_OF_MEMORY ? KPLACE_ERR_OUT_OF_MEMORY
                                                   : KPLACE_ERR_BACKEND,
                error, error_len, "%s: %s failed: %s: %s (error %d)", kernel, call, name, text,
                (int)result);
}

/* A failed NVRTC call: "<kernel>: <call> failed: <nvrtcGetErrorString>". */
static kplace_status nvrtc_fail(const char *kernel, const char *call, nvrtcResult result,
                                char *error, size_t error_len) {
    const char *text = nv.get_error_string != NULL ? nv.get_error_string(result) : NULL;
    return fail(KPLACE_ERR_BACKEND, error, error_len, "%s: %s failed: %s (error %d)", kernel,
                call, text != NULL ? text : "an unknown NVRTC error", (int)result);
}

/* Looks up `symbol` in `handle` into the function pointer at `slot` (of `size` bytes). */
static int resolve(void *handle, const char *symbol, void *slot, size_t size) {
    void *address = dlsym(handle, symbol);
    if (address == NULL || size != sizeof address) return 0;
    memcpy(slot, &address, size); /* POSIX: a data pointer converts to a function pointer */
    return 1;
}

/* In a function returning the name of the first symbol missing, NULL when none is. */
#define RESOLVE(api, field, symbol)                                                  \
    do {                                                                             \
        if (!resolve((api)->handle, symbol, &(api)->field, sizeof (api)->field))     \
            return symbol;                                                           \
    } while (0)

static const char *resolve_driver(cuda_api *api) {
    RESOLVE(api, init, "cuInit");
    RESOLVE(api, get_error_name, "cuGetErrorName");
    RESOLVE(api, get_error_string, "cuGetErrorString");
    RESOLVE(api, device_get_count, "cuDeviceGetCount");
    RESOLVE(api, device_get, "cuDeviceGet");
    RESOLVE(api, device_get_attribute, "cuDeviceGetAttribute");
    RESOLVE(api, primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    RESOLVE(api, primary_ctx_release, "cuDevicePrimaryCtxRelease_v2");
    RESOLVE(api, ctx_push_current, "cuCtxPushCurrent_v2");
    RESOLVE(api, ctx_pop_current, "cuCtxPopCurrent_v2");
    RESOLVE(api, module_load_data, "cuModuleLoadData");
    RESOLVE(api, module_get_function, "cuModuleGetFunction");
    RESOLVE(api, mem_alloc, "cuMemAlloc_v2");
    RESOLVE(api, mem_free, "cuMemFree_v2");
    RESOLVE(api, memcpy_htod, "cuMemcpyHtoD_v2");
    RESOLVE(api, stream_synchronize, "cuStreamSynchronize");
    RESOLVE(api, launch_kernel, "cuLaunchKernel");
    return NULL;
}

static const char *resolve_nvrtc(nvrtc_api *api) {
    RESOLVE(api, get_error_string, "nvrtcGetErrorString");
    RESOLVE(api, get_num_supported_archs, "nvrtcGetNumSupportedArchs");
    RESOLVE(api, get_supported_archs, "nvrtcGetSupportedArchs");
    RESOLVE(api, create_program, "nvrtcCreateProgram");
    RESOLVE(api, compile_program, "nvrtcCompileProgram");
    RESOLVE(api, get_program_log_size, "nvrtcGetProgramLogSize");
    RESOLVE(api, get_program_log, "nvrtcGetProgramLog");
    RESOLVE(api, get_ptx_size, "nvrtcGetPTXSize");
    RESOLVE(api, get_ptx, "nvrtcGetPTX");
    RESOLVE(api, get_cubin_size, "nvrtcGetCUBINSize");
    RESOLVE(api, get_cubin, "nvrtcGetCUBIN");
    RESOLVE(api, destroy_program, "nvrtcDestroyProgram");
    return NULL;
}

#undef RESOLVE

/* Loads libcuda.so.1 and runs cuInit, once. gpu_lock is held. */
static kplace_status load_driver(const char *kernel, char *error, size_t error_len) {
    if (cu.handle == NULL) {
        cuda_api api;
        memset(&api, 0, sizeof api);
        dlerror();
        api.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (api.handle == NULL) {
            const char *why = dlerror();
            return fail(KPLACE_ERR_BACKEND, error, error_len,
                        "%s: no CUDA driver (libcuda.so.1): %s; the GPU variant needs an "
                        "NVIDIA driver (place the stages on cpu otherwise)",
                        kernel, why != NULL ? why : "dlopen failed");
        }
        const char *missing = resolve_driver(&api);
        if (missing != NULL) {
            dlclose(api.handle);
            return fail(KPLACE_ERR_BACKEND, error, error_len,
                        "%s: the CUDA driver (libcuda.so.1) lacks %s; it is too old", kernel,
                        missing);
        }
        cu = api;
    }
    if (!cu_initialized) {
        CUresult r = cu.init(0);
        if (r != CUDA_SUCCESS) return cuda_fail(kernel, "cuInit", r, error, error_len);
        cu_initialized = 1;
    }
    return KPLACE_OK;
}

/* Loads NVRTC, once: libnvrtc.so.13, else libnvrtc.so. gpu_lock is held. */
static kplace_status load_nvrtc(const char *kernel, char *error, size_t error_len) {
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so"};
    char why[2][256];
    if (nv.handle != NULL) return KPLACE_OK;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        nvrtc_api api;
        memset(&api, 0, sizeof api);
        dlerror();
        api.handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (api.handle == NULL) {
            const char *e = dlerror();
            snprintf(why[i], sizeof why[i], "%s", e != NULL ? e : "dlopen failed");
            continue;
        }
        const char *missing = resolve_nvrtc(&api);
        if (missing != NULL) {
            dlclose(api.handle);
            snprintf(why[i], sizeof why[i], "%s lacks %s (too old)", names[i], missing);
            continue;
        }
        api.file = names[i];
        nv = api;
        return KPLACE_OK;
    }
    return fail(KPLACE_ERR_BACKEND, error, error_len,
                "%s: NVRTC could not be loaded (%s; %s): the GPU kernels are compiled at run "
                "time by NVRTC; put the directory of libnvrtc.so.13 and its builtins on "
                "LD_LIBRARY_PATH (`kplace devices --library-path` prints it)",
                kernel, why[0], why[1]);
}

/*
 * Picks what to compile for a device of compute capability `device_arch` (10 * major +
 * minor): native code for it when this NVRTC knows it, else PTX for the newest architecture
 * below it that NVRTC knows. gpu_lock is held and NVRTC loaded.
 */
static kplace_status pick_target(const char *kernel, unsigned device_arch, unsigned *arch,
                                 int *native, char *error, size_t error_len) {
    int count = 0;
    nvrtcResult r = nv.get_num_supported_archs(&count);
    if (r != NVRTC_SUCCESS)
        return nvrtc_fail(kernel, "nvrtcGetNumSupportedArchs", r, error, error_len);
    int *archs = calloc(count > 0 ? (size_t)count : 1, sizeof *archs);
    if (archs == NULL)
        return fail(KPLACE_ERR_OUT_OF_MEMORY, error, error_len,
                    "%s: cannot allocate NVRTC's list of architectures", kernel);
    if (count > 0 && (r = nv.get_supported_archs(archs)) != NVRTC_SUCCESS) {
        free(archs);
        return nvrtc_fail(kernel, "nvrtcGetSupportedArchs", r, error, error_len);
    }
    unsigned best = 0;
    int exact = 0;
    for (int i = 0; i < count; i++) {
        if (archs[i] <= 0) continue;
        unsigned a = (unsigned)archs[i];
        if (a == device_arch) exact = 1;
        if (a < device_arch && a > best) best = a;
    }
    if (exact) {
        *arch = device_arch;
        *native = 1;
    } else if (best != 0) {
        *arch = best;
        *native = 0;
    } else {
        char list[256];
        size_t at = 0;
        list[0] = '\0';
        for (int i = 0; i < count && at < sizeof list; i++)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%d.%d", i == 0 ? "" : ", ",
                                   archs[i] / 10, archs[i] % 10);
        free(archs);
        return fail(KPLACE_ERR_BACKEND, error, error_len,
                    "%s: this NVRTC (%s) cannot compile for compute capability %u.%u (it "
                    "supports %s)",
                    kernel, nv.file, device_arch / 10, device_arch % 10, list);
    }
    free(archs);
    return KPLACE_OK;
}

/* Compiles spectrogram.cu for sm_<arch> (native) or compute_<arch>; *image is the CUBIN or
 * the NUL-terminated PTX, malloc'd. gpu_lock is held and NVRTC loaded. */
static kplace_status compile_source(const char *kernel, unsigned arch, int native,
                                    char **image, char *error, size_t error_len) {
    char arch_option[64];
    snprintf(arch_option, sizeof arch_option, "--gpu-architecture=%s_%u",
             native ? "sm" : "compute", arch);
    const char *options[] = {arch_option, "--fmad=false", "--ftz=false", "--prec-div=true",
                             "--prec-sqrt=true"};
    const int n_options = (int)(sizeof options / sizeof options[0]);
    nvrtcProgram program = NULL;
    kplace_status st = KPLACE_OK;
    *image = NULL;
    nvrtcResult r = nv.create_program(&program, (const char *)cu_source, "spectrogram.cu", 0,
                                      NULL, NULL);
    if (r != NVRTC_SUCCESS) return nvrtc_fail(kernel, "nvrtcCreateProgram", r, error, error_len);
    r = nv.compile_program(program, n_options, options);
    if (r != NVRTC_SUCCESS) {
        size_t size = 0;
        char *log = NULL;
        if (nv.get_program_log_size(program, &size) == NVRTC_SUCCESS && size > 0 &&
            (log = malloc(size)) != NULL && nv.get_program_log(program, log) != NVRTC_SUCCESS) {
            free(log);
            log = NULL;
        }
        const char *text = nv.get_error_string(r);
        st = fail(KPLACE_ERR_BACKEND, error, error_len,
                  "%s: nvrtcCompileProgram failed: %s: NVRTC could not compile spectrogram.cu "
                  "with %s --fmad=false --ftz=false --prec-div=true --prec-sqrt=true:\n%s",
                  kernel, text != NULL ? text : "an unknown NVRTC error", arch_option,
                  log != NULL ? log : "(no log)");
        free(log);
        nv.destroy_program(&program);
        return st;
    }
    size_t size = 0;
    const char *size_call = native ? "nvrtcGetCUBINSize" : "nvrtcGetPTXSize";
    r = native ? nv.get_cubin_size(program, &size) : nv.get_ptx_size(program, &size);
    if (r != NVRTC_SUCCESS) {
        st = nvrtc_fail(kernel, size_call, r, error, error_len);
    } else if (size == 0) {
        st = fail(KPLACE_ERR_BACKEND, error, error_len, "%s: %s returned 0 bytes", kernel,
                  size_call);
    } else if ((*image = malloc(size + 1)) == NULL) {
        st = fail(KPLACE_ERR_OUT_OF_MEMORY, error, error_len,
                  "%s: cannot allocate %llu bytes for the compiled module", kernel,
                  (unsigned long long)size);
    } else {
        r = native ? nv.get_cubin(program, *image) : nv.get_ptx(program, *image);
        (*image)[size] = '\0';
        if (r != NVRTC_SUCCESS) {
            st = nvrtc_fail(kernel, native ? "nvrtcGetCUBIN" : "nvrtcGetPTX", r, error,
                            error_len);
            free(*image);
            *image = NULL;
        }
    }
    nv.destroy_program(&program);
    return st;
}

/* Compiles and loads the kernels into `context` (current), and adds them to the cache with a
 * reference of their own on the primary context. gpu_lock is held. */
static kplace_status load_module(const char *kernel, uint32_t ordinal, CUdevice device,
                                 CUcontext context, const module_entry **out, char *error,
                                 size_t error_len) {
    int major = 0, minor = 0;
    CUresult r = cu.device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                         device);
    if (r == CUDA_SUCCESS)
        r = cu.device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                    device);
    if (r != CUDA_SUCCESS) return cuda_fail(kernel, "cuDeviceGetAttribute", r, error, error_len);
    kplace_status st = load_nvrtc(kernel, error, error_len);
    if (st != KPLACE_OK) return st;
    unsigned arch = 0;
    int native = 0;
    st = pick_target(kernel, (unsigned)(10 * major + minor), &arch, &native, error, error_len);
    if (st != KPLACE_OK) return st;
    char *image = NULL;
    st = compile_source(kernel, arch, native, &image, error, error_len);
    if (st != KPLACE_OK) return st;

    module_entry *entry = calloc(1, sizeof *entry);
    if (entry == NULL) {
        free(image);
        return fail(KPLACE_ERR_OUT_OF_MEMORY, error, error_len,
                    "%s: cannot allocate the module's entry", kernel);
    }
    CUmodule module = NULL;
    r = cu.module_load_data(&module, image);
    free(image);
    if (r != CUDA_SUCCESS) {
        free(entry);
        st = cuda_fail(kernel, "cuModuleLoadData", r, error, error_len);
        /* Say what was loaded, after the driver's reason (truncated to fit). */
        size_t used = error != NULL ? strnlen(error, error_len) : 0;
        if (error != NULL && used + 1 < error_len)
            snprintf(error + used, error_len - used,
                     " (spectrogram.cu as %s_%u for device %u, compute capability %d.%d)",
                     native ? "sm" : "compute", arch, (unsigned)ordinal, major, minor);
        return st;
    }
    static const char *const names[] = {"spectrogram_fft", "spectrogram_power",
                                        "spectrogram_average"};
    CUfunction *slots[] = {&entry->fft, &entry->power, &entry->average};
    for (size_t i = 0; i < 3; i++) {
        r = cu.module_get_function(slots[i], module, names[i]);
        if (r != CUDA_SUCCESS) {
            /* The module stays loaded (a few KiB, in a context this process keeps). */
            free(entry);
            st = cuda_fail(kernel, "cuModuleGetFunction", r, error, error_len);
            size_t used = error != NULL ? strnlen(error, error_len) : 0;
            if (error != NULL && used + 1 < error_len)
                snprintf(error + used, error_len - used, " (%s)", names[i]);
            return st;
        }
    }
    /* The cache's own reference: the module lives as long as the process. */
    CUcontext again = NULL;
    r = cu.primary_ctx_retain(&again, device);
    if (r != CUDA_SUCCESS) {
        free(entry);
        return cuda_fail(kernel, "cuDevicePrimaryCtxRetain", r, error, error_len);
    }
    entry->context = context;
    entry->next = modules;
    modules = entry;
    *out = entry;
    return KPLACE_OK;
}

/* A state's hold on its device: a reference on the primary context, and the kernels. */
typedef struct {
    CUdevice device;
    CUcontext context;
    const module_entry *functions;
} gpu_ref;

/* Opens device `ordinal` for a new state: the driver, a reference on the primary context, and
 * the kernels (compiled and loaded on the first use of the device). */
static kplace_status gpu_open(const char *kernel, uint32_t ordinal, gpu_ref *ref, char *error,
                              size_t error_len) {
    memset(ref, 0, sizeof *ref);
    pthread_mutex_lock(&gpu_lock);
    kplace_status st = load_driver(kernel, error, error_len);
    if (st != KPLACE_OK) goto unlock;
    int count = 0;
    CUresult r = cu.device_get_count(&count);
    if (r != CUDA_SUCCESS) {
        st = cuda_fail(kernel, "cuDeviceGetCount", r, error, error_len);
        goto unlock;
    }
    if (count < 0 || ordinal >= (uint32_t)count) {
        st = fail(KPLACE_ERR_INVALID_ARGUMENT, error, error_len,
                  "%s: CUDA device %u does not exist (%d device(s) found)", kernel,
                  (unsigned)ordinal, count);
        goto unlock;
    }
    CUdevice device = 0;
    r = cu.device_get(&device, (int)ordinal);
    if (r != CUDA_SUCCESS) {
        st = cuda_fail(kernel, "cuDeviceGet", r, error, error_len);
        goto unlock;
    }
    CUcontext context = NULL;
    r = cu.primary_ctx_retain(&context, device);
    if (r != CUDA_SUCCESS) {
        st = cuda_fail(kernel, "cuDevicePrimaryCtxRetain", r, error, error_len);
        goto unlock;
    }
    const module_entry *functions = NULL;
    for (const module_entry *e = modules; e != NULL; e = e->next)
        if (e->context == context) functions = e;
    if (functions == NULL) {
        r = cu.ctx_push_current(context);
        if (r != CUDA_SUCCESS) {
            st = cuda_fail(kernel, "cuCtxPushCurrent", r, error, error_len);
        } else {
            st = load_module(kernel, ordinal, device, context, &functions, error, error_len);
            CUcontext popped = NULL;
            cu.ctx_pop_current(&popped);
        }
    }
    if (st != KPLACE_OK) {
        cu.primary_ctx_release(device);
        goto unlock;
    }
    ref->device = device;
    ref->context = context;
    ref->functions = functions;
unlock:
    pthread_mutex_unlock(&gpu_lock);
    return st;
}

/* Releases what gpu_open acquired; a zeroed ref is a no-op. */
static void gpu_close(gpu_ref *ref) {
    if (ref->context != NULL) cu.primary_ctx_release(ref->device);
    ref->context = NULL;
}

/* Enqueues `function` over `grid` blocks of `block` threads on `stream`. */
static kplace_status enqueue(const char *kernel, const gpu_ref *ref, CUfunction function,
                             unsigned grid, unsigned block, void *stream, void **params,
                             char *error, size_t error_len) {
    CUresult r = cu.ctx_push_current(ref->context);
    if (r != CUDA_SUCCESS) return cuda_fail(kernel, "cuCtxPushCurrent", r, error, error_len);
    r = cu.launch_kernel(function, grid, 1, 1, block, 1, 1, 0, (CUstream)stream, params, NULL);
    CUcontext popped = NULL;
    cu.ctx_pop_current(&popped);
    if (r != CUDA_SUCCESS) return cuda_fail(kernel, "cuLaunchKernel", r, error, error_len);
    return KPLACE_OK;
}

/* Blocks for `items` work items of `threads` each, at most MAX_BLOCKS (the kernels loop). */
static unsigned blocks_for(uint64_t items, unsigned threads) {
    uint64_t blocks = (items + threads - 1) / threads;
    return blocks > MAX_BLOCKS ? MAX_BLOCKS : (unsigned)blocks;
}

/* ---------------------------------------------------------------------------------------- */
/* spectrogram.fft                                                                           */
/* ---------------------------------------------------------------------------------------- */

/* Why FFT_MAX_N is what it is, in the refusal of a longer N. */
#define FFT_MAX_N_WHY                                                                          \
    "the GPU variant's limit: one row in a block's shared memory; the CPU library takes up "   \
    "to 65536"

/* Written once by create; launch only reads it, so concurrent tiles are safe. */
typedef struct {
    gpu_ref gpu;
    uint64_t rows;      /* M */
    uint64_t n;         /* N, a power of two, at most FFT_MAX_N */
    CUdeviceptr tables; /* window (N doubles), twiddle (N doubles), bitrev (N uint32) */
} fft_state;

static void fft_destroy(void *state) {
    fft_state *s = state;
    if (s == NULL) return;
    if (s->tables != 0 && cu.ctx_push_current(s->gpu.context) == CUDA_SUCCESS) {
        /* Destroyed after its last launch completed (ABI rule): nothing reads the tables. */
        cu.mem_free(s->tables);
        CUcontext popped = NULL;
        cu.ctx_pop_current(&popped);
    }
    gpu_close(&s->gpu);
    free(s);
}

/* Computes the tables (spectrogram_contract.h's, as spectrogram.c does) into one host buffer of
 * 20 N bytes, laid out as fft_state's tables. */
static void *fft_tables(uint64_t n) {
    unsigned char *buf = malloc((size_t)n * 20);
    if (buf == NULL) return NULL;
    double *window = (double *)buf, *twiddle = window + n;
    fft_fill_tables(n, window, twiddle, (uint32_t *)(twiddle + n));
    return buf;
}

static kplace_status fft_create(const kplace_kernel_config *config, void **state, char *error,
                                size_t error_len) {
    uint64_t rows = 0, n = 0;
    kplace_status st = check_fft_create(config, state, KPLACE_MEMORY_DEVICE, FFT_MAX_N,
                                        FFT_MAX_N_WHY, &rows, &n, error, error_len);
    if (st != KPLACE_OK) return st;

    /* Everything checked: now the GPU. */
    fft_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return fail(KPLACE_ERR_OUT_OF_MEMORY, error, error_len, "%s: cannot allocate the state",
                    FFT_NAME);
    s->rows = rows;
    s->n = n;
    st = gpu_open(FFT_NAME, config->device_ordinal, &s->gpu, error, error_len);
    if (st != KPLACE_OK) {
        free(s);
        return st;
    }
    void *tables = fft_tables(n);
    if (tables == NULL) {
        fft_destroy(s);
        return fail(KPLACE_ERR_OUT_OF_MEMORY, error, error_len,
                    "%s: cannot allocate the tables for N = %llu", FFT_NAME,
                    (unsigned long long)n);
    }
    CUresult r = cu.ctx_push_current(s->gpu.context);
    if (r != CUDA_SUCCESS) {
        free(tables);
        fft_destroy(s);
        return cuda_fail(FFT_NAME, "cuCtxPushCurrent", r, error, error_len);
    }
    const char *call = "cuMemAlloc";
    r = cu.mem_alloc(&s->tables, (size_t)n * 20);
    if (r == CUDA_SUCCESS) {
        call = "cuMemcpyHtoD";
        r = cu.memcpy_htod(s->tables, tables, (size_t)n * 20);
        /* From pageable memory the copy returns once the bytes are staged, and its DMA runs on
         * the legacy default stream, which the caller's non-blocking streams do not wait for:
         * wait for it, so no launch reads the tables before they land. */
        if (r == CUDA_SUCCESS) {
            call = "cuStreamSynchronize";
            r = cu.stream_synchronize(NULL);
        }
    } else {
        s->tables = 0;
    }
    CUcontext popped = NULL;
    cu.ctx_pop_current(&popped);
    free(tables);
    if (r != CUDA_SUCCESS) {
        fft_destroy(s);
        return cuda_fail(FFT_NAME, call, r, error, error_len);
    }
    *state = s;
    return KPLACE_OK;
}

static kplace_status fft_launch(void *state, const kplace_launch_args *args, char *error,
                                size_t error_len) {
    const fft_state *s = state;
    if (s == NULL) return null_state(FFT_NAME, error, error_len);
    kplace_status st = check_device_launch(FFT_NAME, s, args, s->rows * s->n * 4,
                                           s->rows * s->n * 8, error, error_len);
    if (st != KPLACE_OK) return st;
    st = check_tile(FFT_NAME, &args->tile, s->rows, error, error_len);
    if (st != KPLACE_OK) return st;
    if (args->tile.count == 0) return KPLACE_OK;
    /* The kernel reads and writes only the tile's rows. */
    CUdeviceptr iq = (CUdeviceptr)(uintptr_t)args->inputs[0].data;
    CUdeviceptr spectra = (CUdeviceptr)(uintptr_t)args->outputs[0].data;
    CUdeviceptr window = s->tables, twiddle = s->tables + 8 * s->n,
                bitrev = s->tables + 16 * s->n;
    uint32_t n = (uint32_t)s->n;
    uint64_t begin = args->tile.begin, count = args->tile.count;
    void *params[] = {&iq, &spectra, &window, &twiddle, &bitrev, &n, &begin, &count};
    unsigned threads = n / 2 < FFT_THREADS ? n / 2 : FFT_THREADS;
    unsigned grid = count > MAX_BLOCKS ? MAX_BLOCKS : (unsigned)count;
    return enqueue(FFT_NAME, &s->gpu, s->gpu.functions->fft, grid, threads, args->stream,
                   params, error, error_len);
}

/* ---------------------------------------------------------------------------------------- */
/* spectrogram.power                                                                         */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    gpu_ref gpu;
    uint64_t rows; /* M */
    uint64_t n;    /* N */
} power_state;

static kplace_status power_create(const kplace_kernel_config *config, void **state, char *error,
                                  size_t error_len) {
    uint64_t rows = 0, n = 0;
    kplace_status st =
        check_power_create(config, state, KPLACE_MEMORY_DEVICE, &rows, &n, error, error_len);
    if (st != KPLACE_OK) return st;

    power_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return fail(KPLACE_ERR_OUT_OF_MEMORY, error, error_len, "%s: cannot allocate the state",
                    POWER_NAME);
    s->rows = rows;
    s->n = n;
    st = gpu_open(POWER_NAME, config->device_ordinal, &s->gpu, error, error_len);
    if (st != KPLACE_OK) {
        free(s);
        return st;
    }
    *state = s;
    return KPLACE_OK;
}

static kplace_status power_launch(void *state, const kplace_launch_args *args, char *error,
                                  size_t error_len) {
    const power_state *s = state;
    if (s == NULL) return null_state(POWER_NAME, error, error_len);
    kplace_status st = check_device_launch(POWER_NAME, s, args, s->rows * s->n * 8,
                                           s->rows * s->n * 4, error, error_len);
    if (st != KPLACE_OK) return st;
    st = check_tile(POWER_NAME, &args->tile, s->rows, error, error_len);
    if (st != KPLACE_OK) return st;
    if (args->tile.count == 0) return KPLACE_OK;
    CUdeviceptr spectra = (CUdeviceptr)(uintptr_t)args->inputs[0].data;
    CUdeviceptr power = (CUdeviceptr)(uintptr_t)args->outputs[0].data;
    uint64_t first = args->tile.begin * s->n, total = args->tile.count * s->n;
    void *params[] = {&spectra, &power, &first, &total};
    return enqueue(POWER_NAME, &s->gpu, s->gpu.functions->power,
                   blocks_for(total, ELEMENT_THREADS), ELEMENT_THREADS, args->stream, params,
                   error, error_len);
}

static void plain_destroy(void *state) {
    /* power_state and average_state both start with their gpu_ref. */
    gpu_ref *ref = state;
    if (ref == NULL) return;
    gpu_close(ref);
    free(state);
}

/* ---------------------------------------------------------------------------------------- */
/* spectrogram.average                                                                       */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    gpu_ref gpu;
    uint64_t rows;  /* M */
    uint64_t n;     /* N */
    double factor;  /* scale / M */
} average_state;

static kplace_status average_create(const kplace_kernel_config *config, void **state,
                                    char *error, size_t error_len) {
    uint64_t rows = 0, n = 0;
    double scale = 1.0;
    kplace_status st = check_average_create(config, state, KPLACE_MEMORY_DEVICE, &rows, &n,
                                            &scale, error, error_len);
    if (st != KPLACE_OK) return st;

    average_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return fail(KPLACE_ERR_OUT_OF_MEMORY, error, error_len, "%s: cannot allocate the state",
                    AVERAGE_NAME);
    s->rows = rows;
    s->n = n;
    s->factor = scale * (1.0 / (double)rows);
    st = gpu_open(AVERAGE_NAME, config->device_ordinal, &s->gpu, error, error_len);
    if (st != KPLACE_OK) {
        free(s);
        return st;
    }
    *state = s;
    return KPLACE_OK;
}

static kplace_status average_launch(void *state, const kplace_launch_args *args, char *error,
                                    size_t error_len) {
    const average_state *s = state;
    if (s == NULL) return null_state(AVERAGE_NAME, error, error_len);
    kplace_status st = check_device_launch(AVERAGE_NAME, s, args, s->rows * s->n * 4, s->n * 4,
                                           error, error_len);
    if (st != KPLACE_OK) return st;
    /* Not split: the tile is the whole of axis 0 and is ignored. */
    CUdeviceptr power = (CUdeviceptr)(uintptr_t)args->inputs[0].data;
    CUdeviceptr psd = (CUdeviceptr)(uintptr_t)args->outputs[0].data;
    uint64_t rows = s->rows, n = s->n;
    double factor = s->factor;
    void *params[] = {&power, &psd, &rows, &n, &factor};
    return enqueue(AVERAGE_NAME, &s->gpu, s->gpu.functions->average,
                   blocks_for(n, ELEMENT_THREADS), ELEMENT_THREADS, args->stream, params, error,
                   error_len);
}

/* ---------------------------------------------------------------------------------------- */
/* The table                                                                                 */
/* ---------------------------------------------------------------------------------------- */

static const kplace_kernel kernels[] = {
    {
        .name = FFT_NAME,
        .device = KPLACE_DEVICE_CUDA,
        .memory = KPLACE_MEMORY_DEVICE,
        .n_inputs = 1,
        .n_outputs = 1,
        .create = fft_create,
        .workspace_bytes = no_workspace_bytes,
        .launch = fft_launch,
        .destroy = fft_destroy,
    },
    {
        .name = POWER_NAME,
        .device = KPLACE_DEVICE_CUDA,
        .memory = KPLACE_MEMORY_DEVICE,
        .n_inputs = 1,
        .n_outputs = 1,
        .create = power_create,
        .workspace_bytes = no_workspace_bytes,
        .launch = power_launch,
        .destroy = plain_destroy,
    },
    {
        .name = AVERAGE_NAME,
        .device = KPLACE_DEVICE_CUDA,
        .memory = KPLACE_MEMORY_DEVICE,
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
    .name = "kplace-spectrogram-gpu",
    .kernels = kernels,
};

const kplace_library *SPECTROGRAM_GPU_ENTRY(void) { return &library; }
