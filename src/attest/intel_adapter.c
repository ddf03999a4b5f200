// attest/intel_adapter.c: Intel TDX / SGX quotes (intel_quote.h) as a gt_attest_check: parse, fill
// claims, build the trust inputs from the caller's files (roots trusted), verify, and sort the
// verifier's reasons into "not authentic" (INVALID) and "authentic but refused" (REJECTED: a TCB
// level that is unsupported or revoked).
#include "chain.h"
#include "verify.h"

#include "intel_quote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Collateral kind from a "kind:" prefix of the path, else from the content.
static gt_err intel_coll_kind(const gt_attest_file *f, gt_intel_coll_kind *kind, gt_strlist *bad)
{
    static const struct {
        const char *prefix;
        gt_intel_coll_kind kind;
    } prefixes[] = {
        {"tcb-info:", GT_INTEL_COLL_TCB_INFO},
        {"qe-identity:", GT_INTEL_COLL_QE_IDENTITY},
        {"tcb-signing-chain:", GT_INTEL_COLL_TCB_SIGNING_CHAIN},
        {"pck-crl:", GT_INTEL_COLL_PCK_CRL},
        {"root-ca-crl:", GT_INTEL_COLL_ROOT_CA_CRL},
        {"dcap-qvl:", GT_INTEL_COLL_DCAP_QVL_JSON},
    };
    const char *path = gt_attest_file_name(f);
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        if (strncmp(path, prefixes[i].prefix, strlen(prefixes[i].prefix)) == 0) {
            *kind = prefixes[i].kind;
            return GT_OK;
        }
    }
    const uint8_t *d = f->data.data;
    size_t n = f->data.len, i = 0;
    while (i < n && (d[i] == ' ' || d[i] == '\n' || d[i] == '\r' || d[i] == '\t')) {
        i++;
    }
    if (i < n && d[i] == '{') {
        if (memmem(d, n, "\"tcb_info_issuer_chain\"", 23) != NULL ||
            memmem(d, n, "\"qe_identity_issuer_chain\"", 26) != NULL) {
            *kind = GT_INTEL_COLL_DCAP_QVL_JSON;
        } else if (memmem(d, n, "\"tcbInfo\"", 9) != NULL) {
            *kind = GT_INTEL_COLL_TCB_INFO;
        } else if (memmem(d, n, "\"enclaveIdentity\"", 17) != NULL) {
            *kind = GT_INTEL_COLL_QE_IDENTITY;
        } else {
            GT_TRY(gt_strlist_addf(bad, "collateral %s: JSON that is neither TCB info, QE identity "
                                        "nor dcap-qvl collateral",
                                   path));
            return gt_errf(GT_E_NOTFOUND, "unknown collateral");
        }
        return GT_OK;
    }
    if (memmem(d, n, "BEGIN CERTIFICATE", 17) != NULL) {
        *kind = GT_INTEL_COLL_TCB_SIGNING_CHAIN;
        return GT_OK;
    }
    bool pem_crl = memmem(d, n, "BEGIN X509 CRL", 14) != NULL;
    if (pem_crl || (n > 0 && d[0] == 0x30)) {
        // The issuer name is in clear in a DER CRL; for PEM, the file name decides.
        bool root = pem_crl ? strstr(path, "root") != NULL
                            : memmem(d, n, "Intel SGX Root CA", 17) != NULL;
        *kind = root ? GT_INTEL_COLL_ROOT_CA_CRL : GT_INTEL_COLL_PCK_CRL;
        return GT_OK;
    }
    GT_TRY(gt_strlist_addf(bad, "collateral %s: unrecognised (use KIND:FILE with tcb-info, "
                                "qe-identity, tcb-signing-chain, pck-crl, root-ca-crl, dcap-qvl)",
                           path));
    return gt_errf(GT_E_NOTFOUND, "unknown collateral");
}

// Reasons that mean "authentic, but Intel's TCB evaluation refuses it" (REJECTED, not INVALID).
static bool intel_tcb_refusal(const char *reason)
{
    return strstr(reason, "(TCB not supported)") != NULL ||
           strstr(reason, "TCB status Revoked") != NULL;
}

