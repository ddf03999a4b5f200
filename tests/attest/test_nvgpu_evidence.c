// attest/: NVIDIA Hopper SPDM GET_MEASUREMENTS evidence, parsed and verified against the real
// samples of tests/testdata/attestation/nvgpu/ (catalog.json: chain, root, nonce; .expected.json:
// every parsed value). Exhaustive bit flips live in test_nvgpu_bitflip_{0..5}.c.
#include "nvgpu_fixture.h"

#include <time.h>

static bool has_reason(const gt_nvgpu_verdict *v, const char *needle)
{
    for (size_t i = 0; i < v->reason_count && i < GT_NVGPU_MAX_REASONS; i++) {
        if (strstr(v->reasons[i], needle) != NULL) {
            return true;
        }
    }
    return false;
}

static gt_nvgpu_evidence *ev_new(void)
{
    gt_nvgpu_evidence *ev = malloc(sizeof *ev);
    assert_non_null(ev);
    return ev;
}

// Every sample parses to exactly its .expected.json: every emitted claim is compared and every
// expected field is emitted (nonce_echo_note is prose, not a value).
static void samples_parse_to_expected_values(void **state)
{
    (void)state;
    gt_nvgpu_evidence *ev = ev_new();
    for (int i = 0; i < NV_SAMPLES; i++) {
        nv_sample s;
        nv_sample_load(i, &s);
        GT_ASSERT_OK(gt_nvgpu_evidence_parse(ev, s.evidence.data, s.evidence.len));
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(s.expected, "parsed");
        assert_non_null(want);
        cJSON *got = cJSON_CreateObject();
        GT_ASSERT_OK(gt_nvgpu_evidence_claims_json(ev, got));
        static const char *const prose[] = {"nonce_echo_note", NULL};
        gt_test_json_expect_equal(got, want, prose, s.id);
        cJSON_Delete(got);

        // The struct agrees with the claims on what policy code reads directly.
        assert_memory_equal(ev->nonce, s.nonce, sizeof s.nonce);
        assert_int_equal(ev->measurement_count, 64);
        const cJSON *meas = cJSON_GetObjectItemCaseSensitive(want, "measurements");
        for (unsigned idx = 1; idx <= 64; idx++) {
            char key[8];
            snprintf(key, sizeof key, "%u", idx);
            uint8_t m[48];
            GT_ASSERT_OK(gt_json_get_hex(meas, key, m, sizeof m));
            const gt_nvgpu_measurement *blk = NULL;
            GT_ASSERT_OK(gt_nvgpu_measurement_find(ev, (uint8_t)idx, &blk));
            assert_int_equal(blk->value.len, 48);
            assert_memory_equal(blk->value.data, m, 48);
        }
        const cJSON *op = cJSON_GetObjectItemCaseSensitive(want, "opaque_fields");
        const char *drv = NULL, *vbios = NULL;
        GT_ASSERT_OK(gt_json_get_string(op, "DRIVER_VERSION", &drv));
        GT_ASSERT_OK(gt_json_get_string(op, "VBIOS_VERSION", &vbios));
        char buf[64];
        GT_ASSERT_OK(gt_nvgpu_driver_version(ev, buf, sizeof buf));
        assert_string_equal(buf, drv);
        GT_ASSERT_OK(gt_nvgpu_vbios_version(ev, buf, sizeof buf));
        assert_string_equal(buf, vbios);
        nv_sample_free(&s);
    }
    free(ev);
}

