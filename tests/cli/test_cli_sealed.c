// cli/: keygen, seal, inspect, verify-dataset and unseal as an operator runs them, and the whole
// bad-input matrix: every case exits non-zero with its own message and leaves no output behind.
#include "testlib.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];
static char keys_dir[512], ds[512], shard[512], out_dir[512], out[600];
static uint16_t tokens[1000];  // 2000 bytes: chunks of 400 make 5 chunks

#define RUN(buf, ...) gt_test_run_cli((buf), (const char *const[]){__VA_ARGS__, NULL})

static void write_file(const char *path, const void *p, size_t n)
{
    GT_ASSERT_OK(gt_file_write_atomic(path, p, n, 0644));
}

static void flip_bit(const char *path, long off, int bit)
{
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 1 << 20, &b));
    size_t at = off < 0 ? b.len + (size_t)off : (size_t)off;
    assert_true(at < b.len);
    b.data[at] ^= (uint8_t)(1u << bit);
    write_file(path, b.data, b.len);
    gt_buf_free_nowipe(&b);
}

static void chunk_file(char *path, size_t cap, const char *dsdir, uint32_t i)
{
    GT_ASSERT_OK(gt_chunk_path(path, cap, dsdir, i));
}

static void manifest_file(char *path, size_t cap, const char *dsdir)
{
    GT_ASSERT_OK(gt_path_join(path, cap, dsdir, GT_MANIFEST_FILE));
}

static void make_shard(const char *path, uint64_t seed)
{
    uint64_t x = seed;
    for (size_t i = 0; i < 1000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        tokens[i] = (uint16_t)(x % 50257);
    }
    GT_ASSERT_OK(gt_shard_write(path, tokens, 1000));
}

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    snprintf(keys_dir, sizeof keys_dir, "%s/keys", dir);
    snprintf(ds, sizeof ds, "%s/ds", dir);
    snprintf(shard, sizeof shard, "%s/in.bin", dir);
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    snprintf(out, sizeof out, "%s/shard.bin", out_dir);
    GT_ASSERT_OK(gt_mkdir_p(out_dir, 0700));
    make_shard(shard, 0x1234567);
    if (RUN(NULL, "keygen", "--out", keys_dir) != 0 ||
        RUN(NULL, "--quiet", "seal", shard, "--key", keys_dir, "--out", ds, "--chunk-size",
            "400", "--format", "1") != 0) {  // GTCHUNK1 pinned: its bit flips are counted
        fail_msg("setup: keygen or seal failed");
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_rmtree(dir);
    return 0;
}

// The command fails (non-zero), says `says`, and leaves the unseal output folder empty.
static void expect_failure(const char *const *args, const char *says)
{
    gt_buf o = {0};
    int rc = gt_test_run_cli(&o, args);
    if (rc == 0) {
        fail_msg("gputravel %s %s succeeded; expected '%s'", args[0], args[1], says);
    }
    if (strstr((const char *)o.data, says) == NULL) {
        fail_msg("gputravel %s: output lacks '%s':\n%s", args[0], says, (const char *)o.data);
    }
    assert_int_equal(gt_test_count_files(out_dir), 0);
    gt_buf_free_nowipe(&o);
}

// Both the keyless check and the unseal reject the dataset, each with its message.
static void expect_rejected(const char *verify_says, const char *unseal_says)
{
    expect_failure((const char *const[]){"verify-dataset", ds, NULL}, verify_says);
    expect_failure((const char *const[]){"unseal", ds, "--key", keys_dir, "--out", out, NULL},
                   unseal_says);
}

// unseal checks where its output goes before it decrypts anything: a folder named as --out, or
// a file in a folder that does not exist, fails at once and leaves nothing behind.
static void unseal_checks_out_first(void **state)
{
    (void)state;
    expect_failure((const char *const[]){"unseal", ds, "--key", keys_dir, "--out", out_dir,
                                         NULL},
                   "is a folder: name the file to write");
    char missing[700];
    snprintf(missing, sizeof missing, "%s/no-such-folder/shard.bin", out_dir);
    expect_failure((const char *const[]){"unseal", ds, "--key", keys_dir, "--out", missing,
                                         NULL},
                   "no-such-folder/shard.bin: cannot create: No such file or directory");
}

