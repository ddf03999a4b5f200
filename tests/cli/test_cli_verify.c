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
    const char *h[] = {"verify", "--help", NULL};
    assert_int_equal(run(NULL, h), 0);
    const char *h2[] = {"attest", "--help", NULL};
    assert_int_equal(run(NULL, h2), 0);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(usage_errors_exit_64),
        cmocka_unit_test(sim_accepted_with_policy_and_json_fields),
        cmocka_unit_test(sim_rejected_without_allow_simulation),
        cmocka_unit_test(invalid_evidence_exits_2),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
