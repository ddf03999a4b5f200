// gputravel open-checkpoint and inspect on sealed checkpoints: a recipient opens (with its
// ledger: the signer is the trainer it served; without: it says the signer was not checked);
// every bad input (not a recipient, a key folder without a recipient key, missing keys,
// tampered, truncated, not a sealed checkpoint, another agreement, an existing --out, another
// holder's ledger, a ledger without a session of this signer, a tampered ledger, a checkpoint
// re-sealed by another signing key) fails with a clear message and leaves no file behind.
#include "testlib.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>
#include <gputravel/holder.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char dir[256], out_dir[512], model_path[512], sealed[512], agreement[512];
static char kd_alice[512], kd_bob[512], kd_carol[512], kd_old[512];
static char forged[512], ledger_alice[512], ledger_bob[512], ledger_other[512], ledger_bad[512];
static char ledger_elsewhere[512];
static gt_buf model;

// A ledger of the holder in keydir with one "session" entry for signing key `key` under
// agreement `agreement` (what the holder agent writes when a trainer's HELLO arrives).
static void ledger_with_session(const char *path, const char *keydir, const uint8_t *key,
                                const uint8_t *agreement)
{
    gt_holder_keys hk;
    GT_ASSERT_OK(gt_keydir_load(keydir, &hk));
    gt_ledger *l = NULL;
    GT_ASSERT_OK(gt_ledger_open(&l, path, hk.holder_sec));
    char kh[65], ah[65];
    gt_hex_encode(kh, sizeof kh, key, 32);
    gt_hex_encode(ah, sizeof ah, agreement, 32);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "dataset", "00000000000000000000000000000000");
    cJSON_AddStringToObject(d, "trainer", "trainer-x");
    cJSON_AddStringToObject(d, "signing_key", kh);
    cJSON_AddStringToObject(d, "agreement", ah);
    cJSON_AddStringToObject(d, "appraisal", "sim measurement 00 (test)");
    GT_ASSERT_OK(gt_ledger_append(l, "session", d));
    cJSON_Delete(d);
    gt_ledger_close(l);
    gt_holder_keys_wipe(&hk);
}