static void happy_path(void **state)
{
    (void)state;
    gt_buf o = {0};
    assert_int_equal(RUN(&o, "verify-dataset", ds, "--holder", keys_dir), 0);
    assert_non_null(strstr((const char *)o.data, "OK:"));
    assert_non_null(strstr((const char *)o.data, "5 chunks"));
    gt_buf_free_nowipe(&o);
    assert_int_equal(RUN(&o, "inspect", ds), 0);
    assert_non_null(strstr((const char *)o.data, "1000 uint16 LE, vocabulary 50257"));
    gt_buf_free_nowipe(&o);
    assert_int_equal(RUN(&o, "inspect", "--json", ds), 0);
    cJSON *j = NULL;
    GT_ASSERT_OK(gt_json_parse((const char *)o.data, o.len, &j));
    uint64_t v = 0;
    GT_ASSERT_OK(gt_json_get_u64(j, "chunk_count", &v));
    assert_int_equal(v, 5);
    GT_ASSERT_OK(gt_json_get_u64(j, "token_count", &v));
    assert_int_equal(v, 1000);
    cJSON_Delete(j);
    gt_buf_free_nowipe(&o);
    assert_int_equal(RUN(&o, "unseal", ds, "--key", keys_dir, "--out", out), 0);
    gt_buf_free_nowipe(&o);
    gt_buf a = {0}, b = {0};
    GT_ASSERT_OK(gt_file_read_all(shard, 1 << 20, &a));
    GT_ASSERT_OK(gt_file_read_all(out, 1 << 20, &b));
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);  // the same llm.c shard, byte for byte
    gt_buf_free(&a);
    gt_buf_free(&b);
    assert_int_equal(gt_test_count_files(out_dir), 1);
    assert_int_equal(unlink(out), 0);
    // pinning another holder fails
    char other[600];
    snprintf(other, sizeof other, "%s/other-keys", dir);
    assert_int_equal(RUN(NULL, "keygen", "--out", other), 0);
    expect_failure((const char *const[]){"verify-dataset", ds, "--holder", other, NULL},
                   "not the expected holder");
    // keygen never silently replaces keys
    expect_failure((const char *const[]){"keygen", "--out", keys_dir, NULL}, "refusing to replace");
    assert_int_equal(RUN(&o, "seal", "--help"), 0);
    assert_non_null(strstr((const char *)o.data, "--chunk-size"));
    gt_buf_free_nowipe(&o);
    assert_int_equal(RUN(NULL, "seal", shard, "--out", ds), 64);  // no --key
}

static void flipped_bit_in_chunk(void **state)
{
    (void)state;
    char c[600];
    chunk_file(c, sizeof c, ds, 1);
    const long body[] = {40, 41, 250, 439};  // first, second, middle, last ciphertext byte
    for (size_t i = 0; i < sizeof body / sizeof body[0]; i++) {
        flip_bit(c, body[i], (int)i % 8);
        expect_rejected("chunk 1 is altered: its SHA-256 differs",
                        "chunk 1 is altered: authentication failed");
        flip_bit(c, body[i], (int)i % 8);
    }
    flip_bit(c, -1, 7);  // the GCM tag
    expect_rejected("chunk 1 is altered: its SHA-256 differs",
                    "chunk 1 is altered: its tag differs from the signed manifest");
    flip_bit(c, -1, 7);
    flip_bit(c, 0, 0);  // header magic
    expect_rejected("chunk 1: not a chunk file", "chunk 1: not a chunk file");
    flip_bit(c, 0, 0);
    flip_bit(c, 33, 2);  // header's plaintext length
    expect_rejected("chunk 1: header says", "chunk 1: header says");
    flip_bit(c, 33, 2);
    gt_buf o = {0};
    assert_int_equal(RUN(&o, "verify-dataset", ds), 0);  // all restored
    gt_buf_free_nowipe(&o);
}

static void flipped_bit_in_manifest_or_signature(void **state)
{
    (void)state;
    char m[600];
    manifest_file(m, sizeof m, ds);
    const long at[] = {16, 40, 70, 100, 110, 130, 200, 300, -64, -30, -1};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        flip_bit(m, at[i], (int)(i % 8));
        expect_rejected("manifest: signature does not verify",
                        "manifest: signature does not verify");
        expect_failure((const char *const[]){"inspect", ds, NULL}, "signature does not verify");
        flip_bit(m, at[i], (int)(i % 8));
    }
    flip_bit(m, 0, 1);
    expect_rejected("manifest: bad magic", "manifest: bad magic");
    flip_bit(m, 0, 1);
    flip_bit(m, 8, 1);
    expect_rejected("manifest: version 3", "manifest: version 3");
    flip_bit(m, 8, 1);
}

