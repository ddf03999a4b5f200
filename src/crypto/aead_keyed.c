// AES-256-GCM with the key schedule kept between messages (crypto.h gt_aead_keyed): the context
// is initialised with the key once; each message re-initialises it with only its IV, which
// OpenSSL does without redoing the key expansion. Same outputs and failure rules as aead.c.
#include "internal.h"

#include <openssl/err.h>

#include <stdlib.h>
#include <string.h>

gt_err gt_crypto_aead_keyed_init(struct gt_aead_keyed *k, bool encrypt,
                                 const uint8_t key[GT_AEAD_KEY_BYTES])
{
    k->encrypt = encrypt;
    k->ctx = EVP_CIPHER_CTX_new();
    if (k->ctx == NULL ||
        EVP_CipherInit_ex(k->ctx, EVP_aes_256_gcm(), NULL, key, NULL, encrypt ? 1 : 0) != 1) {
        EVP_CIPHER_CTX_free(k->ctx);
        k->ctx = NULL;
        return gt_crypto_openssl_err("aead: keying");
    }
    return GT_OK;
}

gt_err gt_aead_keyed_new(gt_aead_keyed **out, bool encrypt, const uint8_t key[GT_AEAD_KEY_BYTES])
{
    *out = NULL;
    gt_aead_keyed *k = calloc(1, sizeof *k);
    GT_ENSURE(k != NULL, GT_E_NOMEM, "aead: out of memory");
    gt_err err = gt_crypto_aead_keyed_init(k, encrypt, key);
    if (!gt_is_ok(err)) {
        free(k);
        return err;
    }
    *out = k;
    return GT_OK;
}

gt_err gt_aead_keyed_seal(gt_aead_keyed *k, uint8_t *ct, size_t ct_cap, size_t *ct_len,
                          const uint8_t *pt, size_t pt_len, const uint8_t *aad, size_t aad_len,
                          const uint8_t iv[GT_AEAD_IV_BYTES])
{
    *ct_len = 0;
    GT_ENSURE(k->encrypt, GT_E_ARG, "aead: a decrypting key cannot seal");
    GT_ENSURE(pt_len <= SIZE_MAX - GT_AEAD_TAG_BYTES && ct_cap >= pt_len + GT_AEAD_TAG_BYTES,
              GT_E_LIMIT, "aead: %zu-byte output cannot hold %zu bytes and a tag", ct_cap,
              pt_len);
    int outl = 0;
    if (EVP_CipherInit_ex(k->ctx, NULL, NULL, NULL, iv, 1) != 1 ||
        gt_crypto_gcm_update(k->ctx, NULL, aad, aad_len) != 1 ||
        gt_crypto_gcm_update(k->ctx, ct, pt, pt_len) != 1 ||
        EVP_EncryptFinal_ex(k->ctx, ct + pt_len, &outl) != 1 || outl != 0 ||
        EVP_CIPHER_CTX_ctrl(k->ctx, EVP_CTRL_GCM_GET_TAG, GT_AEAD_TAG_BYTES, ct + pt_len) != 1) {
        gt_secure_zero(ct, pt_len + GT_AEAD_TAG_BYTES);
        return gt_crypto_openssl_err("aead: seal");
    }
    *ct_len = pt_len + GT_AEAD_TAG_BYTES;
    return GT_OK;
}

