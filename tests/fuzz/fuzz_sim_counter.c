// Fuzz: the rollback guard's sim counter file is untrusted input to the holder at start.
#include "holder/rollback_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t v = 1;
    gt_err e = gt_sim_counter_parse(data, size, &v);
    if (e.code != GT_E_NONE && v != 0) {
        __builtin_trap();  // a failed parse leaves no value behind
    }
    return 0;
}
