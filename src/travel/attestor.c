// Attested-channel callbacks backed by the attest layer and bound to the agreement.
#include <gputravel/travel.h>

#include <string.h>

static gt_err tls_report_data(uint8_t rd[GT_REPORT_DATA_BYTES], const gt_agreement *a,
                              const uint8_t binding[GT_NET_BINDING_BYTES])
{
    return gt_attest_report_data_build(rd, GT_TLS_REPORT_DATA_TAG, binding, GT_NET_BINDING_BYTES,
                                       NULL, 0, a->hash, sizeof a->hash);
}

static gt_err collect(void *ctx, const uint8_t binding[GT_NET_BINDING_BYTES], gt_buf *out)
{
    gt_tee_attestor *t = ctx;
    uint8_t rd[GT_REPORT_DATA_BYTES];
    GT_TRY(tls_report_data(rd, t->agreement, binding));
    gt_evidence ev;
    memset(&ev, 0, sizeof ev);
    GT_TRY(gt_attest_collect(&ev, &t->collect, rd));
    gt_err err = gt_evidence_encode(&ev, out);
    gt_evidence_free(&ev);
    return err;
}

static const gt_measurement_list *peer_list(const gt_tee_attestor *t)
{
    switch (t->peer_role) {
    case GT_PEER_TRAINER: return &t->agreement->trainer_measurements;
    case GT_PEER_DEVICE: return &t->agreement->device_measurements;
    default: return NULL;  // holders are named by their identity keys, not measurements
    }
}

static gt_err appraise(void *ctx, const uint8_t *ev, size_t len,
                       const uint8_t binding[GT_NET_BINDING_BYTES])
{
    gt_tee_attestor *t = ctx;
    uint8_t rd[GT_REPORT_DATA_BYTES];
    GT_TRY(tls_report_data(rd, t->agreement, binding));
    gt_appraise_params p = {
        .roots = t->roots, .root_count = t->root_count, .expected_report_data = rd,
        .agreement_hash = t->agreement->hash, .agreement_hash_len = sizeof t->agreement->hash,
    };
    gt_appraisal ap;
    GT_TRY(gt_attest_appraise_bytes(&ap, ev, len, GT_TEE_AUTO, t->policy, &p));
    gt_err err = GT_OK;
    if (ap.verdict != GT_VERDICT_ACCEPTED) {
        err = gt_errf(GT_E_POLICY, "%s evidence %s: %s", gt_tee_type_name(ap.type),
                      gt_verdict_name(ap.verdict), ap.reason_count ? ap.reasons[0] : "?");
        goto out;
    }
    const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ap.claims, "measurement"));
    if (m == NULL) {
        m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ap.claims, "mr_td"));
    }
    const gt_measurement_list *list = peer_list(t);
    if (list != NULL && list->count > 0) {
        uint8_t value[GT_MEASUREMENT_BYTES];
        GT_ENSURE_GOTO(err, m != NULL && gt_is_ok(gt_hex_decode_exact(value, sizeof value, m)),
                       out, GT_E_POLICY, "%s evidence carries no 48-byte measurement",
                       gt_tee_type_name(ap.type));
        GT_ENSURE_GOTO(err, gt_measurement_allowed(list, value), out, GT_E_POLICY,
                       "measurement %.16s... is not one the agreement accepts", m);
    }
    snprintf(t->peer_summary, sizeof t->peer_summary, "%s measurement %.16s...%s",
             gt_tee_type_name(ap.type), m ? m : "(none)",
             ap.insecure_simulation ? " (" GT_INSECURE_SIMULATION ")" : "");
out:
    gt_appraisal_free(&ap);
    return err;
}

gt_net_attestor gt_tee_attestor_bind(gt_tee_attestor *t)
{
    return (gt_net_attestor){.collect = collect, .appraise = appraise, .ctx = t};
}
