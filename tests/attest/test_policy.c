// attest/: the appraisal policy. Every rule accepts what it should and rejects with its listed
// reason; several broken rules give several reasons; malformed policies fail naming the field.
// Claims are built by hand here (as the per-type verifiers produce them), so every TEE type's
// rules are exercised without hardware evidence. Tests of other rules give Intel claims the
// UpToDate TCB status and every CPU TEE "debug": false, so that only the rule under test speaks.
#include "testlib.h"

#include <gputravel/attest.h>

#include "attest/policy.h"

#include <stdlib.h>
#include <string.h>

static gt_policy *policy(const char *json)
{
    gt_policy *p = NULL;
    GT_ASSERT_OK(gt_policy_parse(&p, json, strlen(json)));
    return p;
}

static cJSON *claims(const char *json)
{
    cJSON *c = cJSON_Parse(json);
    assert_non_null(c);
    return c;
}

// Evaluates and returns the reasons (caller frees).
static gt_strlist eval(const char *pol, gt_tee_type type, const char *claims_json,
                       const char *tcb, const gt_appraise_params *prm)
{
    static const gt_appraise_params none;
    gt_policy *p = policy(pol);
    cJSON *c = claims(claims_json);
    gt_strlist reasons = {0}, warnings = {0};
    GT_ASSERT_OK(gt_policy_evaluate(p, type, c, tcb, prm ? prm : &none, &reasons, &warnings));
    gt_strlist_free(&warnings);
    cJSON_Delete(c);
    gt_policy_free(p);
    return reasons;
}

static void expect_pass(const char *pol, gt_tee_type type, const char *claims_json, const char *tcb)
{
    gt_strlist r = eval(pol, type, claims_json, tcb, NULL);
    if (r.count != 0) {
        fail_msg("policy %s on %s: unexpected reason '%s'", pol, claims_json, r.items[0]);
    }
    gt_strlist_free(&r);
}

static void expect_reason(const char *pol, gt_tee_type type, const char *claims_json,
                          const char *tcb, const char *needle)
{
    gt_strlist r = eval(pol, type, claims_json, tcb, NULL);
    if (r.count != 1 || !gt_strlist_contains(&r, needle)) {
        fail_msg("policy %s on %s: expected exactly one reason with '%s', got %zu%s%s", pol,
                 claims_json, needle, r.count, r.count ? ": " : "", r.count ? r.items[0] : "");
    }
    gt_strlist_free(&r);
}

#define TDX_OK                                                                                  \
    "{\"mr_td\": \"aa11\", \"rtmr0\": \"bb22\", \"debug\": false, \"report_data\": \"00\", "       \
    "\"tee_tcb_svn\": \"03000400000000000000000000000000\"}"
#define SNP_OK                                                                                  \
    "{\"measurement\": \"cc33\", \"debug\": false, \"reported_tcb\": {\"bootloader\": 2, "          \
    "\"tee\": 0, \"snp\": 5, \"microcode\": 68}}"

#define SGX_OK "{\"mr_enclave\": \"dd44\", \"isv_svn\": 4, \"debug\": false}"
#define SIM_OK "{\"measurement\": \"ee55\", \"svn\": 2, \"debug\": false}"

// The default policy ({} and gt_policy_default): hardware accepted on its own evidence when it
// is not debug and (Intel) its TCB is UpToDate; sim refused.
static void default_and_empty_policy(void **state)
{
    (void)state;
    expect_pass("{}", GT_TEE_TDX, TDX_OK, "UpToDate");
    expect_pass("{}", GT_TEE_SGX, SGX_OK, "UpToDate");
    expect_pass("{}", GT_TEE_SNP, SNP_OK, "");   // AMD reports no TCB status
    expect_pass("{}", GT_TEE_NVGPU, "{}", "");   // nor debug attribute, nor TCB status
    expect_reason("{}", GT_TEE_SIM, SIM_OK, "", "does not set allow_simulation");
    expect_reason("{}", GT_TEE_SGX, SGX_OK, "Revoked", "Revoked is never accepted");
    gt_policy *d = NULL;
    GT_ASSERT_OK(gt_policy_default(&d));
    gt_appraise_params none = {0};
    static const struct {
        gt_tee_type type;
        const char *claims, *tcb;
        size_t reasons;
    } rows[] = {
        {GT_TEE_TDX, TDX_OK, "UpToDate", 0},
        {GT_TEE_TDX, TDX_OK, "OutOfDate", 1},
        {GT_TEE_TDX, TDX_OK, "", 1},
        {GT_TEE_TDX, "{\"debug\": true}", "UpToDate", 1},
        {GT_TEE_SNP, "{\"debug\": true}", "", 1},
        {GT_TEE_SIM, "{\"debug\": true}", "", 2},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        gt_strlist r = {0}, w = {0};
        cJSON *c = claims(rows[i].claims);
        GT_ASSERT_OK(gt_policy_evaluate(d, rows[i].type, c, rows[i].tcb, &none, &r, &w));
        if (r.count != rows[i].reasons) {
            fail_msg("default policy row %zu: %zu reasons, want %zu", i, r.count, rows[i].reasons);
        }
        gt_strlist_free(&r);
        gt_strlist_free(&w);
        cJSON_Delete(c);
    }
    gt_policy_free(d);
}

