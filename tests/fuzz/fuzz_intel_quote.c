// Fuzz target: Intel DCAP quote parsing (SGX v3, TDX v4/v5), claims, the quote signature check,
// the PCK SGX extension DER parser and the collateral JSON readers, all on the same input.
#include "attest/intel_quote.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_intel_quote q;
    if (gt_is_ok(gt_intel_quote_parse(&q, data, size))) {
        // Everything the parse points at must lie inside the input.
        if (q.size > size || q.signed_region.len > q.size ||
            q.pck_chain_pem.data + q.pck_chain_pem.len > data + size ||
            q.qe_auth_data.data + q.qe_auth_data.len > data + size) {
            abort();
        }
        gt_intel_claim claims[GT_INTEL_MAX_CLAIMS];
        size_t n = gt_intel_quote_claims(&q, claims, GT_INTEL_MAX_CLAIMS);
        if (n > GT_INTEL_MAX_CLAIMS) {
            abort();
        }
        cJSON *obj = cJSON_CreateObject();
        if (obj != NULL) {
            gt_err e = gt_intel_quote_claims_json(&q, obj);
            (void)e;
            cJSON_Delete(obj);
        }
        gt_err e = gt_intel_quote_verify_signature(&q);
        (void)e;
    }
    gt_intel_pck_ext ext;
    gt_err e = gt_intel_pck_ext_parse(&ext, data, size);
    gt_intel_collateral c;
    memset(&c, 0, sizeof c);
    e = gt_intel_collateral_add(&c, GT_INTEL_COLL_TCB_INFO, data, size);
    e = gt_intel_collateral_add(&c, GT_INTEL_COLL_QE_IDENTITY, data, size);
    (void)e;
    gt_intel_collateral_free(&c);
    return 0;
}
