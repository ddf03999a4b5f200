// Fuzz target: evidence detection, the GTEV envelope, sim report parsing and the whole appraisal
// (signature check against a fixed test root, default and allow_simulation policies).
// Invariants checked on every input: no crash or sanitizer report; ACCEPTED only with a valid
// signature and chain and no reason; INVALID and REJECTED always carry a reason.
#include <gputravel/attest.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Public half of the test root that signed the sim_* seeds (its private key is not kept).
static const char test_root_pem[] =
    "-----BEGIN PUBLIC KEY-----\n"
    "MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEhxQ8GXVKOnOSgiWNFSrKurWxmXkiqGBy\n"
    "UpwIYvZLfLflyC/HIo2xUkHhrW7fIXVNhT4tPZs96tJtrKOlUeXemV7xZzACBVN/\n"
    "fnA7dO/kyzKso0c/OBgBZ534NW2mWu3T\n"
    "-----END PUBLIC KEY-----\n";

static gt_attest_file g_root;
static char g_root_path[256];
static gt_policy *g_allow;

static void init(void)
{
    if (g_allow != NULL) {
        return;
    }
    gt_log_set_level(GT_LOG_ERROR);
    char dir[] = "/tmp/gt-fuzz-sim-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        abort();
    }
    snprintf(g_root_path, sizeof g_root_path, "%s/root-pub.pem", dir);
    if (!gt_is_ok(gt_file_write_atomic(g_root_path, test_root_pem, strlen(test_root_pem), 0644))) {
        abort();
    }
    g_root = (gt_attest_file){.path = g_root_path,
                              .data = {(const uint8_t *)test_root_pem, strlen(test_root_pem)}};
    static const char pol[] = "{\"allow_simulation\": true, \"debug_forbidden\": true}";
    if (!gt_is_ok(gt_policy_parse(&g_allow, pol, strlen(pol)))) {
        abort();
    }
}

static void check(const gt_appraisal *a)
{
    if (a->verdict == GT_VERDICT_ACCEPTED &&
        (!a->signature_valid || !a->chain_valid || a->reason_count != 0)) {
        abort();
    }
    if (a->verdict != GT_VERDICT_ACCEPTED && a->reason_count == 0) {
        abort();
    }
    if (a->claims == NULL) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init();
    gt_evidence ev = {0};
    if (gt_is_ok(gt_evidence_parse(&ev, data, size, GT_TEE_AUTO))) {
        gt_buf enc = {0};
        if (gt_is_ok(gt_evidence_encode(&ev, &enc))) {
            gt_evidence back = {0};
            if (!gt_is_ok(gt_evidence_parse(&back, enc.data, enc.len, ev.type)) ||
                back.body.len != ev.body.len) {
                abort();  // what we encode, we read back
            }
            gt_evidence_free(&back);
        }
        gt_buf_free_nowipe(&enc);
        gt_evidence_free(&ev);
    }
    uint8_t rd[GT_REPORT_DATA_BYTES] = {0};
    gt_appraise_params p = {.roots = &g_root, .root_count = 1, .expected_report_data = rd};
    const gt_policy *policies[2] = {NULL, g_allow};
    for (int i = 0; i < 2; i++) {
        gt_appraisal a;
        if (!gt_is_ok(gt_attest_appraise_bytes(&a, data, size, GT_TEE_AUTO, policies[i], &p))) {
            continue;  // resource failure only
        }
        check(&a);
        if (a.verdict == GT_VERDICT_ACCEPTED && i == 0 && a.type == GT_TEE_SIM) {
            abort();  // the default policy never accepts simulation
        }
        cJSON *j = gt_appraisal_to_json(&a);
        cJSON_Delete(j);
        gt_appraisal_free(&a);
    }
    return 0;
}
