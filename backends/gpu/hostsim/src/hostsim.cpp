// The kernels of backends/gpu/kernels, compiled for the host, and a launcher that runs a
// kernel's grid as loops, taking arguments the way cuLaunchKernel does (an array of pointers
// to the argument values).

#include "shim.h"

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels.inc"

namespace {

template <class... A, std::size_t... I>
void invoke_with(void (*kernel)(A...), void **params, std::index_sequence<I...>) {
    kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<A>> *>(params[I])...);
}

// Calls `kernel` with its arguments read from `params`; false if the count is wrong.
template <class... A>
bool invoke(void (*kernel)(A...), void **params, unsigned n_params) {
    if (n_params != sizeof...(A)) {
        return false;
    }
    invoke_with(kernel, params, std::index_sequence_for<A...>{});
    return true;
}

struct Entry {
    const char *name;
    bool (*run)(void **params, unsigned n_params);
};

#define KP_HOSTSIM_KERNEL(fn) \
    {#fn, [](void **params, unsigned n_params) { return invoke(fn, params, n_params); }},

const Entry kEntries[] = {
#include "table.inc"
};

}  // namespace

extern "C" {

// Runs kernel `name` over grid x block. Returns 0, 1 for an unknown kernel, 2 for a wrong
// number of arguments.
int kp_hostsim_launch(const char *name, const unsigned int grid[3], const unsigned int block[3],
                      void **params, unsigned int n_params) {
    const Entry *entry = nullptr;
    for (const Entry &e : kEntries) {
        if (std::strcmp(e.name, name) == 0) {
            entry = &e;
        }
    }
    if (entry == nullptr) {
        return 1;
    }
    gridDim = {grid[0], grid[1], grid[2]};
    blockDim = {block[0], block[1], block[2]};
    for (unsigned int bz = 0; bz < grid[2]; ++bz) {
        for (unsigned int by = 0; by < grid[1]; ++by) {
            for (unsigned int bx = 0; bx < grid[0]; ++bx) {
                blockIdx = {bx, by, bz};
                for (unsigned int tz = 0; tz < block[2]; ++tz) {
                    for (unsigned int ty = 0; ty < block[1]; ++ty) {
                        for (unsigned int tx = 0; tx < block[0]; ++tx) {
                            threadIdx = {tx, ty, tz};
                            if (!entry->run(params, n_params)) {
                                return 2;
                            }
                        }
                    }
                }
            }
        }
    }
    return 0;
}

unsigned int kp_hostsim_kernel_count(void) { return sizeof kEntries / sizeof kEntries[0]; }

const char *kp_hostsim_kernel_name(unsigned int i) {
    return i < kp_hostsim_kernel_count() ? kEntries[i].name : nullptr;
}
}
