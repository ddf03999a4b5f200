// A holder named by enclave (travel.h "A holder named by enclave"): the ENCLAVE_QUOTE message,
// the REPORTDATA it must carry, and the trainer's appraisal of it under the agreement's
// holders[i].enclave fields.
#include <gputravel/travel.h>

#include <stdio.h>
#include <string.h>

gt_err gt_hp_enclave_quote_write(gt_writer *w, gt_span evidence)
{
    GT_ENSURE(evidence.len > 0 && evidence.len <= GT_HP_ENCLAVE_QUOTE_MAX - 5, GT_E_LIMIT,
              "enclave quote: %zu bytes of evidence", evidence.len);
    GT_TRY(gt_writer_u8(w, 1));
    GT_TRY(gt_writer_u32le(w, (uint32_t)evidence.len));
    return gt_writer_bytes(w, evidence.data, evidence.len);
}

gt_err gt_hp_enclave_quote_parse(gt_span body, gt_span *evidence)
{
    *evidence = (gt_span){0};
    gt_reader r = gt_reader_init(body.data, body.len);
    uint8_t version = 0;
    uint32_t n = 0;
    GT_TRY(gt_reader_u8(&r, &version));
    GT_ENSURE(version == 1, GT_E_UNSUPPORTED, "enclave quote: version %u", version);
    GT_TRY(gt_reader_u32le(&r, &n));
    GT_ENSURE(n > 0 && n <= GT_HP_ENCLAVE_QUOTE_MAX, GT_E_FORMAT,
              "enclave quote: evidence of %u bytes", n);
    GT_TRY(gt_reader_span(&r, n, evidence));
    gt_err err = gt_reader_expect_end(&r, "enclave quote");
    if (!gt_is_ok(err)) {
        *evidence = (gt_span){0};
    }
    return err;
}

gt_err gt_holder_quote_session(uint8_t out[GT_SHA256_BYTES],
                               const uint8_t identity_key[GT_ED25519_PUBLIC_BYTES],
                               const uint8_t binding[GT_NET_BINDING_BYTES])
{
    gt_hash_ctx *h = NULL;
    GT_TRY(gt_hash_new(&h, GT_HASH_SHA256));
    gt_err err = gt_hash_update(h, GT_HOLDER_QUOTE_TAG, sizeof GT_HOLDER_QUOTE_TAG);  // with NUL
    if (gt_is_ok(err)) {
        err = gt_hash_update(h, identity_key, GT_ED25519_PUBLIC_BYTES);
    }
    if (gt_is_ok(err)) {
        err = gt_hash_update(h, binding, GT_NET_BINDING_BYTES);
    }
    if (gt_is_ok(err)) {
        err = gt_hash_final(h, out);
    }
    gt_hash_free(h);
    return err;
}

gt_err gt_holder_quote_reportdata(uint8_t out[GT_REPORT_DATA_BYTES],
                                  const uint8_t agreement[GT_SHA256_BYTES],
                                  const uint8_t identity_key[GT_ED25519_PUBLIC_BYTES],
                                  const uint8_t binding[GT_NET_BINDING_BYTES])
{
    _Static_assert(GT_REPORT_DATA_BYTES == 2 * GT_SHA256_BYTES, "two halves");
    memcpy(out, agreement, GT_SHA256_BYTES);
    return gt_holder_quote_session(out + GT_SHA256_BYTES, identity_key, binding);
}

gt_err gt_holder_quote_policy_json(const gt_agreement_enclave *e, bool allow_simulation,
                                   char *json, size_t cap)
{
    GT_ENSURE(e->present && (e->has_mrsigner || e->has_mrenclave), GT_E_ARG,
              "enclave policy: the holder is not named by enclave");
    char mrsigner[2 * 32 + 1] = "", mrenclave[2 * 32 + 1] = "", prodid[32] = "";
    gt_hex_encode(mrsigner, sizeof mrsigner, e->mrsigner, 32);
    gt_hex_encode(mrenclave, sizeof mrenclave, e->mrenclave, 32);
    if (e->has_isvprodid) {
        snprintf(prodid, sizeof prodid, "\"isvprodid\": %u, ", e->isvprodid);
    }
    char signer[96] = "", encl[96] = "";
    if (e->has_mrsigner) {
        snprintf(signer, sizeof signer, "\"mrsigner\": [\"%s\"], ", mrsigner);
    }
    if (e->has_mrenclave) {
        snprintf(encl, sizeof encl, "\"mrenclave\": [\"%s\"], ", mrenclave);
    }
    // The top-level allow_debug stays false: it alone governs the host TEE's debug.
    int n = snprintf(json, cap,
                     "{\"accepted_tee_types\": [\"vsgx\", \"sim\", \"tdx\", \"snp\"], "
                     "\"allow_simulation\": %s, \"sgx_enclave\": {%s%s%s\"min_isvsvn\": %u, "
                     "\"allow_debug\": %s}}",
                     allow_simulation ? "true" : "false", signer, encl, prodid, e->min_isvsvn,
                     e->debug ? "true" : "false");
    GT_ENSURE(n > 0 && (size_t)n < cap, GT_E_LIMIT, "enclave policy: %d bytes", n);
    return GT_OK;
}

