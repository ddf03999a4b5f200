// Sealing and virtual-QE costs (issue 15's "sealing throughput vs one AES-GCM pass"): for each
// plaintext size, the median of 5 runs of gt_sgx_seal, gt_sgx_unseal, and one gt_aead_seal pass
// over the same bytes with a fixed key (the floor: what sealing adds is EGETKEY's CMAC, HKDF and
// copies), side by side in one run; then a vsgx quote (one ECDSA P-256 signature) and its full
// appraisal (quote, QE report, sim host evidence: insecure-simulation). One core.
//   bench_sealing [MiB ...]   (default 1 16 64)
#include <gputravel/enclave.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNS 5
#define QUOTE_RUNS 50

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

static gt_err seal_row(const gt_sgx_platform *pf, const gt_sgx_secs_identity *app, size_t len)
{
    uint8_t *pt = malloc(len), *ct = malloc(len + GT_AEAD_TAG_BYTES);
    uint8_t key[GT_AEAD_KEY_BYTES] = {1}, iv[GT_AEAD_IV_BYTES] = {2};
    GT_ENSURE(pt != NULL && ct != NULL, GT_E_NOMEM, "bench: out of memory");
    memset(pt, 0x5a, len);
    double ts[RUNS], tu[RUNS], ta[RUNS];
    gt_sgx_seal_params p = {.keypolicy = GT_SGX_KEYPOLICY_MRSIGNER};
    gt_err e = GT_OK;
    // Output buffers reused across runs, as the AES-GCM pass's is: page faults are not crypto.
    gt_buf blob = {0}, back = {0};
    for (int r = 0; r < RUNS && gt_is_ok(e); r++) {
        size_t n = 0;
        blob.len = 0;
        double t0 = gt_now_seconds();
        e = gt_sgx_seal(&blob, pf, app, &p, pt, len, NULL, 0);
        double t1 = gt_now_seconds();
        if (gt_is_ok(e)) {
            e = gt_sgx_unseal(&back, NULL, pf, app, blob.data, blob.len);
        }
        double t2 = gt_now_seconds();
        if (gt_is_ok(e)) {
            e = gt_aead_seal(ct, len + GT_AEAD_TAG_BYTES, &n, pt, len, NULL, 0, iv, key);
        }
        double t3 = gt_now_seconds();
        iv[0]++;
        ts[r] = t1 - t0, tu[r] = t2 - t1, ta[r] = t3 - t2;
    }
    gt_buf_free_nowipe(&blob);
    gt_buf_free(&back);
    if (gt_is_ok(e)) {
        double s = median(ts, RUNS), u = median(tu, RUNS), a = median(ta, RUNS);
        printf("| %zu MiB | %.2f | %.0f | %.2f | %.0f | %.2f | %.0f | %.2f |\n", len >> 20,
               1e3 * s, len / s / 1e6, 1e3 * u, len / u / 1e6, 1e3 * a, len / a / 1e6, s / a);
    }
    free(pt);
    free(ct);
    return e;
}

static gt_err quote_rows(const char *dir, const gt_sgx_platform *pf, const char *root)
{
    gt_collect_params host = {.type = GT_TEE_SIM, .sim_root = root};
    gt_vqe *q = NULL;
    GT_TRY(gt_vqe_open(&q, dir, pf, &host));
    char pub[4300];
    snprintf(pub, sizeof pub, "%s/root-pub.pem", root);
    gt_attest_file rf = {.path = pub};
    gt_policy *pol = NULL;
    gt_err e = gt_policy_parse(&pol, "{\"allow_simulation\": true}", 26);
    gt_appraise_params prm = {.roots = &rf, .root_count = 1};
    gt_sgx_identity id = {.isvprodid = 1, .attributes = {GT_SGX_ATTR_INIT, 3}};
    uint8_t rd[GT_REPORT_DATA_BYTES] = {0};
    double tq[QUOTE_RUNS], tv[QUOTE_RUNS];
    for (int r = 0; r < QUOTE_RUNS && gt_is_ok(e); r++) {
        gt_evidence ev;
        gt_appraisal a;
        double t0 = gt_now_seconds();
        e = gt_vqe_quote(q, &id, rd, &ev);
        double t1 = gt_now_seconds();
        if (gt_is_ok(e)) {
            e = gt_attest_appraise(&a, &ev, pol, &prm);
            if (gt_is_ok(e) && a.verdict != GT_VERDICT_ACCEPTED) {
                e = gt_errf(GT_E_STATE, "bench: quote not accepted: %s", a.reasons[0]);
            }
            gt_appraisal_free(&a);
            gt_evidence_free(&ev);
        }
        tq[r] = t1 - t0, tv[r] = gt_now_seconds() - t1;
    }
    if (gt_is_ok(e)) {
        printf("\n| vsgx (sim host, insecure-simulation) | median of %d |\n|---|---|\n"
               "| quote (one P-256 signature) | %.3f ms |\n| appraise (both levels) | %.3f ms |\n",
               QUOTE_RUNS, 1e3 * median(tq, QUOTE_RUNS), 1e3 * median(tv, QUOTE_RUNS));
    }
    gt_policy_free(pol);
    gt_vqe_free(q);
    return e;
}

int main(int argc, char **argv)
{
    size_t mib[8] = {1, 16, 64};
    int count = 3;
    if (argc > 1) {
        count = 0;
        for (int i = 1; i < argc && count < 8; i++) {
            long v = strtol(argv[i], NULL, 10);
            if (v < 1 || v > 64) {
                fprintf(stderr, "usage: bench_sealing [MiB 1..64 ...]\n");
                return 64;
            }
            mib[count++] = (size_t)v;
        }
    }
    char dir[] = "/tmp/bench_sealing.XXXXXX", root[4200];
    if (mkdtemp(dir) == NULL) {
        return 1;
    }
    snprintf(root, sizeof root, "%s/sim-root", dir);
    gt_sgx_platform pf;
    gt_sgx_platform_options o = {.host = GT_TEE_SIM, .sim_root = root};
    gt_sgx_secs_identity app = {.isvsvn = 1, .attributes = {GT_SGX_ATTR_INIT, 3}};
    gt_err e = gt_sgx_platform_open(dir, &o, &pf, NULL);
    printf("| plaintext | seal ms | MB/s | unseal ms | MB/s | one AES-256-GCM pass ms | MB/s | "
           "seal / AES-GCM |\n|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; gt_is_ok(e) && i < count; i++) {
        e = seal_row(&pf, &app, mib[i] << 20);
    }
    if (gt_is_ok(e)) {
        e = quote_rows(dir, &pf, root);
    }
    if (!gt_is_ok(gt_rmtree_below(dir, "/tmp"))) {
        fprintf(stderr, "bench_sealing: could not remove %s\n", dir);
    }
    if (!gt_is_ok(e)) {
        fprintf(stderr, "bench_sealing: %s\n", e.msg);
        return 1;
    }
    return 0;
}
