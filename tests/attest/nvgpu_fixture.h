// Fixture for the NVIDIA GPU evidence tests: the catalog samples of
// tests/testdata/attestation/nvgpu/ with their chains, root, nonce and .expected.json.
// Header-only (static functions): included by test_nvgpu_evidence.c and the bit-flip shards.
#ifndef GT_TEST_NVGPU_FIXTURE_H
#define GT_TEST_NVGPU_FIXTURE_H

#include "testlib.h"
#include "testlib_json.h"

#include "attest/nvgpu_evidence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NV_DIR "attestation/nvgpu/"
#define NV_SAMPLES 2

typedef struct {
    char id[64];
    gt_buf evidence;
    gt_x509 **chain;       // leaf first; the file ends with a copy of the root
    size_t chain_count;
    gt_x509 **root;        // the trusted NVIDIA Device Identity CA
    size_t root_count;
    uint8_t nonce[GT_NVGPU_NONCE_BYTES];
    cJSON *expected;
} nv_sample;

static inline void nv_certs_load(const char *file, gt_x509 ***certs, size_t *count)
{
    char rel[512];
    snprintf(rel, sizeof rel, NV_DIR "%s", file);
    gt_buf b = {0};
    gt_test_read_data(rel, &b);
    GT_ASSERT_OK(gt_x509_parse_pem_all(certs, count, (const char *)b.data, b.len));
    assert_true(*count >= 1);
    gt_buf_free_nowipe(&b);
}

static inline void nv_sample_free(nv_sample *s)
{
    gt_buf_free_nowipe(&s->evidence);
    for (size_t i = 0; i < s->chain_count; i++) {
        gt_x509_free(s->chain[i]);
    }
    for (size_t i = 0; i < s->root_count; i++) {
        gt_x509_free(s->root[i]);
    }
    free(s->chain);
    free(s->root);
    cJSON_Delete(s->expected);
    memset(s, 0, sizeof *s);
}

static inline void nv_sample_load(int n, nv_sample *s)
{
    memset(s, 0, sizeof *s);
    cJSON *catalog = gt_test_load_json(NV_DIR "catalog.json");
    const cJSON *samples = cJSON_GetObjectItemCaseSensitive(catalog, "samples");
    assert_int_equal(cJSON_GetArraySize(samples), NV_SAMPLES);
    const cJSON *e = cJSON_GetArrayItem(samples, n);
    const char *id = NULL, *ev = NULL, *chain = NULL, *root = NULL;
    GT_ASSERT_OK(gt_json_get_string(e, "id", &id));
    GT_ASSERT_OK(gt_json_get_string(e, "evidence", &ev));
    GT_ASSERT_OK(gt_json_get_string(e, "cert_chain", &chain));
    GT_ASSERT_OK(gt_json_get_string(e, "root", &root));
    GT_ASSERT_OK(gt_json_get_hex(e, "nonce", s->nonce, sizeof s->nonce));
    snprintf(s->id, sizeof s->id, "%s", id);
    char rel[512];
    snprintf(rel, sizeof rel, NV_DIR "%s", ev);
    gt_test_read_data(rel, &s->evidence);
    nv_certs_load(chain, &s->chain, &s->chain_count);
    nv_certs_load(root, &s->root, &s->root_count);
    assert_int_equal(s->root_count, 1);
    snprintf(rel, sizeof rel, NV_DIR "%s.expected.json", ev);
    s->expected = gt_test_load_json(rel);
    cJSON_Delete(catalog);
}

// The MANIFEST verifies with `openssl verify` at the current time; the certificates are valid
// until 9999.
static inline gt_nvgpu_verify_params nv_params(const nv_sample *s, int64_t at)
{
    return (gt_nvgpu_verify_params){
        .leaf = s->chain[0],
        .intermediates = (const gt_x509 *const *)&s->chain[1],
        .intermediate_count = s->chain_count - 1,
        .roots = (const gt_x509 *const *)s->root,
        .root_count = s->root_count,
        .at = at,
        .expected_nonce = s->nonce,
    };
}

static inline void nv_leaf_pub(const nv_sample *s, uint8_t xy[GT_P384_XY_BYTES])
{
    gt_pkey *key = NULL;
    size_t len = 0;
    GT_ASSERT_OK(gt_x509_public_key(s->chain[0], &key));
    GT_ASSERT_OK(gt_pkey_ec_public_xy(key, xy, GT_P384_XY_BYTES, &len));
    assert_int_equal(len, GT_P384_XY_BYTES);
    gt_pkey_free(key);
}

// Flips every bit in [first_bit, end_bit) of the sample's signed region and signature, one at a
// time, and asserts each flip is rejected: by the parser (codes, lengths) or by the signature
// check with the leaf key parsed once. Restores the bytes.
static inline void nv_flip_bits(nv_sample *s, size_t first_bit, size_t end_bit)
{
    uint8_t xy[GT_P384_XY_BYTES];
    nv_leaf_pub(s, xy);
    gt_nvgpu_evidence *ev = malloc(sizeof *ev);
    assert_non_null(ev);
    GT_ASSERT_OK(gt_nvgpu_evidence_parse(ev, s->evidence.data, s->evidence.len));
    assert_int_equal(ev->trailing_bytes, 0);
    assert_true(end_bit <= s->evidence.len * 8);
    size_t parse_rejects = 0, sig_rejects = 0;
    for (size_t bit = first_bit; bit < end_bit; bit++) {
        s->evidence.data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        gt_err e = gt_nvgpu_evidence_parse(ev, s->evidence.data, s->evidence.len);
        if (e.code != GT_E_NONE) {
            parse_rejects++;
        } else {
            e = gt_nvgpu_evidence_verify_signature(ev, xy, sizeof xy);
            if (e.code != GT_E_AUTH) {
                fail_msg("%s bit %zu: flip not rejected (%s)", s->id, bit, gt_code_name(e.code));
            }
            sig_rejects++;
        }
        s->evidence.data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    assert_int_equal(parse_rejects + sig_rejects, end_bit - first_bit);
    GT_ASSERT_OK(gt_nvgpu_evidence_parse(ev, s->evidence.data, s->evidence.len));
    GT_ASSERT_OK(gt_nvgpu_evidence_verify_signature(ev, xy, sizeof xy));
    free(ev);
}

#endif
