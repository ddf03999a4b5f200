// HMAC (EVP_MAC "HMAC") and HKDF extract-and-expand (EVP_KDF "HKDF", RFC 5869).
#include "internal.h"

#include <openssl/core_names.h>
#include <openssl/kdf.h>

gt_err gt_hmac(gt_hash_alg alg, uint8_t *out, const void *data, size_t len, const uint8_t *key,
               size_t key_len)
{
    const char *md = gt_crypto_md_name(alg);
    GT_ENSURE(md != NULL, GT_E_ARG, "hmac: unknown digest %d", (int)alg);
    static const uint8_t empty[1] = {0};
    gt_err err = GT_OK;
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac != NULL ? EVP_MAC_CTX_new(mac) : NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)md, 0),
        OSSL_PARAM_construct_end(),
    };
    size_t n = 0;
    if (ctx == NULL || EVP_MAC_init(ctx, key_len ? key : empty, key_len, params) != 1 ||
        EVP_MAC_update(ctx, len ? data : empty, len) != 1 ||
        EVP_MAC_final(ctx, out, &n, gt_hash_size(alg)) != 1) {
        err = gt_crypto_openssl_err("hmac");
        goto out;
    }
    GT_ENSURE_GOTO(err, n == gt_hash_size(alg), out, GT_E_CRYPTO, "hmac: %zu-byte tag", n);
out:
    EVP_MAC_CTX_free(ctx);  // wipes the keyed state
    EVP_MAC_free(mac);
    return err;
}

gt_err gt_hkdf(gt_hash_alg alg, uint8_t *out, size_t out_len, const uint8_t *ikm,
               size_t ikm_len, const uint8_t *salt, size_t salt_len, const uint8_t *info,
               size_t info_len)
{
    const char *md = gt_crypto_md_name(alg);
    GT_ENSURE(md != NULL, GT_E_ARG, "hkdf: unknown digest %d", (int)alg);
    GT_ENSURE(out_len > 0 && out_len <= 255 * gt_hash_size(alg), GT_E_LIMIT,
              "hkdf: %zu output bytes (1..%zu)", out_len, 255 * gt_hash_size(alg));
    static uint8_t empty[1] = {0};
    // OSSL_PARAM takes non-const pointers; OpenSSL copies and never writes through them.
    OSSL_PARAM params[5];
    size_t n = 0;
    params[n++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)md, 0);
    params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
                                                    ikm_len ? (void *)ikm : empty, ikm_len);
    // An absent salt is HashLen zero bytes (RFC 5869 §2.2), which OpenSSL applies when unset.
    if (salt_len > 0) {
        params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt,
                                                        salt_len);
    }
    if (info_len > 0) {
        params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info,
                                                        info_len);
    }
    params[n] = OSSL_PARAM_construct_end();
    gt_err err = GT_OK;
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *ctx = kdf != NULL ? EVP_KDF_CTX_new(kdf) : NULL;
    if (ctx == NULL || EVP_KDF_derive(ctx, out, out_len, params) != 1) {
        err = gt_crypto_openssl_err("hkdf");
        gt_secure_zero(out, out_len);
    }
    EVP_KDF_CTX_free(ctx);  // wipes its copies of ikm, salt and info
    EVP_KDF_free(kdf);
    return err;
}
