// cli/: `gputravel attest` and `gputravel verify` end to end through the binary. Exit codes
// 0 accepted / 1 rejected / 2 invalid / 64 usage, and the --json fields.
#include "testlib.h"

#include <gputravel/crypto.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_dir[4096], g_root[4200], g_pub[4300], g_ev[4200], g_allow[4200];

#define RD_HEX "00112233445566778899aabbccddeeff"

static void write_text(const char *path, const char *text)
{
    GT_ASSERT_OK(gt_file_write_atomic(path, text, strlen(text), 0644));
}

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(g_dir, sizeof g_dir);
    snprintf(g_root, sizeof g_root, "%s/root", g_dir);
    snprintf(g_pub, sizeof g_pub, "%s/root-pub.pem", g_root);
    snprintf(g_ev, sizeof g_ev, "%s/ev.bin", g_dir);
    snprintf(g_allow, sizeof g_allow, "%s/allow.json", g_dir);
    write_text(g_allow, "{\"allow_simulation\": true}");
    const char *args[] = {"attest", "--type", "sim", "--sim-root", g_root, "--report-data",
                          RD_HEX, "--out", g_ev, NULL};
    gt_buf out = {0};
    int rc = gt_test_run_cli(&out, args);
    if (rc != 0) {
        fprintf(stderr, "attest failed (%d): %s\n", rc, (char *)out.data);
    }
    gt_buf_free(&out);
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_rmtree(g_dir);
    return 0;
}

// Runs the CLI; returns the exit code and, with --json, the parsed object (stderr log lines come
// before it in the combined output: the JSON object starts at the first line opening with '{').
static int run(cJSON **json, const char *const *args)
{
    gt_buf out = {0};
    int rc = gt_test_run_cli(&out, args);
    if (json != NULL) {
        const char *text = (const char *)out.data;
        const char *start = text[0] == '{' ? text : strstr(text, "\n{");
        if (start == NULL) {
            fail_msg("no JSON object in output: %s", text);
        }
        if (start[0] == '\n') {
            start++;
        }
        *json = cJSON_ParseWithOpts(start, NULL, false);
        if (*json == NULL) {
            fail_msg("output is not JSON: %s", start);
        }
    }
    gt_buf_free(&out);
    return rc;
}

static const char *jstr(const cJSON *o, const char *path)
{
    const cJSON *c = o;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *tok = strtok(buf, "."); tok != NULL && c != NULL; tok = strtok(NULL, ".")) {
        c = cJSON_GetObjectItemCaseSensitive(c, tok);
    }
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

static bool reasons_contain(const cJSON *o, const char *needle)
{
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(o, "reasons"))
    {
        if (cJSON_IsString(r) && strstr(r->valuestring, needle) != NULL) {
            return true;
        }
    }
    return false;
}

static void usage_errors_exit_64(void **state)
{
    (void)state;
    const char *a1[] = {"verify", NULL};
    const char *a2[] = {"verify", "--evidence", g_ev, "--type", "h100", NULL};
    const char *a3[] = {"verify", "--evidence", g_ev, "--at", "yesterday", NULL};
    const char *a4[] = {"verify", "--evidence", g_ev, "--nonce", "xyz", NULL};
    const char *a5[] = {"verify", "--evidence", g_ev, "--bogus", NULL};
    const char *a6[] = {"verify", "--evidence", g_ev, "extra", NULL};
    const char *a7[] = {"verify", "--evidence", g_ev, "--report-data", "0011", NULL};
    const char *a8[] = {"attest", "--type", "sgx", "--report-data", "00", "--out", g_ev, NULL};
    const char *a9[] = {"attest", "--type", "sim", "--out", g_ev, NULL};
    const char *const *rows[] = {a1, a2, a3, a4, a5, a6, a7, a8, a9};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int rc = run(NULL, rows[i]);
        if (rc != 64) {
            fail_msg("row %zu: exit %d, want 64", i, rc);
        }
    }
    // Hardware collection where there is none: a clear error, exit 1, no file.
    char none[4300], out[4300];
    snprintf(none, sizeof none, "%s/none", g_dir);
    snprintf(out, sizeof out, "%s/hw.bin", g_dir);
    const char *hw[] = {"attest", "--type", "snp", "--tsm-root", none, "--device", none,
                        "--report-data", "00", "--out", out, NULL};
    gt_buf o = {0};
    assert_int_equal(gt_test_run_cli(&o, hw), 1);
    assert_non_null(strstr((char *)o.data, "snp: open"));
    assert_false(gt_path_exists(out));
    gt_buf_free(&o);
    // The help texts state the defaults.
    const char *h[] = {"verify", "--help", NULL};
    gt_buf help = {0};
    assert_int_equal(gt_test_run_cli(&help, h), 0);
    GT_ASSERT_OK(gt_buf_append(&help, "", 1));
    assert_non_null(strstr((char *)help.data, "a debug TEE\n                      (unless \"allow_debug\": true)"));
    assert_non_null(strstr((char *)help.data, "other than\n                      UpToDate"));
    gt_buf_free(&help);
    const char *h2[] = {"attest", "--help", NULL};
    assert_int_equal(gt_test_run_cli(&help, h2), 0);
    GT_ASSERT_OK(gt_buf_append(&help, "", 1));
    assert_non_null(strstr((char *)help.data, "\"allow_debug\": true"));
    gt_buf_free(&help);
}

