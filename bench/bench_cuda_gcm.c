// Key-release variant of GPU travelling: a sealed chunk's ciphertext goes to the GPU unchanged
// and is opened there (AES-256-GCM, tag checked before the CTR pass). Compares, per chunk size,
// the host->device copy, the GPU open and OpenSSL's open on the host (one thread).
//   bench_cuda_gcm [MiB ...]   (default 64 512)
// Built in every configuration; without GPUTRAVEL_CUDA it says so and exits 0.
#include <gputravel/crypto.h>
#include <gputravel/device.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef GT_HAVE_CUDA
#include <gputravel/device_cuda.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define CHECK(expr)                                                                 \
    do {                                                                            \
        gt_err e_ = (expr);                                                         \
        if (e_.code != GT_E_NONE) {                                                 \
            fprintf(stderr, "bench_cuda_gcm: %s: %s\n", #expr, e_.msg);             \
            return 1;                                                               \
        }                                                                           \
    } while (0)

static int one(gt_device *dev, size_t mib)
{
    size_t n = mib << 20;
    uint8_t key[32], iv[12], aad[24];
    CHECK(gt_random_bytes(key, sizeof key));
    CHECK(gt_random_bytes(iv, sizeof iv));
    CHECK(gt_random_bytes(aad, sizeof aad));
    uint8_t *pt = malloc(n), *ct = malloc(n + 16), *back = malloc(n);
    if (pt == NULL || ct == NULL || back == NULL) {
        fprintf(stderr, "bench_cuda_gcm: out of memory for %zu MiB\n", mib);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        pt[i] = (uint8_t)(i * 131u + 7u);
    }
    size_t ct_len = 0;
    CHECK(gt_aead_seal(ct, n + 16, &ct_len, pt, n, aad, sizeof aad, iv, key));
    gt_dbuf dct = 0, dpt = 0;
    CHECK(gt_device_alloc(dev, n, 0, &dct));
    CHECK(gt_device_alloc(dev, n, GT_DBUF_NO_READBACK, &dpt));  // the open requires it
    double h2d[3], gpu[3], cpu[3];
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        CHECK(gt_device_copy_in(dev, dct, 0, ct, n));
        double t1 = now();
        CHECK(gt_device_cuda_aes_gcm_open(dev, dpt, dct, n, aad, sizeof aad, iv, ct + n, key));
        CHECK(gt_device_sync(dev));
        double t2 = now();
        size_t got = 0;
        CHECK(gt_aead_open(back, n, &got, ct, n + 16, aad, sizeof aad, iv, key));
        double t3 = now();
        h2d[r] = t1 - t0;
        gpu[r] = t2 - t1;
        cpu[r] = t3 - t2;
    }
    CHECK(gt_device_inproc_read(dev, back, dpt, 0, n));  // NO_READBACK: the trusted read
    int same = memcmp(back, pt, n) == 0;
    qsort(h2d, 3, sizeof(double), cmp_double);
    qsort(gpu, 3, sizeof(double), cmp_double);
    qsort(cpu, 3, sizeof(double), cmp_double);
    double gb = (double)n / 1e9;
    printf("| %zu | %.2f | %.2f | %.2f | %s |\n", mib, gb / h2d[1], gb / gpu[1], gb / cpu[1],
           same ? "yes" : "NO");
    CHECK(gt_device_free(dev, dct));
    CHECK(gt_device_free(dev, dpt));
    free(pt);
    free(ct);
    free(back);
    return same ? 0 : 1;
}

int main(int argc, char **argv)
{
    gt_device_config cfg = {.kind = GT_DEVICE_CUDA};
    gt_device *dev = NULL;
    CHECK(gt_device_open(&dev, &cfg));
    printf("| MiB | host->GPU copy GB/s | GPU GCM open GB/s | OpenSSL open GB/s (1 core) | "
           "GPU plaintext = original |\n| --- | --- | --- | --- | --- |\n");
    int rc = 0;
    if (argc > 1) {
        for (int i = 1; i < argc && rc == 0; i++) {
            rc = one(dev, (size_t)strtoul(argv[i], NULL, 10));
        }
    } else {
        rc = one(dev, 64);
        if (rc == 0) {
            rc = one(dev, 512);
        }
    }
    gt_device_close(dev);
    return rc;
}
#else
int main(void)
{
    printf("bench_cuda_gcm: built without GPUTRAVEL_CUDA; nothing to measure\n");
    return 0;
}
#endif
