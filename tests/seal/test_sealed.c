// data/: sealed datasets (GTCHUNK1, format 1, pinned: seal/segchunk has GTCHUNK2) through the library: round trips, one-shot chunk opening with the chunk
// key alone, the manifest against every flipped bit and every truncation, keys, and failures
// that must leave nothing behind.
#include "testlib.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <openssl/evp.h>

#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];
static char keys_dir[512], ds_dir[512], shard_a[512], shard_b[512];
static gt_holder_keys keys;
static uint16_t tokens[1255];  // 700 in shard a, 555 in shard b: 2510 bytes

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    snprintf(keys_dir, sizeof keys_dir, "%s/keys", dir);
    snprintf(ds_dir, sizeof ds_dir, "%s/ds", dir);
    snprintf(shard_a, sizeof shard_a, "%s/a.bin", dir);
    snprintf(shard_b, sizeof shard_b, "%s/b.bin", dir);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        tokens[i] = (uint16_t)(x % 50257);
    }
    GT_ASSERT_OK(gt_shard_write(shard_a, tokens, 700));
    GT_ASSERT_OK(gt_shard_write(shard_b, tokens + 700, 555));
    GT_ASSERT_OK(gt_keydir_generate(keys_dir, false, &keys));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_holder_keys_wipe(&keys);
    gt_test_rmtree(dir);
    return 0;
}

static gt_err seal_default(const char *out, uint64_t chunk_size)
{
    const char *shards[] = {shard_a, shard_b};
    gt_seal_params p = {.shards = shards, .shard_count = 2, .out_dir = out,
                        .chunk_size = chunk_size, .vocab_size = 50257, .format = 1};
    gt_seal_result r;
    return gt_seal(&p, &keys, &r);
}

static void read_manifest_bytes(gt_buf *b)
{
    char path[600];
    GT_ASSERT_OK(gt_path_join(path, sizeof path, ds_dir, GT_MANIFEST_FILE));
    GT_ASSERT_OK(gt_file_read_all(path, 1 << 20, b));
}

// Rewrites one byte in place (no fsync: thousands of flips must stay fast).
static void poke(const char *path, size_t at, uint8_t v)
{
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, &v, 1, (off_t)at), 1);
    close(fd);
}

