// attest/: TDX quotes v4 and v5 - every sample parses to its .expected.json, verifies as its
// MANIFEST says at a fixed time, and every kind of damage is rejected with the right reason.
#include "intel_testlib.h"

#include <stdio.h>
#include <string.h>

#define TDX_DIR "attestation/tdx/"

// Verification times: each inside the validity window of the sample's collateral (MANIFEST.md);
// samples without collateral at a time all their certificates are valid.
typedef struct {
    const char *id;
    const char *at;
} sample_time;
static const sample_time times[] = {
    {"gotdx-v4-spr-e4", "2023-07-01T00:00:00Z"},  // go-tdx-guest verify_test's time
    {"gotdx-v5-td15", "2026-02-03T00:00:00Z"},    // go-tdx-guest: verifies at 2026-02-03
    {"dcapqvl-v4", "2025-07-01T00:00:00Z"},       // TCB info 2025-06-19 .. 2025-07-19
    {"dcapqvl-v4-hex", "2026-06-01T00:00:00Z"},
    {"trustee-v5", "2026-06-01T00:00:00Z"},
    {"trustee-v4-6", "2026-06-01T00:00:00Z"},
    {"trustee-azure-v4", "2026-06-01T00:00:00Z"},
};

static int64_t sample_at(const char *id)
{
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        if (strcmp(times[i].id, id) == 0) {
            return gt_test_intel_time(times[i].at);
        }
    }
    fail_msg("no verification time for sample %s", id);
    return 0;
}

typedef gt_test_intel_sample sample;

static void sample_load(sample *s, const char *evidence)
{
    gt_test_intel_sample_load(s, TDX_DIR, evidence);
}

static void sample_free(sample *s)
{
    gt_test_intel_sample_free(s);
}

static int setup(void **state)
{
    (void)state;
    gt_test_intel_roots_load(TDX_DIR);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_intel_roots_free();
    return 0;
}


// Every sample of catalog.json parses to exactly the values of its .expected.json.
static void tdx_samples_parse_to_expected(void **state)
{
    (void)state;
    cJSON *cat = gt_test_intel_load_json(TDX_DIR "catalog.json");
    const cJSON *s = NULL;
    int samples = 0, v5 = 0;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(cat, "samples"))
    {
        sample x;
        sample_load(&x, cJSON_GetObjectItemCaseSensitive(s, "evidence")->valuestring);
        assert_true(gt_intel_quote_is_tdx(&x.q));
        int n = gt_test_intel_check_parsed(&x.q, x.file.len, x.expected);
        assert_true(n >= 50);
        v5 += x.q.header.version == 5;
        samples++;
        sample_free(&x);
    }
    assert_int_equal(samples, 7);
    assert_int_equal(v5, 2);
    cJSON_Delete(cat);
}

// Signatures, QE binding and PCK chain verify for every sample at its time; the PCK extension
// values equal the expected ones; with collateral the TCB status is the MANIFEST's.
static void tdx_samples_verify(void **state)
{
    (void)state;
    cJSON *cat = gt_test_intel_load_json(TDX_DIR "catalog.json");
    const cJSON *s = NULL;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(cat, "samples"))
    {
        const char *id = cJSON_GetObjectItemCaseSensitive(s, "id")->valuestring;
        sample x;
        sample_load(&x, cJSON_GetObjectItemCaseSensitive(s, "evidence")->valuestring);
        int64_t at = sample_at(id);

        // Quote and PCK chain only.
        gt_intel_verify_params p = gt_test_intel_params(at, NULL);
        gt_intel_verdict v;
        gt_err err = gt_intel_quote_verify(&x.q, &p, &v);
        if (!gt_is_ok(err)) {
            gt_test_intel_print_verdict(&v);
            fail_msg("%s: %s", id, err.msg);
        }
        assert_true(v.accepted && v.signature_valid && v.chain_valid);
        assert_null(v.tcb_status);
        assert_true(gt_test_intel_check_pck(&v, x.expected) >= 7);

        // With the sample's collateral.
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(s, "collateral");
        const cJSON *tcb = cJSON_GetObjectItemCaseSensitive(x.expected, "tcb");
        if (spec != NULL) {
            gt_intel_collateral c = {0};
            gt_test_intel_load_collateral(TDX_DIR, spec, &c);
            p = gt_test_intel_params(at, &c);
            err = gt_intel_quote_verify(&x.q, &p, &v);
            gt_test_intel_print_verdict(&v);
            assert_true(v.signature_valid && v.chain_valid);
            assert_non_null(tcb);
            const char *want = cJSON_GetObjectItemCaseSensitive(tcb, "platform_tcb_status")
                                   ->valuestring;
            if (strcmp(want, "NoMatchingTcbLevel") == 0) {
                assert_int_equal(err.code, GT_E_AUTH);
                assert_null(v.platform_tcb_status);
                assert_null(v.tcb_status);
                assert_true(gt_intel_verdict_has_reason(&v, "no TCB level matches"));
                // TCB info and QE identity are genuine: their signatures verify.
                assert_false(gt_intel_verdict_has_reason(&v, "signature by the TCB signing"));
                assert_string_equal(v.qe_tcb_status, "UpToDate");
                // The stored TCB signing chain was issued in 2025, after this 2023 collateral.
                assert_true(gt_intel_verdict_has_reason(
                    &v, "TCB signing chain: x509: certificate is not yet valid"));
                assert_int_equal(v.reason_count, 2);
            } else {
                if (!gt_is_ok(err)) {
                    fail_msg("%s with collateral: %s", id, err.msg);
                }
                assert_true(v.collateral_valid);
                assert_string_equal(v.platform_tcb_status, want);
                assert_string_equal(v.tcb_status, want);
                assert_string_equal(v.tdx_module_status,
                                    cJSON_GetObjectItemCaseSensitive(tcb, "tdx_module_status")
                                        ->valuestring);
                assert_string_equal(v.tcb_date, cJSON_GetObjectItemCaseSensitive(
                                                    tcb, "platform_tcb_date")->valuestring);
                const cJSON *qe = cJSON_GetObjectItemCaseSensitive(tcb, "qe_tcb_status");
                if (qe != NULL) {
                    assert_string_equal(v.qe_tcb_status, qe->valuestring);
                } else {
                    assert_null(v.qe_tcb_status);
                }
                assert_int_equal(v.advisory_count, cJSON_GetArraySize(
                    cJSON_GetObjectItemCaseSensitive(tcb, "advisory_ids")));
            }
            gt_intel_collateral_free(&c);
        }
        sample_free(&x);
    }
    cJSON_Delete(cat);
}

