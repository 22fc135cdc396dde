/*
 * kplace.h: the C ABI between the kplace runtime and kernel libraries.
 *
 * This header is the only contract between the runtime and a kernel library. A library may be
 * written in C, C++, CUDA or Rust; it is a shared object that exports one symbol,
 * KPLACE_ENTRY_SYMBOL, returning a table of kernels. docs/abi.md explains every rule here
 * with a worked example in C.
 *
 * Rules every library follows:
 *  - The table and every string in it live as long as the library is loaded.
 *  - No function aborts, throws, or unwinds across this boundary: failures are a status code
 *    plus text written into the caller's buffer (always NUL-terminated, truncated if needed).
 *  - launch never allocates: memory it needs beyond its inputs and outputs is the workspace,
 *    whose size the kernel states once after create, and which the runtime owns.
 *  - launch may be called concurrently on one state for disjoint tiles of a split stage, so a
 *    kernel keeps every mutable scratch byte in the workspace, never in its state.
 *  - A stateful kernel (version 2: KPLACE_KERNEL_STATEFUL) keeps what it carries from one frame
 *    to the next in the carry the runtime gives each launch, never in its state: the runtime
 *    runs such a stage's launches one frame at a time, in the order frames began.
 *  - A CPU kernel runs to completion on the calling thread. A CUDA kernel only enqueues work on
 *    the stream it is given and returns; it never synchronizes. CUDA kernels run in the
 *    device's primary context, which the runtime makes current before create and launch.
 */
#ifndef KPLACE_H
#define KPLACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes. The runtime loads libraries built against any version
 * from KPLACE_ABI_MIN_VERSION to this one, and refuses others. Version 2 appended fields to
 * kplace_kernel (flags, carry_bytes) and kplace_launch_args (the carry and the frame's
 * number), and raised KPLACE_MAX_RANK from 4 to 8; a version 1 library keeps the shorter
 * kplace_kernel_v1, kplace_tensor_desc_v1 and kplace_tensor_v1 layouts, and the runtime gives
 * it tensors in them. */
#define KPLACE_ABI_VERSION 2u
#define KPLACE_ABI_MIN_VERSION 1u

/* The symbol every kernel library exports: `const kplace_library *kplace_library_entry(void)`. */
#define KPLACE_ENTRY_SYMBOL "kplace_library_entry"

/* Most dimensions a tensor may have (4 in version 1: see kplace_tensor_desc_v1). */
#define KPLACE_MAX_RANK 8u
#define KPLACE_MAX_RANK_V1 4u

/* Status codes returned by create and launch. Anything but KPLACE_OK carries error text. */
typedef int32_t kplace_status;
#define KPLACE_OK 0
#define KPLACE_ERR_INVALID_ARGUMENT 1 /* a parameter, shape or dtype the kernel cannot take */
#define KPLACE_ERR_OUT_OF_MEMORY 2    /* create could not allocate its state */
#define KPLACE_ERR_BACKEND 3          /* the underlying library (FFTW, cuFFT, CUDA) failed */
#define KPLACE_ERR_INTERNAL 4         /* a bug in the kernel, e.g. a caught panic */

/* Where a kernel runs. */
typedef enum kplace_device_kind {
    KPLACE_DEVICE_CPU = 0,
    KPLACE_DEVICE_CUDA = 1,
} kplace_device_kind;

/* Where a tensor's bytes live. Pinned host memory counts as HOST. */
typedef enum kplace_memory_space {
    KPLACE_MEMORY_HOST = 0,
    KPLACE_MEMORY_DEVICE = 1,
} kplace_memory_space;

/* Element types. Complex types store real then imaginary parts, interleaved. */
typedef enum kplace_dtype {
    KPLACE_DTYPE_CI16 = 0,       /* complex int16: I then Q, 4 bytes */
    KPLACE_DTYPE_CF32 = 1,       /* complex float32: 8 bytes */
    KPLACE_DTYPE_F32 = 2,        /* float32: 4 bytes */
    KPLACE_DTYPE_RECORDS = 3,    /* a kplace_record_list of shape [capacity] */
    /* Added within version 1 (no layout changed; a library refuses any dtype it does not
     * take at create). Little-endian throughout. */
    KPLACE_DTYPE_I8 = 4,         /* int8: 1 byte */
    KPLACE_DTYPE_I16 = 5,        /* int16: 2 bytes */
    KPLACE_DTYPE_I32 = 6,        /* int32: 4 bytes */
    KPLACE_DTYPE_F16 = 7,        /* IEEE binary16: 2 bytes */
    KPLACE_DTYPE_F64 = 8,        /* float64: 8 bytes */
    KPLACE_DTYPE_CI8 = 9,        /* complex int8: I then Q, 2 bytes */
    KPLACE_DTYPE_CF16 = 10,      /* complex binary16: 4 bytes */
    KPLACE_DTYPE_CF64 = 11,      /* complex float64: 16 bytes */
    KPLACE_DTYPE_BF16 = 12,      /* bfloat16 (the upper half of a float32): 2 bytes */
} kplace_dtype;