static void rule_accepted_types(void **state)
{
    (void)state;
    const char *p = "{\"accepted_tee_types\": [\"snp\", \"nvgpu\"]}";
    expect_pass(p, GT_TEE_SNP, SNP_OK, "");
    expect_reason(p, GT_TEE_TDX, TDX_OK, "UpToDate",
                  "TEE type tdx is not accepted (accepted: snp, nvgpu)");
    expect_reason("{\"accepted_tee_types\": []}", GT_TEE_SNP, SNP_OK, "", "(accepted: none)");
}

static void rule_allow_simulation(void **state)
{
    (void)state;
    expect_pass("{\"allow_simulation\": true}", GT_TEE_SIM, "{\"debug\": false}", "");
    expect_reason("{\"allow_simulation\": false}", GT_TEE_SIM, SIM_OK, "",
                  "insecure-simulation evidence refused");
    // Listing sim as a type is not enough: allow_simulation must be set too.
    expect_reason("{\"accepted_tee_types\": [\"sim\"]}", GT_TEE_SIM, SIM_OK, "",
                  "does not set allow_simulation");
}

static void rule_measurements(void **state)
{
    (void)state;
    const char *p = "{\"measurements\": {\"tdx\": {\"mr_td\": [\"FFFF\", \"AA11\"], "
                    "\"rtmr0\": [\"bb22\"]}, \"snp\": {\"measurement\": [\"cc33\"]}}}";
    expect_pass(p, GT_TEE_TDX, TDX_OK, "UpToDate");  // upper-case in the policy matches
    expect_pass(p, GT_TEE_SNP, SNP_OK, "");
    expect_reason(p, GT_TEE_TDX, "{\"mr_td\": \"aa12\", \"rtmr0\": \"bb22\", \"debug\": false}",
                  "UpToDate", "tdx measurement: mr_td aa12... is not in the allow-list");
    expect_reason(p, GT_TEE_TDX, "{\"mr_td\": \"aa11\", \"debug\": false}", "UpToDate",
                  "claim 'rtmr0' is not in the evidence");
    // Nested claims by dotted path (nvgpu measurement blocks).
    const char *g = "{\"measurements\": {\"nvgpu\": {\"measurements.2\": [\"8048\"]}}}";
    expect_pass(g, GT_TEE_NVGPU, "{\"measurements\": {\"2\": \"8048\"}}", "");
    expect_reason(g, GT_TEE_NVGPU, "{\"measurements\": {\"2\": \"8049\"}}", "",
                  "measurements.2 8049... is not in the allow-list");
}

