// AMD SEV-SNP ATTESTATION_REPORT parser and claims (layout: AMD 56860, ATTESTATION_REPORT).
// Fields are read in spec order through one gt_reader; offsets in comments are the spec's.
#include "snp_report.h"

#include <stdio.h>
#include <string.h>

const char *gt_snp_product_name(gt_snp_product product)
{
    switch (product) {
    case GT_SNP_PRODUCT_MILAN:
        return "Milan";
    case GT_SNP_PRODUCT_GENOA:
        return "Genoa";
    case GT_SNP_PRODUCT_TURIN:
        return "Turin";
    case GT_SNP_PRODUCT_UNKNOWN:
    default:
        return "unknown";
    }
}

const char *gt_snp_signing_key_name(gt_snp_signing_key key)
{
    switch (key) {
    case GT_SNP_KEY_VCEK:
        return "VCEK";
    case GT_SNP_KEY_VLEK:
        return "VLEK";
    case GT_SNP_KEY_NONE:
        return "none";
    default:
        return "reserved";
    }
}

gt_snp_signing_key gt_snp_report_signing_key(const gt_snp_report *rep)
{
    return (gt_snp_signing_key)((rep->signer_info >> 2) & 7u);
}

static gt_snp_product product_from_cpuid(uint8_t fam, uint8_t model)
{
    if (fam == 0x19 && model <= 0x0f) {
        return GT_SNP_PRODUCT_MILAN;
    }
    if (fam == 0x19 && ((model >= 0x10 && model <= 0x1f) || (model >= 0xa0 && model <= 0xaf))) {
        return GT_SNP_PRODUCT_GENOA;
    }
    if (fam == 0x1a && model <= 0x1f) {
        return GT_SNP_PRODUCT_TURIN;
    }
    return GT_SNP_PRODUCT_UNKNOWN;
}

gt_snp_tcb gt_snp_tcb_decode(uint64_t raw, gt_snp_product product)
{
    gt_snp_tcb t = {.raw = raw};
    if (product == GT_SNP_PRODUCT_TURIN) {
        t.has_fmc = true;
        t.fmc = (uint8_t)raw;
        t.bootloader = (uint8_t)(raw >> 8);
        t.tee = (uint8_t)(raw >> 16);
        t.snp = (uint8_t)(raw >> 24);
    } else {
        t.bootloader = (uint8_t)raw;
        t.tee = (uint8_t)(raw >> 8);
        t.snp = (uint8_t)(raw >> 48);
    }
    t.microcode = (uint8_t)(raw >> 56);
    return t;
}

static gt_err read_tcb(gt_reader *r, gt_snp_tcb *t)
{
    uint64_t raw = 0;
    GT_TRY(gt_reader_u64le(r, &raw));
    t->raw = raw;  // decoded once the CPUID (and so the product) is known
    return GT_OK;
}