static void round_trip_uneven_chunks(void **state)
{
    (void)state;
    const char *shards[] = {shard_a, shard_b};
    gt_seal_params p = {.shards = shards, .shard_count = 2, .out_dir = ds_dir, .chunk_size = 300,
                        .vocab_size = 50257, .format = 1};
    gt_seal_result r;
    GT_ASSERT_OK(gt_seal(&p, &keys, &r));
    assert_int_equal(r.token_count, 1255);
    assert_int_equal(r.plaintext_bytes, 2510);
    assert_int_equal(r.chunk_count, 9);  // 8 x 300 + 110
    assert_int_equal(gt_test_count_files(ds_dir), 10);
    assert_int_equal(gt_test_count_files(dir), 4);  // keys, ds, a.bin, b.bin: no staging left

    gt_manifest m;
    GT_ASSERT_OK(gt_dataset_verify(ds_dir, keys.holder_pub, false, &m));
    assert_int_equal(m.chunk_count, 9);
    assert_int_equal(m.chunks[8].plaintext_len, 110);
    assert_int_equal(m.chunks[0].plaintext_len, 300);
    assert_memory_equal(m.dataset_id, r.dataset_id, GT_DATASET_ID_BYTES);
    gt_manifest_free(&m);

    char out[600];
    snprintf(out, sizeof out, "%s/out.bin", dir);
    GT_ASSERT_OK(gt_unseal(ds_dir, &keys, out, false, NULL));
    uint16_t *got = NULL;
    size_t n = 0;
    GT_ASSERT_OK(gt_shard_read_all(out, &got, &n));
    assert_int_equal(n, 1255);
    assert_memory_equal(got, tokens, sizeof tokens);
    free(got);
    struct stat st;
    assert_int_equal(stat(out, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
}

// A travelling device gets (chunk key, IV, AAD, ciphertext || tag) and nothing else.
static void one_chunk_opens_with_its_key_alone(void **state)
{
    (void)state;
    GT_ASSERT_OK(seal_default(ds_dir, 300));
    gt_manifest m;
    GT_ASSERT_OK(gt_manifest_load(&m, ds_dir));
    for (uint32_t i = 0; i < m.chunk_count; i++) {
        char path[600];
        GT_ASSERT_OK(gt_chunk_path(path, sizeof path, ds_dir, i));
        gt_buf file = {0};
        GT_ASSERT_OK(gt_file_read_all(path, 1 << 20, &file));
        uint8_t key[GT_AEAD_KEY_BYTES], aad[GT_CHUNK_AAD_BYTES];
        GT_ASSERT_OK(gt_chunk_key_derive(key, keys.dataset_key, &m, i));
        GT_ASSERT_OK(gt_chunk_aad_build(aad, &m, i));
        assert_memory_equal(file.data, GT_CHUNK_MAGIC, 8);
        assert_memory_equal(file.data + 8, aad, sizeof aad);  // the header carries the AAD
        uint8_t pt[300];
        size_t pt_len = 0;
        // the bare primitive, exactly as a device would call it
        GT_ASSERT_OK(gt_aead_open(pt, sizeof pt, &pt_len, file.data + GT_CHUNK_HEADER_BYTES,
                                  file.len - GT_CHUNK_HEADER_BYTES, aad, sizeof aad,
                                  m.chunks[i].iv, key));
        assert_int_equal(pt_len, m.chunks[i].plaintext_len);
        assert_memory_equal(pt, (const uint8_t *)tokens + 300 * i, pt_len);
        // and the checked wrapper
        memset(pt, 0, sizeof pt);
        GT_ASSERT_OK(gt_chunk_open(pt, sizeof pt, &pt_len, file.data, file.len, &m, i, key));
        assert_memory_equal(pt, (const uint8_t *)tokens + 300 * i, pt_len);
        // another chunk's key does not open it
        uint8_t other[GT_AEAD_KEY_BYTES];
        GT_ASSERT_OK(gt_chunk_key_derive(other, keys.dataset_key, &m, (i + 1) % m.chunk_count));
        GT_ASSERT_CODE(gt_chunk_open(pt, sizeof pt, &pt_len, file.data, file.len, &m, i, other),
                       GT_E_AUTH);
        assert_int_equal(pt_len, 0);
        // the chunk presented as another index is named as swapped
        if (m.chunk_count > 1) {
            uint32_t j = (i + 1) % m.chunk_count;
            gt_err e = gt_chunk_header_check(file.data, file.len, &m, j);
            assert_int_equal(e.code, GT_E_AUTH);
            assert_non_null(strstr(e.msg, "swapped"));
        }
        gt_secure_zero(key, sizeof key);
        gt_buf_free_nowipe(&file);
    }
    assert_int_equal(m.chunk_count, 9);
    GT_ASSERT_CODE(gt_chunk_key_derive((uint8_t[32]){0}, keys.dataset_key, &m, 9), GT_E_ARG);
    gt_manifest_free(&m);
}

static void chunk_keys_differ_and_are_deterministic(void **state)
{
    (void)state;
    gt_manifest m = {.chunk_count = 2};
    gt_manifest_chunk chunks[2] = {{.plaintext_len = 10}, {.plaintext_len = 4}};
    m.chunks = chunks;
    memset(m.dataset_id, 0xab, sizeof m.dataset_id);
    uint8_t k0[32], k0b[32], k1[32], aad[32];
    GT_ASSERT_OK(gt_chunk_key_derive(k0, keys.dataset_key, &m, 0));
    GT_ASSERT_OK(gt_chunk_key_derive(k0b, keys.dataset_key, &m, 0));
    GT_ASSERT_OK(gt_chunk_key_derive(k1, keys.dataset_key, &m, 1));
    assert_memory_equal(k0, k0b, 32);
    assert_memory_not_equal(k0, k1, 32);
    assert_memory_not_equal(k0, keys.dataset_key, 32);
    GT_ASSERT_OK(gt_chunk_aad_build(aad, &m, 1));
    const uint8_t want[32] = {0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab,
                              0xab, 0xab, 0xab, 0xab, 0xab, 1, 0, 0, 0, 2, 0, 0, 0, 4};
    assert_memory_equal(aad, want, 32);
    // RFC 5869 by hand is the crypto layer's test; here: HKDF(key, salt=id, info) with index
    uint8_t check[32];
    GT_ASSERT_OK(gt_dataset_key_check(check, keys.dataset_key, m.dataset_id));
    assert_memory_not_equal(check, k0, 32);
}

static void manifest_rejects_every_flipped_bit(void **state)
{
    (void)state;
    GT_ASSERT_OK(seal_default(ds_dir, 1000));
    gt_buf b = {0};
    read_manifest_bytes(&b);
    assert_int_equal(b.len, GT_MANIFEST_HEADER_BYTES + 3 * GT_MANIFEST_ENTRY_BYTES + 64);
    gt_manifest m;
    GT_ASSERT_OK(gt_manifest_parse(&m, b.data, b.len));
    gt_manifest_free(&m);
    for (size_t i = 0; i < b.len * 8; i++) {
        b.data[i / 8] ^= (uint8_t)(1u << (i % 8));
        gt_err e = gt_manifest_parse(&m, b.data, b.len);
        if (e.code == GT_E_NONE) {
            fail_msg("bit %zu flipped: manifest still accepted", i);
        }
        assert_null(m.chunks);  // nothing half-parsed is handed back
        if (i / 8 >= 16 && i / 8 < 120) {  // past magic/version/flags, before the chunk count
            assert_int_equal(e.code, GT_E_AUTH);
            assert_non_null(strstr(e.msg, "signature does not verify"));
        }
        b.data[i / 8] ^= (uint8_t)(1u << (i % 8));
    }
    gt_buf_free_nowipe(&b);
}

static void manifest_rejects_every_truncation(void **state)
{
    (void)state;
    GT_ASSERT_OK(seal_default(ds_dir, 1000));
    gt_buf b = {0};
    read_manifest_bytes(&b);
    gt_manifest m;
    for (size_t n = 0; n < b.len; n++) {
        gt_err e = gt_manifest_parse(&m, b.data, n);
        if (e.code != GT_E_TRUNCATED && e.code != GT_E_FORMAT) {
            fail_msg("%zu of %zu bytes: %s (%s)", n, b.len, gt_code_name(e.code), e.msg);
        }
    }
    GT_ASSERT_OK(gt_buf_append(&b, "x", 1));
    GT_ASSERT_CODE(gt_manifest_parse(&m, b.data, b.len), GT_E_FORMAT);  // trailing byte
    gt_buf_free_nowipe(&b);
}

static void manifest_encode_decode_round_trip(void **state)
{
    (void)state;
    GT_ASSERT_OK(seal_default(ds_dir, 512));
    gt_buf b = {0};
    read_manifest_bytes(&b);
    gt_manifest m;
    GT_ASSERT_OK(gt_manifest_parse(&m, b.data, b.len));
    gt_buf again = {0};
    GT_ASSERT_OK(gt_manifest_encode(&m, keys.holder_sec, &again));
    assert_int_equal(again.len, b.len);
    assert_memory_equal(again.data, b.data, b.len);  // Ed25519 is deterministic
    assert_int_equal(m.vocab_size, 50257);
    assert_int_equal(m.token_count, 1255);
    assert_int_equal(m.chunk_size, 512);
    assert_int_equal(m.chunk_count, 5);
    assert_memory_equal(m.holder_pub, keys.holder_pub, 32);
    // sizes that disagree, even correctly signed, are refused
    m.chunks[1].plaintext_len = 510;
    gt_buf bad = {0};
    GT_ASSERT_OK(gt_manifest_encode(&m, keys.holder_sec, &bad));
    gt_manifest m2;
    gt_err e = gt_manifest_parse(&m2, bad.data, bad.len);
    assert_int_equal(e.code, GT_E_FORMAT);
    assert_non_null(strstr(e.msg, "sizes disagree"));
    gt_buf_free_nowipe(&bad);
    gt_buf_free_nowipe(&again);
    gt_buf_free_nowipe(&b);
    gt_manifest_free(&m);
}

static void wrong_key_leaves_nothing(void **state)
{
    (void)state;
    GT_ASSERT_OK(seal_default(ds_dir, 300));
    char other_dir[600], out_dir[600], out[700];
    snprintf(other_dir, sizeof other_dir, "%s/other-keys", dir);
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    snprintf(out, sizeof out, "%s/shard.bin", out_dir);
    GT_ASSERT_OK(gt_mkdir_p(out_dir, 0700));
    gt_holder_keys other;
    GT_ASSERT_OK(gt_keydir_generate(other_dir, false, &other));
    gt_err e = gt_unseal(ds_dir, &other, out, false, NULL);
    assert_int_equal(e.code, GT_E_AUTH);
    assert_non_null(strstr(e.msg, "wrong dataset key"));
    assert_int_equal(gt_test_count_files(out_dir), 0);
    // the right dataset key under another identity still unseals (the key is what counts)
    memcpy(other.dataset_key, keys.dataset_key, sizeof other.dataset_key);
    GT_ASSERT_OK(gt_unseal(ds_dir, &other, out, false, NULL));
    assert_int_equal(gt_test_count_files(out_dir), 1);
    gt_holder_keys_wipe(&other);
}

static void keydir_files_and_refusals(void **state)
{
    (void)state;
    const char *names[] = {GT_KEYDIR_HOLDER_SECRET, GT_KEYDIR_HOLDER_PUBLIC,
                           GT_KEYDIR_DATASET_KEY, GT_KEYDIR_RECIPIENT_SECRET,
                           GT_KEYDIR_RECIPIENT_PUBLIC};
    for (size_t i = 0; i < 5; i++) {
        char path[700];
        struct stat st;
        GT_ASSERT_OK(gt_path_join(path, sizeof path, keys_dir, names[i]));
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
    }
    assert_int_equal(gt_test_count_files(keys_dir), 5);  // no temporary files left
    gt_holder_keys k;
    GT_ASSERT_OK(gt_keydir_load(keys_dir, &k));
    assert_memory_equal(&k, &keys, sizeof k);
    GT_ASSERT_CODE(gt_keydir_generate(keys_dir, false, NULL), GT_E_STATE);
    GT_ASSERT_OK(gt_keydir_load(keys_dir, &k));
    assert_memory_equal(&k, &keys, sizeof k);  // refused: nothing replaced
    uint8_t pub[32];
    GT_ASSERT_OK(gt_holder_pub_load(keys_dir, pub));
    assert_memory_equal(pub, keys.holder_pub, 32);
    char hex[65], pubfile[700];
    gt_hex_encode(hex, sizeof hex, keys.holder_pub, 32);
    GT_ASSERT_OK(gt_holder_pub_load(hex, pub));
    assert_memory_equal(pub, keys.holder_pub, 32);
    GT_ASSERT_OK(gt_path_join(pubfile, sizeof pubfile, keys_dir, GT_KEYDIR_HOLDER_PUBLIC));
    GT_ASSERT_OK(gt_holder_pub_load(pubfile, pub));
    assert_memory_equal(pub, keys.holder_pub, 32);
    // a secret key file whose public half was swapped
    char path[700];
    GT_ASSERT_OK(gt_path_join(path, sizeof path, keys_dir, GT_KEYDIR_HOLDER_SECRET));
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 4096, &b));
    b.data[b.len - 1] ^= 1;
    GT_ASSERT_OK(gt_file_write_atomic(path, b.data, b.len, 0600));
    GT_ASSERT_CODE(gt_keydir_load(keys_dir, &k), GT_E_FORMAT);
    uint8_t zero[sizeof k] = {0};
    assert_memory_equal(&k, zero, sizeof k);  // wiped on failure
    b.len -= 1;
    GT_ASSERT_OK(gt_file_write_atomic(path, b.data, b.len, 0600));
    GT_ASSERT_CODE(gt_keydir_load(keys_dir, &k), GT_E_TRUNCATED);
    gt_buf_free(&b);
    GT_ASSERT_OK(gt_keydir_generate(keys_dir, true, &k));  // --force replaces
    assert_memory_not_equal(k.dataset_key, keys.dataset_key, 32);
    gt_holder_keys_wipe(&k);
}

