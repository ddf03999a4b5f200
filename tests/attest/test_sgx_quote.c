// attest/: SGX ECDSA quotes v3 - every sample parses to its .expected.json, verifies as its
// MANIFEST says at a fixed time (with collateral: ConfigurationAndSWHardeningNeeded and its
// advisories), and damage, wrong roots, wrong times and wrong collateral are rejected.
#include "intel_testlib.h"

#include <stdio.h>
#include <string.h>

#define SGX_DIR "attestation/sgx/"

static const struct {
    const char *id;
    const char *at;
} times[] = {
    {"dcapqvl-sgx-v3", "2025-07-01T00:00:00Z"},     // TCB info 2025-06-19 .. 2025-07-19
    {"mobilecoin-sgx-v3", "2023-05-01T00:00:00Z"},  // processor CRL 2023-04-21 .. 2023-05-21
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
    gt_test_intel_sample_load(s, SGX_DIR, evidence);
}

static void sample_free(sample *s)
{
    gt_test_intel_sample_free(s);
}

static int setup(void **state)
{
    (void)state;
    gt_test_intel_roots_load(SGX_DIR);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_intel_roots_free();
    return 0;
}


static void sgx_samples_parse_to_expected(void **state)
{
    (void)state;
    cJSON *cat = gt_test_intel_load_json(SGX_DIR "catalog.json");
    const cJSON *s = NULL;
    int samples = 0;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(cat, "samples"))
    {
        sample x;
        sample_load(&x, cJSON_GetObjectItemCaseSensitive(s, "evidence")->valuestring);
        assert_false(gt_intel_quote_is_tdx(&x.q));
        assert_int_equal(x.q.header.version, 3);
        assert_int_equal(x.q.body_type, GT_INTEL_BODY_SGX);
        assert_true(gt_test_intel_check_parsed(&x.q, x.file.len, x.expected) >= 50);
        samples++;
        sample_free(&x);
    }
    assert_int_equal(samples, 2);
    cJSON_Delete(cat);
}

static void sgx_samples_verify(void **state)
{
    (void)state;
    cJSON *cat = gt_test_intel_load_json(SGX_DIR "catalog.json");
    const cJSON *s = NULL;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(cat, "samples"))
    {
        const char *id = cJSON_GetObjectItemCaseSensitive(s, "id")->valuestring;
        sample x;
        sample_load(&x, cJSON_GetObjectItemCaseSensitive(s, "evidence")->valuestring);
        int64_t at = sample_at(id);
        gt_intel_verify_params p = gt_test_intel_params(at, NULL);
        gt_intel_verdict v;
        gt_err err = gt_intel_quote_verify(&x.q, &p, &v);
        if (!gt_is_ok(err)) {
            gt_test_intel_print_verdict(&v);
            fail_msg("%s: %s", id, err.msg);
        }
        assert_true(v.signature_valid && v.chain_valid);
        assert_true(gt_test_intel_check_pck(&v, x.expected) >= 7);

        gt_intel_collateral c = {0};
        gt_test_intel_load_collateral(SGX_DIR, cJSON_GetObjectItemCaseSensitive(s, "collateral"),
                                      &c);
        p = gt_test_intel_params(at, &c);
        err = gt_intel_quote_verify(&x.q, &p, &v);
        gt_test_intel_print_verdict(&v);
        if (!gt_is_ok(err)) {
            fail_msg("%s with collateral: %s", id, err.msg);
        }
        assert_true(v.signature_valid && v.chain_valid && v.collateral_valid);
        const cJSON *tcb = cJSON_GetObjectItemCaseSensitive(x.expected, "tcb");
        if (tcb != NULL) {
            const char *want = cJSON_GetObjectItemCaseSensitive(tcb, "platform_tcb_status")
                                   ->valuestring;
            assert_string_equal(v.platform_tcb_status, want);
            assert_string_equal(v.tcb_status, want);
            assert_string_equal(v.qe_tcb_status,
                                cJSON_GetObjectItemCaseSensitive(tcb, "qe_tcb_status")
                                    ->valuestring);
            assert_null(v.tdx_module_status);
            assert_string_equal(v.tcb_date, cJSON_GetObjectItemCaseSensitive(
                                                tcb, "platform_tcb_date")->valuestring);
            const cJSON *ids = cJSON_GetObjectItemCaseSensitive(tcb, "advisory_ids");
            assert_int_equal(v.advisory_count, cJSON_GetArraySize(ids));
            for (size_t i = 0; i < v.advisory_count; i++) {
                assert_string_equal(v.advisories[i], cJSON_GetArrayItem(ids, (int)i)->valuestring);
            }
        } else {
            assert_null(v.tcb_status);  // CRLs only: revocation checked, no TCB status
        }
        gt_intel_collateral_free(&c);
        sample_free(&x);
    }
    cJSON_Delete(cat);
}

