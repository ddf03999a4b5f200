// Ed25519 (RFC 8032, pure) over EVP_PKEY raw keys; the secret is the 32-byte seed.
#include "internal.h"

#include <openssl/err.h>

gt_err gt_ed25519_public(uint8_t pub[GT_ED25519_PUBLIC_BYTES],
                         const uint8_t sec[GT_ED25519_SECRET_BYTES])
{
    EVP_PKEY *pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, sec,
                                                  GT_ED25519_SECRET_BYTES);
    if (pkey == NULL) {
        return gt_crypto_openssl_err("ed25519: private key");
    }
    gt_err err = GT_OK;
    size_t n = GT_ED25519_PUBLIC_BYTES;
    if (EVP_PKEY_get_raw_public_key(pkey, pub, &n) != 1 || n != GT_ED25519_PUBLIC_BYTES) {
        err = gt_crypto_openssl_err("ed25519: public key");
    }
    EVP_PKEY_free(pkey);  // wipes its copy of the seed
    return err;
}

gt_err gt_ed25519_keypair(uint8_t pub[GT_ED25519_PUBLIC_BYTES],
                          uint8_t sec[GT_ED25519_SECRET_BYTES])
{
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_random_bytes(sec, GT_ED25519_SECRET_BYTES), out);
    GT_TRY_GOTO(err, gt_ed25519_public(pub, sec), out);
out:
    if (err.code != GT_E_NONE) {
        gt_secure_zero(sec, GT_ED25519_SECRET_BYTES);
    }
    return err;
}

gt_err gt_ed25519_sign(uint8_t sig[GT_ED25519_SIG_BYTES], const void *msg, size_t len,
                       const uint8_t sec[GT_ED25519_SECRET_BYTES])
{
    static const uint8_t empty[1] = {0};
    gt_err err = GT_OK;
    EVP_PKEY *pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, sec,
                                                  GT_ED25519_SECRET_BYTES);
    EVP_MD_CTX *mctx = EVP_MD_CTX_new();
    size_t n = GT_ED25519_SIG_BYTES;
    if (pkey == NULL || mctx == NULL || EVP_DigestSignInit(mctx, NULL, NULL, NULL, pkey) != 1 ||
        EVP_DigestSign(mctx, sig, &n, len ? msg : empty, len) != 1 ||
        n != GT_ED25519_SIG_BYTES) {
        err = gt_crypto_openssl_err("ed25519: sign");
    }
    EVP_MD_CTX_free(mctx);
    EVP_PKEY_free(pkey);
    return err;
}

gt_err gt_ed25519_verify(const uint8_t sig[GT_ED25519_SIG_BYTES], const void *msg, size_t len,
                         const uint8_t pub[GT_ED25519_PUBLIC_BYTES])
{
    static const uint8_t empty[1] = {0};
    gt_err err = GT_OK;
    EVP_PKEY *pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub,
                                                 GT_ED25519_PUBLIC_BYTES);
    EVP_MD_CTX *mctx = EVP_MD_CTX_new();
    if (pkey == NULL || mctx == NULL || EVP_DigestVerifyInit(mctx, NULL, NULL, NULL, pkey) != 1) {
        err = gt_crypto_openssl_err("ed25519: verify init");
        goto out;
    }
    if (EVP_DigestVerify(mctx, sig, GT_ED25519_SIG_BYTES, len ? msg : empty, len) != 1) {
        ERR_clear_error();
        err = gt_errf(GT_E_AUTH, "ed25519: signature does not verify");
    }
out:
    EVP_MD_CTX_free(mctx);
    EVP_PKEY_free(pkey);
    return err;
}
