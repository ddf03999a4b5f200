// Offline verification of Intel DCAP quotes (SGX v3, TDX v4/v5) at a caller-given time.
//
// Chain of trust: Intel SGX Root CA (trusted, from the caller) -> PCK platform/processor CA ->
// PCK leaf (in the quote) -> QE report signature; QE report data binds the attestation key;
// the attestation key signs header || body. Collateral: Root CA -> Intel SGX TCB Signing cert ->
// TCB info and QE identity signatures; CRLs from the collateral revoke PCK/CA certificates.
// TCB status: Intel's TCB level matching (PCK cert SGX TCB components + PCESVN, and for TDX the
// TEE_TCB_SVN against tdxtcbcomponents), converged with the TDX module and QE identity levels.
// Every problem is recorded as a reason in the verdict; nothing stops at the first one.
#include "intel_quote.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- verdict reasons ------------------------------------------------------------------------

static void reason(gt_intel_verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reason(gt_intel_verdict *v, const char *fmt, ...)
{
    if (v->reason_count < GT_INTEL_MAX_REASONS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(v->reasons[v->reason_count], GT_INTEL_REASON_BYTES, fmt, ap);
        va_end(ap);
    }
    v->reason_count++;
}

bool gt_intel_verdict_has_reason(const gt_intel_verdict *v, const char *needle)
{
    size_t n = v->reason_count < GT_INTEL_MAX_REASONS ? v->reason_count : GT_INTEL_MAX_REASONS;
    for (size_t i = 0; i < n; i++) {
        if (strstr(v->reasons[i], needle) != NULL) {
            return true;
        }
    }
    return false;
}

// ---- TCB statuses ---------------------------------------------------------------------------

static const char *const tcb_statuses[] = {
    "UpToDate", "SWHardeningNeeded", "ConfigurationNeeded", "ConfigurationAndSWHardeningNeeded",
    "OutOfDate", "OutOfDateConfigurationNeeded", "Revoked",
};

// The static string for a status name, or NULL if unknown.
static const char *status_lookup(const char *s)
{
    for (size_t i = 0; i < sizeof tcb_statuses / sizeof tcb_statuses[0]; i++) {
        if (strcmp(s, tcb_statuses[i]) == 0) {
            return tcb_statuses[i];
        }
    }
    return NULL;
}

static bool status_is(const char *s, const char *name) { return s != NULL && strcmp(s, name) == 0; }

// A component (TDX module or QE) that is OutOfDate or Revoked drags the platform status down
// (QVL's convergeTcbStatusWithQeTcbStatus / ...WithTdxModuleStatus).
static const char *converge(const char *platform, const char *component)
{
    if (platform == NULL || component == NULL) {
        return platform;
    }
    if (status_is(component, "Revoked") || status_is(platform, "Revoked")) {
        return status_lookup("Revoked");
    }
    if (status_is(component, "OutOfDate")) {
        if (status_is(platform, "UpToDate") || status_is(platform, "SWHardeningNeeded")) {
            return status_lookup("OutOfDate");
        }
        if (status_is(platform, "ConfigurationNeeded") ||
            status_is(platform, "ConfigurationAndSWHardeningNeeded")) {
            return status_lookup("OutOfDateConfigurationNeeded");
        }
    }
    return platform;
}

static void advisories_add(gt_intel_verdict *v, const cJSON *level)
{
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(level, "advisoryIDs");
    const cJSON *id = NULL;
    cJSON_ArrayForEach(id, ids)
    {
        if (!cJSON_IsString(id) || v->advisory_count >= GT_INTEL_MAX_ADVISORIES) {
            continue;
        }
        bool dup = false;
        for (size_t i = 0; i < v->advisory_count; i++) {
            dup = dup || strcmp(v->advisories[i], id->valuestring) == 0;
        }
        if (!dup) {
            snprintf(v->advisories[v->advisory_count++], sizeof v->advisories[0], "%s",
                     id->valuestring);
        }
    }
}

// ---- collateral JSON helpers ----------------------------------------------------------------

// Validity window [issueDate, nextUpdate] of a TCB info / QE identity body.
static void check_dates(gt_intel_verdict *v, const cJSON *body, const char *what, int64_t at)
{
    const char *issue = NULL, *next = NULL;
    int64_t t_issue = 0, t_next = 0;
    gt_err e = gt_json_get_string(body, "issueDate", &issue);
    if (gt_is_ok(e)) {
        e = gt_json_get_string(body, "nextUpdate", &next);
    }
    if (gt_is_ok(e)) {
        e = gt_intel_parse_time(issue, &t_issue);
    }
    if (gt_is_ok(e)) {
        e = gt_intel_parse_time(next, &t_next);
    }
    if (!gt_is_ok(e)) {
        reason(v, "%s: %s", what, e.msg);
        return;
    }
    if (at < t_issue) {
        reason(v, "%s: not yet valid (issueDate %s)", what, issue);
    }
    if (at > t_next) {
        reason(v, "%s: expired (nextUpdate %s)", what, next);
    }
}

static gt_err json_hex_eq(const cJSON *obj, const char *field, const uint8_t *want, size_t n,
                          bool *eq)
{
    uint8_t buf[64] = {0};
    GT_ENSURE(n <= sizeof buf, GT_E_ARG, "hex field too long");
    GT_TRY(gt_json_get_hex(obj, field, buf, n));
    *eq = memcmp(buf, want, n) == 0;
    return GT_OK;
}

// An svn array of 16 {"svn": n} objects (TCB info v3) or v2's "sgxtcbcompNNsvn" fields.
static gt_err level_svns(const cJSON *tcb, const char *array, const char *v2_fmt, uint8_t out[16])
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(tcb, array);
    if (a != NULL) {
        GT_ENSURE(cJSON_IsArray(a) && cJSON_GetArraySize(a) == 16, GT_E_FORMAT,
                  "tcb level: '%s' is not an array of 16", array);
        for (int i = 0; i < 16; i++) {
            uint64_t svn = 0;
            GT_TRY(gt_json_get_u64(cJSON_GetArrayItem(a, i), "svn", &svn));
            GT_ENSURE(svn <= 255, GT_E_FORMAT, "tcb level: svn %llu", (unsigned long long)svn);
            out[i] = (uint8_t)svn;
        }
        return GT_OK;
    }
    GT_ENSURE(v2_fmt != NULL, GT_E_FORMAT, "tcb level: no '%s'", array);
    for (int i = 0; i < 16; i++) {
        char name[32];
        snprintf(name, sizeof name, v2_fmt, i + 1);
        uint64_t svn = 0;
        GT_TRY(gt_json_get_u64(tcb, name, &svn));
        GT_ENSURE(svn <= 255, GT_E_FORMAT, "tcb level: svn %llu", (unsigned long long)svn);
        out[i] = (uint8_t)svn;
    }
    return GT_OK;
}

