// crypto/: AES-256-GCM one-shot, streaming and keyed (one schedule, many messages). Known answers: test cases 13-16 of McGrew and
// Viega, "The Galois/Counter Mode of Operation (GCM)" (AES-256, 96-bit IV), typed in as
// published; then tampering of ciphertext, tag, AAD, IV and key, each refused with GT_E_AUTH
// and a zeroed output.
#include "testlib.h"

#include <gputravel/crypto.h>

#include <stdlib.h>
#include <string.h>

typedef struct {
    int number;
    const char *key, *iv, *pt, *aad, *ct, *tag;
} gcm_row;

#define K15 "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308"
#define P15                                                                 \
    "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"      \
    "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255"
#define C15                                                                 \
    "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"      \
    "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad"
#define Z32 "0000000000000000000000000000000000000000000000000000000000000000"

static const gcm_row gcm_rows[] = {
    {13, Z32, "000000000000000000000000", "", "", "", "530f8afbc74536b9a963b4f1c4cb738b"},
    {14, Z32, "000000000000000000000000", "00000000000000000000000000000000", "",
     "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"},
    {15, K15, "cafebabefacedbaddecaf888", P15, "", C15, "b094dac5d93471bdec1a502270e3cc6c"},
    // Test case 16: the plaintext of 15 less its last 4 bytes, with AAD.
    {16, K15, "cafebabefacedbaddecaf888",
     "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
     "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
     "feedfacedeadbeeffeedfacedeadbeefabaddad2",
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
     "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
     "76fc6ece0f4e1768cddf8853bb2d551b"},
};

typedef struct {
    uint8_t key[32], iv[12], pt[64], aad[20], ct[64 + 16];
    size_t pt_len, aad_len;
} gcm_case;

static gcm_case load_row(const gcm_row *row)
{
    gcm_case c;
    memset(&c, 0, sizeof c);
    size_t n = 0;
    GT_ASSERT_OK(gt_hex_decode_exact(c.key, 32, row->key));
    GT_ASSERT_OK(gt_hex_decode_exact(c.iv, 12, row->iv));
    GT_ASSERT_OK(gt_hex_decode(c.pt, sizeof c.pt, &c.pt_len, row->pt));
    GT_ASSERT_OK(gt_hex_decode(c.aad, sizeof c.aad, &c.aad_len, row->aad));
    GT_ASSERT_OK(gt_hex_decode(c.ct, sizeof c.ct, &n, row->ct));
    assert_int_equal(n, c.pt_len);
    GT_ASSERT_OK(gt_hex_decode_exact(c.ct + n, 16, row->tag));
    return c;
}

static void gcm_known_answers_one_shot(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof gcm_rows / sizeof gcm_rows[0]; i++) {
        gcm_case c = load_row(&gcm_rows[i]);
        uint8_t out[80], back[64];
        size_t out_len = 0, back_len = 99;
        GT_ASSERT_OK(gt_aead_seal(out, sizeof out, &out_len, c.pt, c.pt_len, c.aad, c.aad_len,
                                  c.iv, c.key));
        assert_int_equal(out_len, c.pt_len + 16);
        assert_memory_equal(out, c.ct, out_len);
        GT_ASSERT_OK(gt_aead_open(back, sizeof back, &back_len, c.ct, c.pt_len + 16, c.aad,
                                  c.aad_len, c.iv, c.key));
        assert_int_equal(back_len, c.pt_len);
        if (c.pt_len > 0) {
            assert_memory_equal(back, c.pt, c.pt_len);
        }
        // In place: seal over the plaintext buffer, open over the ciphertext buffer.
        uint8_t buf[80];
        memcpy(buf, c.pt, c.pt_len);
        GT_ASSERT_OK(gt_aead_seal(buf, sizeof buf, &out_len, buf, c.pt_len, c.aad, c.aad_len,
                                  c.iv, c.key));
        assert_memory_equal(buf, c.ct, out_len);
        GT_ASSERT_OK(gt_aead_open(buf, sizeof buf, &back_len, buf, out_len, c.aad, c.aad_len,
                                  c.iv, c.key));
        assert_int_equal(back_len, c.pt_len);
        if (c.pt_len > 0) {
            assert_memory_equal(buf, c.pt, c.pt_len);
        }
    }
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

