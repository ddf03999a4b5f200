// X.509 over OpenSSL: DER / PEM-bundle parsing, chain verification at a chosen time with
// optional CRLs, extension lookup by OID, subject CN. RSA-PSS (AMD ARK/ASK), ECDSA (Intel,
// NVIDIA) and the rest verify through X509_verify_cert.
#include "internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

static gt_err wrap_cert(gt_x509 **out, X509 *cert)
{
    gt_x509 *c = calloc(1, sizeof *c);
    if (c == NULL) {
        X509_free(cert);
        return gt_errf(GT_E_NOMEM, "x509: out of memory");
    }
    c->cert = cert;
    *out = c;
    return GT_OK;
}

gt_err gt_x509_parse_der(gt_x509 **cert, const uint8_t *der, size_t len)
{
    *cert = NULL;
    GT_ENSURE(len > 0, GT_E_TRUNCATED, "x509: empty certificate");
    GT_ENSURE(len <= LONG_MAX, GT_E_LIMIT, "x509: certificate of %zu bytes", len);
    const unsigned char *p = der;
    X509 *x = d2i_X509(NULL, &p, (long)len);
    if (x == NULL) {
        ERR_clear_error();
        return gt_errf(GT_E_FORMAT, "x509: not a DER certificate");
    }
    if (p != der + len) {
        X509_free(x);
        return gt_errf(GT_E_FORMAT, "x509: %zu bytes after the certificate",
                       len - (size_t)(p - der));
    }
    return wrap_cert(cert, x);
}

gt_err gt_x509_parse_pem_all(gt_x509 ***certs, size_t *count, const char *pem, size_t len)
{
    *certs = NULL;
    *count = 0;
    GT_ENSURE(len <= INT_MAX, GT_E_LIMIT, "x509: PEM bundle of %zu bytes", len);
    BIO *bio = BIO_new_mem_buf(len ? pem : "", (int)len);
    GT_ENSURE(bio != NULL, GT_E_NOMEM, "x509: out of memory");
    gt_err err = GT_OK;
    gt_x509 **arr = NULL;
    size_t n = 0, cap = 0;
    ERR_clear_error();
    for (;;) {
        X509 *x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
        if (x == NULL) {
            unsigned long e = ERR_peek_last_error();
            // The normal end of the bundle: no further "-----BEGIN" line.
            bool at_end = ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE;
            ERR_clear_error();
            GT_ENSURE_GOTO(err, at_end, out, GT_E_FORMAT,
                           "x509: PEM certificate %zu is malformed", n + 1);
            break;
        }
        if (n == cap) {
            size_t new_cap = cap ? 2 * cap : 4;
            gt_x509 **p = realloc(arr, new_cap * sizeof *p);
            if (p == NULL) {
                X509_free(x);
                err = gt_errf(GT_E_NOMEM, "x509: out of memory");
                goto out;
            }
            arr = p;
            cap = new_cap;
        }
        GT_TRY_GOTO(err, wrap_cert(&arr[n], x), out);
        n++;
    }
    GT_ENSURE_GOTO(err, n > 0, out, GT_E_FORMAT, "x509: no PEM certificate found");
    *certs = arr;
    *count = n;
    arr = NULL;
out:
    if (arr != NULL) {
        for (size_t i = 0; i < n; i++) {
            gt_x509_free(arr[i]);
        }
        free(arr);
    }
    BIO_free(bio);
    return err;
}

void gt_x509_free(gt_x509 *cert)
{
    if (cert == NULL) {
        return;
    }
    X509_free(cert->cert);
    free(cert);
}

gt_err gt_x509_public_key(const gt_x509 *cert, gt_pkey **key)
{
    *key = NULL;
    EVP_PKEY *pkey = X509_get_pubkey(cert->cert);  // a new reference
    if (pkey == NULL) {
        ERR_clear_error();
        return gt_errf(GT_E_UNSUPPORTED, "x509: unsupported public key");
    }
    return gt_crypto_pkey_wrap(key, pkey);
}