// Intel's TCB level matching: the first level (levels are sorted, newest first) whose SGX
// components and PCESVN are all <= the PCK certificate's and, for TDX, whose tdxtcbcomponents
// are <= TEE_TCB_SVN (from index 2 when TEE_TCB_SVN[1], the module major version, is set).
static gt_err match_platform_level(const cJSON *info, const gt_intel_pck_ext *pck,
                                   const uint8_t *tee_tcb_svn, const cJSON **match)
{
    *match = NULL;
    const cJSON *levels = cJSON_GetObjectItemCaseSensitive(info, "tcbLevels");
    GT_ENSURE(cJSON_IsArray(levels), GT_E_FORMAT, "TCB info: no 'tcbLevels' array");
    const cJSON *level = NULL;
    cJSON_ArrayForEach(level, levels)
    {
        const cJSON *tcb = cJSON_GetObjectItemCaseSensitive(level, "tcb");
        GT_ENSURE(cJSON_IsObject(tcb), GT_E_FORMAT, "TCB info: level without 'tcb'");
        uint8_t sgx[16] = {0};
        uint64_t pcesvn = 0;
        GT_TRY(level_svns(tcb, "sgxtcbcomponents", "sgxtcbcomp%02dsvn", sgx));
        GT_TRY(gt_json_get_u64(tcb, "pcesvn", &pcesvn));
        bool ok = pck->pce_svn >= pcesvn;
        for (int i = 0; i < 16; i++) {
            ok = ok && pck->comp_svn[i] >= sgx[i];
        }
        if (ok && tee_tcb_svn != NULL) {
            uint8_t tdx[16] = {0};
            GT_TRY(level_svns(tcb, "tdxtcbcomponents", NULL, tdx));
            for (int i = tee_tcb_svn[1] > 0 ? 2 : 0; i < 16; i++) {
                ok = ok && tee_tcb_svn[i] >= tdx[i];
            }
        }
        if (ok) {
            *match = level;
            return GT_OK;
        }
    }
    return GT_OK;
}