// Flipping any single bit of header || body makes the quote signature fail (or the quote
// unparseable): exhaustively, for one v4 and one v5 sample.
static void flip_all_bits(const char *evidence)
{
    sample x;
    sample_load(&x, evidence);
    GT_ASSERT_OK(gt_intel_quote_verify_signature(&x.q));
    size_t n = x.q.signed_region.len;
    int parsed = 0;
    for (size_t i = 0; i < n * 8; i++) {
        x.file.data[i / 8] ^= (uint8_t)(1u << (i % 8));
        gt_intel_quote q;
        gt_err err = gt_intel_quote_parse(&q, x.file.data, x.file.len);
        if (gt_is_ok(err)) {
            parsed++;
            GT_ASSERT_CODE(gt_intel_quote_verify_signature(&q), GT_E_AUTH);
        }
        x.file.data[i / 8] ^= (uint8_t)(1u << (i % 8));
    }
    assert_true(parsed > (int)(n * 8) - 200);  // most flips still parse: the signature rejects
    sample_free(&x);
}

static void tdx_bitflip_signed_region_rejected(void **state)
{
    (void)state;
    flip_all_bits("dcap-qvl_tdx_quote");
    flip_all_bits("go-tdx-guest_quote_v5_sample.dat");
}

// Every truncation parses to a clean error (the length fields reach past the end), and the full
// quote parses whatever follows it.
static void tdx_truncate_every_offset(void **state)
{
    (void)state;
    cJSON *cat = gt_test_intel_load_json(TDX_DIR "catalog.json");
    const cJSON *s = NULL;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(cat, "samples"))
    {
        sample x;
        sample_load(&x, cJSON_GetObjectItemCaseSensitive(s, "evidence")->valuestring);
        size_t used = x.q.size;
        for (size_t len = 0; len < used; len++) {
            gt_intel_quote q;
            gt_err err = gt_intel_quote_parse(&q, x.file.data, len);
            if (err.code != GT_E_TRUNCATED) {
                fail_msg("truncated at %zu of %zu: %s (%s)", len, used, gt_code_name(err.code),
                         err.msg);
            }
            assert_int_equal(q.size, 0);
        }
        gt_intel_quote q;
        GT_ASSERT_OK(gt_intel_quote_parse(&q, x.file.data, used));
        assert_int_equal(q.size, used);
        sample_free(&x);
    }
    cJSON_Delete(cat);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