static void name_cn(X509_NAME *name, char *out, size_t cap)
{
    if (cap == 0) {
        return;
    }
    out[0] = '\0';
    int idx = name != NULL ? X509_NAME_get_index_by_NID(name, NID_commonName, -1) : -1;
    if (idx < 0) {
        snprintf(out, cap, "(no CN)");
        return;
    }
    const ASN1_STRING *s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, idx));
    const unsigned char *d = ASN1_STRING_get0_data(s);
    size_t len = (size_t)ASN1_STRING_length(s);
    size_t i = 0;
    // Printable ASCII only: the CN goes into operator messages and logs.
    for (; i < len && i + 1 < cap; i++) {
        out[i] = (d[i] >= 0x20 && d[i] < 0x7f) ? (char)d[i] : '?';
    }
    out[i] = '\0';
}

void gt_x509_subject_cn(const gt_x509 *cert, char *out, size_t cap)
{
    name_cn(X509_get_subject_name(cert->cert), out, cap);
}

gt_err gt_x509_extension(const gt_x509 *cert, const char *oid, gt_span *value)
{
    *value = (gt_span){0};
    ASN1_OBJECT *obj = OBJ_txt2obj(oid, 1);  // 1: dotted numbers only
    if (obj == NULL) {
        ERR_clear_error();
        return gt_errf(GT_E_ARG, "x509: bad OID \"%s\"", oid);
    }
    int idx = X509_get_ext_by_OBJ(cert->cert, obj, -1);
    ASN1_OBJECT_free(obj);
    GT_ENSURE(idx >= 0, GT_E_NOTFOUND, "x509: no extension %s", oid);
    X509_EXTENSION *ext = X509_get_ext(cert->cert, idx);
    const ASN1_OCTET_STRING *data = X509_EXTENSION_get_data(ext);
    GT_ENSURE(data != NULL, GT_E_FORMAT, "x509: extension %s without a value", oid);
    *value = (gt_span){ASN1_STRING_get0_data(data), (size_t)ASN1_STRING_length(data)};
    return GT_OK;
}

// One CRL from DER or PEM bytes.
static gt_err parse_crl(X509_CRL **out, gt_span s, size_t index)
{
    *out = NULL;
    GT_ENSURE(s.len > 0 && s.len <= INT_MAX, GT_E_FORMAT, "x509: CRL %zu has %zu bytes", index,
              s.len);
    const unsigned char *p = s.data;
    X509_CRL *crl = d2i_X509_CRL(NULL, &p, (long)s.len);
    if (crl != NULL && p != s.data + s.len) {
        X509_CRL_free(crl);
        crl = NULL;
    }
    if (crl == NULL) {
        BIO *bio = BIO_new_mem_buf(s.data, (int)s.len);
        if (bio != NULL) {
            crl = PEM_read_bio_X509_CRL(bio, NULL, NULL, NULL);
            BIO_free(bio);
        }
    }
    ERR_clear_error();
    GT_ENSURE(crl != NULL, GT_E_FORMAT, "x509: CRL %zu is neither DER nor PEM", index);
    *out = crl;
    return GT_OK;
}

// With CRLs, every certificate whose issuer supplied a CRL is checked against it; a certificate
// whose issuer has no CRL among those given is not (AMD's ARK CRL covers the ASK but nothing
// covers the VCEK). Each CRL given must name an issuing CA of the verified chain (checked after
// verification, so OpenSSL has used it and checked its signature); a wrong CRL cannot pass
// silently.
static int verify_cb(int ok, X509_STORE_CTX *ctx)
{
    if (!ok && X509_STORE_CTX_get_error(ctx) == X509_V_ERR_UNABLE_TO_GET_CRL) {
        return 1;
    }
    return ok;
}

// Adds the trusted roots to the store.
static gt_err add_roots(X509_STORE *store, const gt_x509_verify_params *p)
{
    for (size_t i = 0; i < p->root_count; i++) {
        if (X509_STORE_add_cert(store, p->roots[i]->cert) != 1) {
            // A root listed twice is harmless; anything else is not.
            unsigned long e = ERR_peek_last_error();
            if (ERR_GET_REASON(e) != X509_R_CERT_ALREADY_IN_HASH_TABLE) {
                return gt_crypto_openssl_err("x509: adding a root");
            }
            ERR_clear_error();
        }
    }
    return GT_OK;
}