static gt_err level_status(const cJSON *level, const char **status)
{
    const char *s = NULL;
    GT_TRY(gt_json_get_string(level, "tcbStatus", &s));
    *status = status_lookup(s);
    GT_ENSURE(*status != NULL, GT_E_FORMAT, "unknown tcbStatus '%.40s'", s);
    return GT_OK;
}

// MRSIGNERSEAM / SEAMATTRIBUTES against a module identity, and (TCB info v3 with
// tdxModuleIdentities) the module's own TCB level by TEE_TCB_SVN[0] (its minor SVN).
static gt_err tdx_module_check(gt_intel_verdict *v, const cJSON *info, const gt_td_report *td)
{
    const cJSON *mod = cJSON_GetObjectItemCaseSensitive(info, "tdxModule");
    GT_ENSURE(cJSON_IsObject(mod), GT_E_FORMAT, "TCB info: no 'tdxModule'");
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(info, "tdxModuleIdentities");
    const cJSON *ident = mod;
    char want_id[16];
    snprintf(want_id, sizeof want_id, "TDX_%02u", td->tee_tcb_svn[1]);
    if (ids != NULL && td->tee_tcb_svn[1] > 0) {
        ident = NULL;
        const cJSON *it = NULL;
        cJSON_ArrayForEach(it, ids)
        {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
            if (cJSON_IsString(id) && strcmp(id->valuestring, want_id) == 0) {
                ident = it;
            }
        }
        GT_ENSURE(ident != NULL, GT_E_POLICY, "TCB info: no TDX module identity %s", want_id);
    }
    bool eq = false;
    GT_TRY(json_hex_eq(ident, "mrsigner", td->mr_signer_seam, 48, &eq));
    GT_ENSURE(eq, GT_E_POLICY, "TDX module: MRSIGNERSEAM does not match TCB info");
    uint8_t attr[8] = {0}, mask[8] = {0};
    GT_TRY(gt_json_get_hex(ident, "attributes", attr, 8));
    GT_TRY(gt_json_get_hex(ident, "attributesMask", mask, 8));
    for (int i = 0; i < 8; i++) {
        GT_ENSURE((td->seam_attributes[i] & mask[i]) == (attr[i] & mask[i]), GT_E_POLICY,
                  "TDX module: SEAM attributes do not match TCB info");
    }
    if (ident == mod) {
        return GT_OK;  // TDX 1.0 module 0 / TCB info without module identities: no own level
    }
    const cJSON *levels = cJSON_GetObjectItemCaseSensitive(ident, "tcbLevels");
    const cJSON *level = NULL;
    cJSON_ArrayForEach(level, levels)
    {
        uint64_t isvsvn = 0;
        GT_TRY(gt_json_get_u64(cJSON_GetObjectItemCaseSensitive(level, "tcb"), "isvsvn", &isvsvn));
        if (td->tee_tcb_svn[0] >= isvsvn) {
            GT_TRY(level_status(level, &v->tdx_module_status));
            advisories_add(v, level);
            return GT_OK;
        }
    }
    return gt_errf(GT_E_POLICY, "TDX module %s: no TCB level for SVN %u", want_id,
                   td->tee_tcb_svn[0]);
}

// TCB info's own fields: version and id fitting the quote, dates, tcbType. False (a reason in
// v) when the rest cannot be matched.
static bool tcb_info_header_ok(gt_intel_verdict *v, const gt_intel_quote *q, const cJSON *info,
                               int64_t at)
{
    bool tdx = gt_intel_quote_is_tdx(q);
    const char *id = "SGX";
    uint64_t version = 0;
    gt_err e = gt_json_get_u64(info, "version", &version);
    if (!gt_is_ok(e)) {
        reason(v, "TCB info: %s", e.msg);
        return false;
    }
    if (version >= 3) {
        e = gt_json_get_string(info, "id", &id);
        if (!gt_is_ok(e)) {
            reason(v, "TCB info: %s", e.msg);
            return false;
        }
    }
    if (strcmp(id, tdx ? "TDX" : "SGX") != 0 || version < 2 || version > 3 || (tdx && version < 3)) {
        reason(v, "TCB info: id %.8s version %llu does not fit a %s quote", id,
               (unsigned long long)version, tdx ? "TDX" : "SGX");
        return false;
    }
    check_dates(v, info, "TCB info", at);
    uint64_t tcb_type = 0;
    if (cJSON_GetObjectItemCaseSensitive(info, "tcbType") != NULL &&
        (!gt_is_ok(gt_json_get_u64(info, "tcbType", &tcb_type)) || tcb_type != 0)) {
        reason(v, "TCB info: tcbType is not 0 (the only type defined)");
        return false;
    }
    return true;
}

