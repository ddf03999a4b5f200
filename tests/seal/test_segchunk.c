// seal/: segmented chunks (GTCHUNK2, manifest version 2): round trips through seal, verify and
// unseal; the openers (two threads, a stream of odd pieces) against the one-thread result; and
// one test per attack on the segments (flipped byte, swapped, dropped, last removed, duplicated,
// spliced in from another chunk), each refused with the destination wiped.
#include "testlib.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEG 4096u
#define CHUNK (3 * SEG + 1000)  // three whole segments and a short last one
#define NTOK 14000              // 28000 bytes: two such chunks and a 1424-byte third

static char dir[256], keys_dir[512], ds_dir[512], v1_dir[512], shard[512], out[512];
static gt_holder_keys keys;
static uint16_t tokens[NTOK];
static gt_manifest man;
static gt_buf files[3];

static void seal_format(const char *to, int format, uint32_t seg)
{
    const char *shards[] = {shard};
    gt_seal_params p = {.shards = shards, .shard_count = 1, .out_dir = to, .chunk_size = CHUNK,
                        .vocab_size = 50257, .format = format, .segment_bytes = seg};
    gt_seal_result r;
    GT_ASSERT_OK(gt_seal(&p, &keys, &r));
}

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    snprintf(keys_dir, sizeof keys_dir, "%s/keys", dir);
    snprintf(ds_dir, sizeof ds_dir, "%s/ds", dir);
    snprintf(v1_dir, sizeof v1_dir, "%s/ds1", dir);
    snprintf(shard, sizeof shard, "%s/a.bin", dir);
    snprintf(out, sizeof out, "%s/out.bin", dir);
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (size_t i = 0; i < NTOK; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        tokens[i] = (uint16_t)(x % 50257);
    }
    GT_ASSERT_OK(gt_shard_write(shard, tokens, NTOK));
    GT_ASSERT_OK(gt_keydir_generate(keys_dir, false, &keys));
    seal_format(ds_dir, 2, SEG);
    GT_ASSERT_OK(gt_manifest_load(&man, ds_dir));
    for (uint32_t i = 0; i < 3; i++) {
        char path[600];
        GT_ASSERT_OK(gt_chunk_path(path, sizeof path, ds_dir, i));
        GT_ASSERT_OK(gt_file_read_all(path, 1 << 20, &files[i]));
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        gt_buf_free_nowipe(&files[i]);
    }
    gt_manifest_free(&man);
    gt_holder_keys_wipe(&keys);
    gt_test_rmtree(dir);
    return 0;
}

static void layout_is_the_documented_one(void **state)
{
    (void)state;
    assert_int_equal(man.version, GT_MANIFEST_VERSION_SEGMENTED);
    assert_int_equal(man.segment_bytes, SEG);
    assert_int_equal(man.chunk_count, 3);
    for (uint32_t i = 0; i < 3; i++) {
        uint64_t L = man.chunks[i].plaintext_len;
        uint64_t n = i < 2 ? 4 : 1;
        assert_int_equal(gt_chunk_seg_count(L, SEG), n);
        assert_int_equal(files[i].len, 40 + L + 16 * n);
        assert_memory_equal(files[i].data, GT_CHUNK_V2_MAGIC, 8);
        // the manifest's tag is the file's last 16 bytes: the last segment's tag
        assert_memory_equal(man.chunks[i].tag, files[i].data + files[i].len - 16, 16);
    }
    // every segment is one GCM message under K_i with nonce_j and aad_j (seal.h), checked here
    // with the one-shot call, not the openers under test
    uint8_t key[32], aad[32], nonce[12], sa[GT_CHUNK_SEG_AAD_BYTES], pt[SEG];
    GT_ASSERT_OK(gt_chunk_key_derive(key, keys.dataset_key, &man, 0));
    GT_ASSERT_OK(gt_chunk_aad_build(aad, &man, 0));
    for (uint64_t j = 0; j < 4; j++) {
        size_t sa_len = 0, got = 0, n = j < 3 ? SEG : 1000;
        gt_chunk_seg_nonce(nonce, man.chunks[0].iv, SEG, j);
        gt_chunk_seg_aad(sa, &sa_len, aad, SEG, j, 4);
        assert_int_equal(sa_len, 41);
        assert_int_equal(sa[40], j == 3);
        GT_ASSERT_OK(gt_aead_open(pt, sizeof pt, &got, files[0].data + 40 + j * (SEG + 16),
                                  n + 16, sa, sa_len, nonce, key));
        assert_memory_equal(pt, (const uint8_t *)tokens + j * SEG, n);
    }
    gt_secure_zero(key, sizeof key);
}

