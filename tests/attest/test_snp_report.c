// attest/: AMD SEV-SNP report parsing and verification against the real samples of
// tests/testdata/attestation/snp/ (catalog.json says which certificate verifies which report and at
// which time; <evidence>.expected.json holds every parsed value).
#include "testlib.h"
#include "testlib_json.h"

#include "attest/snp_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SNP_DIR "attestation/snp/"

// ---- fixtures -------------------------------------------------------------------------------

typedef struct {
    gt_x509 **certs;
    size_t count;
} cert_list;

static void certs_load(const char *file, cert_list *out)
{
    char rel[512];
    snprintf(rel, sizeof rel, SNP_DIR "%s", file);
    gt_buf b = {0};
    gt_test_read_data(rel, &b);
    memset(out, 0, sizeof *out);
    size_t n = strlen(file);
    if (n > 4 && strcmp(file + n - 4, ".der") == 0) {
        out->certs = calloc(1, sizeof *out->certs);
        assert_non_null(out->certs);
        GT_ASSERT_OK(gt_x509_parse_der(&out->certs[0], b.data, b.len));
        out->count = 1;
    } else {
        GT_ASSERT_OK(gt_x509_parse_pem_all(&out->certs, &out->count, (const char *)b.data, b.len));
    }
    assert_true(out->count >= 1);
    gt_buf_free_nowipe(&b);
}

static void certs_free(cert_list *l)
{
    for (size_t i = 0; i < l->count; i++) {
        gt_x509_free(l->certs[i]);
    }
    free(l->certs);
    memset(l, 0, sizeof *l);
}

// One catalog sample with everything loaded.
typedef struct {
    char id[64];
    char evidence[128];
    gt_buf report;       // raw bytes
    cert_list vek;       // vek.certs[0] is the VCEK/VLEK (the file may carry the chain too)
    cert_list ca;        // ASK/ASVK first, ARK last
    int64_t at;
    cJSON *expected;     // the whole .expected.json
} sample;

static void sample_free(sample *s)
{
    gt_buf_free_nowipe(&s->report);
    certs_free(&s->vek);
    certs_free(&s->ca);
    cJSON_Delete(s->expected);
    memset(s, 0, sizeof *s);
}

static void sample_load(const cJSON *entry, sample *s)
{
    memset(s, 0, sizeof *s);
    const char *id = NULL, *ev = NULL, *vek = NULL, *ca = NULL;
    GT_ASSERT_OK(gt_json_get_string(entry, "id", &id));
    GT_ASSERT_OK(gt_json_get_string(entry, "evidence", &ev));
    GT_ASSERT_OK(gt_json_get_string(entry, "vek", &vek));
    GT_ASSERT_OK(gt_json_get_string(entry, "ca_chain", &ca));
    snprintf(s->id, sizeof s->id, "%s", id);
    snprintf(s->evidence, sizeof s->evidence, "%s", ev);
    char rel[512];
    snprintf(rel, sizeof rel, SNP_DIR "%s", ev);
    gt_test_read_data(rel, &s->report);
    certs_load(vek, &s->vek);
    certs_load(ca, &s->ca);
    assert_true(s->ca.count == 2);
    // MANIFEST: "verify at time" where given (expired collateral), else now (openssl verify).
    uint64_t at = 0;
    s->at = cJSON_GetObjectItemCaseSensitive(entry, "attime") != NULL &&
                    gt_is_ok(gt_json_get_u64(entry, "attime", &at))
                ? (int64_t)at
                : (int64_t)time(NULL);
    snprintf(rel, sizeof rel, SNP_DIR "%s.expected.json", ev);
    s->expected = gt_test_load_json(rel);
}

static gt_snp_verify_params sample_params(const sample *s)
{
    return (gt_snp_verify_params){
        .vek = s->vek.certs[0],
        .intermediates = (const gt_x509 *const *)s->ca.certs,
        .intermediate_count = 1,
        .roots = (const gt_x509 *const *)&s->ca.certs[1],
        .root_count = 1,
        .at = s->at,
    };
}

static cJSON *catalog_samples(cJSON **catalog)
{
    *catalog = gt_test_load_json(SNP_DIR "catalog.json");
    cJSON *samples = cJSON_GetObjectItemCaseSensitive(*catalog, "samples");
    assert_true(cJSON_IsArray(samples));
    assert_int_equal(cJSON_GetArraySize(samples), 4);
    return samples;
}

