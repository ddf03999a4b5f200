// Helpers for the Intel quote tests (test_tdx_quote, test_sgx_quote): compare a parsed quote and
// a verdict with a sample's <evidence>.expected.json, read at test time.
#ifndef GT_INTEL_TESTLIB_H
#define GT_INTEL_TESTLIB_H

#include "testlib.h"

#include "attest/intel_quote.h"

// Loads tests/testdata/attestation/<rel> as JSON (fails the test if it cannot).
cJSON *gt_test_intel_load_json(const char *rel);
// Compares every field of expected["parsed"] with q (parsed from a buffer of file_len bytes):
// header, v5 body type/size, every body claim by name, signature data, QE report. Fails the test
// on any difference or on a field it does not know. Returns the number of fields compared.
int gt_test_intel_check_parsed(const gt_intel_quote *q, size_t file_len, const cJSON *expected);
// Compares expected["pck"] with the verdict's PCK extension values. Returns fields compared.
int gt_test_intel_check_pck(const gt_intel_verdict *v, const cJSON *expected);
// Loads a PEM file of certificates under tests/testdata/attestation/ (fails the test if it cannot).
void gt_test_intel_load_certs(const char *rel, gt_x509 ***certs, size_t *count);
void gt_test_intel_free_certs(gt_x509 **certs, size_t count);
// Seconds since the epoch of "YYYY-MM-DDTHH:MM:SSZ".
int64_t gt_test_intel_time(const char *iso);
// Adds the collateral a catalog.json sample names ("pcs-responses" or "dcap-qvl-json"); dir is
// the sample folder under tests/testdata/ ("attestation/tdx/").
void gt_test_intel_load_collateral(const char *dir, const cJSON *spec, gt_intel_collateral *c);
// Prints the verdict's reasons (on a test failure).
void gt_test_intel_print_verdict(const gt_intel_verdict *v);

// A sample quote under tests/testdata/attestation/<dir> ("attestation/tdx/"): the file, its parse
// (which must succeed) and its <evidence>.expected.json.
typedef struct {
    gt_buf file;
    gt_intel_quote q;
    cJSON *expected;
} gt_test_intel_sample;
void gt_test_intel_sample_load(gt_test_intel_sample *s, const char *dir, const char *evidence);
void gt_test_intel_sample_free(gt_test_intel_sample *s);

// Intel's SGX root CA in <dir>intel_sgx_root_ca.pem as the trust anchor (cmocka setup/teardown
// of a test group), and verification parameters with it at a time, with optional collateral.
extern gt_x509 **gt_test_intel_root;
void gt_test_intel_roots_load(const char *dir);
void gt_test_intel_roots_free(void);
gt_intel_verify_params gt_test_intel_params(int64_t at, const gt_intel_collateral *c);

// ---- a synthetic Intel-like PKI, for what real samples cannot show (revocation, every TCB
// status): root -> TCB signing, root -> PCK CA -> PCK leaf (carrying a copy of a real PCK
// leaf's SGX extension). Certificates valid 2020-01-01 .. 2040-01-01.
typedef struct gt_test_pki gt_test_pki;
// sgx_ext: the DER value of the SGX extension to put in the PCK leaf.
gt_test_pki *gt_test_pki_new(const uint8_t *sgx_ext, size_t sgx_ext_len);
void gt_test_pki_free(gt_test_pki *pki);
// The root as a gt_x509 (owned by pki).
const gt_x509 *gt_test_pki_root(const gt_test_pki *pki);
// PEM of the TCB signing cert + root.
void gt_test_pki_tcb_chain_pem(const gt_test_pki *pki, gt_buf *out);
// ECDSA P-256 raw r || s over msg by the TCB signing key.
void gt_test_pki_tcb_sign(const gt_test_pki *pki, const void *msg, size_t len, uint8_t sig[64]);
// Rebuilds a v4/v5 quote with the synthetic PCK chain (leaf, CA, root) in its certification
// data and the QE report re-signed by the synthetic PCK leaf; everything else is kept.
void gt_test_pki_rebuild_quote(const gt_test_pki *pki, const gt_intel_quote *q, gt_buf *out);
// A DER CRL (valid 2025-01-01 .. 2026-01-01) by the PCK CA (pck_ca = true) or the root,
// revoking the PCK leaf / the PCK CA when revoke is true.
void gt_test_pki_crl(const gt_test_pki *pki, bool pck_ca, bool revoke, gt_buf *out);

#endif
