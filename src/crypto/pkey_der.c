// Private keys as DER bytes in memory (for keys that are stored sealed, never as a plain file)
// and ECDSA signatures in the raw r || s form SGX/TDX quotes carry.
#include "internal.h"

#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/x509.h>

#include <string.h>

gt_err gt_pkey_private_der(const gt_pkey *key, gt_buf *out)
{
    out->len = 0;
    uint8_t *der = NULL;
    int n = i2d_PrivateKey(key->pkey, &der);
    if (n <= 0) {
        return gt_crypto_openssl_err("pkey: encode private key");
    }
    gt_err err = gt_buf_append(out, der, (size_t)n);
    OPENSSL_clear_free(der, (size_t)n);
    return err;
}

gt_err gt_pkey_parse_private_der(gt_pkey **key, const uint8_t *der, size_t len)
{
    *key = NULL;
    GT_ENSURE(len > 0 && len <= GT_PKEY_PEM_MAX_BYTES, GT_E_FORMAT,
              "pkey: private key DER of %zu bytes", len);
    const unsigned char *p = der;
    EVP_PKEY *pkey = d2i_AutoPrivateKey(NULL, &p, (long)len);
    if (pkey == NULL || p != der + len) {
        EVP_PKEY_free(pkey);
        ERR_clear_error();
        return gt_errf(GT_E_FORMAT, "pkey: not a DER private key");
    }
    return gt_crypto_pkey_wrap(key, pkey);
}

gt_err gt_ecdsa_sign_raw(const gt_pkey *key, gt_hash_alg digest_alg, uint8_t *sig_rs,
                         size_t coord_bytes, const void *msg, size_t len)
{
    gt_buf der = {0};
    GT_TRY(gt_pkey_sign(key, digest_alg, &der, msg, len));
    const unsigned char *p = der.data;
    ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long)der.len);
    gt_err err = GT_OK;
    if (sig == NULL) {
        err = gt_crypto_openssl_err("ecdsa: decode signature");
        goto out;
    }
    const BIGNUM *r = NULL, *s = NULL;
    ECDSA_SIG_get0(sig, &r, &s);
    if (BN_bn2binpad(r, sig_rs, (int)coord_bytes) < 0 ||
        BN_bn2binpad(s, sig_rs + coord_bytes, (int)coord_bytes) < 0) {
        err = gt_errf(GT_E_ARG, "ecdsa: signature does not fit %zu-byte coordinates",
                      coord_bytes);
    }
out:
    ECDSA_SIG_free(sig);
    gt_buf_free_nowipe(&der);
    return err;
}
