// attest/chain.c: certificate glue the format verifiers and their adapters share (chain.h).
#include "chain.h"

#include <stdlib.h>
#include <string.h>

gt_err gt_attest_chain_verify(const gt_x509 *leaf, const gt_x509_verify_params *xp)
{
    if (xp->root_count == 0) {
        return gt_errf(GT_E_AUTH, "no trusted root given");
    }
    return gt_x509_verify_chain(leaf, xp);
}

gt_err gt_attest_leaf_ec_point(const gt_x509 *leaf, uint8_t *xy, size_t cap, size_t *len)
{
    gt_pkey *key = NULL;
    gt_err e = gt_x509_public_key(leaf, &key);
    if (e.code == GT_E_NONE) {
        e = gt_pkey_ec_public_xy(key, xy, cap, len);
    }
    gt_pkey_free(key);
    return e;
}

// ---- certificates from the caller's files ----------------------------------------------------

void gt_certvec_free(gt_certvec *cv)
{
    for (size_t i = 0; i < cv->n; i++) {
        gt_x509_free(cv->v[i]);
    }
    free(cv->v);
    cv->v = NULL;
    cv->n = 0;
}

gt_err gt_certvec_push(gt_certvec *cv, gt_x509 *c)
{
    gt_x509 **v = realloc(cv->v, (cv->n + 1) * sizeof *v);
    if (v == NULL) {
        gt_x509_free(c);
        return gt_errf(GT_E_NOMEM, "certificates: out of memory");
    }
    cv->v = v;
    cv->v[cv->n++] = c;
    return GT_OK;
}

// Adds every certificate of f (a PEM bundle or one DER certificate). A file that holds none is a
// reason in `bad` (the appraisal becomes INVALID), not an error.
static gt_err certvec_add_file(gt_certvec *cv, const gt_attest_file *f, const char *what,
                               gt_strlist *bad)
{
    bool pem = memmem(f->data.data, f->data.len, "-----BEGIN", 10) != NULL;
    if (pem) {
        gt_x509 **certs = NULL;
        size_t n = 0;
        gt_err e = gt_x509_parse_pem_all(&certs, &n, (const char *)f->data.data, f->data.len);
        if (!gt_is_ok(e) || n == 0) {
            for (size_t i = 0; i < n; i++) {
                gt_x509_free(certs[i]);
            }
            free(certs);
            return gt_strlist_addf(bad, "%s %s: no certificate (%s)", what,
                                   gt_attest_file_name(f), gt_is_ok(e) ? "empty" : e.msg);
        }
        gt_err err = GT_OK;
        for (size_t i = 0; i < n; i++) {
            if (gt_is_ok(err)) {
                err = gt_certvec_push(cv, certs[i]);
            } else {
                gt_x509_free(certs[i]);
            }
        }
        free(certs);
        return err;
    }
    gt_x509 *c = NULL;
    gt_err e = gt_x509_parse_der(&c, f->data.data, f->data.len);
    if (!gt_is_ok(e)) {
        return gt_strlist_addf(bad, "%s %s: not a certificate (%s)", what,
                               gt_attest_file_name(f), e.msg);
    }
    return gt_certvec_push(cv, c);
}

gt_err gt_certvec_add_files(gt_certvec *cv, const gt_attest_file *files, size_t n,
                                const char *what, gt_strlist *bad)
{
    for (size_t i = 0; i < n; i++) {
        GT_TRY(certvec_add_file(cv, &files[i], what, bad));
    }
    return GT_OK;
}
