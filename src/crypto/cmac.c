// AES-128-CMAC (NIST SP 800-38B, RFC 4493) through EVP_MAC "CMAC": the MAC SGX derives its keys
// and report MACs with.
#include "internal.h"

#include <openssl/core_names.h>

gt_err gt_aes128_cmac(uint8_t out[GT_CMAC_BYTES], const void *data, size_t len,
                      const uint8_t key[GT_AES128_KEY_BYTES])
{
    static const uint8_t empty[1] = {0};
    gt_err err = GT_OK;
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "CMAC", NULL);
    EVP_MAC_CTX *ctx = mac != NULL ? EVP_MAC_CTX_new(mac) : NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_CIPHER, (char *)"AES-128-CBC", 0),
        OSSL_PARAM_construct_end(),
    };
    size_t n = 0;
    if (ctx == NULL || EVP_MAC_init(ctx, key, GT_AES128_KEY_BYTES, params) != 1 ||
        EVP_MAC_update(ctx, len ? data : empty, len) != 1 ||
        EVP_MAC_final(ctx, out, &n, GT_CMAC_BYTES) != 1) {
        err = gt_crypto_openssl_err("cmac");
        goto out;
    }
    GT_ENSURE_GOTO(err, n == GT_CMAC_BYTES, out, GT_E_CRYPTO, "cmac: %zu-byte tag", n);
out:
    EVP_MAC_CTX_free(ctx);  // wipes the keyed state
    EVP_MAC_free(mac);
    return err;
}
