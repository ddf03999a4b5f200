// cli/: `gputravel inspect FILE --json` on every plain file kind an llm.c user has: fp32 and
// bf16 checkpoints, a GPT-2 shard, a llama-3 shard, an evaluation file, a tokenizer file, a
// training state; and text output for one.
#include "testlib.h"

#include "gpt2_fixture.h"

#include <gputravel/data.h>
#include <gputravel/holder.h>
#include <gputravel/seal.h>

#include <stdlib.h>
#include <string.h>

#define MODEL GT_SOURCE_DIR "/tests/oracle/gpt2_tiny_model.bin"

static cJSON *inspect_json(const char *path)
{
    gt_buf out = {0};
    int rc = gt_test_run_cli(&out, (const char *[]){"inspect", path, "--json", NULL});
    if (rc != 0) {
        fail_msg("inspect %s: exit %d: %s", path, rc, (char *)out.data);
    }
    cJSON *j = cJSON_ParseWithLength((char *)out.data, out.len);
    assert_non_null(j);
    gt_buf_free(&out);
    return j;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static void every_plain_file_kind(void **state)
{
    (void)state;
    char dir[256], p[16][512];
    gt_test_tmpdir(dir, sizeof dir);
    const char *names[] = {"shard.bin", "llama.bin", "eval.bin", "tok.bin", "run.bin",
                           "run.bin.state", "half.bin"};
    for (int i = 0; i < 7; i++) {
        GT_ASSERT_OK(gt_path_join(p[i], sizeof p[i], dir, names[i]));
    }
    uint16_t tok[300];
    for (int i = 0; i < 300; i++) {
        tok[i] = (uint16_t)(i == 7 ? 50256 : i % 200);
    }
    GT_ASSERT_OK(gt_shard_write(p[0], tok, 300));
    tok[7] = 7;  // the model in training has V = 250
    GT_ASSERT_OK(gt_path_join(p[7], sizeof p[7], dir, "train_data.bin"));
    GT_ASSERT_OK(gt_shard_write(p[7], tok, 300));
    uint8_t hdr[1024 + 12] = {0};
    gt_store_u32le(hdr, 20240520);
    gt_store_u32le(hdr + 4, 7);
    gt_store_u32le(hdr + 8, 3);
    GT_ASSERT_OK(gt_file_write_atomic(p[1], hdr, sizeof hdr, 0644));
    gt_store_u32le(hdr, 20240522);
    gt_store_u32le(hdr + 4, 1);
    gt_store_u32le(hdr + 8, 10042);
    gt_store_u32le(hdr + 12, 512);
    GT_ASSERT_OK(gt_file_write_atomic(p[2], hdr, 1024, 0644));
    gt_tokenizer *t = gt_test_gpt2_subset();
    GT_ASSERT_OK(gt_tokenizer_write(t, p[3], 0644));
    gt_tokenizer_free(t);
    const char *train[] = {"train", "--init", MODEL, "--data", p[7], "--batch", "2", "--seq", "8",
                           "--steps", "1", "--threads", "1", "--plot", "none", "--out", p[4],
                           NULL};
    gt_buf log = {0};
    int rc = gt_test_run_cli(&log, train);
    if (rc != 0) {
        fail_msg("train: %s", (char *)log.data);
    }
    gt_buf_free(&log);
    assert_int_equal(gt_test_run_cli(NULL, (const char *[]){"train", "--init", MODEL, "--data",
                                                            p[7], "--batch", "2", "--seq", "8",
                                                            "--steps", "1", "--threads", "1",
                                                            "--plot", "none", "--out", p[6],
                                                            "--out-bf16", NULL}),
                     0);

    cJSON *j = inspect_json(p[0]);
    assert_string_equal(str(j, "kind"), "llmc_shard");
    assert_true(num(j, "tokens") == 300 && num(j, "max_token") == 50256);
    assert_true(num(j, "gpt2_end_of_text_tokens") == 1);
    cJSON_Delete(j);
    j = inspect_json(p[1]);
    assert_non_null(strstr(str(j, "token_dtype"), "llama-3"));
    assert_true(num(j, "tokens") == 3);
    cJSON_Delete(j);
    j = inspect_json(p[2]);
    assert_string_equal(str(j, "kind"), "llmc_eval_file");
    assert_true(num(j, "examples") == 10042 && num(j, "longest_example_bytes") == 512);
    cJSON_Delete(j);
    j = inspect_json(p[3]);
    assert_string_equal(str(j, "kind"), "llmc_tokenizer");
    assert_true(num(j, "vocab_size") == 50257 && num(j, "end_of_text") == 50256);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "byte_level_bpe")));
    cJSON_Delete(j);
    j = inspect_json(p[4]);
    assert_string_equal(str(j, "kind"), "llmc_checkpoint");
    assert_string_equal(str(j, "dtype"), "fp32");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "size_ok")));
    double params = num(j, "parameters");
    cJSON_Delete(j);
    j = inspect_json(p[6]);
    assert_string_equal(str(j, "dtype"), "bf16");
    assert_true(num(j, "file_bytes") == 1024 + 2 * params);
    cJSON_Delete(j);
    j = inspect_json(p[5]);
    assert_string_equal(str(j, "kind"), "training_state");
    assert_true(num(j, "step") == 1 && num(j, "version") == 2);
    assert_int_equal(strlen(str(j, "weights_sha256")), 64);
    cJSON_Delete(j);

    // text: the same fields; a truncated checkpoint says so; an unknown file is not guessed at
    rc = gt_test_run_cli(&log, (const char *[]){"inspect", p[4], NULL});
    assert_int_equal(rc, 0);
    assert_non_null(strstr((char *)log.data, "kind                         llmc_checkpoint"));
    gt_buf_free(&log);
    gt_buf raw = {0};
    GT_ASSERT_OK(gt_file_read_all(p[4], 64u << 20, &raw));
    GT_ASSERT_OK(gt_file_write_atomic(p[4], raw.data, raw.len - 4, 0644));
    gt_buf_free(&raw);
    j = inspect_json(p[4]);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "size_ok")));
    cJSON_Delete(j);
    GT_ASSERT_OK(gt_file_write_atomic(p[4], "hello", 5, 0644));
    assert_int_equal(gt_test_run_cli(NULL, (const char *[]){"inspect", p[4], NULL}), 1);
    gt_test_rmtree(dir);
}