// TCB info: id, version, dates, FMSPC / PCE-ID, then the platform level (and TDX module).
static void tcb_info_check(gt_intel_verdict *v, const gt_intel_quote *q, const cJSON *info,
                           int64_t at)
{
    bool tdx = gt_intel_quote_is_tdx(q);
    if (!tcb_info_header_ok(v, q, info, at)) {
        return;
    }
    gt_err e;
    if (!v->pck_ext_valid) {
        reason(v, "TCB info: cannot match without the PCK certificate's SGX extensions");
        return;
    }
    bool fmspc_eq = false, pceid_eq = false;
    e = json_hex_eq(info, "fmspc", v->pck.fmspc, 6, &fmspc_eq);
    if (gt_is_ok(e)) {
        e = json_hex_eq(info, "pceId", v->pck.pce_id, 2, &pceid_eq);
    }
    if (!gt_is_ok(e)) {
        reason(v, "TCB info: %s", e.msg);
        return;
    }
    if (!fmspc_eq) {
        char hex[13];
        gt_hex_encode(hex, sizeof hex, v->pck.fmspc, 6);
        reason(v, "TCB info: FMSPC does not match the PCK certificate (%s)", hex);
    }
    if (!pceid_eq) {
        reason(v, "TCB info: PCE-ID does not match the PCK certificate");
    }
    if (!fmspc_eq || !pceid_eq) {
        return;
    }
    const cJSON *level = NULL;
    e = match_platform_level(info, &v->pck, tdx ? q->td.tee_tcb_svn : NULL, &level);
    if (!gt_is_ok(e)) {
        reason(v, "TCB info: %s", e.msg);
        return;
    }
    if (level == NULL) {
        reason(v, "TCB info: no TCB level matches the platform (TCB not supported)");
        return;
    }
    e = level_status(level, &v->platform_tcb_status);
    if (!gt_is_ok(e)) {
        reason(v, "TCB info: %s", e.msg);
        return;
    }
    const char *date = NULL;
    if (gt_is_ok(gt_json_get_string(level, "tcbDate", &date))) {
        snprintf(v->tcb_date, sizeof v->tcb_date, "%s", date);
    }
    advisories_add(v, level);
    if (tdx) {
        e = tdx_module_check(v, info, &q->td);
        if (!gt_is_ok(e)) {
            reason(v, "%s", e.msg);
        }
    }
}

// The QE's TCB level: the first level (highest first) whose ISVSVN the QE's reaches.
static void qe_tcb_level(gt_intel_verdict *v, const gt_sgx_report *qe, const cJSON *ident)
{
    gt_err e;
    const cJSON *levels = cJSON_GetObjectItemCaseSensitive(ident, "tcbLevels");
    const cJSON *level = NULL;
    cJSON_ArrayForEach(level, levels)
    {
        uint64_t isvsvn = 0;
        e = gt_json_get_u64(cJSON_GetObjectItemCaseSensitive(level, "tcb"), "isvsvn", &isvsvn);
        if (!gt_is_ok(e)) {
            reason(v, "QE identity: %s", e.msg);
            return;
        }
        if (qe->isv_svn >= isvsvn) {
            e = level_status(level, &v->qe_tcb_status);
            if (!gt_is_ok(e)) {
                reason(v, "QE identity: %s", e.msg);
            }
            advisories_add(v, level);
            return;
        }
    }
    v->qe_tcb_status = status_lookup("Revoked");  // below every level: QVL reports it revoked
}

