// attest/evidence.c: appraisal: dispatch to the per-type verifier, then policy and binding
// checks (detection, the envelope and report_data: envelope.c).
#include "policy.h"
#include "verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// ---- appraisal ---------------------------------------------------------------------------------

static void attest_check_free(gt_attest_check *c)
{
    cJSON_Delete(c->claims);
    gt_strlist_free(&c->invalid);
    gt_strlist_free(&c->rejected);
    gt_strlist_free(&c->warnings);
    memset(c, 0, sizeof *c);
}

static gt_err strlist_move(char ***items, size_t *count, gt_strlist *l)
{
    *items = l->items;
    *count = l->count;
    l->items = NULL;
    l->count = 0;
    return GT_OK;
}

static gt_err appraisal_begin(gt_appraisal *out)
{
    memset(out, 0, sizeof *out);
    out->verdict = GT_VERDICT_INVALID;
    out->claims = cJSON_CreateObject();
    GT_ENSURE(out->claims != NULL, GT_E_NOMEM, "appraisal: out of memory");
    return GT_OK;
}

// The type's own verifier; sim evidence, and vsgx rooted in sim evidence, are simulation.
static gt_err verify_by_type(gt_attest_check *c, const gt_evidence *ev, const gt_attest_ctx *ctx)
{
    switch (ev->type) {
    case GT_TEE_SIM:
        c->insecure_simulation = true;
        return gt_attest_verify_sim(c, ev, ctx);
    case GT_TEE_TDX:
    case GT_TEE_SGX:
        return gt_attest_verify_intel(c, ev, ctx);
    case GT_TEE_SNP:
        return gt_attest_verify_snp(c, ev, ctx);
    case GT_TEE_NVGPU:
        return gt_attest_verify_nvgpu(c, ev, ctx);
    case GT_TEE_VSGX:
        return gt_attest_verify_vsgx(c, ev, ctx);
    case GT_TEE_AUTO:
    default:
        return gt_strlist_addf(&c->invalid, "evidence: unknown type %d", (int)ev->type);
    }
}

// Evidence that is not authentic: the claims say nothing, so no policy reason is added on top.
// The verifier's refusals (e.g. an unsupported TCB level) still count: every reason, and one
// naming what failed when the verifier gave none.
static gt_err invalid_reasons(const gt_attest_check *c, gt_tee_type type, gt_strlist *reasons)
{
    for (size_t i = 0; i < c->invalid.count; i++) {
        GT_TRY(gt_strlist_addf(reasons, "%s", c->invalid.items[i]));
    }
    for (size_t i = 0; i < c->rejected.count; i++) {
        GT_TRY(gt_strlist_addf(reasons, "%s", c->rejected.items[i]));
    }
    if (reasons->count == 0) {
        GT_TRY(gt_strlist_addf(reasons, "%s: evidence %s", gt_tee_type_name(type),
                               !c->parsed            ? "did not parse"
                               : !c->signature_valid ? "signature not verified"
                                                     : "chain not verified"));
    }
    return GT_OK;
}

gt_err gt_attest_appraise(gt_appraisal *out, const gt_evidence *ev, const gt_policy *policy,
                          const gt_appraise_params *params)
{
    GT_TRY(appraisal_begin(out));
    static const gt_appraise_params no_params;
    if (params == NULL) {
        params = &no_params;
    }
    gt_attest_ctx ctx = {.p = params, .at = params->at != 0 ? params->at : (int64_t)time(NULL)};
    gt_policy *owned_policy = NULL;
    gt_attest_check c = {0};
    gt_strlist reasons = {0}, warnings = {0};
    gt_err err = GT_OK;

    out->type = ev->type;
    out->version = ev->version;
    c.version = ev->version;
    GT_ENSURE_GOTO(err, (c.claims = cJSON_CreateObject()) != NULL, out, GT_E_NOMEM,
                   "appraisal: out of memory");
    GT_ENSURE_GOTO(err, cJSON_AddStringToObject(c.claims, "tee", gt_tee_type_name(ev->type)),
                   out, GT_E_NOMEM, "appraisal: out of memory");
    if (policy == NULL) {
        GT_TRY_GOTO(err, gt_policy_default(&owned_policy), out);
        policy = owned_policy;
    }

    GT_TRY_GOTO(err, verify_by_type(&c, ev, &ctx), out);
    out->version = c.version;
    out->insecure_simulation = c.insecure_simulation;
    out->signature_valid = c.signature_valid;
    out->chain_valid = c.chain_valid;
    snprintf(out->tcb_status, sizeof out->tcb_status, "%s", c.tcb_status);

    for (size_t i = 0; i < c.warnings.count; i++) {
        GT_TRY_GOTO(err, gt_strlist_addf(&warnings, "%s", c.warnings.items[i]), out);
    }
    if (c.invalid.count > 0 || !c.parsed || !c.signature_valid || !c.chain_valid) {
        GT_TRY_GOTO(err, invalid_reasons(&c, ev->type, &reasons), out);
        out->verdict = GT_VERDICT_INVALID;
    } else {
        for (size_t i = 0; i < c.rejected.count; i++) {
            GT_TRY_GOTO(err, gt_strlist_addf(&reasons, "%s", c.rejected.items[i]), out);
        }
        GT_TRY_GOTO(err, gt_policy_evaluate(policy, ev->type, c.claims, c.tcb_status, params,
                                            &reasons, &warnings),
                    out);
        out->verdict = reasons.count == 0 ? GT_VERDICT_ACCEPTED : GT_VERDICT_REJECTED;
    }
    if (out->insecure_simulation) {
        GT_TRY_GOTO(err, gt_strlist_addf(&warnings, "%s: sim evidence proves no hardware "
                                         "isolation", GT_INSECURE_SIMULATION),
                    out);
        gt_log_warn("attest: %s evidence appraised (%s)", GT_INSECURE_SIMULATION,
                    gt_verdict_name(out->verdict));
    }
    cJSON_Delete(out->claims);
    out->claims = c.claims;
    c.claims = NULL;
    GT_TRY_GOTO(err, strlist_move(&out->reasons, &out->reason_count, &reasons), out);
    GT_TRY_GOTO(err, strlist_move(&out->warnings, &out->warning_count, &warnings), out);
out:
    attest_check_free(&c);
    gt_strlist_free(&reasons);
    gt_strlist_free(&warnings);
    gt_policy_free(owned_policy);
    if (!gt_is_ok(err)) {
        gt_appraisal_free(out);
    }
    return err;
}