static void truncated_chunk(void **state)
{
    (void)state;
    char c[600];
    chunk_file(c, sizeof c, ds, 2);
    assert_int_equal(truncate(c, 455), 0);  // one byte short of 40 + 400 + 16
    expect_rejected("chunk 2 is truncated", "chunk 2 is truncated");
    assert_int_equal(truncate(c, 10), 0);
    expect_rejected("chunk 2 is truncated", "chunk 2 is truncated");
}

static void missing_chunk(void **state)
{
    (void)state;
    char c[600];
    chunk_file(c, sizeof c, ds, 4);
    assert_int_equal(unlink(c), 0);
    expect_rejected("chunk 4 is missing", "chunk 4 is missing");
}

static void swapped_chunks(void **state)
{
    (void)state;
    char a[600], b[600], t[700];
    chunk_file(a, sizeof a, ds, 0);
    chunk_file(b, sizeof b, ds, 1);
    snprintf(t, sizeof t, "%s.x", a);
    assert_int_equal(rename(a, t), 0);
    assert_int_equal(rename(b, a), 0);
    assert_int_equal(rename(t, b), 0);
    expect_rejected("chunk file 0 holds chunk 1 of this dataset: chunks swapped",
                    "chunk file 0 holds chunk 1 of this dataset: chunks swapped");
}

static void chunk_from_another_dataset_same_key(void **state)
{
    (void)state;
    char other_shard[600], other_ds[600], from[700], to[700];
    snprintf(other_shard, sizeof other_shard, "%s/other.bin", dir);
    snprintf(other_ds, sizeof other_ds, "%s/other-ds", dir);
    make_shard(other_shard, 0xfeedbeef);  // same size, other tokens
    assert_int_equal(RUN(NULL, "--quiet", "seal", other_shard, "--key", keys_dir, "--out",
                         other_ds, "--chunk-size", "400", "--format", "1"),
                     0);
    chunk_file(from, sizeof from, other_ds, 1);
    chunk_file(to, sizeof to, ds, 1);
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(from, 1 << 20, &b));
    write_file(to, b.data, b.len);
    expect_rejected("chunk 1 belongs to another dataset", "chunk 1 belongs to another dataset");
    // the same chunk with its header rewritten to name this dataset is still caught
    gt_manifest m;
    GT_ASSERT_OK(gt_manifest_load(&m, ds));
    memcpy(b.data + 8, m.dataset_id, GT_DATASET_ID_BYTES);
    gt_manifest_free(&m);
    write_file(to, b.data, b.len);
    expect_rejected("chunk 1 is altered: its SHA-256 differs",
                    "chunk 1 is altered: its tag differs from the signed manifest");
    gt_buf_free_nowipe(&b);
}

static void wrong_dataset_key(void **state)
{
    (void)state;
    char other[600];
    snprintf(other, sizeof other, "%s/other-keys", dir);
    assert_int_equal(RUN(NULL, "keygen", "--out", other), 0);
    expect_failure((const char *const[]){"unseal", ds, "--key", other, "--out", out, NULL},
                   "wrong dataset key");
    // no key at all
    expect_failure((const char *const[]){"unseal", ds, "--key", out_dir, "--out", out, NULL},
                   "a key folder from gputravel keygen?");
}

// Re-signs the manifest with the holder's own key after edit() changed it: the signature is
// then valid and only the sizes can be wrong.
static void resign_manifest(void (*edit)(gt_manifest *))
{
    char path[600];
    manifest_file(path, sizeof path, ds);
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 1 << 20, &b));
    gt_manifest m;
    GT_ASSERT_OK(gt_manifest_decode(&m, b.data, b.len));
    edit(&m);
    gt_holder_keys k;
    GT_ASSERT_OK(gt_keydir_load(keys_dir, &k));
    gt_buf enc = {0};
    GT_ASSERT_OK(gt_manifest_encode(&m, k.holder_sec, &enc));
    write_file(path, enc.data, enc.len);
    gt_holder_keys_wipe(&k);
    gt_manifest_free(&m);
    gt_buf_free_nowipe(&enc);
    gt_buf_free_nowipe(&b);
}

static void shorter_last_chunk(gt_manifest *m)
{
    m->chunks[m->chunk_count - 1].plaintext_len -= 2;
    m->token_count -= 1;
}

static void inconsistent_sizes(gt_manifest *m)
{
    m->token_count += 7;
}

static void manifest_sizes_disagree_with_files(void **state)
{
    (void)state;
    resign_manifest(shorter_last_chunk);
    expect_rejected("chunk 4 is longer than the manifest says",
                    "chunk 4 is longer than the manifest says");
}