// Values from the MANIFEST tables, by hand.
static void parse_known_values(void **state)
{
    (void)state;
    gt_nvgpu_evidence *ev = ev_new();
    nv_sample s;
    nv_sample_load(0, &s);
    GT_ASSERT_OK(gt_nvgpu_evidence_parse(ev, s.evidence.data, s.evidence.len));
    assert_int_equal(ev->req_version, 0x11);
    assert_int_equal(ev->req_code, 0xe0);
    assert_int_equal(ev->req_param2, 0xff);
    assert_int_equal(ev->resp_code, 0x60);
    assert_int_equal(ev->number_of_blocks, 64);
    assert_int_equal(ev->record_len, 3520);
    assert_int_equal(ev->opaque_len, 422);
    assert_int_equal(ev->signed_region.len, 4117 - 96);
    assert_ptr_equal(ev->signed_region.data, s.evidence.data);
    char buf[32];
    GT_ASSERT_OK(gt_nvgpu_driver_version(ev, buf, sizeof buf));
    assert_string_equal(buf, "550.90.07");
    GT_ASSERT_OK(gt_nvgpu_vbios_version(ev, buf, sizeof buf));
    assert_string_equal(buf, "96.00.9f.00.01");
    GT_ASSERT_CODE(gt_nvgpu_driver_version(ev, buf, 4), GT_E_LIMIT);
    gt_span v = {0};
    GT_ASSERT_OK(gt_nvgpu_opaque_find(ev, GT_NVGPU_OPAQUE_PROTECTED_PCIE_STATUS, &v));
    assert_int_equal(v.len, 1);
    assert_int_equal(v.data[0], 0x55);
    GT_ASSERT_CODE(gt_nvgpu_opaque_find(ev, GT_NVGPU_OPAQUE_SWITCH_PDI, &v), GT_E_NOTFOUND);
    const gt_nvgpu_measurement *m = NULL;
    GT_ASSERT_CODE(gt_nvgpu_measurement_find(ev, 65, &m), GT_E_NOTFOUND);
    assert_string_equal(gt_nvgpu_opaque_type_name(GT_NVGPU_OPAQUE_FWID), "FWID");
    assert_null(gt_nvgpu_opaque_type_name(200));
    nv_sample_free(&s);
    free(ev);
}

static void trailing_bytes_are_ignored(void **state)
{
    (void)state;
    gt_nvgpu_evidence *ev = ev_new();
    nv_sample s;
    nv_sample_load(1, &s);
    static const uint8_t junk[33] = {1, 2, 3};
    GT_ASSERT_OK(gt_buf_append(&s.evidence, junk, sizeof junk));
    GT_ASSERT_OK(gt_nvgpu_evidence_parse(ev, s.evidence.data, s.evidence.len));
    assert_int_equal(ev->trailing_bytes, 33);
    assert_int_equal(ev->total_len, 4274 + 33);
    gt_nvgpu_verdict v;
    gt_nvgpu_verify_params p = nv_params(&s, time(NULL));
    GT_ASSERT_OK(gt_nvgpu_evidence_verify(&v, ev, &p));
    assert_true(v.ok);
    nv_sample_free(&s);
    free(ev);
}

// Truncation at every offset is a clean TRUNCATED error and leaves the output zeroed.
static void truncation_at_every_offset(void **state)
{
    (void)state;
    gt_nvgpu_evidence *ev = ev_new(), *zero = calloc(1, sizeof *zero);
    assert_non_null(zero);
    nv_sample s;
    nv_sample_load(1, &s);
    for (size_t n = 0; n < s.evidence.len; n++) {
        memset(ev, 0xa5, sizeof *ev);
        gt_err e = gt_nvgpu_evidence_parse(ev, s.evidence.data, n);
        if (e.code != GT_E_TRUNCATED) {
            fail_msg("length %zu: expected TRUNCATED, got %s (%s)", n, gt_code_name(e.code),
                     e.msg);
        }
        assert_memory_equal(ev, zero, sizeof *ev);
    }
    nv_sample_free(&s);
    free(zero);
    free(ev);
}

