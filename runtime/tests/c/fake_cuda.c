/* A fake libcuda.so: the driver API calls kplace's CUDA layer makes, on one pretend device
 * whose "device memory" is host memory and whose streams run everything at once.
 *
 * It lets tests without a GPU drive runtime/src/cuda/driver.rs through cudarc's dynamic
 * loading exactly as on a GPU machine, and checks what that code promises the driver: the
 * flags it passes (pinned memory not write-combined, non-blocking streams, events without
 * timing), priorities inside the range, and a current context before allocating.
 *
 * FAKE_CUDA_DEVICES=0 makes cuInit fail with CUDA_ERROR_NO_DEVICE, as a driver does on a
 * machine whose GPU is missing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef void (*CUhostFn)(void *);
typedef struct { char bytes[16]; } CUuuid;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_READY = 600,
};

static int initialised;
static int context_refs;
static int the_context; /* its address is the primary context's handle */
static _Thread_local void *current;

#define REQUIRE_INIT() do { if (!initialised) return CUDA_ERROR_NOT_INITIALIZED; } while (0)
#define REQUIRE_CONTEXT() do { \
        REQUIRE_INIT(); \
        if (current != &the_context || context_refs == 0) return CUDA_ERROR_INVALID_CONTEXT; \
    } while (0)

CUresult cuGetErrorString(CUresult e, const char **s) {
    switch (e) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *s = "initialization error"; break;
    case CUDA_ERROR_NO_DEVICE: *s = "no CUDA-capable device is detected"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "invalid device ordinal"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "invalid device context"; break;
    case CUDA_ERROR_NOT_READY: *s = "device not ready"; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *v) { *v = 13000; return CUDA_SUCCESS; }

static int device_count(void) {
    const char *n = getenv("FAKE_CUDA_DEVICES");
    return n ? atoi(n) : 1;
}

CUresult cuInit(unsigned flags) {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (device_count() == 0) return CUDA_ERROR_NO_DEVICE;
    initialised = 1;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *n) { REQUIRE_INIT(); *n = device_count(); return CUDA_SUCCESS; }

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    REQUIRE_INIT();
    if (ordinal < 0 || ordinal >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    REQUIRE_INIT();
    if (d != 0 || len < 1) return CUDA_ERROR_INVALID_VALUE;
    strncpy(name, "Fake GPU", (size_t)len - 1);
    name[len - 1] = 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    REQUIRE_INIT();
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = (size_t)80 << 30;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, int attribute, CUdevice d) {
    REQUIRE_INIT();
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    switch (attribute) {
    case 16: *v = 132; return CUDA_SUCCESS; /* MULTIPROCESSOR_COUNT */
    case 75: *v = 9; return CUDA_SUCCESS;   /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *v = 0; return CUDA_SUCCESS;   /* COMPUTE_CAPABILITY_MINOR */
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice d) {
    REQUIRE_INIT();
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    for (int i = 0; i < 16; i++) u->bytes[i] = (char)(i * 17);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice d) {
    REQUIRE_INIT();
    if (d != 0 || len < 13) return CUDA_ERROR_INVALID_VALUE;
    strncpy(bus, "00000000:3B:00.0", (size_t)len - 1);
    bus[len - 1] = 0;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    REQUIRE_INIT();
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    __atomic_add_fetch(&context_refs, 1, __ATOMIC_SEQ_CST);
    *c = &the_context;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    REQUIRE_INIT();
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    if (__atomic_sub_fetch(&context_refs, 1, __ATOMIC_SEQ_CST) < 0) abort(); /* unbalanced */
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *c) { REQUIRE_INIT(); *c = current; return CUDA_SUCCESS; }

CUresult cuCtxSetCurrent(CUcontext c) {
    REQUIRE_INIT();
    if (c != NULL && c != &the_context) return CUDA_ERROR_INVALID_CONTEXT;
    current = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    REQUIRE_CONTEXT();
    *least = 0;
    *greatest = -5;
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
    REQUIRE_CONTEXT();
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    void *m = malloc(bytes);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)(uintptr_t)m;
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p) { REQUIRE_CONTEXT(); free((void *)(uintptr_t)p); return CUDA_SUCCESS; }

CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
    REQUIRE_CONTEXT();
    /* The runtime reads these buffers on the CPU: write-combined (4) would be a bug. */
    if (flags != 0 || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    *p = malloc(bytes);
    return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFreeHost(void *p) { REQUIRE_INIT(); free(p); return CUDA_SUCCESS; }

/* A stream runs its work at once; it only remembers the priority it was made with. */
typedef struct { int magic; int priority; } fake_stream;
typedef struct { int magic; int pending_queries; } fake_event;
enum { STREAM_MAGIC = 0x57E4, EVENT_MAGIC = 0xE7E7 };

CUresult cuStreamCreateWithPriority(CUstream *s, unsigned flags, int priority) {
    REQUIRE_CONTEXT();
    if (flags != 1 /* CU_STREAM_NON_BLOCKING */ || priority < -5 || priority > 0)
        return CUDA_ERROR_INVALID_VALUE;
    fake_stream *f = malloc(sizeof *f);
    if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
    f->magic = STREAM_MAGIC;
    f->priority = priority;
    *s = f;
    return CUDA_SUCCESS;
}

static int is_stream(CUstream s) { return s && ((fake_stream *)s)->magic == STREAM_MAGIC; }
static int is_event(CUevent e) { return e && ((fake_event *)e)->magic == EVENT_MAGIC; }

CUresult cuStreamDestroy_v2(CUstream s) {
    REQUIRE_INIT();
    if (!is_stream(s)) return CUDA_ERROR_INVALID_HANDLE;
    ((fake_stream *)s)->magic = 0;
    free(s);
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s) { REQUIRE_INIT(); return is_stream(s) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }

CUresult cuEventCreate(CUevent *e, unsigned flags) {
    REQUIRE_CONTEXT();
    if (flags != 2 /* CU_EVENT_DISABLE_TIMING */) return CUDA_ERROR_INVALID_VALUE;
    fake_event *f = calloc(1, sizeof *f);
    if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
    f->magic = EVENT_MAGIC;
    *e = f;
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent e) {
    REQUIRE_INIT();
    if (!is_event(e)) return CUDA_ERROR_INVALID_HANDLE;
    ((fake_event *)e)->magic = 0;
    free(e);
    return CUDA_SUCCESS;
}

/* A recorded event reports "not ready" to its first query, so callers' polling is exercised. */
CUresult cuEventRecord(CUevent e, CUstream s) {
    REQUIRE_INIT();
    if (!is_event(e) || !is_stream(s)) return CUDA_ERROR_INVALID_HANDLE;
    ((fake_event *)e)->pending_queries = 1;
    return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent e) {
    REQUIRE_INIT();
    if (!is_event(e)) return CUDA_ERROR_INVALID_HANDLE;
    fake_event *f = e;
    if (f->pending_queries > 0) { f->pending_queries--; return CUDA_ERROR_NOT_READY; }
    return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
    REQUIRE_INIT();
    if (!is_stream(s) || !is_event(e) || flags != 0) return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, CUstream s) {
    REQUIRE_INIT();
    if (!is_stream(s)) return CUDA_ERROR_INVALID_HANDLE;
    memcpy((void *)(uintptr_t)dst, src, bytes);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, CUstream s) {
    REQUIRE_INIT();
    if (!is_stream(s)) return CUDA_ERROR_INVALID_HANDLE;
    memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return CUDA_SUCCESS;
}

CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data) {
    REQUIRE_INIT();
    if (!is_stream(s) || !fn) return CUDA_ERROR_INVALID_HANDLE;
    fn(data);
    return CUDA_SUCCESS;
}

/* For tests: the primary context's reference count (a leak or double release shows here). */
int fake_cuda_context_refs(void) { return __atomic_load_n(&context_refs, __ATOMIC_SEQ_CST); }
