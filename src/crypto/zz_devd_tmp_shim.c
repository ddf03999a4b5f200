// TEMPORARY (branch devd only): the AEAD / HKDF / X25519 part of crypto.h, until branch `crypto`
// lands its own implementation; removed at that merge. Thin OpenSSL 3 EVP calls, nothing more.
#include "internal.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <stdlib.h>
#include <string.h>

gt_err gt_hkdf(gt_hash_alg alg, uint8_t *out, size_t out_len, const uint8_t *ikm, size_t ikm_len,
               const uint8_t *salt, size_t salt_len, const uint8_t *info, size_t info_len)
{
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *ctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    EVP_KDF_free(kdf);
    if (ctx == NULL) {
        return gt_crypto_openssl_err("hkdf");
    }
    OSSL_PARAM p[5];
    int n = 0;
    p[n++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
                                              (char *)gt_crypto_md_name(alg), 0);
    p[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ikm_len);
    p[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, salt_len);
    p[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_len);
    p[n] = OSSL_PARAM_construct_end();
    int ok = EVP_KDF_derive(ctx, out, out_len, p);
    EVP_KDF_CTX_free(ctx);
    return ok == 1 ? GT_OK : gt_crypto_openssl_err("hkdf");
}

gt_err gt_aead_seal(uint8_t *ct, size_t ct_cap, size_t *ct_len, const uint8_t *pt, size_t pt_len,
                    const uint8_t *aad, size_t aad_len, const uint8_t iv[GT_AEAD_IV_BYTES],
                    const uint8_t key[GT_AEAD_KEY_BYTES])
{
    *ct_len = 0;
    GT_ENSURE(pt_len <= INT32_MAX && ct_cap >= pt_len + GT_AEAD_TAG_BYTES, GT_E_ARG,
              "aead seal: output too small");
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int len = 0, ok = c != NULL;
    ok = ok && EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, iv) == 1;
    ok = ok && (aad_len == 0 || EVP_EncryptUpdate(c, NULL, &len, aad, (int)aad_len) == 1);
    ok = ok && EVP_EncryptUpdate(c, ct, &len, pt, (int)pt_len) == 1;
    ok = ok && EVP_EncryptFinal_ex(c, ct + pt_len, &len) == 1;
    ok = ok && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, GT_AEAD_TAG_BYTES, ct + pt_len) == 1;
    EVP_CIPHER_CTX_free(c);
    if (!ok) {
        return gt_crypto_openssl_err("aead seal");
    }
    *ct_len = pt_len + GT_AEAD_TAG_BYTES;
    return GT_OK;
}

gt_err gt_aead_open(uint8_t *pt, size_t pt_cap, size_t *pt_len, const uint8_t *ct, size_t ct_len,
                    const uint8_t *aad, size_t aad_len, const uint8_t iv[GT_AEAD_IV_BYTES],
                    const uint8_t key[GT_AEAD_KEY_BYTES])
{
    *pt_len = 0;
    if (ct_len < GT_AEAD_TAG_BYTES || ct_len - GT_AEAD_TAG_BYTES > pt_cap || ct_len > INT32_MAX) {
        return gt_errf(GT_E_AUTH, "authentication failed");
    }
    size_t n = ct_len - GT_AEAD_TAG_BYTES;
    uint8_t tag[GT_AEAD_TAG_BYTES];
    memcpy(tag, ct + n, sizeof tag);
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int len = 0, ok = c != NULL;
    ok = ok && EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, iv) == 1;
    ok = ok && (aad_len == 0 || EVP_DecryptUpdate(c, NULL, &len, aad, (int)aad_len) == 1);
    ok = ok && EVP_DecryptUpdate(c, pt, &len, ct, (int)n) == 1;
    ok = ok && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, GT_AEAD_TAG_BYTES, tag) == 1;
    ok = ok && EVP_DecryptFinal_ex(c, pt + n, &len) == 1;
    EVP_CIPHER_CTX_free(c);
    if (!ok) {
        gt_secure_zero(pt, n);
        ERR_clear_error();
        return gt_errf(GT_E_AUTH, "authentication failed");
    }
    *pt_len = n;
    return GT_OK;
}

struct gt_aead_stream {
    EVP_CIPHER_CTX *c;
    bool encrypt;
};