// The given collateral files into coll by kind; a file that is not collateral, or does not parse,
// is a reason in c->invalid (only running out of memory is an error).
static gt_err intel_collateral_load(gt_attest_check *c, const gt_appraise_params *p,
                                    gt_intel_collateral *coll)
{
    for (size_t i = 0; i < p->collateral_count; i++) {
        gt_intel_coll_kind kind = GT_INTEL_COLL_TCB_INFO;
        gt_err kerr = intel_coll_kind(&p->collateral[i], &kind, &c->invalid);
        if (kerr.code == GT_E_NOMEM) {
            return kerr;
        }
        if (!gt_is_ok(kerr)) {
            continue;  // the reason is already listed
        }
        gt_err aerr = gt_intel_collateral_add(coll, kind, p->collateral[i].data.data,
                                              p->collateral[i].data.len);
        if (!gt_is_ok(aerr)) {
            GT_TRY(gt_strlist_addf(&c->invalid, "collateral %s: %s",
                                   gt_attest_file_name(&p->collateral[i]), aerr.msg));
        }
    }
    return GT_OK;
}

// What the verdict says, into the check: validity, TCB status, each reason (a TCB refusal of an
// authentic quote is a rejection, everything else makes the evidence invalid), advisories as
// warnings, the FMSPC claim.
static gt_err intel_verdict_report(gt_attest_check *c, const gt_intel_verdict *v, const char *name)
{
    c->signature_valid = v->signature_valid;
    c->chain_valid = v->chain_valid;
    snprintf(c->tcb_status, sizeof c->tcb_status, "%s", v->tcb_status ? v->tcb_status : "");
    size_t stored = v->reason_count < GT_INTEL_MAX_REASONS ? v->reason_count : GT_INTEL_MAX_REASONS;
    bool authentic = v->signature_valid && v->chain_valid && v->pck_ext_valid;
    for (size_t i = 0; i < stored; i++) {
        bool refusal = authentic && intel_tcb_refusal(v->reasons[i]);
        GT_TRY(gt_strlist_addf(refusal ? &c->rejected : &c->invalid, "%s: %s", name,
                               v->reasons[i]));
    }
    if (v->reason_count > stored) {
        GT_TRY(gt_strlist_addf(&c->invalid, "%s: %zu more reasons", name,
                               v->reason_count - stored));
    }
    if (v->advisory_count > 0) {
        char list[256] = "";
        for (size_t i = 0; i < v->advisory_count; i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, v->advisories[i], sizeof list - strlen(list) - 1);
        }
        GT_TRY(gt_strlist_addf(&c->warnings, "%s: TCB %s, advisories: %s", name,
                               c->tcb_status[0] ? c->tcb_status : "n/a", list));
    }
    if (v->pck_ext_valid) {
        GT_TRY(gt_claims_add_hex(c->claims, "fmspc", v->pck.fmspc, sizeof v->pck.fmspc));
    }
    return GT_OK;
}

gt_err gt_attest_verify_intel(gt_attest_check *c, const gt_evidence *ev, const gt_attest_ctx *ctx)
{
    const char *name = gt_tee_type_name(ev->type);
    gt_intel_quote q;
    gt_err perr = gt_intel_quote_parse(&q, ev->body.data, ev->body.len);
    if (!gt_is_ok(perr)) {
        return gt_strlist_addf(&c->invalid, "%s quote: %s", name, perr.msg);
    }
    if (gt_intel_quote_is_tdx(&q) != (ev->type == GT_TEE_TDX)) {
        return gt_strlist_addf(&c->invalid, "%s quote: the quote is a%s", name,
                               gt_intel_quote_is_tdx(&q) ? " tdx quote" : "n sgx quote");
    }
    c->parsed = true;
    c->version = q.header.version;
    GT_TRY(gt_intel_quote_claims_json(&q, c->claims));

    const gt_appraise_params *p = ctx->p;
    gt_certvec roots = {0};
    gt_intel_collateral coll = {0};
    gt_intel_verdict *v = calloc(1, sizeof *v);
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, v != NULL, out, GT_E_NOMEM, "intel: out of memory");
    GT_TRY_GOTO(err, gt_certvec_add_files(&roots, p->roots, p->root_count, "root", &c->invalid),
                out);
    if (roots.n == 0) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "%s: no trusted root given (--root: the "
                                                      "Intel SGX Root CA)",
                                         name),
                    out);
    }
    GT_TRY_GOTO(err, intel_collateral_load(c, p, &coll), out);
    gt_intel_verify_params vp = {
        .roots = (const gt_x509 *const *)roots.v,
        .root_count = roots.n,
        .at = ctx->at,
        .collateral = p->collateral_count > 0 ? &coll : NULL,
    };
    gt_err verr = gt_intel_quote_verify(&q, &vp, v);
    if (verr.code != GT_E_NONE && verr.code != GT_E_AUTH) {
        err = verr;
        goto out;
    }
    err = intel_verdict_report(c, v, name);
out:
    free(v);
    gt_intel_collateral_free(&coll);
    gt_certvec_free(&roots);
    return err;
}
