// --json on verify-dataset and ledger verify: one JSON object each, with the fields a script
// needs; the same verdicts as the text (a tampered ledger still fails, with no JSON).
#include "testlib.h"

#include <gputravel/holder.h>
#include <gputravel/seal.h>

#include <string.h>

static cJSON *json_of(const gt_buf *out)
{
    const char *text = (const char *)out->data;
    const char *brace = strchr(text, '{');
    assert_non_null(brace);
    cJSON *j = cJSON_Parse(brace);
    assert_non_null(j);
    return j;
}

static void verify_dataset_and_ledger_as_json(void **state)
{
    (void)state;
    char dir[256], keys[512], shard[512], ds[512], ledger[600];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(keys, sizeof keys, dir, "keys"));
    GT_ASSERT_OK(gt_path_join(shard, sizeof shard, dir, "in.bin"));
    GT_ASSERT_OK(gt_path_join(ds, sizeof ds, dir, "ds"));
    snprintf(ledger, sizeof ledger, "%s/ledger.log", keys);
    uint16_t tok[3000];
    for (int i = 0; i < 3000; i++) {
        tok[i] = (uint16_t)(i % 256);
    }
    GT_ASSERT_OK(gt_shard_write(shard, tok, 3000));
    gt_holder_keys k;
    GT_ASSERT_OK(gt_keydir_generate(keys, false, &k));
    const char *shards[] = {shard};
    gt_seal_params p = {.shards = shards, .shard_count = 1, .out_dir = ds, .chunk_size = 2048,
                        .vocab_size = 256};
    gt_seal_result res;
    GT_ASSERT_OK(gt_seal(&p, &k, &res));

    gt_buf out = {0};
    int rc = gt_test_run_cli(&out, (const char *[]){"verify-dataset", ds, "--json", NULL});
    assert_int_equal(rc, 0);
    cJSON *j = json_of(&out);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "verified")));
    assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "chunks")), 3);
    assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "tokens")), 3000);
    char id[33];
    gt_hex_encode(id, sizeof id, res.dataset_id, 16);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "dataset_id")), id);
    cJSON_Delete(j);
    gt_buf_free(&out);

    gt_ledger *l = NULL;
    GT_ASSERT_OK(gt_ledger_open(&l, ledger, k.holder_sec));
    GT_ASSERT_OK(gt_ledger_append(l, "refuse", NULL));
    gt_ledger_close(l);
    rc = gt_test_run_cli(&out, (const char *[]){"ledger", "verify", ledger, "--json", NULL});
    assert_int_equal(rc, 0);
    j = json_of(&out);
    assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "entries")), 2);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "anchor")), "not-anchored");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "counter")));
    cJSON_Delete(j);
    gt_buf_free(&out);

    // show --json: the same verdict and every entry, in order, with its hash and detail.
    rc = gt_test_run_cli(&out, (const char *[]){"ledger", "show", ledger, "--json", NULL});
    assert_int_equal(rc, 0);
    j = json_of(&out);
    assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "entries")), 2);
    cJSON *log = cJSON_GetObjectItem(j, "log");
    assert_int_equal(cJSON_GetArraySize(log), 2);
    cJSON *first = cJSON_GetArrayItem(log, 0), *last = cJSON_GetArrayItem(log, 1);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(first, "kind")), "genesis");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(last, "kind")), "refuse");
    assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(last, "seq")),
                     (int)cJSON_GetNumberValue(cJSON_GetObjectItem(first, "seq")) + 1);
    // the last entry's hash is the ledger's head
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(last, "hash")),
                        cJSON_GetStringValue(cJSON_GetObjectItem(j, "head")));
    assert_non_null(cJSON_GetObjectItem(first, "detail"));
    cJSON_Delete(j);
    gt_buf_free(&out);

    // A tampered ledger fails as in text mode, and prints no JSON verdict.
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(ledger, 1 << 20, &b));
    b.data[20] ^= 1;
    GT_ASSERT_OK(gt_file_write_atomic(ledger, b.data, b.len, 0600));
    gt_buf_free(&b);
    rc = gt_test_run_cli(&out, (const char *[]){"ledger", "verify", ledger, "--json", NULL});
    assert_int_equal(rc, 1);
    assert_null(strstr((char *)out.data, "\"verified\":true"));
    gt_buf_free(&out);
    rc = gt_test_run_cli(&out, (const char *[]){"ledger", "show", ledger, "--json", NULL});
    assert_int_equal(rc, 1);
    assert_null(strstr((char *)out.data, "\"verified\":true"));
    assert_null(strstr((char *)out.data, "\"log\""));
    gt_buf_free(&out);
    gt_holder_keys_wipe(&k);
    gt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(verify_dataset_and_ledger_as_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
