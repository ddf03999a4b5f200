// gt_pkey: an EVP_PKEY of any type (EC, Ed25519, RSA): generate, PEM load/save, sign/verify.
#include "internal.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/buffer.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include <string.h>

gt_err gt_pkey_generate_ec(gt_pkey **key, gt_ec_curve curve)
{
    *key = NULL;
    const char *group = curve == GT_EC_P256 ? "P-256" : curve == GT_EC_P384 ? "P-384" : NULL;
    GT_ENSURE(group != NULL, GT_E_ARG, "pkey: unknown curve %d", (int)curve);
    EVP_PKEY *pkey = EVP_EC_gen(group);
    if (pkey == NULL) {
        return gt_crypto_openssl_err("pkey: generate");
    }
    return gt_crypto_pkey_wrap(key, pkey);
}

gt_err gt_pkey_load_pem(gt_pkey **key, const char *path, bool private_key)
{
    *key = NULL;
    BIO *bio = BIO_new_file(path, "rb");
    if (bio == NULL) {
        ERR_clear_error();
        return gt_errf(GT_E_IO, "pkey: cannot open %s", path);
    }
    EVP_PKEY *pkey = private_key ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL)
                                 : PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (pkey == NULL) {
        ERR_clear_error();
        return gt_errf(GT_E_FORMAT, "pkey: %s holds no PEM %s key", path,
                       private_key ? "private" : "public");
    }
    return gt_crypto_pkey_wrap(key, pkey);
}

gt_err gt_pkey_parse_pem_public(gt_pkey **key, const void *pem, size_t len)
{
    *key = NULL;
    GT_ENSURE(len <= GT_PKEY_PEM_MAX_BYTES, GT_E_LIMIT, "pkey: PEM of %zu bytes is too long", len);
    // A read-only BIO over the caller's bytes: OpenSSL reads at most len of them.
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    GT_ENSURE(bio != NULL, GT_E_NOMEM, "pkey: out of memory");
    EVP_PKEY *pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (pkey == NULL) {
        ERR_clear_error();
        return gt_errf(GT_E_FORMAT, "pkey: no PEM public key");
    }
    return gt_crypto_pkey_wrap(key, pkey);
}

gt_err gt_pkey_save_pem(const gt_pkey *key, const char *path, bool private_key)
{
    // A secure-memory BIO: its buffer is wiped when freed (and we wipe it ourselves too).
    BIO *bio = BIO_new(BIO_s_secmem());
    GT_ENSURE(bio != NULL, GT_E_NOMEM, "pkey: out of memory");
    gt_err err = GT_OK;
    int ok = private_key
                 ? PEM_write_bio_PKCS8PrivateKey(bio, key->pkey, NULL, NULL, 0, NULL, NULL)
                 : PEM_write_bio_PUBKEY(bio, key->pkey);
    BUF_MEM *mem = NULL;
    if (ok != 1 || BIO_get_mem_ptr(bio, &mem) != 1 || mem == NULL) {
        err = gt_crypto_openssl_err("pkey: PEM encoding");
        goto out;
    }
    GT_TRY_GOTO(err, gt_file_write_atomic(path, mem->data, mem->length,
                                          private_key ? 0600 : 0644), out);
out:
    if (mem != NULL) {
        gt_secure_zero(mem->data, mem->length);
    }
    BIO_free(bio);
    return err;
}

gt_err gt_pkey_ec_public_xy(const gt_pkey *key, uint8_t *out, size_t cap, size_t *len)
{
    *len = 0;
    GT_ENSURE(EVP_PKEY_is_a(key->pkey, "EC"), GT_E_ARG, "pkey: not an EC key");
    int bits = EVP_PKEY_get_bits(key->pkey);
    GT_ENSURE(bits > 0, GT_E_CRYPTO, "pkey: EC key without a size");
    size_t coord = ((size_t)bits + 7) / 8;
    GT_ENSURE(cap >= 2 * coord, GT_E_LIMIT, "pkey: public point needs %zu bytes, have %zu",
              2 * coord, cap);
    gt_err err = GT_OK;
    BIGNUM *x = NULL, *y = NULL;
    if (EVP_PKEY_get_bn_param(key->pkey, OSSL_PKEY_PARAM_EC_PUB_X, &x) != 1 ||
        EVP_PKEY_get_bn_param(key->pkey, OSSL_PKEY_PARAM_EC_PUB_Y, &y) != 1 ||
        BN_bn2binpad(x, out, (int)coord) != (int)coord ||
        BN_bn2binpad(y, out + coord, (int)coord) != (int)coord) {
        err = gt_crypto_openssl_err("pkey: public point");
        goto out;
    }
    *len = 2 * coord;
out:
    BN_free(x);
    BN_free(y);
    return err;
}