static void write_plain(const char *path, const void *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(n == 0 || fwrite(data, 1, n, fp) == n, 1);
    assert_int_equal(fclose(fp), 0);
}

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    snprintf(model_path, sizeof model_path, "%s/model.bin", dir);
    snprintf(sealed, sizeof sealed, "%s/model.sealed", dir);
    snprintf(agreement, sizeof agreement, "%s/agreement.json", dir);
    snprintf(kd_alice, sizeof kd_alice, "%s/alice", dir);
    snprintf(kd_bob, sizeof kd_bob, "%s/bob", dir);
    snprintf(kd_carol, sizeof kd_carol, "%s/carol", dir);
    snprintf(kd_old, sizeof kd_old, "%s/old", dir);
    snprintf(forged, sizeof forged, "%s/forged.sealed", dir);
    snprintf(ledger_alice, sizeof ledger_alice, "%s/alice.ledger", dir);
    snprintf(ledger_bob, sizeof ledger_bob, "%s/bob.ledger", dir);
    snprintf(ledger_other, sizeof ledger_other, "%s/alice-other-signer.ledger", dir);
    snprintf(ledger_bad, sizeof ledger_bad, "%s/alice-tampered.ledger", dir);
    snprintf(ledger_elsewhere, sizeof ledger_elsewhere, "%s/alice-other-agreement.ledger", dir);
    GT_ASSERT_OK(gt_mkdir_p(out_dir, 0700));
    const char *kds[] = {kd_alice, kd_bob, kd_carol, kd_old};
    for (int i = 0; i < 4; i++) {
        GT_ASSERT_OK(gt_keydir_generate(kds[i], false, NULL));
    }
    // A key folder from before recipient keys.
    char p[700];
    snprintf(p, sizeof p, "%s/%s", kd_old, GT_KEYDIR_RECIPIENT_SECRET);
    unlink(p);
    snprintf(p, sizeof p, "%s/%s", kd_old, GT_KEYDIR_RECIPIENT_PUBLIC);
    unlink(p);

    // An llm.c fp32 file (1024-byte header, then weights).
    const gt_sckpt_model m = {.max_seq_len = 32, .vocab_size = 256, .num_layers = 1,
                              .num_heads = 2, .channels = 16, .padded_vocab_size = 256};
    GT_ASSERT_OK(gt_buf_reserve(&model, 1024 + 4000));
    memset(model.data, 0, 1024 + 4000);
    uint32_t h[8] = {GT_SCKPT_LLMC_MAGIC, GT_SCKPT_LLMC_VERSION, 32, 256, 1, 2, 16, 256};
    for (int i = 0; i < 8; i++) {
        gt_store_u32le(model.data + 4 * i, h[i]);
    }
    for (int i = 0; i < 4000; i++) {
        model.data[1024 + i] = (uint8_t)(i * 7 + 3);
    }
    model.len = 1024 + 4000;
    write_plain(model_path, model.data, model.len);

    // The agreement names alice and bob as recipients; the checkpoint is sealed under its hash.
    gt_sckpt_recipient r[2];
    memset(r, 0, sizeof r);
    snprintf(r[0].name, sizeof r[0].name, "alice");
    snprintf(r[1].name, sizeof r[1].name, "bob");
    GT_ASSERT_OK(gt_recipient_pub_load(kd_alice, r[0].pub));
    GT_ASSERT_OK(gt_recipient_pub_load(kd_bob, r[1].pub));
    char ka[65], kb[65], doc[2048];
    gt_hex_encode(ka, sizeof ka, r[0].pub, 32);
    gt_hex_encode(kb, sizeof kb, r[1].pub, 32);
    snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"t\",\"model\":{\"layers\":1,\"channels\":16,\"heads\":2,"
             "\"vocab\":256,\"max_seq\":32,\"init_seed\":1},\"training\":{\"steps\":3,"
             "\"batch\":1,\"seq\":8,\"learning_rate\":0.001},\"holders\":["
             "{\"name\":\"alice\",\"identity_key\":\"11%062d\",\"endpoint\":\"h:1\","
             "\"dataset_id\":\"%032d\",\"token_budget\":9,\"max_uses_per_chunk\":1,"
             "\"recipient_key\":\"%s\"},"
             "{\"name\":\"bob\",\"identity_key\":\"11%062d\",\"endpoint\":\"h:2\","
             "\"dataset_id\":\"%032d\",\"token_budget\":9,\"max_uses_per_chunk\":1,"
             "\"recipient_key\":\"%s\"}],"
             "\"trainer\":{},\"device\":{},\"allow_simulation\":true,"
             "\"output\":{\"kind\":\"sealed_checkpoint\",\"recipients\":[\"alice\",\"bob\"]}}\n",
             1, 1, ka, 2, 2, kb);
    write_plain(agreement, doc, strlen(doc));
    // The trainer's signing key, and a forger's who re-seals for the same recipients.
    uint8_t tsec[32], tpub[32], fsec[32], fpub[32];
    GT_ASSERT_OK(gt_ed25519_keypair(tpub, tsec));
    GT_ASSERT_OK(gt_ed25519_keypair(fpub, fsec));
    gt_sckpt_seal_params sp = {.model_path = model_path, .out_path = sealed, .step = 42,
                               .model = m, .recipients = r, .recipient_count = 2,
                               .signing_secret = tsec};
    GT_ASSERT_OK(gt_hash(GT_HASH_SHA256, sp.agreement_hash, doc, strlen(doc)));
    GT_ASSERT_OK(gt_sckpt_seal(&sp, NULL));
    sp.out_path = forged;
    sp.signing_secret = fsec;
    GT_ASSERT_OK(gt_sckpt_seal(&sp, NULL));
    // Ledgers: alice's and bob's recording the trainer; alice's recording only some other
    // trainer; alice's, tampered; alice's, recording this trainer under another agreement.
    ledger_with_session(ledger_alice, kd_alice, tpub, sp.agreement_hash);
    ledger_with_session(ledger_bob, kd_bob, tpub, sp.agreement_hash);
    ledger_with_session(ledger_other, kd_alice, fpub, sp.agreement_hash);
    uint8_t elsewhere[32];
    memcpy(elsewhere, sp.agreement_hash, 32);
    elsewhere[0] ^= 1;
    ledger_with_session(ledger_elsewhere, kd_alice, tpub, elsewhere);
    gt_buf lb = {0};
    GT_ASSERT_OK(gt_file_read_all(ledger_alice, 1 << 20, &lb));
    char *at = strstr((char *)lb.data, "trainer-x");
    assert_non_null(at);
    at[8] = 'y';  // the session names another trainer: its hash no longer matches
    write_plain(ledger_bad, lb.data, lb.len);
    gt_buf_free_nowipe(&lb);
    gt_secure_zero(tsec, sizeof tsec);
    gt_secure_zero(fsec, sizeof fsec);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_buf_free(&model);
    gt_test_rmtree(dir);
    return 0;
}