// Loads catalog sample number i.
static void sample_nth(int i, sample *s)
{
    cJSON *catalog = NULL;
    cJSON *samples = catalog_samples(&catalog);
    sample_load(cJSON_GetArrayItem(samples, i), s);
    cJSON_Delete(catalog);
}

static bool has_reason(const gt_snp_verdict *v, const char *needle)
{
    for (size_t i = 0; i < v->reason_count && i < GT_SNP_MAX_REASONS; i++) {
        if (strstr(v->reasons[i], needle) != NULL) {
            return true;
        }
    }
    return false;
}

static void vek_pub(const gt_x509 *vek, uint8_t xy[GT_P384_XY_BYTES])
{
    gt_pkey *key = NULL;
    size_t len = 0;
    GT_ASSERT_OK(gt_x509_public_key(vek, &key));
    GT_ASSERT_OK(gt_pkey_ec_public_xy(key, xy, GT_P384_XY_BYTES, &len));
    assert_int_equal(len, GT_P384_XY_BYTES);
    gt_pkey_free(key);
}

// ---- parsing --------------------------------------------------------------------------------

// Every sample parses to exactly the values of its .expected.json: every emitted claim is
// compared, and every expected field is emitted (file_size is the input's, checked apart).
static void samples_parse_to_expected_values(void **state)
{
    (void)state;
    cJSON *catalog = NULL;
    cJSON *samples = catalog_samples(&catalog);
    const cJSON *entry = NULL;
    cJSON_ArrayForEach(entry, samples) {
        sample s;
        sample_load(entry, &s);
        gt_snp_report rep;
        GT_ASSERT_OK(gt_snp_report_parse(&rep, s.report.data, s.report.len));
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(s.expected, "parsed");
        assert_non_null(want);

        cJSON *got = cJSON_CreateObject();
        GT_ASSERT_OK(gt_snp_report_claims_json(&rep, got));
        static const char *const not_claims[] = {"file_size", NULL};
        gt_test_json_expect_equal(got, want, not_claims, s.id);
        cJSON_Delete(got);

        uint64_t file_size = 0;
        GT_ASSERT_OK(gt_json_get_u64(want, "file_size", &file_size));
        assert_int_equal(file_size, s.report.len);
        assert_int_equal(rep.trailing_bytes, 0);
        assert_ptr_equal(rep.signed_region.data, s.report.data);
        assert_int_equal(rep.signed_region.len, GT_SNP_SIGNED_BYTES);
        // The struct agrees with the claims on the fields policy code reads directly.
        const cJSON *pol = cJSON_GetObjectItemCaseSensitive(want, "policy");
        bool debug = false;
        GT_ASSERT_OK(gt_json_get_bool(pol, "debug_allowed", &debug));
        assert_int_equal(gt_snp_report_debug_allowed(&rep), debug);
        uint8_t meas[GT_MEASUREMENT_BYTES];
        GT_ASSERT_OK(gt_json_get_hex(want, "measurement", meas, sizeof meas));
        assert_memory_equal(rep.measurement, meas, sizeof meas);
        uint8_t chip[GT_SNP_CHIP_ID_BYTES];
        GT_ASSERT_OK(gt_json_get_hex(want, "chip_id", chip, sizeof chip));
        assert_memory_equal(rep.chip_id, chip, sizeof chip);
        sample_free(&s);
    }
    cJSON_Delete(catalog);
}

// Known values, checked by hand against the MANIFEST tables (catches a wrong expected file too).
static void parse_known_values(void **state)
{
    (void)state;
    sample s;
    sample_nth(1, &s);  // trustee-vlek-milan-v3
    gt_snp_report rep;
    GT_ASSERT_OK(gt_snp_report_parse(&rep, s.report.data, s.report.len));
    assert_int_equal(rep.version, 3);
    assert_int_equal(rep.vmpl, 1);
    assert_int_equal(gt_snp_report_signing_key(&rep), GT_SNP_KEY_VLEK);
    assert_int_equal(rep.product, GT_SNP_PRODUCT_MILAN);
    assert_true(rep.reported_tcb.raw == 0xd918000000000004ull);
    assert_int_equal(rep.reported_tcb.bootloader, 4);
    assert_int_equal(rep.reported_tcb.snp, 24);
    assert_int_equal(rep.reported_tcb.microcode, 217);
    assert_false(rep.reported_tcb.has_fmc);
    assert_int_equal(rep.current_major, 1);
    assert_int_equal(rep.current_minor, 55);
    assert_int_equal(rep.current_build, 29);
    assert_false(gt_snp_report_debug_allowed(&rep));
    sample_free(&s);
}