// Malformed headers and lengths get the right code. Offsets: request 0..36, response header
// 37..40, NumberOfBlocks 41, MeasurementRecordLength 42..44, first block 45.
static void malformed_rejected(void **state)
{
    (void)state;
    gt_nvgpu_evidence *ev = ev_new();
    nv_sample s;
    nv_sample_load(0, &s);
    uint8_t *d = s.evidence.data;
    const size_t len = s.evidence.len;
    static const struct {
        size_t off;
        uint8_t val;
        gt_code code;
    } rows[] = {
        {0, 0x12, GT_E_UNSUPPORTED},  // SPDM 1.2: signed with a context prefix
        {1, 0xe1, GT_E_FORMAT},       // not GET_MEASUREMENTS
        {2, 0x00, GT_E_UNSUPPORTED},  // no signature requested
        {37, 0x10, GT_E_FORMAT},      // response version != request version
        {38, 0x61, GT_E_FORMAT},      // not MEASUREMENTS
        {41, 65, GT_E_TRUNCATED},     // one block more than the record holds
        {41, 63, GT_E_FORMAT},        // one block less: record has bytes left
        {44, 0x01, GT_E_TRUNCATED},   // record length beyond the evidence
        {45 + 55, 1, GT_E_FORMAT},    // block 2 claims index 1 again
        {45, 0x00, GT_E_FORMAT},      // index 0 is reserved
        {45, 0xff, GT_E_FORMAT},      // index 0xff means "all", never a block
        {46, 0x02, GT_E_UNSUPPORTED}, // not a DMTF measurement block
        {47, 0x34, GT_E_FORMAT},      // block size 52 != 3 + value size
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        uint8_t saved = d[rows[i].off];
        d[rows[i].off] = rows[i].val;
        gt_err e = gt_nvgpu_evidence_parse(ev, d, len);
        if (e.code != rows[i].code) {
            fail_msg("row %zu (offset %zu = 0x%02x): expected %s, got %s (%s)", i, rows[i].off,
                     rows[i].val, gt_code_name(rows[i].code), gt_code_name(e.code), e.msg);
        }
        assert_int_equal(ev->measurement_count, 0);
        d[rows[i].off] = saved;
    }
    GT_ASSERT_OK(gt_nvgpu_evidence_parse(ev, d, len));

    // Opaque data: a TLV whose length runs past OpaqueDataLength, and a duplicated type.
    size_t od = 37 + 8 + 3520 + 32 + 2;  // first TLV: VBIOS_VERSION, length 8
    assert_int_equal(d[od], GT_NVGPU_OPAQUE_VBIOS_VERSION);
    d[od + 3] = 0x10;  // length 0x1008
    GT_ASSERT_CODE(gt_nvgpu_evidence_parse(ev, d, len), GT_E_TRUNCATED);
    d[od + 3] = 0;
    d[od + 12] = GT_NVGPU_OPAQUE_VBIOS_VERSION;  // BOARD_ID becomes a second VBIOS_VERSION
    GT_ASSERT_CODE(gt_nvgpu_evidence_parse(ev, d, len), GT_E_FORMAT);
    d[od + 12] = GT_NVGPU_OPAQUE_BOARD_ID;
    GT_ASSERT_OK(gt_nvgpu_evidence_parse(ev, d, len));
    nv_sample_free(&s);
    free(ev);
}

// Both samples verify as the MANIFEST says: signature, chain to the NVIDIA Device Identity CA,
// nonce, and (our extra check) the opaque FWID == the leaf certificate's FWID.
static void samples_verify(void **state)
{
    (void)state;
    gt_nvgpu_evidence *ev = ev_new();
    for (int i = 0; i < NV_SAMPLES; i++) {
        nv_sample s;
        nv_sample_load(i, &s);
        GT_ASSERT_OK(gt_nvgpu_evidence_parse(ev, s.evidence.data, s.evidence.len));
        gt_nvgpu_verify_params p = nv_params(&s, time(NULL));
        gt_nvgpu_verdict v;
        GT_ASSERT_OK(gt_nvgpu_evidence_verify(&v, ev, &p));
        if (!v.ok) {
            fail_msg("%s: %zu reasons, first: %s", s.id, v.reason_count, v.reasons[0]);
        }
        assert_true(v.signature_valid && v.chain_valid && v.nonce_valid && v.fwid_valid);
        const cJSON *c = NULL;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(s.expected, "checks")) {
            assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "ok")));
        }
        // Without an expected nonce, freshness is simply not claimed.
        p.expected_nonce = NULL;
        GT_ASSERT_OK(gt_nvgpu_evidence_verify(&v, ev, &p));
        assert_true(v.ok);
        assert_false(v.nonce_valid);
        nv_sample_free(&s);
    }
    free(ev);
}

