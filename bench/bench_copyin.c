// bench_copyin: the sim device's encrypted copy_in (and copy_out) throughput against one
// AES-256-GCM encrypt pass + one decrypt pass over the same bytes, measured in the same run
// (target: copy_in >= 0.7x of that baseline). devd runs in a forked child (gt_devd_run) with its
// arena touched once at start; one-time setup (arena, session handshake, alloc) is reported apart
// from per-transfer time. Each size runs REPS times after a warm-up; the median is reported.
//
// usage: bench_copyin [MiB ...]   (default 64 128 256 512)
#include <gputravel/crypto.h>
#include <gputravel/devd.h>
#include <gputravel/device.h>

#include "bench_common.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define REPS 5

static void die(const char *what, gt_err e)
{
    fprintf(stderr, "bench_copyin: %s: %s\n", what, e.msg);
    exit(1);
}

int main(int argc, char **argv)
{
    size_t sizes_mib[16];
    int nsizes = 0;
    size_t max = bench_sizes_mib(argc, argv, sizes_mib, 16, &nsizes);
    size_t max_bytes = max << 20;
    gt_log_set_level(GT_LOG_WARN);
    bench_devd devd;
    if (bench_devd_start(&devd, "bench-copyin",
                         (gt_devd_config){.mem_limit = (uint64_t)max_bytes + (64u << 20),
                                          .max_sessions = 1}) != 0) {
        return 1;
    }
    const char *sock = devd.sock;
    double t_devd = devd.start_s, t0 = 0;

    // host buffers, touched once
    uint8_t *src = malloc(max_bytes), *back = malloc(max_bytes);
    uint8_t *ct = malloc(max_bytes + GT_AEAD_TAG_BYTES), *pt = malloc(max_bytes);
    if (!src || !back || !ct || !pt) {
        fprintf(stderr, "bench_copyin: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < max_bytes; i++) {
        src[i] = (uint8_t)(i * 131 + (i >> 13));
    }
    memset(back, 0, max_bytes);
    memset(ct, 0, max_bytes + GT_AEAD_TAG_BYTES);
    memset(pt, 0, max_bytes);

    t0 = gt_now_seconds();
    gt_device *dev = NULL;
    gt_device_config dc = {.kind = GT_DEVICE_SIM, .socket_path = sock};
    gt_err e = gt_device_open(&dev, &dc);
    if (!gt_is_ok(e)) {
        die("open", e);
    }
    double t_session = gt_now_seconds() - t0;
    t0 = gt_now_seconds();
    gt_dbuf buf = 0;
    e = gt_device_alloc(dev, max_bytes, 0, &buf);
    if (!gt_is_ok(e)) {
        die("alloc", e);
    }
    double t_alloc = gt_now_seconds() - t0;

    printf("one-time setup: devd start (arena %zu MiB reserved+touched, identity) %.3f s; "
           "session (attested handshake + bounce memfd) %.3f s; alloc %.6f s\n",
           max + 64, t_devd, t_session, t_alloc);
    printf("per transfer, median of %d (MB/s = 10^6 bytes/s):\n", REPS);
    printf("%8s | %10s %10s %12s | %12s %12s | %7s %7s\n", "size", "enc MB/s", "dec MB/s",
           "enc+dec MB/s", "copy_in MB/s", "copy_out MB/s", "in/base", "out/base");
    uint8_t key[GT_AEAD_KEY_BYTES], iv[GT_AEAD_IV_BYTES] = {0};
    if (!gt_is_ok(gt_random_bytes(key, sizeof key))) {
        return 1;
    }
    int ok_all = 1;
    for (int s = 0; s < nsizes; s++) {
        size_t n = sizes_mib[s] << 20;
        double te[REPS], td[REPS], tin[REPS], tout[REPS];
        // warm-up of every path
        size_t l = 0;
        if (!gt_is_ok(gt_aead_seal(ct, n + 16, &l, src, n, NULL, 0, iv, key)) ||
            !gt_is_ok(gt_device_copy_in(dev, buf, 0, src, n))) {
            return 1;
        }
        for (int r = 0; r < REPS; r++) {
            iv[11] = (uint8_t)(r + 1);
            double a = gt_now_seconds();
            e = gt_aead_seal(ct, n + 16, &l, src, n, NULL, 0, iv, key);
            double b = gt_now_seconds();
            gt_err e2 = gt_aead_open(pt, n, &l, ct, n + 16, NULL, 0, iv, key);
            double c = gt_now_seconds();
            if (!gt_is_ok(e) || !gt_is_ok(e2)) {
                die("aead baseline", gt_is_ok(e) ? e2 : e);
            }
            te[r] = b - a;
            td[r] = c - b;
            a = gt_now_seconds();
            e = gt_device_copy_in(dev, buf, 0, src, n);
            b = gt_now_seconds();
            e2 = gt_device_copy_out(dev, back, buf, 0, n);
            c = gt_now_seconds();
            if (!gt_is_ok(e) || !gt_is_ok(e2)) {
                die("transfer", gt_is_ok(e) ? e2 : e);
            }
            tin[r] = b - a;
            tout[r] = c - b;
        }
        if (memcmp(src, back, n) != 0 || memcmp(src, pt, n) != 0) {
            fprintf(stderr, "bench_copyin: data mismatch at %zu MiB\n", sizes_mib[s]);
            return 1;
        }
        double me = bench_median(te, REPS), md = bench_median(td, REPS), mi = bench_median(tin, REPS),
               mo = bench_median(tout, REPS);
        double base = (double)n / (me + md) / 1e6;
        double in = (double)n / mi / 1e6, out = (double)n / mo / 1e6;
        printf("%5zu MiB | %10.0f %10.0f %12.0f | %12.0f %12.0f | %6.2fx %6.2fx%s\n",
               sizes_mib[s], (double)n / me / 1e6, (double)n / md / 1e6, base, in, out,
               in / base, out / base, in / base >= 0.7 ? "" : "  (below 0.7x target)");
        ok_all &= in / base >= 0.7;
    }
    gt_device_close(dev);
    bench_devd_stop(&devd, false);
    printf("target copy_in >= 0.7x enc+dec: %s\n", ok_all ? "met" : "NOT met");
    free(src);
    free(back);
    free(ct);
    free(pt);
    return 0;
}