static void sim_accepted_with_policy_and_json_fields(void **state)
{
    (void)state;
    cJSON *j = NULL;
    const char *args[] = {"verify", "--evidence", g_ev, "--root", g_pub, "--policy", g_allow,
                          "--nonce", RD_HEX, "--json", NULL};
    assert_int_equal(run(&j, args), 0);
    assert_string_equal(jstr(j, "type"), "sim");
    assert_int_equal(cJSON_GetObjectItem(j, "version")->valuedouble, 1);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "signature_valid")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "chain_valid")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "tcb_status")));
    assert_string_equal(jstr(j, "verdict"), "accepted");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "reasons")), 0);
    assert_string_equal(jstr(j, "security"), "insecure-simulation");
    assert_string_equal(jstr(j, "claims.security"), "insecure-simulation");
    assert_string_equal(jstr(j, "claims.tee"), "sim");
    // report_data = the 16 given bytes, zero-padded to 64, in lower-case hex.
    char want[129] = RD_HEX;
    while (strlen(want) < 128) {
        strcat(want, "0");
    }
    assert_string_equal(jstr(j, "claims.report_data"), want);
    // measurement = SHA-384 of the gputravel executable that attested.
    uint8_t m[48];
    char mhex[97];
    GT_ASSERT_OK(gt_hash_file(GT_HASH_SHA384, m, GT_CLI_PATH));
    gt_hex_encode(mhex, sizeof mhex, m, sizeof m);
    assert_string_equal(jstr(j, "claims.measurement"), mhex);
    cJSON_Delete(j);
}

static void sim_rejected_without_allow_simulation(void **state)
{
    (void)state;
    cJSON *j = NULL;
    const char *args[] = {"verify", "--evidence", g_ev, "--root", g_pub, "--json", NULL};
    assert_int_equal(run(&j, args), 1);
    assert_string_equal(jstr(j, "verdict"), "rejected");
    assert_true(reasons_contain(j, "does not set allow_simulation"));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "signature_valid")));
    cJSON_Delete(j);
    // Wrong nonce under an accepting policy: rejected, with the binding reason.
    const char *a2[] = {"verify", "--evidence", g_ev, "--root", g_pub, "--policy", g_allow,
                        "--nonce", "0011", "--json", NULL};
    assert_int_equal(run(&j, a2), 1);
    assert_true(reasons_contain(j, "does not match the nonce"));
    cJSON_Delete(j);
    // Text output says insecure-simulation too.
    gt_buf out = {0};
    const char *a3[] = {"verify", "--evidence", g_ev, "--root", g_pub, NULL};
    assert_int_equal(gt_test_run_cli(&out, a3), 1);
    assert_non_null(strstr((char *)out.data, "insecure-simulation"));
    assert_non_null(strstr((char *)out.data, "verdict:   rejected"));
    gt_buf_free(&out);
}

