// attest/: the framework's reading of Intel TCB results. The real dcap-qvl TDX quote (real PCK
// chain, Intel root) is appraised with synthetic TCB info signed by a test TCB signing key
// (tests/testlib/intel_testlib.c), so every outcome can be produced: UpToDate (the only status
// the default policy accepts), other statuses (REJECTED by default, accepted once listed),
// Revoked and "no matching TCB level" (REJECTED: authentic evidence, refused TCB), and broken
// collateral (INVALID).
#include "testlib.h"

#include <gputravel/attest.h>

#include "intel_testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT 1751328000  // 2025-07-01, inside the synthetic TCB info's validity

typedef struct {
    gt_test_pki *pki;
    gt_buf quote, intel_root, tcb_chain;
    gt_attest_file roots[2];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    gt_test_read_data("attestation/tdx/dcap-qvl_tdx_quote", &f->quote);
    gt_test_read_data("attestation/tdx/intel_sgx_root_ca.pem", &f->intel_root);
    gt_intel_quote q;
    GT_ASSERT_OK(gt_intel_quote_parse(&q, f->quote.data, f->quote.len));
    gt_x509 **certs = NULL;
    size_t n = 0;
    GT_ASSERT_OK(gt_x509_parse_pem_all(&certs, &n, (const char *)q.pck_chain_pem.data,
                                       q.pck_chain_pem.len));
    gt_span ext = {0};
    GT_ASSERT_OK(gt_x509_extension(certs[0], GT_INTEL_SGX_EXT_OID, &ext));
    f->pki = gt_test_pki_new(ext.data, ext.len);
    gt_test_intel_free_certs(certs, n);
    gt_test_pki_tcb_chain_pem(f->pki, &f->tcb_chain);
    // Trusted: Intel's root, and the test PKI's (its file also holds the TCB signing cert).
    f->roots[0] = (gt_attest_file){.path = "intel_sgx_root_ca.pem",
                                   .data = gt_buf_span(&f->intel_root)};
    f->roots[1] = (gt_attest_file){.path = "test_root.pem", .data = gt_buf_span(&f->tcb_chain)};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    gt_test_pki_free(f->pki);
    gt_buf_free(&f->quote);
    gt_buf_free(&f->intel_root);
    gt_buf_free(&f->tcb_chain);
    free(f);
    return 0;
}

static void append(gt_buf *b, const char *s) { GT_ASSERT_OK(gt_buf_append(b, s, strlen(s))); }

// A signed TCB info for the dcap-qvl platform (FMSPC b0c06f000000) with one level: SVNs at or
// below the platform's unless above_platform.
static void tcb_info(const fixture *f, const char *status, bool above_platform, gt_buf *out)
{
    gt_buf b = {0};
    append(&b, "{\"id\":\"TDX\",\"version\":3,\"issueDate\":\"2025-06-01T00:00:00Z\","
               "\"nextUpdate\":\"2025-08-01T00:00:00Z\",\"fmspc\":\"B0C06F000000\","
               "\"pceId\":\"0000\",\"tcbType\":0,\"tcbEvaluationDataNumber\":17,"
               "\"tdxModule\":{\"mrsigner\":\"000000000000000000000000000000000000000000000000"
               "000000000000000000000000000000000000000000000000\",\"attributes\":"
               "\"0000000000000000\",\"attributesMask\":\"FFFFFFFFFFFFFFFF\"},\"tcbLevels\":[{"
               "\"tcb\":{\"sgxtcbcomponents\":[");
    for (int i = 0; i < 16; i++) {
        char t[48];
        snprintf(t, sizeof t, "%s{\"svn\":%d}", i ? "," : "", above_platform && i == 0 ? 99 : 0);
        append(&b, t);
    }
    append(&b, "],\"pcesvn\":0,\"tdxtcbcomponents\":[");
    for (int i = 0; i < 16; i++) {
        append(&b, i ? ",{\"svn\":0}" : "{\"svn\":0}");
    }
    append(&b, "]},\"tcbDate\":\"2024-03-13T00:00:00Z\",\"tcbStatus\":\"");
    append(&b, status);
    append(&b, "\",\"advisoryIDs\":[\"INTEL-SA-00001\"]}]}");
    uint8_t sig[64];
    char hex[129];
    gt_test_pki_tcb_sign(f->pki, b.data, b.len, sig);
    gt_hex_encode(hex, sizeof hex, sig, sizeof sig);
    append(out, "{\"tcbInfo\":");
    GT_ASSERT_OK(gt_buf_append(out, b.data, b.len));
    append(out, ",\"signature\":\"");
    append(out, hex);
    append(out, "\"}");
    gt_buf_free(&b);
}

