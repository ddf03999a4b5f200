// cli/: gputravel enclave seal|unseal|quote, then gputravel verify on the quote, on sim
// (insecure-simulation). Sealed data comes back for the same enclave and is refused to another;
// the quote verifies with both identities (the enclave's MRENCLAVE from its real SIGSTRUCT, the
// host's sim measurement), is refused without allow_simulation and invalid with a changed byte;
// TDX is refused for want of a sealing key.
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The selftest enclave's MRENCLAVE and MRSIGNER (its expected.json, from its SIGSTRUCT).
#define ENARX_MRENCLAVE "b999536238fcf4e9d360ef6cd3e0c20ef8a684c7b93f74a9c4a4c6d517d61fc0"
#define ENARX_MRSIGNER "2f9f8fd4fe12d77232f1d87571ca8252ca27714efe7705e46222cffd5a22e8c4"

static char g_dir[4096], g_pf[4200], g_sim[4200], g_pub[4300];
static char g_sig[4096], g_other[4096];

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(g_dir, sizeof g_dir);
    snprintf(g_pf, sizeof g_pf, "%s/platform", g_dir);
    snprintf(g_sim, sizeof g_sim, "%s/sim-root", g_dir);
    snprintf(g_pub, sizeof g_pub, "%s/root-pub.pem", g_sim);
    setenv("GT_SIM_ROOT", g_sim, 1);
    gt_test_data_path(g_sig, sizeof g_sig, "sgx-enclave/enarx_encl.ss");
    gt_test_data_path(g_other, sizeof g_other, "sgx-enclave/fortanix_test_enclave.sig");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_rmtree(g_dir);
    return 0;
}

static int run(const char *const *args, gt_buf *out)
{
    gt_buf o = {0};
    int rc = gt_test_run_cli(&o, args);
    if (out != NULL) {
        *out = o;
    } else {
        gt_buf_free(&o);
    }
    return rc;
}

static void seal_then_unseal(void **state)
{
    (void)state;
    char in[4400], blob[4400], back[4400];
    snprintf(in, sizeof in, "%s/in.txt", g_dir);
    snprintf(blob, sizeof blob, "%s/blob", g_dir);
    snprintf(back, sizeof back, "%s/back.txt", g_dir);
    GT_ASSERT_OK(gt_file_write_atomic(in, "model weights key", 17, 0600));
    assert_int_equal(run((const char *[]){"enclave", "seal", "--platform", g_pf, "--sigstruct",
                                          g_sig, in, "--out", blob, NULL}, NULL), 0);
    assert_int_equal(run((const char *[]){"enclave", "unseal", "--platform", g_pf,
                                          "--sigstruct", g_sig, blob, "--out", back, NULL},
                         NULL), 0);
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(back, 1 << 16, &b));
    assert_int_equal(b.len, 17);
    assert_memory_equal(b.data, "model weights key", 17);
    gt_buf_free(&b);
    gt_buf out = {0};
    assert_int_equal(run((const char *[]){"enclave", "unseal", "--platform", g_pf,
                                          "--sigstruct", g_other, blob, "--out", back, NULL},
                         &out), 1);
    assert_non_null(strstr((const char *)out.data, "does not open this blob"));
    gt_buf_free(&out);
    assert_int_equal(run((const char *[]){"enclave", "seal", "--platform", g_pf, in, NULL}, NULL),
                     64);
}

static void quote_then_verify(void **state)
{
    (void)state;
    char ev[4400], pol[4400];
    snprintf(ev, sizeof ev, "%s/quote.ev", g_dir);
    snprintf(pol, sizeof pol, "%s/p.json", g_dir);
    static const char p[] = "{\"allow_simulation\": true, \"sgx_enclave\": {\"mrenclave\": "
                            "[\"" ENARX_MRENCLAVE "\"], \"mrsigner\": [\"" ENARX_MRSIGNER "\"]}}";
    static const char wrong[] = "{\"allow_simulation\": true, \"sgx_enclave\": {\"mrsigner\": "
                                "[\"" ENARX_MRENCLAVE "\"]}}";
    assert_int_equal(run((const char *[]){"enclave", "quote", "--platform", g_pf, "--sigstruct",
                                          g_sig, "--report-data", "00112233", "--out", ev,
                                          NULL}, NULL), 0);
    gt_buf out = {0};
    assert_int_equal(run((const char *[]){"verify", "--evidence", ev, "--root", g_pub,
                                          "--nonce", "00112233", "--json", NULL}, &out),
                     1);  // the default policy refuses sim hosts
    assert_non_null(strstr((const char *)out.data, "host sim: policy: insecure-simulation"));
    gt_buf_free(&out);
    GT_ASSERT_OK(gt_file_write_atomic(pol, wrong, strlen(wrong), 0644));
    assert_int_equal(run((const char *[]){"verify", "--evidence", ev, "--root", g_pub,
                                          "--policy", pol, NULL}, NULL), 1);
    GT_ASSERT_OK(gt_file_write_atomic(pol, p, strlen(p), 0644));
    assert_int_equal(run((const char *[]){"verify", "--evidence", ev, "--root", g_pub,
                                          "--policy", pol, NULL}, &out), 0);
    const char *t = (const char *)out.data;
    assert_non_null(strstr(t, "(vsgx v3) [insecure-simulation]"));
    assert_non_null(strstr(t, "mr_enclave           " ENARX_MRENCLAVE));
    assert_non_null(strstr(t, "qe.isv_prod_id       1"));
    assert_non_null(strstr(t, "host.tee             sim"));
    assert_non_null(strstr(t, "host.measurement"));
    gt_buf_free(&out);
    gt_buf bytes = {0};
    GT_ASSERT_OK(gt_file_read_all(ev, 1 << 20, &bytes));
    bytes.data[bytes.len / 2] ^= 0x04;
    GT_ASSERT_OK(gt_file_write_atomic(ev, bytes.data, bytes.len, 0644));
    gt_buf_free(&bytes);
    assert_int_equal(run((const char *[]){"verify", "--evidence", ev, "--root", g_pub,
                                          "--policy", pol, NULL}, NULL), 2);
}

static void tdx_has_no_sealing_key(void **state)
{
    (void)state;
    char dir[4400], in[4400], blob[4400];
    snprintf(dir, sizeof dir, "%s/tdx", g_dir);
    snprintf(in, sizeof in, "%s/in2.txt", g_dir);
    snprintf(blob, sizeof blob, "%s/blob2", g_dir);
    GT_ASSERT_OK(gt_file_write_atomic(in, "x", 1, 0600));
    gt_buf out = {0};
    assert_int_equal(run((const char *[]){"enclave", "seal", "--platform", dir, "--host", "tdx",
                                          "--sigstruct", g_sig, in, "--out", blob, NULL}, &out),
                     1);
    assert_non_null(strstr((const char *)out.data, "no sealing key"));
    gt_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(seal_then_unseal),
        cmocka_unit_test(quote_then_verify),
        cmocka_unit_test(tdx_has_no_sealing_key),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