// Every CRL given must be issued by a CA of the verified chain (the leaf, index 0, excluded).
static gt_err crls_match_chain(X509_CRL *const *crls, size_t crl_count, STACK_OF(X509) *chain)
{
    for (size_t i = 0; i < crl_count; i++) {
        bool found = false;
        for (int j = 1; chain != NULL && j < sk_X509_num(chain) && !found; j++) {
            found = X509_NAME_cmp(X509_CRL_get_issuer(crls[i]),
                                  X509_get_subject_name(sk_X509_value(chain, j))) == 0;
        }
        if (!found) {
            char cn[64];
            name_cn(X509_CRL_get_issuer(crls[i]), cn, sizeof cn);
            return gt_errf(GT_E_AUTH, "x509: CRL %zu (issuer %s) is not for this chain", i, cn);
        }
    }
    return GT_OK;
}

gt_err gt_x509_verify_chain(const gt_x509 *leaf, const gt_x509_verify_params *p)
{
    GT_ENSURE(p->root_count > 0, GT_E_ARG, "x509: no trusted root given");
    gt_err err = GT_OK;
    X509_STORE *store = X509_STORE_new();
    STACK_OF(X509) *untrusted = sk_X509_new_null();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    X509_CRL **crls = p->crl_count ? calloc(p->crl_count, sizeof *crls) : NULL;
    if (store == NULL || untrusted == NULL || ctx == NULL || (p->crl_count && crls == NULL)) {
        err = gt_errf(GT_E_NOMEM, "x509: out of memory");
        goto out;
    }
    GT_TRY_GOTO(err, add_roots(store, p), out);
    for (size_t i = 0; i < p->intermediate_count; i++) {
        // sk_X509_push does not take a reference: the stack borrows the caller's certs.
        if (sk_X509_push(untrusted, p->intermediates[i]->cert) <= 0) {
            err = gt_errf(GT_E_NOMEM, "x509: out of memory");
            goto out;
        }
    }
    unsigned long flags = 0;
    for (size_t i = 0; i < p->crl_count; i++) {
        GT_TRY_GOTO(err, parse_crl(&crls[i], p->crls[i], i), out);
        if (X509_STORE_add_crl(store, crls[i]) != 1) {
            err = gt_crypto_openssl_err("x509: adding a CRL");
            goto out;
        }
        flags = X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL;
    }
    if (X509_STORE_CTX_init(ctx, store, leaf->cert, untrusted) != 1) {
        err = gt_crypto_openssl_err("x509: verify init");
        goto out;
    }
    X509_VERIFY_PARAM *param = X509_STORE_CTX_get0_param(ctx);
    X509_VERIFY_PARAM_set_time(param, (time_t)p->at);
    if (flags != 0) {
        X509_VERIFY_PARAM_set_flags(param, flags);
        X509_STORE_CTX_set_verify_cb(ctx, verify_cb);
    }
    if (X509_verify_cert(ctx) != 1) {
        int code = X509_STORE_CTX_get_error(ctx);
        int depth = X509_STORE_CTX_get_error_depth(ctx);
        X509 *at = X509_STORE_CTX_get_current_cert(ctx);
        char cn[64];
        name_cn(at != NULL ? X509_get_subject_name(at) : NULL, cn, sizeof cn);
        ERR_clear_error();
        err = gt_errf(GT_E_AUTH, "x509: %s (depth %d, %s)", X509_verify_cert_error_string(code),
                      depth, cn);
        goto out;
    }
    err = crls_match_chain(crls, p->crl_count, X509_STORE_CTX_get0_chain(ctx));
out:
    if (crls != NULL) {
        for (size_t i = 0; i < p->crl_count; i++) {
            X509_CRL_free(crls[i]);  // the store holds its own references
        }
        free(crls);
    }
    X509_STORE_CTX_free(ctx);
    sk_X509_free(untrusted);
    X509_STORE_free(store);
    return err;
}