// Opens a tampered input and checks the contract: GT_E_AUTH, *pt_len = 0, output zeroed.
static void expect_refused(const uint8_t *ct, size_t ct_len, const uint8_t *aad, size_t aad_len,
                           const uint8_t *iv, const uint8_t *key)
{
    uint8_t out[80];
    memset(out, 0xa5, sizeof out);
    size_t out_len = 77;
    gt_err e = gt_aead_open(out, sizeof out, &out_len, ct, ct_len, aad, aad_len, iv, key);
    assert_int_equal(e.code, GT_E_AUTH);
    assert_string_equal(e.msg, "aead: authentication failed");  // no detail
    assert_int_equal(out_len, 0);
    size_t body = ct_len >= 16 ? ct_len - 16 : 0;
    assert_true(all_zero(out, body));
}

static void gcm_tampering_is_refused(void **state)
{
    (void)state;
    gcm_case c = load_row(&gcm_rows[3]);  // test case 16: plaintext and AAD
    size_t ct_len = c.pt_len + 16;
    uint8_t bad[80];
    // Every bit of the ciphertext and tag.
    for (size_t bit = 0; bit < ct_len * 8; bit++) {
        memcpy(bad, c.ct, ct_len);
        bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        expect_refused(bad, ct_len, c.aad, c.aad_len, c.iv, c.key);
    }
    // AAD: a flipped bit, one byte less, none at all.
    uint8_t aad[20];
    memcpy(aad, c.aad, sizeof aad);
    aad[7] ^= 0x40;
    expect_refused(c.ct, ct_len, aad, c.aad_len, c.iv, c.key);
    expect_refused(c.ct, ct_len, c.aad, c.aad_len - 1, c.iv, c.key);
    expect_refused(c.ct, ct_len, NULL, 0, c.iv, c.key);
    // IV and key.
    uint8_t iv[12], key[32];
    memcpy(iv, c.iv, 12);
    iv[11] ^= 1;
    expect_refused(c.ct, ct_len, c.aad, c.aad_len, iv, c.key);
    memcpy(key, c.key, 32);
    key[0] ^= 0x80;
    expect_refused(c.ct, ct_len, c.aad, c.aad_len, c.iv, key);
    // Truncated: one byte short of the tag, and shorter than a tag.
    expect_refused(c.ct, ct_len - 1, c.aad, c.aad_len, c.iv, c.key);
    expect_refused(c.ct, 15, c.aad, c.aad_len, c.iv, c.key);
    expect_refused(c.ct, 0, c.aad, c.aad_len, c.iv, c.key);

    // In place failure: the buffer is zeroed too.
    memcpy(bad, c.ct, ct_len);
    bad[ct_len - 1] ^= 1;
    size_t n = 5;
    GT_ASSERT_CODE(gt_aead_open(bad, sizeof bad, &n, bad, ct_len, c.aad, c.aad_len, c.iv, c.key),
                   GT_E_AUTH);
    assert_int_equal(n, 0);
    assert_true(all_zero(bad, c.pt_len));

    // Capacity errors are not authentication failures, and still leave nothing behind.
    uint8_t small[10];
    memset(small, 0x11, sizeof small);
    GT_ASSERT_CODE(gt_aead_open(small, sizeof small, &n, c.ct, ct_len, c.aad, c.aad_len, c.iv,
                                c.key),
                   GT_E_LIMIT);
    assert_true(all_zero(small, sizeof small));
    GT_ASSERT_CODE(gt_aead_seal(bad, c.pt_len + 15, &n, c.pt, c.pt_len, NULL, 0, c.iv, c.key),
                   GT_E_LIMIT);
    assert_int_equal(n, 0);
}