gt_err gt_aead_keyed_open(gt_aead_keyed *k, uint8_t *pt, size_t pt_cap, size_t *pt_len,
                          const uint8_t *ct, size_t ct_len, const uint8_t *aad, size_t aad_len,
                          const uint8_t iv[GT_AEAD_IV_BYTES])
{
    *pt_len = 0;
    GT_ENSURE(!k->encrypt, GT_E_ARG, "aead: an encrypting key cannot open");
    if (ct_len < GT_AEAD_TAG_BYTES) {
        gt_secure_zero(pt, pt_cap);
        return gt_errf(GT_E_AUTH, "aead: authentication failed");
    }
    size_t n = ct_len - GT_AEAD_TAG_BYTES;
    if (pt_cap < n) {
        gt_secure_zero(pt, pt_cap);
        return gt_errf(GT_E_LIMIT, "aead: %zu-byte output cannot hold %zu bytes", pt_cap, n);
    }
    uint8_t tag[GT_AEAD_TAG_BYTES];
    memcpy(tag, ct + n, sizeof tag);  // first: in place, the tag must not depend on surviving
    int outl = 0;
    if (EVP_CipherInit_ex(k->ctx, NULL, NULL, NULL, iv, 0) != 1 ||
        gt_crypto_gcm_update(k->ctx, NULL, aad, aad_len) != 1 ||
        gt_crypto_gcm_update(k->ctx, pt, ct, n) != 1 ||
        EVP_CIPHER_CTX_ctrl(k->ctx, EVP_CTRL_GCM_SET_TAG, GT_AEAD_TAG_BYTES, tag) != 1 ||
        EVP_DecryptFinal_ex(k->ctx, pt + n, &outl) != 1 || outl != 0) {
        ERR_clear_error();
        gt_secure_zero(pt, n);  // whatever was decrypted is unauthenticated
        return gt_errf(GT_E_AUTH, "aead: authentication failed");
    }
    *pt_len = n;
    return GT_OK;
}

gt_err gt_aead_keyed_seal_detached(gt_aead_keyed *k, uint8_t *out, const uint8_t *in, size_t len,
                                   const uint8_t *aad, size_t aad_len,
                                   const uint8_t iv[GT_AEAD_IV_BYTES],
                                   uint8_t tag[GT_AEAD_TAG_BYTES])
{
    GT_ENSURE(k->encrypt, GT_E_ARG, "aead: a decrypting key cannot seal");
    int outl = 0;
    uint8_t end[16];
    if (EVP_CipherInit_ex(k->ctx, NULL, NULL, NULL, iv, 1) != 1 ||
        gt_crypto_gcm_update(k->ctx, NULL, aad, aad_len) != 1 ||
        gt_crypto_gcm_update(k->ctx, out, in, len) != 1 ||
        EVP_EncryptFinal_ex(k->ctx, end, &outl) != 1 || outl != 0 ||
        EVP_CIPHER_CTX_ctrl(k->ctx, EVP_CTRL_GCM_GET_TAG, GT_AEAD_TAG_BYTES, tag) != 1) {
        gt_secure_zero(out, len);
        gt_secure_zero(tag, GT_AEAD_TAG_BYTES);
        return gt_crypto_openssl_err("aead: seal");
    }
    return GT_OK;
}

gt_err gt_aead_keyed_open_detached(gt_aead_keyed *k, uint8_t *out, const uint8_t *in, size_t len,
                                   const uint8_t *aad, size_t aad_len,
                                   const uint8_t iv[GT_AEAD_IV_BYTES],
                                   const uint8_t tag[GT_AEAD_TAG_BYTES])
{
    GT_ENSURE(!k->encrypt, GT_E_ARG, "aead: an encrypting key cannot open");
    uint8_t t[GT_AEAD_TAG_BYTES], end[16];
    memcpy(t, tag, sizeof t);  // OpenSSL takes a non-const pointer
    int outl = 0;
    if (EVP_CipherInit_ex(k->ctx, NULL, NULL, NULL, iv, 0) != 1 ||
        gt_crypto_gcm_update(k->ctx, NULL, aad, aad_len) != 1 ||
        gt_crypto_gcm_update(k->ctx, out, in, len) != 1 ||
        EVP_CIPHER_CTX_ctrl(k->ctx, EVP_CTRL_GCM_SET_TAG, GT_AEAD_TAG_BYTES, t) != 1 ||
        EVP_DecryptFinal_ex(k->ctx, end, &outl) != 1 || outl != 0) {
        ERR_clear_error();
        gt_secure_zero(out, len);  // whatever was decrypted is unauthenticated
        return gt_errf(GT_E_AUTH, "aead: authentication failed");
    }
    return GT_OK;
}

void gt_aead_keyed_free(gt_aead_keyed *k)
{
    if (k == NULL) {
        return;
    }
    EVP_CIPHER_CTX_free(k->ctx);  // wipes the key schedule
    free(k);
}
