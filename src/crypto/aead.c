// AES-256-GCM one-shot seal/open (one call of aead_keyed.c on a stack key schedule) and the
// int-sized EVP update loop. The tag is appended to the ciphertext; open zeroes its output on
// any failure so no unauthenticated plaintext is left behind.
#include "internal.h"

#include <string.h>

int gt_crypto_gcm_update(EVP_CIPHER_CTX *ctx, uint8_t *out, const uint8_t *in, size_t n)
{
    while (n > 0) {
        size_t step = n < GT_CRYPTO_MAX_STEP ? n : GT_CRYPTO_MAX_STEP;
        int outl = 0;
        if (EVP_CipherUpdate(ctx, out, &outl, in, (int)step) != 1) {
            return 0;
        }
        // GCM is a stream mode: every input byte comes out at once.
        if (out != NULL && (size_t)outl != step) {
            return 0;
        }
        in += step;
        if (out != NULL) {
            out += step;
        }
        n -= step;
    }
    return 1;
}

// One message: a key schedule on the stack for one call of the keyed functions.
gt_err gt_aead_seal(uint8_t *ct, size_t ct_cap, size_t *ct_len, const uint8_t *pt,
                    size_t pt_len, const uint8_t *aad, size_t aad_len,
                    const uint8_t iv[GT_AEAD_IV_BYTES], const uint8_t key[GT_AEAD_KEY_BYTES])
{
    *ct_len = 0;
    struct gt_aead_keyed k;
    GT_TRY(gt_crypto_aead_keyed_init(&k, true, key));
    gt_err err = gt_aead_keyed_seal(&k, ct, ct_cap, ct_len, pt, pt_len, aad, aad_len, iv);
    EVP_CIPHER_CTX_free(k.ctx);  // wipes the key schedule
    return err;
}

gt_err gt_aead_open(uint8_t *pt, size_t pt_cap, size_t *pt_len, const uint8_t *ct,
                    size_t ct_len, const uint8_t *aad, size_t aad_len,
                    const uint8_t iv[GT_AEAD_IV_BYTES], const uint8_t key[GT_AEAD_KEY_BYTES])
{
    *pt_len = 0;
    struct gt_aead_keyed k;
    gt_err err = gt_crypto_aead_keyed_init(&k, false, key);
    if (!gt_is_ok(err)) {
        gt_secure_zero(pt, pt_cap);  // as for any failure: nothing unauthenticated stays
        return err;
    }
    err = gt_aead_keyed_open(&k, pt, pt_cap, pt_len, ct, ct_len, aad, aad_len, iv);
    EVP_CIPHER_CTX_free(k.ctx);
    return err;
}