static gt_err parse_fields(gt_snp_report *rep, gt_reader *body)
{
    // Borrow the signed region first, then read the claims from it alone: the signature covers
    // exactly the bytes the claims come from.
    GT_TRY(gt_reader_span(body, GT_SNP_SIGNED_BYTES, &rep->signed_region));
    gt_reader sr = gt_reader_init(rep->signed_region.data, rep->signed_region.len);
    gt_reader *r = &sr;
    GT_TRY(gt_reader_u32le(r, &rep->version));                          // 0x000
    GT_ENSURE(rep->version >= 2 && rep->version <= 5, GT_E_UNSUPPORTED,
              "version %u (expected 2 to 5)", rep->version);
    GT_TRY(gt_reader_u32le(r, &rep->guest_svn));                        // 0x004
    GT_TRY(gt_reader_u64le(r, &rep->policy));                           // 0x008
    GT_TRY(gt_reader_bytes(r, rep->family_id, sizeof rep->family_id));  // 0x010
    GT_TRY(gt_reader_bytes(r, rep->image_id, sizeof rep->image_id));    // 0x020
    GT_TRY(gt_reader_u32le(r, &rep->vmpl));                             // 0x030
    GT_TRY(gt_reader_u32le(r, &rep->signature_algo));                   // 0x034
    GT_TRY(read_tcb(r, &rep->current_tcb));                             // 0x038
    GT_TRY(gt_reader_u64le(r, &rep->platform_info));                    // 0x040
    GT_TRY(gt_reader_u32le(r, &rep->signer_info));                      // 0x048
    GT_TRY(gt_reader_skip(r, 4));                                       // 0x04C reserved
    GT_TRY(gt_reader_bytes(r, rep->report_data, sizeof rep->report_data));        // 0x050
    GT_TRY(gt_reader_bytes(r, rep->measurement, sizeof rep->measurement));        // 0x090
    GT_TRY(gt_reader_bytes(r, rep->host_data, sizeof rep->host_data));            // 0x0C0
    GT_TRY(gt_reader_bytes(r, rep->id_key_digest, sizeof rep->id_key_digest));    // 0x0E0
    GT_TRY(gt_reader_bytes(r, rep->author_key_digest, sizeof rep->author_key_digest));  // 0x110
    GT_TRY(gt_reader_bytes(r, rep->report_id, sizeof rep->report_id));            // 0x140
    GT_TRY(gt_reader_bytes(r, rep->report_id_ma, sizeof rep->report_id_ma));      // 0x160
    GT_TRY(read_tcb(r, &rep->reported_tcb));                            // 0x180
    uint8_t cpuid[3] = {0};
    GT_TRY(gt_reader_bytes(r, cpuid, sizeof cpuid));                    // 0x188 (v3+)
    GT_TRY(gt_reader_skip(r, 0x1A0 - 0x18B));                           // reserved
    GT_TRY(gt_reader_bytes(r, rep->chip_id, sizeof rep->chip_id));      // 0x1A0
    GT_TRY(read_tcb(r, &rep->committed_tcb));                           // 0x1E0
    GT_TRY(gt_reader_u8(r, &rep->current_build));                       // 0x1E8
    GT_TRY(gt_reader_u8(r, &rep->current_minor));
    GT_TRY(gt_reader_u8(r, &rep->current_major));
    GT_TRY(gt_reader_skip(r, 1));
    GT_TRY(gt_reader_u8(r, &rep->committed_build));                     // 0x1EC
    GT_TRY(gt_reader_u8(r, &rep->committed_minor));
    GT_TRY(gt_reader_u8(r, &rep->committed_major));
    GT_TRY(gt_reader_skip(r, 1));
    GT_TRY(read_tcb(r, &rep->launch_tcb));                              // 0x1F0
    uint64_t launch_mit = 0, current_mit = 0;
    GT_TRY(gt_reader_u64le(r, &launch_mit));                            // 0x1F8 (v5+)
    GT_TRY(gt_reader_u64le(r, &current_mit));                           // 0x200 (v5+)
    GT_TRY(gt_reader_skip(r, GT_SNP_SIGNED_BYTES - 0x208));             // reserved
    GT_TRY(gt_reader_expect_end(r, "signed region"));
    r = body;
    GT_TRY(gt_reader_bytes(r, rep->sig_r_le, sizeof rep->sig_r_le));    // 0x2A0
    GT_TRY(gt_reader_bytes(r, rep->sig_s_le, sizeof rep->sig_s_le));    // 0x2E8
    gt_span reserved = {0};
    GT_TRY(gt_reader_span(r, GT_SNP_REPORT_BYTES - 0x330, &reserved));  // 0x330 reserved
    rep->sig_reserved_zero = true;
    for (size_t i = 0; i < reserved.len; i++) {
        if (reserved.data[i] != 0) {
            rep->sig_reserved_zero = false;
        }
    }

    if (rep->version >= 3) {
        rep->cpuid_fam_id = cpuid[0];
        rep->cpuid_mod_id = cpuid[1];
        rep->cpuid_step = cpuid[2];
        rep->product = product_from_cpuid(cpuid[0], cpuid[1]);
    }
    if (rep->version >= 5) {
        rep->launch_mit_vector = launch_mit;
        rep->current_mit_vector = current_mit;
    }
    rep->current_tcb = gt_snp_tcb_decode(rep->current_tcb.raw, rep->product);
    rep->reported_tcb = gt_snp_tcb_decode(rep->reported_tcb.raw, rep->product);
    rep->committed_tcb = gt_snp_tcb_decode(rep->committed_tcb.raw, rep->product);
    rep->launch_tcb = gt_snp_tcb_decode(rep->launch_tcb.raw, rep->product);
    return GT_OK;
}

gt_err gt_snp_report_parse(gt_snp_report *rep, const uint8_t *data, size_t len)
{
    memset(rep, 0, sizeof *rep);
    gt_reader r = gt_reader_init(data, len);
    gt_reader body = {0};
    gt_err err = gt_reader_sub(&r, GT_SNP_REPORT_BYTES, &body);
    if (err.code == GT_E_NONE) {
        err = parse_fields(rep, &body);
    }
    if (err.code == GT_E_NONE) {
        err = gt_reader_expect_end(&body, "body");
    }
    if (err.code != GT_E_NONE) {
        memset(rep, 0, sizeof *rep);
        return gt_err_wrap(err, "snp report");
    }
    rep->trailing_bytes = gt_reader_left(&r);
    return GT_OK;
}