// QE identity: id, dates, MRSIGNER, ISVPRODID, MISCSELECT/ATTRIBUTES under masks, ISVSVN level.
static void qe_identity_check(gt_intel_verdict *v, const gt_intel_quote *q, const cJSON *ident,
                              int64_t at)
{
    bool tdx = gt_intel_quote_is_tdx(q);
    const gt_sgx_report *qe = &q->qe_report;
    const char *id = NULL;
    gt_err e = gt_json_get_string(ident, "id", &id);
    if (!gt_is_ok(e)) {
        reason(v, "QE identity: %s", e.msg);
        return;
    }
    if (strcmp(id, tdx ? "TD_QE" : "QE") != 0) {
        reason(v, "QE identity: id %.8s does not fit a %s quote", id, tdx ? "TDX" : "SGX");
        return;
    }
    check_dates(v, ident, "QE identity", at);
    bool eq = false;
    uint64_t prodid = 0;
    uint8_t misc[4] = {0}, misc_mask[4] = {0}, attr[16] = {0}, attr_mask[16] = {0};
    e = json_hex_eq(ident, "mrsigner", qe->mr_signer, 32, &eq);
    if (gt_is_ok(e)) {
        e = gt_json_get_u64(ident, "isvprodid", &prodid);
    }
    if (gt_is_ok(e)) {
        e = gt_json_get_hex(ident, "miscselect", misc, 4);
    }
    if (gt_is_ok(e)) {
        e = gt_json_get_hex(ident, "miscselectMask", misc_mask, 4);
    }
    if (gt_is_ok(e)) {
        e = gt_json_get_hex(ident, "attributes", attr, 16);
    }
    if (gt_is_ok(e)) {
        e = gt_json_get_hex(ident, "attributesMask", attr_mask, 16);
    }
    if (!gt_is_ok(e)) {
        reason(v, "QE identity: %s", e.msg);
        return;
    }
    if (!eq) {
        reason(v, "QE identity: QE MRSIGNER does not match");
    }
    if (prodid != qe->isv_prod_id) {
        reason(v, "QE identity: QE ISVPRODID %u, expected %llu", qe->isv_prod_id,
               (unsigned long long)prodid);
    }
    // miscselect is a big-endian hex string of the little-endian MISCSELECT u32.
    uint32_t want_misc = ((uint32_t)misc[0] << 24) | ((uint32_t)misc[1] << 16) |
                         ((uint32_t)misc[2] << 8) | misc[3];
    uint32_t mask = ((uint32_t)misc_mask[0] << 24) | ((uint32_t)misc_mask[1] << 16) |
                    ((uint32_t)misc_mask[2] << 8) | misc_mask[3];
    if ((qe->misc_select & mask) != (want_misc & mask)) {
        reason(v, "QE identity: QE MISCSELECT does not match under the mask");
    }
    bool attr_ok = true;
    for (int i = 0; i < 16; i++) {
        attr_ok = attr_ok && (qe->attributes[i] & attr_mask[i]) == (attr[i] & attr_mask[i]);
    }
    if (!attr_ok) {
        reason(v, "QE identity: QE ATTRIBUTES do not match under the mask");
    }
    qe_tcb_level(v, qe, ident);
}

// Parses and signature-checks one signed collateral body; returns the parsed doc or NULL.
static cJSON *signed_body(gt_intel_verdict *v, const gt_buf *body, const uint8_t *sig,
                          const uint8_t *tcb_key, const char *what)
{
    if (tcb_key != NULL &&
        !gt_is_ok(gt_ecdsa_verify_raw(GT_EC_P256, GT_HASH_SHA256, sig, GT_INTEL_SIG_BYTES,
                                      body->data, body->len, tcb_key, GT_INTEL_PUBKEY_BYTES))) {
        reason(v, "%s: signature by the TCB signing key does not verify", what);
    }
    cJSON *doc = NULL;
    gt_err e = gt_json_parse((const char *)body->data, body->len, &doc);
    if (!gt_is_ok(e)) {
        reason(v, "%s: %s", what, e.msg);
        return NULL;
    }
    return doc;
}

static bool pkey_xy(const gt_x509 *cert, uint8_t xy[GT_INTEL_PUBKEY_BYTES])
{
    gt_pkey *key = NULL;
    size_t n = 0;
    uint8_t buf[1 + 2 * 48] = {0};
    bool ok = gt_is_ok(gt_x509_public_key(cert, &key)) &&
              gt_is_ok(gt_pkey_ec_public_xy(key, buf, sizeof buf, &n));
    gt_pkey_free(key);
    // Accept x || y or the uncompressed point 04 || x || y.
    if (ok && n == GT_INTEL_PUBKEY_BYTES) {
        memcpy(xy, buf, n);
        return true;
    }
    if (ok && n == GT_INTEL_PUBKEY_BYTES + 1 && buf[0] == 0x04) {
        memcpy(xy, buf + 1, GT_INTEL_PUBKEY_BYTES);
        return true;
    }
    return false;
}

