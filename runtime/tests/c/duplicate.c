/* A library whose table names the same kernel twice: the loader must refuse it. */
#include <stddef.h>
#include "kplace.h"

static kplace_status create(const kplace_kernel_config *c, void **s, char *e, size_t n) {
    (void)c; (void)s; (void)e; (void)n;
    return KPLACE_ERR_INTERNAL;
}
static uint64_t workspace(const void *s) { (void)s; return 0; }
static kplace_status launch(void *s, const kplace_launch_args *a, char *e, size_t n) {
    (void)s; (void)a; (void)e; (void)n;
    return KPLACE_ERR_INTERNAL;
}
static void destroy(void *s) { (void)s; }

static const kplace_kernel kernels[] = {
    {"dup.kernel", KPLACE_DEVICE_CPU, KPLACE_MEMORY_HOST, 1, 1, create, workspace, launch, destroy},
    {"dup.kernel", KPLACE_DEVICE_CPU, KPLACE_MEMORY_HOST, 1, 1, create, workspace, launch, destroy},
};
static const kplace_library library = {KPLACE_ABI_VERSION, 2, "duplicate", kernels};
const kplace_library *kplace_library_entry(void) { return &library; }