static void invalid_evidence_exits_2(void **state)
{
    (void)state;
    cJSON *j = NULL;
    // No root: the embedded key id is never trusted.
    const char *a1[] = {"verify", "--evidence", g_ev, "--policy", g_allow, "--json", NULL};
    assert_int_equal(run(&j, a1), 2);
    assert_string_equal(jstr(j, "verdict"), "invalid");
    assert_true(reasons_contain(j, "no root given"));
    cJSON_Delete(j);

    // Another sim root.
    char other[4300], other_pub[4400], ev2[4300];
    snprintf(other, sizeof other, "%s/other", g_dir);
    snprintf(other_pub, sizeof other_pub, "%s/root-pub.pem", other);
    snprintf(ev2, sizeof ev2, "%s/ev2.bin", g_dir);
    const char *mk[] = {"attest", "--type", "sim", "--sim-root", other, "--report-data", "00",
                        "--out", ev2, NULL};
    assert_int_equal(run(NULL, mk), 0);
    const char *a2[] = {"verify", "--evidence", ev2, "--root", g_pub, "--policy", g_allow,
                        "--json", NULL};
    assert_int_equal(run(&j, a2), 2);
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(j, "signature_valid")));
    assert_true(reasons_contain(j, "signature does not verify"));
    cJSON_Delete(j);

    // Truncated, tampered and oversized files.
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(g_ev, 1 << 20, &b));
    char bad[4300];
    snprintf(bad, sizeof bad, "%s/bad.bin", g_dir);
    GT_ASSERT_OK(gt_file_write_atomic(bad, b.data, b.len - 1, 0644));
    const char *a3[] = {"verify", "--evidence", bad, "--root", g_pub, "--policy", g_allow,
                        "--json", NULL};
    assert_int_equal(run(&j, a3), 2);
    assert_string_equal(jstr(j, "verdict"), "invalid");
    cJSON_Delete(j);
    b.data[40] ^= 0x10;
    GT_ASSERT_OK(gt_file_write_atomic(bad, b.data, b.len, 0644));
    assert_int_equal(run(&j, a3), 2);
    cJSON_Delete(j);
    gt_buf big = {0};
    GT_ASSERT_OK(gt_buf_reserve(&big, (2u << 20)));
    memset(big.data, 'G', 2u << 20);
    GT_ASSERT_OK(gt_file_write_atomic(bad, big.data, 2u << 20, 0644));
    assert_int_equal(run(&j, a3), 2);
    assert_string_equal(jstr(j, "verdict"), "invalid");
    cJSON_Delete(j);
    gt_buf_free(&big);
    gt_buf_free(&b);

    // Wrong --type for the evidence.
    const char *a4[] = {"verify", "--evidence", g_ev, "--type", "tdx", "--root", g_pub, "--json",
                        NULL};
    assert_int_equal(run(&j, a4), 2);
    assert_true(reasons_contain(j, "evidence is sim, but tdx was expected"));
    cJSON_Delete(j);

    // Unreadable inputs: missing evidence, broken policy.
    char missing[4300], broken[4300];
    snprintf(missing, sizeof missing, "%s/missing.bin", g_dir);
    snprintf(broken, sizeof broken, "%s/broken.json", g_dir);
    write_text(broken, "{\"allow_simulation\": \"yes\"}");
    const char *a5[] = {"verify", "--evidence", missing, "--root", g_pub, NULL};
    assert_int_equal(run(NULL, a5), 2);
    const char *a6[] = {"verify", "--evidence", g_ev, "--root", g_pub, "--policy", broken, NULL};
    assert_int_equal(run(NULL, a6), 2);
}

// ---- every sample of tests/testdata/attestation through the CLI ------------------------------------

#define DATA GT_TEST_DATA_DIR "/attestation/"

// Verification times (the MANIFESTs: collateral and some certificates have expired).
static const struct {
    const char *id;
    const char *at;  // unix seconds
} sample_times[] = {
    {"gotdx-v4-spr-e4", "1688169600"},    // 2023-07-01: go-tdx-guest verify_test's time
    {"gotdx-v5-td15", "1770076800"},      // 2026-02-03
    {"dcapqvl-v4", "1751328000"},         // 2025-07-01: TCB info 2025-06-19 .. 2025-07-19
    {"dcapqvl-v4-hex", "1780272000"},     // 2026-06-01
    {"trustee-v5", "1780272000"},
    {"trustee-v4-6", "1780272000"},
    {"trustee-azure-v4", "1780272000"},
    {"dcapqvl-sgx-v3", "1751328000"},     // 2025-07-01
    {"mobilecoin-sgx-v3", "1682899200"},  // 2023-05-01: processor CRL 2023-04-21 .. 2023-05-21
};

