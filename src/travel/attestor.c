// Attested-channel callbacks backed by the attest layer and bound to the agreement.
#include <gputravel/travel.h>

#include <string.h>

static gt_err tls_report_data(uint8_t rd[GT_REPORT_DATA_BYTES],
                              const uint8_t agreement_hash[GT_SHA256_BYTES],
                              const uint8_t binding[GT_NET_BINDING_BYTES])
{
    return gt_attest_report_data_build(rd, GT_TLS_REPORT_DATA_TAG, binding, GT_NET_BINDING_BYTES,
                                       NULL, 0, agreement_hash, GT_SHA256_BYTES);
}

// What this side sends: GT_TLS_EVIDENCE_MAGIC || our agreement hash (32) || the evidence. The
// hash in the clear is a hint for the peer's error message only ("different agreement"): the
// peer still requires the evidence's report_data to bind its own agreement, so a lying hint can
// change what a refusal says, never what is accepted.
static gt_err collect(void *ctx, const uint8_t binding[GT_NET_BINDING_BYTES], gt_buf *out)
{
    gt_tee_attestor *t = ctx;
    uint8_t rd[GT_REPORT_DATA_BYTES];
    GT_TRY(tls_report_data(rd, t->agreement->hash, binding));
    gt_evidence ev;
    memset(&ev, 0, sizeof ev);
    GT_TRY(gt_attest_collect(&ev, &t->collect, rd));
    gt_err err = gt_buf_append(out, GT_TLS_EVIDENCE_MAGIC, GT_TLS_EVIDENCE_MAGIC_BYTES);
    if (gt_is_ok(err)) {
        err = gt_buf_append(out, t->agreement->hash, sizeof t->agreement->hash);
    }
    if (gt_is_ok(err)) {
        err = gt_evidence_encode(&ev, out);
    }
    gt_evidence_free(&ev);
    return err;
}

gt_err gt_tls_evidence_split(const uint8_t *msg, size_t len, gt_span *evidence,
                             uint8_t agreement[GT_SHA256_BYTES], bool *has_agreement)
{
    gt_reader r = gt_reader_init(msg, len);
    uint8_t magic[GT_TLS_EVIDENCE_MAGIC_BYTES];
    *has_agreement = false;
    memset(agreement, 0, GT_SHA256_BYTES);
    if (gt_is_ok(gt_reader_bytes(&r, magic, sizeof magic)) &&
        memcmp(magic, GT_TLS_EVIDENCE_MAGIC, sizeof magic) == 0) {
        GT_TRY(gt_err_wrap(gt_reader_bytes(&r, agreement, GT_SHA256_BYTES),
                           "peer evidence: its agreement hash"));
        *has_agreement = true;
        return gt_reader_span(&r, gt_reader_left(&r), evidence);
    }
    // A peer that sends the bare evidence (an older build): no hint, the evidence alone.
    *evidence = (gt_span){msg, len};
    return GT_OK;
}

static const gt_measurement_list *peer_list(const gt_tee_attestor *t)
{
    switch (t->peer_role) {
    case GT_PEER_TRAINER: return &t->agreement->trainer_measurements;
    case GT_PEER_DEVICE: return &t->agreement->device_measurements;
    default: return NULL;  // holders are named by their identity keys, not measurements
    }
}

static const char *role_name(gt_peer_role r)
{
    switch (r) {
    case GT_PEER_TRAINER: return "trainer";
    case GT_PEER_HOLDER: return "holder";
    case GT_PEER_DEVICE: return "device";
    default: return "peer";
    }
}

// True when the evidence is authentic and its report_data is this very session's binding under
// the agreement the peer named (theirs, not ours): the one reason it failed is the agreement.
static bool binds_agreement(const gt_appraisal *ap, const uint8_t theirs[GT_SHA256_BYTES],
                            const gt_agreement *ours, const uint8_t binding[GT_NET_BINDING_BYTES])
{
    if (ap->verdict != GT_VERDICT_REJECTED || !ap->signature_valid || !ap->chain_valid ||
        memcmp(theirs, ours->hash, GT_SHA256_BYTES) == 0) {
        return false;
    }
    uint8_t want[GT_REPORT_DATA_BYTES], got[GT_REPORT_DATA_BYTES];
    const char *hex =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ap->claims, "report_data"));
    return hex != NULL && gt_is_ok(gt_hex_decode_exact(got, sizeof got, hex)) &&
           gt_is_ok(tls_report_data(want, theirs, binding)) &&
           gt_ct_equal(got, want, sizeof want);
}

static gt_err appraise(void *ctx, const uint8_t *ev, size_t len,
                       const uint8_t binding[GT_NET_BINDING_BYTES])
{
    gt_tee_attestor *t = ctx;
    uint8_t rd[GT_REPORT_DATA_BYTES], theirs[GT_SHA256_BYTES];
    GT_TRY(tls_report_data(rd, t->agreement->hash, binding));
    gt_span body = {0};
    bool has_theirs = false;
    GT_TRY(gt_tls_evidence_split(ev, len, &body, theirs, &has_theirs));
    gt_appraise_params p = {
        .roots = t->roots, .root_count = t->root_count, .expected_report_data = rd,
        .agreement_hash = t->agreement->hash, .agreement_hash_len = sizeof t->agreement->hash,
    };
    gt_appraisal ap;
    GT_TRY(gt_attest_appraise_bytes(&ap, body.data, body.len, GT_TEE_AUTO, t->policy, &p));
    gt_err err = GT_OK;
    if (ap.verdict != GT_VERDICT_ACCEPTED) {
        if (has_theirs && binds_agreement(&ap, theirs, t->agreement, binding)) {
            char ours_hex[2 * GT_SHA256_BYTES + 1], theirs_hex[2 * GT_SHA256_BYTES + 1];
            gt_hex_encode(ours_hex, sizeof ours_hex, t->agreement->hash, GT_SHA256_BYTES);
            gt_hex_encode(theirs_hex, sizeof theirs_hex, theirs, GT_SHA256_BYTES);
            // The peer's role is named: a refused client reads this as the server's reason.
            err = gt_errf(GT_E_POLICY, "different agreement: ours %.16s..., yours (the %s's) "
                          "%.16s... (each party needs the same file, byte for byte)", ours_hex,
                          role_name(t->peer_role), theirs_hex);
        } else {
            err = gt_errf(GT_E_POLICY, "%s evidence %s: %s", gt_tee_type_name(ap.type),
                          gt_verdict_name(ap.verdict), ap.reason_count ? ap.reasons[0] : "?");
        }
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
