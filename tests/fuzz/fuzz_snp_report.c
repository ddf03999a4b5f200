// Fuzz target: AMD SEV-SNP report parser, claims and signature decoding. Any input must give a
// clean gt_err or a report whose every derived value can be produced; never a crash or a leak.
#include "attest/snp_report.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_snp_report rep;
    gt_err e = gt_snp_report_parse(&rep, data, size);
    if (e.code != GT_E_NONE) {
        assert(rep.version == 0 && rep.signed_region.data == NULL);
        return 0;
    }
    assert(size >= GT_SNP_REPORT_BYTES && rep.trailing_bytes == size - GT_SNP_REPORT_BYTES);
    assert(rep.signed_region.data == data && rep.signed_region.len == GT_SNP_SIGNED_BYTES);
    cJSON *obj = cJSON_CreateObject();
    if (obj != NULL) {
        gt_err j = gt_snp_report_claims_json(&rep, obj);
        (void)j;
        cJSON_Delete(obj);
    }
    uint8_t rs[GT_SNP_SIG_RS_BYTES];
    gt_err s = gt_snp_report_signature_rs(&rep, rs);
    (void)s;
    (void)gt_snp_product_name(rep.product);
    (void)gt_snp_signing_key_name(gt_snp_report_signing_key(&rep));
    return 0;
}