// Turin's TCB layout (fmc, bl, tee, snp in the low bytes); Milan/Genoa keep snp in byte 6.
static void tcb_layouts(void **state)
{
    (void)state;
    gt_snp_tcb t = gt_snp_tcb_decode(0x4405000000000002ull, GT_SNP_PRODUCT_MILAN);
    assert_int_equal(t.bootloader, 2);
    assert_int_equal(t.tee, 0);
    assert_int_equal(t.snp, 5);
    assert_int_equal(t.microcode, 0x44);
    assert_false(t.has_fmc);
    t = gt_snp_tcb_decode(0x480000001b040301ull, GT_SNP_PRODUCT_TURIN);
    assert_true(t.has_fmc);
    assert_int_equal(t.fmc, 1);
    assert_int_equal(t.bootloader, 3);
    assert_int_equal(t.tee, 4);
    assert_int_equal(t.snp, 0x1b);
    assert_int_equal(t.microcode, 0x48);
}

// Parsers trust the format's length, never the buffer size: trailing bytes are counted, ignored.
static void trailing_bytes_are_ignored(void **state)
{
    (void)state;
    sample s;
    sample_nth(0, &s);
    gt_buf big = {0};
    GT_ASSERT_OK(gt_buf_append(&big, s.report.data, s.report.len));
    static const uint8_t junk[100] = {0xff};
    GT_ASSERT_OK(gt_buf_append(&big, junk, sizeof junk));
    gt_snp_report a, b;
    GT_ASSERT_OK(gt_snp_report_parse(&a, s.report.data, s.report.len));
    GT_ASSERT_OK(gt_snp_report_parse(&b, big.data, big.len));
    assert_int_equal(b.trailing_bytes, 100);
    assert_memory_equal(a.measurement, b.measurement, sizeof a.measurement);
    assert_memory_equal(a.sig_r_le, b.sig_r_le, sizeof a.sig_r_le);
    uint8_t xy[GT_P384_XY_BYTES];
    vek_pub(s.vek.certs[0], xy);
    GT_ASSERT_OK(gt_snp_report_verify_signature(&b, xy, sizeof xy));
    gt_buf_free_nowipe(&big);
    sample_free(&s);
}

// Truncation at every offset is a clean TRUNCATED error and leaves the output zeroed.
static void truncation_at_every_offset(void **state)
{
    (void)state;
    sample s;
    sample_nth(3, &s);
    static const gt_snp_report zero;
    for (size_t n = 0; n < GT_SNP_REPORT_BYTES; n++) {
        gt_snp_report rep;
        memset(&rep, 0xa5, sizeof rep);
        gt_err e = gt_snp_report_parse(&rep, s.report.data, n);
        if (e.code != GT_E_TRUNCATED) {
            fail_msg("length %zu: expected TRUNCATED, got %s (%s)", n, gt_code_name(e.code),
                     e.msg);
        }
        assert_memory_equal(&rep, &zero, sizeof rep);
    }
    sample_free(&s);
}

static void unsupported_versions_rejected(void **state)
{
    (void)state;
    sample s;
    sample_nth(0, &s);
    static const uint32_t bad[] = {0, 1, 6, 0x100, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gt_store_u32le(s.report.data, bad[i]);
        gt_snp_report rep;
        GT_ASSERT_CODE(gt_snp_report_parse(&rep, s.report.data, s.report.len), GT_E_UNSUPPORTED);
        assert_int_equal(rep.version, 0);
    }
    sample_free(&s);
}

// ---- verification ---------------------------------------------------------------------------

