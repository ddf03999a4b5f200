// SEV-SNP report verification: report signature by the VEK, VEK -> ASK/ASVK -> ARK chain, and
// the VEK's TCB/hwID extensions against the report (AMD 57230, "VCEK certificate extensions").
#include "snp_report.h"

#include "chain.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void add_reason(gt_snp_verdict *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_reason(gt_snp_verdict *v, const char *fmt, ...)
{
    if (v->reason_count < GT_SNP_MAX_REASONS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(v->reasons[v->reason_count], GT_SNP_REASON_BYTES, fmt, ap);
        va_end(ap);
    }
    v->reason_count++;
}

// One DER TLV header: tag, then the definite length (short form or 1..3 length bytes).
static gt_err der_header(gt_reader *r, uint8_t want_tag, size_t *len)
{
    uint8_t tag = 0, l0 = 0;
    GT_TRY(gt_reader_u8(r, &tag));
    GT_ENSURE(tag == want_tag, GT_E_FORMAT, "DER tag 0x%02x (expected 0x%02x)", tag, want_tag);
    GT_TRY(gt_reader_u8(r, &l0));
    if (l0 < 0x80) {
        *len = l0;
        return GT_OK;
    }
    size_t nbytes = l0 & 0x7fu, v = 0;
    GT_ENSURE(nbytes >= 1 && nbytes <= 3, GT_E_FORMAT, "DER length form 0x%02x", l0);
    for (size_t i = 0; i < nbytes; i++) {
        uint8_t b = 0;
        GT_TRY(gt_reader_u8(r, &b));
        v = (v << 8) | b;
    }
    *len = v;
    return GT_OK;
}

// A DER INTEGER (the whole extension value) that must fit in 0..255.
static gt_err ext_spl(const gt_x509 *vek, const char *oid, uint8_t *out)
{
    gt_span val = {0};
    GT_TRY(gt_x509_extension(vek, oid, &val));
    gt_reader r = gt_reader_init(val.data, val.len);
    size_t n = 0;
    GT_TRY(der_header(&r, 0x02, &n));
    gt_span num = {0};
    GT_TRY(gt_reader_span(&r, n, &num));
    GT_TRY(gt_reader_expect_end(&r, oid));
    GT_ENSURE(n >= 1 && !(num.data[0] & 0x80), GT_E_FORMAT, "%s: not a non-negative INTEGER",
              oid);
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        GT_ENSURE(v <= 0xffffff, GT_E_FORMAT, "%s: INTEGER too large", oid);
        v = (v << 8) | num.data[i];
    }
    GT_ENSURE(v <= 0xff, GT_E_FORMAT, "%s: SPL %u out of range", oid, v);
    *out = (uint8_t)v;
    return GT_OK;
}

static gt_err check_spl(const gt_x509 *vek, const char *oid, const char *name, uint8_t want)
{
    uint8_t got = 0;
    GT_TRY(gt_err_wrap(ext_spl(vek, oid, &got), "VEK %s", name));
    GT_ENSURE(got == want, GT_E_AUTH, "VEK %s %u != report reported_tcb %s %u", name, got, name,
              want);
    return GT_OK;
}

gt_err gt_snp_vek_check_tcb(const gt_x509 *vek, const gt_snp_tcb *tcb)
{
    GT_TRY(check_spl(vek, GT_SNP_OID_BL_SPL, "blSPL", tcb->bootloader));
    GT_TRY(check_spl(vek, GT_SNP_OID_TEE_SPL, "teeSPL", tcb->tee));
    GT_TRY(check_spl(vek, GT_SNP_OID_SNP_SPL, "snpSPL", tcb->snp));
    GT_TRY(check_spl(vek, GT_SNP_OID_UCODE_SPL, "ucodeSPL", tcb->microcode));
    if (tcb->has_fmc) {
        GT_TRY(check_spl(vek, GT_SNP_OID_FMC_SPL, "fmcSPL", tcb->fmc));
    }
    return GT_OK;
}

gt_err gt_snp_vek_check_chip_id(const gt_x509 *vek, const uint8_t chip_id[GT_SNP_CHIP_ID_BYTES],
                                gt_snp_product product)
{
    gt_span val = {0};
    GT_TRY(gt_err_wrap(gt_x509_extension(vek, GT_SNP_OID_HWID, &val), "VCEK hwID"));
    gt_span id = val;
    if (val.len != GT_SNP_CHIP_ID_BYTES && val.len != GT_SNP_TURIN_HWID_BYTES) {
        // KDS writes the raw bytes; accept a DER OCTET STRING around them too.
        gt_reader r = gt_reader_init(val.data, val.len);
        size_t n = 0;
        GT_TRY(gt_err_wrap(der_header(&r, 0x04, &n), "VCEK hwID"));
        GT_TRY(gt_err_wrap(gt_reader_span(&r, n, &id), "VCEK hwID"));
        GT_TRY(gt_reader_expect_end(&r, "VCEK hwID"));
    }
    // Turin VCEKs are issued for the first 8 bytes of the chip id only.
    bool short_ok = product == GT_SNP_PRODUCT_TURIN && id.len == GT_SNP_TURIN_HWID_BYTES;
    GT_ENSURE(id.len == GT_SNP_CHIP_ID_BYTES || short_ok, GT_E_FORMAT,
              "VCEK hwID: %zu bytes (expected 64%s)", id.len,
              product == GT_SNP_PRODUCT_TURIN ? " or 8" : "");
    GT_ENSURE(gt_ct_equal(id.data, chip_id, id.len), GT_E_AUTH, "VCEK hwID != report chip_id");
    return GT_OK;
}

