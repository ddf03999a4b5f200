// cli/: a holder named by enclave, end to end through the commands (docs/holder-enclave.md
// "Named by enclave"), INSECURE SIMULATION: `agreement init --holder-enclave` writes the holder
// enclave's identity from its SIGSTRUCT, `agreement check` refuses a key folder that is not
// enclave-sealed, `holder` refuses to serve such an agreement in plain mode, and `train`
// verifies the enclave before asking for anything: it prints the identity when it matches and
// refuses the holder, naming the field, when the agreement names another signer.
#include "testlib.h"

#include <gputravel/holder.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[256], simroot[600], rootpem[600], policy[600], keys[600], ds[600], pf[600];
static char sig[600];
static int port;

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(simroot, sizeof simroot, dir, "simroot"));
    GT_ASSERT_OK(gt_path_join(rootpem, sizeof rootpem, simroot, "root-pub.pem"));
    GT_ASSERT_OK(gt_path_join(policy, sizeof policy, dir, "policy.json"));
    GT_ASSERT_OK(gt_path_join(keys, sizeof keys, dir, "keys"));
    GT_ASSERT_OK(gt_path_join(ds, sizeof ds, dir, "ds"));
    GT_ASSERT_OK(gt_path_join(pf, sizeof pf, dir, "pf"));
    snprintf(sig, sizeof sig, "%s/holder.sig", GT_ENCLAVE_DIR);
    setenv("GT_SIM_ROOT", simroot, 1);
    GT_ASSERT_OK(gt_sim_root_set(simroot));
    gt_pkey *root = NULL;
    GT_ASSERT_OK(gt_sim_root_open(&root, NULL, 0, simroot, true));
    gt_pkey_free(root);
    GT_ASSERT_OK(gt_file_write_atomic(policy, "{\"allow_simulation\":true}", 25, 0644));
    char shard[700];
    GT_ASSERT_OK(gt_path_join(shard, sizeof shard, dir, "in.bin"));
    uint16_t tokens[800];
    for (int i = 0; i < 800; i++) {
        tokens[i] = (uint16_t)(i % 200);
    }
    GT_ASSERT_OK(gt_shard_write(shard, tokens, 800));
    gt_holder_keys k;
    GT_ASSERT_OK(gt_keydir_generate(keys, false, &k));
    const char *shards[] = {shard};
    gt_seal_params sp = {.shards = shards, .shard_count = 1, .out_dir = ds, .chunk_size = 400,
                         .vocab_size = 256};
    gt_seal_result res;
    GT_ASSERT_OK(gt_seal(&sp, &k, &res));
    gt_holder_keys_wipe(&k);
    port = gt_test_free_port();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_rmtree(dir);
    return 0;
}

// agreement init with --holder-enclave VALUE into path; returns the exit status.
static int init(const char *path, const char *value, gt_buf *out)
{
    char holder[2000], named[700];
    snprintf(holder, sizeof holder, "h0=%s,%s,127.0.0.1:%d", keys, ds, port);
    snprintf(named, sizeof named, "h0=%s", value);
    gt_buf_free(out);  // gt_test_run_cli appends
    return gt_test_run_cli(out, (const char *[]){
        "agreement", "init", "--holder", holder, "--holder-enclave", named, "--out", path,
        "--steps", "2", "--batch", "1", "--seq", "8", "--layers", "1", "--channels", "16",
        "--heads", "2", "--max-seq", "8", "--transfer", "conventional-keyrelease",
        "--any-measurement", "--force", NULL});
}

static int train(const char *agreement, const char *state, gt_buf *out)
{
    int rc = -1;
    for (int tries = 0; tries < 20; tries++) {
        gt_buf_free(out);
        rc = gt_test_run_cli(out, (const char *[]){
            "train", "--agreement", agreement, "--state", state, "--device", "cpu",
            "--transfer", "conventional-keyrelease", "--threads", "1", "--plot", "none",
            "--sim-root", simroot, "--policy", policy, "--root", rootpem, NULL});
        if (rc == 0 || strstr((char *)out->data, "onnect") == NULL) {
            break;  // only "cannot connect" (the holder not listening yet) is retried
        }
        usleep(200000);
    }
    return rc;
}