// Header and length fields out of range give UNSUPPORTED / FORMAT / TRUNCATED with a message.
static void tdx_bad_fields_rejected(void **state)
{
    (void)state;
    sample x, y;
    sample_load(&x, "dcap-qvl_tdx_quote");                  // v4
    sample_load(&y, "go-tdx-guest_quote_v5_sample.dat");    // v5
    gt_intel_quote q;
    uint8_t *d = x.file.data;
    size_t len = x.file.len;

    put16(d, 6);  // version 6
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, len), GT_E_UNSUPPORTED);
    put16(d, 3);  // version 3 with TEE type TDX
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, len), GT_E_FORMAT);
    put16(d, 4);
    put16(d + 2, 3);  // attestation key type 3 (ECDSA P-384)
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, len), GT_E_UNSUPPORTED);
    put16(d + 2, 2);
    d[4] = 0x82;  // TEE type
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, len), GT_E_UNSUPPORTED);
    d[4] = 0x81;
    // Signature data length one too long / far too long.
    gt_store_u32le(d + 632, x.q.signature_data_len + 1);
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, x.q.size), GT_E_TRUNCATED);
    gt_store_u32le(d + 632, 0xffffffffu);
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, len), GT_E_TRUNCATED);
    // One too short: the PEM chain no longer fits.
    gt_store_u32le(d + 632, x.q.signature_data_len - 1);
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, len), GT_E_TRUNCATED);
    gt_store_u32le(d + 632, x.q.signature_data_len);
    // Certification data type 7 instead of 6 (at 632 + 4 + 64 + 64).
    put16(d + 764, 7);
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, len), GT_E_UNSUPPORTED);
    put16(d + 764, 6);
    GT_ASSERT_OK(gt_intel_quote_parse(&q, d, len));

    // v5: body type 9, a TD 1.5 body declared 584 bytes, an SGX body type for a TDX quote.
    d = y.file.data;
    len = y.file.len;
    put16(d + 48, 9);
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, len), GT_E_UNSUPPORTED);
    put16(d + 48, 3);
    gt_store_u32le(d + 50, GT_TD10_REPORT_BYTES);
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, len), GT_E_FORMAT);
    put16(d + 48, 1);
    gt_store_u32le(d + 50, GT_SGX_REPORT_BYTES);
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, len), GT_E_FORMAT);
    put16(d + 48, 3);
    gt_store_u32le(d + 50, GT_TD15_REPORT_BYTES);
    GT_ASSERT_OK(gt_intel_quote_parse(&q, d, len));
    assert_int_equal(q.body_type, GT_INTEL_BODY_TD15);
    sample_free(&x);
    sample_free(&y);
}

// Claims: names and values as the framework prints them.
static void tdx_claims(void **state)
{
    (void)state;
    sample x;
    sample_load(&x, "go-tdx-guest_quote_v5_sample.dat");
    gt_intel_claim c[GT_INTEL_MAX_CLAIMS];
    size_t n = gt_intel_quote_claims(&x.q, c, GT_INTEL_MAX_CLAIMS);
    assert_int_equal(n, 18);  // 15 TD 1.0 fields + tee_tcb_svn2 + mr_servicetd + debug
    assert_string_equal(c[6].name, "mr_td");
    assert_int_equal(c[6].len, 48);
    assert_string_equal(c[n - 1].name, "debug");
    assert_int_equal(c[n - 1].kind, GT_INTEL_CLAIM_BOOL);
    assert_int_equal(gt_intel_quote_claims(&x.q, c, 3), n);  // reports the count, fills 3
    cJSON *obj = cJSON_CreateObject();
    GT_ASSERT_OK(gt_intel_quote_claims_json(&x.q, obj));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(obj, "mr_td")->valuestring,
                        "7348651a34b2d2d3462822e3a750ec6110125f36757c78480bbfc69cc0d21fb001a1ced3ee"
                        "19747dda8f750c3bc8f876");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(obj, "debug")));
    assert_false(gt_intel_quote_debug(&x.q));
    cJSON_Delete(obj);
    sample_free(&x);
}

// ---- rejections with the right reason -------------------------------------------------------

static void tdx_wrong_root_rejected(void **state)
{
    (void)state;
    sample x;
    sample_load(&x, "dcap-qvl_tdx_quote");
    gt_x509 **other = NULL;
    size_t n = 0;
    gt_test_intel_load_certs("attestation/nvgpu/nvidia_device_identity_ca.pem", &other, &n);
    gt_intel_collateral c = {0};
    char path[4096];
    gt_test_data_path(path, sizeof path, TDX_DIR "dcap-qvl_tdx_quote_collateral.json");
    GT_ASSERT_OK(gt_intel_collateral_add_file(&c, GT_INTEL_COLL_DCAP_QVL_JSON, path));
    gt_intel_verify_params p = {.roots = (const gt_x509 *const *)other, .root_count = n,
                                .at = sample_at("dcapqvl-v4"), .collateral = &c};
    gt_intel_verdict v;
    GT_ASSERT_CODE(gt_intel_quote_verify(&x.q, &p, &v), GT_E_AUTH);
    assert_false(v.accepted);
    assert_true(v.signature_valid);   // the quote itself is intact
    assert_false(v.chain_valid);
    assert_false(v.collateral_valid);
    assert_true(gt_intel_verdict_has_reason(&v, "PCK chain: x509:"));
    assert_true(gt_intel_verdict_has_reason(&v, "TCB signing chain: x509:"));
    // Collateral is still evaluated (its signatures are fine), so the status is reported.
    assert_string_equal(v.tcb_status, "UpToDate");
    gt_intel_collateral_free(&c);
    gt_test_intel_free_certs(other, n);
    sample_free(&x);
}

static void verify_dcapqvl_at(const sample *x, const char *iso, gt_intel_verdict *v)
{
    gt_intel_collateral c = {0};
    char path[4096];
    gt_test_data_path(path, sizeof path, TDX_DIR "dcap-qvl_tdx_quote_collateral.json");
    GT_ASSERT_OK(gt_intel_collateral_add_file(&c, GT_INTEL_COLL_DCAP_QVL_JSON, path));
    gt_intel_verify_params p = gt_test_intel_params(gt_test_intel_time(iso), &c);
    gt_err err = gt_intel_quote_verify(&x->q, &p, v);
    gt_test_intel_print_verdict(v);
    assert_int_equal(err.code, v->accepted ? GT_E_NONE : GT_E_AUTH);
    gt_intel_collateral_free(&c);
}

