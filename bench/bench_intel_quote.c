// Intel quote verification cost on one core, per step, for a real TDX v4 quote with its full
// collateral (dcap-qvl sample) and an SGX v3 quote: parse, quote signature only, quote + PCK
// chain, everything with collateral. Each row runs for about 0.3 s. Run from the source root
// (reads tests/testdata/attestation/).
#include "attest/intel_quote.h"

#include <stdio.h>
#include <stdlib.h>

typedef enum { STEP_PARSE, STEP_SIG, STEP_CHAIN, STEP_FULL } step;

static double per_op_us(step s, const gt_buf *file, const gt_intel_verify_params *chain_only,
                        const gt_intel_verify_params *full)
{
    double start = gt_now_seconds(), now = start;
    long n = 0;
    while (now - start < 0.3) {
        gt_intel_quote q;
        gt_intel_verdict v;
        if (!gt_is_ok(gt_intel_quote_parse(&q, file->data, file->len))) {
            return -1;
        }
        bool ok = true;
        if (s == STEP_SIG) {
            ok = gt_is_ok(gt_intel_quote_verify_signature(&q));
        } else if (s == STEP_CHAIN) {
            ok = gt_is_ok(gt_intel_quote_verify(&q, chain_only, &v));
        } else if (s == STEP_FULL) {
            ok = gt_is_ok(gt_intel_quote_verify(&q, full, &v));
        }
        if (!ok) {
            return -1;
        }
        n++;
        now = gt_now_seconds();
    }
    return (now - start) / (double)n * 1e6;
}

int main(void)
{
    static const struct { const char *name, *quote, *collateral, *root; int64_t at; } rows[] = {
        {"TDX v4 (dcap-qvl)", "tests/testdata/attestation/tdx/dcap-qvl_tdx_quote",
         "tests/testdata/attestation/tdx/dcap-qvl_tdx_quote_collateral.json",
         "tests/testdata/attestation/tdx/intel_sgx_root_ca.pem", 1751328000},
        {"SGX v3 (dcap-qvl)", "tests/testdata/attestation/sgx/dcap-qvl_sgx_quote",
         "tests/testdata/attestation/sgx/dcap-qvl_sgx_quote_collateral.json",
         "tests/testdata/attestation/sgx/intel_sgx_root_ca.pem", 1751328000},
    };
    static const char *const steps[] = {"parse", "+ quote signature", "+ QE/PCK chain",
                                        "+ collateral, TCB status"};
    printf("%-20s %-26s %12s\n", "quote", "step", "us/quote");
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        gt_buf file = {0}, pem = {0};
        gt_intel_collateral c = {0};
        gt_x509 **roots = NULL;
        size_t nroots = 0;
        if (!gt_is_ok(gt_file_read_all(rows[r].quote, 1 << 20, &file)) ||
            !gt_is_ok(gt_file_read_all(rows[r].root, 1 << 20, &pem)) ||
            !gt_is_ok(gt_x509_parse_pem_all(&roots, &nroots, (const char *)pem.data, pem.len)) ||
            !gt_is_ok(gt_intel_collateral_add_file(&c, GT_INTEL_COLL_DCAP_QVL_JSON,
                                                   rows[r].collateral))) {
            fprintf(stderr, "cannot load %s (run from the source root)\n", rows[r].name);
            return 1;
        }
        gt_intel_verify_params chain = {.roots = (const gt_x509 *const *)roots,
                                        .root_count = nroots, .at = rows[r].at};
        gt_intel_verify_params full = chain;
        full.collateral = &c;
        for (int s = STEP_PARSE; s <= STEP_FULL; s++) {
            double us = per_op_us((step)s, &file, &chain, &full);
            printf("%-20s %-26s %12.1f\n", rows[r].name, steps[s], us);
        }
        gt_intel_collateral_free(&c);
        for (size_t i = 0; i < nroots; i++) {
            gt_x509_free(roots[i]);
        }
        free(roots);
        gt_buf_free_nowipe(&file);
        gt_buf_free_nowipe(&pem);
    }
    return 0;
}
