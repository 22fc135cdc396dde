/* A library whose table breaks a rule: it names the same kernel twice, or (built with
 * UNKNOWN_FLAGS) a kernel sets a flag version 2 does not define, or (STATEFUL_NO_CARRY) a
 * stateful kernel has no carry_bytes function. The loader must refuse each. */
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

static uint64_t carry(const void *s) { (void)s; return 64; }

#if defined(UNKNOWN_FLAGS)
#define SECOND_NAME "other.kernel"
#define SECOND_FLAGS 0x10
#define SECOND_CARRY carry
#elif defined(STATEFUL_NO_CARRY)
#define SECOND_NAME "other.kernel"
#define SECOND_FLAGS KPLACE_KERNEL_STATEFUL
#define SECOND_CARRY NULL
#else
#define SECOND_NAME "dup.kernel"
#define SECOND_FLAGS 0
#define SECOND_CARRY NULL
#endif

static const kplace_kernel kernels[] = {
    {"dup.kernel", KPLACE_DEVICE_CPU, KPLACE_MEMORY_HOST, 1, 1, create, workspace, launch, destroy,
     KPLACE_KERNEL_STATEFUL, 0, carry},
    {SECOND_NAME, KPLACE_DEVICE_CPU, KPLACE_MEMORY_HOST, 1, 1, create, workspace, launch, destroy,
     SECOND_FLAGS, 0, SECOND_CARRY},
};
static const kplace_library library = {KPLACE_ABI_VERSION, 2, "duplicate", kernels};
const kplace_library *kplace_library_entry(void) { return &library; }
