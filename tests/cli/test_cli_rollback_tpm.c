// gputravel holder --rollback-guard tpm:... on a real software TPM (swtpm started by the test):
// the holder anchors its ledger and serves; once the ledger is cut back (or deleted) it refuses
// to start, with the values that disagree, and exits non-zero; `gputravel ledger verify
// --rollback-guard` says which guard anchored the head, or why the head does not match. Without
// swtpm: skipped (exit 77).
#include "testlib.h"
#include "swtpm.h"

#include <gputravel/holder.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>  // unlink

static gt_test_swtpm sw;
static char why[256];

enum { IN, KEYS, DS, AGREEMENT, SIMROOT, LEDGER, POLICY, ROOTPUB, TPMSTATE, HOLDERLOG, OLD, NP };
static char dir[256], p[NP][600];
static gt_holder_keys keys;

static void make_holder_inputs(void)
{
    const char *names[NP] = {"in.bin", "keys", "ds", "agreement.json", "simroot", "ledger.log",
                             "policy.json", "simroot/root-pub.pem", "tpm-state", "holder.log",
                             "ledger.old"};
    for (int i = 0; i < NP; i++) {
        GT_ASSERT_OK(gt_path_join(p[i], sizeof p[i], dir, names[i]));
    }
    uint16_t tokens[1000];
    for (int i = 0; i < 1000; i++) {
        tokens[i] = (uint16_t)(i % 200);
    }
    GT_ASSERT_OK(gt_shard_write(p[IN], tokens, 1000));
    GT_ASSERT_OK(gt_keydir_generate(p[KEYS], false, &keys));
    const char *shards[] = {p[IN]};
    gt_seal_params sp = {.shards = shards, .shard_count = 1, .out_dir = p[DS],
                         .chunk_size = 1000, .vocab_size = 256};
    gt_seal_result res;
    GT_ASSERT_OK(gt_seal(&sp, &keys, &res));
    int port = gt_test_free_port();
    char key_hex[65], id_hex[33], doc[2048];
    gt_hex_encode(key_hex, sizeof key_hex, keys.holder_pub, 32);
    gt_hex_encode(id_hex, sizeof id_hex, res.dataset_id, 16);
    snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"rb\",\"model\":{\"layers\":1,\"channels\":8,\"heads\":1,"
             "\"vocab\":256,\"max_seq\":8,\"init_seed\":1},\"training\":{\"steps\":1,\"batch\":1,"
             "\"seq\":8,\"learning_rate\":0.1},\"holders\":[{\"name\":\"carol\",\"identity_key\":"
             "\"%s\",\"endpoint\":\"127.0.0.1:%d\",\"dataset_id\":\"%s\",\"token_budget\":100000,"
             "\"max_uses_per_chunk\":1}],\"trainer\":{},\"device\":{},\"allow_simulation\":true,"
             "\"transfer\":[\"conventional\"],\"output\":{\"kind\":\"loss_only\"}}",
             key_hex, port, id_hex);
    GT_ASSERT_OK(gt_file_write_atomic(p[AGREEMENT], doc, strlen(doc), 0644));
    GT_ASSERT_OK(gt_file_write_atomic(p[POLICY], "{\"allow_simulation\":true}", 25, 0644));
    gt_pkey *root = NULL;
    GT_ASSERT_OK(gt_sim_root_open(&root, NULL, 0, p[SIMROOT], true));
    gt_pkey_free(root);
}

#define HOLDER_ARGS(spec)                                                                    \
    "--dataset", p[DS], "--key", p[KEYS], "--agreement", p[AGREEMENT], "--ledger", p[LEDGER], \
        "--policy", p[POLICY], "--sim-root", p[SIMROOT], "--root", p[ROOTPUB],              \
        "--rollback-guard", (spec)

// The holder's start must fail: run it to its exit and return its output.
static int holder_refused(gt_buf *out)
{
    return gt_test_run_cli(out, (const char *[]){"holder", HOLDER_ARGS(sw.spec), NULL});
}

static void expect_in(const gt_buf *out, const char *needle)
{
    if (out->len == 0 || memmem(out->data, out->len, needle, strlen(needle)) == NULL) {
        fail_msg("expected '%s' in:\n%.*s", needle, (int)out->len, (const char *)out->data);
    }
}