static const char *sample_time(const char *id)
{
    for (size_t i = 0; i < sizeof sample_times / sizeof sample_times[0]; i++) {
        if (strcmp(sample_times[i].id, id) == 0) {
            return sample_times[i].at;
        }
    }
    return NULL;
}

// Every field of want that the claims carry must be equal (recursively); returns how many
// scalar fields matched.
static int claims_match(const cJSON *want, const cJSON *got, const char *where)
{
    int n = 0;
    const cJSON *w;
    cJSON_ArrayForEach(w, want)
    {
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(got, w->string);
        if (g == NULL) {
            continue;
        }
        if (cJSON_IsObject(w) && cJSON_IsObject(g)) {
            n += claims_match(w, g, where);
            continue;
        }
        if (!cJSON_Compare(w, g, true)) {
            char *a = cJSON_PrintUnformatted(w), *b = cJSON_PrintUnformatted(g);
            fail_msg("%s: claim %s = %s, expected %s", where, w->string, b, a);
        }
        n++;
    }
    return n;
}

typedef struct {
    const char *args[48];
    int n;
    char bufs[24][600];
    int nb;
} argv_b;

static void arg(argv_b *a, const char *s)
{
    assert_true(a->n < 46);
    a->args[a->n++] = s;
    a->args[a->n] = NULL;
}

static void arg_path(argv_b *a, const char *opt, const char *dir, const char *file)
{
    assert_true(a->nb < 24);
    snprintf(a->bufs[a->nb], sizeof a->bufs[0], "%s%s/%s", DATA, dir, file);
    arg(a, opt);
    arg(a, a->bufs[a->nb++]);
}

static const cJSON *field(const cJSON *o, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(o, name);
}

static const char *sfield(const cJSON *o, const char *name)
{
    const cJSON *f = field(o, name);
    return cJSON_IsString(f) ? f->valuestring : NULL;
}

static cJSON *expected_for(const char *dir, const char *evidence)
{
    char rel[512];
    snprintf(rel, sizeof rel, "attestation/%s/%s.expected.json", dir, evidence);
    gt_buf b = {0};
    gt_test_read_data(rel, &b);
    cJSON *j = cJSON_ParseWithLength((const char *)b.data, b.len);
    gt_buf_free(&b);
    assert_non_null(j);
    return j;
}

// Writes a policy file under g_dir (name unique per call site) and returns its path in out.
static const char *policy_file(char *out, size_t cap, const char *name, const char *json)
{
    snprintf(out, cap, "%s/%s.json", g_dir, name);
    write_text(out, json);
    return out;
}

// The sample's verify command with its trust inputs (and --policy FILE when policy != NULL).
static void sample_args(argv_b *a, const char *dir, const cJSON *s, const char *at,
                        const char *policy)
{
    arg(a, "verify");
    arg_path(a, "--evidence", dir, sfield(s, "evidence"));
    arg_path(a, "--root", dir, sfield(s, "root"));
    arg(a, "--at");
    arg(a, at);
    if (policy != NULL) {
        arg(a, "--policy");
        arg(a, policy);
    }
    arg(a, "--json");
}

static void sample_collateral(argv_b *a, const char *dir, const cJSON *coll)
{
    static const char *const kinds[] = {"tcb_info", "qe_identity", "pck_crl",
                                        "root_ca_crl", "tcb_signing_chain", "file"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (sfield(coll, kinds[k]) != NULL) {
            arg_path(a, "--collateral", dir, sfield(coll, kinds[k]));
        }
    }
}

