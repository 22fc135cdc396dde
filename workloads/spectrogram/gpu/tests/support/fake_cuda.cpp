// A stand-in for the CUDA driver, built by the tests as a shared object whose soname is
// libcuda.so.1, so that a test process that loads it first has the library's
// dlopen("libcuda.so.1") resolve to it (glibc matches an already loaded object by soname).
//
// Device memory is host memory. cuLaunchKernel runs the kernel at once on the calling thread
// with workloads/radar/kernels/gpu/hostsim's simulator: this file includes its hostsim.cpp (the launcher, the
// shim that makes CUDA C compile as host C++, and the kernels the tests list in the generated
// kernels.inc and table.inc: workloads/spectrogram/kernels/spectrogram.cu), so a launch reads its
// arguments as the device would, by the kernel's own signature.
//
// It checks what the real driver would refuse, or what would fault on a device: a current
// context for every call that needs one (CUDA_ERROR_INVALID_CONTEXT), pushes of contexts that
// are not retained, a launch's grid and block within CUDA's limits and with no dynamic shared
// memory, frees of addresses it did not allocate. It counts every call per thread (the tests
// run in parallel, each on its own thread) and records what it was given, for the tests to
// read through the fake_cuda_* functions at the end; fake_cuda_fail_next makes a call fail.
//
// NVRTC (the real one, in tests/nvrtc.rs) also finds it, by the same soname: see
// cuGetExportTable.
//
// The devices: 0 has compute capability 9.0, 1 has 99.0 (newer than any NVRTC, so the library
// compiles PTX for it), 2 has 9.0 (for tests that must be the first to use a device), 3 has
// 1.0 (older than any NVRTC supports).

#include "hostsim.cpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

