// RSA with little-endian integers, as SGX stores them in a SIGSTRUCT (modulus, signature, q1,
// q2). OpenSSL does all arithmetic (BIGNUM) and every PKCS#1 operation (EVP); nothing here is a
// primitive of its own: the only work is byte order and the two quotients EINIT's verifier takes.
#include "internal.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>

#include <string.h>

// SIGSTRUCTs hold 384-byte integers; more than this is no key we would meet.
#define RSA_LE_MAX_BYTES 1024

static void reverse_copy(uint8_t *out, const uint8_t *in, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        out[i] = in[len - 1 - i];
    }
}

// An EVP_PKEY holding only the public (n, e).
static gt_err public_key_from_le(EVP_PKEY **out, const uint8_t *n_le, size_t len, uint32_t e)
{
    *out = NULL;
    gt_err err = GT_OK;
    BIGNUM *n = BN_lebin2bn(n_le, (int)len, NULL), *bn_e = BN_new();
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = NULL;
    if (n == NULL || bn_e == NULL || bld == NULL || BN_set_word(bn_e, e) != 1 ||
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) != 1 ||
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e) != 1 ||
        (params = OSSL_PARAM_BLD_to_param(bld)) == NULL ||
        (ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL)) == NULL ||
        EVP_PKEY_fromdata_init(ctx) != 1 ||
        EVP_PKEY_fromdata(ctx, out, EVP_PKEY_PUBLIC_KEY, params) != 1) {
        err = gt_crypto_openssl_err("rsa: public key");
    }
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn_e);
    BN_free(n);
    return err;
}

gt_err gt_rsa_le_verify_sha256(const uint8_t *sig_le, const uint8_t *n_le, size_t len, uint32_t e,
                               const uint8_t digest[GT_SHA256_BYTES])
{
    GT_ENSURE(len > 0 && len <= RSA_LE_MAX_BYTES, GT_E_ARG, "rsa: %zu-byte integers", len);
    uint8_t sig_be[RSA_LE_MAX_BYTES];
    reverse_copy(sig_be, sig_le, len);
    EVP_PKEY *pkey = NULL;
    GT_TRY(public_key_from_le(&pkey, n_le, len, e));
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
    // OpenSSL re-encodes the DigestInfo and compares it whole, and refuses sig >= n.
    int ok = ctx != NULL && EVP_PKEY_verify_init(ctx) == 1 &&
             EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1 &&
             EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha256()) == 1;
    gt_err err = GT_OK;
    if (!ok) {
        err = gt_crypto_openssl_err("rsa: verify setup");
    } else if (EVP_PKEY_verify(ctx, sig_be, len, digest, GT_SHA256_BYTES) != 1) {
        ERR_clear_error();
        err = gt_errf(GT_E_AUTH, "rsa: signature does not verify");
    }
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(pkey);
    return err;
}

gt_err gt_rsa_le_q1q2(uint8_t *q1_le, uint8_t *q2_le, const uint8_t *sig_le, const uint8_t *n_le,
                      size_t len)
{
    GT_ENSURE(len > 0 && len <= RSA_LE_MAX_BYTES, GT_E_ARG, "rsa: %zu-byte integers", len);
    gt_err err = GT_OK;
    BN_CTX *bctx = BN_CTX_new();
    BIGNUM *s = BN_lebin2bn(sig_le, (int)len, NULL), *n = BN_lebin2bn(n_le, (int)len, NULL);
    BIGNUM *s2 = BN_new(), *s3 = BN_new(), *q1 = BN_new(), *q2 = BN_new(), *t = BN_new();
    if (bctx == NULL || s == NULL || n == NULL || s2 == NULL || s3 == NULL || q1 == NULL ||
        q2 == NULL || t == NULL) {
        err = gt_errf(GT_E_NOMEM, "rsa: out of memory");
        goto out;
    }
    GT_ENSURE_GOTO(err, !BN_is_zero(n) && BN_cmp(s, n) < 0, out, GT_E_ARG,
                   "rsa: q1/q2 need 0 <= signature < modulus");
    // q1 = floor(s^2 / n); q2 = floor((s^3 - q1*s*n) / n), the definitions of the SDM (EINIT).
    if (BN_sqr(s2, s, bctx) != 1 || BN_div(q1, NULL, s2, n, bctx) != 1 ||
        BN_mul(s3, s2, s, bctx) != 1 || BN_mul(t, q1, s, bctx) != 1 ||
        BN_mul(t, t, n, bctx) != 1 || BN_sub(t, s3, t) != 1 ||
        BN_div(q2, NULL, t, n, bctx) != 1 || BN_bn2lebinpad(q1, q1_le, (int)len) != (int)len ||
        BN_bn2lebinpad(q2, q2_le, (int)len) != (int)len) {
        err = gt_crypto_openssl_err("rsa: q1/q2");
    }
out:
    BN_free(t);
    BN_free(q2);
    BN_free(q1);
    BN_free(s3);
    BN_free(s2);
    BN_free(n);
    BN_free(s);
    BN_CTX_free(bctx);
    return err;
}

gt_err gt_pkey_rsa_public_le(const gt_pkey *key, uint8_t *n_le, size_t len, uint64_t *e,
                             unsigned *bits)
{
    GT_ENSURE(EVP_PKEY_is_a(key->pkey, "RSA"), GT_E_ARG, "rsa: the key is not an RSA key");
    BIGNUM *n = NULL, *bn_e = NULL;
    gt_err err = GT_OK;
    if (EVP_PKEY_get_bn_param(key->pkey, OSSL_PKEY_PARAM_RSA_N, &n) != 1 ||
        EVP_PKEY_get_bn_param(key->pkey, OSSL_PKEY_PARAM_RSA_E, &bn_e) != 1) {
        err = gt_crypto_openssl_err("rsa: key parameters");
        goto out;
    }
    *bits = (unsigned)BN_num_bits(n);
    *e = BN_num_bits(bn_e) <= 64 ? (uint64_t)BN_get_word(bn_e) : UINT64_MAX;
    GT_ENSURE_GOTO(err, BN_bn2lebinpad(n, n_le, (int)len) == (int)len, out, GT_E_LIMIT,
                   "rsa: a %u-bit modulus does not fit in %zu bytes", *bits, len);
out:
    BN_free(bn_e);
    BN_free(n);
    return err;
}

gt_err gt_pkey_rsa_sign_sha256_le(const gt_pkey *key, const uint8_t digest[GT_SHA256_BYTES],
                                  uint8_t *sig_le, size_t len)
{
    GT_ENSURE(EVP_PKEY_is_a(key->pkey, "RSA"), GT_E_ARG, "rsa: the key is not an RSA key");
    GT_ENSURE(len <= RSA_LE_MAX_BYTES && (size_t)EVP_PKEY_get_size(key->pkey) == len, GT_E_ARG,
              "rsa: a %d-byte key cannot fill a %zu-byte signature",
              EVP_PKEY_get_size(key->pkey), len);
    uint8_t sig_be[RSA_LE_MAX_BYTES];
    size_t sig_len = sizeof sig_be;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, key->pkey, NULL);
    gt_err err = GT_OK;
    if (ctx == NULL || EVP_PKEY_sign_init(ctx) != 1 ||
        EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) != 1 ||
        EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha256()) != 1 ||
        EVP_PKEY_sign(ctx, sig_be, &sig_len, digest, GT_SHA256_BYTES) != 1 || sig_len != len) {
        err = gt_crypto_openssl_err("rsa: sign");
    } else {
        reverse_copy(sig_le, sig_be, len);
    }
    EVP_PKEY_CTX_free(ctx);
    return err;
}
