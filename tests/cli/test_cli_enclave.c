// cli/: gputravel enclave measure|inspect|sign|check on the real SGX test data: the JSON says
// what expected.json says, inspect exits 0 on a valid and 2 on a damaged SIGSTRUCT, and a
// SIGSTRUCT signed by the CLI passes check while a wrong image or a tampered one does not.
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_dir[4096];

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(g_dir, sizeof g_dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_rmtree(g_dir);
    return 0;
}

static void data(char *out, size_t cap, const char *file)
{
    char rel[256];
    snprintf(rel, sizeof rel, "sgx-enclave/%s", file);
    gt_test_data_path(out, cap, rel);
}

// Exit status; the output's JSON object when json is not NULL.
static int run(cJSON **json, const char *const *args, gt_buf *text)
{
    gt_buf out = {0};
    int rc = gt_test_run_cli(&out, args);
    if (json != NULL) {
        const char *t = (const char *)out.data;
        const char *start = t[0] == '{' ? t : strstr(t, "\n{");
        if (start == NULL) {
            fail_msg("no JSON object in output: %s", t);
        }
        *json = cJSON_Parse(start[0] == '\n' ? start + 1 : start);
        assert_non_null(*json);
    }
    if (text != NULL) {
        *text = out;
    } else {
        gt_buf_free(&out);
    }
    return rc;
}

static void measure_and_inspect(void **state)
{
    (void)state;
    char sgxs[4096], sig[4096], bin[4096];
    data(sgxs, sizeof sgxs, "fortanix_test_enclave.sgxs");
    data(sig, sizeof sig, "gramine_redis-server_2024.sig");
    data(bin, sizeof bin, "enarx_encl.bin");
    cJSON *j = NULL;
    assert_int_equal(run(&j, (const char *[]){"enclave", "measure", sgxs, "--json", NULL}, NULL),
                     0);
    assert_string_equal(cJSON_GetObjectItem(j, "mrenclave")->valuestring,
                        "784acfd7d5096a8f0fbd3265760bff21b120f62407a9a9e5ba31aa3c8ed198fc");
    assert_string_equal(cJSON_GetObjectItem(j, "format")->valuestring, "sgxs");
    assert_int_equal(cJSON_GetObjectItem(j, "records")->valueint, 154);
    cJSON_Delete(j);
    gt_buf out = {0};
    assert_int_equal(run(NULL, (const char *[]){"enclave", "measure", "--format", "flat", bin,
                                                NULL}, &out), 0);
    assert_non_null(strstr((const char *)out.data,
        "b999536238fcf4e9d360ef6cd3e0c20ef8a684c7b93f74a9c4a4c6d517d61fc0"));
    gt_buf_free(&out);
    assert_int_equal(run(&j, (const char *[]){"enclave", "inspect", sig, "--json", NULL}, NULL),
                     0);
    static const struct {
        const char *key, *value;
    } want[] = {{"mrenclave", "4fd70f2c52bda663737e94d8aacbd56eee395e9d9141ef83c2e34f14bb1b2ee0"},
                {"mrsigner", "44de35ce2524741ccea376d810106880a1595fcfdc912a9156686a35fc3af433"},
                {"attributes", "06000000000000000300000000000000"},
                {"attributemask", "ffffffffffffffff1bfff9ffffffffff"},
                {"miscselect", "0x00000000"}, {"date", "0x20241226"},
                {"header_type", "0x00000000"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_string_equal(cJSON_GetObjectItem(j, want[i].key)->valuestring, want[i].value);
    }
    assert_int_equal(cJSON_GetObjectItem(j, "isvprodid")->valueint, 0);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "signature_valid")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "q1_q2_valid")));
    cJSON_Delete(j);
    // A damaged signature: parsed and shown, exit 2.
    gt_buf b = {0};
    gt_test_read_data("sgx-enclave/gramine_redis-server_2024.sig", &b);
    b.data[600] ^= 1;
    char bad[4200];
    snprintf(bad, sizeof bad, "%s/bad.sig", g_dir);
    GT_ASSERT_OK(gt_file_write_atomic(bad, b.data, b.len, 0644));
    gt_buf_free_nowipe(&b);
    assert_int_equal(run(&j, (const char *[]){"enclave", "inspect", bad, "--json", NULL}, NULL),
                     2);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(j, "signature_valid")));
    cJSON_Delete(j);
    // Not a SIGSTRUCT at all: exit 2 with a message.
    assert_int_equal(run(NULL, (const char *[]){"enclave", "inspect", sgxs, NULL}, NULL), 2);
    assert_int_equal(run(NULL, (const char *[]){"enclave", "bogus", sgxs, NULL}, NULL), 64);
    assert_int_equal(run(NULL, (const char *[]){"enclave", "sign", sgxs, NULL}, NULL), 64);
}

