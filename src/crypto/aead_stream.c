// AES-256-GCM streaming. Decryption releases plaintext before the tag is checked (OpenSSL's
// streaming GCM): callers stage it and release it only after gt_aead_stream_final is OK.
#include "internal.h"

#include <stdlib.h>

#include <openssl/err.h>

struct gt_aead_stream {
    EVP_CIPHER_CTX *ctx;
    bool encrypt;
    bool done;  // final called (or failed): no further update
};

gt_err gt_aead_stream_new(gt_aead_stream **s, bool encrypt, const uint8_t *aad, size_t aad_len,
                          const uint8_t iv[GT_AEAD_IV_BYTES],
                          const uint8_t key[GT_AEAD_KEY_BYTES])
{
    *s = NULL;
    gt_aead_stream *st = calloc(1, sizeof *st);
    GT_ENSURE(st != NULL, GT_E_NOMEM, "aead stream: out of memory");
    st->encrypt = encrypt;
    st->ctx = EVP_CIPHER_CTX_new();
    if (st->ctx == NULL ||
        EVP_CipherInit_ex(st->ctx, EVP_aes_256_gcm(), NULL, key, iv, encrypt ? 1 : 0) != 1 ||
        gt_crypto_gcm_update(st->ctx, NULL, aad, aad_len) != 1) {
        gt_err err = gt_crypto_openssl_err("aead stream: init");
        gt_aead_stream_free(st);
        return err;
    }
    *s = st;
    return GT_OK;
}

gt_err gt_aead_stream_update(gt_aead_stream *s, uint8_t *out, const uint8_t *in, size_t len)
{
    GT_ENSURE(!s->done, GT_E_STATE, "aead stream: update after final");
    if (len == 0) {
        return GT_OK;
    }
    if (gt_crypto_gcm_update(s->ctx, out, in, len) != 1) {
        s->done = true;
        gt_secure_zero(out, len);
        return gt_crypto_openssl_err("aead stream: update");
    }
    return GT_OK;
}

gt_err gt_aead_stream_final(gt_aead_stream *s, uint8_t tag[GT_AEAD_TAG_BYTES])
{
    GT_ENSURE(!s->done, GT_E_STATE, "aead stream: final called twice");
    s->done = true;
    uint8_t none[16];
    int outl = 0;
    if (s->encrypt) {
        if (EVP_EncryptFinal_ex(s->ctx, none, &outl) != 1 || outl != 0 ||
            EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_GCM_GET_TAG, GT_AEAD_TAG_BYTES, tag) != 1) {
            return gt_crypto_openssl_err("aead stream: final");
        }
        return GT_OK;
    }
    if (EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_GCM_SET_TAG, GT_AEAD_TAG_BYTES, tag) != 1 ||
        EVP_DecryptFinal_ex(s->ctx, none, &outl) != 1 || outl != 0) {
        ERR_clear_error();
        return gt_errf(GT_E_AUTH, "aead stream: authentication failed");
    }
    return GT_OK;
}

void gt_aead_stream_free(gt_aead_stream *s)
{
    if (s == NULL) {
        return;
    }
    EVP_CIPHER_CTX_free(s->ctx);  // OpenSSL wipes the key schedule and GCM state
    free(s);
}