// With the sample's collateral: Intel's TCB status, as the MANIFEST states. The default policy
// accepts only UpToDate (and no debug); a policy listing the sample's status accepts it.
static void intel_sample_with_collateral(const char *dir, const cJSON *s, const char *at,
                                         const cJSON *exp, bool debug)
{
    const char *id = sfield(s, "id");
    const cJSON *tcb = field(exp, "tcb");
    const char *want = tcb ? sfield(tcb, "platform_tcb_status") : NULL;
    cJSON *j = NULL;
    argv_b a = {0};
    sample_args(&a, dir, s, at, NULL);
    sample_collateral(&a, dir, field(s, "collateral"));
    int rc = run(&j, a.args);
    if (want != NULL && strcmp(want, "NoMatchingTcbLevel") == 0) {
        // 2023 collateral, but the stored TCB signing chain was issued in 2025: the collateral
        // cannot be authenticated at 2023-07-01, so the evidence is invalid, and the unmatched
        // TCB level is listed too.
        assert_int_equal(rc, 2);
        assert_true(reasons_contain(j, "TCB signing chain: x509: certificate is not yet valid"));
        assert_true(reasons_contain(j, "no TCB level matches"));
        cJSON_Delete(j);
        return;
    }
    bool default_ok = want != NULL && strcmp(want, "UpToDate") == 0 && !debug;
    if (rc != (default_ok ? 0 : 1)) {
        fail_msg("%s with collateral, default policy: exit %d: %s", id, rc,
                 cJSON_PrintUnformatted(j));
    }
    if (want != NULL && strcmp(want, "UpToDate") != 0) {
        char reason[128];
        snprintf(reason, sizeof reason, "TCB status %s not accepted (accepted: UpToDate", want);
        assert_true(reasons_contain(j, reason));
    } else if (want == NULL) {
        assert_true(reasons_contain(j, "TCB status not evaluated"));
    }
    assert_int_equal(reasons_contain(j, "debug TEE refused"), debug);
    cJSON_Delete(j);

    // The policy states what this sample is: its status (the MANIFEST's), debug if it is.
    char pol[4300], doc[256];
    snprintf(doc, sizeof doc, "{\"accepted_tcb_statuses\": [\"%s\"]%s}",
             want ? want : "NotEvaluated", debug ? ", \"allow_debug\": true" : "");
    argv_b b = {0};
    sample_args(&b, dir, s, at, policy_file(pol, sizeof pol, "sample-coll", doc));
    sample_collateral(&b, dir, field(s, "collateral"));
    rc = run(&j, b.args);
    if (rc != 0) {
        fail_msg("%s with collateral under %s: exit %d: %s", id, doc, rc,
                 cJSON_PrintUnformatted(j));
    }
    if (want != NULL) {
        assert_string_equal(sfield(j, "tcb_status"), want);
    } else {
        assert_true(cJSON_IsNull(field(j, "tcb_status")));
    }
    cJSON_Delete(j);
}

