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

static void rel(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, TDX_DIR "%s", name);
}

// Loads the collateral a catalog sample names (pcs-responses or dcap-qvl-json).
static void load_collateral(const cJSON *spec, gt_intel_collateral *c)
{
    char path[4096], r[512];
    const char *fmt = cJSON_GetObjectItemCaseSensitive(spec, "format")->valuestring;
    static const struct { const char *field; gt_intel_coll_kind kind; } pcs[] = {
        {"tcb_info", GT_INTEL_COLL_TCB_INFO},
        {"qe_identity", GT_INTEL_COLL_QE_IDENTITY},
        {"pck_crl", GT_INTEL_COLL_PCK_CRL},
        {"root_ca_crl", GT_INTEL_COLL_ROOT_CA_CRL},
        {"tcb_signing_chain", GT_INTEL_COLL_TCB_SIGNING_CHAIN},
        {"file", GT_INTEL_COLL_DCAP_QVL_JSON},
    };
    assert_true(strcmp(fmt, "pcs-responses") == 0 || strcmp(fmt, "dcap-qvl-json") == 0);
    for (size_t i = 0; i < sizeof pcs / sizeof pcs[0]; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(spec, pcs[i].field);
        if (f == NULL) {
            continue;
        }
        rel(r, sizeof r, f->valuestring);
        gt_test_data_path(path, sizeof path, r);
        GT_ASSERT_OK(gt_intel_collateral_add_file(c, pcs[i].kind, path));
    }
}

typedef struct {
    gt_buf file;
    gt_intel_quote q;
    cJSON *expected;
} sample;

static void sample_load(sample *s, const char *evidence)
{
    char r[512];
    memset(s, 0, sizeof *s);
    rel(r, sizeof r, evidence);
    gt_test_read_data(r, &s->file);
    GT_ASSERT_OK(gt_intel_quote_parse(&s->q, s->file.data, s->file.len));
    char e[600];
    snprintf(e, sizeof e, "%s.expected.json", r);
    s->expected = gt_test_intel_load_json(e);
}

static void sample_free(sample *s)
{
    gt_buf_free_nowipe(&s->file);
    cJSON_Delete(s->expected);
}

static gt_x509 **g_root;
static size_t g_root_count;

static int setup(void **state)
{
    (void)state;
    gt_test_intel_load_certs(TDX_DIR "intel_sgx_root_ca.pem", &g_root, &g_root_count);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_intel_free_certs(g_root, g_root_count);
    return 0;
}

static gt_intel_verify_params params(int64_t at, const gt_intel_collateral *c)
{
    return (gt_intel_verify_params){.roots = (const gt_x509 *const *)g_root,
                                    .root_count = g_root_count, .at = at, .collateral = c};
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
        gt_intel_verify_params p = params(at, NULL);
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
            load_collateral(spec, &c);
            p = params(at, &c);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tdx_samples_parse_to_expected),
        cmocka_unit_test(tdx_samples_verify),
        cmocka_unit_test(tdx_bitflip_signed_region_rejected),
        cmocka_unit_test(tdx_truncate_every_offset),
        cmocka_unit_test(tdx_bad_fields_rejected),
        cmocka_unit_test(tdx_claims),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
