// Fuzz: a training agreement arrives from other parties and is untrusted until parsed.
#include <gputravel/travel.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_agreement a;
    gt_err e = gt_agreement_parse(&a, data, size);
    // the transfer list is never empty, and names only known modes
    bool transfers_ok = a.transfers != 0 && (a.transfers >> GT_TRANSFER_MODE_COUNT) == 0;
    if (e.code == GT_E_NONE &&
        (a.holder_count == 0 || a.channels % a.heads != 0 || !transfers_ok)) {
        __builtin_trap();  // an accepted agreement satisfies its own rules
    }
    return 0;
}