static void wrong_nonce_rejected(void **state)
{
    (void)state;
    gt_nvgpu_evidence *ev = ev_new();
    nv_sample s;
    nv_sample_load(0, &s);
    GT_ASSERT_OK(gt_nvgpu_evidence_parse(ev, s.evidence.data, s.evidence.len));
    gt_nvgpu_verify_params p = nv_params(&s, time(NULL));
    uint8_t other[GT_NVGPU_NONCE_BYTES];
    memcpy(other, s.nonce, sizeof other);
    other[31] ^= 1;
    p.expected_nonce = other;
    gt_nvgpu_verdict v;
    GT_ASSERT_OK(gt_nvgpu_evidence_verify(&v, ev, &p));
    assert_false(v.ok);
    assert_false(v.nonce_valid);
    assert_true(v.signature_valid && v.chain_valid && v.fwid_valid);
    assert_int_equal(v.reason_count, 1);
    assert_true(has_reason(&v, "nonce"));
    nv_sample_free(&s);
    free(ev);
}

// A root that is not the NVIDIA Device Identity CA (here AMD's Milan ARK): chain rejected.
static void wrong_root_rejected(void **state)
{
    (void)state;
    gt_nvgpu_evidence *ev = ev_new();
    nv_sample s;
    nv_sample_load(0, &s);
    GT_ASSERT_OK(gt_nvgpu_evidence_parse(ev, s.evidence.data, s.evidence.len));
    gt_buf pem = {0};
    gt_test_read_data("attestation/snp/amd_milan_ask_ark.pem", &pem);
    gt_x509 **amd = NULL;
    size_t amd_count = 0;
    GT_ASSERT_OK(gt_x509_parse_pem_all(&amd, &amd_count, (const char *)pem.data, pem.len));
    // The chain file ends with a copy of the real root: leave it out so only `roots` can anchor.
    gt_nvgpu_verify_params p = nv_params(&s, time(NULL));
    p.intermediate_count = s.chain_count - 2;
    p.roots = (const gt_x509 *const *)&amd[1];
    gt_nvgpu_verdict v;
    GT_ASSERT_OK(gt_nvgpu_evidence_verify(&v, ev, &p));
    assert_false(v.ok);
    assert_false(v.chain_valid);
    assert_true(v.signature_valid);
    assert_true(has_reason(&v, "chain"));
    // With the chain's own (untrusted) copy of the NVIDIA root among the intermediates: still
    // rejected, since only `roots` are trusted.
    p.intermediate_count = s.chain_count - 1;
    GT_ASSERT_OK(gt_nvgpu_evidence_verify(&v, ev, &p));
    assert_false(v.chain_valid);
    assert_true(has_reason(&v, "chain"));
    p.root_count = 0;
    GT_ASSERT_OK(gt_nvgpu_evidence_verify(&v, ev, &p));
    assert_false(v.chain_valid);
    assert_true(has_reason(&v, "no trusted root"));
    for (size_t i = 0; i < amd_count; i++) {
        gt_x509_free(amd[i]);
    }
    free(amd);
    gt_buf_free_nowipe(&pem);
    nv_sample_free(&s);
    free(ev);
}

