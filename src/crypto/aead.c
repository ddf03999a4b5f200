// AES-256-GCM one-shot seal/open over EVP_CIPHER. The tag is appended to the ciphertext; open
// zeroes its output on any failure so no unauthenticated plaintext is left behind.
#include "internal.h"

#include <openssl/err.h>

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

gt_err gt_aead_seal(uint8_t *ct, size_t ct_cap, size_t *ct_len, const uint8_t *pt,
                    size_t pt_len, const uint8_t *aad, size_t aad_len,
                    const uint8_t iv[GT_AEAD_IV_BYTES], const uint8_t key[GT_AEAD_KEY_BYTES])
{
    *ct_len = 0;
    GT_ENSURE(pt_len <= SIZE_MAX - GT_AEAD_TAG_BYTES && ct_cap >= pt_len + GT_AEAD_TAG_BYTES,
              GT_E_LIMIT, "aead: %zu-byte output cannot hold %zu bytes and a tag", ct_cap,
              pt_len);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    GT_ENSURE(ctx != NULL, GT_E_NOMEM, "aead: out of memory");
    gt_err err = GT_OK;
    int outl = 0;
    // The default GCM IV length is 12 bytes (GT_AEAD_IV_BYTES).
    if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, iv) != 1 ||
        gt_crypto_gcm_update(ctx, NULL, aad, aad_len) != 1 ||
        gt_crypto_gcm_update(ctx, ct, pt, pt_len) != 1 ||
        EVP_EncryptFinal_ex(ctx, ct + pt_len, &outl) != 1 || outl != 0 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, GT_AEAD_TAG_BYTES, ct + pt_len) != 1) {
        err = gt_crypto_openssl_err("aead: seal");
        gt_secure_zero(ct, pt_len + GT_AEAD_TAG_BYTES);
        goto out;
    }
    *ct_len = pt_len + GT_AEAD_TAG_BYTES;
out:
    EVP_CIPHER_CTX_free(ctx);  // wipes the key schedule
    return err;
}

gt_err gt_aead_open(uint8_t *pt, size_t pt_cap, size_t *pt_len, const uint8_t *ct,
                    size_t ct_len, const uint8_t *aad, size_t aad_len,
                    const uint8_t iv[GT_AEAD_IV_BYTES], const uint8_t key[GT_AEAD_KEY_BYTES])
{
    *pt_len = 0;
    if (ct_len < GT_AEAD_TAG_BYTES) {
        gt_secure_zero(pt, pt_cap);
        return gt_errf(GT_E_AUTH, "aead: authentication failed");
    }
    size_t n = ct_len - GT_AEAD_TAG_BYTES;
    if (pt_cap < n) {
        gt_secure_zero(pt, pt_cap);
        return gt_errf(GT_E_LIMIT, "aead: %zu-byte output cannot hold %zu bytes", pt_cap, n);
    }
    // The tag is copied first: in place (pt == ct) decryption must not depend on it surviving.
    uint8_t tag[GT_AEAD_TAG_BYTES];
    memcpy(tag, ct + n, sizeof tag);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    gt_err err = GT_OK;
    int outl = 0;
    if (ctx == NULL || EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, iv) != 1 ||
        gt_crypto_gcm_update(ctx, NULL, aad, aad_len) != 1 ||
        gt_crypto_gcm_update(ctx, pt, ct, n) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, GT_AEAD_TAG_BYTES, tag) != 1 ||
        EVP_DecryptFinal_ex(ctx, pt + n, &outl) != 1 || outl != 0) {
        ERR_clear_error();
        gt_secure_zero(pt, n);  // whatever was decrypted is unauthenticated
        err = gt_errf(GT_E_AUTH, "aead: authentication failed");
        goto out;
    }
    *pt_len = n;
out:
    EVP_CIPHER_CTX_free(ctx);
    return err;
}