static int run(gt_buf *log, const char *const *args)
{
    log->len = 0;
    gt_buf_free(log);
    int rc = gt_test_run_cli(log, args);
    assert_int_equal(gt_buf_append(log, "", 1).code, GT_E_NONE);
    return rc;
}

static void recipient_opens(void **state)
{
    (void)state;
    char out[600];
    snprintf(out, sizeof out, "%s/model.bin", out_dir);
    gt_buf log = {0};
    int rc = run(&log, (const char *[]){"open-checkpoint", sealed, "--key", kd_bob, "--out", out,
                                        "--agreement", agreement, "--ledger", ledger_bob, NULL});
    if (rc != 0 || strstr((char *)log.data, "as recipient 'bob' (2 of 2): step 42") == NULL ||
        strstr((char *)log.data, "matches --agreement") == NULL ||
        strstr((char *)log.data, ": the trainer 'trainer-x' this holder served") == NULL ||
        strstr((char *)log.data, "entry 1; appraised: sim measurement 00 (test)") == NULL) {
        gt_test_fail_log(&log, NULL, "open-checkpoint failed (%d)", rc);
    }
    gt_buf got = {0};
    GT_ASSERT_OK(gt_file_read_all(out, 1 << 20, &got));
    assert_int_equal(got.len, model.len);
    assert_memory_equal(got.data, model.data, model.len);
    gt_buf_free(&got);
    gt_test_assert_mode(out, 0600);  // the opened weights are plaintext model data
    // An existing --out is refused, and left as it was; --force replaces it.
    rc = run(&log, (const char *[]){"open-checkpoint", sealed, "-k", kd_alice, "-o", out, NULL});
    assert_int_equal(rc, 1);
    assert_non_null(strstr((char *)log.data, "exists (--force replaces it)"));
    rc = run(&log, (const char *[]){"open-checkpoint", sealed, "-k", kd_alice, "-o", out,
                                    "--force", NULL});
    assert_int_equal(rc, 0);
    if (strstr((char *)log.data, "was NOT checked against any ledger") == NULL) {
        gt_test_fail_log(&log, NULL, "no ledger, no warning");
    }
    unlink(out);
    // inspect shows the header without a key
    rc = run(&log, (const char *[]){"inspect", sealed, "--json", NULL});
    assert_int_equal(rc, 0);
    cJSON *j = cJSON_Parse((const char *)log.data);
    assert_non_null(j);
    assert_int_equal(cJSON_GetObjectItem(j, "step")->valueint, 42);
    const cJSON *rs = cJSON_GetObjectItem(j, "recipients");
    assert_int_equal(cJSON_GetArraySize(rs), 2);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(rs, 1), "name")->valuestring,
                        "bob");
    assert_int_equal(strlen(cJSON_GetObjectItem(j, "agreement_hash")->valuestring), 64);
    assert_int_equal(strlen(cJSON_GetObjectItem(j, "signer_key")->valuestring), 64);
    cJSON_Delete(j);
    rc = run(&log, (const char *[]){"inspect", sealed, NULL});
    assert_int_equal(rc, 0);
    assert_non_null(strstr((char *)log.data, "recipients      2"));
    assert_non_null(strstr((char *)log.data, "  signer          "));
    rc = run(&log, (const char *[]){"open-checkpoint", "--help", NULL});
    assert_int_equal(rc, 0);
    assert_non_null(strstr((char *)log.data, "usage: gputravel open-checkpoint"));
    gt_buf_free(&log);
    assert_int_equal(gt_test_count_files(out_dir), 0);
}

