/*
 * fake_nvtx.c: an NVTX library for tests, exporting the two functions kplace calls
 * (nvtxRangePushA, nvtxRangePop) and counters the test reads: every push and pop, the deepest
 * nesting seen on any thread, pops without a push, and the pushes of one name.
 */
#include <stdatomic.h>
#include <string.h>

static atomic_int pushes, pops, unbalanced, deepest, named;
static _Thread_local int depth;
static char watched[64];

int nvtxRangePushA(const char *message) {
    atomic_fetch_add(&pushes, 1);
    depth++;
    int seen = atomic_load(&deepest);
    while (depth > seen && !atomic_compare_exchange_weak(&deepest, &seen, depth)) {
    }
    if (message != NULL && watched[0] != '\0' && strcmp(message, watched) == 0) {
        atomic_fetch_add(&named, 1);
    }
    return depth - 1;
}

int nvtxRangePop(void) {
    atomic_fetch_add(&pops, 1);
    if (depth == 0) {
        atomic_fetch_add(&unbalanced, 1);
        return -1;
    }
    return --depth;
}

/* Counts the pushes of `name` from now on (set before a run). */
void fake_nvtx_watch(const char *name) {
    strncpy(watched, name, sizeof watched - 1);
}

/* pushes, pops, unbalanced pops, deepest nesting, pushes of the watched name. */
void fake_nvtx_counts(int out[5]) {
    out[0] = atomic_load(&pushes);
    out[1] = atomic_load(&pops);
    out[2] = atomic_load(&unbalanced);
    out[3] = atomic_load(&deepest);
    out[4] = atomic_load(&named);
}