/* The bytes of one record of a record list. */
#define KPLACE_RECORD_BYTES 12

/*
 * One record of a record list: three 32-bit words whose meaning the kernels that write and
 * read the list agree on (the radar's detection: range bin, Doppler bin, power as a float).
 * The runtime moves and compares records as bytes.
 */
typedef struct kplace_record {
    uint32_t words[3];
} kplace_record;

/*
 * A bounded list of records: this header, then `capacity` records. A tensor of dtype
 * KPLACE_DTYPE_RECORDS and shape [capacity] occupies
 * sizeof(kplace_record_list) + capacity * sizeof(kplace_record) bytes.
 * `count` records are valid; `overflow` counts the ones that did not fit (the list then holds
 * the first `capacity` in the producer's documented order).
 */
typedef struct kplace_record_list {
    uint32_t count;
    uint32_t capacity;
    uint32_t overflow;
    uint32_t reserved;
    kplace_record records[];
} kplace_record_list;

/*
 * Deprecated names, kept so that code written against them still builds: the record list was
 * the detection list, and its record the radar's detection. The layout is the same; new code
 * uses KPLACE_DTYPE_RECORDS and kplace_record_list, and declares its own record type.
 */
#define KPLACE_DTYPE_DETECTIONS KPLACE_DTYPE_RECORDS
typedef struct kplace_detection {
    uint32_t range_bin;
    uint32_t doppler_bin;
    float power;
} kplace_detection;
typedef struct kplace_detection_list {
    uint32_t count;
    uint32_t capacity;
    uint32_t overflow;
    uint32_t reserved;
    kplace_detection records[];
} kplace_detection_list;

/* A tensor's shape, type and place, without its bytes: what create sees. */
typedef struct kplace_tensor_desc {
    kplace_dtype dtype;
    kplace_memory_space memory;
    uint32_t rank;
    uint32_t reserved;
    uint64_t shape[KPLACE_MAX_RANK]; /* row-major; entries past rank are 0 */
    uint64_t bytes;                  /* total size in bytes */
} kplace_tensor_desc;

/* A tensor with its bytes: what launch sees. */
typedef struct kplace_tensor {
    kplace_tensor_desc desc;
    void *data; /* host or device address, per desc.memory; aligned to 64 bytes */
} kplace_tensor;

/* What a version 1 library sees instead: the same fields, at most 4 dimensions. The runtime
 * refuses a tensor of more dimensions for a version 1 kernel. */
typedef struct kplace_tensor_desc_v1 {
    kplace_dtype dtype;
    kplace_memory_space memory;
    uint32_t rank;
    uint32_t reserved;
    uint64_t shape[KPLACE_MAX_RANK_V1];
    uint64_t bytes;
} kplace_tensor_desc_v1;

typedef struct kplace_tensor_v1 {
    kplace_tensor_desc_v1 desc;
    void *data;
} kplace_tensor_v1;

/* One parameter from the graph file, as text (`pfa: 1e-6` arrives as "pfa", "1e-6"). */
typedef struct kplace_param {
    const char *name;
    const char *value;
} kplace_param;

/* No split: the stage runs once per frame over its whole input. */
#define KPLACE_SPLIT_NONE UINT32_MAX

/* Everything create needs to build one state (one per stage and frame slot). */
typedef struct kplace_kernel_config {
    const kplace_param *params;
    const kplace_tensor_desc *inputs;
    const kplace_tensor_desc *outputs;
    uint32_t n_params;
    uint32_t n_inputs;
    uint32_t n_outputs;
    uint32_t split_axis;     /* axis of input 0 that launches tile, or KPLACE_SPLIT_NONE */
    uint64_t tile;           /* indices per tile along split_axis; it divides that dimension */
    uint32_t device_ordinal; /* CUDA device for CUDA kernels; 0 for CPU kernels */
    uint32_t reserved;
} kplace_kernel_config;