static void intel_samples(const char *dir, int *count)
{
    char rel[256];
    snprintf(rel, sizeof rel, "attestation/%s/catalog.json", dir);
    gt_buf b = {0};
    gt_test_read_data(rel, &b);
    cJSON *cat = cJSON_ParseWithLength((const char *)b.data, b.len);
    gt_buf_free(&b);
    const cJSON *s;
    cJSON_ArrayForEach(s, field(cat, "samples"))
    {
        const char *id = sfield(s, "id"), *ev = sfield(s, "evidence");
        const char *at = sample_time(id);
        assert_non_null(at);
        cJSON *exp = expected_for(dir, ev);
        const cJSON *body = field(field(exp, "parsed"), "body");
        const char *key = strcmp(dir, "tdx") == 0 ? "mr_td" : "mr_enclave";
        bool debug = cJSON_IsTrue(field(field(body, "attributes_flags"), "debug")) ||
                     cJSON_IsTrue(field(field(body, "td_attributes_flags"), "debug"));
        char pol[4300];

        // Quote + PCK chain only, default policy: authentic, but no TCB status (no collateral)
        // and, for the DEBUG enclave, debug: rejected, naming each rule.
        argv_b d = {0};
        sample_args(&d, dir, s, at, NULL);
        cJSON *j = NULL;
        int rc = run(&j, d.args);
        if (rc != 1) {
            fail_msg("%s, default policy: exit %d (want 1): %s", id, rc, cJSON_PrintUnformatted(j));
        }
        assert_string_equal(sfield(j, "verdict"), "rejected");
        assert_true(cJSON_IsTrue(field(j, "signature_valid")) && cJSON_IsTrue(field(j, "chain_valid")));
        assert_true(reasons_contain(j, "TCB status not evaluated (no Intel collateral given"));
        assert_int_equal(reasons_contain(j, "debug TEE refused: the policy does not set allow_debug"),
                         debug);
        cJSON_Delete(j);

        // A policy stating what it accepts (no TCB status; debug for the DEBUG enclave only):
        // accepted, claims as expected.
        argv_b a = {0};
        sample_args(&a, dir, s, at,
                    policy_file(pol, sizeof pol, "sample-nocoll",
                                debug ? "{\"accepted_tcb_statuses\": [\"NotEvaluated\"], "
                                        "\"allow_debug\": true}"
                                      : "{\"accepted_tcb_statuses\": [\"NotEvaluated\"]}"));
        rc = run(&j, a.args);
        if (rc != 0) {
            fail_msg("%s: exit %d: %s", id, rc, cJSON_PrintUnformatted(j));
        }
        assert_string_equal(sfield(j, "type"), dir);
        assert_string_equal(sfield(j, "verdict"), "accepted");
        assert_true(cJSON_IsNull(field(j, "tcb_status")));
        int n = claims_match(body, field(j, "claims"), id);
        assert_true(n >= 11);
        assert_string_equal(sfield(field(j, "claims"), key), sfield(body, key));
        assert_string_equal(sfield(field(j, "claims"), "report_data"), sfield(body, "report_data"));
        cJSON_Delete(j);

        if (field(s, "collateral") != NULL) {
            intel_sample_with_collateral(dir, s, at, exp, debug);
        }

        // Without allow_debug the DEBUG enclave (and only it) is refused, also under an old
        // policy's "debug_forbidden": false.
        static const char *const no_debug[] = {
            "{\"accepted_tcb_statuses\": [\"NotEvaluated\"]}",
            "{\"accepted_tcb_statuses\": [\"NotEvaluated\"], \"debug_forbidden\": false}",
            "{\"accepted_tcb_statuses\": [\"NotEvaluated\"], \"debug_forbidden\": true}",
        };
        for (size_t i = 0; i < sizeof no_debug / sizeof no_debug[0]; i++) {
            argv_b e = {0};
            sample_args(&e, dir, s, at, policy_file(pol, sizeof pol, "sample-nodebug", no_debug[i]));
            rc = run(&j, e.args);
            assert_int_equal(rc, debug ? 1 : 0);
            if (debug) {
                assert_true(reasons_contain(j, "debug TEE refused: the policy does not set "
                                               "allow_debug"));
                assert_int_equal(cJSON_GetArraySize(field(j, "reasons")), 1);
            }
            cJSON_Delete(j);
        }
        cJSON_Delete(exp);
        (*count)++;
    }
    cJSON_Delete(cat);
}

static void every_intel_sample_verifies(void **state)
{
    (void)state;
    int count = 0;
    intel_samples("tdx", &count);
    intel_samples("sgx", &count);
    assert_int_equal(count, 9);
}

