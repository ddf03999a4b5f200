// End-to-end appraisal cost through the framework (gt_attest_appraise_bytes: detection, the
// per-type verifier with the caller's files, policy), side by side for sim evidence and one
// sample of each hardware type; plus sim collection (SHA-384 of the executable + signing).
// Usage: bench_attest_appraise [tests/testdata/attestation]   (run from the source root)
#include <gputravel/attest.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void load(gt_attest_file *f, gt_buf *b, const char *dir, const char *name)
{
    static char paths[16][1024];
    static int n;
    snprintf(paths[n], sizeof paths[n], "%s/%s", dir, name);
    if (!gt_is_ok(gt_file_read_all(paths[n], 4u << 20, b))) {
        fprintf(stderr, "cannot read %s\n", paths[n]);
        exit(1);
    }
    *f = (gt_attest_file){.path = paths[n], .data = gt_buf_span(b)};
    n++;
}

static double per_op_ms(const gt_buf *ev, const gt_policy *pol, const gt_appraise_params *p,
                        int iters, gt_verdict *verdict)
{
    double t0 = gt_now_seconds();
    for (int i = 0; i < iters; i++) {
        gt_appraisal a;
        if (!gt_is_ok(gt_attest_appraise_bytes(&a, ev->data, ev->len, GT_TEE_AUTO, pol, p))) {
            exit(1);
        }
        *verdict = a.verdict;
        gt_appraisal_free(&a);
    }
    return (gt_now_seconds() - t0) * 1e3 / iters;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/testdata/attestation";
    gt_log_set_level(GT_LOG_ERROR);
    char tmp[] = "/tmp/gt-bench-sim-XXXXXX";
    if (mkdtemp(tmp) == NULL) {
        return 1;
    }
    // sim: collect (measure + sign) and appraise.
    uint8_t rd[GT_REPORT_DATA_BYTES] = {1};
    gt_collect_params cp = {.type = GT_TEE_SIM, .sim_root = tmp};
    gt_evidence ev = {0};
    gt_buf sim = {0}, pub = {0};
    int iters = 50;
    double t0 = gt_now_seconds();
    for (int i = 0; i < iters; i++) {
        gt_evidence_free(&ev);
        if (!gt_is_ok(gt_attest_collect(&ev, &cp, rd))) {
            return 1;
        }
    }
    double collect_ms = (gt_now_seconds() - t0) * 1e3 / iters;
    if (!gt_is_ok(gt_evidence_encode(&ev, &sim))) {
        return 1;
    }
    gt_attest_file sim_root;
    char pub_path[1100];
    snprintf(pub_path, sizeof pub_path, "%s", tmp);
    load(&sim_root, &pub, pub_path, "root-pub.pem");
    gt_policy *allow = NULL;
    static const char pol[] = "{\"allow_simulation\": true}";
    if (!gt_is_ok(gt_policy_parse(&allow, pol, strlen(pol)))) {
        return 1;
    }

    gt_buf b[12] = {{0}};
    gt_attest_file intel_root, tdx_coll, snp_vek, snp_ca, nv_chain, nv_root;
    gt_buf tdx_ev = {0}, snp_ev = {0}, nv_ev = {0};
    gt_attest_file dummy;
    load(&dummy, &tdx_ev, dir, "tdx/dcap-qvl_tdx_quote");
    load(&intel_root, &b[0], dir, "tdx/intel_sgx_root_ca.pem");
    load(&tdx_coll, &b[1], dir, "tdx/dcap-qvl_tdx_quote_collateral.json");
    load(&dummy, &snp_ev, dir, "snp/go-sev-guest_attestation.bin");
    load(&snp_vek, &b[2], dir, "snp/go-sev-guest_vcek.der");
    load(&snp_ca, &b[3], dir, "snp/amd_milan_ask_ark.pem");
    load(&dummy, &nv_ev, dir, "nvgpu/nvtrust_hopperAttestationReport.bin");
    load(&nv_chain, &b[4], dir, "nvgpu/nvtrust_hopperCertChain.pem");
    load(&nv_root, &b[5], dir, "nvgpu/nvidia_device_identity_ca.pem");

    gt_appraise_params psim = {.roots = &sim_root, .root_count = 1, .expected_report_data = rd};
    gt_appraise_params ptdx = {.roots = &intel_root, .root_count = 1, .at = 1751328000};
    gt_appraise_params ptdxc = ptdx;
    ptdxc.collateral = &tdx_coll;
    ptdxc.collateral_count = 1;
    gt_appraise_params psnp = {.roots = &snp_ca, .root_count = 1, .certs = &snp_vek,
                               .cert_count = 1};
    gt_appraise_params pnv = {.roots = &nv_root, .root_count = 1, .certs = &nv_chain,
                              .cert_count = 1};
    struct {
        const char *name;
        const gt_buf *ev;
        const gt_appraise_params *p;
        const gt_policy *pol;
    } rows[] = {
        {"sim (P-384, root from PEM file)", &sim, &psim, allow},
        {"tdx v4, quote + PCK chain", &tdx_ev, &ptdx, NULL},
        {"tdx v4, + dcap-qvl collateral", &tdx_ev, &ptdxc, NULL},
        {"snp v2, VCEK + ASK/ARK", &snp_ev, &psnp, NULL},
        {"nvgpu SPDM, 5-cert chain", &nv_ev, &pnv, NULL},
    };
    printf("%-34s %10s %10s\n", "appraisal (gt_attest_appraise_bytes)", "ms/op", "verdict");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        gt_verdict v = GT_VERDICT_INVALID;
        double ms = per_op_ms(rows[i].ev, rows[i].pol, rows[i].p, 50, &v);
        printf("%-34s %10.3f %10s\n", rows[i].name, ms, gt_verdict_name(v));
    }
    printf("%-34s %10.3f\n", "sim collect (SHA-384 exe + sign)", collect_ms);
    gt_evidence_free(&ev);
    gt_policy_free(allow);
    char f[1200];
    snprintf(f, sizeof f, "%s/root-key.pem", tmp);
    unlink(f);
    snprintf(f, sizeof f, "%s/root-pub.pem", tmp);
    unlink(f);
    rmdir(tmp);
    return 0;
}