// Outside the collateral's validity window: expired / not yet valid TCB info, QE identity and
// CRLs; far in the future the PCK leaf itself has expired.
static void tdx_expired_time_rejected(void **state)
{
    (void)state;
    sample x;
    sample_load(&x, "dcap-qvl_tdx_quote");
    gt_intel_verdict v;
    verify_dcapqvl_at(&x, "2025-08-01T00:00:00Z", &v);
    assert_false(v.accepted);
    assert_true(v.signature_valid);
    assert_true(gt_intel_verdict_has_reason(&v, "TCB info: expired (nextUpdate 2025-07-19"));
    assert_true(gt_intel_verdict_has_reason(&v, "QE identity: expired"));
    assert_true(gt_intel_verdict_has_reason(&v, "CRL has expired"));
    assert_false(v.chain_valid);

    verify_dcapqvl_at(&x, "2025-06-01T00:00:00Z", &v);
    assert_true(gt_intel_verdict_has_reason(&v, "TCB info: not yet valid"));
    assert_true(gt_intel_verdict_has_reason(&v, "QE identity: not yet valid"));

    verify_dcapqvl_at(&x, "2033-01-01T00:00:00Z", &v);
    assert_true(gt_intel_verdict_has_reason(&v, "PCK chain: x509: CRL has expired"));
    // Without CRLs the first failure is the PCK leaf itself (notAfter 2032-02-06).
    gt_intel_verify_params p = gt_test_intel_params(gt_test_intel_time("2033-01-01T00:00:00Z"), NULL);
    GT_ASSERT_CODE(gt_intel_quote_verify(&x.q, &p, &v), GT_E_AUTH);
    assert_true(gt_intel_verdict_has_reason(&v, "PCK chain: x509: certificate has expired"));
    assert_false(v.chain_valid);
    sample_free(&x);
}

// Collateral for another platform, another TEE, or altered after signing.
static void tdx_wrong_collateral_rejected(void **state)
{
    (void)state;
    sample x;
    sample_load(&x, "dcap-qvl_tdx_quote");
    int64_t at = sample_at("dcapqvl-v4");
    gt_intel_verdict v;
    char path[4096];

    // TCB info of FMSPC 50806f000000 for a b0c06f000000 platform.
    gt_intel_collateral c = {0};
    gt_test_data_path(path, sizeof path, TDX_DIR "go-tdx-guest_sample_tcbInfo_response");
    GT_ASSERT_OK(gt_intel_collateral_add_file(&c, GT_INTEL_COLL_TCB_INFO, path));
    gt_test_data_path(path, sizeof path, TDX_DIR "intel_sgx_tcb_signing_chain.pem");
    GT_ASSERT_OK(gt_intel_collateral_add_file(&c, GT_INTEL_COLL_TCB_SIGNING_CHAIN, path));
    GT_ASSERT_CODE(gt_intel_collateral_add_file(&c, GT_INTEL_COLL_TCB_SIGNING_CHAIN, path),
                   GT_E_STATE);
    gt_intel_verify_params p = gt_test_intel_params(at, &c);
    GT_ASSERT_CODE(gt_intel_quote_verify(&x.q, &p, &v), GT_E_AUTH);
    assert_true(gt_intel_verdict_has_reason(&v, "FMSPC does not match the PCK certificate "
                                                "(b0c06f000000)"));
    assert_true(v.signature_valid && v.chain_valid);
    assert_false(v.collateral_valid);
    assert_null(v.tcb_status);
    gt_intel_collateral_free(&c);

    // SGX collateral for a TDX quote.
    gt_test_data_path(path, sizeof path, "attestation/sgx/dcap-qvl_sgx_quote_collateral.json");
    GT_ASSERT_OK(gt_intel_collateral_add_file(&c, GT_INTEL_COLL_DCAP_QVL_JSON, path));
    p = gt_test_intel_params(at, &c);
    GT_ASSERT_CODE(gt_intel_quote_verify(&x.q, &p, &v), GT_E_AUTH);
    assert_true(gt_intel_verdict_has_reason(&v, "TCB info: id SGX version 3 does not fit a TDX"));
    assert_true(gt_intel_verdict_has_reason(&v, "QE identity: id QE does not fit a TDX quote"));
    // The SGX PCK CRL is from the Processor CA, not this chain's Platform CA.
    assert_true(gt_intel_verdict_has_reason(&v, "is not for this chain"));
    gt_intel_collateral_free(&c);

    // TCB info and QE identity altered after signing (one digit each).
    gt_test_data_path(path, sizeof path, TDX_DIR "dcap-qvl_tdx_quote_collateral.json");
    GT_ASSERT_OK(gt_intel_collateral_add_file(&c, GT_INTEL_COLL_DCAP_QVL_JSON, path));
    char *hit = strstr((char *)c.tcb_info.data, "\"tcbEvaluationDataNumber\":17");
    assert_non_null(hit);
    hit[strlen("\"tcbEvaluationDataNumber\":1")] = '8';
    hit = strstr((char *)c.qe_identity.data, "\"isvprodid\":2");
    assert_non_null(hit);
    hit[strlen("\"isvprodid\":")] = '3';
    p = gt_test_intel_params(at, &c);
    GT_ASSERT_CODE(gt_intel_quote_verify(&x.q, &p, &v), GT_E_AUTH);
    assert_true(gt_intel_verdict_has_reason(&v, "TCB info: signature by the TCB signing key"));
    assert_true(gt_intel_verdict_has_reason(&v, "QE identity: signature by the TCB signing key"));
    assert_true(gt_intel_verdict_has_reason(&v, "QE identity: QE ISVPRODID 2, expected 3"));
    gt_intel_collateral_free(&c);
    sample_free(&x);
}