static void appraise(const fixture *f, const gt_buf *tcb, const char *policy_json,
                     gt_appraisal *a)
{
    gt_attest_file coll[2] = {
        {.path = "tcb_signing_chain.pem", .data = gt_buf_span(&f->tcb_chain)},
        {.path = "tcb_info.json", .data = gt_buf_span(tcb)},
    };
    gt_appraise_params p = {.roots = f->roots, .root_count = 2, .collateral = coll,
                            .collateral_count = 2, .at = AT};
    gt_policy *pol = NULL;
    if (policy_json != NULL) {
        GT_ASSERT_OK(gt_policy_parse(&pol, policy_json, strlen(policy_json)));
    }
    GT_ASSERT_OK(gt_attest_appraise_bytes(a, f->quote.data, f->quote.len, GT_TEE_TDX, pol, &p));
    gt_policy_free(pol);
}

static void statuses_and_policy(void **state)
{
    fixture *f = *state;
    gt_buf tcb = {0};
    gt_appraisal a;

    tcb_info(f, "UpToDate", false, &tcb);
    appraise(f, &tcb, NULL, &a);
    if (a.verdict != GT_VERDICT_ACCEPTED) {
        fail_msg("UpToDate: %s: %s", gt_verdict_name(a.verdict), a.reasons[0]);
    }
    assert_string_equal(a.tcb_status, "UpToDate");
    assert_true(a.warning_count == 1);  // the advisory is listed
    assert_non_null(strstr(a.warnings[0], "INTEL-SA-00001"));
    gt_appraisal_free(&a);
    gt_buf_free(&tcb);

    // Any other status: refused by the default policy naming the rule, accepted once listed.
    static const char *const others[] = {"OutOfDate", "SWHardeningNeeded",
                                         "ConfigurationAndSWHardeningNeeded"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        tcb_info(f, others[i], false, &tcb);
        appraise(f, &tcb, NULL, &a);
        assert_int_equal(a.verdict, GT_VERDICT_REJECTED);
        assert_true(a.signature_valid && a.chain_valid);  // authentic: refused for its TCB only
        assert_string_equal(a.tcb_status, others[i]);
        assert_int_equal(a.reason_count, 1);
        char want[160];
        snprintf(want, sizeof want, "TCB status %s not accepted (accepted: UpToDate, the default "
                                    "without accepted_tcb_statuses)", others[i]);
        if (!gt_appraisal_has_reason(&a, want)) {
            fail_msg("%s: reason '%s', want '%s'", others[i], a.reasons[0], want);
        }
        gt_appraisal_free(&a);
        char pol[160];
        snprintf(pol, sizeof pol, "{\"accepted_tcb_statuses\": [\"UpToDate\", \"%s\"]}",
                 others[i]);
        appraise(f, &tcb, pol, &a);
        if (a.verdict != GT_VERDICT_ACCEPTED) {
            fail_msg("%s listed: %s: %s", others[i], gt_verdict_name(a.verdict), a.reasons[0]);
        }
        gt_appraisal_free(&a);
        gt_buf_free(&tcb);
    }
    // A list replaces the default: OutOfDate refused under a list without it.
    tcb_info(f, "OutOfDate", false, &tcb);
    appraise(f, &tcb, "{\"accepted_tcb_statuses\": [\"UpToDate\", \"SWHardeningNeeded\"]}", &a);
    assert_int_equal(a.verdict, GT_VERDICT_REJECTED);
    assert_int_equal(a.reason_count, 1);
    assert_true(gt_appraisal_has_reason(&a, "TCB status OutOfDate not accepted (accepted: "
                                            "UpToDate, SWHardeningNeeded)"));
    cJSON *j = gt_appraisal_to_json(&a);
    assert_string_equal(cJSON_GetObjectItem(j, "tcb_status")->valuestring, "OutOfDate");
    cJSON_Delete(j);
    gt_appraisal_free(&a);
    // ... and a list without UpToDate refuses even UpToDate.
    gt_buf_free(&tcb);
    tcb_info(f, "UpToDate", false, &tcb);
    appraise(f, &tcb, "{\"accepted_tcb_statuses\": [\"SWHardeningNeeded\"]}", &a);
    assert_int_equal(a.verdict, GT_VERDICT_REJECTED);
    assert_true(gt_appraisal_has_reason(&a, "TCB status UpToDate not accepted"));
    gt_appraisal_free(&a);
    gt_buf_free(&tcb);
}

