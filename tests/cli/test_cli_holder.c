// gputravel holder as a process: a simulated trainer fetches a chunk from it, a second fetch is
// refused, SIGTERM stops it cleanly, and the ledger it leaves verifies.
#include "testlib.h"

#include <gputravel/holder.h>
#include <gputravel/orchestr.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

// A holder's world in dir: p[] = shard, key folder, dataset, agreement (endpoint 127.0.0.1:port),
// sim root, ledger, policy, the sim root's public PEM. *keys and *res from keygen and seal.
static void holder_world(const char *dir, char p[8][600], gt_holder_keys *keys,
                         gt_seal_result *res, int port)
{
    const char *names[] = {"in.bin", "keys", "ds", "agreement.json", "simroot", "ledger.log",
                           "policy.json", "simroot/root-pub.pem"};
    for (int i = 0; i < 8; i++) {
        GT_ASSERT_OK(gt_path_join(p[i], sizeof p[i], dir, names[i]));
    }
    uint16_t tokens[2000];
    for (int i = 0; i < 2000; i++) {
        tokens[i] = (uint16_t)(i % 200);
    }
    GT_ASSERT_OK(gt_shard_write(p[0], tokens, 2000));
    GT_ASSERT_OK(gt_keydir_generate(p[1], false, keys));
    const char *shards[] = {p[0]};
    gt_seal_params sp = {.shards = shards, .shard_count = 1, .out_dir = p[2],
                         .chunk_size = 2000, .vocab_size = 256};
    GT_ASSERT_OK(gt_seal(&sp, keys, res));
    char key_hex[65], id_hex[33], doc[2048];
    gt_hex_encode(key_hex, sizeof key_hex, keys->holder_pub, 32);
    gt_hex_encode(id_hex, sizeof id_hex, res->dataset_id, 16);
    snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"cli\",\"model\":{\"layers\":1,\"channels\":8,\"heads\":1,"
             "\"vocab\":256,\"max_seq\":8,\"init_seed\":1},\"training\":{\"steps\":1,\"batch\":1,"
             "\"seq\":8,\"learning_rate\":0.1},\"holders\":[{\"name\":\"carol\",\"identity_key\":"
             "\"%s\",\"endpoint\":\"127.0.0.1:%d\",\"dataset_id\":\"%s\",\"token_budget\":100000,"
             "\"max_uses_per_chunk\":1}],\"trainer\":{},\"device\":{},\"allow_simulation\":true,"
             "\"transfer\":[\"conventional\",\"conventional-keyrelease\"],"
             "\"output\":{\"kind\":\"loss_only\"}}", key_hex, port, id_hex);
    GT_ASSERT_OK(gt_file_write_atomic(p[3], doc, strlen(doc), 0644));
    GT_ASSERT_OK(gt_file_write_atomic(p[6], "{\"allow_simulation\":true}", 25, 0644));
    gt_pkey *root = NULL;
    GT_ASSERT_OK(gt_sim_root_open(&root, NULL, 0, p[4], true));
    gt_pkey_free(root);
}