static void holder_refuses_a_cut_back_ledger(void **state)
{
    (void)state;
    if (sw.exe[0] == '\0') {
        skip();  // cmocka counts a skip in setup as an error
    }
    gt_proc holder;
    gt_test_holder_start(&holder, p[HOLDERLOG], (const char *[]){HOLDER_ARGS(sw.spec), NULL});
    gt_test_holder_stop(&holder, "holder");
    gt_buf log = {0};
    GT_ASSERT_OK(gt_file_read_all(p[HOLDERLOG], 1 << 20, &log));
    expect_in(&log, "ledger head anchored by rollback guard tpm swtpm:host=127.0.0.1");
    gt_buf_free_nowipe(&log);

    gt_buf out = {0};
    assert_int_equal(gt_test_run_cli(&out, (const char *[]){"ledger", "verify", p[LEDGER],
                                                            "--rollback-guard", sw.spec, NULL}),
                     0);
    expect_in(&out, "head anchored by rollback guard tpm swtpm:");
    gt_buf_free(&out);

    // Two decisions after the copy: the copy is now behind the TPM by two batches.
    GT_ASSERT_OK(gt_file_read_all(p[LEDGER], 1 << 20, &out));
    GT_ASSERT_OK(gt_file_write_atomic(p[OLD], out.data, out.len, 0600));
    gt_buf_free_nowipe(&out);
    gt_rollback_guard *g = NULL;
    gt_ledger *l = NULL;
    GT_ASSERT_OK(gt_rollback_guard_open(&g, sw.spec));
    GT_ASSERT_OK(gt_ledger_open_guarded(&l, p[LEDGER], keys.holder_sec, g));
    GT_ASSERT_OK(gt_ledger_append(l, "refuse", NULL));
    GT_ASSERT_OK(gt_ledger_append(l, "refuse", NULL));
    gt_ledger_close(l);
    gt_rollback_guard_close(g);
    gt_test_holder_start(&holder, p[HOLDERLOG], (const char *[]){HOLDER_ARGS(sw.spec), NULL});
    gt_test_holder_stop(&holder, "holder");  // a matching ledger starts as ever

    GT_ASSERT_OK(gt_file_read_all(p[OLD], 1 << 20, &out));
    GT_ASSERT_OK(gt_file_write_atomic(p[LEDGER], out.data, out.len, 0600));
    gt_buf_free_nowipe(&out);
    int rc = holder_refused(&out);
    assert_int_not_equal(rc, 0);
    expect_in(&out, "rollback: the ledger's counter 2 is behind the guard's 4");
    expect_in(&out, "cut back or an old copy restored");
    gt_buf_free(&out);
    rc = gt_test_run_cli(&out, (const char *[]){"ledger", "verify", p[LEDGER], "--rollback-guard",
                                                 sw.spec, NULL});
    assert_int_not_equal(rc, 0);
    expect_in(&out, "is behind the guard's 4");
    gt_buf_free(&out);
    // Unchecked, the chain itself still verifies: only the guard sees the rollback.
    assert_int_equal(gt_test_run_cli(&out, (const char *[]){"ledger", "verify", p[LEDGER], NULL}),
                     0);
    expect_in(&out, "head carries rollback counter 2, not checked");
    gt_buf_free(&out);

    assert_int_equal(unlink(p[LEDGER]), 0);
    rc = holder_refused(&out);
    assert_int_not_equal(rc, 0);
    expect_in(&out, "no ledger (missing or empty) while the guard's counter is at 4");
    gt_buf_free(&out);
    // No new genesis was written: the file the open created is empty.
    GT_ASSERT_OK(gt_file_read_all(p[LEDGER], 1 << 20, &out));
    assert_int_equal(out.len, 0);
    gt_buf_free_nowipe(&out);
}

static int setup(void **state)
{
    (void)state;
    if (sw.exe[0] == '\0') {
        return 0;
    }
    gt_test_tmpdir(dir, sizeof dir);
    make_holder_inputs();
    gt_test_swtpm_start(&sw, p[TPMSTATE]);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (sw.exe[0] == '\0') {
        return 0;
    }
    gt_test_swtpm_stop(&sw);
    gt_holder_keys_wipe(&keys);
    gt_test_rmtree(dir);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    bool have = gt_test_swtpm_find(&sw, why, sizeof why);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(holder_refuses_a_cut_back_ledger, setup, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (!have) {
        printf("SKIPPED: %s\n", why);
        return rc == 0 ? 77 : rc;
    }
    return rc;
}
