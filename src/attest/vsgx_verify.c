// vsgx appraisal, both levels: the SGX quote's signature by the virtual QE's attestation key,
// the QE report binding that key (REPORTDATA = SHA-256(key || QE auth data), as DCAP), the QE
// identity; then the host TEE's evidence by its own verifier (sim root, Intel or AMD chain) and
// the binding that makes it vouch for this QE: its report_data must be
// gt_vsgx_host_report_data(platform id, attestation key, QE report). Host claims go under
// "host", the QE's under "qe"; the enclave's SGX claims are the top level.
#include "verify.h"

#include "intel_quote.h"

#include <stdio.h>
#include <string.h>

static gt_err sgx_claims(cJSON *obj, gt_span body)
{
    gt_intel_quote iq;
    memset(&iq, 0, sizeof iq);
    iq.header.version = 3;
    iq.body_type = GT_INTEL_BODY_SGX;
    gt_reader r = gt_reader_init(body.data, body.len);
    GT_TRY(gt_sgx_report_parse(&r, &iq.sgx));
    return gt_intel_quote_claims_json(&iq, obj);
}

// The QE report: REPORTDATA binds the attestation key, the key signed it, and it is the
// virtual QE's (MRENCLAVE, MRSIGNER, ISVPRODID; ISVSVN at least the current one).
static gt_err check_qe(gt_attest_check *c, const gt_vsgx_quote *q, bool *ok)
{
    uint8_t want[GT_REPORT_DATA_BYTES] = {0}, mre[32], mrs[32];
    gt_hash_ctx *h = NULL;
    gt_err err;
    GT_TRY_GOTO(err, gt_hash_new(&h, GT_HASH_SHA256), out);
    GT_TRY_GOTO(err, gt_hash_update(h, q->attestation_key, GT_VSGX_KEY_BYTES), out);
    GT_TRY_GOTO(err, gt_hash_update(h, q->qe_auth_data.data, q->qe_auth_data.len), out);
    GT_TRY_GOTO(err, gt_hash_final(h, want), out);
    GT_TRY_GOTO(err, gt_vsgx_qe_identity(mre, mrs), out);
    gt_sgx_report qe;
    gt_reader r = gt_reader_init(q->qe_report.data, q->qe_report.len);
    GT_TRY_GOTO(err, gt_sgx_report_parse(&r, &qe), out);
    *ok = false;
    if (!gt_ct_equal(qe.report_data, want, sizeof want)) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "vsgx: QE report data does not bind the "
                                         "attestation key (SHA-256(key || QE auth data))"), out);
    } else if (!gt_is_ok(gt_ecdsa_verify_raw(GT_EC_P256, GT_HASH_SHA256, q->qe_report_signature,
                                             GT_VSGX_SIG_BYTES, q->qe_report.data,
                                             q->qe_report.len, q->attestation_key,
                                             GT_VSGX_KEY_BYTES))) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "vsgx: QE report signature does not "
                                         "verify"), out);
    } else if (!gt_ct_equal(qe.mr_enclave, mre, 32) || !gt_ct_equal(qe.mr_signer, mrs, 32) ||
               qe.isv_prod_id != GT_VSGX_QE_ISVPRODID || qe.isv_svn < GT_VSGX_QE_ISVSVN) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "vsgx: the QE report is not gputravel's "
                                         "virtual QE (MRENCLAVE, MRSIGNER, ISVPRODID or ISVSVN)"),
                    out);
    } else {
        *ok = true;
    }
    cJSON *qo = cJSON_AddObjectToObject(c->claims, "qe");
    GT_ENSURE_GOTO(err, qo != NULL, out, GT_E_NOMEM, "vsgx: out of memory");
    GT_TRY_GOTO(err, gt_claims_add_hex(qo, "mr_enclave", qe.mr_enclave, 32), out);
    GT_TRY_GOTO(err, gt_claims_add_hex(qo, "mr_signer", qe.mr_signer, 32), out);
    GT_ENSURE_GOTO(err, cJSON_AddNumberToObject(qo, "isv_prod_id", qe.isv_prod_id) &&
                            cJSON_AddNumberToObject(qo, "isv_svn", qe.isv_svn),
                   out, GT_E_NOMEM, "vsgx: out of memory");
    GT_TRY_GOTO(err, gt_claims_add_hex(qo, "attestation_key", q->attestation_key, 64), out);
out:
    gt_hash_free(h);
    return err;
}

static gt_err copy_prefixed(gt_strlist *to, const gt_strlist *from, const char *host)
{
    for (size_t i = 0; i < from->count; i++) {
        GT_TRY(gt_strlist_addf(to, "vsgx host %s: %s", host, from->items[i]));
    }
    return GT_OK;
}