/* The part of the split axis one launch covers: indices [begin, begin + count). */
typedef struct kplace_tile {
    uint64_t begin;
    uint64_t count;
} kplace_tile;

/* kplace_launch_args.carry_flags (version 2). */
#define KPLACE_CARRY_FRESH 1u /* the carry is all zeros: the stream began, restarted, or a frame
                                 was lost under KPLACE_KERNEL_RESET_ON_GAP */

/* Everything one launch needs. */
typedef struct kplace_launch_args {
    const kplace_tensor *inputs;
    const kplace_tensor *outputs;
    uint32_t n_inputs;
    uint32_t n_outputs;
    void *workspace;          /* workspace_bytes bytes, 64-byte aligned, in the kernel's memory */
    uint64_t workspace_bytes;
    void *stream;             /* a CUstream for CUDA kernels; NULL for CPU kernels */
    kplace_tile tile;         /* the whole axis when the stage is not split */
    /* Version 2. A version 1 library reads only the fields above. */
    void *carry;              /* a stateful kernel's carry_bytes bytes, 64-byte aligned, in the
                                 kernel's memory, kept from the stage's previous frame; NULL
                                 for a stateless kernel */
    uint64_t carry_bytes;
    uint64_t frame;           /* the frame's number as the source gave it */
    uint64_t frames_missing;  /* frames lost since the carry's previous launch (0 after a reset) */
    uint32_t carry_flags;     /* KPLACE_CARRY_* */
    uint32_t reserved2;
} kplace_launch_args;

/* kplace_kernel.flags (version 2). */
#define KPLACE_KERNEL_STATEFUL 1u     /* carries state across frames (see carry_bytes) */
#define KPLACE_KERNEL_RESET_ON_GAP 2u /* after lost frames the runtime zeroes the carry and sets
                                         KPLACE_CARRY_FRESH; without it the carry is kept and
                                         frames_missing says how many frames to account for
                                         (a FIR zero-fills them) */

/* One kernel a library offers. */
typedef struct kplace_kernel {
    const char *name;          /* logical name shared by backends, e.g. "radar.range_fft" */
    kplace_device_kind device; /* where it runs */
    kplace_memory_space memory; /* where its inputs and outputs must live */
    uint32_t n_inputs;
    uint32_t n_outputs;
    /* Build a state for one stage and frame slot; validate params and shapes. */
    kplace_status (*create)(const kplace_kernel_config *config, void **state, char *error,
                            size_t error_len);
    /* Workspace bytes one concurrent launch on this state needs (0 for none). */
    uint64_t (*workspace_bytes)(const void *state);
    /* Run (CPU) or enqueue (CUDA) the kernel on one tile. */
    kplace_status (*launch)(void *state, const kplace_launch_args *args, char *error,
                            size_t error_len);
    /* Release a state from create. Never fails; NULL is a no-op. */
    void (*destroy)(void *state);
    /* Version 2. */
    uint32_t flags;            /* KPLACE_KERNEL_* */
    uint32_t reserved;
    /* Bytes a stateful kernel carries from frame to frame (NULL or 0: stateless). The runtime
     * owns them, one carry per stage and pipeline, zeroed at the start of the stream. */
    uint64_t (*carry_bytes)(const void *state);
} kplace_kernel;

/* A version 1 library's table entry: kplace_kernel up to destroy. */
typedef struct kplace_kernel_v1 {
    const char *name;
    kplace_device_kind device;
    kplace_memory_space memory;
    uint32_t n_inputs;
    uint32_t n_outputs;
    kplace_status (*create)(const kplace_kernel_config *config, void **state, char *error,
                            size_t error_len);
    uint64_t (*workspace_bytes)(const void *state);
    kplace_status (*launch)(void *state, const kplace_launch_args *args, char *error,
                            size_t error_len);
    void (*destroy)(void *state);
} kplace_kernel_v1;

/* The table a library's entry symbol returns. abi_version must stay the first field. */
typedef struct kplace_library {
    uint32_t abi_version; /* KPLACE_ABI_VERSION the library was built against */
    uint32_t n_kernels;
    const char *name;     /* the library's name, for messages and plans */
    const kplace_kernel *kernels; /* kplace_kernel_v1 entries when abi_version is 1 */
} kplace_library;

typedef const kplace_library *(*kplace_library_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* KPLACE_H */