gt_err gt_snp_report_signature_rs(const gt_snp_report *rep, uint8_t rs[GT_SNP_SIG_RS_BYTES])
{
    const size_t half = GT_SNP_SIG_RS_BYTES / 2;
    for (size_t i = half; i < GT_SNP_SIG_FIELD_BYTES; i++) {
        GT_ENSURE(rep->sig_r_le[i] == 0 && rep->sig_s_le[i] == 0, GT_E_FORMAT,
                  "snp report: signature r or s longer than 48 bytes");
    }
    for (size_t i = 0; i < half; i++) {  // little-endian -> big-endian
        rs[i] = rep->sig_r_le[half - 1 - i];
        rs[half + i] = rep->sig_s_le[half - 1 - i];
    }
    return GT_OK;
}

gt_err gt_snp_report_verify_signature(const gt_snp_report *rep, const uint8_t *pub_xy,
                                      size_t pub_len)
{
    GT_ENSURE(rep->signature_algo == GT_SNP_SIG_ALGO_ECDSA_P384_SHA384, GT_E_UNSUPPORTED,
              "snp report: signature algorithm %u (expected 1, ECDSA P-384 SHA-384)",
              rep->signature_algo);
    GT_ENSURE(rep->signed_region.len == GT_SNP_SIGNED_BYTES, GT_E_ARG,
              "snp report: not parsed");
    uint8_t rs[GT_SNP_SIG_RS_BYTES] = {0};
    gt_err err = gt_snp_report_signature_rs(rep, rs);
    if (err.code != GT_E_NONE) {
        return gt_errf(GT_E_AUTH, "%s", err.msg);
    }
    err = gt_ecdsa_verify_raw(GT_EC_P384, GT_HASH_SHA384, rs, sizeof rs, rep->signed_region.data,
                              rep->signed_region.len, pub_xy, pub_len);
    if (err.code == GT_E_AUTH) {
        return gt_errf(GT_E_AUTH, "snp report: signature does not verify");
    }
    return err;
}

// ---- claims ---------------------------------------------------------------------------------

static bool add_hex(cJSON *obj, const char *name, const uint8_t *p, size_t n)
{
    char hex[2 * GT_SNP_SIG_FIELD_BYTES + 1];
    if (2 * n + 1 > sizeof hex) {
        return false;
    }
    gt_hex_encode(hex, sizeof hex, p, n);
    return cJSON_AddStringToObject(obj, name, hex) != NULL;
}

static bool add_u64_hex(cJSON *obj, const char *name, uint64_t v, int digits)
{
    char s[24];
    snprintf(s, sizeof s, "0x%0*llx", digits, (unsigned long long)v);
    return cJSON_AddStringToObject(obj, name, s) != NULL;
}

static bool add_tcb(cJSON *obj, const char *name, const gt_snp_tcb *t)
{
    cJSON *o = cJSON_AddObjectToObject(obj, name);
    return o != NULL && add_u64_hex(o, "raw", t->raw, 16) &&
           cJSON_AddNumberToObject(o, "bootloader", t->bootloader) &&
           cJSON_AddNumberToObject(o, "tee", t->tee) && cJSON_AddNumberToObject(o, "snp", t->snp) &&
           cJSON_AddNumberToObject(o, "microcode", t->microcode) &&
           (!t->has_fmc || cJSON_AddNumberToObject(o, "fmc", t->fmc));
}

static bool add_version(cJSON *obj, const char *name, uint8_t major, uint8_t minor, uint8_t build)
{
    char s[16];
    snprintf(s, sizeof s, "%u.%u.%u", major, minor, build);
    return cJSON_AddStringToObject(obj, name, s) != NULL;
}

static bool add_policy(cJSON *obj, uint64_t p)
{
    cJSON *o = cJSON_AddObjectToObject(obj, "policy");
    return o != NULL && add_u64_hex(o, "raw", p, 16) &&
           cJSON_AddNumberToObject(o, "abi_minor", (double)(p & 0xff)) &&
           cJSON_AddNumberToObject(o, "abi_major", (double)((p >> 8) & 0xff)) &&
           cJSON_AddBoolToObject(o, "smt_allowed", (p & GT_SNP_POLICY_SMT) != 0) &&
           cJSON_AddBoolToObject(o, "reserved_bit17_must_be_one",
                                 (p & GT_SNP_POLICY_RESERVED1) != 0) &&
           cJSON_AddBoolToObject(o, "migrate_ma_allowed", (p & GT_SNP_POLICY_MIGRATE_MA) != 0) &&
           cJSON_AddBoolToObject(o, "debug_allowed", (p & GT_SNP_POLICY_DEBUG) != 0) &&
           cJSON_AddBoolToObject(o, "single_socket_required",
                                 (p & GT_SNP_POLICY_SINGLE_SOCKET) != 0);
}

