// crypto/internal.h: what the crypto/ files share and nothing above them sees: the OpenSSL
// objects behind the opaque handles, digest lookup, and OpenSSL error formatting.
#ifndef GPUTRAVEL_CRYPTO_INTERNAL_H
#define GPUTRAVEL_CRYPTO_INTERNAL_H

#include <gputravel/crypto.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

struct gt_pkey {
    EVP_PKEY *pkey;  // owned
};

// AES-256-GCM keyed once (aead_keyed.c); aead.c's one-shot calls use one on the stack.
struct gt_aead_keyed {
    EVP_CIPHER_CTX *ctx;  // owned; freeing it wipes the key schedule
    bool encrypt;
};
// Keys k (k->ctx is NULL on failure, nothing to free).
GT_MUST_USE gt_err gt_crypto_aead_keyed_init(struct gt_aead_keyed *k, bool encrypt,
                                             const uint8_t key[GT_AEAD_KEY_BYTES]);

struct gt_x509 {
    X509 *cert;  // owned
};

// EVP_sha256() / EVP_sha384() / EVP_sha512(); NULL for an unknown value.
const EVP_MD *gt_crypto_md(gt_hash_alg alg);
// "SHA256", "SHA384", "SHA512" (the names OSSL_PARAM digest fields take); NULL if unknown.
const char *gt_crypto_md_name(gt_hash_alg alg);
// GT_E_CRYPTO "<what>: <first OpenSSL error>", and clears OpenSSL's error queue.
gt_err gt_crypto_openssl_err(const char *what);
// Wraps an EVP_PKEY (takes ownership, also on failure).
GT_MUST_USE gt_err gt_crypto_pkey_wrap(gt_pkey **key, EVP_PKEY *pkey);

// OpenSSL's EVP update calls take int lengths; larger inputs are fed in pieces of this size.
#define GT_CRYPTO_MAX_STEP ((size_t)1 << 30)

// Feeds n bytes (AAD when out is NULL) through EVP_CipherUpdate in int-sized steps; 1 on
// success, 0 on failure (OpenSSL's convention, so it chains with EVP calls).
int gt_crypto_gcm_update(EVP_CIPHER_CTX *ctx, uint8_t *out, const uint8_t *in, size_t n);

#endif