// The PCK leaf stored beside the mobilecoin quote is the one in its chain; its debug enclave
// shows in the claims.
static void sgx_mobilecoin_leaf_and_debug(void **state)
{
    (void)state;
    sample x;
    sample_load(&x, "mobilecoin_hw_quote.dat");
    gt_buf der = {0};
    gt_test_read_data(SGX_DIR "mobilecoin_leaf_cert.der", &der);
    // The PEM chain's first certificate, base64-decoded, equals the DER file: compare through
    // the SGX extension bytes of both.
    gt_x509 *leaf = NULL;
    GT_ASSERT_OK(gt_x509_parse_der(&leaf, der.data, der.len));
    gt_x509 **certs = NULL;
    size_t n = 0;
    GT_ASSERT_OK(gt_x509_parse_pem_all(&certs, &n, (const char *)x.q.pck_chain_pem.data,
                                       x.q.pck_chain_pem.len));
    gt_span a = {0}, b = {0};
    GT_ASSERT_OK(gt_x509_extension(leaf, GT_INTEL_SGX_EXT_OID, &a));
    GT_ASSERT_OK(gt_x509_extension(certs[0], GT_INTEL_SGX_EXT_OID, &b));
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    gt_intel_pck_ext ext;
    GT_ASSERT_OK(gt_intel_pck_ext_parse(&ext, a.data, a.len));
    assert_int_equal(ext.pce_svn, 11);
    // Every truncation of the extension DER is a clean FORMAT/TRUNCATED error.
    for (size_t len = 0; len < a.len; len++) {
        gt_err e = gt_intel_pck_ext_parse(&ext, a.data, len);
        assert_true(e.code == GT_E_TRUNCATED || e.code == GT_E_FORMAT);
    }
    cJSON *claims = cJSON_CreateObject();
    GT_ASSERT_OK(gt_intel_quote_claims_json(&x.q, claims));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(claims, "debug")));
    assert_true(gt_intel_quote_debug(&x.q));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(claims, "mr_enclave")->valuestring,
                        "1dd0df84810e53e26b2b167dfe0f97cc4364085fe0bd41d5e18a759c21d5c189");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(claims, "isv_svn")->valueint, 0);
    cJSON_Delete(claims);
    gt_test_intel_free_certs(certs, n);
    gt_x509_free(leaf);
    gt_buf_free_nowipe(&der);
    sample_free(&x);
}

static void sgx_bitflip_signed_region_rejected(void **state)
{
    (void)state;
    sample x;
    sample_load(&x, "dcap-qvl_sgx_quote");
    size_t n = x.q.signed_region.len;
    assert_int_equal(n, 432);
    for (size_t i = 0; i < n * 8; i++) {
        x.file.data[i / 8] ^= (uint8_t)(1u << (i % 8));
        gt_intel_quote q;
        if (gt_is_ok(gt_intel_quote_parse(&q, x.file.data, x.file.len))) {
            GT_ASSERT_CODE(gt_intel_quote_verify_signature(&q), GT_E_AUTH);
        }
        x.file.data[i / 8] ^= (uint8_t)(1u << (i % 8));
    }
    GT_ASSERT_OK(gt_intel_quote_verify_signature(&x.q));
    sample_free(&x);
}

static void sgx_truncate_every_offset(void **state)
{
    (void)state;
    const char *files[] = {"dcap-qvl_sgx_quote", "mobilecoin_hw_quote.dat"};
    for (size_t f = 0; f < 2; f++) {
        sample x;
        sample_load(&x, files[f]);
        for (size_t len = 0; len < x.q.size; len++) {
            gt_intel_quote q;
            gt_err err = gt_intel_quote_parse(&q, x.file.data, len);
            if (err.code != GT_E_TRUNCATED) {
                fail_msg("%s truncated at %zu: %s", files[f], len, gt_code_name(err.code));
            }
        }
        sample_free(&x);
    }
}