// The VEK product name extension is an IA5String such as "Milan-B0" or "Genoa".
static gt_err vek_product(const gt_x509 *vek, char *out, size_t cap)
{
    gt_span val = {0};
    GT_TRY(gt_x509_extension(vek, GT_SNP_OID_PRODUCT_NAME, &val));
    gt_reader r = gt_reader_init(val.data, val.len);
    size_t n = 0;
    GT_TRY(der_header(&r, 0x16, &n));
    gt_span s = {0};
    GT_TRY(gt_reader_span(&r, n, &s));
    GT_ENSURE(n < cap, GT_E_FORMAT, "product name too long");
    for (size_t i = 0; i < n; i++) {
        GT_ENSURE(s.data[i] >= 0x20 && s.data[i] < 0x7f, GT_E_FORMAT, "product name not printable");
        out[i] = (char)s.data[i];
    }
    out[n] = '\0';
    return GT_OK;
}

static void check_key_kind(gt_snp_verdict *v, const gt_snp_report *rep, const gt_x509 *vek)
{
    gt_snp_signing_key key = gt_snp_report_signing_key(rep);
    char cn[128] = {0};
    gt_x509_subject_cn(vek, cn, sizeof cn);
    const char *want = key == GT_SNP_KEY_VCEK   ? "SEV-VCEK"
                       : key == GT_SNP_KEY_VLEK ? "SEV-VLEK"
                                                : NULL;
    if (want == NULL) {
        add_reason(v, "report signing key is %s (signer_info 0x%08x): not signed by a VCEK/VLEK",
                   gt_snp_signing_key_name(key), rep->signer_info);
        v->key_valid = false;
    } else if (strcmp(cn, want) != 0) {
        add_reason(v, "report names the %s but the certificate is \"%s\"",
                   gt_snp_signing_key_name(key), cn);
        v->key_valid = false;
    }
    if ((rep->signer_info & 2u) != 0) {
        add_reason(v, "report has MASK_CHIP_KEY set: it carries no signature");
        v->key_valid = false;
    }
    if (rep->product != GT_SNP_PRODUCT_UNKNOWN) {
        char prod[64] = {0};
        const char *want_prod = gt_snp_product_name(rep->product);
        gt_err e = vek_product(vek, prod, sizeof prod);
        if (e.code != GT_E_NONE) {
            add_reason(v, "VEK product name: %s", e.msg);
            v->key_valid = false;
        } else if (strncmp(prod, want_prod, strlen(want_prod)) != 0) {
            add_reason(v, "VEK is for product \"%s\" but the report's CPUID says %s", prod,
                       want_prod);
            v->key_valid = false;
        }
    } else if (rep->version >= 3) {
        add_reason(v, "report CPUID family 0x%02x model 0x%02x is not a known SNP product",
                   rep->cpuid_fam_id, rep->cpuid_mod_id);
        v->key_valid = false;
    }
}

gt_err gt_snp_report_verify(gt_snp_verdict *v, const gt_snp_report *rep,
                            const gt_snp_verify_params *p)
{
    memset(v, 0, sizeof *v);
    GT_ENSURE(p != NULL && p->vek != NULL, GT_E_ARG, "snp verify: no VEK certificate");
    v->key_valid = true;
    v->tcb_valid = true;
    v->chip_id_valid = true;

    // 1. Chain: VEK -> ASK/ASVK -> a trusted ARK, at the given time.
    gt_x509_verify_params xp = {
        .intermediates = p->intermediates,
        .intermediate_count = p->intermediate_count,
        .roots = p->roots,
        .root_count = p->root_count,
        .crls = p->crls,
        .crl_count = p->crl_count,
        .at = p->at,
    };
    gt_err e = gt_attest_chain_verify(p->vek, &xp);
    v->chain_valid = e.code == GT_E_NONE;
    if (!v->chain_valid) {
        if (e.code != GT_E_AUTH) {
            return gt_err_wrap(e, "snp verify: chain");
        }
        add_reason(v, "VEK certificate chain: %s", e.msg);
    }

    // 2. Which key signed, and for which product.
    check_key_kind(v, rep, p->vek);

    // 3. The report signature with the VEK's public key.
    uint8_t xy[2 * 66] = {0};
    size_t xy_len = 0;
    e = gt_attest_leaf_ec_point(p->vek, xy, sizeof xy, &xy_len);
    if (e.code != GT_E_NONE) {
        add_reason(v, "VEK public key: %s", e.msg);
    } else if (xy_len != GT_P384_XY_BYTES) {
        add_reason(v, "VEK public key is not P-384 (%zu-byte point)", xy_len);
    } else {
        e = gt_snp_report_verify_signature(rep, xy, xy_len);
        v->signature_valid = e.code == GT_E_NONE;
        if (!v->signature_valid) {
            if (e.code != GT_E_AUTH && e.code != GT_E_UNSUPPORTED) {
                return gt_err_wrap(e, "snp verify: signature");
            }
            add_reason(v, "%s", e.msg);
        }
    }

    // 4. The VEK was issued for exactly this TCB (and, for a VCEK, this chip).
    e = gt_snp_vek_check_tcb(p->vek, &rep->reported_tcb);
    if (e.code != GT_E_NONE) {
        v->tcb_valid = false;
        add_reason(v, "%s", e.msg);
    }
    if (gt_snp_report_signing_key(rep) != GT_SNP_KEY_VLEK) {
        e = gt_snp_vek_check_chip_id(p->vek, rep->chip_id, rep->product);
        if (e.code != GT_E_NONE) {
            v->chip_id_valid = false;
            add_reason(v, "%s", e.msg);
        }
    }
    v->ok = v->reason_count == 0;
    return GT_OK;
}