// Which agreement field a policy reason is about ("sgx_enclave.mrsigner" -> "enclave.mrsigner").
static const char *field_of(const char *reason)
{
    static const struct {
        const char *needle, *field;
    } map[] = {{"host ", "allow_simulation and the host TEE's evidence"},
               {"sgx_enclave.mrsigner", "enclave.mrsigner"},
               {"sgx_enclave.mrenclave", "enclave.mrenclave"},
               {"sgx_enclave.isvprodid", "enclave.isvprodid"},
               {"sgx_enclave.min_isvsvn", "enclave.min_isvsvn"},
               {"debug", "enclave.debug"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strstr(reason, map[i].needle) != NULL) {
            return map[i].field;
        }
    }
    return NULL;
}

static bool claim_hex(const cJSON *claims, const char *name, uint8_t *out, size_t n)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(claims, name));
    return s != NULL && gt_is_ok(gt_hex_decode_exact(out, n, s));
}

static uint16_t claim_u16(const cJSON *claims, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(claims, name);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 65535
               ? (uint16_t)v->valuedouble
               : 0;
}

// Authentic evidence whose REPORTDATA is not this session's: say which half differs.
static gt_err binding_refusal(const gt_appraisal *ap, const gt_agreement *a, const char *name,
                              const uint8_t want[GT_REPORT_DATA_BYTES])
{
    uint8_t got[GT_REPORT_DATA_BYTES];
    if (!claim_hex(ap->claims, "report_data", got, sizeof got)) {
        return gt_errf(GT_E_POLICY, "holder %s: its enclave quote carries no REPORTDATA", name);
    }
    if (!gt_ct_equal(got, a->hash, GT_SHA256_BYTES)) {
        char hex[2 * GT_SHA256_BYTES + 1];
        gt_hex_encode(hex, sizeof hex, got, GT_SHA256_BYTES);
        return gt_errf(GT_E_POLICY, "holder %s: its enclave quote is for another agreement "
                       "(%.16s...): the holder enclave's terms are not this agreement's", name,
                       hex);
    }
    if (!gt_ct_equal(got + GT_SHA256_BYTES, want + GT_SHA256_BYTES, GT_SHA256_BYTES)) {
        return gt_errf(GT_E_POLICY, "holder %s: its enclave quote is bound to another session or "
                       "another holder identity key (replayed or relayed): refused", name);
    }
    return GT_OK;
}

static void seen_fill(const gt_appraisal *ap, gt_holder_enclave_seen *seen)
{
    memset(seen, 0, sizeof *seen);
    (void)claim_hex(ap->claims, "mr_enclave", seen->mrenclave, sizeof seen->mrenclave);
    (void)claim_hex(ap->claims, "mr_signer", seen->mrsigner, sizeof seen->mrsigner);
    seen->isvprodid = claim_u16(ap->claims, "isv_prod_id");
    seen->isvsvn = claim_u16(ap->claims, "isv_svn");
    seen->debug = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ap->claims, "debug"));
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(ap->claims, "host");
    const char *tee = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(host, "tee"));
    snprintf(seen->host, sizeof seen->host, "%s", tee ? tee : "?");
    seen->insecure_simulation = ap->insecure_simulation;
}

gt_err gt_holder_quote_appraise(const gt_agreement *a, uint32_t holder,
                                const uint8_t binding[GT_NET_BINDING_BYTES], gt_span evidence,
                                const gt_attest_file *roots, size_t root_count,
                                gt_holder_enclave_seen *seen)
{
    memset(seen, 0, sizeof *seen);
    GT_ENSURE(holder < a->holder_count, GT_E_ARG, "holder %u out of range", holder);
    const gt_agreement_holder *h = &a->holders[holder];
    GT_ENSURE(h->enclave.present, GT_E_ARG, "holder %s is not named by enclave", h->name);
    char json[512];
    GT_TRY(gt_holder_quote_policy_json(&h->enclave, a->allow_simulation, json, sizeof json));
    gt_policy *policy = NULL;
    GT_TRY(gt_policy_parse(&policy, json, strlen(json)));
    uint8_t want[GT_REPORT_DATA_BYTES];
    gt_appraisal ap;
    memset(&ap, 0, sizeof ap);
    gt_err err = gt_holder_quote_reportdata(want, a->hash, h->identity_key, binding);
    gt_appraise_params p = {.roots = roots, .root_count = root_count,
                            .expected_report_data = want};
    if (gt_is_ok(err)) {
        err = gt_attest_appraise_bytes(&ap, evidence.data, evidence.len, GT_TEE_VSGX, policy, &p);
    }
    gt_policy_free(policy);
    if (!gt_is_ok(err)) {
        goto out;
    }
    if (ap.verdict == GT_VERDICT_ACCEPTED) {
        seen_fill(&ap, seen);
        goto out;
    }
    if (ap.verdict == GT_VERDICT_REJECTED && ap.signature_valid && ap.chain_valid) {
        GT_TRY_GOTO(err, binding_refusal(&ap, a, h->name, want), out);
    }
    const char *why = ap.reason_count ? ap.reasons[0] : "?";
    const char *field = ap.verdict == GT_VERDICT_REJECTED ? field_of(why) : NULL;
    if (field == NULL) {
        err = gt_errf(GT_E_POLICY, "holder %s: its enclave quote is %s: %s", h->name,
                      gt_verdict_name(ap.verdict), why);
    } else {
        char idx[48] = "";
        if (strncmp(field, "enclave.", 8) == 0) {
            snprintf(idx, sizeof idx, "holders[%u].", holder);
        }
        err = gt_errf(GT_E_POLICY, "holder %s: its enclave quote is %s (the agreement's %s%s "
                      "does not match): %s", h->name, gt_verdict_name(ap.verdict), idx, field,
                      why);
    }
out:
    gt_appraisal_free(&ap);
    return err;
}