// Each sample verifies as its MANIFEST says: signature, chain to the ARK at the given time,
// VCEK hwID == chip_id, VEK TCB == reported_tcb.
static void samples_verify(void **state)
{
    (void)state;
    cJSON *catalog = NULL;
    cJSON *samples = catalog_samples(&catalog);
    const cJSON *entry = NULL;
    cJSON_ArrayForEach(entry, samples) {
        sample s;
        sample_load(entry, &s);
        gt_snp_report rep;
        GT_ASSERT_OK(gt_snp_report_parse(&rep, s.report.data, s.report.len));
        gt_snp_verify_params p = sample_params(&s);
        gt_snp_verdict v;
        GT_ASSERT_OK(gt_snp_report_verify(&v, &rep, &p));
        if (!v.ok) {
            fail_msg("%s: %zu reasons, first: %s", s.id, v.reason_count, v.reasons[0]);
        }
        assert_true(v.signature_valid && v.chain_valid && v.key_valid && v.tcb_valid &&
                    v.chip_id_valid);
        assert_int_equal(v.reason_count, 0);
        // Every check the MANIFEST lists passed there too.
        const cJSON *checks = cJSON_GetObjectItemCaseSensitive(s.expected, "checks");
        const cJSON *c = NULL;
        cJSON_ArrayForEach(c, checks) {
            assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "ok")));
        }
        sample_free(&s);
    }
    cJSON_Delete(catalog);
}

