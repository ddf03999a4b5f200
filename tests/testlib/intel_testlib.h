// Helpers for the Intel quote tests (test_tdx_quote, test_sgx_quote): compare a parsed quote and
// a verdict with a sample's <evidence>.expected.json, read at test time.
#ifndef GT_INTEL_TESTLIB_H
#define GT_INTEL_TESTLIB_H

#include "testlib.h"

#include "attest/intel_quote.h"

// Loads tests/data/attestation/<rel> as JSON (fails the test if it cannot).
cJSON *gt_test_intel_load_json(const char *rel);
// Compares every field of expected["parsed"] with q (parsed from a buffer of file_len bytes):
// header, v5 body type/size, every body claim by name, signature data, QE report. Fails the test
// on any difference or on a field it does not know. Returns the number of fields compared.
int gt_test_intel_check_parsed(const gt_intel_quote *q, size_t file_len, const cJSON *expected);
// Compares expected["pck"] with the verdict's PCK extension values. Returns fields compared.
int gt_test_intel_check_pck(const gt_intel_verdict *v, const cJSON *expected);
// Loads a PEM file of certificates under tests/data/attestation/ (fails the test if it cannot).
void gt_test_intel_load_certs(const char *rel, gt_x509 ***certs, size_t *count);
void gt_test_intel_free_certs(gt_x509 **certs, size_t count);
// Seconds since the epoch of "YYYY-MM-DDTHH:MM:SSZ".
int64_t gt_test_intel_time(const char *iso);
// Prints the verdict's reasons (on a test failure).
void gt_test_intel_print_verdict(const gt_intel_verdict *v);

#endif
