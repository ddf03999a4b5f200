// data/: llm.c shards, read and written, and every way a shard can be malformed.
#include "testlib.h"

#include <gputravel/data.h>

#include <stdlib.h>
#include <string.h>

static char dir[256];

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_rmtree(dir);
    return 0;
}

static void write_raw(const char *path, int32_t magic, int32_t version, int32_t count,
                      size_t actual_tokens)
{
    uint8_t hdr[GT_SHARD_HEADER_BYTES] = {0};
    gt_store_u32le(hdr, (uint32_t)magic);
    gt_store_u32le(hdr + 4, (uint32_t)version);
    gt_store_u32le(hdr + 8, (uint32_t)count);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fwrite(hdr, 1, sizeof hdr, fp);
    for (size_t i = 0; i < actual_tokens; i++) {
        uint16_t t = (uint16_t)i;
        fwrite(&t, 2, 1, fp);
    }
    fclose(fp);
}

static void round_trip(void **state)
{
    (void)state;
    char path[512];
    GT_ASSERT_OK(gt_path_join(path, sizeof path, dir, "a.bin"));
    uint16_t tokens[1000];
    for (int i = 0; i < 1000; i++) {
        tokens[i] = (uint16_t)(i * 97 % 50257);
    }
    GT_ASSERT_OK(gt_shard_write(path, tokens, 1000));
    gt_buf raw = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 1 << 20, &raw));
    assert_int_equal(raw.len, 1024 + 2000);
    uint64_t n = 0;
    GT_ASSERT_OK(gt_shard_header_parse(raw.data, GT_SHARD_HEADER_BYTES, &n));
    assert_int_equal(n, 1000);
    assert_int_equal(raw.data[1024], tokens[0] & 0xff);
    assert_int_equal(raw.data[1024 + 3], tokens[1] >> 8);
    gt_buf_free(&raw);

    uint16_t *back = NULL;
    size_t count = 0;
    GT_ASSERT_OK(gt_shard_read_all(path, &back, &count));
    assert_int_equal(count, 1000);
    assert_memory_equal(back, tokens, sizeof tokens);
    free(back);

    gt_shard_reader r;
    GT_ASSERT_OK(gt_shard_reader_open(&r, path));
    uint16_t piece[300];
    size_t got = 0, total = 0;
    do {
        GT_ASSERT_OK(gt_shard_reader_read(&r, piece, 300, &got));
        if (got > 0) {
            assert_memory_equal(piece, tokens + total, got * 2);
        }
        total += got;
    } while (got > 0);
    assert_int_equal(total, 1000);
    gt_shard_reader_close(&r);
}

static void malformed_shards_are_rejected(void **state)
{
    (void)state;
    char path[512];
    GT_ASSERT_OK(gt_path_join(path, sizeof path, dir, "bad.bin"));
    gt_shard_reader r;
    struct { int32_t magic, version, count; size_t actual; gt_code want; const char *says; } rows[] = {
        {20240521, 1, 10, 10, GT_E_FORMAT, "bad magic"},
        {20240520, 2, 10, 10, GT_E_UNSUPPORTED, "version 2"},
        {20240520, 1, 11, 10, GT_E_FORMAT, "header says 11 tokens"},
        {20240520, 1, 9, 10, GT_E_FORMAT, "header says 9 tokens"},
        {20240520, 1, -1, 0, GT_E_FORMAT, "negative"},
        {20240520, 7, 10, 10, GT_E_UNSUPPORTED, "llama-3 shard (uint32 tokens)"},
        {20240522, 1, 10, 10, GT_E_FORMAT, "llm.c evaluation file"},
        {20240326, 3, 10, 10, GT_E_FORMAT, "llm.c model checkpoint"},
        {20240328, 2, 10, 10, GT_E_FORMAT, "llm.c tokenizer file"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        write_raw(path, rows[i].magic, rows[i].version, rows[i].count, rows[i].actual);
        gt_err e = gt_shard_reader_open(&r, path);
        assert_int_equal(e.code, rows[i].want);
        if (strstr(e.msg, rows[i].says) == NULL) {
            fail_msg("row %zu: message '%s' lacks '%s'", i, e.msg, rows[i].says);
        }
        assert_null(r.fp);
    }
    // A file shorter than the header.
    FILE *fp = fopen(path, "wb");
    fwrite("abc", 1, 3, fp);
    fclose(fp);
    GT_ASSERT_CODE(gt_shard_reader_open(&r, path), GT_E_TRUNCATED);
    GT_ASSERT_OK(gt_path_join(path, sizeof path, dir, "missing.bin"));
    GT_ASSERT_CODE(gt_shard_reader_open(&r, path), GT_E_NOTFOUND);
}

static void aborted_writer_leaves_nothing(void **state)
{
    (void)state;
    char sub[512], path[600];
    GT_ASSERT_OK(gt_path_join(sub, sizeof sub, dir, "w"));
    GT_ASSERT_OK(gt_mkdir_p(sub, 0755));
    GT_ASSERT_OK(gt_path_join(path, sizeof path, sub, "x.bin"));
    gt_shard_writer w;
    GT_ASSERT_OK(gt_shard_writer_open(&w, path));
    uint16_t t[4] = {1, 2, 3, 4};
    GT_ASSERT_OK(gt_shard_writer_append(&w, t, 4));
    gt_shard_writer_abort(&w);
    assert_int_equal(gt_test_count_files(sub), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(malformed_shards_are_rejected),
        cmocka_unit_test(aborted_writer_leaves_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