static void seal_failures_leave_nothing(void **state)
{
    (void)state;
    const char *shards[] = {shard_a, shard_b};
    gt_seal_params p = {.shards = shards, .shard_count = 2, .out_dir = ds_dir, .chunk_size = 100,
                        .vocab_size = 1000, .format = 1};  // the tokens go up to 50256
    gt_seal_result r;
    gt_err e = gt_seal(&p, &keys, &r);
    assert_int_equal(e.code, GT_E_FORMAT);
    assert_non_null(strstr(e.msg, "outside the vocabulary"));
    assert_false(gt_path_exists(ds_dir));
    assert_int_equal(gt_test_count_files(dir), 3);  // keys, a.bin, b.bin: no staging folder

    p.vocab_size = 50257;
    p.chunk_size = 301;
    GT_ASSERT_CODE(gt_seal(&p, &keys, &r), GT_E_ARG);
    p.chunk_size = 100;
    // an existing non-empty output is never overwritten
    GT_ASSERT_OK(gt_mkdir_p(ds_dir, 0755));
    char inside[600];
    snprintf(inside, sizeof inside, "%s/keep", ds_dir);
    GT_ASSERT_OK(gt_file_write_atomic(inside, "x", 1, 0644));
    GT_ASSERT_CODE(gt_seal(&p, &keys, &r), GT_E_STATE);
    assert_int_equal(gt_test_count_files(ds_dir), 1);
    // an empty one is filled
    remove(inside);
    GT_ASSERT_OK(gt_seal(&p, &keys, &r));
    assert_int_equal(r.chunk_count, 26);
    // an empty token stream is refused
    char empty[600];
    snprintf(empty, sizeof empty, "%s/empty.bin", dir);
    GT_ASSERT_OK(gt_shard_write(empty, tokens, 0));
    const char *none[] = {empty};
    gt_seal_params q = {.shards = none, .shard_count = 1, .out_dir = inside, .chunk_size = 100,
                        .vocab_size = 50257, .format = 1};
    GT_ASSERT_CODE(gt_seal(&q, &keys, &r), GT_E_ARG);
    assert_false(gt_path_exists(inside));
}