// Damage outside the signed region: the QE report, its signature, the attestation key.
static void tdx_damaged_signature_data_rejected(void **state)
{
    (void)state;
    sample x;
    sample_load(&x, "dcap-qvl_tdx_quote");
    gt_intel_verify_params p = gt_test_intel_params(sample_at("dcapqvl-v4"), NULL);
    gt_intel_verdict v;
    gt_intel_quote q;
    uint8_t *qe = (uint8_t *)x.q.qe_report_raw.data;

    qe[64] ^= 1;  // QE MRENCLAVE
    GT_ASSERT_OK(gt_intel_quote_parse(&q, x.file.data, x.file.len));
    GT_ASSERT_CODE(gt_intel_quote_verify(&q, &p, &v), GT_E_AUTH);
    assert_true(gt_intel_verdict_has_reason(&v, "QE report signature by the PCK leaf"));
    assert_false(gt_intel_verdict_has_reason(&v, "QE report data does not bind"));
    assert_false(v.signature_valid);
    assert_true(v.chain_valid);
    qe[64] ^= 1;

    uint8_t *ak = x.file.data + 632 + 4 + 64;  // attestation key
    ak[5] ^= 0x10;
    GT_ASSERT_OK(gt_intel_quote_parse(&q, x.file.data, x.file.len));
    GT_ASSERT_CODE(gt_intel_quote_verify(&q, &p, &v), GT_E_AUTH);
    assert_true(gt_intel_verdict_has_reason(&v, "quote signature by the attestation key"));
    assert_true(gt_intel_verdict_has_reason(&v, "QE report data does not bind"));
    ak[5] ^= 0x10;

    uint8_t *auth = (uint8_t *)x.q.qe_auth_data.data;
    auth[0] ^= 1;
    GT_ASSERT_OK(gt_intel_quote_parse(&q, x.file.data, x.file.len));
    GT_ASSERT_CODE(gt_intel_quote_verify(&q, &p, &v), GT_E_AUTH);
    assert_int_equal(v.reason_count, 1);
    assert_true(gt_intel_verdict_has_reason(&v, "QE report data does not bind"));
    auth[0] ^= 1;

    GT_ASSERT_OK(gt_intel_quote_parse(&q, x.file.data, x.file.len));
    GT_ASSERT_OK(gt_intel_quote_verify(&q, &p, &v));
    sample_free(&x);
}

// ---- synthetic collateral: every TCB status and revocation ----------------------------------

static gt_test_pki *pki_for(const gt_intel_quote *q)
{
    gt_x509 **certs = NULL;
    size_t n = 0;
    GT_ASSERT_OK(gt_x509_parse_pem_all(&certs, &n, (const char *)q->pck_chain_pem.data,
                                       q->pck_chain_pem.len));
    gt_span ext = {0};
    GT_ASSERT_OK(gt_x509_extension(certs[0], GT_INTEL_SGX_EXT_OID, &ext));
    gt_test_pki *pki = gt_test_pki_new(ext.data, ext.len);
    gt_test_intel_free_certs(certs, n);
    return pki;
}

typedef struct {
    uint8_t sgx[16];
    int pcesvn;
    uint8_t tdx[16];
    const char *status;
} level;

// The dcap-qvl TDX platform: PCK comp SVNs 3,3,2,2,4,1,0,5, PCESVN 11, TEE_TCB_SVN 06 01 03.
static level base_level(const char *status)
{
    level l = {.sgx = {3, 3, 2, 2, 4, 1, 0, 5}, .pcesvn = 11, .tdx = {6, 1, 3}, .status = status};
    return l;
}

static void svn_array(gt_buf *b, const uint8_t svn[16])
{
    char t[16];
    for (int i = 0; i < 16; i++) {
        snprintf(t, sizeof t, "%s{\"svn\":%u}", i ? "," : "[", svn[i]);
        GT_ASSERT_OK(gt_buf_append(b, t, strlen(t)));
    }
    GT_ASSERT_OK(gt_buf_append(b, "]", 1));
}

static void append(gt_buf *b, const char *s) { GT_ASSERT_OK(gt_buf_append(b, s, strlen(s))); }

