// Fuzz: a ledger file is untrusted input to `gputravel ledger verify`.
#include <gputravel/holder.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_ledger_summary s;
    gt_err e = gt_ledger_verify_bytes(data, size, NULL, NULL, &s);
    if (e.code == GT_E_NONE && s.entries == 0) {
        __builtin_trap();  // a verified ledger has at least its genesis entry
    }
    return 0;
}