static void collateral_check(gt_intel_verdict *v, const gt_intel_quote *q,
                             const gt_intel_verify_params *p, const gt_span *crls,
                             size_t crl_count)
{
    const gt_intel_collateral *c = p->collateral;
    size_t before = v->reason_count;
    uint8_t tcb_key[GT_INTEL_PUBKEY_BYTES] = {0};
    bool have_key = false;
    if (c->has_tcb_info || c->has_qe_identity) {
        if (c->tcb_chain_count == 0) {
            reason(v, "collateral: no TCB signing chain to check TCB info / QE identity");
        } else {
            gt_x509_verify_params cp = {
                .intermediates = (const gt_x509 *const *)(c->tcb_chain + 1),
                .intermediate_count = c->tcb_chain_count - 1,
                .roots = p->roots,
                .root_count = p->root_count,
                .crls = c->root_ca_crl.len ? &crls[crl_count - 1] : NULL,
                .crl_count = c->root_ca_crl.len ? 1 : 0,
                .at = p->at,
            };
            gt_err e = gt_x509_verify_chain(c->tcb_chain[0], &cp);
            if (!gt_is_ok(e)) {
                reason(v, "TCB signing chain: %s", e.msg);
            }
            have_key = pkey_xy(c->tcb_chain[0], tcb_key);
            if (!have_key) {
                reason(v, "TCB signing chain: leaf key is not a P-256 key");
            }
        }
    }
    if (c->has_tcb_info) {
        cJSON *info = signed_body(v, &c->tcb_info, c->tcb_info_sig, have_key ? tcb_key : NULL,
                                  "TCB info");
        if (info != NULL) {
            tcb_info_check(v, q, info, p->at);
        }
        cJSON_Delete(info);
    }
    if (c->has_qe_identity) {
        cJSON *ident = signed_body(v, &c->qe_identity, c->qe_identity_sig,
                                   have_key ? tcb_key : NULL, "QE identity");
        if (ident != NULL) {
            qe_identity_check(v, q, ident, p->at);
        }
        cJSON_Delete(ident);
    }
    v->collateral_valid = v->reason_count == before;
}

// ---- the quote ------------------------------------------------------------------------------

gt_err gt_intel_quote_verify_signature(const gt_intel_quote *q)
{
    gt_err e = gt_ecdsa_verify_raw(GT_EC_P256, GT_HASH_SHA256, q->signature, GT_INTEL_SIG_BYTES,
                                   q->signed_region.data, q->signed_region.len,
                                   q->attestation_key, GT_INTEL_PUBKEY_BYTES);
    GT_ENSURE(gt_is_ok(e), GT_E_AUTH, "intel quote: signature by the attestation key does not "
              "verify");
    return GT_OK;
}

// QE report data = SHA-256(attestation key || QE auth data) || 32 zero bytes.
static bool qe_binding_ok(const gt_intel_quote *q)
{
    gt_hash_ctx *ctx = NULL;
    uint8_t h[GT_SHA256_BYTES] = {0};
    bool ok = gt_is_ok(gt_hash_new(&ctx, GT_HASH_SHA256)) &&
              gt_is_ok(gt_hash_update(ctx, q->attestation_key, GT_INTEL_PUBKEY_BYTES)) &&
              gt_is_ok(gt_hash_update(ctx, q->qe_auth_data.data, q->qe_auth_data.len)) &&
              gt_is_ok(gt_hash_final(ctx, h));
    gt_hash_free(ctx);
    static const uint8_t zeros[32] = {0};
    return ok && gt_ct_equal(h, q->qe_report.report_data, 32) &&
           gt_ct_equal(zeros, q->qe_report.report_data + 32, 32);
}

