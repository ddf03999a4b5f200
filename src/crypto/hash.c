// SHA-256/384/512 over EVP_MD: one-shot, incremental and whole files.
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gt_hash_ctx {
    EVP_MD_CTX *md;
    gt_hash_alg alg;
};

size_t gt_hash_size(gt_hash_alg alg)
{
    switch (alg) {
    case GT_HASH_SHA256:
        return GT_SHA256_BYTES;
    case GT_HASH_SHA384:
        return GT_SHA384_BYTES;
    case GT_HASH_SHA512:
        return GT_SHA512_BYTES;
    default:
        return 0;
    }
}

gt_err gt_hash_new(gt_hash_ctx **ctx, gt_hash_alg alg)
{
    *ctx = NULL;
    const EVP_MD *md = gt_crypto_md(alg);
    GT_ENSURE(md != NULL, GT_E_ARG, "hash: unknown algorithm %d", (int)alg);
    gt_hash_ctx *c = calloc(1, sizeof *c);
    GT_ENSURE(c != NULL, GT_E_NOMEM, "hash: out of memory");
    c->alg = alg;
    c->md = EVP_MD_CTX_new();
    if (c->md == NULL || EVP_DigestInit_ex(c->md, md, NULL) != 1) {
        gt_hash_free(c);
        return gt_crypto_openssl_err("hash: init");
    }
    *ctx = c;
    return GT_OK;
}

gt_err gt_hash_update(gt_hash_ctx *ctx, const void *data, size_t len)
{
    if (len == 0) {
        return GT_OK;
    }
    // EVP_DigestUpdate takes size_t: no need to split.
    if (EVP_DigestUpdate(ctx->md, data, len) != 1) {
        return gt_crypto_openssl_err("hash: update");
    }
    return GT_OK;
}

gt_err gt_hash_final(gt_hash_ctx *ctx, uint8_t *out)
{
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(ctx->md, out, &n) != 1) {
        return gt_crypto_openssl_err("hash: final");
    }
    GT_ENSURE(n == gt_hash_size(ctx->alg), GT_E_CRYPTO, "hash: digest of %u bytes", n);
    return GT_OK;
}

void gt_hash_free(gt_hash_ctx *ctx)
{
    if (ctx == NULL) {
        return;
    }
    EVP_MD_CTX_free(ctx->md);
    free(ctx);
}

gt_err gt_hash(gt_hash_alg alg, uint8_t *out, const void *data, size_t len)
{
    const EVP_MD *md = gt_crypto_md(alg);
    GT_ENSURE(md != NULL, GT_E_ARG, "hash: unknown algorithm %d", (int)alg);
    unsigned int n = 0;
    static const uint8_t empty[1] = {0};
    if (EVP_Digest(len ? data : empty, len, out, &n, md, NULL) != 1) {
        return gt_crypto_openssl_err("hash");
    }
    return GT_OK;
}

gt_err gt_hash_file(gt_hash_alg alg, uint8_t *out, const char *path)
{
    gt_hash_ctx *ctx = NULL;
    uint8_t *chunk = NULL;
    FILE *fp = NULL;
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_hash_new(&ctx, alg), out);
    fp = fopen(path, "rb");
    GT_ENSURE_GOTO(err, fp != NULL, out, GT_E_IO, "hash: open %s: %s", path, strerror(errno));
    const size_t cap = (size_t)1 << 20;
    chunk = malloc(cap);
    GT_ENSURE_GOTO(err, chunk != NULL, out, GT_E_NOMEM, "hash: out of memory");
    for (;;) {
        size_t n = fread(chunk, 1, cap, fp);
        if (n > 0) {
            GT_TRY_GOTO(err, gt_hash_update(ctx, chunk, n), out);
        }
        if (n < cap) {
            GT_ENSURE_GOTO(err, !ferror(fp), out, GT_E_IO, "hash: read %s: %s", path,
                           strerror(errno));
            break;
        }
    }
    GT_TRY_GOTO(err, gt_hash_final(ctx, out), out);
out:
    if (fp != NULL) {
        fclose(fp);
    }
    if (chunk != NULL) {
        gt_secure_zero(chunk, (size_t)1 << 20);  // the file may hold plaintext
        free(chunk);
    }
    gt_hash_free(ctx);
    return err;
}