static void holder_process_serves_and_ledgers(void **state)
{
    (void)state;
    char dir[256], p[8][600];
    gt_test_tmpdir(dir, sizeof dir);
    // A free port for the holder (below the ephemeral range: see gt_test_free_port).
    int port = gt_test_free_port();
    gt_holder_keys keys;
    gt_seal_result res;
    holder_world(dir, p, &keys, &res, port);
    uint16_t tokens[2000];  // what holder_world sealed
    for (int i = 0; i < 2000; i++) {
        tokens[i] = (uint16_t)(i % 200);
    }
    char key_hex[65];
    gt_hex_encode(key_hex, sizeof key_hex, keys.holder_pub, 32);

    char log[600];
    GT_ASSERT_OK(gt_path_join(log, sizeof log, dir, "holder.log"));
    gt_proc holder;
    gt_test_holder_start(&holder, log,
                         (const char *[]){"--dataset", p[2], "--key", p[1], "--agreement", p[3],
                                          "--ledger", p[5], "--policy", p[6], "--sim-root", p[4],
                                          "--root", p[7], NULL});
    gt_agreement a;
    GT_ASSERT_OK(gt_agreement_load(&a, p[3]));
    gt_policy *policy = NULL;
    GT_ASSERT_OK(gt_policy_load_file(&policy, p[6]));
    gt_buf root_pub = {0};
    GT_ASSERT_OK(gt_file_read_all(p[7], 1 << 16, &root_pub));
    gt_attest_file rf = {p[7], gt_buf_span(&root_pub)};
    gt_tee_attestor att = {.collect = {.type = GT_TEE_SIM, .sim_root = p[4]}, .policy = policy,
                           .roots = &rf, .root_count = 1, .agreement = &a,
                           .peer_role = GT_PEER_HOLDER};
    gt_net_attestor na = gt_tee_attestor_bind(&att);
    gt_holder_conn *c = NULL;
    gt_err e = GT_OK;
    uint8_t signing_pub[GT_ED25519_PUBLIC_BYTES], signing_sec[GT_ED25519_SECRET_BYTES];
    GT_ASSERT_OK(gt_ed25519_keypair(signing_pub, signing_sec));
    for (int tries = 0; tries < 100; tries++) {
        e = gt_holder_connect(&c, &a, 0, &na, "trainer-cli", signing_pub);
        if (gt_is_ok(e)) {
            break;
        }
        usleep(100000);
    }
    GT_ASSERT_OK(e);
    assert_non_null(strstr(att.peer_summary, "insecure-simulation"));
    gt_device *dev = NULL;
    gt_device_config dc = {.kind = GT_DEVICE_CPU, .threads = 1};
    GT_ASSERT_OK(gt_device_open(&dev, &dc));
    gt_dbuf buf = 0;
    uint64_t n = 0;
    GT_ASSERT_OK(gt_holder_fetch(c, 1, GT_FETCH_KEYRELEASE, dev, 0, &buf, &n));
    assert_int_equal(n, 1000);
    uint16_t got[1000];
    GT_ASSERT_OK(gt_device_copy_out(dev, got, buf, 0, sizeof got));
    assert_memory_equal(got, tokens + 1000, sizeof got);
    GT_ASSERT_OK(gt_holder_confirm_use(c, 1, n));
    GT_ASSERT_CODE(gt_holder_fetch(c, 1, GT_FETCH_PLAIN, dev, 0, &buf, &n), GT_E_POLICY);
    gt_holder_disconnect(c);
    gt_device_close(dev);

    gt_test_holder_stop(&holder, "holder");
    gt_buf out = {0};
    int rc = gt_test_run_cli(&out, (const char *[]){"ledger", "verify", p[5], "--holder-key",
                                                     key_hex, NULL});
    assert_int_equal(rc, 0);
    // genesis, session (the trainer's signing key), grant, use, refuse
    if (strstr((char *)out.data, "5 entries") == NULL) {
        gt_buf show = {0};
        gt_test_run_cli(&show, (const char *[]){"ledger", "show", p[5], NULL});
        fail_msg("%s", (char *)show.data);
    }
    // The session entry: this trainer's name and signing key, and how the holder appraised it.
    gt_ledger_session ses;
    GT_ASSERT_OK(gt_ledger_find_session(p[5], keys.holder_pub, signing_pub, &ses));
    assert_int_equal(ses.seq, 1);
    assert_string_equal(ses.trainer, "trainer-cli");
    assert_memory_equal(ses.agreement, a.hash, GT_SHA256_BYTES);
    if (strstr(ses.appraisal, "sim measurement") == NULL ||
        strstr(ses.appraisal, "insecure-simulation") == NULL) {
        fail_msg("session appraisal: '%s'", ses.appraisal);
    }
    gt_secure_zero(signing_sec, sizeof signing_sec);
    gt_buf_free(&out);
    gt_buf_free_nowipe(&root_pub);
    gt_policy_free(policy);
    gt_holder_keys_wipe(&keys);
    gt_test_rmtree(dir);
}

// Without --root a holder could accept no trainer: it says so at once and writes nothing (no
// genesis ledger for a holder that never served).
static void holder_without_root_fails_early(void **state)
{
    (void)state;
    char dir[256], ledger[512];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(ledger, sizeof ledger, dir, "ledger.log"));
    gt_buf out = {0};
    int rc = gt_test_run_cli(&out, (const char *[]){"holder", "--dataset", dir, "--key", dir,
                                                    "--agreement", ledger, "--ledger", ledger,
                                                    NULL});
    assert_int_equal(rc, 64);
    assert_non_null(strstr((char *)out.data, "no --root: this holder could not accept any "
                                             "trainer's evidence"));
    assert_false(gt_path_exists(ledger));
    gt_buf_free(&out);
    gt_test_rmtree(dir);
}