static void every_snp_and_nvgpu_sample_verifies(void **state)
{
    (void)state;
    int count = 0;
    gt_buf b = {0};
    gt_test_read_data("attestation/snp/catalog.json", &b);
    cJSON *cat = cJSON_ParseWithLength((const char *)b.data, b.len);
    gt_buf_free(&b);
    const cJSON *s;
    cJSON_ArrayForEach(s, field(cat, "samples"))
    {
        const char *id = sfield(s, "id"), *ev = sfield(s, "evidence");
        argv_b a = {0};
        arg(&a, "verify");
        arg_path(&a, "--evidence", "snp", ev);
        arg_path(&a, "--cert", "snp", sfield(s, "vek"));
        arg_path(&a, "--root", "snp", sfield(s, "ca_chain"));
        char at[32];
        if (cJSON_IsNumber(field(s, "attime"))) {
            snprintf(at, sizeof at, "%.0f", field(s, "attime")->valuedouble);
            arg(&a, "--at");
            arg(&a, at);
        }
        arg(&a, "--json");
        cJSON *exp = expected_for("snp", ev);
        const cJSON *parsed = field(exp, "parsed");
        // A guest policy allowing debug (the MANIFEST: go-sev-guest's report) is a debug TEE:
        // refused by the default policy, accepted by one that sets allow_debug.
        bool debug = cJSON_IsTrue(field(field(parsed, "policy"), "debug_allowed"));
        cJSON *j = NULL;
        int rc = run(&j, a.args);
        assert_int_equal(rc, debug ? 1 : 0);
        if (debug) {
            assert_true(reasons_contain(j, "debug TEE refused: the policy does not set allow_debug "
                                           "(the snp evidence has debug enabled)"));
            assert_int_equal(cJSON_GetArraySize(field(j, "reasons")), 1);
            cJSON_Delete(j);
            char pol[4300];
            a.args[a.n - 1] = "--policy";
            arg(&a, policy_file(pol, sizeof pol, "snp-debug", "{\"allow_debug\": true}"));
            arg(&a, "--json");
            rc = run(&j, a.args);
        }
        if (rc != 0) {
            fail_msg("%s: exit %d: %s", id, rc, cJSON_PrintUnformatted(j));
        }
        assert_true(claims_match(parsed, field(j, "claims"), id) >= 25);
        assert_string_equal(sfield(field(j, "claims"), "measurement"), sfield(parsed, "measurement"));
        assert_string_equal(sfield(field(j, "claims"), "chip_id"), sfield(parsed, "chip_id"));
        assert_string_equal(sfield(j, "verdict"), "accepted");
        cJSON_Delete(j);
        cJSON_Delete(exp);
        count++;
    }
    cJSON_Delete(cat);
    assert_int_equal(count, 4);

    gt_test_read_data("attestation/nvgpu/catalog.json", &b);
    cat = cJSON_ParseWithLength((const char *)b.data, b.len);
    gt_buf_free(&b);
    cJSON_ArrayForEach(s, field(cat, "samples"))
    {
        const char *id = sfield(s, "id"), *ev = sfield(s, "evidence");
        argv_b a = {0};
        arg(&a, "verify");
        arg_path(&a, "--evidence", "nvgpu", ev);
        arg_path(&a, "--cert", "nvgpu", sfield(s, "cert_chain"));
        arg_path(&a, "--root", "nvgpu", sfield(s, "root"));
        arg(&a, "--nonce");
        arg(&a, sfield(s, "nonce"));
        arg(&a, "--json");
        cJSON *j = NULL;
        int rc = run(&j, a.args);
        if (rc != 0) {
            fail_msg("%s: exit %d: %s", id, rc, cJSON_PrintUnformatted(j));
        }
        cJSON *exp = expected_for("nvgpu", ev);
        const cJSON *parsed = field(exp, "parsed");
        assert_true(claims_match(parsed, field(j, "claims"), id) >= 64);
        assert_string_equal(sfield(field(field(j, "claims"), "request"), "nonce"), sfield(s, "nonce"));
        cJSON_Delete(j);
        // A stale nonce: authentic evidence, rejected.
        a.args[a.n - 2] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        assert_int_equal(run(&j, a.args), 1);
        assert_true(reasons_contain(j, "request.nonce does not match the nonce"));
        cJSON_Delete(j);
        cJSON_Delete(exp);
        count++;
    }
    cJSON_Delete(cat);
    assert_int_equal(count, 6);
}