static void seal_verify_unseal_round_trip(void **state)
{
    (void)state;
    GT_ASSERT_OK(gt_dataset_verify(ds_dir, NULL, false, NULL));
    GT_ASSERT_OK(gt_unseal(ds_dir, &keys, out, false, NULL));
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(out, 1 << 20, &b));
    assert_int_equal(b.len, GT_SHARD_HEADER_BYTES + sizeof tokens);
    assert_memory_equal(b.data + GT_SHARD_HEADER_BYTES, tokens, sizeof tokens);
    gt_buf_free(&b);
    unlink(out);
    // the default segment size, and a v1 dataset of the same tokens, side by side
    char d4[600];
    snprintf(d4, sizeof d4, "%s/ds4", dir);
    seal_format(d4, 2, 0);
    gt_manifest m4;
    GT_ASSERT_OK(gt_manifest_load(&m4, d4));
    assert_int_equal(m4.segment_bytes, GT_CHUNK_SEG_DEFAULT_BYTES);
    gt_manifest_free(&m4);
    seal_format(v1_dir, 1, 0);
    gt_manifest m1;
    GT_ASSERT_OK(gt_manifest_load(&m1, v1_dir));
    assert_int_equal(m1.version, GT_MANIFEST_VERSION);
    assert_int_equal(m1.segment_bytes, 0);
    assert_int_equal(gt_manifest_chunk_file_bytes(&m1, 0), 40 + CHUNK + 16);
    gt_manifest_free(&m1);
    GT_ASSERT_OK(gt_unseal(v1_dir, &keys, out, false, NULL));
    unlink(out);
    // a GTCHUNK1 file in a version-2 dataset is named as such
    char p1[600];
    GT_ASSERT_OK(gt_chunk_path(p1, sizeof p1, v1_dir, 0));
    gt_buf f1 = {0};
    GT_ASSERT_OK(gt_file_read_all(p1, 1 << 20, &f1));
    GT_ASSERT_ERR(gt_chunk_header_check(f1.data, f1.len, &man, 0), GT_E_FORMAT,
                  "a GTCHUNK1 file in a dataset of GTCHUNK2 chunks");
    gt_buf_free_nowipe(&f1);
    GT_ASSERT_ERR(gt_seal(&(gt_seal_params){.shards = (const char *[]){shard}, .shard_count = 1,
                                            .out_dir = d4, .vocab_size = 50257, .format = 2,
                                            .segment_bytes = 1000},
                          &keys, &(gt_seal_result){0}),
                  GT_E_FORMAT, "segment size 1000");
}

static void open_chunk_file(uint32_t i, int threads, uint8_t *pt, size_t cap, gt_err *err)
{
    uint8_t key[32];
    size_t got = 0;
    GT_ASSERT_OK(gt_chunk_key_derive(key, keys.dataset_key, &man, i));
    *err = gt_chunk_open_threads(pt, cap, &got, files[i].data, files[i].len, &man, i, key,
                                 threads);
    gt_secure_zero(key, sizeof key);
}