// {"member": body, "signature": "<hex>"} with whitespace the raw-value finder must skip.
static void signed_doc(const gt_test_pki *pki, const char *member, const gt_buf *body,
                       gt_buf *out)
{
    uint8_t sig[64];
    char hex[129];
    gt_test_pki_tcb_sign(pki, body->data, body->len, sig);
    gt_hex_encode(hex, sizeof hex, sig, sizeof sig);
    append(out, "{\n  \"");
    append(out, member);
    append(out, "\" : ");
    GT_ASSERT_OK(gt_buf_append(out, body->data, body->len));
    append(out, " ,\n  \"signature\": \"");
    append(out, hex);
    append(out, "\"\n}\n");
}

static void tcb_info_doc(const gt_test_pki *pki, const level *levels, size_t n,
                         const char *module_identities, gt_buf *out)
{
    gt_buf b = {0};
    append(&b, "{\"id\":\"TDX\",\"version\":3,\"issueDate\":\"2025-06-01T00:00:00Z\","
               "\"nextUpdate\":\"2025-08-01T00:00:00Z\",\"fmspc\":\"B0C06F000000\","
               "\"pceId\":\"0000\",\"tcbType\":0,\"tcbEvaluationDataNumber\":17,"
               "\"tdxModule\":{\"mrsigner\":\"000000000000000000000000000000000000000000000000"
               "000000000000000000000000000000000000000000000000\",\"attributes\":"
               "\"0000000000000000\",\"attributesMask\":\"FFFFFFFFFFFFFFFF\"},");
    if (module_identities != NULL) {
        append(&b, "\"tdxModuleIdentities\":");
        append(&b, module_identities);
        append(&b, ",");
    }
    append(&b, "\"tcbLevels\":[");
    for (size_t i = 0; i < n; i++) {
        append(&b, i ? ",{\"tcb\":{\"sgxtcbcomponents\":" : "{\"tcb\":{\"sgxtcbcomponents\":");
        svn_array(&b, levels[i].sgx);
        char t[96];
        snprintf(t, sizeof t, ",\"pcesvn\":%d,\"tdxtcbcomponents\":", levels[i].pcesvn);
        append(&b, t);
        svn_array(&b, levels[i].tdx);
        append(&b, "},\"tcbDate\":\"2024-03-13T00:00:00Z\",\"tcbStatus\":\"");
        append(&b, levels[i].status);
        append(&b, "\",\"advisoryIDs\":[\"INTEL-SA-00001\"]}");
    }
    append(&b, "]}");
    signed_doc(pki, "tcbInfo", &b, out);
    gt_buf_free_nowipe(&b);
}

static void qe_identity_doc(const gt_test_pki *pki, const char *mrsigner, const char *levels,
                            gt_buf *out)
{
    gt_buf b = {0};
    append(&b, "{\"id\":\"TD_QE\",\"version\":2,\"issueDate\":\"2025-06-01T00:00:00Z\","
               "\"nextUpdate\":\"2025-08-01T00:00:00Z\",\"tcbEvaluationDataNumber\":17,"
               "\"miscselect\":\"00000000\",\"miscselectMask\":\"FFFFFFFF\",\"attributes\":"
               "\"11000000000000000000000000000000\",\"attributesMask\":"
               "\"FBFFFFFFFFFFFFFF0000000000000000\",\"mrsigner\":\"");
    append(&b, mrsigner);
    append(&b, "\",\"isvprodid\":2,\"tcbLevels\":");
    append(&b, levels);
    append(&b, "}");
    signed_doc(pki, "enclaveIdentity", &b, out);
    gt_buf_free_nowipe(&b);
}

#define QE_MRSIGNER "DC9E2A7C6F948F17474E34A7FC43ED030F7C1563F1BABDDF6340C82E0E54A8C5"

// Verifies the real dcap-qvl quote (real PCK chain, Intel root) against synthetic TCB info /
// QE identity signed by the synthetic TCB signing key (its root trusted alongside Intel's).
static void verify_synthetic(const gt_test_pki *pki, const gt_intel_quote *q, const gt_buf *tcb,
                             const gt_buf *qe, gt_intel_verdict *v)
{
    gt_intel_collateral c = {0};
    gt_buf chain = {0};
    gt_test_pki_tcb_chain_pem(pki, &chain);
    GT_ASSERT_OK(gt_intel_collateral_add(&c, GT_INTEL_COLL_TCB_SIGNING_CHAIN, chain.data,
                                         chain.len));
    if (tcb != NULL) {
        GT_ASSERT_OK(gt_intel_collateral_add(&c, GT_INTEL_COLL_TCB_INFO, tcb->data, tcb->len));
    }
    if (qe != NULL) {
        GT_ASSERT_OK(gt_intel_collateral_add(&c, GT_INTEL_COLL_QE_IDENTITY, qe->data, qe->len));
    }
    const gt_x509 *roots[2] = {gt_test_intel_root[0], gt_test_pki_root(pki)};
    gt_intel_verify_params p = {.roots = roots, .root_count = 2,
                                .at = gt_test_intel_time("2025-07-01T00:00:00Z"),
                                .collateral = &c};
    gt_err err = gt_intel_quote_verify(q, &p, v);
    assert_int_equal(err.code, v->accepted ? GT_E_NONE : GT_E_AUTH);
    assert_true(v->signature_valid && v->chain_valid);
    gt_intel_collateral_free(&c);
    gt_buf_free_nowipe(&chain);
}

