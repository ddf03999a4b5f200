// Fuzz target: policy JSON parsing and evaluation against claims of every TEE type. Any input
// either fails to parse with an error, or evaluates without crashing; a rejected evaluation always
// names a reason (the check: the reasons list is well-formed). The safe defaults hold for every
// policy that parses: debug evidence is refused unless the document sets allow_debug true, and
// an Intel TCB status other than UpToDate unless it lists accepted_tcb_statuses (fields are
// unique, so reading the document back tells what the policy was given).
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
    {GT_TEE_SNP, "{\"measurement\":\"cc\",\"debug\":true}", ""},
    {GT_TEE_SIM, "{\"tee\":\"sim\",\"debug\":true}", ""},
    {GT_TEE_SGX, "{\"mr_enclave\":\"aa\",\"debug\":false}", "OutOfDate"},
    {GT_TEE_TDX, "{\"mr_td\":\"aa\",\"debug\":false}", ""},
};

// The defaults every parsed policy keeps unless the document explicitly relaxes them.
static void check_defaults(const cJSON *doc, size_t i, const gt_strlist *reasons)
{
    const cJSON *c = cJSON_Parse(cases[i].claims);
    bool debug = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "debug"));
    cJSON_Delete((cJSON *)c);
    bool allow_debug = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "allow_debug"));
    if (debug && !allow_debug && cases[i].type != GT_TEE_NVGPU &&
        !gt_strlist_contains(reasons, "debug TEE refused")) {
        abort();
    }
    bool intel = cases[i].type == GT_TEE_TDX || cases[i].type == GT_TEE_SGX;
    bool listed = cJSON_GetObjectItemCaseSensitive(doc, "accepted_tcb_statuses") != NULL;
    if (intel && !listed && strcmp(cases[i].tcb, "UpToDate") != 0 &&
        !gt_strlist_contains(reasons, "TCB status") && !gt_strlist_contains(reasons, "tcb:")) {
        abort();
    }
}

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
    cJSON *doc = NULL;
    if (!gt_is_ok(gt_json_parse((const char *)data, size, &doc))) {
        abort();  // the policy parsed, so the document does
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
            check_defaults(doc, i, &reasons);
        }
        gt_strlist_free(&reasons);
        gt_strlist_free(&warnings);
        cJSON_Delete(c);
    }
    cJSON_Delete(doc);
    gt_policy_free(p);
    return 0;
}