// A holder that cannot serve stops before its ledger exists: its port taken, or a dataset other
// than the agreement's. Each says why; neither writes a genesis entry.
static void holder_that_cannot_start_writes_no_ledger(void **state)
{
    (void)state;
    char dir[256], p[8][600];
    gt_test_tmpdir(dir, sizeof dir);
    gt_listener *taken = NULL;  // held open: the agreement's endpoint is in use
    GT_ASSERT_OK(gt_listener_open(&taken, "127.0.0.1:0"));
    gt_holder_keys keys;
    gt_seal_result res;
    holder_world(dir, p, &keys, &res, gt_listener_port(taken));
    gt_buf out = {0};
    const char *args[] = {"holder", "--dataset", p[2], "--key", p[1], "--agreement", p[3],
                          "--ledger", p[5], "--policy", p[6], "--sim-root", p[4], "--root",
                          p[7], NULL};
    assert_int_equal(gt_test_run_cli(&out, args), 1);
    GT_ASSERT_OK(gt_buf_append(&out, "", 1));
    if (strstr((char *)out.data, "127.0.0.1:") == NULL || !gt_path_exists(p[2])) {
        fail_msg("port taken: %s", (char *)out.data);
    }
    print_message("port taken: %s", (char *)out.data);
    assert_false(gt_path_exists(p[5]));
    gt_buf_free(&out);
    // The same options from --config (the command line adds --ledger): the same stop. A key
    // that is no option of holder's stops it before anything else, naming the key.
    char conf[700], doc[4096];
    GT_ASSERT_OK(gt_path_join(conf, sizeof conf, dir, "holder.json"));
    snprintf(doc, sizeof doc,
             "{\"dataset\": \"%s\", \"key\": \"%s\", \"agreement\": \"%s\", \"policy\": \"%s\", "
             "\"sim-root\": \"%s\", \"root\": [\"%s\"], \"witnesses\": false}",
             p[2], p[1], p[3], p[6], p[4], p[7]);
    GT_ASSERT_OK(gt_file_write_atomic(conf, doc, strlen(doc), 0600));
    assert_int_equal(gt_test_run_cli(&out, (const char *[]){"holder", "--config", conf,
                                                            "--ledger", p[5], NULL}), 1);
    GT_ASSERT_OK(gt_buf_append(&out, "", 1));
    if (strstr((char *)out.data, "Address already in use") == NULL) {
        fail_msg("holder --config: %s", (char *)out.data);
    }
    assert_false(gt_path_exists(p[5]));
    gt_buf_free(&out);
    const char *typo = "{\"datset\": \"ds\"}";
    GT_ASSERT_OK(gt_file_write_atomic(conf, typo, strlen(typo), 0600));
    assert_int_equal(gt_test_run_cli(&out, (const char *[]){"holder", "--config", conf, NULL}),
                     1);
    GT_ASSERT_OK(gt_buf_append(&out, "", 1));
    assert_non_null(strstr((char *)out.data, "config: unknown key \"datset\""));
    gt_buf_free(&out);
    gt_listener_close(taken);
    // Another dataset of the same holder: not the one the agreement names.
    char other[700];
    GT_ASSERT_OK(gt_path_join(other, sizeof other, dir, "other-ds"));
    const char *shards[] = {p[0]};
    gt_seal_params sp = {.shards = shards, .shard_count = 1, .out_dir = other,
                         .chunk_size = 1000, .vocab_size = 256};
    gt_seal_result res2;
    GT_ASSERT_OK(gt_seal(&sp, &keys, &res2));
    args[2] = other;
    assert_int_equal(gt_test_run_cli(&out, args), 1);
    GT_ASSERT_OK(gt_buf_append(&out, "", 1));
    if (strstr((char *)out.data, "is not the one the agreement names for 'carol'") == NULL) {
        fail_msg("other dataset: %s", (char *)out.data);
    }
    print_message("other dataset: %s", (char *)out.data);
    assert_false(gt_path_exists(p[5]));
    gt_buf_free(&out);
    gt_holder_keys_wipe(&keys);
    gt_test_rmtree(dir);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(holder_process_serves_and_ledgers),
        cmocka_unit_test(holder_without_root_fails_early),
        cmocka_unit_test(holder_that_cannot_start_writes_no_ledger),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
