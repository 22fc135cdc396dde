// The kernels of the Rust GPU libraries (build.rs lists their directories), compiled for the host, and a launcher that runs a
// kernel's grid as loops, taking arguments the way cuLaunchKernel does (an array of pointers
// to the argument values).
//
// A kernel whose source calls __syncthreads (build.rs marks it) runs block by block, every
// thread of the block a fiber (ucontext) on the calling OS thread: the launcher resumes each
// live fiber in turn, and a fiber runs until its next barrier or its end. One round of the
// block's fibers is therefore one barrier interval: no thread passes barrier k before every
// thread that has not exited reached it, which is CUDA's rule. Other kernels run their
// threads one after another, with no fibers.

#include "shim.h"

#include <ucontext.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels.inc"

namespace {

template <class... A, std::size_t... I>
void invoke_with(void (*kernel)(A...), void **params, std::index_sequence<I...>) {
    kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<A>> *>(params[I])...);
}

// Calls `kernel` with its arguments read from `params` (as many as it takes).
template <class... A>
void invoke(void (*kernel)(A...), void **params) {
    invoke_with(kernel, params, std::index_sequence_for<A...>{});
}

template <class... A>
constexpr unsigned arity(void (*)(A...)) {
    return sizeof...(A);
}

struct Entry {
    const char *name;
    // Parameters the kernel takes.
    unsigned arity;
    // Whether its source calls __syncthreads: its blocks then run as fibers.
    bool barriers;
    void (*run)(void **params);
};

#define KP_HOSTSIM_KERNEL(fn, barriers) \
    {#fn, arity(fn), barriers, [](void **params) { invoke(fn, params); }},

const Entry kEntries[] = {
#include "table.inc"
};

// Status codes of kp_hostsim_launch (lib.rs reads them).
enum Status {
    kOk = 0,
    kUnknownKernel = 1,
    kWrongArgumentCount = 2,
    kStrayBarrier = 3,
    kNoFibers = 4,
};

// Stack of one simulated thread: the kernels' frames are small.
constexpr std::size_t kFiberStack = 64 * 1024;

struct Fiber {
    ucontext_t context;
    bool done;
};

// What the fibers of the block being run need, per OS thread (tests run in parallel).
thread_local ucontext_t t_launcher;
thread_local Fiber *t_fiber = nullptr;
thread_local const Entry *t_entry = nullptr;
thread_local void **t_params = nullptr;
// Set when __syncthreads is called by a kernel running without fibers.
thread_local bool t_stray_barrier = false;

void fiber_main() {
    t_entry->run(t_params);
    t_fiber->done = true;
    // Returning resumes uc_link: the launcher.
}

kp_hostsim_dim3 thread_index(unsigned t, const unsigned int block[3]) {
    return {t % block[0], (t / block[0]) % block[1], t / (block[0] * block[1])};
}

// Prepares `f` to start fiber_main on `stack`. Kept out of line: getcontext "returns
// twice" as far as the compiler knows (it never does here, since makecontext redirects the
// context before it is used), and a caller's loop variables must not be exposed to that.
__attribute__((noinline)) bool make_fiber(Fiber &f, char *stack) {
    f.done = false;
    if (getcontext(&f.context) != 0) {
        return false;
    }
    f.context.uc_stack.ss_sp = stack;
    f.context.uc_stack.ss_size = kFiberStack;
    f.context.uc_link = &t_launcher;
    makecontext(&f.context, fiber_main, 0);
    return true;
}

// Runs the current block's threads as fibers until every one has returned.
Status run_block_as_fibers(const unsigned int block[3], std::vector<Fiber> &fibers,
                           char *stacks) {
    unsigned n = block[0] * block[1] * block[2];
    for (unsigned t = 0; t < n; ++t) {
        if (!make_fiber(fibers[t], stacks + static_cast<std::size_t>(t) * kFiberStack)) {
            return kNoFibers;
        }
    }
    unsigned live = n;
    while (live > 0) {
        for (unsigned t = 0; t < n; ++t) {
            if (fibers[t].done) {
                continue;
            }
            threadIdx = thread_index(t, block);
            t_fiber = &fibers[t];
            if (swapcontext(&t_launcher, &fibers[t].context) != 0) {
                t_fiber = nullptr;
                return kNoFibers;
            }
            live -= fibers[t].done ? 1 : 0;
        }
    }
    t_fiber = nullptr;
    return kOk;
}

}  // namespace

void kp_hostsim_syncthreads() {
    if (t_fiber == nullptr) {
        t_stray_barrier = true;
        return;
    }
    // Back to the launcher, which resumes this fiber in the next round.
    swapcontext(&t_fiber->context, &t_launcher);
}

extern "C" {

// Runs kernel `name` over grid x block. Returns a Status.
int kp_hostsim_launch(const char *name, const unsigned int grid[3], const unsigned int block[3],
                      void **params, unsigned int n_params) {
    const Entry *entry = nullptr;
    for (const Entry &e : kEntries) {
        if (std::strcmp(e.name, name) == 0) {
            entry = &e;
        }
    }
    if (entry == nullptr) {
        return kUnknownKernel;
    }
    if (n_params != entry->arity) {
        return kWrongArgumentCount;
    }
    gridDim = {grid[0], grid[1], grid[2]};
    blockDim = {block[0], block[1], block[2]};
    std::vector<Fiber> fibers;
    std::unique_ptr<char[]> stacks;
    if (entry->barriers) {
        std::size_t threads = static_cast<std::size_t>(block[0]) * block[1] * block[2];
        fibers.resize(threads);
        // Uninitialised: only the pages a fiber's frames touch are ever mapped.
        stacks.reset(new (std::nothrow) char[threads * kFiberStack]);
        if (!stacks) {
            return kNoFibers;
        }
        t_entry = entry;
        t_params = params;
    }
    t_stray_barrier = false;
    for (unsigned int bz = 0; bz < grid[2]; ++bz) {
        for (unsigned int by = 0; by < grid[1]; ++by) {
            for (unsigned int bx = 0; bx < grid[0]; ++bx) {
                blockIdx = {bx, by, bz};
                if (entry->barriers) {
                    Status status = run_block_as_fibers(block, fibers, stacks.get());
                    if (status != kOk) {
                        return status;
                    }
                    continue;
                }
                for (unsigned int tz = 0; tz < block[2]; ++tz) {
                    for (unsigned int ty = 0; ty < block[1]; ++ty) {
                        for (unsigned int tx = 0; tx < block[0]; ++tx) {
                            threadIdx = {tx, ty, tz};
                            entry->run(params);
                        }
                    }
                }
                if (t_stray_barrier) {
                    return kStrayBarrier;
                }
            }
        }
    }
    return kOk;
}

unsigned int kp_hostsim_kernel_count(void) { return sizeof kEntries / sizeof kEntries[0]; }

const char *kp_hostsim_kernel_name(unsigned int i) {
    return i < kp_hostsim_kernel_count() ? kEntries[i].name : nullptr;
}

// Whether kernel `i` runs its blocks as fibers (its source calls __syncthreads).
int kp_hostsim_kernel_has_barriers(unsigned int i) {
    return i < kp_hostsim_kernel_count() && kEntries[i].barriers ? 1 : 0;
}
}
