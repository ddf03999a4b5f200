// ECDSA P-256 / P-384 verification against raw x || y public keys (as SGX, TDX and SEV-SNP
// evidence carries them). Raw r || s signatures are re-encoded as DER (ECDSA_SIG) and both
// forms go through EVP_DigestVerify.
#include "internal.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/param_build.h>

#include <string.h>

size_t gt_ec_coord_bytes(gt_ec_curve curve)
{
    switch (curve) {
    case GT_EC_P256:
        return 32;
    case GT_EC_P384:
        return 48;
    default:
        return 0;
    }
}

static const char *curve_group_name(gt_ec_curve curve)
{
    switch (curve) {
    case GT_EC_P256:
        return "prime256v1";
    case GT_EC_P384:
        return "secp384r1";
    default:
        return NULL;
    }
}

// An EC public key from the affine point x || y. OpenSSL rejects points not on the curve.
static gt_err ec_pub_from_xy(EVP_PKEY **out, gt_ec_curve curve, const uint8_t *xy, size_t len)
{
    *out = NULL;
    size_t coord = gt_ec_coord_bytes(curve);
    const char *group = curve_group_name(curve);
    GT_ENSURE(coord != 0 && group != NULL, GT_E_ARG, "ecdsa: unknown curve %d", (int)curve);
    GT_ENSURE(len == 2 * coord, GT_E_FORMAT, "ecdsa: public key of %zu bytes (expected %zu)",
              len, 2 * coord);
    uint8_t point[1 + 2 * 48];
    point[0] = 0x04;  // uncompressed (SEC 1 §2.3.3)
    memcpy(point + 1, xy, len);

    gt_err err = GT_OK;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *pctx = NULL;
    if (bld == NULL ||
        OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, group, 0) != 1 ||
        OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, 1 + len) != 1 ||
        (params = OSSL_PARAM_BLD_to_param(bld)) == NULL) {
        err = gt_crypto_openssl_err("ecdsa: public key params");
        goto out;
    }
    pctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (pctx == NULL || EVP_PKEY_fromdata_init(pctx) != 1) {
        err = gt_crypto_openssl_err("ecdsa: public key import");
        goto out;
    }
    if (EVP_PKEY_fromdata(pctx, out, EVP_PKEY_PUBLIC_KEY, params) != 1 || *out == NULL) {
        ERR_clear_error();
        err = gt_errf(GT_E_FORMAT, "ecdsa: public key is not a point on %s", group);
        goto out;
    }
out:
    EVP_PKEY_CTX_free(pctx);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    return err;
}

// Verifies a DER signature over msg with pkey; GT_E_AUTH when it does not verify.
static gt_err verify_der_with(EVP_PKEY *pkey, gt_hash_alg digest_alg, const uint8_t *sig,
                              size_t sig_len, const void *msg, size_t msg_len)
{
    const EVP_MD *md = gt_crypto_md(digest_alg);
    GT_ENSURE(md != NULL, GT_E_ARG, "ecdsa: unknown digest %d", (int)digest_alg);
    EVP_MD_CTX *mctx = EVP_MD_CTX_new();
    GT_ENSURE(mctx != NULL, GT_E_NOMEM, "ecdsa: out of memory");
    gt_err err = GT_OK;
    if (EVP_DigestVerifyInit(mctx, NULL, md, NULL, pkey) != 1) {
        err = gt_crypto_openssl_err("ecdsa: verify init");
        goto out;
    }
    static const uint8_t empty[1] = {0};
    int rc = EVP_DigestVerify(mctx, sig, sig_len, msg_len ? msg : empty, msg_len);
    if (rc != 1) {
        ERR_clear_error();  // a malformed signature is just a failed verification
        err = gt_errf(GT_E_AUTH, "ecdsa: signature does not verify");
    }
out:
    EVP_MD_CTX_free(mctx);
    return err;
}

gt_err gt_ecdsa_verify_der(gt_ec_curve curve, gt_hash_alg digest_alg, const uint8_t *sig_der,
                           size_t sig_len, const void *msg, size_t msg_len,
                           const uint8_t *pub_xy, size_t pub_len)
{
    EVP_PKEY *pkey = NULL;
    GT_TRY(ec_pub_from_xy(&pkey, curve, pub_xy, pub_len));
    gt_err err = verify_der_with(pkey, digest_alg, sig_der, sig_len, msg, msg_len);
    EVP_PKEY_free(pkey);
    return err;
}

gt_err gt_ecdsa_verify_raw(gt_ec_curve curve, gt_hash_alg digest_alg, const uint8_t *sig_rs,
                           size_t sig_len, const void *msg, size_t msg_len,
                           const uint8_t *pub_xy, size_t pub_len)
{
    size_t coord = gt_ec_coord_bytes(curve);
    GT_ENSURE(coord != 0, GT_E_ARG, "ecdsa: unknown curve %d", (int)curve);
    GT_ENSURE(sig_len == 2 * coord, GT_E_FORMAT, "ecdsa: raw signature of %zu bytes (expected %zu)",
              sig_len, 2 * coord);
    gt_err err = GT_OK;
    ECDSA_SIG *sig = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(sig_rs, (int)coord, NULL);
    BIGNUM *s = BN_bin2bn(sig_rs + coord, (int)coord, NULL);
    uint8_t *der = NULL;
    if (sig == NULL || r == NULL || s == NULL || ECDSA_SIG_set0(sig, r, s) != 1) {
        BN_free(r);
        BN_free(s);
        err = gt_crypto_openssl_err("ecdsa: signature");
        goto out;
    }
    // sig owns r and s now.
    int der_len = i2d_ECDSA_SIG(sig, &der);
    if (der_len <= 0) {
        err = gt_crypto_openssl_err("ecdsa: signature encoding");
        goto out;
    }
    err = gt_ecdsa_verify_der(curve, digest_alg, der, (size_t)der_len, msg, msg_len, pub_xy,
                              pub_len);
out:
    OPENSSL_free(der);
    ECDSA_SIG_free(sig);
    return err;
}