static void bad_input_matrix(void **state)
{
    (void)state;
    char tampered[600], truncated[600], other_agreement[600], out[600];
    snprintf(tampered, sizeof tampered, "%s/tampered.sealed", dir);
    snprintf(truncated, sizeof truncated, "%s/truncated.sealed", dir);
    snprintf(other_agreement, sizeof other_agreement, "%s/other.json", dir);
    snprintf(out, sizeof out, "%s/model.bin", out_dir);
    gt_buf f = {0};
    GT_ASSERT_OK(gt_file_read_all(sealed, 1 << 20, &f));
    f.data[f.len - 100] ^= 0x04;  // a weight
    write_plain(tampered, f.data, f.len);
    f.data[f.len - 100] ^= 0x04;
    write_plain(truncated, f.data, f.len - 1);
    gt_buf doc = {0};
    GT_ASSERT_OK(gt_file_read_all(agreement, 1 << 20, &doc));
    doc.data[doc.len - 1] = ' ';  // one byte: another agreement
    write_plain(other_agreement, doc.data, doc.len);
    gt_buf_free_nowipe(&doc);

    struct {
        const char *file, *key, *agreement;
        int rc;
        const char *says;
        const char *ledger;
    } rows[] = {
        {sealed, kd_carol, NULL, 1, "not a recipient: the checkpoint is sealed for alice, bob",
         NULL},
        {sealed, kd_old, NULL, 1, "--add-recipient-key", NULL},
        {sealed, "/nonexistent/keys", NULL, 1, "missing", NULL},
        {tampered, kd_alice, NULL, 1, "signature does not verify under the signer key the "
                                      "header names: the file was tampered with", NULL},
        {truncated, kd_alice, NULL, 1, "ends early", NULL},
        {model_path, kd_alice, NULL, 1, "not a sealed checkpoint", NULL},
        {"/nonexistent.sealed", kd_alice, NULL, 1, "No such file", NULL},
        {sealed, kd_alice, other_agreement, 1, "sealed under another agreement", NULL},
        {sealed, NULL, NULL, 64, "--key DIR and --out FILE are required", NULL},
        // Who sealed it, against alice's ledger:
        {sealed, kd_alice, NULL, 1, "is not this holder's ledger: it is signed by another "
                                    "holder key", ledger_bob},
        {sealed, kd_alice, NULL, 1, "is not a trainer this holder served", ledger_other},
        {sealed, kd_alice, NULL, 1, "entry hash does not match its body", ledger_bad},
        {sealed, kd_alice, NULL, 1, "served this holder under another agreement",
         ledger_elsewhere},
        {sealed, kd_alice, NULL, 1, "no such ledger", "/nonexistent.ledger"},
        // re-sealed for the same recipients by another signing key: well-formed, but its
        // signer is no trainer alice served
        {forged, kd_alice, agreement, 1, "is not a trainer this holder served", ledger_alice},
    };
    gt_buf log = {0};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *args[12] = {"open-checkpoint", rows[i].file, "--out", out};
        int n = 4;
        if (rows[i].key != NULL) {
            args[n++] = "--key";
            args[n++] = rows[i].key;
        }
        if (rows[i].agreement != NULL) {
            args[n++] = "--agreement";
            args[n++] = rows[i].agreement;
        }
        if (rows[i].ledger != NULL) {
            args[n++] = "--ledger";
            args[n++] = rows[i].ledger;
        }
        args[n] = NULL;
        int rc = run(&log, args);
        if (rc != rows[i].rc || strstr((char *)log.data, rows[i].says) == NULL) {
            gt_test_fail_log(&log, NULL, "row %zu: expected %d '%s', got %d", i, rows[i].rc,
                             rows[i].says, rc);
        }
        if (gt_test_count_files(out_dir) != 0) {
            fail_msg("row %zu left a file in %s", i, out_dir);
        }
    }
    // The forgery itself is a valid file: without --ledger alice can open it, and is told that
    // nobody checked who sealed it; with her ledger the genuine one opens.
    int rc = run(&log, (const char *[]){"open-checkpoint", forged, "-k", kd_alice, "-o", out,
                                        NULL});
    if (rc != 0 || strstr((char *)log.data, "NOT checked against any ledger") == NULL) {
        gt_test_fail_log(&log, NULL, "forged, unchecked (%d)", rc);
    }
    unlink(out);
    rc = run(&log, (const char *[]){"open-checkpoint", sealed, "-k", kd_alice, "-o", out,
                                    "--ledger", ledger_alice, NULL});
    assert_int_equal(rc, 0);
    unlink(out);
    gt_buf_free(&log);
    gt_buf_free_nowipe(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recipient_opens),
        cmocka_unit_test(bad_input_matrix),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