static void manifest_sizes_disagree_with_each_other(void **state)
{
    (void)state;
    resign_manifest(inconsistent_sizes);
    expect_rejected("manifest: sizes disagree", "manifest: sizes disagree");
}

static void write_raw_shard(const char *path, int32_t magic, int32_t version, int32_t count,
                            size_t real_tokens, size_t extra_bytes)
{
    size_t len = GT_SHARD_HEADER_BYTES + 2 * real_tokens + extra_bytes;
    uint8_t *b = calloc(1, len);
    assert_non_null(b);
    gt_store_u32le(b, (uint32_t)magic);
    gt_store_u32le(b + 4, (uint32_t)version);
    gt_store_u32le(b + 8, (uint32_t)count);
    write_file(path, b, len);
    free(b);
}

static void bad_shards(void **state)
{
    (void)state;
    struct {
        int32_t magic, version, count;
        size_t real, extra;
        const char *says;
    } rows[] = {
        {20240521, 1, 10, 10, 0, "shard: bad magic 20240521"},
        {20240520, 2, 10, 10, 0, "shard: version 2"},
        {20240520, 1, -4, 10, 0, "shard: negative token count -4"},
        {20240520, 1, 11, 10, 0, "shard: file ends early: header says 11 tokens"},
        {20240520, 1, 9, 10, 0, "shard: trailing bytes: header says 9 tokens"},
        {20240520, 1, 10, 10, 1, "shard: trailing bytes: header says 10 tokens"},
    };
    char bad[600], sealed[600];
    snprintf(bad, sizeof bad, "%s/bad.bin", dir);
    snprintf(sealed, sizeof sealed, "%s/new-ds", dir);
    int before = gt_test_count_files(dir);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        write_raw_shard(bad, rows[i].magic, rows[i].version, rows[i].count, rows[i].real,
                        rows[i].extra);
        // a good shard first: the bad one is still caught before anything is written
        expect_failure((const char *const[]){"seal", shard, bad, "--key", keys_dir, "--out",
                                             sealed, "--chunk-size", "64", NULL},
                       rows[i].says);
        assert_false(gt_path_exists(sealed));
        assert_int_equal(gt_test_count_files(dir), before + 1);  // + bad.bin; nothing staged
    }
    // a token outside the vocabulary
    uint16_t t[3] = {5, 300, 7};
    GT_ASSERT_OK(gt_shard_write(bad, t, 3));
    expect_failure((const char *const[]){"seal", bad, "--key", keys_dir, "--out", sealed,
                                         "--vocab", "256", NULL},
                   "token 300 at position 1 is outside the vocabulary (256 tokens)");
    assert_false(gt_path_exists(sealed));
    // a bad token deep in the shard: 124 chunks are already written when it is found, and the
    // staging folder goes with them
    uint16_t *late = calloc(4000, sizeof *late);
    assert_non_null(late);
    late[3999] = 999;
    GT_ASSERT_OK(gt_shard_write(bad, late, 4000));
    free(late);
    expect_failure((const char *const[]){"seal", bad, "--key", keys_dir, "--out", sealed,
                                         "--vocab", "500", "--chunk-size", "64", NULL},
                   "token 999 at position 3999 is outside the vocabulary (500 tokens)");
    assert_false(gt_path_exists(sealed));
    assert_int_equal(gt_test_count_files(dir), before + 1);
    // an existing dataset is never overwritten
    expect_failure((const char *const[]){"seal", shard, "--key", keys_dir, "--out", ds, NULL},
                   "already exists and is not an empty folder");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(happy_path, setup, teardown),
        cmocka_unit_test_setup_teardown(unseal_checks_out_first, setup, teardown),
        cmocka_unit_test_setup_teardown(flipped_bit_in_chunk, setup, teardown),
        cmocka_unit_test_setup_teardown(flipped_bit_in_manifest_or_signature, setup, teardown),
        cmocka_unit_test_setup_teardown(truncated_chunk, setup, teardown),
        cmocka_unit_test_setup_teardown(missing_chunk, setup, teardown),
        cmocka_unit_test_setup_teardown(swapped_chunks, setup, teardown),
        cmocka_unit_test_setup_teardown(chunk_from_another_dataset_same_key, setup, teardown),
        cmocka_unit_test_setup_teardown(wrong_dataset_key, setup, teardown),
        cmocka_unit_test_setup_teardown(manifest_sizes_disagree_with_files, setup, teardown),
        cmocka_unit_test_setup_teardown(manifest_sizes_disagree_with_each_other, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_shards, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