// Debug is refused unless allow_debug is true, for every type with a debug attribute.
static void rule_debug(void **state)
{
    (void)state;
    static const struct {
        gt_tee_type type;
        const char *tcb, *pol;
    } kinds[] = {
        {GT_TEE_TDX, "UpToDate", "{}"},
        {GT_TEE_SGX, "UpToDate", "{}"},
        {GT_TEE_SNP, "", "{}"},
        {GT_TEE_SIM, "", "{\"allow_simulation\": true}"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        gt_tee_type t = kinds[i].type;
        char want[160], with[160], legacy[160], allow[160];
        snprintf(want, sizeof want, "debug TEE refused: the policy does not set allow_debug "
                                    "(the %s evidence has debug enabled)", gt_tee_type_name(t));
        // The default, and the demo's policy, refuse it.
        expect_reason(kinds[i].pol, t, "{\"debug\": true}", kinds[i].tcb, want);
        expect_pass(kinds[i].pol, t, "{\"debug\": false}", kinds[i].tcb);
        // Unknown is not "off".
        expect_reason(kinds[i].pol, t, "{}", kinds[i].tcb,
                      "does not state its debug attribute, and the policy does not set "
                      "allow_debug");
        // An old policy's debug_forbidden: false does not re-enable debug; true changes nothing.
        const char *inner = strcmp(kinds[i].pol, "{}") == 0 ? "" : "\"allow_simulation\": true, ";
        snprintf(legacy, sizeof legacy, "{%s\"debug_forbidden\": false}", inner);
        expect_reason(legacy, t, "{\"debug\": true}", kinds[i].tcb, want);
        snprintf(with, sizeof with, "{%s\"debug_forbidden\": true}", inner);
        expect_reason(with, t, "{\"debug\": true}", kinds[i].tcb, want);
        expect_pass(with, t, "{\"debug\": false}", kinds[i].tcb);
        snprintf(allow, sizeof allow, "{%s\"allow_debug\": false}", inner);
        expect_reason(allow, t, "{\"debug\": true}", kinds[i].tcb, want);
        // Only allow_debug: true accepts it, and says so in a warning.
        snprintf(allow, sizeof allow, "{%s\"allow_debug\": true}", inner);
        expect_pass(allow, t, "{\"debug\": true}", kinds[i].tcb);
        expect_pass(allow, t, "{}", kinds[i].tcb);
    }
    // allow_debug with debug_forbidden: false is consistent (only true/true contradicts).
    expect_pass("{\"allow_debug\": true, \"debug_forbidden\": false}", GT_TEE_SNP,
                "{\"debug\": true}", "");
    // NVIDIA SPDM evidence has no debug attribute: the rule does not apply to it.
    expect_pass("{}", GT_TEE_NVGPU, "{}", "");
    expect_pass("{}", GT_TEE_NVGPU, "{\"debug\": true}", "");

    gt_policy *p = policy("{\"allow_debug\": true}");
    cJSON *c = claims("{\"debug\": true}");
    gt_strlist r = {0}, w = {0};
    gt_appraise_params none = {0};
    GT_ASSERT_OK(gt_policy_evaluate(p, GT_TEE_SNP, c, "", &none, &r, &w));
    assert_int_equal(r.count, 0);
    assert_int_equal(w.count, 1);
    assert_true(gt_strlist_contains(&w, "the snp evidence has debug enabled: accepted because the "
                                        "policy sets allow_debug"));
    gt_strlist_free(&r);
    gt_strlist_free(&w);
    cJSON_Delete(c);
    gt_policy_free(p);
}

// Intel TCB status: UpToDate alone by default; a list replaces the default; NotEvaluated admits a
// quote appraised without collateral. Types without a TCB status are not judged by it.
static void rule_tcb_status(void **state)
{
    (void)state;
    static const char *const others[] = {"SWHardeningNeeded", "ConfigurationNeeded",
                                         "ConfigurationAndSWHardeningNeeded", "OutOfDate",
                                         "OutOfDateConfigurationNeeded"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        char want[160], pol[128];
        snprintf(want, sizeof want, "TCB status %s not accepted (accepted: UpToDate, the default "
                                    "without accepted_tcb_statuses)", others[i]);
        expect_reason("{}", GT_TEE_TDX, TDX_OK, others[i], want);
        expect_reason("{}", GT_TEE_SGX, SGX_OK, others[i], want);
        snprintf(pol, sizeof pol, "{\"accepted_tcb_statuses\": [\"%s\"]}", others[i]);
        expect_pass(pol, GT_TEE_TDX, TDX_OK, others[i]);
        expect_pass(pol, GT_TEE_SGX, SGX_OK, others[i]);
    }
    const char *p = "{\"accepted_tcb_statuses\": [\"UpToDate\", \"SWHardeningNeeded\"]}";
    expect_pass(p, GT_TEE_TDX, TDX_OK, "UpToDate");
    expect_pass(p, GT_TEE_SGX, SGX_OK, "SWHardeningNeeded");
    expect_reason(p, GT_TEE_TDX, TDX_OK, "OutOfDate",
                  "TCB status OutOfDate not accepted (accepted: UpToDate, SWHardeningNeeded)");
    expect_reason("{\"accepted_tcb_statuses\": [\"OutOfDate\"]}", GT_TEE_TDX, TDX_OK, "UpToDate",
                  "TCB status UpToDate not accepted (accepted: OutOfDate)");
    expect_reason("{\"accepted_tcb_statuses\": []}", GT_TEE_TDX, TDX_OK, "UpToDate",
                  "(accepted: none)");
    // No status (no collateral): refused unless NotEvaluated is listed.
    expect_reason("{}", GT_TEE_SGX, SGX_OK, "", "TCB status not evaluated (no Intel collateral "
                                                "given, or no TCB level matched) not accepted");
    expect_reason(p, GT_TEE_SGX, SGX_OK, "", "list NotEvaluated to accept it");
    expect_pass("{\"accepted_tcb_statuses\": [\"NotEvaluated\"]}", GT_TEE_SGX, SGX_OK, "");
    expect_reason("{\"accepted_tcb_statuses\": [\"NotEvaluated\"]}", GT_TEE_SGX, SGX_OK,
                  "UpToDate", "TCB status UpToDate not accepted (accepted: NotEvaluated)");
    // Revoked: refused whatever the list, with one reason.
    expect_reason(p, GT_TEE_TDX, TDX_OK, "Revoked", "tcb: status Revoked is never accepted");
    // AMD, NVIDIA and sim report no TCB status: min_svn / allow-lists cover them.
    expect_pass(p, GT_TEE_SNP, SNP_OK, "");
    expect_pass("{}", GT_TEE_SNP, SNP_OK, "");
    expect_pass("{}", GT_TEE_NVGPU, "{}", "");
    expect_pass("{\"allow_simulation\": true}", GT_TEE_SIM, SIM_OK, "");
}

static void rule_min_svn(void **state)
{
    (void)state;
    const char *p = "{\"min_svn\": {\"snp\": {\"bootloader\": 2, \"snp\": 5, \"microcode\": 68},"
                    " \"tdx\": {\"tee_tcb_svn\": \"03000300000000000000000000000000\"},"
                    " \"sgx\": {\"isv_svn\": 4}, \"sim\": {\"svn\": 2}}, \"allow_simulation\": true}";
    expect_pass(p, GT_TEE_SNP, SNP_OK, "");
    expect_reason(p, GT_TEE_SNP,
                  "{\"reported_tcb\": {\"bootloader\": 2, \"tee\": 0, \"snp\": 5, \"microcode\": 67},"
                  " \"debug\": false}",
                  "", "snp min_svn reported_tcb.microcode 67 is below the minimum 68");
    expect_pass(p, GT_TEE_TDX, TDX_OK, "UpToDate");
    expect_reason(p, GT_TEE_TDX,
                  "{\"tee_tcb_svn\": \"02000900000000000000000000000000\", \"debug\": false}",
                  "UpToDate", "tee_tcb_svn[0] 2 is below the minimum 3");
    expect_reason(p, GT_TEE_TDX, "{\"debug\": false}", "UpToDate",
                  "claim 'tee_tcb_svn' is not in the evidence");
    expect_pass(p, GT_TEE_SGX, "{\"isv_svn\": 4, \"debug\": false}", "UpToDate");
    expect_reason(p, GT_TEE_SGX, "{\"isv_svn\": 3, \"debug\": false}", "UpToDate",
                  "isv_svn 3 is below the minimum 4");
    expect_pass(p, GT_TEE_SIM, "{\"svn\": 2, \"debug\": false}", "");
    expect_reason(p, GT_TEE_SIM, "{\"svn\": 1, \"debug\": false}", "",
                  "sim min_svn svn 1 is below the minimum 2");
}

static void rule_gpu(void **state)
{
    (void)state;
    const char *p = "{\"gpu\": {\"cc_mode\": true, \"firmware\": [\"f5c3\"]}, "
                    "\"allow_simulation\": true}";
    expect_pass(p, GT_TEE_NVGPU, "{\"cc_mode\": true, \"fwid\": \"f5c3\"}", "");
    expect_reason(p, GT_TEE_NVGPU, "{\"cc_mode\": false, \"fwid\": \"f5c3\"}", "",
                  "CC mode required, and the device reports it off");
    expect_reason(p, GT_TEE_NVGPU, "{\"fwid\": \"f5c3\"}", "", "does not state it");
    expect_reason(p, GT_TEE_NVGPU, "{\"cc_mode\": true, \"fwid\": \"0000\"}", "",
                  "firmware 0000... is not in the allow-list");
    // A simulated device: its measurement is its firmware.
    expect_pass(p, GT_TEE_SIM,
                "{\"device\": true, \"cc_mode\": true, \"measurement\": \"f5c3\", \"debug\": false}",
                "");
    expect_reason(p, GT_TEE_SIM,
                  "{\"device\": true, \"cc_mode\": false, \"measurement\": \"f5c3\", "
                  "\"debug\": false}",
                  "", "reports it off");
    // CPU TEEs are not devices: GPU rules do not apply.
    expect_pass(p, GT_TEE_TDX, TDX_OK, "UpToDate");
    expect_pass(p, GT_TEE_SIM, "{\"device\": false, \"debug\": false}", "");
}

static void rule_agreement_and_binding(void **state)
{
    (void)state;
    const char *p = "{\"accepted_agreement_hashes\": [\"0102\"]}";
    uint8_t good[2] = {1, 2}, bad[2] = {1, 3};
    gt_appraise_params prm = {.agreement_hash = good, .agreement_hash_len = 2};
    gt_strlist r = eval(p, GT_TEE_TDX, TDX_OK, "UpToDate", &prm);
    assert_int_equal(r.count, 0);
    gt_strlist_free(&r);
    prm.agreement_hash = bad;
    r = eval(p, GT_TEE_TDX, TDX_OK, "UpToDate", &prm);
    assert_int_equal(r.count, 1);
    assert_true(gt_strlist_contains(&r, "agreement 0103... is not accepted"));
    gt_strlist_free(&r);
    expect_reason(p, GT_TEE_TDX, TDX_OK, "UpToDate", "an accepted agreement hash is required");

    // nvgpu binds through the SPDM request nonce (32 bytes: the first half of report_data).
    uint8_t rd[64];
    for (int i = 0; i < 64; i++) {
        rd[i] = (uint8_t)i;
    }
    char hex[65];
    gt_hex_encode(hex, sizeof hex, rd, 32);
    char cj[200];
    snprintf(cj, sizeof cj, "{\"request\": {\"nonce\": \"%s\"}}", hex);
    gt_appraise_params b = {.expected_report_data = rd, .nonce = rd, .nonce_len = 32};
    r = eval("{}", GT_TEE_NVGPU, cj, "", &b);
    assert_int_equal(r.count, 0);
    gt_strlist_free(&r);
    b.nonce_len = 31;
    r = eval("{}", GT_TEE_NVGPU, cj, "", &b);
    assert_int_equal(r.count, 1);
    assert_true(gt_strlist_contains(&r, "request.nonce does not match the nonce"));
    gt_strlist_free(&r);
    r = eval("{}", GT_TEE_SNP, SNP_OK, "", &b);
    assert_int_equal(r.count, 1);
    assert_true(gt_strlist_contains(&r, "no readable report_data claim"));
    gt_strlist_free(&r);
}

static void several_reasons_at_once(void **state)
{
    (void)state;
    const char *p = "{\"accepted_tee_types\": [\"snp\"], "
                    "\"measurements\": {\"tdx\": {\"mr_td\": [\"00\"]}}, "
                    "\"accepted_tcb_statuses\": [\"UpToDate\"], "
                    "\"min_svn\": {\"tdx\": {\"tee_tcb_svn\": \"04000000000000000000000000000000\"}},"
                    " \"accepted_agreement_hashes\": [\"aa\"]}";
    gt_strlist r = eval(p, GT_TEE_TDX,
                        "{\"mr_td\": \"aa11\", \"debug\": true, "
                        "\"tee_tcb_svn\": \"03000400000000000000000000000000\"}",
                        "OutOfDate", NULL);
    assert_int_equal(r.count, 6);
    assert_true(gt_strlist_contains(&r, "TEE type tdx is not accepted"));
    assert_true(gt_strlist_contains(&r, "mr_td aa11... is not in the allow-list"));
    assert_true(gt_strlist_contains(&r, "debug TEE refused"));
    assert_true(gt_strlist_contains(&r, "TCB status OutOfDate not accepted"));
    assert_true(gt_strlist_contains(&r, "tee_tcb_svn[0] 3 is below the minimum 4"));
    assert_true(gt_strlist_contains(&r, "agreement hash is required"));
    gt_strlist_free(&r);
}

static void malformed_policies_name_the_field(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        gt_code code;
        const char *needle;
    } rows[] = {
        {"", GT_E_FORMAT, "syntax error"},
        {"[]", GT_E_FORMAT, "must be a JSON object"},
        {"{\"allow_simulaton\": true}", GT_E_FORMAT, "unknown field 'allow_simulaton'"},
        {"{\"allow_simulation\": 1}", GT_E_FORMAT, "allow_simulation must be true or false"},
        {"{\"version\": 2}", GT_E_UNSUPPORTED, "version 2"},
        {"{\"accepted_tee_types\": [\"tdx\", \"h100\"]}", GT_E_FORMAT, "unknown TEE type 'h100'"},
        {"{\"accepted_tee_types\": [\"auto\"]}", GT_E_FORMAT, "unknown TEE type 'auto'"},
        {"{\"accepted_tee_types\": \"tdx\"}", GT_E_FORMAT, "must be an array"},
        {"{\"measurements\": {\"tdx\": {\"mr_td\": [\"xyz\"]}}}", GT_E_FORMAT, "not a hex string"},
        {"{\"measurements\": {\"tdx\": {\"mr_td\": [\"zz\"]}}}", GT_E_FORMAT, "is not hex"},
        {"{\"measurements\": {\"tdx\": {\"mr_td\": []}}}", GT_E_FORMAT, "empty allow-list"},
        {"{\"measurements\": {\"tdx\": {\"mr td\": [\"00\"]}}}", GT_E_FORMAT, "bad claim name"},
        {"{\"measurements\": {\"tdx\": {\"a..b\": [\"00\"]}}}", GT_E_FORMAT, "bad claim name"},
        {"{\"measurements\": {\"quantum\": {}}}", GT_E_FORMAT, "unknown TEE type 'quantum'"},
        {"{\"min_svn\": {\"snp\": {\"bootloader\": -1}}}", GT_E_FORMAT, "integer in 0..255"},
        {"{\"min_svn\": {\"snp\": {\"bootloader\": 2.5}}}", GT_E_FORMAT, "integer in 0..255"},
        {"{\"min_svn\": {\"snp\": {\"bootloader\": 256}}}", GT_E_FORMAT, "integer in 0..255"},
        {"{\"min_svn\": {\"snp\": {\"ucode\": 1}}}", GT_E_FORMAT, "unknown field min_svn.snp.ucode"},
        {"{\"min_svn\": {\"tdx\": {\"tee_tcb_svn\": \"0300\"}}}", GT_E_FORMAT, "tee_tcb_svn"},
        {"{\"min_svn\": {\"sgx\": {\"isv_svn\": 70000}}}", GT_E_FORMAT, "0..65535"},
        {"{\"gpu\": {\"cc_mode\": \"on\"}}", GT_E_FORMAT, "gpu.cc_mode must be true or false"},
        {"{\"gpu\": {\"firmware\": []}}", GT_E_FORMAT, "gpu.firmware is empty"},
        {"{\"gpu\": {\"vbios\": 1}}", GT_E_FORMAT, "unknown field gpu.vbios"},
        {"{\"accepted_tcb_statuses\": [1]}", GT_E_FORMAT, "status names"},
        {"{\"accepted_tcb_statuses\": [\"UptoDate\"]}", GT_E_FORMAT, "unknown status 'UptoDate'"},
        {"{\"accepted_tcb_statuses\": [\"Revoked\"]}", GT_E_FORMAT, "Revoked is never accepted"},
        {"{\"accepted_tcb_statuses\": \"UpToDate\"}", GT_E_FORMAT, "must be an array"},
        {"{\"allow_debug\": 1}", GT_E_FORMAT, "allow_debug must be true or false"},
        {"{\"allow_debug\": false, \"allow_debug\": true}", GT_E_FORMAT,
         "field 'allow_debug' is given twice"},
        {"{\"accepted_tcb_statuses\": [\"UpToDate\"], \"comment\": \"\", "
         "\"accepted_tcb_statuses\": [\"OutOfDate\"]}",
         GT_E_FORMAT, "field 'accepted_tcb_statuses' is given twice"},
        {"{\"allow_debug\": true, \"debug_forbidden\": true}", GT_E_FORMAT,
         "allow_debug true contradicts debug_forbidden true"},
        {"{\"debug_forbidden\": true, \"allow_debug\": true}", GT_E_FORMAT,
         "allow_debug true contradicts debug_forbidden true"},
        {"{\"accepted_agreement_hashes\": [\"abc\"]}", GT_E_FORMAT, "not a hex string"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        gt_policy *p = (gt_policy *)0x1;
        gt_err e = gt_policy_parse(&p, rows[i].json, strlen(rows[i].json));
        if (e.code != rows[i].code || strstr(e.msg, rows[i].needle) == NULL) {
            fail_msg("row %zu (%s): got %s '%s', want %s with '%s'", i, rows[i].json,
                     gt_code_name(e.code), e.msg, gt_code_name(rows[i].code), rows[i].needle);
        }
        assert_null(p);  // nothing half-built escapes
    }
}

static void policy_file_loads(void **state)
{
    (void)state;
    char dir[4096], path[4200];
    gt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/p.json", dir);
    static const char text[] = "{\"version\": 1, \"comment\": \"test\", \"allow_simulation\": true}";
    GT_ASSERT_OK(gt_file_write_atomic(path, text, strlen(text), 0644));
    gt_policy *p = NULL;
    GT_ASSERT_OK(gt_policy_load_file(&p, path));
    gt_policy_free(p);
    snprintf(path, sizeof path, "%s/missing.json", dir);
    GT_ASSERT_CODE(gt_policy_load_file(&p, path), GT_E_NOTFOUND);
    assert_null(p);
    gt_test_rmtree(dir);
}

#define MRE "e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1"
#define MRS "5151515151515151515151515151515151515151515151515151515151515151"
#define Z32 "0000000000000000000000000000000000000000000000000000000000000000"
#define SGX_ENCLAVE "\"mr_enclave\": \"" MRE "\", \"mr_signer\": \"" MRS "\", " \
                    "\"isv_prod_id\": 7, \"isv_svn\": 3, \"report_data\": \"" Z32 Z32 "\""
#define ENCL_OK "{" SGX_ENCLAVE ", \"debug\": false}"
#define VSGX_ON(host) "{" SGX_ENCLAVE ", \"debug\": false, \"host\": " host "}"

// sgx_enclave: the enclave in SGX terms, on sgx quotes and on vsgx evidence alike.
static void sgx_enclave_rules(void **state)
{
    (void)state;
    const char *all = "{\"sgx_enclave\": {\"mrenclave\": [\"" MRE "\"], \"mrsigner\": [\""
                      MRS "\"], \"isvprodid\": 7, \"min_isvsvn\": 3}, "
                      "\"accepted_tcb_statuses\": [\"UpToDate\"]}";
    expect_pass(all, GT_TEE_SGX, ENCL_OK, "UpToDate");
    expect_reason("{\"sgx_enclave\": {\"mrenclave\": [\"" MRS "\"]}}", GT_TEE_SGX, ENCL_OK,
                  "UpToDate", "sgx_enclave.mrenclave");
    expect_reason("{\"sgx_enclave\": {\"mrsigner\": [\"" MRE "\"]}}", GT_TEE_SGX, ENCL_OK,
                  "UpToDate", "sgx_enclave.mrsigner");
    expect_reason("{\"sgx_enclave\": {\"isvprodid\": 6}}", GT_TEE_SGX, ENCL_OK, "UpToDate",
                  "ISVPRODID 7 is not 6");
    expect_reason("{\"sgx_enclave\": {\"min_isvsvn\": 4}}", GT_TEE_SGX, ENCL_OK, "UpToDate",
                  "below the minimum 4");
    const char *dbg = "{" SGX_ENCLAVE ", \"debug\": true}";
    expect_reason("{}", GT_TEE_SGX, dbg, "UpToDate", "debug TEE refused");
    expect_pass("{\"sgx_enclave\": {\"allow_debug\": true}}", GT_TEE_SGX, dbg, "UpToDate");
    expect_reason("{\"sgx_enclave\": {\"allow_debug\": true}}", GT_TEE_TDX,
                  "{\"debug\": true, \"report_data\": \"00\"}", "UpToDate",
                  "debug TEE refused");  // only enclaves
    static const char *const bad[] = {
        "{\"sgx_enclave\": {\"mrenclave\": [\"e1\"]}}",   // not 32 bytes
        "{\"sgx_enclave\": {\"mrenclave\": []}}",
        "{\"sgx_enclave\": {\"isvsvn\": 1}}",
        "{\"sgx_enclave\": {\"isvprodid\": 70000}}",
        "{\"sgx_enclave\": {\"min_isvsvn\": 1, \"min_isvsvn\": 2}}",
        "{\"sgx_enclave\": []}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gt_policy *p = NULL;
        GT_ASSERT_ERR(gt_policy_parse(&p, bad[i], strlen(bad[i])), GT_E_FORMAT, "sgx_enclave");
    }
}

// vsgx: the host evidence is appraised under the same policy as its own type, reasons prefixed
// with the host; the agreement rule is asked once.
static void vsgx_host_under_the_same_policy(void **state)
{
    (void)state;
    const char *on_snp = VSGX_ON("{\"tee\": \"snp\", \"measurement\": \"cc33\", "
                                 "\"debug\": false, \"report_data\": \"11\"}");
    const char *on_sim = VSGX_ON("{\"tee\": \"sim\", \"debug\": false, \"svn\": 1}");
    expect_pass("{}", GT_TEE_VSGX, on_snp, "");
    expect_reason("{}", GT_TEE_VSGX, on_sim, "", "host sim: policy: insecure-simulation");
    expect_pass("{\"allow_simulation\": true}", GT_TEE_VSGX, on_sim, "");
    expect_reason("{\"measurements\": {\"snp\": {\"measurement\": [\"cc34\"]}}}", GT_TEE_VSGX,
                  on_snp, "", "host snp: policy: snp measurement");
    expect_reason("{\"accepted_tee_types\": [\"vsgx\"]}", GT_TEE_VSGX, on_snp, "",
                  "host snp: policy: TEE type snp is not accepted");
    expect_pass("{\"accepted_tee_types\": [\"vsgx\", \"snp\"]}", GT_TEE_VSGX, on_snp, "");
    expect_reason("{}", GT_TEE_VSGX, VSGX_ON("{\"tee\": \"snp\", \"debug\": true}"), "",
                  "host snp: policy: debug TEE refused");
    expect_reason("{}", GT_TEE_VSGX, "{" SGX_ENCLAVE ", \"debug\": false}", "",
                  "names no host TEE");
    expect_reason("{}", GT_TEE_VSGX, VSGX_ON("{\"tee\": \"vsgx\"}"), "", "names no host TEE");
    // The host's report_data binds the virtual QE: the verifier's nonce is the enclave's.
    uint8_t rd[GT_REPORT_DATA_BYTES] = {0};
    gt_appraise_params prm = {.nonce = rd, .nonce_len = 1};
    gt_strlist r = eval("{}", GT_TEE_VSGX, on_snp, "", &prm);
    assert_int_equal(r.count, 0);
    gt_strlist_free(&r);
    static const char agr[] = "{\"accepted_agreement_hashes\": [\"abcd\"]}";
    r = eval(agr, GT_TEE_VSGX, on_snp, "", NULL);
    assert_int_equal(r.count, 1);  // once, not again for the host
    assert_true(gt_strlist_contains(&r, "agreement hash is required"));
    gt_strlist_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_and_empty_policy),
        cmocka_unit_test(rule_accepted_types),
        cmocka_unit_test(rule_allow_simulation),
        cmocka_unit_test(rule_measurements),
        cmocka_unit_test(rule_debug),
        cmocka_unit_test(rule_tcb_status),
        cmocka_unit_test(rule_min_svn),
        cmocka_unit_test(rule_gpu),
        cmocka_unit_test(rule_agreement_and_binding),
        cmocka_unit_test(several_reasons_at_once),
        cmocka_unit_test(malformed_policies_name_the_field),
        cmocka_unit_test(policy_file_loads),
        cmocka_unit_test(sgx_enclave_rules),
        cmocka_unit_test(vsgx_host_under_the_same_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