static void sign_then_check(void **state)
{
    (void)state;
    char key[4096], bin[4096], sgxs[4096], out_sig[4200];
    data(key, sizeof key, "enarx_encl.pem");
    data(bin, sizeof bin, "enarx_encl.bin");
    data(sgxs, sizeof sgxs, "fortanix_test_enclave.sgxs");
    snprintf(out_sig, sizeof out_sig, "%s/encl.sig", g_dir);
    assert_int_equal(run(NULL, (const char *[]){"enclave", "sign", "--key", key, "--format",
                                                "flat", bin, "--out", out_sig, "--isvprodid",
                                                "5", "--isvsvn", "2", "--date", "20261202",
                                                NULL}, NULL), 0);
    cJSON *j = NULL;
    assert_int_equal(run(&j, (const char *[]){"enclave", "inspect", out_sig, "--json", NULL},
                         NULL), 0);
    assert_string_equal(cJSON_GetObjectItem(j, "mrenclave")->valuestring,
                        "b999536238fcf4e9d360ef6cd3e0c20ef8a684c7b93f74a9c4a4c6d517d61fc0");
    assert_string_equal(cJSON_GetObjectItem(j, "mrsigner")->valuestring,
                        "2f9f8fd4fe12d77232f1d87571ca8252ca27714efe7705e46222cffd5a22e8c4");
    assert_int_equal(cJSON_GetObjectItem(j, "isvprodid")->valueint, 5);
    assert_int_equal(cJSON_GetObjectItem(j, "isvsvn")->valueint, 2);
    assert_string_equal(cJSON_GetObjectItem(j, "date_iso")->valuestring, "2026-12-02");
    cJSON_Delete(j);
    assert_int_equal(run(NULL, (const char *[]){"enclave", "check", out_sig, "--format", "flat",
                                                bin, NULL}, NULL), 0);
    assert_int_equal(run(NULL, (const char *[]){"enclave", "check", out_sig, "--format", "flat",
                                                bin, "--min-isvsvn", "3", NULL}, NULL), 1);
    // The signature for one image does not launch another.
    gt_buf text = {0};
    assert_int_equal(run(NULL, (const char *[]){"enclave", "check", out_sig, sgxs, NULL}, &text),
                     1);
    assert_non_null(strstr((const char *)text.data, "ENCLAVEHASH"));
    gt_buf_free(&text);
    // A debug enclave needs --allow-debug at check time.
    assert_int_equal(run(NULL, (const char *[]){"enclave", "sign", "--key", key, "--format",
                                                "flat", bin, "--out", out_sig, "--debug",
                                                NULL}, NULL), 0);
    assert_int_equal(run(NULL, (const char *[]){"enclave", "check", out_sig, "--format", "flat",
                                                bin, NULL}, NULL), 1);
    assert_int_equal(run(NULL, (const char *[]){"enclave", "check", out_sig, "--format", "flat",
                                                bin, "--allow-debug", NULL}, NULL), 0);
    // A real SDK enclave carries its own SIGSTRUCT: it checks against itself, not another.
    char so[4096];
    data(so, sizeof so, "sdk_pingpong_2018.signed.so");
    assert_int_equal(run(NULL, (const char *[]){"enclave", "check", so, so, NULL}, NULL), 0);
    assert_int_equal(run(NULL, (const char *[]){"enclave", "check", so, sgxs, NULL}, NULL), 1);
}

// enclave run (insecure-simulation): the example enclave's ECALL 0 adds two u64 (1 + 2 here);
// ECALL 2 makes an OCALL the CLI echoes; the other example's SIGSTRUCT is refused (exit 1).
static void run_example_enclave(void **state)
{
    (void)state;
    const char *sig = GT_ENCLAVE_DIR "/example.sig", *bin = GT_ENCLAVE_DIR "/example.bin";
    gt_buf text = {0};
    assert_int_equal(run(NULL, (const char *[]){"enclave", "run", sig, bin, "--ecall", "0",
                                                "--input", "0100000000000000"
                                                "0200000000000000", NULL}, &text), 0);
    assert_non_null(strstr((const char *)text.data, "insecure-simulation"));
    assert_non_null(strstr((const char *)text.data, "ECALL 0: status 0, 8 output bytes "
                                                    "0300000000000000"));
    gt_buf_free(&text);
    assert_int_equal(run(NULL, (const char *[]){"enclave", "run", sig, bin, "--ecall", "2",
                                                "--input", "abcd", NULL}, &text), 0);
    assert_non_null(strstr((const char *)text.data, "OCALL 0: 2 bytes abcd"));
    assert_non_null(strstr((const char *)text.data, "ECALL 2: status 100, 2 output bytes abcd"));
    gt_buf_free(&text);
    assert_int_equal(run(NULL, (const char *[]){"enclave", "run", GT_ENCLAVE_DIR "/example_b.sig",
                                                bin, "--ecall", "0", NULL}, &text), 1);
    assert_non_null(strstr((const char *)text.data, "MRENCLAVE is not the SIGSTRUCT's"));
    gt_buf_free(&text);
    assert_int_equal(run(NULL, (const char *[]){"enclave", "run", sig, bin, NULL}, NULL), 64);
}

