// Fuzz: vsgx quotes (gt_vsgx_quote_parse) and their appraisal, host evidence inside included.
// A quote that parses is described by its fields: encoding them again gives back the bytes.
#include <gputravel/attest.h>

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_vsgx_quote q;
    if (gt_is_ok(gt_vsgx_quote_parse(&q, data, size))) {
        gt_buf again = {0};
        if (!gt_is_ok(gt_vsgx_quote_encode(&q, &again)) || again.len != size ||
            memcmp(again.data, data, size) != 0) {
            __builtin_trap();
        }
        gt_buf_free_nowipe(&again);
    }
    // Never accepted without a root; never a crash.
    gt_appraisal a;
    if (gt_is_ok(gt_attest_appraise_bytes(&a, data, size, GT_TEE_VSGX, NULL, NULL))) {
        if (a.verdict == GT_VERDICT_ACCEPTED) {
            __builtin_trap();
        }
        gt_appraisal_free(&a);
    }
    return 0;
}