// Flipping any single bit of the signed region (and of r and s) is rejected: exhaustively, on
// the go-sev-guest sample, with the VCEK key parsed once.
static void every_bit_flip_rejected(void **state)
{
    (void)state;
    sample s;
    sample_nth(0, &s);
    uint8_t xy[GT_P384_XY_BYTES];
    vek_pub(s.vek.certs[0], xy);
    gt_snp_report rep;
    GT_ASSERT_OK(gt_snp_report_parse(&rep, s.report.data, s.report.len));
    GT_ASSERT_OK(gt_snp_report_verify_signature(&rep, xy, sizeof xy));

    size_t parse_rejects = 0, sig_rejects = 0;
    const size_t bits = (size_t)(GT_SNP_SIGNED_BYTES + 2 * GT_SNP_SIG_FIELD_BYTES) * 8;
    for (size_t bit = 0; bit < bits; bit++) {
        s.report.data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        gt_err e = gt_snp_report_parse(&rep, s.report.data, s.report.len);
        if (e.code != GT_E_NONE) {
            assert_int_equal(e.code, GT_E_UNSUPPORTED);  // only the version word can do this
            assert_true(bit < 32);
            parse_rejects++;
        } else {
            e = gt_snp_report_verify_signature(&rep, xy, sizeof xy);
            if (e.code != GT_E_AUTH && e.code != GT_E_UNSUPPORTED) {
                fail_msg("bit %zu: flip not rejected (%s)", bit, gt_code_name(e.code));
            }
            sig_rejects++;
        }
        s.report.data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    assert_int_equal(parse_rejects + sig_rejects, bits);
    GT_ASSERT_OK(gt_snp_report_parse(&rep, s.report.data, s.report.len));
    GT_ASSERT_OK(gt_snp_report_verify_signature(&rep, xy, sizeof xy));
    sample_free(&s);
}

// The Genoa ARK is not the root of a Milan VCEK: chain rejected, with a reason.
static void wrong_root_rejected(void **state)
{
    (void)state;
    sample milan, genoa;
    sample_nth(0, &milan);
    sample_nth(3, &genoa);
    gt_snp_report rep;
    GT_ASSERT_OK(gt_snp_report_parse(&rep, milan.report.data, milan.report.len));
    gt_snp_verify_params p = sample_params(&milan);
    p.roots = (const gt_x509 *const *)&genoa.ca.certs[1];
    gt_snp_verdict v;
    GT_ASSERT_OK(gt_snp_report_verify(&v, &rep, &p));
    assert_false(v.ok);
    assert_false(v.chain_valid);
    assert_true(v.signature_valid);  // the report itself is fine: only the chain fails
    assert_true(has_reason(&v, "chain"));
    // No roots at all: also rejected.
    p.root_count = 0;
    GT_ASSERT_OK(gt_snp_report_verify(&v, &rep, &p));
    assert_false(v.ok);
    assert_false(v.chain_valid);
    sample_free(&milan);
    sample_free(&genoa);
}

// Another chip's VCEK (valid chain): signature, chip id and TCB all fail, each with a reason.
static void wrong_vcek_rejected(void **state)
{
    (void)state;
    sample gosev, azure;
    sample_nth(0, &gosev);
    sample_nth(2, &azure);
    gt_snp_report rep;
    GT_ASSERT_OK(gt_snp_report_parse(&rep, gosev.report.data, gosev.report.len));
    gt_snp_verify_params p = sample_params(&gosev);
    p.vek = azure.vek.certs[0];
    gt_snp_verdict v;
    GT_ASSERT_OK(gt_snp_report_verify(&v, &rep, &p));
    assert_false(v.ok);
    assert_true(v.chain_valid);
    assert_false(v.signature_valid);
    assert_false(v.chip_id_valid);
    assert_false(v.tcb_valid);
    assert_true(has_reason(&v, "signature does not verify"));
    assert_true(has_reason(&v, "hwID != report chip_id"));
    assert_true(has_reason(&v, "blSPL"));
    assert_true(v.reason_count >= 3);
    sample_free(&gosev);
    sample_free(&azure);
}

// The VCEK extension checks on their own: a different chip id or any TCB component mismatches.
static void chip_id_and_tcb_mismatch_rejected(void **state)
{
    (void)state;
    sample s;
    sample_nth(2, &s);  // azure-milan-v2
    gt_snp_report rep;
    GT_ASSERT_OK(gt_snp_report_parse(&rep, s.report.data, s.report.len));
    const gt_x509 *vek = s.vek.certs[0];
    GT_ASSERT_OK(gt_snp_vek_check_tcb(vek, &rep.reported_tcb));
    GT_ASSERT_OK(gt_snp_vek_check_chip_id(vek, rep.chip_id, rep.product));
    // A Milan VCEK's 64-byte hwID must match all 64 bytes, even when asked as Turin.
    GT_ASSERT_OK(gt_snp_vek_check_chip_id(vek, rep.chip_id, GT_SNP_PRODUCT_TURIN));

    uint8_t chip[GT_SNP_CHIP_ID_BYTES];
    memcpy(chip, rep.chip_id, sizeof chip);
    chip[63] ^= 1;
    GT_ASSERT_CODE(gt_snp_vek_check_chip_id(vek, chip, rep.product), GT_E_AUTH);
    GT_ASSERT_CODE(gt_snp_vek_check_chip_id(vek, chip, GT_SNP_PRODUCT_TURIN), GT_E_AUTH);

    // current_tcb differs from reported_tcb in this sample (ucode 210 vs 115): the VCEK is for
    // the reported one, so the current one must not match.
    GT_ASSERT_CODE(gt_snp_vek_check_tcb(vek, &rep.current_tcb), GT_E_AUTH);
    for (int field = 0; field < 4; field++) {
        gt_snp_tcb t = rep.reported_tcb;
        uint8_t *f = field == 0 ? &t.bootloader : field == 1 ? &t.tee : field == 2 ? &t.snp
                                                                                  : &t.microcode;
        *f = (uint8_t)(*f + 1);
        gt_err e = gt_snp_vek_check_tcb(vek, &t);
        assert_int_equal(e.code, GT_E_AUTH);
        static const char *const names[] = {"blSPL", "teeSPL", "snpSPL", "ucodeSPL"};
        assert_non_null(strstr(e.msg, names[field]));
    }
    // A Turin TCB asks for fmcSPL, which a Milan VCEK does not have.
    gt_snp_tcb t = rep.reported_tcb;
    t.has_fmc = true;
    GT_ASSERT_CODE(gt_snp_vek_check_tcb(vek, &t), GT_E_NOTFOUND);

    // Through the full verdict: a report whose chip id was changed fails both the signature and
    // the chip id check.
    s.report.data[0x1A0] ^= 0x80;
    GT_ASSERT_OK(gt_snp_report_parse(&rep, s.report.data, s.report.len));
    gt_snp_verify_params p = sample_params(&s);
    gt_snp_verdict v;
    GT_ASSERT_OK(gt_snp_report_verify(&v, &rep, &p));
    assert_false(v.ok);
    assert_false(v.signature_valid);
    assert_false(v.chip_id_valid);
    assert_true(v.tcb_valid);
    assert_true(v.chain_valid);
    assert_int_equal(v.reason_count, 2);
    sample_free(&s);
}

// The VLEK expired on 2025-12-10: valid at the MANIFEST's time, rejected after expiry and before
// issue.
static void expired_vlek_rejected(void **state)
{
    (void)state;
    sample s;
    sample_nth(1, &s);
    assert_true(s.at == 1748736000);
    gt_snp_report rep;
    GT_ASSERT_OK(gt_snp_report_parse(&rep, s.report.data, s.report.len));
    gt_snp_verify_params p = sample_params(&s);
    gt_snp_verdict v;
    GT_ASSERT_OK(gt_snp_report_verify(&v, &rep, &p));
    assert_true(v.ok);
    assert_true(v.chip_id_valid);  // not applicable to a VLEK (chip_id is zero)

    static const struct {
        int64_t at;
        const char *why;
    } bad[] = {
        {1767225600, "expired"},        // 2026-01-01
        {1704067200, "not yet valid"},  // 2024-01-01
    };
    for (size_t i = 0; i < 2; i++) {
        p.at = bad[i].at;
        GT_ASSERT_OK(gt_snp_report_verify(&v, &rep, &p));
        assert_false(v.ok);
        assert_false(v.chain_valid);
        assert_true(v.signature_valid);
        assert_int_equal(v.reason_count, 1);
        assert_true(has_reason(&v, "chain"));
        if (!has_reason(&v, bad[i].why)) {
            fail_msg("at %lld: reason \"%s\" does not say %s", (long long)bad[i].at,
                     v.reasons[0], bad[i].why);
        }
    }
    sample_free(&s);
}

// The certificate kind must be the one the report names: a VCEK-signed report checked against
// the VLEK (and vice versa) is rejected for the key, not only for the signature.
static void signing_key_kind_checked(void **state)
{
    (void)state;
    sample vcek, vlek;
    sample_nth(0, &vcek);
    sample_nth(1, &vlek);
    gt_snp_report rep;
    GT_ASSERT_OK(gt_snp_report_parse(&rep, vcek.report.data, vcek.report.len));
    gt_snp_verify_params p = sample_params(&vlek);
    gt_snp_verdict v;
    GT_ASSERT_OK(gt_snp_report_verify(&v, &rep, &p));
    assert_false(v.ok);
    assert_false(v.key_valid);
    assert_false(v.signature_valid);
    assert_true(has_reason(&v, "SEV-VLEK"));

    // signer_info says "no key": never accepted.
    vcek.report.data[0x48] = (uint8_t)(GT_SNP_KEY_NONE << 2);
    GT_ASSERT_OK(gt_snp_report_parse(&rep, vcek.report.data, vcek.report.len));
    p = sample_params(&vcek);
    GT_ASSERT_OK(gt_snp_report_verify(&v, &rep, &p));
    assert_false(v.ok);
    assert_false(v.key_valid);
    assert_true(has_reason(&v, "signing key is none"));
    sample_free(&vcek);
    sample_free(&vlek);
}

// A v3 report must come from the product its VEK was issued for: the Genoa report's CPUID is
// changed to Milan (the signature breaks too, but the product reason must be there).
static void product_mismatch_rejected(void **state)
{
    (void)state;
    sample s;
    sample_nth(3, &s);
    s.report.data[0x189] = 0x01;  // model 0x01: Milan
    gt_snp_report rep;
    GT_ASSERT_OK(gt_snp_report_parse(&rep, s.report.data, s.report.len));
    assert_int_equal(rep.product, GT_SNP_PRODUCT_MILAN);
    gt_snp_verify_params p = sample_params(&s);
    gt_snp_verdict v;
    GT_ASSERT_OK(gt_snp_report_verify(&v, &rep, &p));
    assert_false(v.key_valid);
    assert_true(has_reason(&v, "CPUID says Milan"));
    sample_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(samples_parse_to_expected_values),
        cmocka_unit_test(parse_known_values),
        cmocka_unit_test(tcb_layouts),
        cmocka_unit_test(trailing_bytes_are_ignored),
        cmocka_unit_test(truncation_at_every_offset),
        cmocka_unit_test(unsupported_versions_rejected),
        cmocka_unit_test(samples_verify),
        cmocka_unit_test(every_bit_flip_rejected),
        cmocka_unit_test(wrong_root_rejected),
        cmocka_unit_test(wrong_vcek_rejected),
        cmocka_unit_test(chip_id_and_tcb_mismatch_rejected),
        cmocka_unit_test(expired_vlek_rejected),
        cmocka_unit_test(signing_key_kind_checked),
        cmocka_unit_test(product_mismatch_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