namespace {

enum : CUresult {
    kSuccess = 0,
    kInvalidValue = 1,
    kOutOfMemory = 2,
    kNotInitialized = 3,
    kInvalidDevice = 101,
    kInvalidImage = 200,
    kInvalidContext = 201,
    kInvalidHandle = 400,
    kNotFound = 500,
    kLaunchFailed = 719,
};

constexpr int kDevices = 4;
constexpr int kArch[kDevices][2] = {{9, 0}, {99, 0}, {9, 0}, {1, 0}};

struct Context {
    int device;
};
Context g_contexts[kDevices] = {{0}, {1}, {2}, {3}};

struct Module {
    int device;
};

std::atomic<bool> g_initialized{false};
std::atomic<long> g_retained[kDevices];
std::atomic<long> g_module_loads[kDevices];

std::mutex g_lock; // guards what follows
std::set<void *> g_live;
std::string g_images[kDevices];
bool g_image_is_elf[kDevices];

// What one thread did, for the tests (fake_cuda_thread_stats mirrors it in Rust).
struct Stats {
    long calls;
    long allocs;
    long frees;
    long launches;
    long pushes;
    long pops;
    long retains;
    long releases;
    unsigned grid[3];
    unsigned block[3];
    void *stream;
};
thread_local Stats t_stats;
thread_local std::vector<Context *> t_stack;
thread_local std::string t_fail_call;
thread_local CUresult t_fail_result = kSuccess;

// Counts a call; true (with the result in *r) when the test asked for this call to fail.
bool injected(const char *call, CUresult *r) {
    t_stats.calls++;
    if (!t_fail_call.empty() && t_fail_call == call) {
        t_fail_call.clear();
        *r = t_fail_result;
        return true;
    }
    return false;
}

#define FAKE_ENTER(call)                    \
    do {                                    \
        CUresult injected_result;           \
        if (injected(call, &injected_result)) \
            return injected_result;         \
    } while (0)

Context *current() { return t_stack.empty() ? nullptr : t_stack.back(); }

Context *context_of(CUcontext handle) {
    for (Context &c : g_contexts) {
        if (reinterpret_cast<CUcontext>(&c) == handle) return &c;
    }
    return nullptr;
}

const Entry *function_of(CUfunction handle) {
    for (const Entry &e : kEntries) {
        if (reinterpret_cast<CUfunction>(const_cast<Entry *>(&e)) == handle) return &e;
    }
    return nullptr;
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int flags) {
    FAKE_ENTER("cuInit");
    if (flags != 0) return kInvalidValue;
    g_initialized = true;
    return kSuccess;
}

CUresult cuGetErrorName(CUresult error, const char **name) {
    switch (error) {
    case kSuccess: *name = "CUDA_SUCCESS"; return kSuccess;
    case kInvalidValue: *name = "CUDA_ERROR_INVALID_VALUE"; return kSuccess;
    case kOutOfMemory: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return kSuccess;
    case kNotInitialized: *name = "CUDA_ERROR_NOT_INITIALIZED"; return kSuccess;
    case kInvalidDevice: *name = "CUDA_ERROR_INVALID_DEVICE"; return kSuccess;
    case kInvalidImage: *name = "CUDA_ERROR_INVALID_IMAGE"; return kSuccess;
    case kInvalidContext: *name = "CUDA_ERROR_INVALID_CONTEXT"; return kSuccess;
    case kInvalidHandle: *name = "CUDA_ERROR_INVALID_HANDLE"; return kSuccess;
    case kNotFound: *name = "CUDA_ERROR_NOT_FOUND"; return kSuccess;
    case kLaunchFailed: *name = "CUDA_ERROR_LAUNCH_FAILED"; return kSuccess;
    }
    *name = nullptr;
    return kInvalidValue;
}

CUresult cuGetErrorString(CUresult error, const char **text) {
    switch (error) {
    case kSuccess: *text = "no error"; return kSuccess;
    case kInvalidValue: *text = "invalid argument"; return kSuccess;
    case kOutOfMemory: *text = "out of memory"; return kSuccess;
    case kNotInitialized: *text = "initialization error"; return kSuccess;
    case kInvalidDevice: *text = "invalid device ordinal"; return kSuccess;
    case kInvalidImage: *text = "device kernel image is invalid"; return kSuccess;
    case kInvalidContext: *text = "invalid device context"; return kSuccess;
    case kInvalidHandle: *text = "invalid resource handle"; return kSuccess;
    case kNotFound: *text = "named symbol not found"; return kSuccess;
    case kLaunchFailed: *text = "unspecified launch failure"; return kSuccess;
    }
    *text = nullptr;
    return kInvalidValue;
}

CUresult cuDeviceGetCount(int *count) {
    FAKE_ENTER("cuDeviceGetCount");
    if (!g_initialized) return kNotInitialized;
    *count = kDevices;
    return kSuccess;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    FAKE_ENTER("cuDeviceGet");
    if (!g_initialized) return kNotInitialized;
    if (ordinal < 0 || ordinal >= kDevices) return kInvalidDevice;
    *device = ordinal;
    return kSuccess;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice device) {
    FAKE_ENTER("cuDeviceGetAttribute");
    if (device < 0 || device >= kDevices) return kInvalidDevice;
    if (attribute == 75) {
        *value = kArch[device][0];
    } else if (attribute == 76) {
        *value = kArch[device][1];
    } else {
        return kInvalidValue;
    }
    return kSuccess;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
    FAKE_ENTER("cuDevicePrimaryCtxRetain");
    if (!g_initialized) return kNotInitialized;
    if (device < 0 || device >= kDevices) return kInvalidDevice;
    g_retained[device]++;
    t_stats.retains++;
    *context = reinterpret_cast<CUcontext>(&g_contexts[device]);
    return kSuccess;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
    FAKE_ENTER("cuDevicePrimaryCtxRelease_v2");
    if (device < 0 || device >= kDevices) return kInvalidDevice;
    if (g_retained[device].fetch_sub(1) <= 0) {
        g_retained[device]++;
        return kInvalidContext;  // released more often than retained
    }
    t_stats.releases++;
    return kSuccess;
}

CUresult cuCtxPushCurrent_v2(CUcontext handle) {
    FAKE_ENTER("cuCtxPushCurrent_v2");
    Context *c = context_of(handle);
    if (c == nullptr || g_retained[c->device] <= 0) return kInvalidContext;
    t_stack.push_back(c);
    t_stats.pushes++;
    return kSuccess;
}

CUresult cuCtxPopCurrent_v2(CUcontext *handle) {
    FAKE_ENTER("cuCtxPopCurrent_v2");
    if (t_stack.empty()) return kInvalidContext;
    if (handle != nullptr) *handle = reinterpret_cast<CUcontext>(t_stack.back());
    t_stack.pop_back();
    t_stats.pops++;
    return kSuccess;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image) {
    FAKE_ENTER("cuModuleLoadData");
    Context *c = current();
    if (c == nullptr) return kInvalidContext;
    const char *bytes = static_cast<const char *>(image);
    bool elf = std::memcmp(bytes, "\x7f" "ELF", 4) == 0;
    {
        std::lock_guard<std::mutex> guard(g_lock);
        // A CUBIN is recorded by its first 64 bytes; PTX as all of its text.
        g_images[c->device] = elf ? std::string(bytes, 64) : std::string(bytes);
        g_image_is_elf[c->device] = elf;
    }
    if (!elf && std::strstr(bytes, ".entry") == nullptr && std::strstr(bytes, "PTX") == nullptr)
        return kInvalidImage;
    g_module_loads[c->device]++;
    *module = reinterpret_cast<CUmodule>(new Module{c->device});
    return kSuccess;
}

CUresult cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
    FAKE_ENTER("cuModuleGetFunction");
    if (module == nullptr) return kInvalidHandle;
    for (const Entry &e : kEntries) {
        if (std::strcmp(e.name, name) == 0) {
            *function = reinterpret_cast<CUfunction>(const_cast<Entry *>(&e));
            return kSuccess;
        }
    }
    return kNotFound;
}

CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes) {
    FAKE_ENTER("cuMemAlloc_v2");
    if (current() == nullptr) return kInvalidContext;
    if (bytes == 0) return kInvalidValue;
    void *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (p == nullptr) return kOutOfMemory;
    {
        std::lock_guard<std::mutex> guard(g_lock);
        g_live.insert(p);
    }
    t_stats.allocs++;
    *ptr = reinterpret_cast<CUdeviceptr>(p);
    return kSuccess;
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
    FAKE_ENTER("cuMemFree_v2");
    if (current() == nullptr) return kInvalidContext;
    void *p = reinterpret_cast<void *>(ptr);
    {
        std::lock_guard<std::mutex> guard(g_lock);
        if (g_live.erase(p) != 1) return kInvalidValue;
    }
    std::free(p);
    t_stats.frees++;
    return kSuccess;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
    FAKE_ENTER("cuMemcpyHtoD_v2");
    if (current() == nullptr) return kInvalidContext;
    std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
    return kSuccess;
}

CUresult cuLaunchKernel(CUfunction function, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz,
                        unsigned int shared_bytes, CUstream stream, void **params,
                        void **extra) {
    FAKE_ENTER("cuLaunchKernel");
    if (current() == nullptr) return kInvalidContext;
    const Entry *entry = function_of(function);
    if (entry == nullptr) return kInvalidHandle;
    unsigned long long threads = 1ull * bx * by * bz;
    if (gx == 0 || gy == 0 || gz == 0 || gx > 0x7fffffffu || gy > 65535 || gz > 65535 ||
        threads == 0 || threads > 1024 || bz > 64 || shared_bytes != 0 || extra != nullptr ||
        params == nullptr)
        return kInvalidValue;
    t_stats.launches++;
    t_stats.grid[0] = gx;
    t_stats.grid[1] = gy;
    t_stats.grid[2] = gz;
    t_stats.block[0] = bx;
    t_stats.block[1] = by;
    t_stats.block[2] = bz;
    t_stats.stream = stream;
    const unsigned grid[3] = {gx, gy, gz};
    const unsigned block[3] = {bx, by, bz};
    return kp_hostsim_launch(entry->name, grid, block, params, entry->arity) == kOk
               ? kSuccess
               : kLaunchFailed;
}

// NVRTC 13 opens libcuda.so.1 itself for the driver's compute cache ("nvrtc cache"), calling
// cuInit and then this private entry point; without it NVRTC would call a null pointer. The
// fake has no export tables, which NVRTC takes as "no cache".
CUresult cuGetExportTable(const void **table, const void *id) {
    (void)id;
    if (table != nullptr) *table = nullptr;
    return 801;  // CUDA_ERROR_NOT_SUPPORTED
}

// What tests/gpu.rs calls besides the library (so that it can be tried on this fake too).

CUresult cuDriverGetVersion(int *version) {
    *version = 13000;
    return kSuccess;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
    FAKE_ENTER("cuMemcpyDtoH_v2");
    if (current() == nullptr) return kInvalidContext;
    std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
    return kSuccess;
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t bytes) {
    FAKE_ENTER("cuMemsetD8_v2");
    if (current() == nullptr) return kInvalidContext;
    std::memset(reinterpret_cast<void *>(dst), value, bytes);
    return kSuccess;
}

CUresult cuStreamCreate(CUstream *stream, unsigned int flags) {
    FAKE_ENTER("cuStreamCreate");
    (void)flags;
    if (current() == nullptr) return kInvalidContext;
    *stream = reinterpret_cast<CUstream>(new char(0));
    return kSuccess;
}

// Launches ran when they were enqueued: nothing to wait for.
CUresult cuStreamSynchronize(CUstream stream) {
    FAKE_ENTER("cuStreamSynchronize");
    (void)stream;
    return kSuccess;
}

CUresult cuStreamDestroy_v2(CUstream stream) {
    FAKE_ENTER("cuStreamDestroy_v2");
    delete reinterpret_cast<char *>(stream);
    return kSuccess;
}

// ---- For the tests ----------------------------------------------------------------------

void fake_cuda_thread_stats(Stats *out) { *out = t_stats; }

// The next call named `call` on this thread fails with `result`.
void fake_cuda_fail_next(const char *call, int result) {
    t_fail_call = call;
    t_fail_result = result;
}

long fake_cuda_module_loads(int device) { return g_module_loads[device]; }

long fake_cuda_retained(int device) { return g_retained[device]; }

// Contexts pushed on this thread and not popped.
long fake_cuda_stack_depth(void) { return static_cast<long>(t_stack.size()); }

// The image last loaded on `device`: copied into buf (up to len bytes), its length returned;
// *elf says whether it was a CUBIN (then only its first 64 bytes are kept).
size_t fake_cuda_image(int device, char *buf, size_t len, int *elf) {
    std::lock_guard<std::mutex> guard(g_lock);
    const std::string &image = g_images[device];
    std::memcpy(buf, image.data(), image.size() < len ? image.size() : len);
    *elf = g_image_is_elf[device] ? 1 : 0;
    return image.size();
}
}