// Every single-bit change anywhere in any chunk file is refused by both the keyless check and
// unseal, and unseal leaves no file behind.
static void every_bit_of_every_chunk(void **state)
{
    (void)state;
    char tiny[600], out_dir[600], out[700];
    snprintf(tiny, sizeof tiny, "%s/tiny.bin", dir);
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    snprintf(out, sizeof out, "%s/x.bin", out_dir);
    GT_ASSERT_OK(gt_mkdir_p(out_dir, 0700));
    GT_ASSERT_OK(gt_shard_write(tiny, tokens, 3));
    const char *shards[] = {tiny};
    gt_seal_params p = {.shards = shards, .shard_count = 1, .out_dir = ds_dir, .chunk_size = 4,
                        .vocab_size = 65536, .format = 1};
    gt_seal_result r;
    GT_ASSERT_OK(gt_seal(&p, &keys, &r));
    assert_int_equal(r.chunk_count, 2);  // 4 + 2 bytes
    for (uint32_t c = 0; c < 2; c++) {
        char path[600];
        GT_ASSERT_OK(gt_chunk_path(path, sizeof path, ds_dir, c));
        gt_buf b = {0};
        GT_ASSERT_OK(gt_file_read_all(path, 4096, &b));
        assert_int_equal(b.len, GT_CHUNK_HEADER_BYTES + (c == 0 ? 4 : 2) + GT_AEAD_TAG_BYTES);
        for (size_t bit = 0; bit < b.len * 8; bit++) {
            poke(path, bit / 8, b.data[bit / 8] ^ (uint8_t)(1u << (bit % 8)));
            gt_err v = gt_dataset_verify(ds_dir, NULL, false, NULL);
            gt_err u = gt_unseal(ds_dir, &keys, out, false, NULL);
            if (v.code == GT_E_NONE || u.code == GT_E_NONE) {
                fail_msg("chunk %u bit %zu: verify %s, unseal %s", c, bit, gt_code_name(v.code),
                         gt_code_name(u.code));
            }
            assert_int_equal(gt_test_count_files(out_dir), 0);
            poke(path, bit / 8, b.data[bit / 8]);
        }
        gt_buf_free_nowipe(&b);
    }
    GT_ASSERT_OK(gt_dataset_verify(ds_dir, NULL, false, NULL));
    GT_ASSERT_OK(gt_unseal(ds_dir, &keys, out, false, NULL));
}

