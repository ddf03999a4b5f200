// kernels/: the GPU AES-256-GCM kernel's own code, run on the host (gt_cuda_aes_gcm_host_model),
// against OpenSSL (gt_aead_seal) and FIPS-197. Needs no GPU: it checks the cipher, the GHASH
// chunking and the counter layout that the kernel uses, so that a later GPU run only has to
// confirm the launch plumbing (test_cuda_aes_gcm.c).
#include "testlib.h"

#include <gputravel/crypto.h>

#include <stdlib.h>
#include <string.h>

#include <gputravel/kernels_cuda.h>

// FIPS-197 Appendix A.3: key 603deb10 ... 0914dff4; w[8] and w[59] of the expansion.
static void key_expansion_fips197(void **state)
{
    (void)state;
    static const uint8_t key[32] = {
        0x60, 0x3d, 0xeb, 0x10, 0x15, 0xca, 0x71, 0xbe, 0x2b, 0x73, 0xae, 0xf0, 0x85, 0x7d, 0x77, 0x81,
        0x1f, 0x35, 0x2c, 0x07, 0x3b, 0x61, 0x08, 0xd7, 0x2d, 0x98, 0x10, 0xa3, 0x09, 0x14, 0xdf, 0xf4};
    uint32_t rk[GT_CUDA_AES256_RK_WORDS];
    gt_cuda_aes256_expand_key(rk, key);
    assert_int_equal(rk[0], 0x603deb10u);
    assert_int_equal(rk[8], 0x9ba35411u);
    assert_int_equal(rk[12], 0xa8b09c1au);
    assert_int_equal(rk[56], 0xfe4890d1u);
    assert_int_equal(rk[59], 0x706c631eu);
}

// Random keys, IVs, AAD and lengths around block and run boundaries: the model's plaintext and
// tag equal OpenSSL's, and a flipped ciphertext bit changes the tag.
static void model_matches_openssl(void **state)
{
    (void)state;
    static const size_t lens[] = {0, 1, 15, 16, 17, 31, 32, 33, 47, 48, 49, 1000, 4096, 65537};
    static const size_t aads[] = {0, 1, 13, 16, 17, 40};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        for (size_t ai = 0; ai < sizeof aads / sizeof aads[0]; ai++) {
            size_t len = lens[li], alen = aads[ai];
            uint8_t key[32], iv[12], aad[40], tag[16];
            uint8_t *pt = malloc(len + 1), *ct = malloc(len + 16), *out = malloc(len + 1);
            GT_ASSERT_OK(gt_random_bytes(key, sizeof key));
            GT_ASSERT_OK(gt_random_bytes(iv, sizeof iv));
            GT_ASSERT_OK(gt_random_bytes(aad, sizeof aad));
            GT_ASSERT_OK(gt_random_bytes(pt, len + 1));
            size_t ct_len = 0;
            GT_ASSERT_OK(gt_aead_seal(ct, len + 16, &ct_len, pt, len, aad, alen, iv, key));
            assert_int_equal(ct_len, len + 16);
            gt_cuda_aes_gcm_host_model(out, tag, ct, len, aad, alen, iv, key);
            assert_memory_equal(tag, ct + len, 16);
            if (len > 0) {
                assert_memory_equal(out, pt, len);
                ct[len / 2] ^= 0x01;
                gt_cuda_aes_gcm_host_model(out, tag, ct, len, aad, alen, iv, key);
                assert_memory_not_equal(tag, ct + len, 16);
            }
            free(pt);
            free(ct);
            free(out);
        }
    }
}

// The cuda peer's seal (cuda_backend.c gpu_seal) runs the same kernels the other way: the CTR
// pass over the plaintext makes the ciphertext, then the tag pass over that ciphertext. Modelled
// here as two host-model calls: the result is OpenSSL's seal byte for byte (a peer chunk's
// wire bytes: the same on cpu and cuda for the same key, IV, AAD and floats). Lengths are whole
// floats, with a peer header's AAD (64-byte header, label count, 0..2 labels).
static void model_seal_matches_openssl(void **state)
{
    (void)state;
    static const size_t lens[] = {4, 16, 20, 64, 256, 4100, 65540};
    static const size_t aads[] = {68, 84, 100};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        for (size_t ai = 0; ai < sizeof aads / sizeof aads[0]; ai++) {
            size_t len = lens[li], alen = aads[ai];
            uint8_t key[32], iv[12], aad[100], junk[16], tag[16];
            uint8_t *pt = malloc(len), *want = malloc(len + 16), *ct = malloc(len);
            uint8_t *back = malloc(len);
            GT_ASSERT_OK(gt_random_bytes(key, sizeof key));
            GT_ASSERT_OK(gt_random_bytes(iv, sizeof iv));
            GT_ASSERT_OK(gt_random_bytes(aad, sizeof aad));
            GT_ASSERT_OK(gt_random_bytes(pt, len));
            size_t want_len = 0;
            GT_ASSERT_OK(gt_aead_seal(want, len + 16, &want_len, pt, len, aad, alen, iv, key));
            gt_cuda_aes_gcm_host_model(ct, junk, pt, len, aad, alen, iv, key);   // CTR: encrypt
            gt_cuda_aes_gcm_host_model(back, tag, ct, len, aad, alen, iv, key);  // tag over ct
            assert_memory_equal(ct, want, len);
            assert_memory_equal(tag, want + len, 16);
            assert_memory_equal(back, pt, len);
            free(pt);
            free(want);
            free(ct);
            free(back);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(key_expansion_fips197),
        cmocka_unit_test(model_matches_openssl),
        cmocka_unit_test(model_seal_matches_openssl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