// v3 field errors: the QE auth data or PCK chain length past the signature data, a type 6
// certification data (v4 only) in v3.
static void sgx_bad_fields_rejected(void **state)
{
    (void)state;
    sample x;
    sample_load(&x, "dcap-qvl_sgx_quote");
    uint8_t *d = x.file.data;
    size_t len = x.file.len;
    gt_intel_quote q;
    size_t auth_at = 432 + 4 + 64 + 64 + 384 + 64;
    size_t type_at = auth_at + 2 + x.q.qe_auth_data.len;
    d[auth_at + 1] = 0x7f;  // QE auth data length 0x7f20: beyond the signature data
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, len), GT_E_TRUNCATED);
    d[auth_at + 1] = 0;
    d[type_at] = 6;
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, len), GT_E_UNSUPPORTED);
    d[type_at] = 5;
    gt_store_u32le(d + type_at + 2, 0);  // empty PCK chain
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, len), GT_E_FORMAT);
    gt_store_u32le(d + type_at + 2, (uint32_t)x.q.pck_chain_pem.len - 1);  // leaves one byte
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, len), GT_E_FORMAT);
    gt_store_u32le(d + type_at + 2, (uint32_t)x.q.pck_chain_pem.len);
    GT_ASSERT_OK(gt_intel_quote_parse(&q, d, len));
    GT_ASSERT_CODE(gt_intel_quote_parse(&q, d, GT_INTEL_MAX_QUOTE_BYTES + 1), GT_E_LIMIT);
    sample_free(&x);
}

// Wrong root, wrong time, collateral of a TDX platform, a QE identity of TDX.
static void sgx_rejections(void **state)
{
    (void)state;
    sample x;
    sample_load(&x, "dcap-qvl_sgx_quote");
    gt_intel_verdict v;
    char path[4096];
    gt_intel_collateral c = {0};
    gt_test_data_path(path, sizeof path, SGX_DIR "dcap-qvl_sgx_quote_collateral.json");
    GT_ASSERT_OK(gt_intel_collateral_add_file(&c, GT_INTEL_COLL_DCAP_QVL_JSON, path));
    GT_ASSERT_CODE(gt_intel_collateral_add_file(&c, GT_INTEL_COLL_DCAP_QVL_JSON, path),
                   GT_E_STATE);

    // Another vendor's root.
    gt_x509 **other = NULL;
    size_t n = 0;
    gt_test_intel_load_certs("attestation/nvgpu/nvidia_device_identity_ca.pem", &other, &n);
    gt_intel_verify_params p = {.roots = (const gt_x509 *const *)other, .root_count = n,
                                .at = sample_at("dcapqvl-sgx-v3"), .collateral = &c};
    GT_ASSERT_CODE(gt_intel_quote_verify(&x.q, &p, &v), GT_E_AUTH);
    gt_test_intel_print_verdict(&v);
    assert_false(v.chain_valid);
    assert_true(v.signature_valid);
    assert_true(gt_intel_verdict_has_reason(&v, "PCK chain: x509: self-signed certificate in certificate chain"));
    gt_test_intel_free_certs(other, n);

    // A month after the TCB info's nextUpdate.
    p = gt_test_intel_params(gt_test_intel_time("2025-08-20T00:00:00Z"), &c);
    GT_ASSERT_CODE(gt_intel_quote_verify(&x.q, &p, &v), GT_E_AUTH);
    assert_true(gt_intel_verdict_has_reason(&v, "TCB info: expired"));
    assert_true(gt_intel_verdict_has_reason(&v, "QE identity: expired"));
    gt_intel_collateral_free(&c);

    // TDX collateral (TDX TCB info, TD_QE identity, Platform CA CRL) for an SGX quote.
    gt_test_data_path(path, sizeof path, "attestation/tdx/dcap-qvl_tdx_quote_collateral.json");
    GT_ASSERT_OK(gt_intel_collateral_add_file(&c, GT_INTEL_COLL_DCAP_QVL_JSON, path));
    p = gt_test_intel_params(sample_at("dcapqvl-sgx-v3"), &c);
    GT_ASSERT_CODE(gt_intel_quote_verify(&x.q, &p, &v), GT_E_AUTH);
    assert_true(gt_intel_verdict_has_reason(&v, "TCB info: id TDX version 3 does not fit a SGX"));
    assert_true(gt_intel_verdict_has_reason(&v, "QE identity: id TD_QE does not fit a SGX"));
    assert_true(gt_intel_verdict_has_reason(&v, "is not for this chain"));
    assert_null(v.tcb_status);
    gt_intel_collateral_free(&c);

    // A dcap-qvl JSON missing a member leaves the collateral as it was.
    const char *partial = "{\"tcb_info\":\"{}\",\"tcb_info_signature\":\"00\"}";
    GT_ASSERT_CODE(gt_intel_collateral_add(&c, GT_INTEL_COLL_DCAP_QVL_JSON,
                                           (const uint8_t *)partial, strlen(partial)),
                   GT_E_FORMAT);
    assert_false(c.has_tcb_info);
    assert_int_equal(c.tcb_info.len, 0);
    // Malformed collateral pieces are refused when added.
    const char *bad = "{\"tcbInfo\":{\"id\":\"SGX\"}}";  // no signature
    GT_ASSERT_CODE(gt_intel_collateral_add(&c, GT_INTEL_COLL_TCB_INFO, (const uint8_t *)bad,
                                           strlen(bad)), GT_E_FORMAT);
    assert_false(c.has_tcb_info);
    GT_ASSERT_CODE(gt_intel_collateral_add(&c, GT_INTEL_COLL_PCK_CRL, (const uint8_t *)"xx", 2),
                   GT_E_FORMAT);
    GT_ASSERT_CODE(gt_intel_collateral_add(&c, GT_INTEL_COLL_QE_IDENTITY, (const uint8_t *)"{",
                                           1), GT_E_FORMAT);
    gt_intel_collateral_free(&c);

    // No trusted root is misuse, not a verdict.
    gt_intel_verify_params none = {.at = 0};
    GT_ASSERT_CODE(gt_intel_quote_verify(&x.q, &none, &v), GT_E_ARG);
    sample_free(&x);
}