static const char *status_of(const gt_test_pki *pki, const gt_intel_quote *q, const level *lv,
                             size_t n, const char *modules, const char *qe_levels,
                             gt_intel_verdict *v)
{
    gt_buf tcb = {0}, qe = {0};
    tcb_info_doc(pki, lv, n, modules, &tcb);
    if (qe_levels != NULL) {
        qe_identity_doc(pki, QE_MRSIGNER, qe_levels, &qe);
    }
    verify_synthetic(pki, q, &tcb, qe_levels ? &qe : NULL, v);
    gt_buf_free_nowipe(&tcb);
    gt_buf_free_nowipe(&qe);
    return v->tcb_status;
}

static void tdx_tcb_status_matrix(void **state)
{
    (void)state;
    sample x;
    sample_load(&x, "dcap-qvl_tdx_quote");
    gt_test_pki *pki = pki_for(&x.q);
    gt_intel_verdict v;
    static const char *const all[] = {
        "UpToDate", "SWHardeningNeeded", "ConfigurationNeeded",
        "ConfigurationAndSWHardeningNeeded", "OutOfDate", "OutOfDateConfigurationNeeded",
        "Revoked",
    };
    // 1. The matching level's status, for every status; only Revoked is a reason.
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        level l = base_level(all[i]);
        assert_string_equal(status_of(pki, &x.q, &l, 1, NULL, NULL, &v), all[i]);
        assert_int_equal(v.accepted, strcmp(all[i], "Revoked") != 0);
        assert_int_equal(gt_intel_verdict_has_reason(&v, "TCB status Revoked"),
                         strcmp(all[i], "Revoked") == 0);
        assert_int_equal(v.advisory_count, 1);
        assert_string_equal(v.advisories[0], "INTEL-SA-00001");
    }
    // 2. Levels above the platform are skipped: SGX component, PCESVN, TDX component.
    level two[2] = {base_level("UpToDate"), base_level("OutOfDate")};
    two[0].sgx[0] = 4;
    assert_string_equal(status_of(pki, &x.q, two, 2, NULL, NULL, &v), "OutOfDate");
    two[0] = base_level("UpToDate");
    two[0].pcesvn = 12;
    assert_string_equal(status_of(pki, &x.q, two, 2, NULL, NULL, &v), "OutOfDate");
    two[0] = base_level("UpToDate");
    two[0].tdx[2] = 4;
    assert_string_equal(status_of(pki, &x.q, two, 2, NULL, NULL, &v), "OutOfDate");
    // TEE_TCB_SVN[1] (module major version) is set, so indexes 0 and 1 are not compared.
    two[0] = base_level("UpToDate");
    two[0].tdx[0] = 9;
    two[0].tdx[1] = 9;
    assert_string_equal(status_of(pki, &x.q, two, 2, NULL, NULL, &v), "UpToDate");
    // 3. No level at or below the platform.
    two[0].sgx[7] = 6;
    two[1].sgx[7] = 6;
    assert_null(status_of(pki, &x.q, two, 2, NULL, NULL, &v));
    assert_true(gt_intel_verdict_has_reason(&v, "no TCB level matches"));
    // 4. TDX module identity TDX_01 (TEE_TCB_SVN 06 01): minor SVN 6 is below level 7.
    const char *mods = "[{\"id\":\"TDX_01\",\"mrsigner\":\"" 
                       "000000000000000000000000000000000000000000000000000000000000000000000000"
                       "000000000000000000000000\",\"attributes\":\"0000000000000000\","
                       "\"attributesMask\":\"FFFFFFFFFFFFFFFF\",\"tcbLevels\":["
                       "{\"tcb\":{\"isvsvn\":7},\"tcbDate\":\"2024-03-13T00:00:00Z\","
                       "\"tcbStatus\":\"UpToDate\"},{\"tcb\":{\"isvsvn\":2},\"tcbDate\":"
                       "\"2023-08-09T00:00:00Z\",\"tcbStatus\":\"OutOfDate\"}]}]";
    level one = base_level("UpToDate");
    assert_string_equal(status_of(pki, &x.q, &one, 1, mods, NULL, &v), "OutOfDate");
    assert_string_equal(v.platform_tcb_status, "UpToDate");
    assert_string_equal(v.tdx_module_status, "OutOfDate");
    one = base_level("ConfigurationNeeded");
    assert_string_equal(status_of(pki, &x.q, &one, 1, mods, NULL, &v),
                        "OutOfDateConfigurationNeeded");
    one = base_level("UpToDate");
    status_of(pki, &x.q, &one, 1, "[{\"id\":\"TDX_02\"}]", NULL, &v);
    assert_true(gt_intel_verdict_has_reason(&v, "no TDX module identity TDX_01"));
    // 5. QE identity (QE ISVSVN 6): its level converges with the platform's.
    one = base_level("SWHardeningNeeded");
    const char *qe_old = "[{\"tcb\":{\"isvsvn\":8},\"tcbDate\":\"2024-03-13T00:00:00Z\","
                         "\"tcbStatus\":\"UpToDate\"},{\"tcb\":{\"isvsvn\":4},\"tcbDate\":"
                         "\"2023-02-15T00:00:00Z\",\"tcbStatus\":\"OutOfDate\"}]";
    assert_string_equal(status_of(pki, &x.q, &one, 1, NULL, qe_old, &v), "OutOfDate");
    assert_string_equal(v.qe_tcb_status, "OutOfDate");
    assert_true(v.accepted);
    const char *qe_new = "[{\"tcb\":{\"isvsvn\":8},\"tcbDate\":\"2024-03-13T00:00:00Z\","
                         "\"tcbStatus\":\"UpToDate\"}]";
    assert_string_equal(status_of(pki, &x.q, &one, 1, NULL, qe_new, &v), "Revoked");
    assert_string_equal(v.qe_tcb_status, "Revoked");
    assert_false(v.accepted);
    // 6. A QE identity of another signer.
    gt_buf qe = {0};
    static const char other_signer[] = "00" QE_MRSIGNER "00";
    qe_identity_doc(pki, &other_signer[4], qe_new, &qe);  // the real MRSIGNER, shifted a byte
    verify_synthetic(pki, &x.q, NULL, &qe, &v);
    assert_true(gt_intel_verdict_has_reason(&v, "QE identity: QE MRSIGNER does not match"));
    assert_null(v.tcb_status);
    gt_buf_free_nowipe(&qe);
    gt_test_pki_free(pki);
    sample_free(&x);
}