// Ed25519 / Ed448 sign the message itself: no separate digest.
static const EVP_MD *sign_md(const EVP_PKEY *pkey, gt_hash_alg digest_alg, bool *ok)
{
    *ok = true;
    if (EVP_PKEY_is_a(pkey, "ED25519") || EVP_PKEY_is_a(pkey, "ED448")) {
        return NULL;
    }
    const EVP_MD *md = gt_crypto_md(digest_alg);
    *ok = md != NULL;
    return md;
}

gt_err gt_pkey_sign(const gt_pkey *key, gt_hash_alg digest_alg, gt_buf *sig, const void *msg,
                    size_t len)
{
    bool md_ok = false;
    const EVP_MD *md = sign_md(key->pkey, digest_alg, &md_ok);
    GT_ENSURE(md_ok, GT_E_ARG, "pkey: unknown digest %d", (int)digest_alg);
    EVP_MD_CTX *mctx = EVP_MD_CTX_new();
    GT_ENSURE(mctx != NULL, GT_E_NOMEM, "pkey: out of memory");
    gt_err err = GT_OK;
    static const uint8_t empty[1] = {0};
    const uint8_t *m = len ? msg : empty;
    size_t max = 0;
    // EVP_DigestSignInit takes a non-const key; it only takes a reference.
    if (EVP_DigestSignInit(mctx, NULL, md, NULL, key->pkey) != 1 ||
        EVP_DigestSign(mctx, NULL, &max, m, len) != 1) {
        err = gt_crypto_openssl_err("pkey: sign init");
        goto out;
    }
    sig->len = 0;
    GT_TRY_GOTO(err, gt_buf_reserve(sig, max), out);
    size_t n = max;
    if (EVP_DigestSign(mctx, sig->data, &n, m, len) != 1) {
        err = gt_crypto_openssl_err("pkey: sign");
        goto out;
    }
    sig->len = n;
out:
    EVP_MD_CTX_free(mctx);
    return err;
}

gt_err gt_pkey_verify(const gt_pkey *key, gt_hash_alg digest_alg, const uint8_t *sig,
                      size_t sig_len, const void *msg, size_t len)
{
    bool md_ok = false;
    const EVP_MD *md = sign_md(key->pkey, digest_alg, &md_ok);
    GT_ENSURE(md_ok, GT_E_ARG, "pkey: unknown digest %d", (int)digest_alg);
    EVP_MD_CTX *mctx = EVP_MD_CTX_new();
    GT_ENSURE(mctx != NULL, GT_E_NOMEM, "pkey: out of memory");
    gt_err err = GT_OK;
    static const uint8_t empty[1] = {0};
    if (EVP_DigestVerifyInit(mctx, NULL, md, NULL, key->pkey) != 1) {
        err = gt_crypto_openssl_err("pkey: verify init");
        goto out;
    }
    if (EVP_DigestVerify(mctx, sig_len ? sig : empty, sig_len, len ? msg : empty, len) != 1) {
        ERR_clear_error();
        err = gt_errf(GT_E_AUTH, "pkey: signature does not verify");
    }
out:
    EVP_MD_CTX_free(mctx);
    return err;
}

void gt_pkey_free(gt_pkey *key)
{
    if (key == NULL) {
        return;
    }
    EVP_PKEY_free(key->pkey);  // OpenSSL wipes private key material on free
    free(key);
}