// The verdict as JSON, for the framework to print.
static void sgx_verdict_json(void **state)
{
    (void)state;
    sample x;
    sample_load(&x, "dcap-qvl_sgx_quote");
    gt_intel_collateral c = {0};
    char path[4096];
    gt_test_data_path(path, sizeof path, SGX_DIR "dcap-qvl_sgx_quote_collateral.json");
    GT_ASSERT_OK(gt_intel_collateral_add_file(&c, GT_INTEL_COLL_DCAP_QVL_JSON, path));
    gt_intel_verify_params p = gt_test_intel_params(sample_at("dcapqvl-sgx-v3"), &c);
    gt_intel_verdict v;
    GT_ASSERT_OK(gt_intel_quote_verify(&x.q, &p, &v));
    cJSON *obj = cJSON_CreateObject();
    GT_ASSERT_OK(gt_intel_verdict_json(&v, obj));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, "accepted")));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(obj, "tcb_status")->valuestring,
                        "ConfigurationAndSWHardeningNeeded");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(obj, "tdx_module_status")));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(obj, "fmspc")->valuestring,
                        "00a067110000");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(obj, "advisory_ids")),
                     2);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(obj, "reasons")), 0);
    cJSON_Delete(obj);
    gt_intel_collateral_free(&c);
    sample_free(&x);
}

// Collateral dates: exact format, UTC.
static void sgx_parse_time(void **state)
{
    (void)state;
    int64_t t = 0;
    GT_ASSERT_OK(gt_intel_parse_time("2025-07-19T10:56:11Z", &t));
    assert_int_equal(t, 1752922571);
    GT_ASSERT_OK(gt_intel_parse_time("1970-01-01T00:00:00Z", &t));
    assert_int_equal(t, 0);
    static const char *const bad[] = {
        "2025-07-19T10:56:11", "2025-07-19 10:56:11Z", "2025-13-01T00:00:00Z",
        "2025-07-19T10:56:11Z ", "2025-7-19T10:56:11Z", "", "1969-12-31T23:59:59Z",
        "2025-07-19T24:00:00Z",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        GT_ASSERT_CODE(gt_intel_parse_time(bad[i], &t), GT_E_FORMAT);
    }
}

// A quote from another QE vendor is not Intel's to verify.
static void sgx_other_vendor_rejected(void **state)
{
    (void)state;
    sample x;
    sample_load(&x, "mobilecoin_hw_quote.dat");
    x.file.data[12] ^= 0xff;  // qe_vendor_id[0] (signed: the quote signature fails too)
    gt_intel_quote q;
    GT_ASSERT_OK(gt_intel_quote_parse(&q, x.file.data, x.file.len));
    gt_intel_verify_params p = gt_test_intel_params(sample_at("mobilecoin-sgx-v3"), NULL);
    gt_intel_verdict v;
    GT_ASSERT_CODE(gt_intel_quote_verify(&q, &p, &v), GT_E_AUTH);
    assert_true(gt_intel_verdict_has_reason(&v, "QE vendor id is not Intel's"));
    assert_true(gt_intel_verdict_has_reason(&v, "quote signature by the attestation key"));
    assert_true(v.chain_valid);
    sample_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sgx_samples_parse_to_expected),
        cmocka_unit_test(sgx_samples_verify),
        cmocka_unit_test(sgx_mobilecoin_leaf_and_debug),
        cmocka_unit_test(sgx_bitflip_signed_region_rejected),
        cmocka_unit_test(sgx_truncate_every_offset),
        cmocka_unit_test(sgx_bad_fields_rejected),
        cmocka_unit_test(sgx_rejections),
        cmocka_unit_test(sgx_verdict_json),
        cmocka_unit_test(sgx_parse_time),
        cmocka_unit_test(sgx_other_vendor_rejected),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