// Step 3 of gt_intel_quote_verify: the PCK chain to a trusted root (with the collateral's CRLs),
// the PCK leaf's signature over the QE report, the leaf's SGX extensions, then step 4 (the
// collateral). Every failure is a reason in v; returns whether the QE report signature verified.
static bool pck_chain_check(gt_intel_verdict *v, const gt_intel_quote *q,
                            const gt_intel_verify_params *p)
{
    gt_x509 **certs = NULL;
    size_t count = 0;
    bool qe_sig_ok = false;
    gt_err e = gt_x509_parse_pem_all(&certs, &count, (const char *)q->pck_chain_pem.data,
                                     q->pck_chain_pem.len);
    if (!gt_is_ok(e) || count == 0) {
        reason(v, "PCK chain: cannot parse: %s", gt_is_ok(e) ? "no certificate" : e.msg);
    } else {
        uint8_t pck_xy[GT_INTEL_PUBKEY_BYTES] = {0};
        if (!pkey_xy(certs[0], pck_xy)) {
            reason(v, "PCK chain: leaf key is not a P-256 key");
        } else if (!gt_is_ok(gt_ecdsa_verify_raw(GT_EC_P256, GT_HASH_SHA256,
                                                 q->qe_report_signature, GT_INTEL_SIG_BYTES,
                                                 q->qe_report_raw.data, q->qe_report_raw.len,
                                                 pck_xy, sizeof pck_xy))) {
            reason(v, "QE report signature by the PCK leaf does not verify");
        } else {
            qe_sig_ok = true;
        }
        gt_span crls[2];
        size_t crl_count = 0;
        const gt_intel_collateral *c = p->collateral;
        if (c != NULL && c->pck_crl.len > 0) {
            crls[crl_count++] = gt_buf_span(&c->pck_crl);
        }
        if (c != NULL && c->root_ca_crl.len > 0) {
            crls[crl_count++] = gt_buf_span(&c->root_ca_crl);
        }
        gt_x509_verify_params cp = {
            .intermediates = (const gt_x509 *const *)(certs + 1),
            .intermediate_count = count - 1,
            .roots = p->roots,
            .root_count = p->root_count,
            .crls = crl_count ? crls : NULL,
            .crl_count = crl_count,
            .at = p->at,
        };
        e = gt_x509_verify_chain(certs[0], &cp);
        if (gt_is_ok(e)) {
            v->chain_valid = true;
        } else {
            reason(v, "PCK chain: %s", e.msg);
        }
        gt_span ext = {0};
        e = gt_x509_extension(certs[0], GT_INTEL_SGX_EXT_OID, &ext);
        if (gt_is_ok(e)) {
            e = gt_intel_pck_ext_parse(&v->pck, ext.data, ext.len);
        }
        if (gt_is_ok(e)) {
            v->pck_ext_valid = true;
        } else {
            reason(v, "PCK certificate SGX extensions: %s", e.msg);
        }
        // 4. Collateral: TCB info, QE identity, their signing chain and the TCB status.
        if (c != NULL) {
            collateral_check(v, q, p, crls, crl_count);
        }
    }
    for (size_t i = 0; i < count; i++) {
        gt_x509_free(certs[i]);
    }
    free(certs);
    return qe_sig_ok;
}

gt_err gt_intel_quote_verify(const gt_intel_quote *q, const gt_intel_verify_params *p,
                             gt_intel_verdict *v)
{
    memset(v, 0, sizeof *v);
    GT_ENSURE(p != NULL && p->roots != NULL && p->root_count > 0, GT_E_ARG,
              "intel quote: verify needs at least one trusted root");
    GT_ENSURE(q->signed_region.data != NULL && q->pck_chain_pem.data != NULL, GT_E_ARG,
              "intel quote: verify needs a parsed quote");

    // 0. Only Intel's quoting enclaves are verified here (their QE identity, PCK chain).
    static const uint8_t intel_qe_vendor[16] = {0x93, 0x9a, 0x72, 0x33, 0xf7, 0x9c, 0x4c, 0xa9,
                                                0x94, 0x0a, 0x0d, 0xb3, 0x95, 0x7f, 0x06, 0x07};
    if (memcmp(q->header.qe_vendor_id, intel_qe_vendor, sizeof intel_qe_vendor) != 0) {
        reason(v, "QE vendor id is not Intel's");
    }
    // 1. The attestation key signed header || body.
    bool sig_ok = gt_is_ok(gt_intel_quote_verify_signature(q));
    if (!sig_ok) {
        reason(v, "quote signature by the attestation key does not verify");
    }
    // 2. The QE report binds the attestation key.
    bool bind_ok = qe_binding_ok(q);
    if (!bind_ok) {
        reason(v, "QE report data does not bind the attestation key");
    }

    // 3. The PCK chain, and the PCK leaf signed the QE report; 4. the collateral.
    bool qe_sig_ok = pck_chain_check(v, q, p);
    v->signature_valid = sig_ok && bind_ok && qe_sig_ok;

    // 5. The final TCB status: the platform level converged with the module and QE levels.
    if (v->platform_tcb_status != NULL) {
        const char *s = converge(v->platform_tcb_status, v->tdx_module_status);
        s = converge(s, v->qe_tcb_status);
        v->tcb_status = s;
        if (status_is(s, "Revoked")) {
            reason(v, "TCB status Revoked (platform %s, TDX module %s, QE %s)",
                   v->platform_tcb_status, v->tdx_module_status ? v->tdx_module_status : "n/a",
                   v->qe_tcb_status ? v->qe_tcb_status : "n/a");
        }
    } else if (status_is(v->qe_tcb_status, "Revoked")) {
        reason(v, "QE TCB status Revoked");
    }
    v->accepted = v->reason_count == 0;
    if (!v->accepted) {
        return gt_errf(GT_E_AUTH, "intel quote: %s%s", v->reasons[0],
                       v->reason_count > 1 ? " (and more)" : "");
    }
    return GT_OK;
}

