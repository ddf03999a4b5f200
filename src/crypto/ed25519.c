// Ed25519 (RFC 8032, pure) over EVP_PKEY raw keys; the secret is the 32-byte seed.
#include "internal.h"

#include <openssl/err.h>

#include <string.h>

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

// The y coordinates of the eight points of small order (the curve's 8-torsion), little-endian
// with the sign bit clear: 0 (order 4), 1 (the identity), p - 1 (order 2) and the two of order 8
// (tests/oracle/ed25519_torsion.py derives them). Only torsion points have these y values, so
// an encoding is refused by its y alone, whatever its sign bit says.
static const uint8_t small_order_y[5][32] = {
    {0x00},
    {0x01},
    {0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
    {0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
     0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a},
    {0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
     0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05},
};

// y of an encoding is its low 255 bits; it is canonical when below p = 2^255 - 19. The values
// p .. 2^255 - 1 are 0 .. 18 written again, so reducing them is subtracting p from the low byte.
static bool point_y(const uint8_t enc[GT_ED25519_PUBLIC_BYTES], uint8_t y[32])
{
    memcpy(y, enc, 32);
    y[31] &= 0x7f;
    bool at_least_p = y[31] == 0x7f && y[0] >= 0xed;
    for (size_t i = 1; i < 31 && at_least_p; i++) {
        at_least_p = y[i] == 0xff;
    }
    if (at_least_p) {
        uint8_t low = (uint8_t)(y[0] - 0xed);
        memset(y, 0, 32);
        y[0] = low;
    }
    return !at_least_p;
}

// Whether y (reduced: point_y's) is that of a point of small order.
static bool small_order_y_of(const uint8_t y[32])
{
    for (size_t i = 0; i < sizeof small_order_y / sizeof small_order_y[0]; i++) {
        if (memcmp(y, small_order_y[i], 32) == 0) {  // public values: no need for constant time
            return true;
        }
    }
    return false;
}

static bool small_order(const uint8_t enc[32])
{
    uint8_t y[32];
    (void)point_y(enc, y);
    return small_order_y_of(y);
}

gt_err gt_ed25519_public_check(const uint8_t pub[GT_ED25519_PUBLIC_BYTES])
{
    uint8_t y[32];
    GT_ENSURE(point_y(pub, y), GT_E_FORMAT, "ed25519 public key: not canonical (y >= p)");
    GT_ENSURE(!small_order_y_of(y), GT_E_FORMAT,
              "ed25519 public key: a point of small order (every signature would verify)");
    return GT_OK;
}

gt_err gt_ed25519_verify(const uint8_t sig[GT_ED25519_SIG_BYTES], const void *msg, size_t len,
                         const uint8_t pub[GT_ED25519_PUBLIC_BYTES])
{
    static const uint8_t empty[1] = {0};
    // OpenSSL 3.0 checks neither: under the identity as key, R = identity and S = 0 verify for
    // every message. A small-order R gives no signer anything but is never honest either.
    GT_ENSURE(gt_is_ok(gt_ed25519_public_check(pub)), GT_E_AUTH,
              "ed25519: the public key is of small order or not canonical");
    GT_ENSURE(!small_order(sig), GT_E_AUTH, "ed25519: the signature's R is of small order");
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
