// The float chunk the trip tests hand over (test_ipc_trip, test_cuda_ipc, test_cuda_trip): a
// known pattern, its sum of squares (what the trainer may compute, never read back), and the
// chunk sealed under a fresh key as a holder keeps it. Header-only.
#ifndef GT_TESTLIB_FLOAT_CHUNK_H
#define GT_TESTLIB_FLOAT_CHUNK_H

#include <gputravel/crypto.h>

#include <stdbool.h>
#include <stdlib.h>

static inline float gt_test_pattern(size_t i)
{
    return (float)((i * 37u) % 1000u) * 0.001f - 0.5f;
}

static inline double gt_test_pattern_sumsq(size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        s += (double)gt_test_pattern(i) * gt_test_pattern(i);
    }
    return s;
}

// n floats of the pattern sealed with aad under a fresh key and IV: *ct (ciphertext || tag,
// malloc'd, *ct_len bytes). The plaintext staging is wiped. false on any failure.
static inline bool gt_test_seal_pattern(size_t n, const uint8_t *aad, size_t aad_len,
                                        uint8_t key[GT_AEAD_KEY_BYTES],
                                        uint8_t iv[GT_AEAD_IV_BYTES], uint8_t **ct,
                                        size_t *ct_len)
{
    const size_t bytes = n * 4;
    float *plain = malloc(bytes);
    *ct = malloc(bytes + GT_AEAD_TAG_BYTES);
    bool ok = plain != NULL && *ct != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        plain[i] = gt_test_pattern(i);
    }
    ok = ok && gt_is_ok(gt_random_bytes(key, GT_AEAD_KEY_BYTES)) &&
         gt_is_ok(gt_random_bytes(iv, GT_AEAD_IV_BYTES)) &&
         gt_is_ok(gt_aead_seal(*ct, bytes + GT_AEAD_TAG_BYTES, ct_len, (uint8_t *)plain, bytes,
                               aad, aad_len, iv, key));
    if (plain != NULL) {
        gt_secure_zero(plain, bytes);
    }
    free(plain);
    return ok;
}

#endif