static void holder_start(gt_proc *p, const char *agreement, const char *log)
{
    const char *args[] = {"--dataset", ds, "--key", keys, "--agreement", agreement,
                          "--policy", policy, "--sim-root", simroot, "--root", rootpem,
                          "--enclave-platform", pf, "--enclave", GT_ENCLAVE_DIR, NULL};
    gt_test_holder_start(p, log, args);
}

static void named_by_enclave_end_to_end(void **state)
{
    (void)state;
    char right[700], wrong[700], log[700], st[700];
    GT_ASSERT_OK(gt_path_join(right, sizeof right, dir, "right.json"));
    GT_ASSERT_OK(gt_path_join(wrong, sizeof wrong, dir, "wrong.json"));
    gt_buf out = {0};
    assert_int_equal(init(right, sig, &out), 0);
    gt_buf doc = {0};
    GT_ASSERT_OK(gt_file_read_all(right, 65536, &doc));
    GT_ASSERT_OK(gt_buf_append(&doc, "", 1));
    assert_non_null(strstr((char *)doc.data, "\"enclave\": {\"mrsigner\": \""));
    gt_buf_free(&doc);
    assert_int_equal(init(wrong, "mrsigner:" "5555555555555555555555555555555555555555555555555555555555555555", &out), 0);
    assert_int_not_equal(init(wrong, "nosuch.sig", &out), 0);

    // the plain key folder: check refuses it, and the holder does not start in plain mode
    gt_buf_free(&out);
    assert_int_equal(gt_test_run_cli(&out, (const char *[]){"agreement", "check", right,
                                                            "--key", keys, NULL}), 1);
    GT_ASSERT_OK(gt_buf_append(&out, "", 1));
    assert_non_null(strstr((char *)out.data, "is not enclave-sealed"));
    gt_buf_free(&out);
    assert_int_not_equal(gt_test_run_cli(&out, (const char *[]){
        "holder", "--dataset", ds, "--key", keys, "--agreement", right, "--policy", policy,
        "--sim-root", simroot, "--root", rootpem, NULL}), 0);
    GT_ASSERT_OK(gt_buf_append(&out, "", 1));
    assert_non_null(strstr((char *)out.data, "run it in enclave mode"));

    // into the enclave: check passes the key folder now
    assert_int_equal(gt_test_run_cli(NULL, (const char *[]){
        "holder", "enclave-keys", "import", "--key", keys, "--enclave-platform", pf,
        "--enclave", GT_ENCLAVE_DIR, "--sim-root", simroot, NULL}), 0);
    gt_buf_free(&out);
    assert_int_equal(gt_test_run_cli(&out, (const char *[]){"agreement", "check", right,
                                                            "--key", keys, NULL}), 0);

    // the agreement names the enclave this build signed: train verifies and says so (the
    // enclave-mode holder then refuses key release, which this test does not need)
    gt_proc p;
    GT_ASSERT_OK(gt_path_join(log, sizeof log, dir, "holder-right.log"));
    holder_start(&p, right, log);
    GT_ASSERT_OK(gt_path_join(st, sizeof st, dir, "state-right"));
    (void)train(right, st, &out);
    GT_ASSERT_OK(gt_buf_append(&out, "", 1));
    if (strstr((char *)out.data, "holder h0: enclave identity verified") == NULL) {
        fail_msg("train did not verify the holder's enclave:\n%s", (char *)out.data);
    }
    gt_test_holder_stop(&p, "holder h0");

    // another signer named: refused at connect, naming the holder and the field
    GT_ASSERT_OK(gt_path_join(log, sizeof log, dir, "holder-wrong.log"));
    holder_start(&p, wrong, log);
    GT_ASSERT_OK(gt_path_join(st, sizeof st, dir, "state-wrong"));
    assert_int_not_equal(train(wrong, st, &out), 0);
    GT_ASSERT_OK(gt_buf_append(&out, "", 1));
    if (strstr((char *)out.data, "holder h0: its enclave quote is rejected (the agreement's "
                                 "holders[0].enclave.mrsigner does not match)") == NULL) {
        fail_msg("train did not refuse the holder's enclave by its signer:\n%s",
                 (char *)out.data);
    }
    gt_test_holder_stop(&p, "holder h0");
    gt_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(named_by_enclave_end_to_end),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
