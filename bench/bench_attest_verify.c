// Attestation verification costs, side by side: parsing an SEV-SNP report and an NVIDIA SPDM
// evidence, their signature checks with a raw public key (point decoded per call) and with a key
// parsed once, and the full verdict (chain + signature + extension checks).
// Usage: bench_attest_verify [tests/testdata/attestation]   (run from the source root)
#include "attest/nvgpu_evidence.h"
#include "attest/snp_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static gt_x509 **load_certs(const char *dir, const char *file, size_t *count)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    gt_buf b = {0};
    gt_x509 **certs = NULL;
    if (!gt_is_ok(gt_file_read_all(path, 1 << 20, &b))) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    size_t n = strlen(file);
    if (n > 4 && strcmp(file + n - 4, ".der") == 0) {
        certs = calloc(1, sizeof *certs);
        *count = 1;
        if (certs == NULL || !gt_is_ok(gt_x509_parse_der(&certs[0], b.data, b.len))) {
            exit(1);
        }
    } else if (!gt_is_ok(gt_x509_parse_pem_all(&certs, count, (const char *)b.data, b.len))) {
        exit(1);
    }
    gt_buf_free_nowipe(&b);
    return certs;
}

static void read_file(const char *dir, const char *file, gt_buf *b)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (!gt_is_ok(gt_file_read_all(path, 1 << 20, b))) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
}

#define ROW(name, iters, stmt)                                                           \
    do {                                                                                 \
        double t0_ = gt_now_seconds();                                                   \
        for (int i_ = 0; i_ < (iters); i_++) {                                           \
            if (!gt_is_ok(stmt)) {                                                       \
                fprintf(stderr, "%s failed\n", name);                                    \
                exit(1);                                                                 \
            }                                                                            \
        }                                                                                \
        double us_ = (gt_now_seconds() - t0_) * 1e6 / (iters);                           \
        printf("| %-45s | %10.1f |\n", name, us_);                                       \
    } while (0)

int main(int argc, char **argv)
{
    const char *root = argc > 1 ? argv[1] : "tests/testdata/attestation";
    char snp_dir[512], nv_dir[512];
    snprintf(snp_dir, sizeof snp_dir, "%s/snp", root);
    snprintf(nv_dir, sizeof nv_dir, "%s/nvgpu", root);

    gt_buf rep_bytes = {0}, ev_bytes = {0};
    read_file(snp_dir, "go-sev-guest_attestation.bin", &rep_bytes);
    read_file(nv_dir, "nvtrust_hopperAttestationReport.bin", &ev_bytes);
    size_t nvek = 0, nca = 0, nchain = 0, nroot = 0;
    gt_x509 **vek = load_certs(snp_dir, "go-sev-guest_vcek.der", &nvek);
    gt_x509 **ca = load_certs(snp_dir, "amd_milan_ask_ark.pem", &nca);
    gt_x509 **chain = load_certs(nv_dir, "nvtrust_hopperCertChain.pem", &nchain);
    gt_x509 **nvroot = load_certs(nv_dir, "nvidia_device_identity_ca.pem", &nroot);

    gt_snp_report rep;
    gt_nvgpu_evidence *ev = malloc(sizeof *ev);
    gt_pkey *vek_key = NULL, *leaf_key = NULL;
    uint8_t vek_xy[96], leaf_xy[96];
    size_t l1 = 0, l2 = 0;
    if (ev == NULL || !gt_is_ok(gt_snp_report_parse(&rep, rep_bytes.data, rep_bytes.len)) ||
        !gt_is_ok(gt_nvgpu_evidence_parse(ev, ev_bytes.data, ev_bytes.len)) ||
        !gt_is_ok(gt_x509_public_key(vek[0], &vek_key)) ||
        !gt_is_ok(gt_x509_public_key(chain[0], &leaf_key)) ||
        !gt_is_ok(gt_pkey_ec_public_xy(vek_key, vek_xy, sizeof vek_xy, &l1)) ||
        !gt_is_ok(gt_pkey_ec_public_xy(leaf_key, leaf_xy, sizeof leaf_xy, &l2))) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    gt_snp_verify_params sp = {
        .vek = vek[0],
        .intermediates = (const gt_x509 *const *)ca,
        .intermediate_count = 1,
        .roots = (const gt_x509 *const *)&ca[1],
        .root_count = 1,
        .at = (int64_t)time(NULL),
    };
    gt_nvgpu_verify_params np = {
        .leaf = chain[0],
        .intermediates = (const gt_x509 *const *)&chain[1],
        .intermediate_count = nchain - 1,
        .roots = (const gt_x509 *const *)nvroot,
        .root_count = 1,
        .at = (int64_t)time(NULL),
        .expected_nonce = ev->nonce,
    };
    gt_snp_verdict sv;
    gt_nvgpu_verdict nv;

    printf("| operation (one sample, single thread)         | us per op  |\n");
    printf("|-----------------------------------------------|-----------:|\n");
    ROW("snp: parse 1184-byte report", 20000,
        gt_snp_report_parse(&rep, rep_bytes.data, rep_bytes.len));
    ROW("snp: signature (x||y key, no chain)", 400,
        gt_snp_report_verify_signature(&rep, vek_xy, l1));
    ROW("snp: full verdict (chain, sig, TCB, chip)", 100, gt_snp_report_verify(&sv, &rep, &sp));
    ROW("nvgpu: parse 4117-byte evidence", 20000,
        gt_nvgpu_evidence_parse(ev, ev_bytes.data, ev_bytes.len));
    ROW("nvgpu: signature (x||y key, no chain)", 400,
        gt_nvgpu_evidence_verify_signature(ev, leaf_xy, l2));
    ROW("nvgpu: full verdict (5-cert chain, sig, FWID)", 100,
        gt_nvgpu_evidence_verify(&nv, ev, &np));
    if (!sv.ok || !nv.ok) {
        fprintf(stderr, "verdicts not ok\n");
        return 1;
    }
    gt_pkey_free(vek_key);
    gt_pkey_free(leaf_key);
    free(ev);
    return 0;
}