gt_err gt_intel_verdict_json(const gt_intel_verdict *v, cJSON *obj)
{
    cJSON *reasons = cJSON_CreateArray();
    cJSON *adv = cJSON_CreateArray();
    bool ok = reasons != NULL && adv != NULL;
    size_t n = v->reason_count < GT_INTEL_MAX_REASONS ? v->reason_count : GT_INTEL_MAX_REASONS;
    for (size_t i = 0; ok && i < n; i++) {
        ok = cJSON_AddItemToArray(reasons, cJSON_CreateString(v->reasons[i]));
    }
    for (size_t i = 0; ok && i < v->advisory_count; i++) {
        ok = cJSON_AddItemToArray(adv, cJSON_CreateString(v->advisories[i]));
    }
    if (!ok) {
        cJSON_Delete(reasons);
        cJSON_Delete(adv);
        return gt_errf(GT_E_NOMEM, "intel verdict: out of memory");
    }
    const struct { const char *name; const char *value; } statuses[] = {
        {"tcb_status", v->tcb_status},
        {"platform_tcb_status", v->platform_tcb_status},
        {"tdx_module_status", v->tdx_module_status},
        {"qe_tcb_status", v->qe_tcb_status},
    };
    ok = cJSON_AddBoolToObject(obj, "accepted", v->accepted) != NULL &&
         cJSON_AddBoolToObject(obj, "signature_valid", v->signature_valid) != NULL &&
         cJSON_AddBoolToObject(obj, "chain_valid", v->chain_valid) != NULL &&
         cJSON_AddBoolToObject(obj, "collateral_valid", v->collateral_valid) != NULL;
    for (size_t i = 0; ok && i < sizeof statuses / sizeof statuses[0]; i++) {
        ok = (statuses[i].value != NULL
                  ? cJSON_AddStringToObject(obj, statuses[i].name, statuses[i].value)
                  : cJSON_AddNullToObject(obj, statuses[i].name)) != NULL;
    }
    if (ok && v->pck_ext_valid) {
        char fmspc[13], pceid[5];
        gt_hex_encode(fmspc, sizeof fmspc, v->pck.fmspc, sizeof v->pck.fmspc);
        gt_hex_encode(pceid, sizeof pceid, v->pck.pce_id, sizeof v->pck.pce_id);
        ok = cJSON_AddStringToObject(obj, "fmspc", fmspc) != NULL &&
             cJSON_AddStringToObject(obj, "pce_id", pceid) != NULL;
    }
    if (ok && v->tcb_date[0] != '\0') {
        ok = cJSON_AddStringToObject(obj, "tcb_date", v->tcb_date) != NULL;
    }
    if (!ok) {
        cJSON_Delete(reasons);
        cJSON_Delete(adv);
        return gt_errf(GT_E_NOMEM, "intel verdict: out of memory");
    }
    cJSON_AddItemToObject(obj, "advisory_ids", adv);
    cJSON_AddItemToObject(obj, "reasons", reasons);
    return GT_OK;
}
