// attest/nvgpu_adapter.c: NVIDIA SPDM transcripts (nvgpu_evidence.h) as a gt_attest_check: the
// GPU chain from --cert (leaf first) to a caller root, verify; every reason is INVALID.
#include "chain.h"
#include "verify.h"

#include "nvgpu_evidence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gt_err gt_attest_verify_nvgpu(gt_attest_check *c, const gt_evidence *ev, const gt_attest_ctx *ctx)
{
    gt_nvgpu_evidence *e = calloc(1, sizeof *e);
    GT_ENSURE(e != NULL, GT_E_NOMEM, "nvgpu: out of memory");
    gt_certvec roots = {0}, chain = {0};
    const gt_x509 **inter = NULL;
    gt_err err = GT_OK;
    gt_err perr = gt_nvgpu_evidence_parse(e, ev->body.data, ev->body.len);
    if (!gt_is_ok(perr)) {
        err = gt_strlist_addf(&c->invalid, "nvgpu evidence: %s", perr.msg);
        goto out;
    }
    c->parsed = true;
    c->version = e->req_version;
    GT_TRY_GOTO(err, gt_nvgpu_evidence_claims_json(e, c->claims), out);
    gt_span fwid = {0};
    if (gt_is_ok(gt_nvgpu_opaque_find(e, GT_NVGPU_OPAQUE_FWID, &fwid)) && fwid.len <= 64) {
        GT_TRY_GOTO(err, gt_claims_add_hex(c->claims, "fwid", fwid.data, fwid.len), out);
    }

    const gt_appraise_params *p = ctx->p;
    GT_TRY_GOTO(err, gt_certvec_add_files(&roots, p->roots, p->root_count, "root", &c->invalid),
                out);
    GT_TRY_GOTO(err, gt_certvec_add_files(&chain, p->certs, p->cert_count, "cert", &c->invalid),
                out);
    if (chain.n == 0) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "nvgpu: no GPU certificate chain given "
                                                      "(--cert, leaf first)"),
                    out);
        goto out;
    }
    size_t inter_n = chain.n - 1 + roots.n;
    inter = calloc(inter_n ? inter_n : 1, sizeof *inter);
    GT_ENSURE_GOTO(err, inter != NULL, out, GT_E_NOMEM, "nvgpu: out of memory");
    for (size_t i = 1; i < chain.n; i++) {
        inter[i - 1] = chain.v[i];
    }
    for (size_t i = 0; i < roots.n; i++) {
        inter[chain.n - 1 + i] = roots.v[i];
    }
    // Freshness (the request nonce) is checked by the framework's binding rules, so that a
    // stale nonce is REJECTED rather than INVALID.
    gt_nvgpu_verify_params vp = {
        .leaf = chain.v[0],
        .intermediates = inter,
        .intermediate_count = inter_n,
        .roots = (const gt_x509 *const *)roots.v,
        .root_count = roots.n,
        .at = ctx->at,
    };
    gt_nvgpu_verdict v;
    GT_TRY_GOTO(err, gt_nvgpu_evidence_verify(&v, e, &vp), out);
    c->signature_valid = v.signature_valid;
    c->chain_valid = v.chain_valid;
    size_t stored = v.reason_count < GT_NVGPU_MAX_REASONS ? v.reason_count : GT_NVGPU_MAX_REASONS;
    for (size_t i = 0; i < stored; i++) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "nvgpu: %s", v.reasons[i]), out);
    }
    if (v.reason_count > stored) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "nvgpu: %zu more reasons",
                                         v.reason_count - stored),
                    out);
    }
out:
    free(inter);
    gt_certvec_free(&roots);
    gt_certvec_free(&chain);
    free(e);
    return err;
}