static bool add_signer(cJSON *obj, const gt_snp_report *rep)
{
    cJSON *o = cJSON_AddObjectToObject(obj, "signer_info");
    return o != NULL && add_u64_hex(o, "raw", rep->signer_info, 8) &&
           cJSON_AddNumberToObject(o, "author_key_en", rep->signer_info & 1u) &&
           cJSON_AddNumberToObject(o, "mask_chip_key", (rep->signer_info >> 1) & 1u) &&
           cJSON_AddStringToObject(o, "signing_key",
                                   gt_snp_signing_key_name(gt_snp_report_signing_key(rep)));
}

gt_err gt_snp_report_claims_json(const gt_snp_report *rep, cJSON *obj)
{
    cJSON *region = NULL;
    bool ok =
        cJSON_AddNumberToObject(obj, "version", rep->version) &&
        cJSON_AddNumberToObject(obj, "guest_svn", rep->guest_svn) && add_policy(obj, rep->policy) &&
        add_hex(obj, "family_id", rep->family_id, sizeof rep->family_id) &&
        add_hex(obj, "image_id", rep->image_id, sizeof rep->image_id) &&
        cJSON_AddNumberToObject(obj, "vmpl", rep->vmpl) &&
        cJSON_AddNumberToObject(obj, "signature_algo", rep->signature_algo) &&
        cJSON_AddStringToObject(obj, "signature_algo_name",
                                rep->signature_algo == GT_SNP_SIG_ALGO_ECDSA_P384_SHA384
                                    ? "ECDSA P-384 with SHA-384"
                                    : "unknown");
    if (ok && rep->version >= 3) {
        ok = add_u64_hex(obj, "cpuid_fam_id", rep->cpuid_fam_id, 2) &&
             add_u64_hex(obj, "cpuid_mod_id", rep->cpuid_mod_id, 2) &&
             add_u64_hex(obj, "cpuid_step", rep->cpuid_step, 2) &&
             cJSON_AddStringToObject(obj, "product_from_cpuid", gt_snp_product_name(rep->product));
    }
    ok = ok && add_tcb(obj, "current_tcb", &rep->current_tcb) &&
         add_u64_hex(obj, "platform_info", rep->platform_info, 16) && add_signer(obj, rep) &&
         add_hex(obj, "report_data", rep->report_data, sizeof rep->report_data) &&
         add_hex(obj, "measurement", rep->measurement, sizeof rep->measurement) &&
         add_hex(obj, "host_data", rep->host_data, sizeof rep->host_data) &&
         add_hex(obj, "id_key_digest", rep->id_key_digest, sizeof rep->id_key_digest) &&
         add_hex(obj, "author_key_digest", rep->author_key_digest, sizeof rep->author_key_digest) &&
         add_hex(obj, "report_id", rep->report_id, sizeof rep->report_id) &&
         add_hex(obj, "report_id_ma", rep->report_id_ma, sizeof rep->report_id_ma) &&
         add_tcb(obj, "reported_tcb", &rep->reported_tcb) &&
         add_hex(obj, "chip_id", rep->chip_id, sizeof rep->chip_id) &&
         add_tcb(obj, "committed_tcb", &rep->committed_tcb) &&
         add_version(obj, "current_version", rep->current_major, rep->current_minor,
                     rep->current_build) &&
         add_version(obj, "committed_version", rep->committed_major, rep->committed_minor,
                     rep->committed_build) &&
         add_tcb(obj, "launch_tcb", &rep->launch_tcb);
    if (ok && rep->version >= 5) {
        ok = add_u64_hex(obj, "launch_mit_vector", rep->launch_mit_vector, 16) &&
             add_u64_hex(obj, "current_mit_vector", rep->current_mit_vector, 16);
    }
    ok = ok && add_hex(obj, "signature_r_le", rep->sig_r_le, sizeof rep->sig_r_le) &&
         add_hex(obj, "signature_s_le", rep->sig_s_le, sizeof rep->sig_s_le) &&
         cJSON_AddBoolToObject(obj, "signature_reserved_all_zero", rep->sig_reserved_zero) &&
         (region = cJSON_AddArrayToObject(obj, "signed_region")) != NULL;
    if (ok) {
        cJSON *a = cJSON_CreateNumber(0), *b = cJSON_CreateNumber(GT_SNP_SIGNED_BYTES);
        ok = a != NULL && b != NULL;
        if (ok) {
            cJSON_AddItemToArray(region, a);
            cJSON_AddItemToArray(region, b);
        } else {
            cJSON_Delete(a);
            cJSON_Delete(b);
        }
    }
    GT_ENSURE(ok, GT_E_NOMEM, "snp report: cannot build claims JSON");
    return GT_OK;
}