// Streaming gives the same bytes as one-shot for every split, in place or not.
static void gcm_stream_matches_one_shot(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof gcm_rows / sizeof gcm_rows[0]; i++) {
        gcm_case c = load_row(&gcm_rows[i]);
        for (size_t split = 0; split <= c.pt_len; split += 7) {
            gt_aead_stream *s = NULL;
            uint8_t buf[64], tag[16];
            memcpy(buf, c.pt, c.pt_len);
            GT_ASSERT_OK(gt_aead_stream_new(&s, true, c.aad, c.aad_len, c.iv, c.key));
            GT_ASSERT_OK(gt_aead_stream_update(s, buf, buf, split));
            GT_ASSERT_OK(gt_aead_stream_update(s, buf + split, buf + split, c.pt_len - split));
            GT_ASSERT_OK(gt_aead_stream_final(s, tag));
            GT_ASSERT_CODE(gt_aead_stream_update(s, buf, buf, 1), GT_E_STATE);
            GT_ASSERT_CODE(gt_aead_stream_final(s, tag), GT_E_STATE);
            gt_aead_stream_free(s);
            if (c.pt_len > 0) {
                assert_memory_equal(buf, c.ct, c.pt_len);
            }
            assert_memory_equal(tag, c.ct + c.pt_len, 16);

            uint8_t out[64];
            GT_ASSERT_OK(gt_aead_stream_new(&s, false, c.aad, c.aad_len, c.iv, c.key));
            GT_ASSERT_OK(gt_aead_stream_update(s, out, c.ct, split));
            GT_ASSERT_OK(gt_aead_stream_update(s, out + split, c.ct + split, c.pt_len - split));
            GT_ASSERT_OK(gt_aead_stream_final(s, tag));
            gt_aead_stream_free(s);
            if (c.pt_len > 0) {
                assert_memory_equal(out, c.pt, c.pt_len);
            }
        }
        // A wrong tag or AAD fails at final.
        gt_aead_stream *s = NULL;
        uint8_t out[64], tag[16];
        memcpy(tag, c.ct + c.pt_len, 16);
        tag[3] ^= 2;
        GT_ASSERT_OK(gt_aead_stream_new(&s, false, c.aad, c.aad_len, c.iv, c.key));
        GT_ASSERT_OK(gt_aead_stream_update(s, out, c.ct, c.pt_len));
        GT_ASSERT_CODE(gt_aead_stream_final(s, tag), GT_E_AUTH);
        gt_aead_stream_free(s);
        tag[3] ^= 2;
        GT_ASSERT_OK(gt_aead_stream_new(&s, false, (const uint8_t *)"x", 1, c.iv, c.key));
        GT_ASSERT_OK(gt_aead_stream_update(s, out, c.ct, c.pt_len));
        GT_ASSERT_CODE(gt_aead_stream_final(s, tag), GT_E_AUTH);
        gt_aead_stream_free(s);
    }
    gt_aead_stream_free(NULL);
}

// A larger random message: one-shot and streaming in uneven pieces agree both ways.
static void gcm_large_roundtrip(void **state)
{
    (void)state;
    const size_t n = (3u << 20) + 17;
    uint8_t *pt = malloc(n), *ct = malloc(n + 16), *st = malloc(n), *back = malloc(n);
    assert_true(pt && ct && st && back);
    uint8_t key[32], iv[12], aad[33], tag[16];
    GT_ASSERT_OK(gt_random_bytes(pt, n));
    GT_ASSERT_OK(gt_random_bytes(key, sizeof key));
    GT_ASSERT_OK(gt_random_bytes(iv, sizeof iv));
    GT_ASSERT_OK(gt_random_bytes(aad, sizeof aad));
    size_t ct_len = 0, back_len = 0;
    GT_ASSERT_OK(gt_aead_seal(ct, n + 16, &ct_len, pt, n, aad, sizeof aad, iv, key));
    gt_aead_stream *s = NULL;
    GT_ASSERT_OK(gt_aead_stream_new(&s, true, aad, sizeof aad, iv, key));
    for (size_t off = 0, step = 1; off < n; off += step, step = step * 3 + 1) {
        size_t len = step < n - off ? step : n - off;
        GT_ASSERT_OK(gt_aead_stream_update(s, st + off, pt + off, len));
    }
    GT_ASSERT_OK(gt_aead_stream_final(s, tag));
    gt_aead_stream_free(s);
    assert_memory_equal(st, ct, n);
    assert_memory_equal(tag, ct + n, 16);
    GT_ASSERT_OK(gt_aead_open(back, n, &back_len, ct, ct_len, aad, sizeof aad, iv, key));
    assert_int_equal(back_len, n);
    assert_memory_equal(back, pt, n);
    gt_secure_zero(key, sizeof key);
    free(pt);
    free(ct);
    free(st);
    free(back);
}