static void hardware_evidence_refuses_wrong_trust(void **state)
{
    (void)state;
    cJSON *j = NULL;
    // The right quote with the wrong root (the NVIDIA CA): the chain does not reach it.
    argv_b a = {0};
    arg(&a, "verify");
    arg_path(&a, "--evidence", "tdx", "trustee_tdx_quote_5.dat");
    arg_path(&a, "--root", "nvgpu", "nvidia_device_identity_ca.pem");
    arg(&a, "--at");
    arg(&a, "1780272000");
    arg(&a, "--json");
    assert_int_equal(run(&j, a.args), 2);
    assert_false(cJSON_IsTrue(field(j, "chain_valid")));
    assert_true(reasons_contain(j, "PCK chain"));
    cJSON_Delete(j);
    // An SNP report with another chip's VCEK.
    argv_b b = {0};
    arg(&b, "verify");
    arg_path(&b, "--evidence", "snp", "go-sev-guest_attestation.bin");
    arg_path(&b, "--cert", "snp", "trustee_az-snp-vtpm_vcek-milan-chain.pem");
    arg_path(&b, "--root", "snp", "amd_milan_ask_ark.pem");
    arg(&b, "--json");
    assert_int_equal(run(&j, b.args), 2);
    assert_false(cJSON_IsTrue(field(j, "signature_valid")));
    cJSON_Delete(j);
    // Odd collateral: JSON that is no Intel collateral, and a TCB info with a broken body.
    char odd[4300];
    snprintf(odd, sizeof odd, "%s/odd.json", g_dir);
    write_text(odd, "{\"tcbInfo\": {\"id\": 5, \"extra\": [1, 2]}, \"signature\": \"zz\"}");
    argv_b c = {0};
    arg(&c, "verify");
    arg_path(&c, "--evidence", "tdx", "dcap-qvl_tdx_quote");
    arg_path(&c, "--root", "tdx", "intel_sgx_root_ca.pem");
    arg(&c, "--collateral");
    arg(&c, odd);
    arg(&c, "--at");
    arg(&c, "1751328000");
    arg(&c, "--json");
    assert_int_equal(run(&j, c.args), 2);
    assert_true(reasons_contain(j, "collateral"));
    cJSON_Delete(j);
    write_text(odd, "{\"hello\": 1}");
    assert_int_equal(run(&j, c.args), 2);
    assert_true(reasons_contain(j, "neither TCB info, QE identity nor dcap-qvl"));
    cJSON_Delete(j);
}

// The CLI, not the library, turns the environment into a sim root (gputravel --help): with
// none of GT_SIM_ROOT, XDG_DATA_HOME and HOME it fails saying what to set; GT_SIM_ROOT is used
// as given; without it, HOME gives the same default as before.
static void sim_root_comes_from_the_cli_environment(void **state)
{
    (void)state;
    char ev[4300], env_root[4300], home[4300], key[4400];
    snprintf(ev, sizeof ev, "%s/env-ev.bin", g_dir);
    snprintf(env_root, sizeof env_root, "%s/env-root", g_dir);
    snprintf(home, sizeof home, "%s/home", g_dir);
    char *saved_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    char *saved_root = getenv("GT_SIM_ROOT") ? strdup(getenv("GT_SIM_ROOT")) : NULL;
    char *saved_xdg = getenv("XDG_DATA_HOME") ? strdup(getenv("XDG_DATA_HOME")) : NULL;
    const char *args[] = {"attest", "--type", "sim", "--report-data", RD_HEX, "--out", ev, NULL};
    unsetenv("GT_SIM_ROOT");
    unsetenv("XDG_DATA_HOME");
    unsetenv("HOME");
    gt_buf out = {0};
    assert_int_equal(gt_test_run_cli(&out, args), 1);
    assert_non_null(strstr((char *)out.data, "GT_SIM_ROOT"));
    assert_false(gt_path_exists(ev));
    gt_buf_free(&out);

    setenv("GT_SIM_ROOT", env_root, 1);
    assert_int_equal(gt_test_run_cli(&out, args), 0);
    gt_buf_free(&out);
    snprintf(key, sizeof key, "%s/root-key.pem", env_root);
    assert_true(gt_path_exists(key));

    unsetenv("GT_SIM_ROOT");
    setenv("HOME", home, 1);
    assert_int_equal(gt_test_run_cli(&out, args), 0);
    gt_buf_free(&out);
    snprintf(key, sizeof key, "%s/.local/share/gputravel/sim-root/root-key.pem", home);
    assert_true(gt_path_exists(key));

    const char *names[] = {"HOME", "GT_SIM_ROOT", "XDG_DATA_HOME"};
    char *saved[] = {saved_home, saved_root, saved_xdg};
    for (int i = 0; i < 3; i++) {
        if (saved[i] != NULL) {
            setenv(names[i], saved[i], 1);
        } else {
            unsetenv(names[i]);
        }
        free(saved[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(usage_errors_exit_64),
        cmocka_unit_test(sim_root_comes_from_the_cli_environment),
        cmocka_unit_test(sim_accepted_with_policy_and_json_fields),
        cmocka_unit_test(sim_rejected_without_allow_simulation),
        cmocka_unit_test(invalid_evidence_exits_2),
        cmocka_unit_test(every_intel_sample_verifies),
        cmocka_unit_test(every_snp_and_nvgpu_sample_verifies),
        cmocka_unit_test(hardware_evidence_refuses_wrong_trust),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
