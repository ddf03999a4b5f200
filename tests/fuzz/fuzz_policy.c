// Fuzz target: policy JSON parsing and evaluation against claims of every TEE type. Any input
// either fails to parse with an error, or evaluates without crashing; a rejected evaluation always
// names a reason (the check: the reasons list is well-formed).
#include <gputravel/attest.h>

#include "attest/policy.h"

#include <stdlib.h>
#include <string.h>

static const struct {
    gt_tee_type type;
    const char *claims;
    const char *tcb;
} cases[] = {
    {GT_TEE_SIM, "{\"tee\":\"sim\",\"measurement\":\"aa\",\"svn\":3,\"debug\":false,"
                 "\"device\":true,\"cc_mode\":true,\"report_data\":\"00\"}", ""},
    {GT_TEE_TDX, "{\"mr_td\":\"aa\",\"rtmr0\":\"bb\",\"debug\":true,"
                 "\"tee_tcb_svn\":\"03000400000000000000000000000000\"}", "UpToDate"},
    {GT_TEE_SGX, "{\"mr_enclave\":\"aa\",\"isv_svn\":2,\"debug\":false}", "Revoked"},
    {GT_TEE_SNP, "{\"measurement\":\"cc\",\"reported_tcb\":{\"bootloader\":2,\"tee\":0,"
                 "\"snp\":5,\"microcode\":68},\"debug\":false}", ""},
    {GT_TEE_NVGPU, "{\"measurements\":{\"2\":\"80\"},\"fwid\":\"f5\",\"request\":"
                   "{\"nonce\":\"0011\"}}", ""},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_log_set_level(GT_LOG_ERROR);
    gt_policy *p = NULL;
    gt_err e = gt_policy_parse(&p, (const char *)data, size);
    if (!gt_is_ok(e)) {
        if (p != NULL || e.msg[0] == '\0') {
            abort();  // a failed parse hands nothing out and always says why
        }
        return 0;
    }
    uint8_t nonce[2] = {0x00, 0x11}, agreement[1] = {0xaa};
    gt_appraise_params prm = {.nonce = nonce, .nonce_len = sizeof nonce,
                              .agreement_hash = agreement, .agreement_hash_len = 1};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *c = cJSON_Parse(cases[i].claims);
        if (c == NULL) {
            abort();
        }
        gt_strlist reasons = {0}, warnings = {0};
        if (gt_is_ok(gt_policy_evaluate(p, cases[i].type, c, cases[i].tcb, &prm, &reasons,
                                        &warnings))) {
            for (size_t r = 0; r < reasons.count; r++) {
                if (reasons.items[r] == NULL || reasons.items[r][0] == '\0') {
                    abort();
                }
            }
        }
        gt_strlist_free(&reasons);
        gt_strlist_free(&warnings);
        cJSON_Delete(c);
    }
    gt_policy_free(p);
    return 0;
}