// The host evidence's report_data, from its claims, against the binding this quote needs.
static gt_err check_binding(gt_attest_check *c, const gt_vsgx_quote *q, const cJSON *hclaims,
                            bool *ok)
{
    uint8_t want[GT_REPORT_DATA_BYTES], got[GT_REPORT_DATA_BYTES];
    GT_TRY(gt_vsgx_host_report_data(want, q->platform_id, q->attestation_key,
                                    q->qe_report.data));
    const cJSON *rd = gt_claims_get(hclaims, "report_data");
    size_t n = 0;
    *ok = cJSON_IsString(rd) && gt_is_ok(gt_hex_decode(got, sizeof got, &n, rd->valuestring)) &&
          n == sizeof got && gt_ct_equal(got, want, sizeof want);
    if (!*ok) {
        return gt_strlist_addf(&c->invalid, "vsgx: the host evidence's report_data does not bind "
                                            "this quote's attestation key, QE report and platform");
    }
    return GT_OK;
}

static gt_err run_host_verifier(gt_attest_check *hc, const gt_evidence *hev,
                                const gt_attest_ctx *ctx)
{
    switch (hev->type) {
    case GT_TEE_SIM:
        hc->insecure_simulation = true;
        return gt_attest_verify_sim(hc, hev, ctx);
    case GT_TEE_TDX:
        return gt_attest_verify_intel(hc, hev, ctx);
    case GT_TEE_SNP:
        return gt_attest_verify_snp(hc, hev, ctx);
    default:
        return gt_strlist_addf(&hc->invalid, "host evidence of type %s cannot root a virtual QE "
                                             "(sim, tdx or snp)", gt_tee_type_name(hev->type));
    }
}

// Verifies the host evidence and moves its verdict into c (claims under "host").
static gt_err check_host(gt_attest_check *c, const gt_vsgx_quote *q, const gt_attest_ctx *ctx,
                         bool *ok)
{
    gt_evidence hev = {0};
    gt_attest_check hc = {0};
    gt_err err = GT_OK;
    *ok = false;
    gt_err perr = gt_evidence_parse(&hev, q->host_evidence.data, q->host_evidence.len,
                                    GT_TEE_AUTO);
    if (!gt_is_ok(perr)) {
        return gt_strlist_addf(&c->invalid, "vsgx host evidence: %s", perr.msg);
    }
    const char *host = gt_tee_type_name(hev.type);
    GT_ENSURE_GOTO(err, (hc.claims = cJSON_AddObjectToObject(c->claims, "host")) != NULL, out,
                   GT_E_NOMEM, "vsgx: out of memory");
    GT_ENSURE_GOTO(err, cJSON_AddStringToObject(hc.claims, "tee", host), out, GT_E_NOMEM,
                   "vsgx: out of memory");
    GT_TRY_GOTO(err, run_host_verifier(&hc, &hev, ctx), out);
    if (hc.tcb_status[0] != '\0') {
        GT_ENSURE_GOTO(err, cJSON_AddStringToObject(hc.claims, "tcb_status", hc.tcb_status), out,
                       GT_E_NOMEM, "vsgx: out of memory");
    }
    snprintf(c->tcb_status, sizeof c->tcb_status, "%s", hc.tcb_status);
    c->chain_valid = hc.chain_valid;
    c->insecure_simulation = hc.insecure_simulation;
    GT_TRY_GOTO(err, copy_prefixed(&c->invalid, &hc.invalid, host), out);
    GT_TRY_GOTO(err, copy_prefixed(&c->rejected, &hc.rejected, host), out);
    GT_TRY_GOTO(err, copy_prefixed(&c->warnings, &hc.warnings, host), out);
    bool bound = false;
    if (hc.parsed) {
        GT_TRY_GOTO(err, check_binding(c, q, hc.claims, &bound), out);
    }
    *ok = hc.parsed && hc.signature_valid && hc.invalid.count == 0 && bound;
out:
    hc.claims = NULL;  // owned by c->claims
    gt_strlist_free(&hc.invalid);
    gt_strlist_free(&hc.rejected);
    gt_strlist_free(&hc.warnings);
    gt_evidence_free(&hev);
    return err;
}

gt_err gt_attest_verify_vsgx(gt_attest_check *c, const gt_evidence *ev, const gt_attest_ctx *ctx)
{
    gt_vsgx_quote q;
    gt_err perr = gt_vsgx_quote_parse(&q, ev->body.data, ev->body.len);
    if (!gt_is_ok(perr)) {
        return gt_strlist_addf(&c->invalid, "%s", perr.msg);
    }
    c->parsed = true;
    c->version = 3;
    GT_TRY(sgx_claims(c->claims, q.body));
    GT_TRY(gt_claims_add_hex(c->claims, "platform_id", q.platform_id, sizeof q.platform_id));
    bool quote_ok = gt_is_ok(gt_ecdsa_verify_raw(GT_EC_P256, GT_HASH_SHA256, q.signature,
                                                 GT_VSGX_SIG_BYTES, q.signed_region.data,
                                                 q.signed_region.len, q.attestation_key,
                                                 GT_VSGX_KEY_BYTES));
    if (!quote_ok) {
        GT_TRY(gt_strlist_addf(&c->invalid, "vsgx: quote signature does not verify with the "
                                            "attestation key"));
    }
    bool qe_ok = false, host_ok = false;
    GT_TRY(check_qe(c, &q, &qe_ok));
    GT_TRY(check_host(c, &q, ctx, &host_ok));
    c->signature_valid = quote_ok && qe_ok && host_ok;
    c->chain_valid = c->chain_valid && c->signature_valid;
    return GT_OK;
}