// Another GPU's (valid) chain: signature and FWID fail, chain and nonce still pass.
static void wrong_leaf_rejected(void **state)
{
    (void)state;
    gt_nvgpu_evidence *ev = ev_new();
    nv_sample a, b;
    nv_sample_load(0, &a);
    nv_sample_load(1, &b);
    GT_ASSERT_OK(gt_nvgpu_evidence_parse(ev, a.evidence.data, a.evidence.len));
    gt_nvgpu_verify_params p = nv_params(&b, time(NULL));
    p.expected_nonce = a.nonce;
    gt_nvgpu_verdict v;
    GT_ASSERT_OK(gt_nvgpu_evidence_verify(&v, ev, &p));
    assert_false(v.ok);
    assert_true(v.chain_valid);
    assert_true(v.nonce_valid);
    assert_false(v.signature_valid);
    assert_false(v.fwid_valid);
    assert_int_equal(v.reason_count, 2);
    assert_true(has_reason(&v, "signature does not verify"));
    assert_true(has_reason(&v, "FWID"));
    nv_sample_free(&a);
    nv_sample_free(&b);
    free(ev);
}

// Before the intermediates were issued (2021-06-01) the chain is not valid.
static void not_yet_valid_rejected(void **state)
{
    (void)state;
    gt_nvgpu_evidence *ev = ev_new();
    nv_sample s;
    nv_sample_load(0, &s);
    GT_ASSERT_OK(gt_nvgpu_evidence_parse(ev, s.evidence.data, s.evidence.len));
    gt_nvgpu_verify_params p = nv_params(&s, 1622505600);
    gt_nvgpu_verdict v;
    GT_ASSERT_OK(gt_nvgpu_evidence_verify(&v, ev, &p));
    assert_false(v.ok);
    assert_false(v.chain_valid);
    assert_true(v.signature_valid);
    assert_int_equal(v.reason_count, 1);
    assert_true(has_reason(&v, "not yet valid"));
    nv_sample_free(&s);
    free(ev);
}

// The leaf's DICE FWID equals the opaque FWID of its own evidence.
static void leaf_fwid_matches_opaque(void **state)
{
    (void)state;
    gt_nvgpu_evidence *ev = ev_new();
    for (int i = 0; i < NV_SAMPLES; i++) {
        nv_sample s;
        nv_sample_load(i, &s);
        GT_ASSERT_OK(gt_nvgpu_evidence_parse(ev, s.evidence.data, s.evidence.len));
        uint8_t fwid[GT_SHA384_BYTES];
        GT_ASSERT_OK(gt_nvgpu_leaf_fwid(s.chain[0], fwid));
        gt_span op = {0};
        GT_ASSERT_OK(gt_nvgpu_opaque_find(ev, GT_NVGPU_OPAQUE_FWID, &op));
        assert_int_equal(op.len, sizeof fwid);
        assert_memory_equal(op.data, fwid, sizeof fwid);
        // The root has no DICE extension.
        GT_ASSERT_CODE(gt_nvgpu_leaf_fwid(s.root[0], fwid), GT_E_NOTFOUND);
        nv_sample_free(&s);
    }
    free(ev);
}

// A few flips at the edges here (the exhaustive run is sharded in test_nvgpu_bitflip_*.c):
// the whole request, the response header, the last opaque bytes and the whole signature, on the
// PPCIe sample.
static void edge_bit_flips_rejected(void **state)
{
    (void)state;
    nv_sample s;
    nv_sample_load(1, &s);
    size_t len = s.evidence.len;
    nv_flip_bits(&s, 0, 45 * 8);
    nv_flip_bits(&s, (len - 96 - 16) * 8, len * 8);
    nv_sample_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(samples_parse_to_expected_values),
        cmocka_unit_test(parse_known_values),
        cmocka_unit_test(trailing_bytes_are_ignored),
        cmocka_unit_test(truncation_at_every_offset),
        cmocka_unit_test(malformed_rejected),
        cmocka_unit_test(samples_verify),
        cmocka_unit_test(wrong_nonce_rejected),
        cmocka_unit_test(wrong_root_rejected),
        cmocka_unit_test(wrong_leaf_rejected),
        cmocka_unit_test(not_yet_valid_rejected),
        cmocka_unit_test(leaf_fwid_matches_opaque),
        cmocka_unit_test(edge_bit_flips_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