gt_err gt_aead_stream_new(gt_aead_stream **s, bool encrypt, const uint8_t *aad, size_t aad_len,
                          const uint8_t iv[GT_AEAD_IV_BYTES], const uint8_t key[GT_AEAD_KEY_BYTES])
{
    *s = NULL;
    gt_aead_stream *st = calloc(1, sizeof *st);
    GT_ENSURE(st != NULL, GT_E_NOMEM, "aead stream: out of memory");
    st->encrypt = encrypt;
    st->c = EVP_CIPHER_CTX_new();
    int len = 0;
    int ok = st->c != NULL &&
             EVP_CipherInit_ex(st->c, EVP_aes_256_gcm(), NULL, key, iv, encrypt ? 1 : 0) == 1 &&
             (aad_len == 0 || EVP_CipherUpdate(st->c, NULL, &len, aad, (int)aad_len) == 1);
    if (!ok) {
        gt_aead_stream_free(st);
        return gt_crypto_openssl_err("aead stream");
    }
    *s = st;
    return GT_OK;
}

gt_err gt_aead_stream_update(gt_aead_stream *s, uint8_t *out, const uint8_t *in, size_t len)
{
    GT_ENSURE(len <= INT32_MAX, GT_E_ARG, "aead stream: piece too large");
    int n = 0;
    if (EVP_CipherUpdate(s->c, out, &n, in, (int)len) != 1) {
        return gt_crypto_openssl_err("aead stream");
    }
    return GT_OK;
}

gt_err gt_aead_stream_final(gt_aead_stream *s, uint8_t tag[GT_AEAD_TAG_BYTES])
{
    int n = 0;
    uint8_t dummy[16];
    if (s->encrypt) {
        if (EVP_EncryptFinal_ex(s->c, dummy, &n) != 1 ||
            EVP_CIPHER_CTX_ctrl(s->c, EVP_CTRL_GCM_GET_TAG, GT_AEAD_TAG_BYTES, tag) != 1) {
            return gt_crypto_openssl_err("aead stream");
        }
        return GT_OK;
    }
    if (EVP_CIPHER_CTX_ctrl(s->c, EVP_CTRL_GCM_SET_TAG, GT_AEAD_TAG_BYTES, tag) != 1 ||
        EVP_DecryptFinal_ex(s->c, dummy, &n) != 1) {
        ERR_clear_error();
        return gt_errf(GT_E_AUTH, "authentication failed");
    }
    return GT_OK;
}

void gt_aead_stream_free(gt_aead_stream *s)
{
    if (s == NULL) {
        return;
    }
    EVP_CIPHER_CTX_free(s->c);
    free(s);
}

gt_err gt_x25519_keypair(uint8_t pub[GT_X25519_BYTES], uint8_t sec[GT_X25519_BYTES])
{
    GT_TRY(gt_random_bytes(sec, GT_X25519_BYTES));
    return gt_x25519_public(pub, sec);
}

gt_err gt_x25519_public(uint8_t pub[GT_X25519_BYTES], const uint8_t sec[GT_X25519_BYTES])
{
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, sec, GT_X25519_BYTES);
    size_t len = GT_X25519_BYTES;
    int ok = k != NULL && EVP_PKEY_get_raw_public_key(k, pub, &len) == 1;
    EVP_PKEY_free(k);
    return ok ? GT_OK : gt_crypto_openssl_err("x25519");
}

gt_err gt_x25519_shared(uint8_t shared[GT_X25519_BYTES], const uint8_t peer_pub[GT_X25519_BYTES],
                        const uint8_t sec[GT_X25519_BYTES])
{
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, sec, GT_X25519_BYTES);
    EVP_PKEY *p = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, peer_pub, GT_X25519_BYTES);
    EVP_PKEY_CTX *c = k ? EVP_PKEY_CTX_new(k, NULL) : NULL;
    size_t len = GT_X25519_BYTES;
    int ok = c != NULL && p != NULL && EVP_PKEY_derive_init(c) == 1 &&
             EVP_PKEY_derive_set_peer(c, p) == 1 && EVP_PKEY_derive(c, shared, &len) == 1;
    EVP_PKEY_CTX_free(c);
    EVP_PKEY_free(k);
    EVP_PKEY_free(p);
    if (!ok) {
        ERR_clear_error();
        return gt_errf(GT_E_AUTH, "x25519: key agreement failed");
    }
    uint8_t zero[GT_X25519_BYTES] = {0};
    if (gt_ct_equal(shared, zero, sizeof zero)) {
        return gt_errf(GT_E_AUTH, "x25519: all-zero shared secret");
    }
    return GT_OK;
}