gt_err gt_attest_appraise_bytes(gt_appraisal *out, const uint8_t *data, size_t len,
                                gt_tee_type expect, const gt_policy *policy,
                                const gt_appraise_params *params)
{
    gt_evidence ev = {0};
    gt_err perr = gt_evidence_parse(&ev, data, len, expect);
    if (gt_is_ok(perr)) {
        gt_err err = gt_attest_appraise(out, &ev, policy, params);
        gt_evidence_free(&ev);
        return err;
    }
    GT_TRY(appraisal_begin(out));
    out->type = expect;
    gt_strlist reasons = {0};
    gt_err err = gt_strlist_addf(&reasons, "%s", perr.msg[0] ? perr.msg : gt_code_text(perr.code));
    if (gt_is_ok(err) && expect != GT_TEE_AUTO) {
        err = cJSON_AddStringToObject(out->claims, "tee", gt_tee_type_name(expect)) != NULL
                  ? GT_OK
                  : gt_errf(GT_E_NOMEM, "appraisal: out of memory");
    }
    if (!gt_is_ok(err)) {
        gt_strlist_free(&reasons);
        gt_appraisal_free(out);
        return err;
    }
    out->insecure_simulation = expect == GT_TEE_SIM;
    return strlist_move(&out->reasons, &out->reason_count, &reasons);
}

void gt_appraisal_free(gt_appraisal *a)
{
    cJSON_Delete(a->claims);
    gt_strlist r = {a->reasons, a->reason_count}, w = {a->warnings, a->warning_count};
    gt_strlist_free(&r);
    gt_strlist_free(&w);
    memset(a, 0, sizeof *a);
    a->verdict = GT_VERDICT_INVALID;
}

bool gt_appraisal_has_reason(const gt_appraisal *a, const char *needle)
{
    gt_strlist r = {a->reasons, a->reason_count};
    return gt_strlist_contains(&r, needle);
}

cJSON *gt_appraisal_to_json(const gt_appraisal *a)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) {
        return NULL;
    }
    bool ok = true;
    if (a->type == GT_TEE_AUTO) {
        ok &= cJSON_AddNullToObject(o, "type") != NULL;
    } else {
        ok &= cJSON_AddStringToObject(o, "type", gt_tee_type_name(a->type)) != NULL;
    }
    ok &= cJSON_AddNumberToObject(o, "version", a->version) != NULL;
    ok &= cJSON_AddBoolToObject(o, "signature_valid", a->signature_valid) != NULL;
    ok &= cJSON_AddBoolToObject(o, "chain_valid", a->chain_valid) != NULL;
    if (a->tcb_status[0] != '\0') {
        ok &= cJSON_AddStringToObject(o, "tcb_status", a->tcb_status) != NULL;
    } else {
        ok &= cJSON_AddNullToObject(o, "tcb_status") != NULL;
    }
    ok &= cJSON_AddStringToObject(o, "security",
                                  a->insecure_simulation ? GT_INSECURE_SIMULATION : "hardware") !=
          NULL;
    cJSON *claims = a->claims ? cJSON_Duplicate(a->claims, true) : cJSON_CreateObject();
    ok &= claims != NULL && cJSON_AddItemToObject(o, "claims", claims);
    ok &= cJSON_AddStringToObject(o, "verdict", gt_verdict_name(a->verdict)) != NULL;
    cJSON *reasons = cJSON_AddArrayToObject(o, "reasons");
    ok &= reasons != NULL;
    for (size_t i = 0; ok && i < a->reason_count; i++) {
        cJSON *s = cJSON_CreateString(a->reasons[i]);
        ok &= s != NULL && cJSON_AddItemToArray(reasons, s);
    }
    cJSON *warnings = cJSON_AddArrayToObject(o, "warnings");
    ok &= warnings != NULL;
    for (size_t i = 0; ok && i < a->warning_count; i++) {
        cJSON *s = cJSON_CreateString(a->warnings[i]);
        ok &= s != NULL && cJSON_AddItemToArray(warnings, s);
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}
