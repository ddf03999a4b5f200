// SGX enclave identity costs (issue 15's "EINIT time for a 1 MiB and a 64 MiB enclave"): for an
// SGXS image of each size (page 0 TCS, every other page REG RW, all measured), the median of 5
// runs of measuring it (MRENCLAVE), signing its SIGSTRUCT, and EINIT's checks, and their sum: the
// time from image to a launched identity. One core.
// Then the running enclave (issue 15's "ECALL + OCALL round trip in cycles", INSECURE SIMULATION:
// the enclave is a process, ENCLU is emulated on #UD): the build's example enclave started in its
// enclave process, and the median of ROUNDS round trips of an ECALL alone and of an ECALL that
// makes one OCALL, in ns and in TSC cycles (median, 10th percentile, minimum), for three paths
// side by side in one run: the shared-memory ring with EEXIT rewritten (the default), the ring
// with a SIGILL per EEXIT (the signal's share) and the old socket path. The ring's receivers
// spin before they sleep: GPUTRAVEL_ENCLAVE_RING_SPIN=CYCLES sets how long (0: sleep at once).
// Both unpinned and pinned (this process on CPU 0, the enclave processes on CPU 1).
//   bench_enclave [SIGNER.pem]   (default: the test data's RSA-3072 e=3 key, run from the repo)
#include <gputravel/enclave.h>

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <x86intrin.h>

#define ROUNDS 2000

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

static gt_err echo_ocall(void *ctx, uint64_t number, const uint8_t *in, size_t in_len,
                         gt_buf *reply, int64_t *status)
{
    (void)ctx, (void)number;
    *status = 0;
    return gt_buf_append(reply, in, in_len);
}

