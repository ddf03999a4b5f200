// X25519 (RFC 7748) over EVP_PKEY raw keys.
#include "internal.h"

#include <openssl/err.h>

// pub from an EVP_PKEY's raw public key (exactly 32 bytes).
static gt_err raw_public(EVP_PKEY *pkey, uint8_t pub[GT_X25519_BYTES], const char *what)
{
    size_t n = GT_X25519_BYTES;
    if (EVP_PKEY_get_raw_public_key(pkey, pub, &n) != 1 || n != GT_X25519_BYTES) {
        return gt_crypto_openssl_err(what);
    }
    return GT_OK;
}

gt_err gt_x25519_keypair(uint8_t pub[GT_X25519_BYTES], uint8_t sec[GT_X25519_BYTES])
{
    EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "X25519");
    GT_ENSURE(pkey != NULL, GT_E_CRYPTO, "x25519: key generation failed");
    gt_err err = GT_OK;
    size_t n = GT_X25519_BYTES;
    if (EVP_PKEY_get_raw_private_key(pkey, sec, &n) != 1 || n != GT_X25519_BYTES) {
        err = gt_crypto_openssl_err("x25519: private key");
        goto out;
    }
    GT_TRY_GOTO(err, raw_public(pkey, pub, "x25519: public key"), out);
out:
    if (err.code != GT_E_NONE) {
        gt_secure_zero(sec, GT_X25519_BYTES);
    }
    EVP_PKEY_free(pkey);  // wipes its private key
    return err;
}

gt_err gt_x25519_public(uint8_t pub[GT_X25519_BYTES], const uint8_t sec[GT_X25519_BYTES])
{
    EVP_PKEY *pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, sec, GT_X25519_BYTES);
    if (pkey == NULL) {
        return gt_crypto_openssl_err("x25519: private key");
    }
    gt_err err = raw_public(pkey, pub, "x25519: public key");
    EVP_PKEY_free(pkey);
    return err;
}

gt_err gt_x25519_shared(uint8_t shared[GT_X25519_BYTES], const uint8_t peer_pub[GT_X25519_BYTES],
                        const uint8_t sec[GT_X25519_BYTES])
{
    gt_err err = GT_OK;
    EVP_PKEY *priv = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, sec, GT_X25519_BYTES);
    EVP_PKEY *peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, peer_pub,
                                                 GT_X25519_BYTES);
    EVP_PKEY_CTX *ctx = NULL;
    if (priv == NULL || peer == NULL || (ctx = EVP_PKEY_CTX_new(priv, NULL)) == NULL ||
        EVP_PKEY_derive_init(ctx) != 1) {
        err = gt_crypto_openssl_err("x25519: keys");
        goto out;
    }
    size_t n = GT_X25519_BYTES;
    // OpenSSL refuses an all-zero result (a small-order peer key) in derive; checked again
    // below so the contract does not rest on that alone.
    static const uint8_t zero[GT_X25519_BYTES] = {0};
    if (EVP_PKEY_derive_set_peer(ctx, peer) != 1 || EVP_PKEY_derive(ctx, shared, &n) != 1 ||
        n != GT_X25519_BYTES || gt_ct_equal(shared, zero, GT_X25519_BYTES)) {
        ERR_clear_error();
        err = gt_errf(GT_E_AUTH, "x25519: peer public key is not acceptable");
        goto out;
    }
out:
    if (err.code != GT_E_NONE) {
        gt_secure_zero(shared, GT_X25519_BYTES);
    }
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(peer);
    EVP_PKEY_free(priv);
    return err;
}