static void two_threads_and_a_stream_give_the_one_thread_result(void **state)
{
    (void)state;
    uint8_t *a = calloc(1, CHUNK), *b = calloc(1, CHUNK), *c = malloc(files[0].len);
    gt_err e;
    for (uint32_t i = 0; i < 3; i++) {
        uint64_t L = man.chunks[i].plaintext_len;
        open_chunk_file(i, 1, a, CHUNK, &e);
        GT_ASSERT_OK(e);
        open_chunk_file(i, 2, b, CHUNK, &e);
        GT_ASSERT_OK(e);
        assert_memory_equal(a, (const uint8_t *)tokens + (size_t)i * CHUNK, L);
        assert_memory_equal(a, b, L);
        // the stream opener, in place, fed in pieces that cut tags and segments anywhere
        uint8_t key[32], aad[32];
        GT_ASSERT_OK(gt_chunk_key_derive(key, keys.dataset_key, &man, i));
        GT_ASSERT_OK(gt_chunk_aad_build(aad, &man, i));
        gt_chunk_stream *s = NULL;
        GT_ASSERT_OK(gt_chunk_stream_new(&s, L, SEG, man.chunks[i].iv, aad, key));
        size_t body = files[i].len - 40, at = 0, plain = 0;
        memcpy(c, files[i].data + 40, body);
        static const size_t pieces[] = {1, 7, 4095, 16, 3, 5000, 9, 4113};
        for (size_t k = 0; at < body; k++) {
            size_t n = pieces[k % 8] < body - at ? pieces[k % 8] : body - at, got = 0;
            GT_ASSERT_OK(gt_chunk_stream_update(s, c + at, n, c + at, &got));
            memmove(c + plain, c + at, got);  // what the caller's writer would take
            plain += got;
            at += n;
        }
        GT_ASSERT_OK(gt_chunk_stream_final(s));
        gt_chunk_stream_free(s);
        assert_int_equal(plain, L);
        assert_memory_equal(c, a, L);
        gt_secure_zero(key, sizeof key);
    }
    free(a);
    free(b);
    free(c);
}

// ---- attacks on the segments: each refused, the whole destination wiped ----------------------

static size_t seg_len(uint64_t j)  // of chunk 0 or 1: three of SEG, then 1000 (with tags)
{
    return (j < 3 ? SEG : 1000) + 16;
}

static const uint8_t *seg_at(uint32_t chunk, uint64_t j)
{
    return files[chunk].data + 40 + j * (SEG + 16);
}

// Opens body (as chunk 0, with its key, IV and AAD) claiming pt_len plaintext bytes, on two
// threads, into a destination that starts full of 0xa5; the open must fail with GT_E_AUTH and
// leave every destination byte zero.
static void expect_refused(const uint8_t *body, size_t body_len, uint64_t pt_len)
{
    uint8_t key[32], aad[32];
    GT_ASSERT_OK(gt_chunk_key_derive(key, keys.dataset_key, &man, 0));
    GT_ASSERT_OK(gt_chunk_aad_build(aad, &man, 0));
    for (int threads = 1; threads <= 2; threads++) {
        uint8_t *pt = malloc(pt_len);
        memset(pt, 0xa5, pt_len);
        GT_ASSERT_CODE(gt_chunk_body_open(pt, body, body_len, pt_len, SEG, threads,
                                          man.chunks[0].iv, aad, key),
                       GT_E_AUTH);
        for (uint64_t k = 0; k < pt_len; k++) {
            assert_int_equal(pt[k], 0);
        }
        free(pt);
    }
    gt_secure_zero(key, sizeof key);
}

// Builds chunk 0's body from the listed segments (chunk, index) in order.
static size_t build(uint8_t *body, const uint32_t (*segs)[2], size_t n)
{
    size_t at = 0;
    for (size_t k = 0; k < n; k++) {
        size_t len = seg_len(segs[k][1]);
        memcpy(body + at, seg_at(segs[k][0], segs[k][1]), len);
        at += len;
    }
    return at;
}

static uint8_t attack_body[6 * (SEG + 16)];