static gt_err read_example(const char *ext, gt_buf *out)
{
    char self[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    GT_ENSURE(n > 0, GT_E_IO, "cannot find this executable");
    self[n] = '\0';
    *strrchr(self, '/') = '\0';
    snprintf(path, sizeof path, "%s/enclaves/example.%s", self, ext);
    return gt_file_read_all(path, GT_ENCLAVE_IMAGE_MAX_BYTES, out);
}

// The three ways to run it, measured in blocks that take turns (A/B/C, so load that comes and
// goes hits all three alike; blocks, not single calls, so that a ring side is found spinning
// as in a steady stream of ECALLs).
enum { PATH_RING, PATH_RING_TRAP, PATH_SOCKET, PATHS };
static const char *const path_name[PATHS] = {
    "shared-memory ring, EEXIT rewritten (default)", "shared-memory ring, a SIGILL per EEXIT",
    "socket, a SIGILL per EEXIT (the old path)"};
#define BLOCK 100
#define BLOCKS (ROUNDS / BLOCK)

typedef struct {
    double ns[2][BLOCKS * BLOCK], cy[2][BLOCKS * BLOCK];
} samples;

static gt_err one_block(gt_enclave *e, samples *sm, int kind, int block)
{
    uint8_t in[16] = {1, 2, 3};
    gt_buf out = {0};
    int64_t status = 0;
    gt_err err = GT_OK;
    for (int r = 0; r < BLOCK && gt_is_ok(err); r++) {
        double t0 = gt_now_seconds();
        uint64_t c0 = __rdtsc();
        err = gt_enclave_ecall(e, kind == 0 ? 0 : 2, in, sizeof in, &out, &status);  // add; OCALL
        uint64_t c1 = __rdtsc();
        double t1 = gt_now_seconds();
        if (gt_is_ok(err) && status < 0) {
            err = gt_errf(GT_E_STATE, "ECALL: status %lld", (long long)status);
        }
        sm->ns[kind][block * BLOCK + r] = 1e9 * (t1 - t0);
        sm->cy[kind][block * BLOCK + r] = (double)(c1 - c0);
    }
    gt_buf_free(&out);
    return err;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[(int)(p * (n - 1))];
}

static gt_err start_path(gt_enclave **e, const gt_enclave_spec *spec, int path)
{
    setenv("GPUTRAVEL_ENCLAVE_CHANNEL", path == PATH_SOCKET ? "socket" : "ring", 1);
    setenv("GPUTRAVEL_ENCLAVE_EEXIT", path == PATH_RING ? "rewrite" : "trap", 1);
    gt_err err = gt_enclave_start(e, spec);
    unsetenv("GPUTRAVEL_ENCLAVE_CHANNEL");
    unsetenv("GPUTRAVEL_ENCLAVE_EEXIT");
    return err;
}

// Pinned: this process on CPU 0, every enclave process on CPU 1: the enclave with a core of
// its own, as an enclave VM has its own vCPU (the ring's spin-hit case). Unpinned: wherever the
// scheduler puts them (on this shared 2-core machine: often the same CPU, the futex path).
static void pin(gt_enclave *const *encl, bool pinned)
{
    cpu_set_t c;
    CPU_ZERO(&c);
    if (!pinned) {
        for (int i = 0; i < CPU_SETSIZE && i < 1024; i++) {
            CPU_SET(i, &c);
        }
    } else {
        CPU_SET(0, &c);
    }
    int ignored = sched_setaffinity(0, sizeof c, &c);
    CPU_ZERO(&c);
    CPU_SET(1, &c);
    for (int p = 0; p < PATHS && pinned; p++) {
        ignored = sched_setaffinity(gt_enclave_pid(encl[p]), sizeof c, &c);
    }
    (void)ignored;
}

static int bench_run(bool pinned)
{
    gt_buf image = {0}, sig = {0};
    gt_err e = read_example("bin", &image);
    if (gt_is_ok(e)) {
        e = read_example("sig", &sig);
    }
    gt_sgx_platform pf;
    memset(&pf, 0x5a, sizeof pf);
    gt_enclave_spec spec = {.image = image.data, .image_len = image.len, .sigstruct = sig.data,
                            .platform = &pf, .ocall = echo_ocall};
    gt_enclave *encl[PATHS] = {NULL};
    double start_ms = 0;
    for (int p = 0; p < PATHS && gt_is_ok(e); p++) {
        double t0 = gt_now_seconds();
        e = start_path(&encl[p], &spec, p);
        start_ms = p == PATH_RING ? 1e3 * (gt_now_seconds() - t0) : start_ms;
    }
    static samples sm[PATHS];
    if (gt_is_ok(e)) {
        pin(encl, pinned);
    }
    for (int b = 0; b < BLOCKS && gt_is_ok(e); b++) {
        for (int k = 0; k < 2 && gt_is_ok(e); k++) {
            for (int p = 0; p < PATHS && gt_is_ok(e); p++) {
                e = one_block(encl[p], &sm[p], k, b);
            }
        }
    }
    for (int p = 0; p < PATHS; p++) {
        gt_enclave_stop(encl[p]);
    }
    pin(encl, false);
    gt_buf_free(&image);
    gt_buf_free(&sig);
    if (!gt_is_ok(e)) {
        fprintf(stderr, "bench_enclave: running the example enclave: %s\n", e.msg);
        return 1;
    }
    const int n = BLOCKS * BLOCK;
    printf("\nRunning the example enclave, %s (insecure-simulation: an enclave process, ENCLU "
           "emulated on #UD; %d round trips of each kind per path, in blocks of %d taking turns; "
           "start = fork/exec + load + measure + EINIT + session + ring: %.1f ms)\n\n"
           "| path | round trip | median ns | median TSC cycles | p10 cycles | min cycles | "
           "goal |\n|---|---|---|---|---|---|---|\n",
           pinned ? "pinned (this process on CPU 0, the enclave processes on CPU 1)"
                  : "unpinned (where the scheduler puts them)",
           n, BLOCK, start_ms);
    for (int p = 0; p < PATHS; p++) {
        for (int k = 0; k < 2; k++) {
            double mn = pct(sm[p].ns[k], n, 0.5), mc = pct(sm[p].cy[k], n, 0.5);
            printf("| %s | %s | %.0f | %.0f | %.0f | %.0f | %s |\n", path_name[p],
                   k == 0 ? "ECALL" : "ECALL + OCALL", mn, mc, pct(sm[p].cy[k], n, 0.1),
                   pct(sm[p].cy[k], n, 0.0), k == 0 ? "" : "<= 15000");
        }
    }
    return 0;
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
    int rc = bench_run(false);
    return rc != 0 ? rc : bench_run(sysconf(_SC_NPROCESSORS_ONLN) >= 2);
}