#define NONCE_HEX "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
// The example's REPORTDATA: the nonce, then its label "gputravel example enclave quote\0".
#define EXAMPLE_RD NONCE_HEX "67707574726176656c206578616d706c6520656e636c6176652071756f746500"

// The 64 hex digits after "NAME " in text.
static void hex_after(const char *text, const char *name, char out[65])
{
    const char *p = strstr(text, name);
    assert_non_null(p);
    snprintf(out, 65, "%s", p + strlen(name));
}

static int verify_with(const char *ev, const char *pub, const char *pol, const char *policy,
                       const char *rd)
{
    GT_ASSERT_OK(gt_file_write_atomic(pol, policy, strlen(policy), 0644));
    return run(NULL, (const char *[]){"verify", "--evidence", ev, "--root", pub, "--policy", pol,
                                      "--report-data", rd, NULL}, NULL);
}

// enclave run --platform DIR --quote (insecure-simulation): the running example enclave's own
// REPORT for the virtual QE, quoted on the sealed platform, verifies under a policy naming its
// MRENCLAVE and MRSIGNER and under no other (nor with another report_data); a platform whose
// sealed file was changed never runs an enclave; --quote without --platform is a usage error.
static void run_enclave_quote_then_verify(void **state)
{
    (void)state;
    const char *sig = GT_ENCLAVE_DIR "/example.sig", *bin = GT_ENCLAVE_DIR "/example.bin";
    char sim[4200], pub[4300], pf[4200], ev[4200], pol[4200], pfile[4400];
    snprintf(sim, sizeof sim, "%s/sim-root", g_dir);
    snprintf(pub, sizeof pub, "%s/root-pub.pem", sim);
    snprintf(pf, sizeof pf, "%s/platform", g_dir);
    snprintf(ev, sizeof ev, "%s/quote.ev", g_dir);
    snprintf(pol, sizeof pol, "%s/policy.json", g_dir);
    setenv("GT_SIM_ROOT", sim, 1);
    gt_buf text = {0};
    assert_int_equal(run(NULL, (const char *[]){"enclave", "run", sig, bin, "--ecall", "7",
                                                "--input", NONCE_HEX, "--platform", pf,
                                                "--quote", ev, NULL}, &text), 0);
    const char *t = (const char *)text.data;
    assert_non_null(strstr(t, "of the enclave's own REPORT"));
    char mre[65], mrs[65], policy[512];
    hex_after(t, "MRENCLAVE ", mre);
    hex_after(t, "MRSIGNER ", mrs);
    gt_buf_free(&text);
    static const char fmt[] = "{\"allow_simulation\": true, \"sgx_enclave\": {\"mrenclave\": "
                              "[\"%s\"], \"mrsigner\": [\"%s\"]}}";
    snprintf(policy, sizeof policy, fmt, mre, mrs);
    assert_int_equal(verify_with(ev, pub, pol, policy, EXAMPLE_RD), 0);
    snprintf(policy, sizeof policy, fmt, mrs, mrs);
    assert_int_equal(verify_with(ev, pub, pol, policy, EXAMPLE_RD), 1);
    snprintf(policy, sizeof policy, fmt, mre, mre);
    assert_int_equal(verify_with(ev, pub, pol, policy, EXAMPLE_RD), 1);
    snprintf(policy, sizeof policy, fmt, mre, mrs);
    assert_int_not_equal(verify_with(ev, pub, pol, policy, NONCE_HEX), 0);
    snprintf(pfile, sizeof pfile, "%s/sgx-platform.sealed", pf);
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(pfile, 4096, &b));
    b.data[b.len - 1] ^= 0x80;
    GT_ASSERT_OK(gt_file_write_atomic(pfile, b.data, b.len, 0600));
    gt_buf_free(&b);
    assert_int_equal(run(NULL, (const char *[]){"enclave", "run", sig, bin, "--ecall", "0",
                                                "--input", "0100000000000000"
                                                "0200000000000000", "--platform", pf, NULL},
                         &text), 1);
    assert_non_null(strstr((const char *)text.data, "was not sealed by this sim instance"));
    gt_buf_free(&text);
    assert_int_equal(run(NULL, (const char *[]){"enclave", "run", sig, bin, "--ecall", "7",
                                                "--quote", ev, NULL}, NULL), 64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(measure_and_inspect, setup, teardown),
        cmocka_unit_test_setup_teardown(sign_then_check, setup, teardown),
        cmocka_unit_test(run_example_enclave),
        cmocka_unit_test_setup_teardown(run_enclave_quote_then_verify, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