static void attack_flipped_byte_in_a_segment(void **state)
{
    (void)state;
    size_t n = files[0].len - 40;
    memcpy(attack_body, files[0].data + 40, n);
    attack_body[2 * (SEG + 16) + 100] ^= 0x01;  // in segment 2's ciphertext
    expect_refused(attack_body, n, CHUNK);
    memcpy(attack_body, files[0].data + 40, n);
    attack_body[SEG + 5] ^= 0x80;  // in segment 0's tag
    expect_refused(attack_body, n, CHUNK);
}

static void attack_two_segments_swapped(void **state)
{
    (void)state;
    static const uint32_t order[][2] = {{0, 1}, {0, 0}, {0, 2}, {0, 3}};
    expect_refused(attack_body, build(attack_body, order, 4), CHUNK);
}

static void attack_a_segment_dropped(void **state)
{
    (void)state;
    static const uint32_t order[][2] = {{0, 0}, {0, 2}, {0, 3}};  // a consistent shorter chunk
    expect_refused(attack_body, build(attack_body, order, 3), CHUNK - SEG);
}

static void attack_last_segment_removed(void **state)
{
    (void)state;
    // truncated at a segment boundary: three whole segments, presented as the whole chunk
    static const uint32_t order[][2] = {{0, 0}, {0, 1}, {0, 2}};
    expect_refused(attack_body, build(attack_body, order, 3), 3 * SEG);
}

static void attack_a_segment_duplicated(void **state)
{
    (void)state;
    static const uint32_t order[][2] = {{0, 0}, {0, 1}, {0, 1}, {0, 2}, {0, 3}};
    expect_refused(attack_body, build(attack_body, order, 5), CHUNK + SEG);
}

static void attack_segment_spliced_from_another_chunk(void **state)
{
    (void)state;
    // chunk 1 of the same dataset, same position, same size
    static const uint32_t order[][2] = {{0, 0}, {1, 1}, {0, 2}, {0, 3}};
    expect_refused(attack_body, build(attack_body, order, 4), CHUNK);
}

static void attack_through_unseal_and_verify(void **state)
{
    (void)state;
    // the file-level paths: a swapped pair of equal segments keeps every size, so only the
    // cryptography (unseal) and the signed SHA-256 (verify) can catch it
    char path[600];
    GT_ASSERT_OK(gt_chunk_path(path, sizeof path, ds_dir, 0));
    static const uint32_t order[][2] = {{0, 0}, {0, 2}, {0, 1}, {0, 3}};
    size_t n = build(attack_body, order, 4);
    gt_buf f = {0};
    GT_ASSERT_OK(gt_buf_append(&f, files[0].data, 40));
    GT_ASSERT_OK(gt_buf_append(&f, attack_body, n));
    GT_ASSERT_OK(gt_file_write_atomic(path, f.data, f.len, 0644));
    GT_ASSERT_ERR(gt_unseal(ds_dir, &keys, out, false, NULL), GT_E_AUTH,
                  "chunk 0 is altered: authentication failed");
    assert_int_equal(access(out, F_OK), -1);
    GT_ASSERT_ERR(gt_dataset_verify(ds_dir, NULL, false, NULL), GT_E_AUTH,
                  "its SHA-256 differs");
    GT_ASSERT_OK(gt_file_write_atomic(path, files[0].data, files[0].len, 0644));
    gt_buf_free_nowipe(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layout_is_the_documented_one),
        cmocka_unit_test(seal_verify_unseal_round_trip),
        cmocka_unit_test(two_threads_and_a_stream_give_the_one_thread_result),
        cmocka_unit_test(attack_flipped_byte_in_a_segment),
        cmocka_unit_test(attack_two_segments_swapped),
        cmocka_unit_test(attack_a_segment_dropped),
        cmocka_unit_test(attack_last_segment_removed),
        cmocka_unit_test(attack_a_segment_duplicated),
        cmocka_unit_test(attack_segment_spliced_from_another_chunk),
        cmocka_unit_test(attack_through_unseal_and_verify),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