// gt_aead_keyed (one key schedule, many messages): the published known answers, message after
// message on one object; tampering refused with a zeroed output, and the object still opens
// the next good message (a failure leaves no state behind); a direction it was not made for
// refused.
static void gcm_keyed_matches_one_shot(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof gcm_rows / sizeof gcm_rows[0]; i++) {
        gcm_case c = load_row(&gcm_rows[i]);
        gt_aead_keyed *enc = NULL, *dec = NULL;
        GT_ASSERT_OK(gt_aead_keyed_new(&enc, true, c.key));
        GT_ASSERT_OK(gt_aead_keyed_new(&dec, false, c.key));
        for (int round = 0; round < 3; round++) {  // the same answer each time: no state kept
            uint8_t ct[80], pt[80];
            size_t ct_len = 0, pt_len = 0;
            GT_ASSERT_OK(gt_aead_keyed_seal(enc, ct, sizeof ct, &ct_len, c.pt, c.pt_len, c.aad,
                                            c.aad_len, c.iv));
            assert_int_equal(ct_len, c.pt_len + 16);
            assert_memory_equal(ct, c.ct, ct_len);
            uint8_t bad[80];
            memcpy(bad, ct, ct_len);
            bad[round] ^= 0x01;
            pt_len = 7;
            GT_ASSERT_CODE(gt_aead_keyed_open(dec, pt, sizeof pt, &pt_len, bad, ct_len, c.aad,
                                              c.aad_len, c.iv), GT_E_AUTH);
            assert_int_equal(pt_len, 0);
            assert_true(all_zero(pt, c.pt_len));
            GT_ASSERT_OK(gt_aead_keyed_open(dec, pt, sizeof pt, &pt_len, ct, ct_len, c.aad,
                                            c.aad_len, c.iv));
            assert_int_equal(pt_len, c.pt_len);
            assert_memory_equal(pt, c.pt, c.pt_len);
            GT_ASSERT_CODE(gt_aead_keyed_seal(dec, ct, sizeof ct, &ct_len, c.pt, c.pt_len, NULL,
                                              0, c.iv), GT_E_ARG);
            GT_ASSERT_CODE(gt_aead_keyed_open(enc, pt, sizeof pt, &pt_len, c.ct, ct_len, NULL, 0,
                                              c.iv), GT_E_ARG);
        }
        gt_aead_keyed_free(enc);
        gt_aead_keyed_free(dec);
    }
}

// The detached calls (tag apart, in place): the published ciphertext and tag, in place in one
// buffer; a flipped text byte or tag byte refused with the buffer zeroed; the good one opens.
static void gcm_keyed_detached_in_place(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof gcm_rows / sizeof gcm_rows[0]; i++) {
        gcm_case c = load_row(&gcm_rows[i]);
        gt_aead_keyed *enc = NULL, *dec = NULL;
        GT_ASSERT_OK(gt_aead_keyed_new(&enc, true, c.key));
        GT_ASSERT_OK(gt_aead_keyed_new(&dec, false, c.key));
        for (int round = 0; round < 2; round++) {  // round 1: a flipped tag byte
            uint8_t buf[80], tag[16];
            memcpy(buf, c.pt, c.pt_len);
            GT_ASSERT_OK(gt_aead_keyed_seal_detached(enc, buf, buf, c.pt_len, c.aad, c.aad_len,
                                                     c.iv, tag));
            assert_memory_equal(buf, c.ct, c.pt_len);
            assert_memory_equal(tag, c.ct + c.pt_len, 16);
            uint8_t bad[80], badtag[16];
            memcpy(bad, buf, c.pt_len);
            memcpy(badtag, tag, 16);
            if (round == 0 && c.pt_len > 0) {
                bad[c.pt_len - 1] ^= 0x80;
            } else {
                badtag[15] ^= 0x01;
            }
            GT_ASSERT_CODE(gt_aead_keyed_open_detached(dec, bad, bad, c.pt_len, c.aad, c.aad_len,
                                                       c.iv, badtag), GT_E_AUTH);
            assert_true(all_zero(bad, c.pt_len));
            GT_ASSERT_OK(gt_aead_keyed_open_detached(dec, buf, buf, c.pt_len, c.aad, c.aad_len,
                                                     c.iv, tag));
            assert_memory_equal(buf, c.pt, c.pt_len);
        }
        uint8_t tag[16], b[1] = {0};
        GT_ASSERT_CODE(gt_aead_keyed_seal_detached(dec, b, b, 0, NULL, 0, c.iv, tag), GT_E_ARG);
        GT_ASSERT_CODE(gt_aead_keyed_open_detached(enc, b, b, 0, NULL, 0, c.iv, tag), GT_E_ARG);
        gt_aead_keyed_free(enc);
        gt_aead_keyed_free(dec);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gcm_known_answers_one_shot),
        cmocka_unit_test(gcm_tampering_is_refused),
        cmocka_unit_test(gcm_stream_matches_one_shot),
        cmocka_unit_test(gcm_keyed_matches_one_shot),
        cmocka_unit_test(gcm_keyed_detached_in_place),
        cmocka_unit_test(gcm_large_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
