// Fuzz: a training agreement arrives from other parties and is untrusted until parsed.
#include <gputravel/travel.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_agreement a;
    gt_err e = gt_agreement_parse(&a, data, size);
    if (e.code == GT_E_NONE && (a.holder_count == 0 || a.channels % a.heads != 0)) {
        __builtin_trap();  // an accepted agreement satisfies its own rules
    }
    return 0;
}