static void revoked_and_unmatched_tcb_are_rejected(void **state)
{
    fixture *f = *state;
    gt_buf tcb = {0};
    gt_appraisal a;
    tcb_info(f, "Revoked", false, &tcb);
    appraise(f, &tcb, NULL, &a);
    assert_int_equal(a.verdict, GT_VERDICT_REJECTED);  // authentic, but refused
    assert_true(a.signature_valid && a.chain_valid);
    assert_string_equal(a.tcb_status, "Revoked");
    assert_true(gt_appraisal_has_reason(&a, "tdx: TCB status Revoked"));
    assert_true(gt_appraisal_has_reason(&a, "tcb: status Revoked is never accepted"));
    gt_appraisal_free(&a);
    gt_buf_free(&tcb);

    tcb_info(f, "UpToDate", true, &tcb);
    appraise(f, &tcb, NULL, &a);
    assert_int_equal(a.verdict, GT_VERDICT_REJECTED);
    assert_int_equal(a.reason_count, 2);  // the verifier's, and the policy's: no status at all
    assert_true(gt_appraisal_has_reason(&a, "no TCB level matches the platform"));
    assert_true(gt_appraisal_has_reason(&a, "TCB status not evaluated"));
    assert_string_equal(a.tcb_status, "");
    gt_appraisal_free(&a);
    // Listing NotEvaluated does not override the verifier's own refusal.
    appraise(f, &tcb, "{\"accepted_tcb_statuses\": [\"NotEvaluated\"]}", &a);
    assert_int_equal(a.verdict, GT_VERDICT_REJECTED);
    assert_int_equal(a.reason_count, 1);
    assert_true(gt_appraisal_has_reason(&a, "no TCB level matches the platform"));
    gt_appraisal_free(&a);
    gt_buf_free(&tcb);
}

static void broken_collateral_is_invalid(void **state)
{
    fixture *f = *state;
    gt_buf tcb = {0};
    gt_appraisal a;
    tcb_info(f, "UpToDate", false, &tcb);
    // Change the status after signing: the TCB info signature no longer verifies.
    char *s = strstr((char *)tcb.data, "UpToDate");
    assert_non_null(s);
    memcpy(s, "UpT0Date", 8);
    appraise(f, &tcb, NULL, &a);
    assert_int_equal(a.verdict, GT_VERDICT_INVALID);
    assert_true(a.signature_valid && a.chain_valid);  // the quote itself is fine
    assert_true(gt_appraisal_has_reason(&a, "TCB info: signature by the TCB signing key"));
    gt_appraisal_free(&a);
    gt_buf_free(&tcb);

    // Verified at a time outside the TCB info's validity: invalid collateral.
    tcb_info(f, "UpToDate", false, &tcb);
    gt_attest_file coll[2] = {
        {.path = "tcb_signing_chain.pem", .data = gt_buf_span(&f->tcb_chain)},
        {.path = "tcb-info:x", .data = gt_buf_span(&tcb)},
    };
    gt_appraise_params p = {.roots = f->roots, .root_count = 2, .collateral = coll,
                            .collateral_count = 2, .at = AT + 40 * 86400};
    GT_ASSERT_OK(gt_attest_appraise_bytes(&a, f->quote.data, f->quote.len, GT_TEE_AUTO, NULL, &p));
    assert_int_equal(a.verdict, GT_VERDICT_INVALID);
    assert_true(gt_appraisal_has_reason(&a, "expired"));
    gt_appraisal_free(&a);
    gt_buf_free(&tcb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(statuses_and_policy),
        cmocka_unit_test(revoked_and_unmatched_tcb_are_rejected),
        cmocka_unit_test(broken_collateral_is_invalid),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