// Chunks that span several streaming slots (GT_SEAL_PIPE_BYTES), sealed through the pipeline
// (O_DIRECT where the file system allows it): each file must hash to the manifest's SHA-256
// (OpenSSL's one-shot digest, not the streaming code) and open in memory with the bare AEAD, and
// the dataset must verify and unseal. Chunk sizes: one that leaves an unaligned tail longer than
// a page, and one whose file is exactly one slot (header + plaintext + tag = 1 MiB).
static void chunks_across_streaming_slots(void **state)
{
    (void)state;
    const size_t count = 2000003;  // 4000006 bytes
    uint16_t *big = malloc(count * sizeof *big);
    assert_non_null(big);
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (size_t i = 0; i < count; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        big[i] = (uint16_t)(x % 50257);
    }
    char shard[600], out[600];
    snprintf(shard, sizeof shard, "%s/big.bin", dir);
    snprintf(out, sizeof out, "%s/big.out", dir);
    GT_ASSERT_OK(gt_shard_write(shard, big, count));
    const uint64_t chunk_sizes[] = {2101246, GT_SEAL_PIPE_BYTES - GT_CHUNK_HEADER_BYTES -
                                                 GT_AEAD_TAG_BYTES};
    for (size_t c = 0; c < sizeof chunk_sizes / sizeof chunk_sizes[0]; c++) {
        const char *shards[] = {shard};
        gt_seal_params p = {.shards = shards, .shard_count = 1, .out_dir = ds_dir,
                            .chunk_size = chunk_sizes[c], .vocab_size = 50257, .format = 1};
        gt_seal_result r;
        GT_ASSERT_OK(gt_seal(&p, &keys, &r));
        gt_manifest m;
        GT_ASSERT_OK(gt_manifest_load(&m, ds_dir));
        uint8_t *pt = malloc(chunk_sizes[c]);
        assert_non_null(pt);
        for (uint32_t i = 0; i < m.chunk_count; i++) {
            char path[600];
            GT_ASSERT_OK(gt_chunk_path(path, sizeof path, ds_dir, i));
            gt_buf file = {0};
            GT_ASSERT_OK(gt_file_read_all(path, 1 << 23, &file));
            assert_int_equal(file.len, gt_manifest_chunk_file_bytes(&m, i));
            uint8_t digest[32];
            unsigned dlen = 0;
            assert_int_equal(EVP_Digest(file.data, file.len, digest, &dlen, EVP_sha256(), NULL), 1);
            assert_memory_equal(digest, m.chunks[i].file_sha256, 32);
            uint8_t key[GT_AEAD_KEY_BYTES], aad[GT_CHUNK_AAD_BYTES];
            GT_ASSERT_OK(gt_chunk_key_derive(key, keys.dataset_key, &m, i));
            GT_ASSERT_OK(gt_chunk_aad_build(aad, &m, i));
            assert_memory_equal(file.data + 8, aad, sizeof aad);
            size_t pt_len = 0;
            GT_ASSERT_OK(gt_aead_open(pt, chunk_sizes[c], &pt_len,
                                      file.data + GT_CHUNK_HEADER_BYTES,
                                      file.len - GT_CHUNK_HEADER_BYTES, aad, sizeof aad,
                                      m.chunks[i].iv, key));
            assert_int_equal(pt_len, m.chunks[i].plaintext_len);
            assert_memory_equal(pt, (const uint8_t *)big + chunk_sizes[c] * i, pt_len);
            gt_secure_zero(key, sizeof key);
            gt_buf_free_nowipe(&file);
        }
        assert_int_equal(m.chunk_count, (2 * count + chunk_sizes[c] - 1) / chunk_sizes[c]);
        free(pt);
        gt_manifest_free(&m);
        GT_ASSERT_OK(gt_dataset_verify(ds_dir, keys.holder_pub, false, NULL));
        GT_ASSERT_OK(gt_unseal(ds_dir, &keys, out, false, NULL));
        uint16_t *got = NULL;
        size_t n = 0;
        GT_ASSERT_OK(gt_shard_read_all(out, &got, &n));
        assert_int_equal(n, count);
        assert_memory_equal(got, big, count * sizeof *big);
        free(got);
        unlink(out);
        gt_test_rmtree(ds_dir);
    }
    unlink(shard);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(round_trip_uneven_chunks, setup, teardown),
        cmocka_unit_test_setup_teardown(one_chunk_opens_with_its_key_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(chunk_keys_differ_and_are_deterministic, setup, teardown),
        cmocka_unit_test_setup_teardown(manifest_rejects_every_flipped_bit, setup, teardown),
        cmocka_unit_test_setup_teardown(manifest_rejects_every_truncation, setup, teardown),
        cmocka_unit_test_setup_teardown(manifest_encode_decode_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(wrong_key_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(keydir_files_and_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(seal_failures_leave_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(every_bit_of_every_chunk, setup, teardown),
        cmocka_unit_test_setup_teardown(chunks_across_streaming_slots, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