// A holder's ledger: verified whole, entry count and holder key; a tampered one is an error.
static void holder_ledger(void **state)
{
    (void)state;
    char dir[256], keys[512], path[512];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(keys, sizeof keys, dir, "keys"));
    GT_ASSERT_OK(gt_path_join(path, sizeof path, dir, "ledger.log"));
    GT_ASSERT_OK(gt_keydir_generate(keys, false, NULL));
    gt_holder_keys hk;
    GT_ASSERT_OK(gt_keydir_load(keys, &hk));
    gt_ledger *l = NULL;
    GT_ASSERT_OK(gt_ledger_open(&l, path, hk.holder_sec));
    GT_ASSERT_OK(gt_ledger_append(l, "refuse", NULL));
    gt_ledger_close(l);
    cJSON *j = inspect_json(path);
    assert_string_equal(str(j, "kind"), "holder_ledger");
    assert_true(num(j, "entries") == 2);  // genesis + one
    char pub[65];
    gt_hex_encode(pub, sizeof pub, hk.holder_pub, sizeof hk.holder_pub);
    assert_string_equal(str(j, "holder_ed25519"), pub);
    cJSON_Delete(j);
    gt_holder_keys_wipe(&hk);
    gt_buf raw = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 1u << 20, &raw));
    raw.data[20] ^= 1;
    GT_ASSERT_OK(gt_file_write_atomic(path, raw.data, raw.len, 0600));
    gt_buf_free(&raw);
    assert_int_equal(gt_test_run_cli(NULL, (const char *[]){"inspect", path, NULL}), 1);
    gt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_plain_file_kind),
        cmocka_unit_test(holder_ledger),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
