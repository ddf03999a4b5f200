// SGX enclave identity costs (issue 15's "EINIT time for a 1 MiB and a 64 MiB enclave"): for an
// SGXS image of each size (page 0 TCS, every other page REG RW, all measured), the median of 5
// runs of measuring it (MRENCLAVE), signing its SIGSTRUCT, and EINIT's checks, and their sum: the
// time from image to a launched identity. One core.
//   bench_enclave [SIGNER.pem]   (default: the test data's RSA-3072 e=3 key, run from the repo)
#include <gputravel/enclave.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNS 5

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v)
{
    qsort(v, RUNS, sizeof *v, cmp);
    return v[RUNS / 2];
}

// An SGXS stream of `pages` pages: ECREATE, then per page EADD and 16 EEXTENDs with data.
static uint8_t *make_sgxs(size_t pages, size_t *len)
{
    size_t n = 64 + pages * (64 + 16 * (64 + 256));
    uint8_t *s = calloc(1, n), *p = s;
    if (s == NULL) {
        return NULL;
    }
    uint64_t size = 2 * GT_SGX_PAGE_BYTES;
    while (size < pages * (uint64_t)GT_SGX_PAGE_BYTES) {
        size <<= 1;
    }
    memcpy(p, "ECREATE", 8);
    gt_store_u32le(p + 8, 1);
    gt_store_u64le(p + 12, size);
    p += 64;
    for (size_t i = 0; i < pages; i++) {
        uint64_t off = (uint64_t)i * GT_SGX_PAGE_BYTES;
        memcpy(p, "EADD", 4);
        gt_store_u64le(p + 8, off);
        gt_store_u64le(p + 16, i == 0 ? GT_SGX_SECINFO_TCS
                                      : GT_SGX_SECINFO_REG | GT_SGX_SECINFO_R | GT_SGX_SECINFO_W);
        p += 64;
        for (size_t c = 0; c < 16; c++) {
            memcpy(p, "EEXTEND", 8);
            gt_store_u64le(p + 8, off + 256 * c);
            p += 64;
            for (size_t b = 0; b < 256; b++) {
                p[b] = (uint8_t)(i * 31 + c * 7 + b);
            }
            p += 256;
        }
    }
    *len = n;
    return s;
}

int main(int argc, char **argv)
{
    const char *key_path = argc > 1 ? argv[1] : "tests/testdata/sgx-enclave/enarx_encl.pem";
    gt_pkey *key = NULL;
    gt_err e = gt_pkey_load_pem(&key, key_path, true);
    if (!gt_is_ok(e)) {
        fprintf(stderr, "bench_enclave: %s (give an RSA-3072 e=3 key: openssl genrsa -3 3072)\n",
                e.msg);
        return 1;
    }
    printf("| enclave | SGXS bytes | measure ms | MB/s | sign ms | EINIT checks ms | image to "
           "identity ms |\n|---|---|---|---|---|---|---|\n");
    const size_t mib[] = {1, 64};
    for (size_t k = 0; k < 2; k++) {
        size_t pages = mib[k] * 256, len = 0;
        uint8_t *s = make_sgxs(pages, &len);
        if (s == NULL) {
            return 1;
        }
        double tm[RUNS], ts[RUNS], te[RUNS];
        for (int r = 0; r < RUNS; r++) {
            gt_sgx_measurement m;
            gt_sgx_sign_params p;
            gt_sgx_sigstruct sig;
            gt_sgx_identity id;
            double t0 = gt_now_seconds();
            e = gt_sgx_measure_sgxs(s, len, &m);
            double t1 = gt_now_seconds();
            gt_sgx_sign_params_default(&p, 0);
            memcpy(p.enclavehash, m.mrenclave, sizeof p.enclavehash);
            if (gt_is_ok(e)) {
                e = gt_sgx_sigstruct_sign(&sig, &p, key);
            }
            double t2 = gt_now_seconds();
            gt_sgx_einit_params ep = {.mrenclave = m.mrenclave, .secs_attributes = sig.attributes};
            if (gt_is_ok(e)) {
                e = gt_enclave_einit_check(&sig, &ep, &id);
            }
            double t3 = gt_now_seconds();
            if (!gt_is_ok(e)) {
                fprintf(stderr, "bench_enclave: %s\n", e.msg);
                return 1;
            }
            tm[r] = t1 - t0;
            ts[r] = t2 - t1;
            te[r] = t3 - t2;
        }
        double m = median(tm), sg = median(ts), ei = median(te);
        printf("| %zu MiB | %zu | %.2f | %.0f | %.2f | %.3f | %.2f |\n", mib[k], len, 1e3 * m,
               len / m / 1e6, 1e3 * sg, 1e3 * ei, 1e3 * (m + ei));
        free(s);
    }
    gt_pkey_free(key);
    return 0;
}
