// Helpers shared by the crypto/ files: digest lookup and OpenSSL error text.
#include "internal.h"

#include <stdlib.h>

#include <openssl/err.h>

const EVP_MD *gt_crypto_md(gt_hash_alg alg)
{
    switch (alg) {
    case GT_HASH_SHA256:
        return EVP_sha256();
    case GT_HASH_SHA384:
        return EVP_sha384();
    case GT_HASH_SHA512:
        return EVP_sha512();
    default:
        return NULL;
    }
}

const char *gt_crypto_md_name(gt_hash_alg alg)
{
    switch (alg) {
    case GT_HASH_SHA256:
        return "SHA256";
    case GT_HASH_SHA384:
        return "SHA384";
    case GT_HASH_SHA512:
        return "SHA512";
    default:
        return NULL;
    }
}

gt_err gt_crypto_openssl_err(const char *what)
{
    unsigned long e = ERR_peek_error();
    char text[128] = "no detail";
    if (e != 0) {
        ERR_error_string_n(e, text, sizeof text);
    }
    ERR_clear_error();
    return gt_errf(GT_E_CRYPTO, "%s: %s", what, text);
}

gt_err gt_crypto_pkey_wrap(gt_pkey **key, EVP_PKEY *pkey)
{
    *key = NULL;
    gt_pkey *k = calloc(1, sizeof *k);
    if (k == NULL) {
        EVP_PKEY_free(pkey);
        return gt_errf(GT_E_NOMEM, "pkey: out of memory");
    }
    k->pkey = pkey;
    *key = k;
    return GT_OK;
}