// A revoked PCK leaf (PCK CA CRL) or PCK CA (root CA CRL) rejects the chain.
static void tdx_revoked_cert_rejected(void **state)
{
    (void)state;
    sample x;
    sample_load(&x, "dcap-qvl_tdx_quote");
    gt_test_pki *pki = pki_for(&x.q);
    gt_buf rebuilt = {0};
    gt_test_pki_rebuild_quote(pki, &x.q, &rebuilt);
    gt_intel_quote q;
    GT_ASSERT_OK(gt_intel_quote_parse(&q, rebuilt.data, rebuilt.len));
    const gt_x509 *roots[1] = {gt_test_pki_root(pki)};
    gt_intel_verdict v;
    for (int revoke = 0; revoke < 4; revoke++) {
        gt_intel_collateral c = {0};
        gt_buf pck_crl = {0}, root_crl = {0};
        gt_test_pki_crl(pki, true, revoke == 1, &pck_crl);
        gt_test_pki_crl(pki, false, revoke == 2, &root_crl);
        GT_ASSERT_OK(gt_intel_collateral_add(&c, GT_INTEL_COLL_PCK_CRL, pck_crl.data,
                                             pck_crl.len));
        if (revoke != 3) {  // 3: only the PCK CRL given
            GT_ASSERT_OK(gt_intel_collateral_add(&c, GT_INTEL_COLL_ROOT_CA_CRL, root_crl.data,
                                                 root_crl.len));
        }
        gt_intel_verify_params p = {.roots = roots, .root_count = 1,
                                    .at = gt_test_intel_time("2025-07-01T00:00:00Z"),
                                    .collateral = &c};
        gt_err err = gt_intel_quote_verify(&q, &p, &v);
        gt_test_intel_print_verdict(&v);
        assert_true(v.signature_valid);
        assert_true(v.pck_ext_valid);
        if (revoke == 1 || revoke == 2) {
            assert_int_equal(err.code, GT_E_AUTH);
            assert_false(v.chain_valid);
            assert_true(gt_intel_verdict_has_reason(&v, "PCK chain: x509: certificate revoked"));
            assert_true(gt_intel_verdict_has_reason(
                &v, revoke == 1 ? "Test SGX PCK Certificate" : "Test SGX PCK Platform CA"));
        } else {
            GT_ASSERT_OK(err);
            assert_true(v.chain_valid);
        }
        gt_intel_collateral_free(&c);
        gt_buf_free_nowipe(&pck_crl);
        gt_buf_free_nowipe(&root_crl);
    }
    // The rebuilt quote does not verify against Intel's root.
    gt_intel_verify_params p = gt_test_intel_params(gt_test_intel_time("2025-07-01T00:00:00Z"), NULL);
    GT_ASSERT_CODE(gt_intel_quote_verify(&q, &p, &v), GT_E_AUTH);
    assert_false(v.chain_valid);
    gt_buf_free_nowipe(&rebuilt);
    gt_test_pki_free(pki);
    sample_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tdx_samples_parse_to_expected),
        cmocka_unit_test(tdx_samples_verify),
        cmocka_unit_test(tdx_bitflip_signed_region_rejected),
        cmocka_unit_test(tdx_truncate_every_offset),
        cmocka_unit_test(tdx_bad_fields_rejected),
        cmocka_unit_test(tdx_claims),
        cmocka_unit_test(tdx_wrong_root_rejected),
        cmocka_unit_test(tdx_expired_time_rejected),
        cmocka_unit_test(tdx_wrong_collateral_rejected),
        cmocka_unit_test(tdx_damaged_signature_data_rejected),
        cmocka_unit_test(tdx_tcb_status_matrix),
        cmocka_unit_test(tdx_revoked_cert_rejected),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
