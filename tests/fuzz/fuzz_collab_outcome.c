// Fuzz: a rank's round outcome as MPI delivers it (untrusted bytes, orchestr.h).
#include <gputravel/orchestr.h>

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_collab_outcome o;
    if (!gt_is_ok(gt_collab_outcome_parse(&o, data, size))) {
        return 0;
    }
    // What parses writes back to the same bytes, and only known kinds get through.
    uint8_t back[GT_COLLAB_OUTCOME_BYTES];
    gt_collab_outcome_write(&o, back);
    if (size != sizeof back || memcmp(back, data, size) != 0 || o.kind > GT_COLLAB_OUT_FATAL ||
        (o.kind != GT_COLLAB_OUT_OK && o.counted != 0)) {
        abort();
    }
    return 0;
}
